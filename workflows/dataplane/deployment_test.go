package dataplane

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/activities/ansible"
	"github.com/stackflow/stackflow/activities/kube"
	dataplanev1beta1 "github.com/stackflow/stackflow/api/dataplane/v1beta1"
	"github.com/stackflow/stackflow/api/lifecycle"
	novav1beta1 "github.com/stackflow/stackflow/api/nova/v1beta1"
	"github.com/stackflow/stackflow/workflows/object"
	"github.com/stackflow/stackflow/workflows/object/objecttest"
)

func listed(t *testing.T, kind, name string, annotations map[string]string, spec any, deleting bool) kube.ListedObject {
	b, err := json.Marshal(spec)
	require.NoError(t, err)
	return kube.ListedObject{Ref: lifecycle.ObjectRef{Kind: kind, Namespace: "openstack", Name: name},
		Object: kube.Object{Exists: true, Generation: 1, Deleting: deleting, Annotations: annotations, Spec: b}}
}

func TestRunMembers(t *testing.T) {
	cell1 := map[string]string{dataplanev1beta1.NovaCellAnnotation: "cell1"}
	roles := []kube.ListedObject{
		listed(t, "OpenStackDataPlaneRole", "compute", cell1, role(nil, nil).Spec, false),
		listed(t, "OpenStackDataPlaneRole", "networker", nil, role(nil, nil).Spec, false),
	}
	netNode := node("net-0", nil, func(n *dataplanev1beta1.OpenStackDataPlaneNode) { n.Spec.Role = "networker" })
	nodes := []kube.ListedObject{
		listed(t, "OpenStackDataPlaneNode", "c-1", nil, node("c-1", nil, nil).Spec, false),
		listed(t, "OpenStackDataPlaneNode", "c-0", nil, node("c-0", nil, nil).Spec, false),
		listed(t, "OpenStackDataPlaneNode", "c-gone", nil, node("c-gone", nil, nil).Spec, true),
		listed(t, "OpenStackDataPlaneNode", "net-0", nil, netNode.Spec, false),
		listed(t, "OpenStackDataPlaneNode", "other", nil, node("other", nil, func(n *dataplanev1beta1.OpenStackDataPlaneNode) { n.Spec.Role = "elsewhere" }).Spec, false),
	}
	dp := dataplanev1beta1.OpenStackDataPlaneSpec{Roles: []string{"compute", "networker"}}
	infra := []string{StepBootstrap, StepConfigureNetwork, StepConfigureOS}
	tests := []struct {
		name           string
		only, services []string
		want           map[string][]string // node → steps
		order          []string
		wantErr        string
	}{
		{name: "every member, every step; a deleting node is left out", order: []string{"c-0", "c-1", "net-0"},
			want: map[string][]string{"c-0": append(infra, StepNovaCompute), "c-1": append(infra, StepNovaCompute), "net-0": infra}},
		{name: "named nodes in the order named", only: []string{"net-0", "c-1"}, order: []string{"net-0", "c-1"},
			want: map[string][]string{"net-0": infra, "c-1": append(infra, StepNovaCompute)}},
		{name: "steps in pipeline order whatever the order named", services: []string{StepNovaCompute, StepConfigureOS}, order: []string{"c-0", "c-1", "net-0"},
			want: map[string][]string{"c-0": {StepConfigureOS, StepNovaCompute}, "c-1": {StepConfigureOS, StepNovaCompute}, "net-0": {StepConfigureOS}}},
		{name: "a node without the service is left out when not named", services: []string{StepNovaCompute}, order: []string{"c-0", "c-1"},
			want: map[string][]string{"c-0": {StepNovaCompute}, "c-1": {StepNovaCompute}}},
		{name: "a named node without the service is an error", only: []string{"net-0"}, services: []string{StepNovaCompute},
			wantErr: "node net-0 has none of the steps nova-compute"},
		{name: "a node of another data plane", only: []string{"other"}, wantErr: "node other is not a member"},
		{name: "a node being deleted", only: []string{"c-gone"}, wantErr: "node c-gone is not a member"},
		{name: "no node has the service", services: []string{StepOVNMetadataAgent}, wantErr: "no member node of the data plane has any of the steps ovn-metadata-agent"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RunMembers(dp, nodes, roles, tc.only, tc.services)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			var order []string
			for _, n := range got {
				order = append(order, n.Name)
				require.Equal(t, dataplanev1beta1.RunPending, n.State)
				require.Equal(t, n.Name, n.Host)
				var steps []string
				for _, s := range n.Steps {
					steps = append(steps, s.Name)
					require.Equal(t, dataplanev1beta1.RunPending, s.State)
				}
				require.Equal(t, tc.want[n.Name], steps, n.Name)
			}
			require.Equal(t, tc.order, order)
		})
	}
}

