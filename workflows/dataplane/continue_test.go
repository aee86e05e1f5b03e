package dataplane

import (
	"context"
	"encoding/json"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/activities/signals"
	dataplanev1beta1 "github.com/stackflow/stackflow/api/dataplane/v1beta1"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/workflows/object"
	"github.com/stackflow/stackflow/workflows/object/objecttest"
)

// slowStatusEnv is a test environment whose status writes take a minute, so a run that settled waits a
// while for the write under way (its first) before it continues as new: signals sent then are buffered
// and unread.
func slowStatusEnv(t *testing.T, kind string, fn any, spec any) (*testsuite.TestWorkflowEnvironment, *objecttest.Chain) {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	chain := objecttest.New(env)
	env.RegisterActivity(&kube.Kube{})
	raw, err := json.Marshal(spec)
	require.NoError(t, err)
	env.OnActivity(kubeActs.GetObject, mock.Anything, mock.Anything).Return(
		func(_ context.Context, ref lifecycle.ObjectRef) (*kube.Object, error) {
			if ref.Kind == "OpenStackDataPlaneRole" {
				b, _ := json.Marshal(role(nil, nil).Spec)
				return &kube.Object{Exists: true, Generation: 1, Spec: b}, nil
			}
			return &kube.Object{Exists: true, Generation: 1, Spec: raw}, nil
		})
	env.OnActivity(kubeActs.PatchStatus, mock.Anything, mock.Anything).After(time.Minute).Return(nil)
	env.OnActivity(kubeActs.RemoveFinalizer, mock.Anything, mock.Anything).Return(nil)
	env.RegisterWorkflowWithOptions(fn, workflow.RegisterOptions{Name: kind})
	return env, chain
}

// listNodes answers the data plane's listing of its nodes with *names (read at each call, so a test may
// add nodes), counting the calls in *calls when set: one per reconcile; a listing that asks for
// statuses gets each node's from status.
func listNodes(env *testsuite.TestWorkflowEnvironment, names *[]string, calls *int, status func(context.Context, kube.StatusInput) (*kube.ObjectStatus, error)) {
	env.OnActivity(kubeActs.ListObjects, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in kube.ListInput) ([]kube.ListedObject, error) {
			// A reconcile lists its members once; the polls of running nodes list with pollStatus.
			if calls != nil && (in.Status == nil || !reflect.DeepEqual(*in.Status, pollStatus)) {
				*calls++
			}
			var out []kube.ListedObject
			for _, n := range *names {
				b, _ := json.Marshal(node(n, nil, nil).Spec)
				lo := kube.ListedObject{Ref: DataPlaneNodeRef("openstack", n), Object: kube.Object{Exists: true, Generation: 1, Spec: b}}
				if in.Status != nil {
					st, err := status(ctx, kube.StatusInput{Ref: lo.Ref})
					if err != nil {
						return nil, err
					}
					if st.Exists {
						lo.Status = st
					}
				}
				out = append(out, lo)
			}
			return out, nil
		})
}

// grantBatches answers the data plane's batches of signals (its grants, activities/signals) as signal
// answers each external signal: a target whose signal fails is reported not found.
// It returns the batches' sizes, in order.
func grantBatches(env *testsuite.TestWorkflowEnvironment, signal func(namespace, id, runID, name string, arg any) error) *[]int {
	var sizes []int
	env.RegisterActivity(&signals.Sender{})
	env.OnActivity(signalActs.SignalWorkflows, mock.Anything, mock.Anything).Return(
		func(_ context.Context, b signals.Batch) (signals.Result, error) {
			sizes = append(sizes, len(b.Targets))
			var res signals.Result
			for _, t := range b.Targets {
				if err := signal("", t.WorkflowID, "", b.Signal, b.Arg); err != nil {
					res.NotFound = append(res.NotFound, t.WorkflowID)
				}
			}
			return res, nil
		})
	return &sizes
}

func detail(t *testing.T, chain *objecttest.Chain, into any) {
	t.Helper()
	st, err := chain.Status()
	require.NoError(t, err)
	b, err := json.Marshal(st.Detail)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, into))
}

