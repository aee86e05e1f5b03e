package dataplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/activities"
	dp "github.com/stackflow/stackflow/api/dataplane/v1beta1"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/workflows/object"
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
	events   []string            // everything, in order
	// during is called with each event as it happens.
	during func(event string)
}

func newFakeComputes() *fakeComputes {
	return &fakeComputes{
		disabled: map[string]bool{}, servers: map[string]string{"s1": "ha", "s2": "hb"},
		version: map[string]string{"ha": "1", "hb": "1"}, files: map[string]string{"ha": "1", "hb": "1"},
		ckpt: map[string]string{}, broken: map[string]bool{}, steps: map[string][]string{},
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

func (c *fakeComputes) playbook(_ context.Context, in activities.PlaybookInput) (*activities.PlaybookResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.steps[in.Host] = append(c.steps[in.Host], in.Step)
	c.event("%s %s", in.Step, in.Host)
	res := &activities.PlaybookResult{Host: in.Host, Step: in.Step, Finished: time.Unix(1000, 0), PlaybooksVersion: "abc"}
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
			return nil, temporal.NewNonRetryableApplicationError("host "+in.Host+": nova-compute exited at start", activities.ErrPlaybookFailed, nil)
		}
		c.version[in.Host] = v
	case PlaybookNovaRollback:
		c.files[in.Host] = c.ckpt[in.Host]
		c.version[in.Host] = c.ckpt[in.Host]
		res.Outputs = map[string]string{"version": c.ckpt[in.Host]}
	}
	return res, nil
}

func (c *fakeComputes) nodeState(_ context.Context, in activities.ComputeHostInput) (*activities.ComputeNodeState, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := &activities.ComputeNodeState{Status: "enabled", State: "up", Servers: c.on(in.Host)}
	if c.disabled[in.Host] {
		st.Status = "disabled"
	}
	return st, nil
}

func (c *fakeComputes) setService(_ context.Context, in activities.ServiceStateInput) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.disabled[in.Host] == !in.Enabled {
		return c.on(in.Host), nil
	}
	c.disabled[in.Host] = !in.Enabled
	c.event("enabled=%v %s", in.Enabled, in.Host)
	return c.on(in.Host), nil
}

func (c *fakeComputes) migrate(_ context.Context, in activities.MigrateInput) (*activities.MigrateResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	res := &activities.MigrateResult{Moved: map[string]string{}}
	ids := in.Servers
	if in.From != "" {
		ids = c.on(in.From)
	}
	for i, id := range ids {
		to := in.Targets[i%len(in.Targets)]
		if c.disabled[to] {
			return nil, temporal.NewNonRetryableApplicationError("target "+to+" is disabled", activities.ErrDrainFailed, nil)
		}
		if c.servers[id] != to {
			c.servers[id] = to
			res.Moved[id] = to
			c.event("move %s %s", id, to)
		}
	}
	return res, nil
}

func (c *fakeComputes) waitVersion(_ context.Context, in activities.VersionCheckInput) (*activities.ComputeNodeState, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if VersionClass(c.version[in.Host]) != in.Class {
		return nil, temporal.NewApplicationError(fmt.Sprintf("%s reports %q, not %q", in.Host, c.version[in.Host], in.Class), activities.ErrVersionNotReported)
	}
	return &activities.ComputeNodeState{State: "up"}, nil
}

type updateHarness struct {
	testsuite.WorkflowTestSuite
	t     *testing.T
	env   *testsuite.TestWorkflowEnvironment
	cloud *fakeComputes
	spec  dp.OpenStackDataPlaneUpdateSpec
	last  activities.StatusPatch
}

var updateRef = lifecycle.ObjectRef{Group: "dataplane.openstack.org", Version: "v1beta1", Kind: "OpenStackDataPlaneUpdate",
	Resource: "openstackdataplaneupdates", Namespace: "openstack", Name: "to-2", UID: "0123456789abcdef"}

