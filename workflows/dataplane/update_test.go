package dataplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/activities/ansible"
	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/activities/openstack"
	dp "github.com/stackflow/stackflow/api/dataplane/v1beta1"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/workflows/object"
	"github.com/stackflow/stackflow/workflows/object/objecttest"
)

// fakeComputes is the update's world in memory: compute services, instances, and what each host runs.
type fakeComputes struct {
	mu       sync.Mutex
	disabled map[string]bool     // host → service disabled
	servers  map[string]string   // server → host
	version  map[string]string   // host → version nova-compute reports
	files    map[string]string   // host → version recorded on the host (the checkpoint's view)
	ckpt     map[string]string   // host → version in the checkpoint
	broken   map[string]bool     // host → the update breaks nova-compute there
	steps    map[string][]string // host → playbook steps run
	regions  map[string]bool     // the compute regions Nova was asked in
	events   []string            // everything, in order
	// during is called with each event as it happens.
	during func(event string)
}

func newFakeComputes() *fakeComputes {
	return &fakeComputes{
		disabled: map[string]bool{}, servers: map[string]string{"s1": "ha", "s2": "hb"},
		version: map[string]string{"ha": "1", "hb": "1"}, files: map[string]string{"ha": "1", "hb": "1"},
		ckpt: map[string]string{}, broken: map[string]bool{}, steps: map[string][]string{}, regions: map[string]bool{},
	}
}

func (c *fakeComputes) event(format string, args ...any) {
	e := fmt.Sprintf(format, args...)
	c.events = append(c.events, e)
	if c.during != nil {
		c.during(e)
	}
}