// A data plane whose node deployed settles and continues as new; a request and a report that reach it
// while its last status write is under way (unread) are in the record the next run carries.
func TestDataPlaneKeepsRequestsAndReportsAcrossContinueAsNew(t *testing.T) {
	spec := dataplanev1beta1.OpenStackDataPlaneSpec{Roles: []string{"compute"}, Deploy: true}
	env, chain := slowStatusEnv(t, "OpenStackDataPlane", OpenStackDataPlaneWorkflow, spec)
	nodes := []string{"n1", "n2"}
	// Both nodes already deployed their generation: nothing to admit, the rollout is done at once.
	listNodes(env, &nodes, nil, func(context.Context, kube.StatusInput) (*kube.ObjectStatus, error) {
		return &kube.ObjectStatus{Exists: true, Generation: 1, ObservedGeneration: 1, Phase: lifecycle.PhaseReady,
			Fields: map[string]json.RawMessage{"deployed": json.RawMessage("true")}}, nil
	})

	env.RegisterDelayedCallback(func() { require.NoError(t, chain.Signal(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})) }, time.Second)
	// The reconcile is done within seconds; the run's first status write runs for a minute.
	env.RegisterDelayedCallback(func() {
		require.Equal(t, 1, chain.Runs(), "still in the first run, writing its status")
		require.NoError(t, chain.Signal(SignalEDPMRequest, EDPMRequest{Node: "n1", Generation: 2}))
		require.NoError(t, chain.Signal(SignalEDPMReport, EDPMReport{Node: "n2", State: EDPMFailed, Phase: 0, Step: StepConfigureOS, Message: "host unreachable"}))
	}, 30*time.Second)
	env.RegisterDelayedCallback(func() {
		require.Equal(t, 2, chain.Runs())
		var rec dataPlaneRecord
		detail(t, chain, &rec)
		byName := map[string]EDPMNode{}
		for _, n := range rec.Nodes {
			byName[n.Name] = n
		}
		require.Equal(t, EDPMPending, byName["n1"].State, "the request survived: %+v", rec.Nodes)
		require.EqualValues(t, 2, byName["n1"].Generation)
		require.Equal(t, EDPMFailed, byName["n2"].State, "the report survived: %+v", rec.Nodes)
		require.Equal(t, StepConfigureOS, byName["n2"].Step)
		require.NoError(t, chain.Signal(lifecycle.SignalDelete, nil))
	}, 10*time.Minute)
	chain.Execute("OpenStackDataPlane", object.Input{ObjectRef: DataPlaneRef("openstack", "edpm")})
	require.NoError(t, env.GetWorkflowError())
}

// A node that does not deploy (deploy false) settles at once; a grant that reaches it while its last
// status write is under way is kept for the next run's admission rather than lost.
func TestNodeKeepsAGrantAcrossContinueAsNew(t *testing.T) {
	n := node("n1", nil, func(n *dataplanev1beta1.OpenStackDataPlaneNode) { n.Spec.Deploy = false })
	env, chain := slowStatusEnv(t, "OpenStackDataPlaneNode", OpenStackDataPlaneNodeWorkflow, n.Spec)
	env.OnActivity(kubeActs.ApplyObject, mock.Anything, mock.Anything).Return("uid-inventory", nil)
	env.OnActivity(kubeActs.DeleteObject, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(kubeActs.ListObjects, mock.Anything, mock.Anything).Return([]kube.ListedObject{}, nil)

	env.RegisterDelayedCallback(func() { require.NoError(t, chain.Signal(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})) }, time.Second)
	env.RegisterDelayedCallback(func() {
		require.Equal(t, 1, chain.Runs())
		require.NoError(t, chain.Signal(SignalEDPMGrant, EDPMGrant{DataPlane: "OpenStackDataPlane/openstack/edpm/1234"}))
	}, 30*time.Second)
	env.RegisterDelayedCallback(func() {
		require.Equal(t, 2, chain.Runs())
		var rec edpmNodeRecord
		detail(t, chain, &rec)
		require.NotNil(t, rec.PendingGrant, "the grant survived")
		require.Equal(t, "OpenStackDataPlane/openstack/edpm/1234", rec.PendingGrant.DataPlane)
		require.NoError(t, chain.Signal(lifecycle.SignalDelete, nil))
	}, 10*time.Minute)
	chain.Execute("OpenStackDataPlaneNode", object.Input{ObjectRef: DataPlaneNodeRef("openstack", "n1")})
	require.NoError(t, env.GetWorkflowError())
}

