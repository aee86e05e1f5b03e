package dataplane

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/activities/ansible"
	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/activities/openstack"
	dataplanev1beta1 "github.com/stackflow/stackflow/api/dataplane/v1beta1"
	"github.com/stackflow/stackflow/api/lifecycle"
	novav1beta1 "github.com/stackflow/stackflow/api/nova/v1beta1"
	"github.com/stackflow/stackflow/workflows/object"
	"github.com/stackflow/stackflow/workflows/object/objecttest"
)

// computeWorld is a NovaExternalCompute's world under test: Nova's view of its host (instances on it,
// whether they can move) and what the workflow did to it, in order.
type computeWorld struct {
	mu       sync.Mutex
	removal  novav1beta1.ComputeRemoval
	on       []string // instances on the host
	movable  bool     // a live migration succeeds
	calls    []string // Nova and Ansible calls of the teardown, in order
	disabled string   // the disabled reason given
	// failDeploy: the deploy playbook fails after it wrote to the host (nova-compute exits at start).
	failDeploy bool
}

func (w *computeWorld) call(c string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, c)
}

func (w *computeWorld) instances() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.on...)
}

func newComputeEnv(t *testing.T, w *computeWorld) *testsuite.TestWorkflowEnvironment {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterActivity(&kube.Kube{})
	env.RegisterActivity(&ansible.Ansible{})
	env.RegisterActivity(&openstack.OpenStack{})
	env.RegisterWorkflowWithOptions(NovaExternalComputeWorkflow, workflow.RegisterOptions{Name: "NovaExternalCompute"})
	// A cell a Nova made: its Secret holds the clouds.yaml every call about the compute logs in with.
	cellSpec, err := json.Marshal(novav1beta1.NovaCellSpec{CellName: "cell1", TransportURLSecret: "cell1-transport",
		NovaServiceAuth: novav1beta1.NovaServiceAuth{Secret: "nova-secret", Region: "RegionTwo"}})
	require.NoError(t, err)
	onGetObject(t, env, func() (any, int64) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return novav1beta1.NovaExternalComputeSpec{DataplaneNodeName: "n1", CellName: "cell1", SSHKeySecretName: "key",
			InventoryConfigMapName: "n1-inventory", Deploy: true, Removal: w.removal}, 1
	})
	env.OnActivity(kubeActs.ListObjects, mock.Anything, mock.Anything).Return(
		[]kube.ListedObject{{Ref: NovaCellRef("openstack", "nova-cell1"), Object: kube.Object{Exists: true, Generation: 1, Spec: cellSpec}}}, nil)
	env.OnActivity(kubeActs.GetObjectStatus, mock.Anything, mock.Anything).Return(&kube.ObjectStatus{Exists: true, Generation: 1, ObservedGeneration: 1,
		Conditions: []metav1.Condition{{Type: dataplanev1beta1.ConditionInfrastructureReady, Status: metav1.ConditionTrue}}}, nil)
	env.OnActivity(kubeActs.CheckSecret, mock.Anything, mock.Anything).Return(&kube.SecretPresence{Exists: true}, nil)
	env.OnActivity(kubeActs.PatchStatus, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(kubeActs.RemoveFinalizer, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(ansibleActs.RunPlaybook, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in ansible.PlaybookInput) (*ansible.PlaybookResult, error) {
			w.call("playbook " + in.Playbook)
			if w.failDeploy && in.Playbook == "nova-compute.yml" {
				return nil, temporal.NewNonRetryableApplicationError("nova-compute exited at start", ansible.ErrPlaybookFailed, nil)
			}
			return &ansible.PlaybookResult{Ok: 3}, nil
		})
	env.OnActivity(osActs.WaitComputeAPI, mock.Anything, mock.Anything).Return(nil)
	cellCloud := func(c openstack.CloudSecret) {
		require.Equal(t, openstack.CloudSecret{Namespace: c.Namespace, Name: "nova-secret", ComputeRegion: "RegionTwo", Fallback: openstack.DefaultCloudsSecret}, c,
			"the cell's Nova, through its Secret's clouds.yaml")
	}
	env.OnActivity(osActs.WaitComputeRegistered, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in openstack.ComputeHostInput) (*openstack.ComputeRegistration, error) {
			cellCloud(in.Cloud)
			return &openstack.ComputeRegistration{ServiceID: "svc-1", State: "up", Status: "enabled", HypervisorHostname: "n1"}, nil
		})
	env.OnActivity(osActs.SetComputeService, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in openstack.ServiceStateInput) ([]string, error) {
			w.call("disable")
			cellCloud(in.Cloud)
			w.mu.Lock()
			w.disabled = in.Reason
			w.mu.Unlock()
			require.True(t, in.IfRegistered, "a compute that never registered has nothing to drain")
			return w.instances(), nil
		})
	env.OnActivity(osActs.MigrateServers, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in openstack.MigrateInput) (*openstack.MigrateResult, error) {
			w.call("migrate")
			require.Equal(t, "n1", in.From)
			w.mu.Lock()
			defer w.mu.Unlock()
			if !w.movable {
				return nil, temporal.NewNonRetryableApplicationError("drain of host n1: "+strings.Join(w.on, ", ")+" is SHUTOFF (only ACTIVE instances live-migrate)", openstack.ErrDrainFailed, nil)
			}
			res := &openstack.MigrateResult{Moved: map[string]string{}}
			for _, id := range w.on {
				res.Moved[id] = "n2"
			}
			w.on = nil
			return res, nil
		})
	env.OnActivity(osActs.ComputeNodeState, mock.Anything, mock.Anything).Return(
		func(context.Context, openstack.ComputeHostInput) (*openstack.ComputeNodeState, error) {
			return &openstack.ComputeNodeState{Status: "disabled", State: "up", Servers: w.instances()}, nil
		})
	env.OnActivity(osActs.DeleteServersOnHost, mock.Anything, mock.Anything).Return(
		func(context.Context, openstack.ComputeHostInput) ([]string, error) {
			w.call("delete instances")
			w.mu.Lock()
			defer w.mu.Unlock()
			gone := w.on
			w.on = nil
			return gone, nil
		})
	env.OnActivity(osActs.WaitHostEmpty, mock.Anything, mock.Anything).Return(
		func(context.Context, openstack.ComputeHostInput) error {
			if len(w.instances()) > 0 {
				return temporal.NewApplicationError("instances still on n1", openstack.ErrInstancesOnHost)
			}
			w.call("host empty")
			return nil
		})
	env.OnActivity(osActs.DeleteComputeService, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in openstack.ComputeHostInput) error {
			require.Empty(t, w.instances(), "the service goes only once the host is empty")
			cellCloud(in.Cloud)
			w.call("delete service")
			return nil
		})
	return env
}