func (c *fakeComputes) on(host string) []string {
	var out []string
	for s, h := range c.servers {
		if h == host {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

func (c *fakeComputes) playbook(_ context.Context, in ansible.PlaybookInput) (*ansible.PlaybookResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.steps[in.Host] = append(c.steps[in.Host], in.Step)
	c.event("%s %s", in.Step, in.Host)
	res := &ansible.PlaybookResult{Host: in.Host, Step: in.Step, Finished: time.Unix(1000, 0), PlaybooksVersion: "abc"}
	switch in.Playbook {
	case PlaybookNovaCheckpoint:
		if _, ok := c.ckpt[in.Host]; !ok {
			c.ckpt[in.Host] = c.files[in.Host]
		}
		res.Outputs = map[string]string{"version": c.ckpt[in.Host]}
	case PlaybookNovaUpdate:
		var v string
		_ = json.Unmarshal(in.ExtraVars["stackflow_nova_version"], &v)
		c.files[in.Host] = v
		if c.broken[in.Host] {
			c.version[in.Host] = "" // nova-compute does not come up
			return nil, temporal.NewNonRetryableApplicationError("host "+in.Host+": nova-compute exited at start", ansible.ErrPlaybookFailed, nil)
		}
		c.version[in.Host] = v
	case PlaybookNovaRollback:
		c.files[in.Host] = c.ckpt[in.Host]
		c.version[in.Host] = c.ckpt[in.Host]
		res.Outputs = map[string]string{"version": c.ckpt[in.Host]}
	}
	return res, nil
}

func (c *fakeComputes) nodeState(_ context.Context, in openstack.ComputeHostInput) (*openstack.ComputeNodeState, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.regions[in.Cloud.ComputeRegion] = true
	st := &openstack.ComputeNodeState{Status: "enabled", State: "up", Servers: c.on(in.Host)}
	if c.disabled[in.Host] {
		st.Status = "disabled"
	}
	return st, nil
}

func (c *fakeComputes) setService(_ context.Context, in openstack.ServiceStateInput) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.regions[in.Cloud.ComputeRegion] = true
	if c.disabled[in.Host] == !in.Enabled {
		return c.on(in.Host), nil
	}
	c.disabled[in.Host] = !in.Enabled
	c.event("enabled=%v %s", in.Enabled, in.Host)
	return c.on(in.Host), nil
}

func (c *fakeComputes) migrate(_ context.Context, in openstack.MigrateInput) (*openstack.MigrateResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.regions[in.Cloud.ComputeRegion] = true
	res := &openstack.MigrateResult{Moved: map[string]string{}}
	ids := in.Servers
	if in.From != "" {
		ids = c.on(in.From)
	}
	for i, id := range ids {
		to := in.Targets[i%len(in.Targets)]
		if c.disabled[to] {
			return nil, temporal.NewNonRetryableApplicationError("target "+to+" is disabled", openstack.ErrDrainFailed, nil)
		}
		if c.servers[id] != to {
			c.servers[id] = to
			res.Moved[id] = to
			c.event("move %s %s", id, to)
		}
	}
	return res, nil
}

func (c *fakeComputes) waitVersion(_ context.Context, in openstack.VersionCheckInput) (*openstack.ComputeNodeState, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.regions[in.Cloud.ComputeRegion] = true
	if VersionClass(c.version[in.Host]) != in.Class {
		return nil, temporal.NewApplicationError(fmt.Sprintf("%s reports %q, not %q", in.Host, c.version[in.Host], in.Class), openstack.ErrVersionNotReported)
	}
	return &openstack.ComputeNodeState{State: "up"}, nil
}

type updateHarness struct {
	testsuite.WorkflowTestSuite
	t     *testing.T
	env   *testsuite.TestWorkflowEnvironment
	chain *objecttest.Chain
	cloud *fakeComputes
	spec  dp.OpenStackDataPlaneUpdateSpec
	last  kube.StatusPatch
	// checks counts the checks registered with at; ran those that ran.
	checks, ran int
}

var updateRef = lifecycle.ObjectRef{Group: "dataplane.openstack.org", Version: "v1beta1", Kind: "OpenStackDataPlaneUpdate",
	Resource: "openstackdataplaneupdates", Namespace: "openstack", Name: "to-2", UID: "0123456789abcdef"}

// newUpdateHarness runs an update's workflow as a server does, run after run (objecttest.Chain).
func newUpdateHarness(t *testing.T, spec dp.OpenStackDataPlaneUpdateSpec) *updateHarness {
	h := newUpdateRun(t, spec, newFakeComputes())
	h.chain = objecttest.New(h.env)
	return h
}

// newUpdateRun runs one run of an update's workflow at a time, in the world cloud.
func newUpdateRun(t *testing.T, spec dp.OpenStackDataPlaneUpdateSpec, cloud *fakeComputes) *updateHarness {
	h := &updateHarness{t: t, cloud: cloud, spec: spec}
	h.env = h.NewTestWorkflowEnvironment()
	h.env.RegisterActivity(&kube.Kube{})
	h.env.RegisterActivity(&openstack.OpenStack{})
	h.env.RegisterActivity(&ansible.Ansible{})
	specJSON, _ := json.Marshal(spec)
	h.env.OnActivity(kubeActs.GetObject, mock.Anything, mock.Anything).Return(
		func(_ context.Context, ref lifecycle.ObjectRef) (*kube.Object, error) {
			if ref.Kind == "OpenStackDataPlane" {
				return &kube.Object{Exists: true, Generation: 1, Spec: json.RawMessage(`{"roles":["compute"]}`)}, nil
			}
			return &kube.Object{Exists: true, Generation: 1, Spec: specJSON}, nil
		})
	h.env.OnActivity(kubeActs.ListObjects, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in kube.ListInput) ([]kube.ListedObject, error) {
			switch in.Ref.Kind {
			case "NovaExternalCompute":
				return []kube.ListedObject{
					{Ref: lifecycle.ObjectRef{Name: "a"}, Object: kube.Object{Spec: json.RawMessage(`{"dataplaneNodeName":"a","cellName":"cell1","sshKeySecretName":"key","ansibleHost":"192.0.2.10"}`)}},
					{Ref: lifecycle.ObjectRef{Name: "b"}, Object: kube.Object{Spec: json.RawMessage(`{"dataplaneNodeName":"b","cellName":"cell1","sshKeySecretName":"key","ansibleHost":"192.0.2.11"}`)}},
				}, nil
			case "NovaCell":
				// The computes joined the cell1 of a Nova serving its own region, as make run's samples do.
				return []kube.ListedObject{
					{Ref: lifecycle.ObjectRef{Name: "nova-regiontwo-cell1"}, Object: kube.Object{Spec: json.RawMessage(`{"cellName":"cell1","region":"RegionTwo"}`)}},
				}, nil
			}
			return []kube.ListedObject{
				{Ref: lifecycle.ObjectRef{Name: "a"}, Object: kube.Object{Spec: json.RawMessage(`{"role":"compute","hostName":"ha"}`)}},
				{Ref: lifecycle.ObjectRef{Name: "b"}, Object: kube.Object{Spec: json.RawMessage(`{"role":"compute","hostName":"hb"}`)}},
				{Ref: lifecycle.ObjectRef{Name: "c"}, Object: kube.Object{Spec: json.RawMessage(`{"role":"other","hostName":"hc"}`)}},
			}, nil
		})
	h.env.OnActivity(kubeActs.GetObjectStatus, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in kube.StatusInput) (*kube.ObjectStatus, error) {
			return &kube.ObjectStatus{Exists: true, Conditions: []metav1.Condition{{Type: ConditionDeployed, Status: metav1.ConditionTrue}}}, nil
		})
	h.env.OnActivity(kubeActs.PatchStatus, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p kube.StatusPatch) error { h.last = p; return nil })
	h.env.OnActivity(kubeActs.RemoveFinalizer, mock.Anything, mock.Anything).Return(nil)
	h.env.OnActivity(ansibleActs.RunPlaybook, mock.Anything, mock.Anything).Return(h.cloud.playbook)
	h.env.OnActivity(osActs.ComputeNodeState, mock.Anything, mock.Anything).Return(h.cloud.nodeState)
	h.env.OnActivity(osActs.SetComputeService, mock.Anything, mock.Anything).Return(h.cloud.setService)
	h.env.OnActivity(osActs.MigrateServers, mock.Anything, mock.Anything).Return(h.cloud.migrate)
	h.env.OnActivity(osActs.WaitComputeVersion, mock.Anything, mock.Anything).Return(h.cloud.waitVersion)
	h.env.RegisterWorkflowWithOptions(OpenStackDataPlaneUpdateWorkflow, workflow.RegisterOptions{Name: "OpenStackDataPlaneUpdate"})
	h.env.RegisterDelayedCallback(func() { h.signal(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1}) }, time.Second)
	return h
}