func TestSelectRunRetry(t *testing.T) {
	ok, failed, pending := dataplanev1beta1.RunSucceeded, dataplanev1beta1.RunFailed, dataplanev1beta1.RunPending
	mk := func() []dataplanev1beta1.RunNodeState {
		return []dataplanev1beta1.RunNodeState{
			{Name: "a", Host: "ha", State: ok, Steps: []dataplanev1beta1.RunStepState{{Name: "configure-os", State: ok}}},
			{Name: "b", Host: "hb", State: failed, Steps: []dataplanev1beta1.RunStepState{{Name: "configure-os", State: ok}, {Name: "nova-compute", State: failed, Message: "boom"}}},
			// Failed before any step: its owner was not settled.
			{Name: "c", Host: "hc", State: failed, Message: "NodeNotSettled: …", Steps: []dataplanev1beta1.RunStepState{{Name: "configure-os", State: pending}}},
		}
	}
	tests := []struct {
		name string
		sig  lifecycle.RetrySignal
		want []string
	}{
		{name: "every failed node", want: []string{"b", "c"}},
		{name: "by host", sig: lifecycle.RetrySignal{Hosts: []string{"hc"}}, want: []string{"c"}},
		{name: "by node name", sig: lifecycle.RetrySignal{Hosts: []string{"b"}}, want: []string{"b"}},
		{name: "by step", sig: lifecycle.RetrySignal{Steps: []string{"nova-compute"}}, want: []string{"b"}},
		{name: "a succeeded node is not re-run", sig: lifecycle.RetrySignal{Hosts: []string{"a"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nodes := mk()
			require.Equal(t, tc.want, SelectRunRetry(nodes, tc.sig))
			for _, n := range nodes {
				again := n.State == pending
				require.Equal(t, again, slices.Contains(tc.want, n.Name), n.Name)
				for _, s := range n.Steps {
					if again {
						require.NotEqual(t, failed, s.State, "%s/%s", n.Name, s.Name)
					}
				}
			}
			require.Equal(t, ok, nodes[1].Steps[0].State, "a succeeded step stays done")
		})
	}
}

func TestBoundRunNodeStates(t *testing.T) {
	var nodes []dataplanev1beta1.RunNodeState
	for i := range 60 {
		st := dataplanev1beta1.RunSucceeded
		if i%20 == 7 {
			st = dataplanev1beta1.RunFailed
		}
		nodes = append(nodes, dataplanev1beta1.RunNodeState{Name: fmt.Sprintf("n%02d", i), State: st})
	}
	got, omitted := BoundRunNodeStates(nodes, 50)
	require.Len(t, got, 50)
	require.Equal(t, 10, omitted)
	require.Equal(t, []string{"n07", "n27", "n47"}, []string{got[0].Name, got[1].Name, got[2].Name}, "failed nodes first")
	small, omitted := BoundRunNodeStates(nodes[:3], 50)
	require.Len(t, small, 3)
	require.Zero(t, omitted)
}

// runWorld is a limited run's world: two compute nodes of data plane edpm, whether each (and its
// NovaExternalCompute) is settled, and the playbooks run.
type runWorld struct {
	mu      sync.Mutex
	settled map[string]bool
	runs    []ansible.PlaybookInput
	// updating is true while the data plane's update edpm-to-2 is in progress (other-to-2, of another
	// data plane, always is).
	updating bool
}

func (w *runWorld) ran() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, r := range w.runs {
		out = append(out, r.Host+" "+r.Step)
	}
	return out
}