func newUpdateHarness(t *testing.T, spec dp.OpenStackDataPlaneUpdateSpec) *updateHarness {
	h := &updateHarness{t: t, cloud: newFakeComputes(), spec: spec}
	h.env = h.NewTestWorkflowEnvironment()
	h.env.RegisterActivity(&activities.Kube{})
	h.env.RegisterActivity(&activities.OpenStack{})
	h.env.RegisterActivity(&activities.Ansible{})
	specJSON, _ := json.Marshal(spec)
	h.env.OnActivity(kube.GetObject, mock.Anything, mock.Anything).Return(
		func(_ context.Context, ref lifecycle.ObjectRef) (*activities.Object, error) {
			if ref.Kind == "OpenStackDataPlane" {
				return &activities.Object{Exists: true, Generation: 1, Spec: json.RawMessage(`{"roles":["compute"]}`)}, nil
			}
			return &activities.Object{Exists: true, Generation: 1, Spec: specJSON}, nil
		})
	h.env.OnActivity(kube.ListObjects, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ListInput) ([]activities.ListedObject, error) {
			if in.Ref.Kind == "NovaExternalCompute" {
				return []activities.ListedObject{
					{Ref: lifecycle.ObjectRef{Name: "a"}, Object: activities.Object{Spec: json.RawMessage(`{"dataplaneNodeName":"a","sshKeySecretName":"key","ansibleHost":"192.0.2.10"}`)}},
					{Ref: lifecycle.ObjectRef{Name: "b"}, Object: activities.Object{Spec: json.RawMessage(`{"dataplaneNodeName":"b","sshKeySecretName":"key","ansibleHost":"192.0.2.11"}`)}},
				}, nil
			}
			return []activities.ListedObject{
				{Ref: lifecycle.ObjectRef{Name: "a"}, Object: activities.Object{Spec: json.RawMessage(`{"role":"compute","hostName":"ha"}`)}},
				{Ref: lifecycle.ObjectRef{Name: "b"}, Object: activities.Object{Spec: json.RawMessage(`{"role":"compute","hostName":"hb"}`)}},
				{Ref: lifecycle.ObjectRef{Name: "c"}, Object: activities.Object{Spec: json.RawMessage(`{"role":"other","hostName":"hc"}`)}},
			}, nil
		})
	h.env.OnActivity(kube.GetObjectStatus, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.StatusInput) (*activities.ObjectStatus, error) {
			return &activities.ObjectStatus{Exists: true, Conditions: []metav1.Condition{{Type: ConditionDeployed, Status: metav1.ConditionTrue}}}, nil
		})
	h.env.OnActivity(kube.PatchStatus, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p activities.StatusPatch) error { h.last = p; return nil })
	h.env.OnActivity(kube.RemoveFinalizer, mock.Anything, mock.Anything).Return(nil)
	h.env.OnActivity(ansibleActs.RunPlaybook, mock.Anything, mock.Anything).Return(h.cloud.playbook)
	h.env.OnActivity(osActs.ComputeNodeState, mock.Anything, mock.Anything).Return(h.cloud.nodeState)
	h.env.OnActivity(osActs.SetComputeService, mock.Anything, mock.Anything).Return(h.cloud.setService)
	h.env.OnActivity(osActs.MigrateServers, mock.Anything, mock.Anything).Return(h.cloud.migrate)
	h.env.OnActivity(osActs.WaitComputeVersion, mock.Anything, mock.Anything).Return(h.cloud.waitVersion)
	h.env.RegisterWorkflowWithOptions(OpenStackDataPlaneUpdateWorkflow, workflow.RegisterOptions{Name: "OpenStackDataPlaneUpdate"})
	h.env.RegisterDelayedCallback(func() {
		h.env.SignalWorkflow(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})
	}, time.Second)
	return h
}