// Nodes ask their data plane for admission with a request and a refresh (which wakes an idle data plane).
// When both reach a rollout that is running and reads the requests itself, the refresh asks for nothing
// more: the rollout that fails (one node failed) stays failed, not reconciled again at once to fail again
// (its status going Failed, Running, Failed), and one that succeeds is not rolled out twice. A node the
// rollout does not know yet (created while it ran) is read by a second reconcile.
func TestRolloutAnswersTheRefreshesOfNodesItAdmits(t *testing.T) {
	for _, tc := range []struct {
		name       string
		fails      bool
		late       bool
		vanishes   bool
		reconciles int
	}{
		{name: "a failed rollout stays failed", fails: true, reconciles: 1},
		{name: "a finished rollout stays finished", reconciles: 1},
		{name: "a node created during the rollout is admitted by the next", late: true, reconciles: 2},
		{name: "a running node whose object is gone stops counting", vanishes: true, reconciles: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := dataplanev1beta1.OpenStackDataPlaneSpec{Roles: []string{"compute"}, Deploy: true}
			env, chain := slowStatusEnv(t, "OpenStackDataPlane", OpenStackDataPlaneWorkflow, spec)
			names := []string{"n1", "n2"}
			reconciles := 0
			// No node has deployed: the rollout admits both and learns the outcome from their reports.
			gone := false
			listNodes(env, &names, &reconciles, func(_ context.Context, in kube.StatusInput) (*kube.ObjectStatus, error) {
				if gone && in.Ref.Name == "n2" {
					return &kube.ObjectStatus{}, nil
				}
				return &kube.ObjectStatus{Exists: true, Generation: 1, Phase: "Infrastructure"}, nil
			})
			byID := map[string]string{}
			for _, n := range names {
				byID[lifecycle.WorkflowID(DataPlaneNodeRef("openstack", n))] = n
			}
			signalNode := func(_, id, _, signal string, _ any) error {
				n, ok := byID[id]
				if !ok || signal != SignalEDPMGrant {
					return nil
				}
				// As a node does: it asked (request, then refresh) while the rollout ran, deploys, reports.
				env.RegisterDelayedCallback(func() {
					require.NoError(t, chain.Signal(SignalEDPMRequest, EDPMRequest{Node: n, Generation: 1}))
					require.NoError(t, chain.Signal(lifecycle.SignalRefresh, nil))
				}, time.Second)
				if tc.vanishes && n == "n2" {
					// Deleted while it runs, without a word (its worker gone, say): only its object says so.
					env.RegisterDelayedCallback(func() { gone, names = true, []string{"n1"} }, 30*time.Second)
					return nil
				}
				env.RegisterDelayedCallback(func() {
					rep := EDPMReport{Node: n, State: EDPMSucceeded, Message: "every phase done"}
					if tc.fails && n == "n2" {
						rep = EDPMReport{Node: n, State: EDPMFailed, Step: StepConfigureNetwork, Message: "configure-network failed"}
					}
					require.NoError(t, chain.Signal(SignalEDPMReport, rep))
				}, time.Minute)
				return nil
			}
			env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, mock.Anything, mock.Anything, mock.Anything).Return(signalNode)
			grantBatches(env, signalNode)
			env.RegisterDelayedCallback(func() { require.NoError(t, chain.Signal(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})) }, time.Second)
			if tc.late {
				env.RegisterDelayedCallback(func() {
					names = append(names, "n3")
					byID[lifecycle.WorkflowID(DataPlaneNodeRef("openstack", "n3"))] = "n3"
					require.NoError(t, chain.Signal(SignalEDPMRequest, EDPMRequest{Node: "n3", Generation: 1}))
					require.NoError(t, chain.Signal(lifecycle.SignalRefresh, nil))
				}, 30*time.Second)
			}
			env.RegisterDelayedCallback(func() {
				st, err := chain.Status()
				require.NoError(t, err)
				want := lifecycle.PhaseReady
				if tc.fails {
					want = lifecycle.PhaseFailed
				}
				require.Equal(t, want, st.Phase)
				require.Equal(t, tc.reconciles, reconciles, "reconciles: the refreshes of the nodes a rollout admitted ask for no second one")
				require.Equal(t, tc.reconciles+1, chain.Runs(), "each settled run continued as new once; the last waits")
				var rec dataPlaneRecord
				detail(t, chain, &rec)
				require.Len(t, rec.Nodes, len(names))
				require.NoError(t, chain.Signal(lifecycle.SignalDelete, nil))
			}, time.Hour)
			chain.Execute("OpenStackDataPlane", object.Input{ObjectRef: DataPlaneRef("openstack", "edpm")})
			require.NoError(t, env.GetWorkflowError())
		})
	}
}