// at runs check after d of test time; run fails the test when one never ran (the workflow ended first).
func (h *updateHarness) at(d time.Duration, check func()) {
	h.checks++
	h.env.RegisterDelayedCallback(func() { h.ran++; check() }, d)
}

func (h *updateHarness) signal(name string, arg any) {
	if h.chain != nil {
		require.NoError(h.t, h.chain.Signal(name, arg))
		return
	}
	h.env.SignalWorkflow(name, arg)
}

func (h *updateHarness) approve(gate string) {
	cb := &testsuite.TestUpdateCallback{OnReject: func(err error) { h.t.Errorf("approve rejected: %v", err) }, OnAccept: func() {}, OnComplete: func(any, error) {}}
	require.NoError(h.t, h.chain.Update(lifecycle.UpdateApprove, "", cb, lifecycle.ApproveRequest{Gate: gate}))
}

func (h *updateHarness) status() lifecycle.Status {
	if h.chain != nil {
		st, err := h.chain.Status()
		require.NoError(h.t, err)
		return st
	}
	v, err := h.env.QueryWorkflow(lifecycle.QueryStatus)
	require.NoError(h.t, err)
	var st lifecycle.Status
	require.NoError(h.t, v.Get(&st))
	return st
}

func (h *updateHarness) record() updateRecord {
	var rec updateRecord
	b, _ := json.Marshal(h.status().Detail)
	require.NoError(h.t, json.Unmarshal(b, &rec))
	return rec
}

func (h *updateHarness) field(name string) string { return string(h.last.Fields[name]) }

