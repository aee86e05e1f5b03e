package controlplane

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stackflow/stackflow/activities/kube"
	kupenstackv1alpha1 "github.com/stackflow/stackflow/api/kupenstack/v1alpha1"
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