// Removing a compute (its node deleted) empties it first, as spec.removal says: disabled in Nova with a
// reason, its instances live-migrated away; instances that cannot move are held (Stop) until a person
// approves the gate or someone moves them, deleted at once (Skip), or fail the teardown (Fail). Only then
// do nova-compute and its service record go.
func TestComputeRemovalDrainsByPolicy(t *testing.T) {
	removed := []string{"playbook nova-compute-remove.yml", "delete service"}
	cases := []struct {
		name    string
		policy  string
		movable bool
		// during runs while the teardown is held; nil when it is not.
		during func(t *testing.T, w *computeWorld, chain *objecttest.Chain)
		calls  []string
		// teardownFails: the object stays with TeardownFailed (policy Fail).
		teardownFails bool
	}{
		{name: "instances move away", policy: novav1beta1.RemovalStop, movable: true,
			calls: append([]string{"disable", "migrate", "host empty"}, removed...)},
		{name: "stop, then a person approves", policy: novav1beta1.RemovalStop,
			during: func(t *testing.T, w *computeWorld, chain *objecttest.Chain) {
				require.NoError(t, chain.Update(lifecycle.UpdateApprove, "approve", &testsuite.TestUpdateCallback{
					OnReject: func(err error) { t.Errorf("approve rejected: %v", err) }, OnAccept: func() {},
					OnComplete: func(_ any, err error) { require.NoError(t, err) },
				}, lifecycle.ApproveRequest{Gate: GateRemove, By: "ops"}))
			},
			calls: append([]string{"disable", "migrate", "delete instances", "host empty"}, removed...)},
		{name: "stop, then someone moves them", policy: novav1beta1.RemovalStop,
			during: func(t *testing.T, w *computeWorld, chain *objecttest.Chain) {
				w.mu.Lock()
				w.on = nil
				w.mu.Unlock()
			},
			calls: append([]string{"disable", "migrate", "host empty"}, removed...)},
		{name: "skip deletes them at once", policy: novav1beta1.RemovalSkip,
			calls: append([]string{"disable", "migrate", "delete instances", "host empty"}, removed...)},
		{name: "fail keeps the compute", policy: novav1beta1.RemovalFail, teardownFails: true,
			calls: []string{"disable", "migrate"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := &computeWorld{on: []string{"vm-a", "vm-b"}, movable: tc.movable,
				removal: novav1beta1.ComputeRemoval{DrainTimeout: &metav1.Duration{Duration: 2 * time.Minute}, OnDrainFailure: tc.policy}}
			env := newComputeEnv(t, w)
			chain := objecttest.New(env)
			env.RegisterDelayedCallback(func() { require.NoError(t, chain.Signal(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})) }, time.Second)
			env.RegisterDelayedCallback(func() {
				st, err := chain.Status()
				require.NoError(t, err)
				require.Equal(t, lifecycle.PhaseReady, st.Phase)
				require.NoError(t, chain.Signal(lifecycle.SignalDelete, lifecycle.DeleteSignal{}))
			}, time.Minute)
			env.RegisterDelayedCallback(func() {
				st, err := chain.Status()
				require.NoError(t, err)
				c := condition(st.Conditions, novav1beta1.ConditionComputeDeployed)
				switch {
				case tc.movable:
					require.Equal(t, lifecycle.PhaseDeleting, st.Phase)
				case tc.teardownFails:
					ready := condition(st.Conditions, lifecycle.ConditionReady)
					require.Equal(t, "TeardownFailed", ready.Reason)
					require.Contains(t, ready.Message, "onDrainFailure is Fail")
				case tc.during != nil:
					require.Equal(t, dataplanev1beta1.ReasonDrainFailed, c.Reason)
					require.Contains(t, c.Message, "vm-a, vm-b", "the condition names the instances")
					require.Contains(t, c.Message, `gate "remove"`)
					require.Contains(t, st.Step, "held")
					require.Equal(t, []string{"disable", "migrate"}, w.calls[1:], "held: nothing removed yet")
					tc.during(t, w, chain)
				}
			}, 10*time.Minute)
			if tc.teardownFails {
				// The object leaves the API server by hand: the workflow lets go.
				env.RegisterDelayedCallback(func() { require.NoError(t, chain.Signal(lifecycle.SignalDelete, lifecycle.DeleteSignal{Gone: true})) }, 20*time.Minute)
			}
			chain.Execute("NovaExternalCompute", object.Input{ObjectRef: lifecycle.ObjectRef{Kind: "NovaExternalCompute", Namespace: "openstack", Name: "n1", UID: "u1"}})
			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError())
			require.Equal(t, tc.calls, w.calls[1:], "after the deploy playbook")
			require.Equal(t, "playbook nova-compute.yml", w.calls[0])
			require.Equal(t, "stackflow: removing NovaExternalCompute/openstack/n1", w.disabled)
		})
	}
}