// run runs the update's runs until it is deleted after deleteAfter.
func (h *updateHarness) run(deleteAfter time.Duration) {
	h.env.RegisterDelayedCallback(func() { h.signal(lifecycle.SignalDelete, lifecycle.DeleteSignal{}) }, deleteAfter)
	h.chain.Execute("OpenStackDataPlaneUpdate", object.Input{ObjectRef: updateRef})
	require.True(h.t, h.env.IsWorkflowCompleted())
	require.NoError(h.t, h.env.GetWorkflowError())
	require.Equal(h.t, h.checks, h.ran, "checks that ran before the workflow ended")
}

func int32p(v int32) *int32 { return &v }

func TestUpdateCanaryGateThenBothNodes(t *testing.T) {
	h := newUpdateHarness(t, dp.OpenStackDataPlaneUpdateSpec{DataPlane: "edpm",
		NovaCompute: dp.NovaComputeUpdate{Version: "2", CustomServiceConfig: "[DEFAULT]\ndebug = True\n"},
		Strategy:    dp.UpdateStrategy{Canary: int32p(1), MaxUnavailable: int32p(1), ApproveAfterCanary: true}})
	var disabledDuringCanary bool
	h.cloud.during = func(e string) {
		if e == "update-apply ha" {
			disabledDuringCanary = h.cloud.disabled["ha"] && h.cloud.servers["s1"] == "hb"
		}
	}
	h.at(time.Hour, func() {
		st := h.status()
		require.Equal(t, dp.ReasonAwaitingApproval, st.Phase, "the gate holds the second node")
		require.Equal(t, `"canary"`, h.field("gate"))
		require.Equal(t, []string{"update-checkpoint", "update-apply"}, h.cloud.steps["ha"])
		require.Empty(t, h.cloud.steps["hb"], "the second node waits for approval")
		require.False(t, h.cloud.disabled["ha"])
		require.Equal(t, "ha", h.cloud.servers["s1"], "the canary's instance came back")
		h.approve("canary")
	})
	h.at(2*time.Hour, func() {
		st := h.status()
		require.Equal(t, lifecycle.PhaseReady, st.Phase)
		rec := h.record()
		for _, n := range rec.Nodes {
			require.Equal(t, dp.UpdateNodeSucceeded, n.State, n.Name)
			require.Equal(t, "1", n.VersionBefore)
			require.Equal(t, "2", n.VersionAfter)
			require.Equal(t, 1, n.Moved)
		}
		require.Equal(t, map[string]string{"ha": "2", "hb": "2"}, h.cloud.version)
		require.Equal(t, map[string]bool{"ha": false, "hb": false}, h.cloud.disabled)
		require.Equal(t, map[string]string{"s1": "ha", "s2": "hb"}, h.cloud.servers, "every instance is back home")
		require.Equal(t, "2", h.field("updatedNodes"))
	})
	h.run(3 * time.Hour)
	require.True(t, disabledDuringCanary, "the canary is disabled and drained while it updates")
	require.Equal(t, map[string]bool{"RegionTwo": true}, h.cloud.regions, "every Nova call goes to the computes' own Nova (their cell's region)")
}

func TestUpdateFailedVerificationRollsBackThenRetryFinishesOnlyThatNode(t *testing.T) {
	h := newUpdateHarness(t, dp.OpenStackDataPlaneUpdateSpec{DataPlane: "edpm",
		NovaCompute: dp.NovaComputeUpdate{Version: "3"}})
	h.cloud.broken["hb"] = true
	h.at(time.Hour, func() {
		st := h.status()
		require.Equal(t, lifecycle.PhaseFailed, st.Phase)
		var ready string
		for _, c := range st.Conditions {
			if c.Type == lifecycle.ConditionReady {
				ready = c.Reason + ": " + c.Message
			}
		}
		require.True(t, strings.HasPrefix(ready, dp.ReasonVerificationFailed+": "), "the node's reason is the update's, not the exhausted budget: %s", ready)
		require.Contains(t, ready, "b (VerificationFailed at apply")
		require.Contains(t, ready, "nova-compute exited at start")
		require.Contains(t, ready, "rolled back to its checkpoint")
		require.Equal(t, "1", h.cloud.version["hb"], "rolled back: the old version runs")
		require.False(t, h.cloud.disabled["hb"], "rolled back and enabled")
		require.Equal(t, "hb", h.cloud.servers["s2"])
		require.Equal(t, "3", h.cloud.version["ha"])
		h.cloud.broken["hb"] = false
		h.signal(lifecycle.SignalRetry, lifecycle.RetrySignal{})
	})
	h.at(2*time.Hour, func() {
		require.Equal(t, lifecycle.PhaseReady, h.status().Phase)
		require.Equal(t, []string{"update-checkpoint", "update-apply"}, h.cloud.steps["ha"], "the node that succeeded is not run again")
		require.Equal(t, []string{"update-checkpoint", "update-apply", "update-rollback", "update-checkpoint", "update-apply"}, h.cloud.steps["hb"])
		require.Equal(t, "3", h.cloud.version["hb"])
		rec := h.record()
		require.Equal(t, 2, rec.Nodes[1].Attempts)
		require.Equal(t, "1", rec.Nodes[1].VersionBefore, "the retry's checkpoint is the first one, taken before anything changed")
	})
	h.run(3 * time.Hour)
}

