package controlplane

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/activities/kube"
	kupenstackv1alpha1 "github.com/stackflow/stackflow/api/kupenstack/v1alpha1"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/workflows/object"
	"github.com/stackflow/stackflow/workflows/object/objecttest"
)

func TestPlanOpenstackNodeStatus(t *testing.T) {
	control := map[string]string{LabelControlPlane: LabelEnabled}
	both := map[string]string{LabelControlPlane: LabelEnabled, LabelCompute: LabelEnabled}
	for _, tc := range []struct {
		name       string
		spec       kupenstackv1alpha1.OpenstackNodeSpec
		node       kube.NodeInfo
		wantStatus string
		wantRoles  []string
	}{
		{"ready control node", kupenstackv1alpha1.OpenstackNodeSpec{}, kube.NodeInfo{Exists: true, Ready: true, Labels: control}, NodeStatusReady, []string{RoleControl}},
		{"labels give both roles, sorted", kupenstackv1alpha1.OpenstackNodeSpec{}, kube.NodeInfo{Exists: true, Ready: true, Labels: both}, NodeStatusReady, []string{RoleCompute, RoleControl}},
		{"spec type wins over labels", kupenstackv1alpha1.OpenstackNodeSpec{Type: RoleCompute, Profile: "default"}, kube.NodeInfo{Exists: true, Ready: true, Labels: control}, NodeStatusReady, []string{RoleCompute}},
		{"not ready", kupenstackv1alpha1.OpenstackNodeSpec{}, kube.NodeInfo{Exists: true}, NodeStatusNotReady, []string{}},
		{"node missing", kupenstackv1alpha1.OpenstackNodeSpec{}, kube.NodeInfo{}, NodeStatusMissing, []string{}},
		{"disabled wins", kupenstackv1alpha1.OpenstackNodeSpec{Disabled: true}, kube.NodeInfo{Exists: true, Ready: true, Labels: control}, NodeStatusDisabled, []string{RoleControl}},
		{"stackflow's own label is no role", kupenstackv1alpha1.OpenstackNodeSpec{}, kube.NodeInfo{Exists: true, Ready: true, Labels: both,
			RoleLabelsManaged: true, SiteRoleLabels: map[string]string{LabelCompute: LabelEnabled}}, NodeStatusReady, []string{RoleCompute}},
		{"no site label, no role", kupenstackv1alpha1.OpenstackNodeSpec{}, kube.NodeInfo{Exists: true, Ready: true, Labels: control,
			RoleLabelsManaged: true, SiteRoleLabels: map[string]string{}}, NodeStatusReady, []string{}},
		{"label not enabled", kupenstackv1alpha1.OpenstackNodeSpec{}, kube.NodeInfo{Exists: true, Ready: true, Labels: map[string]string{LabelCompute: "disabled"}}, NodeStatusReady, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := PlanOpenstackNodeStatus(tc.spec, tc.node)
			require.Equal(t, tc.wantStatus, got.Status)
			require.Equal(t, tc.wantRoles, got.Roles)
			require.Equal(t, tc.spec.Profile, got.Profile)
			require.NotEmpty(t, got.Message)
		})
	}
}

// An OpenstackNode that no configuration types gives its Node back the site's role labels, on a
// reconcile and when it is deleted; a reconcile of a typed node asks for its labels to be managed.
func TestOpenstackNodeGivesTheSiteItsLabelsBack(t *testing.T) {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterActivity(&kube.Kube{})
	env.RegisterWorkflowWithOptions(OpenstackNodeWorkflow, workflow.RegisterOptions{Name: "OpenstackNode"})
	var mu sync.Mutex
	var calls []kube.NodeLabelsInput
	finalizerRemoved := false
	env.OnActivity(kubeActs.GetObject, mock.Anything, mock.Anything).Return(&kube.Object{Exists: true, Generation: 1}, nil)
	// The Node carries a label stackflow set for a configuration that has since let go of it.
	env.OnActivity(kubeActs.GetNode, mock.Anything, mock.Anything).Return(&kube.NodeInfo{Exists: true, Ready: true,
		Labels:            map[string]string{LabelControlPlane: LabelEnabled},
		RoleLabelsManaged: true, SiteRoleLabels: map[string]string{LabelCompute: LabelEnabled}}, nil)
	env.OnActivity(kubeActs.SetNodeLabels, mock.Anything, mock.Anything).Return(func(_ context.Context, in kube.NodeLabelsInput) error {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, in)
		return nil
	})
	env.OnActivity(kubeActs.PatchStatus, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(kubeActs.RemoveFinalizer, mock.Anything, mock.Anything).Return(func(context.Context, lifecycle.ObjectRef) error {
		finalizerRemoved = true
		return nil
	})
	chain := objecttest.New(env)
	env.RegisterDelayedCallback(func() { require.NoError(t, chain.Signal(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})) }, time.Second)
	env.RegisterDelayedCallback(func() {
		st, err := chain.Status()
		require.NoError(t, err)
		require.Equal(t, lifecycle.PhaseReady, st.Phase, "reconciled before the delete")
		require.NoError(t, chain.Signal(lifecycle.SignalDelete, lifecycle.DeleteSignal{}))
	}, time.Minute)
	chain.Execute("OpenstackNode", object.Input{ObjectRef: OpenstackNodeRef("compute-1")})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	want := kube.NodeLabelsInput{Node: "compute-1", Remove: ManagedNodeLabels(), Restore: true}
	require.Equal(t, []kube.NodeLabelsInput{want, want}, calls, "restored on the reconcile, and again (a no-op) on the delete")
	require.True(t, finalizerRemoved, "the teardown finished")
}
