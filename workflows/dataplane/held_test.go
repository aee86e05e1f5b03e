package dataplane

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/activities/ansible"
	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/activities/openstack"
	dataplanev1beta1 "github.com/stackflow/stackflow/api/dataplane/v1beta1"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/workflows/object"
	"github.com/stackflow/stackflow/workflows/object/objecttest"
)

// heldNode is what a data plane and a service CR do for a node under test, across the node's runs.
type heldNode struct {
	dpID      string
	requests  int
	refreshes int
	succeeded int
	// serviceReady says whether the node's service CR has deployed.
	serviceReady bool
	// roleVars are the role's Ansible variables; playbooks and agentDeletes record the node's playbook
	// runs and its Neutron agent deletions.
	roleVars     map[string]apiextensionsv1.JSON
	playbooks    []string
	agentDeletes []openstack.NetworkAgentInput
	// applyDelay is how long each create-or-patch takes.
	applyDelay time.Duration
	// computeSpec is the spec of the node's NovaExternalCompute (none when nil); cells the NovaCells of
	// the namespace.
	computeSpec []byte
	cells       []kube.ListedObject
	// refused is a Secret whose credentials Keystone refuses.
	refused string
}

// run is one run of the node's workflow with the world of h: the data plane grants the first request
// only (later ones come from a node it counts running), the service CR deploys when h says so.
func (h *heldNode) run(t *testing.T, script func(env *testsuite.TestWorkflowEnvironment)) *testsuite.TestWorkflowEnvironment {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterActivity(&kube.Kube{})
	env.RegisterActivity(&ansible.Ansible{})
	env.RegisterWorkflowWithOptions(OpenStackDataPlaneNodeWorkflow, workflow.RegisterOptions{Name: "OpenStackDataPlaneNode"})

	cell1 := map[string]string{dataplanev1beta1.NovaCellAnnotation: "cell1"}
	nodeSpec, err := json.Marshal(node("n1", nil, nil).Spec)
	require.NoError(t, err)
	roleSpec, err := json.Marshal(role(cell1, func(r *dataplanev1beta1.OpenStackDataPlaneRole) {
		if h.roleVars != nil {
			r.Spec.NodeTemplate.AnsibleVars = h.roleVars
		}
	}).Spec)
	require.NoError(t, err)
	dpRef := DataPlaneRef("openstack", "edpm")
	dpRef.UID = "1234abcd-0000"
	h.dpID = lifecycle.WorkflowID(dpRef)

	env.OnActivity(kubeActs.GetObject, mock.Anything, mock.Anything).Return(
		func(_ context.Context, ref lifecycle.ObjectRef) (*kube.Object, error) {
			if ref.Kind == "OpenStackDataPlaneRole" {
				return &kube.Object{Exists: true, Generation: 1, Spec: roleSpec, Annotations: cell1}, nil
			}
			if ref.Kind == "NovaExternalCompute" {
				return &kube.Object{Exists: h.computeSpec != nil, Generation: 1, Spec: h.computeSpec}, nil
			}
			return &kube.Object{Exists: true, Generation: 1, Spec: nodeSpec}, nil
		})
	env.OnActivity(kubeActs.PatchStatus, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(kubeActs.RemoveFinalizer, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(kubeActs.ApplyObject, mock.Anything, mock.Anything).After(h.applyDelay).Return("uid-derived", nil)
	env.OnActivity(kubeActs.DeleteObject, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(kubeActs.WaitDeleted, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(kubeActs.CheckSecret, mock.Anything, mock.Anything).Return(&kube.SecretPresence{Exists: true}, nil)
	env.OnActivity(kubeActs.ListObjects, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in kube.ListInput) ([]kube.ListedObject, error) {
			if in.Ref.Kind == "NovaCell" {
				return h.cells, nil
			}
			return []kube.ListedObject{{Ref: dpRef, Object: kube.Object{Exists: true, Generation: 1}}}, nil
		})
	env.RegisterActivity(&openstack.OpenStack{})
	env.OnActivity(ansibleActs.RunPlaybook, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in ansible.PlaybookInput) (*ansible.PlaybookResult, error) {
			h.playbooks = append(h.playbooks, in.Playbook)
			return &ansible.PlaybookResult{Ok: 1}, nil
		})
	env.OnActivity(osActs.DeleteNetworkAgents, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in openstack.NetworkAgentInput) ([]openstack.NetworkAgent, error) {
			h.agentDeletes = append(h.agentDeletes, in)
			if in.Cloud.Name == h.refused {
				return nil, temporal.NewNonRetryableApplicationError("refused", openstack.ErrOSCredentials, nil)
			}
			return nil, nil
		})
	env.OnActivity(kubeActs.GetObjectStatus, mock.Anything, mock.Anything).Return(
		func(context.Context, kube.StatusInput) (*kube.ObjectStatus, error) {
			if !h.serviceReady {
				return &kube.ObjectStatus{Exists: true, Generation: 1, Phase: "Deploying"}, nil
			}
			return &kube.ObjectStatus{Exists: true, Generation: 1, ObservedGeneration: 1, Phase: lifecycle.PhaseReady,
				Conditions: []metav1.Condition{{Type: lifecycle.ConditionReady, Status: metav1.ConditionTrue, ObservedGeneration: 1}},
				Fields:     map[string]json.RawMessage{"deployed": json.RawMessage("true")}}, nil
		})
	env.OnSignalExternalWorkflow(mock.Anything, h.dpID, mock.Anything, mock.Anything, mock.Anything).Return(
		func(_, _, _, signal string, arg any) error {
			switch signal {
			case SignalEDPMRequest:
				h.requests++
				if h.requests == 1 {
					env.RegisterDelayedCallback(func() {
						env.SignalWorkflow(SignalEDPMGrant, EDPMGrant{DataPlane: h.dpID})
					}, time.Second)
				}
			case lifecycle.SignalRefresh:
				h.refreshes++
			case SignalEDPMReport:
				if rep, ok := arg.(EDPMReport); ok && rep.State == EDPMSucceeded {
					h.succeeded++
				}
			}
			return nil
		})
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, mock.Anything, mock.Anything, mock.Anything).Return(nil)
	script(env)
	return env
}