func TestUpdateCancelFinishesTheNodeInFlightAndLeavesAllEnabled(t *testing.T) {
	h := newUpdateRun(t, dp.OpenStackDataPlaneUpdateSpec{DataPlane: "edpm",
		NovaCompute: dp.NovaComputeUpdate{Version: "2"}, Strategy: dp.UpdateStrategy{Canary: int32p(0)}}, newFakeComputes())
	cancelled := false
	h.cloud.during = func(e string) {
		if e == "move s1 hb" && !cancelled {
			cancelled = true
			h.env.RegisterDelayedCallback(func() { h.env.CancelWorkflow() }, 0)
		}
	}
	h.env.ExecuteWorkflow("OpenStackDataPlaneUpdate", object.Input{ObjectRef: updateRef})
	require.True(t, h.env.IsWorkflowCompleted())
	var canceled *temporal.CanceledError
	require.True(t, errors.As(h.env.GetWorkflowError(), &canceled), "%v", h.env.GetWorkflowError())
	require.True(t, cancelled)
	require.False(t, h.cloud.disabled["ha"] || h.cloud.disabled["hb"], "every node enabled")
	require.Equal(t, "2", h.cloud.version["ha"], "the node in flight was finished")
	require.Equal(t, "1", h.cloud.version["hb"], "no other node started")
	require.Equal(t, "ha", h.cloud.servers["s1"])
	require.Contains(t, h.field("nodeStates"), `"state":"Pending"`)
}

// An update whose run's history is due while a batch runs stops each node after its current step and
// continues as new; the next run goes on from each node's next step (none runs twice) and finishes. The
// settled update then does nothing: no activity, no timer, no status write, until it is deleted.
func TestUpdateContinuesAsNewMidBatchAndResumes(t *testing.T) {
	spec, cloud := oneNodeBatches(), newFakeComputes()
	next, rec := firstRunOnApply(t, spec, cloud, func(env *testsuite.TestWorkflowEnvironment) { env.SetContinueAsNewSuggested(true) })
	require.True(t, next.Carry.Resume, "cut short, the update resumes in the next run")
	require.Equal(t, UpdateStepVerify, rec.Nodes[0].Next, "a stopped after its apply step, in flight")
	require.Equal(t, dp.UpdateNodePending, rec.Nodes[1].State, "b waits for the next batch")

	cloud.during = nil
	second := newUpdateRun(t, spec, cloud)
	second.env.ExecuteWorkflow("OpenStackDataPlaneUpdate", next)
	settled, ok := objecttest.Carried(second.env.GetWorkflowError())
	require.True(t, ok, "the settled run continues as new: %v", second.env.GetWorkflowError())
	require.False(t, settled.Carry.Resume)
	require.EqualValues(t, 1, settled.Carry.Observed)
	require.Equal(t, lifecycle.PhaseReady, settled.Carry.Phase)
	for _, host := range []string{"ha", "hb"} {
		require.Equal(t, []string{"update-checkpoint", "update-apply"}, cloud.steps[host], "each playbook ran once on %s", host)
		require.Equal(t, "2", cloud.version[host])
		require.False(t, cloud.disabled[host])
	}
	require.Equal(t, map[string]string{"s1": "ha", "s2": "hb"}, cloud.servers, "every instance is back home")

	idle := newUpdateRun(t, spec, cloud)
	var acts []string
	idle.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		acts = append(acts, info.ActivityType.Name)
	})
	// Status writes are local activities.
	idle.env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) {
		acts = append(acts, info.ActivityType.Name)
	})
	// The settled run continued as new without waiting for its last status write; the next run writes
	// what it left, once, and nothing more.
	var leftover []string
	if settled.Carry.Unwritten != nil {
		leftover = []string{"PatchStatus"}
	}
	idle.env.RegisterDelayedCallback(func() {
		require.Equal(t, leftover, acts, "a settled update runs nothing but the write its last run left")
		acts = nil
		idle.signal(lifecycle.SignalDelete, lifecycle.DeleteSignal{})
	}, time.Hour)
	idle.env.ExecuteWorkflow("OpenStackDataPlaneUpdate", settled)
	require.NoError(t, idle.env.GetWorkflowError())
	require.NotContains(t, acts, "RunPlaybook", "deleting a finished update changes no node")
	require.NotContains(t, acts, "SetComputeService")
	require.Contains(t, acts, "RemoveFinalizer")
}