func newRunEnv(t *testing.T, w *runWorld, spec dataplanev1beta1.OpenStackDataPlaneDeploymentSpec) *testsuite.TestWorkflowEnvironment {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterActivity(&kube.Kube{})
	env.RegisterActivity(&ansible.Ansible{})
	env.RegisterWorkflowWithOptions(OpenStackDataPlaneDeploymentWorkflow, workflow.RegisterOptions{Name: "OpenStackDataPlaneDeployment"})
	cell1 := map[string]string{dataplanev1beta1.NovaCellAnnotation: "cell1"}
	nodes := []kube.ListedObject{
		listed(t, "OpenStackDataPlaneNode", "n1", nil, node("n1", nil, nil).Spec, false),
		listed(t, "OpenStackDataPlaneNode", "n2", nil, node("n2", nil, nil).Spec, false),
	}
	roles := []kube.ListedObject{listed(t, "OpenStackDataPlaneRole", "compute", cell1, role(nil, nil).Spec, false)}
	cells := []kube.ListedObject{listed(t, "NovaCell", "nova-cell1", nil, novav1beta1.NovaCellSpec{CellName: "cell1", TransportURLSecret: "cell1-transport"}, false)}
	env.OnActivity(kubeActs.ListObjects, mock.Anything, mock.Anything).Return(func(_ context.Context, in kube.ListInput) ([]kube.ListedObject, error) {
		switch in.Ref.Kind {
		case "OpenStackDataPlaneNode":
			return nodes, nil
		case "OpenStackDataPlaneRole":
			return roles, nil
		case "NovaCell":
			return cells, nil
		case "OpenStackDataPlaneUpdate":
			return []kube.ListedObject{
				listed(t, "OpenStackDataPlaneUpdate", "edpm-to-2", nil, dataplanev1beta1.OpenStackDataPlaneUpdateSpec{DataPlane: "edpm"}, false),
				listed(t, "OpenStackDataPlaneUpdate", "other-to-2", nil, dataplanev1beta1.OpenStackDataPlaneUpdateSpec{DataPlane: "other"}, false),
			}, nil
		}
		return nil, fmt.Errorf("unexpected list of %s", in.Ref.Kind)
	})
	env.OnActivity(kubeActs.GetObject, mock.Anything, mock.Anything).Return(func(_ context.Context, ref lifecycle.ObjectRef) (*kube.Object, error) {
		var s any
		var ann map[string]string
		switch ref.Kind {
		case "OpenStackDataPlaneDeployment":
			s = spec
		case "OpenStackDataPlane":
			s = dataplanev1beta1.OpenStackDataPlaneSpec{Roles: []string{"compute"}, Deploy: true}
		case "OpenStackDataPlaneRole":
			s, ann = role(nil, nil).Spec, cell1
		case "OpenStackDataPlaneNode":
			s = node(ref.Name, nil, nil).Spec
		case "NovaExternalCompute":
			s = novav1beta1.NovaExternalComputeSpec{DataplaneNodeName: ref.Name, CellName: "cell1", SSHKeySecretName: "edpm-ssh-key",
				InventoryConfigMapName: ref.Name + "-inventory", Deploy: true, CustomServiceConfig: "[DEFAULT]\ndebug = True\n"}
		default:
			return nil, fmt.Errorf("unexpected read of %s", ref)
		}
		b, err := json.Marshal(s)
		return &kube.Object{Exists: true, Generation: 1, Annotations: ann, Spec: b}, err
	})
	env.OnActivity(kubeActs.GetObjectStatus, mock.Anything, mock.Anything).Return(func(_ context.Context, in kube.StatusInput) (*kube.ObjectStatus, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		st := &kube.ObjectStatus{Exists: true, Generation: 2, ObservedGeneration: 1, Phase: lifecycle.PhaseRunning}
		settled := w.settled[in.Ref.Kind+"/"+in.Ref.Name] || in.Ref.Name == "edpm-to-2" && !w.updating
		if settled {
			st.Generation, st.Phase = 1, lifecycle.PhaseReady
			st.Conditions = []metav1.Condition{{Type: lifecycle.ConditionReady, Status: metav1.ConditionTrue}}
			st.Fields = map[string]json.RawMessage{"deployed": json.RawMessage("true")}
		}
		return st, nil
	})
	env.OnActivity(kubeActs.CheckSecret, mock.Anything, mock.Anything).Return(&kube.SecretPresence{Exists: true}, nil)
	env.OnActivity(kubeActs.PatchStatus, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(kubeActs.RemoveFinalizer, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(ansibleActs.RunPlaybook, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in ansible.PlaybookInput) (*ansible.PlaybookResult, error) {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.runs = append(w.runs, in)
			return &ansible.PlaybookResult{Host: in.Host, Step: in.Step, Ok: 4, Changed: 1, Skipped: 2, PlaybooksVersion: "abc"}, nil
		})
	return env
}

// A limited run runs the named steps, with the tags, on the settled nodes only, as their owners would
// run them (the compute's rendered configuration included); a node its own workflow is still deploying
// fails with NodeNotSettled and nothing runs there; retry, once it settled, runs it and the run is Ran.
func TestLimitedRunRunsTheNamedStepsOnSettledNodes(t *testing.T) {
	w := &runWorld{settled: map[string]bool{"OpenStackDataPlaneNode/n1": true, "NovaExternalCompute/n1": true}}
	spec := dataplanev1beta1.OpenStackDataPlaneDeploymentSpec{DataPlane: "edpm", Services: []string{StepNovaCompute, StepConfigureOS},
		Tags: []string{"sysctl", "config"}, SkipTags: []string{"restart"}}
	env := newRunEnv(t, w, spec)
	chain := objecttest.New(env)
	detail := func() runRecord {
		st, err := chain.Status()
		require.NoError(t, err)
		b, _ := json.Marshal(st.Detail)
		var rec runRecord
		require.NoError(t, json.Unmarshal(b, &rec))
		return rec
	}
	env.RegisterDelayedCallback(func() { require.NoError(t, chain.Signal(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})) }, time.Second)
	env.RegisterDelayedCallback(func() {
		require.Equal(t, []string{"n1 configure-os", "n1 nova-compute"}, w.ran(), "n2 is still being deployed by its own workflow")
		for _, r := range w.runs {
			require.Equal(t, []string{"sysctl", "config"}, r.Tags)
			require.Equal(t, []string{"restart"}, r.SkipTags)
			require.Equal(t, "edpm-ssh-key", r.SSHKeySecret)
		}
		require.Equal(t, "configure-os.yml", w.runs[0].Playbook)
		require.NotEmpty(t, w.runs[0].HostVars["ansible_host"], "the node's effective configuration")
		require.Equal(t, "nova-compute.yml", w.runs[1].Playbook)
		require.Equal(t, "n1-inventory", w.runs[1].InventoryConfigMap)
		require.Len(t, w.runs[1].Files, 2, "the compute's generated and custom files, as its workflow renders them")
		st, err := chain.Status()
		require.NoError(t, err)
		require.Equal(t, lifecycle.PhaseFailed, st.Phase)
		rec := detail()
		require.Equal(t, dataplanev1beta1.RunSucceeded, rec.Nodes[0].State)
		require.Equal(t, int32(1), rec.Nodes[0].Steps[1].Changed)
		require.Equal(t, dataplanev1beta1.RunFailed, rec.Nodes[1].State)
		require.Contains(t, rec.Nodes[1].Message, dataplanev1beta1.ReasonNodeNotSettled)
		require.Contains(t, rec.Nodes[1].Message, "OpenStackDataPlaneNode n2 is not settled")
		w.mu.Lock()
		w.settled["OpenStackDataPlaneNode/n2"], w.settled["NovaExternalCompute/n2"] = true, true
		w.mu.Unlock()
		require.NoError(t, chain.Signal(lifecycle.SignalRetry, lifecycle.RetrySignal{}))
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		require.Equal(t, []string{"n1 configure-os", "n1 nova-compute", "n2 configure-os", "n2 nova-compute"}, w.ran(), "the retry ran n2 only")
		st, err := chain.Status()
		require.NoError(t, err)
		require.Equal(t, lifecycle.PhaseReady, st.Phase)
		var ran *metav1.Condition
		for i := range st.Conditions {
			if st.Conditions[i].Type == dataplanev1beta1.ConditionRan {
				ran = &st.Conditions[i]
			}
		}
		require.NotNil(t, ran)
		require.Equal(t, metav1.ConditionTrue, ran.Status)
		require.Equal(t, "4 step(s) ran on 2 node(s)", ran.Message)
		require.Equal(t, "abc", detail().Playbooks)
		require.NoError(t, chain.Signal(lifecycle.SignalDelete, lifecycle.DeleteSignal{}))
	}, 2*time.Minute)
	chain.Execute("OpenStackDataPlaneDeployment", object.Input{ObjectRef: lifecycle.ObjectRef{Kind: "OpenStackDataPlaneDeployment", Namespace: "openstack", Name: "run-1", UID: "u1"}})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, w.ran(), 4, "nothing ran again after the run was done")
}

