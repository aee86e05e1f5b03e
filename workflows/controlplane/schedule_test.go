package controlplane

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/activities/helm"
)

// TestScheduleRolloutStartsEachComponentOnItsOwnDependencies walks the control plane's nine test
// components through a rollout where the slow mariadb holds keystone back while independent memcached
// and rabbitmq finish: nothing waits for a whole level.
func TestScheduleRollout(t *testing.T) {
	names := []string{"mariadb", "rabbitmq", "memcached", "keystone", "glance", "placement", "nova", "neutron", "horizon"}
	rendered := map[string]RenderedComponent{}
	for _, n := range names {
		rendered[n] = RenderedComponent{Enabled: true, ValuesHash: "h"}
	}
	plan, err := PlanRollout(ControlPlane, rendered, map[string]helm.ReleaseInfo{})
	require.NoError(t, err)
	require.Equal(t, map[string][]string{"glance": {"keystone"}, "placement": {"keystone"}, "neutron": {"keystone", "placement"}}, plan.Beside)
	const (
		P = ComponentPending
		R = ComponentDeploying
		D = ComponentDeployed
		F = ComponentFailed
		B = ComponentBlocked
	)
	for _, tc := range []struct {
		name    string
		state   map[string]string
		applied map[string]bool
		start   []string
		blocked map[string]string
	}{
		{name: "roots first", state: map[string]string{},
			start: []string{"mariadb", "memcached", "rabbitmq"}},
		{name: "a component waits for all its own dependencies", state: map[string]string{"mariadb": R, "memcached": D, "rabbitmq": D}},
		{name: "glance and placement as soon as keystone is", state: map[string]string{"mariadb": D, "memcached": D, "rabbitmq": D, "keystone": D},
			start: []string{"glance", "placement"}},
		{name: "glance and placement install beside keystone once its release is applied", state: map[string]string{"mariadb": D, "memcached": D, "rabbitmq": D, "keystone": R},
			applied: map[string]bool{"keystone": true}, start: []string{"glance", "placement"}},
		{name: "not before keystone's release is applied", state: map[string]string{"mariadb": D, "memcached": D, "rabbitmq": D, "keystone": R},
			applied: map[string]bool{"mariadb": true}},
		{name: "an applied release counts only for what installs beside it: nova waits for glance Ready", state: map[string]string{"mariadb": D, "memcached": D, "rabbitmq": D, "keystone": D, "glance": R, "placement": D, "neutron": D},
			applied: map[string]bool{"glance": true}},
		{name: "a failed keystone blocks what could have installed beside it", state: map[string]string{"mariadb": D, "memcached": D, "rabbitmq": D, "keystone": F},
			applied: map[string]bool{"keystone": true}, blocked: map[string]string{"glance": "keystone", "placement": "keystone", "nova": "keystone", "neutron": "keystone", "horizon": "keystone"}},
		{name: "neutron installs beside keystone and placement once both releases are applied", state: map[string]string{"mariadb": D, "memcached": D, "rabbitmq": D, "keystone": R, "glance": R, "placement": R},
			applied: map[string]bool{"keystone": true, "placement": true}, start: []string{"neutron"}},
		{name: "not before placement's release is applied", state: map[string]string{"mariadb": D, "memcached": D, "rabbitmq": D, "keystone": R, "glance": R, "placement": R},
			applied: map[string]bool{"keystone": true}},
		{name: "a failed placement blocks neutron started beside it", state: map[string]string{"mariadb": D, "memcached": D, "rabbitmq": D, "keystone": D, "glance": D, "placement": F},
			applied: map[string]bool{"placement": true}, blocked: map[string]string{"neutron": "placement", "nova": "placement", "horizon": "placement"}},
		{name: "neutron needs placement only, not glance", state: map[string]string{"mariadb": D, "memcached": D, "rabbitmq": D, "keystone": D, "glance": R, "placement": D},
			start: []string{"neutron"}},
		{name: "nova needs glance too", state: map[string]string{"mariadb": D, "memcached": D, "rabbitmq": D, "keystone": D, "glance": D, "placement": D, "neutron": R},
			start: []string{"nova"}},
		{name: "what runs is not started again", state: map[string]string{"mariadb": R, "memcached": R, "rabbitmq": P},
			start: []string{"rabbitmq"}},
		{name: "a failure blocks every dependent, directly or not, and nothing else",
			state: map[string]string{"mariadb": D, "memcached": D, "rabbitmq": D, "keystone": D, "glance": F, "placement": D},
			start: []string{"neutron"}, blocked: map[string]string{"nova": "glance", "horizon": "glance"}},
		{name: "blocked components stay blocked", state: map[string]string{"mariadb": F, "keystone": B},
			start: []string{"memcached", "rabbitmq"}, blocked: map[string]string{"glance": "mariadb", "placement": "mariadb", "nova": "mariadb", "neutron": "mariadb", "horizon": "mariadb"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ScheduleRollout(plan, tc.state, tc.applied)
			require.Equal(t, tc.start, got.Start)
			require.Equal(t, tc.blocked, got.Blocked)
		})
	}
}

// TestBesideAsRecorded: a run recorded before neutron installed beside keystone and placement (its
// version change at DefaultVersion) keeps starting neutron at their Ready; a new run installs it beside.
func TestBesideAsRecorded(t *testing.T) {
	beside := map[string][]string{"glance": {"keystone"}, "neutron": {"keystone", "placement"}, "placement": {"keystone"}}
	for _, tc := range []struct {
		name    string
		version workflow.Version
		want    map[string][]string
	}{
		{name: "new run", version: 1, want: beside},
		{name: "run recorded before the change", version: workflow.DefaultVersion,
			want: map[string][]string{"glance": {"keystone"}, "placement": {"keystone"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ts testsuite.WorkflowTestSuite
			env := ts.NewTestWorkflowEnvironment()
			env.OnGetVersion(ChangeNeutronBeside, workflow.DefaultVersion, 1).Return(tc.version)
			env.ExecuteWorkflow(func(ctx workflow.Context) (map[string][]string, error) {
				return besideAsRecorded(ctx, ControlPlane, beside), nil
			})
			require.NoError(t, env.GetWorkflowError())
			var got map[string][]string
			require.NoError(t, env.GetWorkflowResult(&got))
			require.Equal(t, tc.want, got)
		})
	}
}