// A node admitted by its data plane waits in phase 1 until the server suggests continue-as-new. Its data
// plane counts it running and answers no second request, so the next run must go on under the grant
// the node holds: it asks once, finishes once its service deploys, reports success, and holds no grant.
func TestNodeKeepsItsGrantThroughContinueAsNewInPhaseOne(t *testing.T) {
	h := &heldNode{}
	first := h.run(t, func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1}) }, time.Second)
		env.RegisterDelayedCallback(func() { env.SetContinueAsNewSuggested(true) }, 30*time.Minute)
	})
	first.ExecuteWorkflow("OpenStackDataPlaneNode", object.Input{ObjectRef: DataPlaneNodeRef("openstack", "n1")})
	next, ok := objecttest.Carried(first.GetWorkflowError())
	require.True(t, ok, "the first run continues as new: %v", first.GetWorkflowError())
	require.True(t, next.Carry.Resume, "cut short in phase 1, the node resumes in the next run")
	require.Equal(t, 1, h.requests)
	require.Zero(t, h.succeeded)

	second := h.run(t, func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterDelayedCallback(func() { h.serviceReady = true }, 10*time.Minute)
		// Whatever happened, the node is deleted in the end, so a stuck run cannot hang the test.
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(lifecycle.SignalDelete, nil) }, 5*time.Hour)
	})
	second.ExecuteWorkflow("OpenStackDataPlaneNode", next)
	settled, ok := objecttest.Carried(second.GetWorkflowError())
	require.True(t, ok, "the node deploys and its settled run continues as new: %v", second.GetWorkflowError())
	require.Equal(t, 1, h.requests, "the node asked its data plane once")
	require.Equal(t, 1, h.succeeded, "the node deployed under its grant and said so")
	var rec edpmNodeRecord
	require.NoError(t, json.Unmarshal(settled.Carry.Data, &rec))
	require.Nil(t, rec.Held, "a deployed node holds no grant")
	require.EqualValues(t, 1, rec.DeployedGeneration)
}

// A node whose role names an OVN southbound database runs the ovn step after phase 0's playbooks; deleted,
// it runs the ovn removal playbook after its service CRs are gone and deletes what Neutron still lists of
// its host's agents, in the cloud its compute joined: the Neutron of its cell's Nova, reached with the
// cell's Secret (a cell being deleted too), else the namespace's clouds Secret.
func TestNodeJoinsOVNAndLeavesItWhenDeleted(t *testing.T) {
	cell := func(name, cellName, secret string, deleting bool) kube.ListedObject {
		spec, err := json.Marshal(map[string]string{"cellName": cellName, "secret": secret})
		require.NoError(t, err)
		return kube.ListedObject{Ref: NovaCellRef("openstack", name), Object: kube.Object{Exists: true, Deleting: deleting, Spec: spec}}
	}
	def := openstack.CloudSecret{Namespace: "openstack", Name: openstack.DefaultCloudsSecret}
	tests := []struct {
		name    string
		compute []byte
		cells   []kube.ListedObject
		refused string
		want    []openstack.CloudSecret
	}{
		{name: "its cell's cloud", compute: []byte(`{"cellName":"cell1"}`),
			cells: []kube.ListedObject{cell("other-cell1", "cell9", "other-secret", false), cell("nova-cell1", "cell1", "nova-secret", false)},
			want:  []openstack.CloudSecret{openstack.ServiceCloud("openstack", "nova-secret", "")}},
		{name: "a cell being deleted with it", compute: []byte(`{"cellName":"nova-cell1"}`),
			cells: []kube.ListedObject{cell("nova-cell1", "cell1", "nova-secret", true)},
			want:  []openstack.CloudSecret{openstack.ServiceCloud("openstack", "nova-secret", "")}},
		{name: "its cell's credentials gone with its Nova", compute: []byte(`{"cellName":"cell1"}`),
			cells: []kube.ListedObject{cell("nova-cell1", "cell1", "nova-secret", true)}, refused: "nova-secret",
			want: []openstack.CloudSecret{openstack.ServiceCloud("openstack", "nova-secret", ""), def}},
		{name: "no compute", want: []openstack.CloudSecret{def}},
		{name: "its cell gone", compute: []byte(`{"cellName":"cell1"}`), want: []openstack.CloudSecret{def}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &heldNode{serviceReady: true, roleVars: map[string]apiextensionsv1.JSON{OVNSouthboundVar: {Raw: []byte(`"tcp:198.51.100.1:6642"`)}},
				computeSpec: tc.compute, cells: tc.cells, refused: tc.refused}
			var want []openstack.NetworkAgentInput
			for _, c := range tc.want {
				want = append(want, openstack.NetworkAgentInput{Cloud: c, Host: "n1"})
			}
			nodeJoinsAndLeavesOVN(t, h, want)
		})
	}
}