func TestBoundDataPlanePreview(t *testing.T) {
	change := func(task string, n int) ansible.TaskChange {
		return ansible.TaskChange{Task: task, Diff: string(make([]byte, n))}
	}
	nodes := func() []NodePreview {
		return []NodePreview{
			{Node: "a", Steps: []StepPreview{{Step: StepConfigureOS, Changes: []ansible.TaskChange{change("sysctl", 60)}}}, Changed: true},
			{Node: "b", Steps: []StepPreview{{Step: StepConfigureOS, Changes: []ansible.TaskChange{}}}},
			{Node: "c", Steps: []StepPreview{{Step: StepNovaCompute, Error: "not ready: waiting for NovaCell cell1"}}, Failed: true},
			{Node: "d", Steps: []StepPreview{{Step: StepNovaCompute, Changes: []ansible.TaskChange{change("install", 50), change("restart", 0)}}}, Changed: true},
		}
	}
	tests := []struct {
		name      string
		max       int
		truncated bool
		diffs     []int // lengths of a's and d's diffs, in order
	}{
		{name: "everything fits", max: 1000, diffs: []int{60, 50, 0}},
		{name: "later diffs are left out, the tasks stay", max: 100, truncated: true, diffs: []int{60, 0, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := BoundDataPlanePreview(nodes(), tc.max)
			require.Equal(t, []string{"b"}, got.Unchanged, "unchanged nodes by name only")
			require.Len(t, got.Nodes, 3, "changed and failed nodes in full")
			require.Equal(t, "c", got.Nodes[1].Node)
			require.Equal(t, tc.truncated, got.Truncated)
			var diffs []int
			for _, n := range []NodePreview{got.Nodes[0], got.Nodes[2]} {
				for _, c := range n.Steps[0].Changes {
					diffs = append(diffs, len(c.Diff))
				}
			}
			require.Equal(t, tc.diffs, diffs)
			require.Equal(t, tc.truncated, got.Nodes[2].Steps[0].Truncated)
		})
	}
}