// A compute whose deploy playbook failed part-way (its configuration written, nova-compute not started)
// is removed from its host all the same when it is deleted: the removal playbook runs, and its service
// record goes if Nova had one. Runs before ChangeTeardownAfterFailedInstall left the host as it was.
func TestComputeWhoseDeployFailedIsRemovedToo(t *testing.T) {
	w := &computeWorld{failDeploy: true}
	env := newComputeEnv(t, w)
	chain := objecttest.New(env)
	env.RegisterDelayedCallback(func() { require.NoError(t, chain.Signal(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})) }, time.Second)
	env.RegisterDelayedCallback(func() {
		st, err := chain.Status()
		require.NoError(t, err)
		require.Equal(t, lifecycle.PhaseFailed, st.Phase)
		require.NoError(t, chain.Signal(lifecycle.SignalDelete, lifecycle.DeleteSignal{}))
	}, time.Minute)
	chain.Execute("NovaExternalCompute", object.Input{ObjectRef: lifecycle.ObjectRef{Kind: "NovaExternalCompute", Namespace: "openstack", Name: "n1", UID: "u1"}})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"playbook nova-compute.yml", "disable", "host empty", "playbook nova-compute-remove.yml", "delete service"}, w.calls)
}

func condition(cs []metav1.Condition, typ string) metav1.Condition {
	for _, c := range cs {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}