func (h *updateHarness) status() lifecycle.Status {
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

func (h *updateHarness) run(deleteAfter time.Duration) {
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(lifecycle.SignalDelete, lifecycle.DeleteSignal{}) }, deleteAfter)
	h.env.ExecuteWorkflow("OpenStackDataPlaneUpdate", object.Input{ObjectRef: updateRef})
	require.True(h.t, h.env.IsWorkflowCompleted())
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
	h.env.RegisterDelayedCallback(func() {
		st := h.status()
		require.Equal(t, dp.ReasonAwaitingApproval, st.Phase, "the gate holds the second node")
		require.Equal(t, `"canary"`, h.field("gate"))
		require.Equal(t, []string{"update-checkpoint", "update-apply"}, h.cloud.steps["ha"])
		require.Empty(t, h.cloud.steps["hb"], "the second node waits for approval")
		require.False(t, h.cloud.disabled["ha"])
		require.Equal(t, "ha", h.cloud.servers["s1"], "the canary's instance came back")
		h.env.UpdateWorkflow(lifecycle.UpdateApprove, "", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("approve rejected: %v", err) }, OnAccept: func() {}, OnComplete: func(any, error) {}},
			lifecycle.ApproveRequest{Gate: "canary"})
	}, time.Hour)
	h.env.RegisterDelayedCallback(func() {
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
	}, 2*time.Hour)
	h.run(3 * time.Hour)
	require.True(t, disabledDuringCanary, "the canary is disabled and drained while it updates")
}

func TestUpdateFailedVerificationRollsBackThenRetryFinishesOnlyThatNode(t *testing.T) {
	h := newUpdateHarness(t, dp.OpenStackDataPlaneUpdateSpec{DataPlane: "edpm",
		NovaCompute: dp.NovaComputeUpdate{Version: "3"}})
	h.cloud.broken["hb"] = true
	h.env.RegisterDelayedCallback(func() {
		st := h.status()
		require.Equal(t, lifecycle.PhaseFailed, st.Phase)
		var ready string
		for _, c := range st.Conditions {
			if c.Type == lifecycle.ConditionReady {
				ready = c.Reason + ": " + c.Message
			}
		}
		require.Contains(t, ready, "b (VerificationFailed at apply")
		require.Contains(t, ready, "nova-compute exited at start")
		require.Equal(t, "1", h.cloud.version["hb"], "rolled back: the old version runs")
		require.False(t, h.cloud.disabled["hb"], "rolled back and enabled")
		require.Equal(t, "hb", h.cloud.servers["s2"])
		require.Equal(t, "3", h.cloud.version["ha"])
		h.cloud.broken["hb"] = false
		h.env.SignalWorkflow(lifecycle.SignalRetry, lifecycle.RetrySignal{})
	}, time.Hour)
	h.env.RegisterDelayedCallback(func() {
		require.Equal(t, lifecycle.PhaseReady, h.status().Phase)
		require.Equal(t, []string{"update-checkpoint", "update-apply"}, h.cloud.steps["ha"], "the node that succeeded is not run again")
		require.Equal(t, []string{"update-checkpoint", "update-apply", "update-rollback", "update-checkpoint", "update-apply"}, h.cloud.steps["hb"])
		require.Equal(t, "3", h.cloud.version["hb"])
		rec := h.record()
		require.Equal(t, 2, rec.Nodes[1].Attempts)
		require.Equal(t, "1", rec.Nodes[1].VersionBefore, "the retry's checkpoint is the first one, taken before anything changed")
	}, 2*time.Hour)
	h.run(3 * time.Hour)
}

func TestUpdateCancelFinishesTheNodeInFlightAndLeavesAllEnabled(t *testing.T) {
	h := newUpdateHarness(t, dp.OpenStackDataPlaneUpdateSpec{DataPlane: "edpm",
		NovaCompute: dp.NovaComputeUpdate{Version: "2"}, Strategy: dp.UpdateStrategy{Canary: int32p(0)}})
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