// A limited run waits for no update, it refuses: while an update of its data plane is in progress (not
// one of another data plane), every node fails with NodeNotSettled naming it and nothing runs.
func TestLimitedRunRefusesDuringAnUpdate(t *testing.T) {
	w := &runWorld{updating: true, settled: map[string]bool{"OpenStackDataPlaneNode/n1": true, "NovaExternalCompute/n1": true,
		"OpenStackDataPlaneNode/n2": true, "NovaExternalCompute/n2": true}}
	env := newRunEnv(t, w, dataplanev1beta1.OpenStackDataPlaneDeploymentSpec{DataPlane: "edpm", Services: []string{StepConfigureOS}})
	chain := objecttest.New(env)
	env.RegisterDelayedCallback(func() { require.NoError(t, chain.Signal(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})) }, time.Second)
	env.RegisterDelayedCallback(func() {
		require.Empty(t, w.ran())
		st, err := chain.Status()
		require.NoError(t, err)
		require.Equal(t, lifecycle.PhaseFailed, st.Phase)
		b, _ := json.Marshal(st.Detail)
		require.Contains(t, string(b), "OpenStackDataPlaneUpdate edpm-to-2 of data plane edpm is in progress")
		require.NotContains(t, string(b), "other-to-2")
		w.mu.Lock()
		w.updating = false
		w.mu.Unlock()
		require.NoError(t, chain.Signal(lifecycle.SignalRetry, lifecycle.RetrySignal{}))
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		require.ElementsMatch(t, []string{"n1 configure-os", "n2 configure-os"}, w.ran(), "once the update ended, a retry runs")
		require.NoError(t, chain.Signal(lifecycle.SignalDelete, lifecycle.DeleteSignal{}))
	}, 2*time.Minute)
	chain.Execute("OpenStackDataPlaneDeployment", object.Input{ObjectRef: lifecycle.ObjectRef{Kind: "OpenStackDataPlaneDeployment", Namespace: "openstack", Name: "run-2", UID: "u2"}})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
}