// A run past its history limit inside a batch lets the batch finish (stopping a node there would hold
// it until the slowest node of the batch finished its step) and continues as new before the next one;
// a batch whose events would pass the limit starts in the next run. Only a run far past the limit, or
// one the server asks to end, stops a batch inside (TestUpdateContinuesAsNewMidBatchAndResumes).
func TestUpdateContinuesAsNewBetweenBatches(t *testing.T) {
	for _, tc := range []struct {
		name    string
		history int
	}{
		{"past the limit inside a batch", object.DefaultLimits.MaxHistory + 1},
		{"the next batch would pass the limit", object.DefaultLimits.MaxHistory - updateEventsPerNode/2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cloud := newFakeComputes()
			_, rec := firstRunOnApply(t, oneNodeBatches(), cloud, func(env *testsuite.TestWorkflowEnvironment) { env.SetCurrentHistoryLength(tc.history) })
			require.Equal(t, dp.UpdateNodeSucceeded, rec.Nodes[0].State, "a's batch finished in the first run")
			require.Equal(t, dp.UpdateNodePending, rec.Nodes[1].State, "b's batch starts in the next run")
			require.Empty(t, cloud.steps["hb"], "nothing ran on b")
			require.Equal(t, []string{"update-checkpoint", "update-apply"}, cloud.steps["ha"])
		})
	}
}

// oneNodeBatches is an update of the two computes, one per batch, no canary.
func oneNodeBatches() dp.OpenStackDataPlaneUpdateSpec {
	return dp.OpenStackDataPlaneUpdateSpec{DataPlane: "edpm", NovaCompute: dp.NovaComputeUpdate{Version: "2"},
		Strategy: dp.UpdateStrategy{Canary: int32p(0), MaxUnavailable: int32p(1)}}
}

// firstRunOnApply runs an update's first run, calling onApply on its test environment while node a
// applies, and requires that the run continued as new; it returns the next run's input and the record
// carried to it (both nodes).
func firstRunOnApply(t *testing.T, spec dp.OpenStackDataPlaneUpdateSpec, cloud *fakeComputes, onApply func(*testsuite.TestWorkflowEnvironment)) (object.Input, updateRecord) {
	t.Helper()
	first := newUpdateRun(t, spec, cloud)
	cloud.during = func(e string) {
		if e == "update-apply ha" {
			first.env.RegisterDelayedCallback(func() { onApply(first.env) }, 0)
		}
	}
	first.env.ExecuteWorkflow("OpenStackDataPlaneUpdate", object.Input{ObjectRef: updateRef})
	next, ok := objecttest.Carried(first.env.GetWorkflowError())
	require.True(t, ok, "the first run continues as new: %v", first.env.GetWorkflowError())
	var rec updateRecord
	require.NoError(t, json.Unmarshal(next.Carry.Data, &rec))
	require.Len(t, rec.Nodes, 2)
	return next, rec
}