func nodeJoinsAndLeavesOVN(t *testing.T, h *heldNode, want []openstack.NetworkAgentInput) {
	first := h.run(t, func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1}) }, time.Second)
	})
	first.ExecuteWorkflow("OpenStackDataPlaneNode", object.Input{ObjectRef: DataPlaneNodeRef("openstack", "n1")})
	next, ok := objecttest.Carried(first.GetWorkflowError())
	require.True(t, ok, "the node deploys and its settled run continues as new: %v", first.GetWorkflowError())
	require.Equal(t, []string{"bootstrap.yml", "configure-network.yml", "configure-os.yml", "ovn.yml"}, h.playbooks)
	require.Empty(t, h.agentDeletes)

	second := h.run(t, func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(lifecycle.SignalDelete, nil) }, time.Second)
	})
	second.ExecuteWorkflow("OpenStackDataPlaneNode", next)
	require.True(t, second.IsWorkflowCompleted())
	require.NoError(t, second.GetWorkflowError())
	require.Equal(t, "ovn-remove.yml", h.playbooks[len(h.playbooks)-1], "the chassis goes with the node")
	require.Equal(t, want, h.agentDeletes)
}

// A deploying node looks at its SSH key and its data planes while its inventory and service CRs are
// written, and writes those side by side: its start-up is one round of activities, not five; its reads
// of Kubernetes objects do not queue on the Kubernetes queue.
func TestNodeReadsAheadWhileItWrites(t *testing.T) {
	h := &heldNode{serviceReady: true, applyDelay: time.Minute}
	var events, local []string
	first := h.run(t, func(env *testsuite.TestWorkflowEnvironment) {
		env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
			events = append(events, "start "+info.ActivityType.Name)
		})
		env.SetOnActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, _ error) {
			events = append(events, "done "+info.ActivityType.Name)
		})
		// Its reads of Kubernetes objects are the workflow worker's, local.
		env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) {
			events = append(events, "start "+info.ActivityType.Name)
			local = append(local, info.ActivityType.Name)
		})
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1}) }, time.Second)
	})
	first.ExecuteWorkflow("OpenStackDataPlaneNode", object.Input{ObjectRef: DataPlaneNodeRef("openstack", "n1")})
	_, ok := objecttest.Carried(first.GetWorkflowError())
	require.True(t, ok, "the node deploys and its settled run continues as new: %v", first.GetWorkflowError())
	require.Subset(t, local, []string{"GetObject", "ListObjects"}, "its object, its role and its data planes read locally")
	firstDone := slices.Index(events, "done ApplyObject")
	require.Positive(t, firstDone, "%v", events)
	before := events[:firstDone]
	for _, want := range []string{"start CheckSecret", "start ListObjects"} {
		require.Contains(t, before, want, "read while the writes run: %v", events)
	}
	// The inventory and the node's nova-compute service CR.
	require.Equal(t, 2, countBefore(before, "start ApplyObject"), "every write starts before the first ends: %v", events)
	require.Equal(t, []string{"bootstrap.yml", "configure-network.yml", "configure-os.yml"}, h.playbooks)
}

// A data plane grants the members it lists at its start without being asked: a node whose grant came
// while it was still writing its inventory deploys under it and asks for nothing.
func TestNodeGrantedBeforeItAsksDoesNotAsk(t *testing.T) {
	h := &heldNode{serviceReady: true, applyDelay: time.Minute}
	first := h.run(t, func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1}) }, time.Second)
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalEDPMGrant, EDPMGrant{DataPlane: h.dpID}) }, 2*time.Second)
	})
	first.ExecuteWorkflow("OpenStackDataPlaneNode", object.Input{ObjectRef: DataPlaneNodeRef("openstack", "n1")})
	_, ok := objecttest.Carried(first.GetWorkflowError())
	require.True(t, ok, "the node deploys and its settled run continues as new: %v", first.GetWorkflowError())
	require.Zero(t, h.requests, "granted already, the node did not ask")
	require.Zero(t, h.refreshes)
	require.Equal(t, 1, h.succeeded, "the node deployed under the grant and said so")
	require.Equal(t, []string{"bootstrap.yml", "configure-network.yml", "configure-os.yml"}, h.playbooks)
}

func countBefore(events []string, e string) int {
	n := 0
	for _, x := range events {
		if x == e {
			n++
		}
	}
	return n
}
