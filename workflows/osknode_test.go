package workflows

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stackflow/stackflow/activities"
)

func TestPlanOpenstackNodeStatus(t *testing.T) {
	control := map[string]string{LabelControlPlane: LabelEnabled}
	both := map[string]string{LabelControlPlane: LabelEnabled, LabelCompute: LabelEnabled}
	for _, tc := range []struct {
		name       string
		spec       OpenstackNodeSpec
		node       activities.NodeInfo
		wantStatus string
		wantRoles  []string
	}{
		{"ready control node", OpenstackNodeSpec{}, activities.NodeInfo{Exists: true, Ready: true, Labels: control}, NodeStatusReady, []string{RoleControl}},
		{"labels give both roles, sorted", OpenstackNodeSpec{}, activities.NodeInfo{Exists: true, Ready: true, Labels: both}, NodeStatusReady, []string{RoleCompute, RoleControl}},
		{"spec type wins over labels", OpenstackNodeSpec{Type: RoleCompute, Profile: "default"}, activities.NodeInfo{Exists: true, Ready: true, Labels: control}, NodeStatusReady, []string{RoleCompute}},
		{"not ready", OpenstackNodeSpec{}, activities.NodeInfo{Exists: true}, NodeStatusNotReady, []string{}},
		{"node missing", OpenstackNodeSpec{}, activities.NodeInfo{}, NodeStatusMissing, []string{}},
		{"disabled wins", OpenstackNodeSpec{Disabled: true}, activities.NodeInfo{Exists: true, Ready: true, Labels: control}, NodeStatusDisabled, []string{RoleControl}},
		{"label not enabled", OpenstackNodeSpec{}, activities.NodeInfo{Exists: true, Ready: true, Labels: map[string]string{LabelCompute: "disabled"}}, NodeStatusReady, []string{}},
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