// A grant resumes only a node that may be paused (its status says Paused): a resume to every node cost
// each a signal and a workflow task at a large rollout's start.
func TestGrantResumesOnlyNodesThatMayBePaused(t *testing.T) {
	spec := dataplanev1beta1.OpenStackDataPlaneSpec{Roles: []string{"compute"}, Deploy: true}
	env, chain := slowStatusEnv(t, "OpenStackDataPlane", OpenStackDataPlaneWorkflow, spec)
	names := []string{"n1", "n2"}
	listNodes(env, &names, nil, func(_ context.Context, in kube.StatusInput) (*kube.ObjectStatus, error) {
		if in.Ref.Name == "n1" {
			// Held at a step by a pause (a cancelled rollout's, say).
			return &kube.ObjectStatus{Exists: true, Generation: 1, Phase: lifecycle.PhasePaused,
				Conditions: []metav1.Condition{{Type: lifecycle.ConditionPaused, Status: metav1.ConditionTrue}}}, nil
		}
		return &kube.ObjectStatus{Exists: true, Generation: 1, Phase: lifecycle.PhasePending}, nil
	})
	byID := map[string]string{}
	for _, n := range names {
		byID[lifecycle.WorkflowID(DataPlaneNodeRef("openstack", n))] = n
	}
	var mu sync.Mutex // the test environment sends each external signal from a goroutine of its own
	sent := map[string][]string{}
	signalNode := func(_, id, _, signal string, _ any) error {
		n := byID[id]
		mu.Lock()
		sent[n] = append(sent[n], signal)
		mu.Unlock()
		if signal == SignalEDPMGrant {
			env.RegisterDelayedCallback(func() {
				require.NoError(t, chain.Signal(SignalEDPMReport, EDPMReport{Node: n, State: EDPMSucceeded, Message: "every phase done"}))
			}, time.Minute)
		}
		return nil
	}
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, mock.Anything, mock.Anything, mock.Anything).Return(
		func(ns, id, run, signal string, arg any) error {
			require.NotEqual(t, SignalEDPMGrant, signal, "grants go out in a batch, not as external signals")
			return signalNode(ns, id, run, signal, arg)
		})
	batches := grantBatches(env, signalNode)
	env.RegisterDelayedCallback(func() { require.NoError(t, chain.Signal(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})) }, time.Second)
	env.RegisterDelayedCallback(func() {
		// Their order is not asserted: the test environment sends them from goroutines, a real server does
		// not order them either, and a node does not depend on it.
		mu.Lock()
		n1, n2, nodes := sent["n1"], sent["n2"], len(sent)
		mu.Unlock()
		require.Equal(t, 2, nodes)
		require.ElementsMatch(t, []string{lifecycle.SignalResume, SignalEDPMGrant}, n1)
		require.Equal(t, []string{SignalEDPMGrant}, n2)
		require.Equal(t, []int{2}, *batches, "both grants in one batch")
		st, err := chain.Status()
		require.NoError(t, err)
		require.Equal(t, lifecycle.PhaseReady, st.Phase)
		var rec dataPlaneRecord
		detail(t, chain, &rec)
		for _, n := range rec.Nodes {
			require.False(t, n.Paused, "a grant's resume is spent: %+v", n)
		}
		require.NoError(t, chain.Signal(lifecycle.SignalDelete, nil))
	}, time.Hour)
	chain.Execute("OpenStackDataPlane", object.Input{ObjectRef: DataPlaneRef("openstack", "edpm")})
	require.NoError(t, env.GetWorkflowError())
}
