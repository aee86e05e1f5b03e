package controlplane

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stackflow/stackflow/activities/helm"
)

func TestControlPlaneGraphIsValidAndOrdered(t *testing.T) {
	require.NoError(t, ControlPlane.Validate())
	waves, err := ControlPlane.Waves([]string{"mariadb", "rabbitmq", "memcached", "keystone", "glance", "placement", "nova", "neutron", "horizon"})
	require.NoError(t, err)
	require.Equal(t, [][]string{
		{"mariadb", "memcached", "rabbitmq"},
		{"keystone"},
		{"glance", "placement"},
		{"neutron", "nova"},
		{"horizon"},
	}, waves)
}

func TestGraphValidateInstallsBesideDirectDependenciesOnly(t *testing.T) {
	g := Graph{{Name: "a"}, {Name: "b", DependsOn: []string{"a"}}, {Name: "c", DependsOn: []string{"b"}, InstallsBeside: []string{"a"}}}
	require.EqualError(t, g.Validate(), "component c installs beside a, which it does not depend on")
	g[2].InstallsBeside = []string{"b"}
	require.NoError(t, g.Validate())
}

func TestGraphWaves(t *testing.T) {
	g := Graph{
		{Name: "a"},
		{Name: "b", DependsOn: []string{"a"}},
		{Name: "c", DependsOn: []string{"b"}},
		{Name: "d", DependsOn: []string{"a"}},
	}
	for _, tc := range []struct {
		name    string
		graph   Graph
		only    []string
		want    [][]string
		wantErr string
	}{
		{name: "all", graph: g, want: [][]string{{"a"}, {"b", "d"}, {"c"}}},
		{name: "subset keeps order through left-out components", graph: g, only: []string{"c", "a"}, want: [][]string{{"a"}, {"c"}}},
		{name: "independent subset is one wave", graph: g, only: []string{"d", "b"}, want: [][]string{{"b", "d"}}},
		{name: "empty subset", graph: g, only: []string{}, want: [][]string{}},
		{name: "cycle", graph: Graph{{Name: "x", DependsOn: []string{"y"}}, {Name: "y", DependsOn: []string{"x"}}}, wantErr: "component dependency cycle: x → y → x"},
		{name: "self cycle", graph: Graph{{Name: "x", DependsOn: []string{"x"}}}, wantErr: "cycle: x → x"},
		{name: "unknown dependency", graph: Graph{{Name: "x", DependsOn: []string{"nope"}}}, wantErr: "component x depends on unknown component nope"},
		{name: "unknown component asked", graph: g, only: []string{"zz"}, wantErr: "unknown component zz"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.graph.Waves(tc.only)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, len(tc.want), len(got))
			for i := range tc.want {
				require.Equal(t, tc.want[i], got[i])
			}
		})
	}
}

func enabled(b bool) *bool { return &b }

func testProfile(version string, extra map[string]ComponentProfile) map[string]ComponentProfile {
	p := map[string]ComponentProfile{}
	for _, n := range []string{"mariadb", "rabbitmq", "memcached", "keystone", "glance", "placement", "nova", "neutron", "horizon"} {
		p[n] = ComponentProfile{Chart: &ChartRef{Repository: "http://127.0.0.1:1/charts", Name: n, Version: version}}
	}
	for n, c := range extra {
		p[n] = mergeComponent(p[n], c)
	}
	return p
}

func deployedFrom(t *testing.T, r map[string]RenderedComponent) map[string]helm.ReleaseInfo {
	t.Helper()
	out := map[string]helm.ReleaseInfo{}
	for n, c := range r {
		if c.Enabled {
			out[n] = helm.ReleaseInfo{Name: n, Exists: true, Revision: 1, Status: helm.ReleaseDeployed, ChartVersion: c.Chart.Version, ValuesHash: c.ValuesHash}
		}
	}
	return out
}

func TestPlanRollout(t *testing.T) {
	base, err := RenderComponents(ControlPlane, testProfile("0.1.0", nil))
	require.NoError(t, err)
	deployed := deployedFrom(t, base)

	render := func(extra map[string]ComponentProfile) map[string]RenderedComponent {
		r, err := RenderComponents(ControlPlane, testProfile("0.1.0", extra))
		require.NoError(t, err)
		return r
	}
	for _, tc := range []struct {
		name      string
		rendered  map[string]RenderedComponent
		deployed  map[string]helm.ReleaseInfo
		wantWaves [][]string
		wantNeeds map[string][]string
		remove    []string
	}{
		{name: "fresh cluster rolls everything in graph order", rendered: base, deployed: nil,
			wantWaves: [][]string{{"mariadb", "memcached", "rabbitmq"}, {"keystone"}, {"glance", "placement"}, {"neutron", "nova"}, {"horizon"}}},
		{name: "nothing changed", rendered: base, deployed: deployed},
		{name: "nova config change rolls only nova",
			rendered:  render(map[string]ComponentProfile{"nova": {Config: map[string]string{"nova.conf": "[DEFAULT]\ndebug = true\n"}}}),
			deployed:  deployed,
			wantWaves: [][]string{{"nova"}}, wantNeeds: map[string][]string{"nova": {}}},
		{name: "keystone change restarts horizon (declared) but not glance",
			rendered:  render(map[string]ComponentProfile{"keystone": {Replicas: map[string]int{"api": 3}}}),
			deployed:  deployed,
			wantWaves: [][]string{{"keystone"}, {"horizon"}}, wantNeeds: map[string][]string{"keystone": {}, "horizon": {"keystone"}}},
		{name: "pending release rolls again",
			rendered: base,
			deployed: func() map[string]helm.ReleaseInfo {
				d := deployedFrom(t, base)
				g := d["glance"]
				g.Status = "pending-upgrade"
				d["glance"] = g
				return d
			}(),
			wantWaves: [][]string{{"glance"}}},
		{name: "disabled component is removed",
			rendered:  render(map[string]ComponentProfile{"horizon": {Enabled: enabled(false)}}),
			deployed:  deployed,
			remove:    []string{"horizon"},
			wantWaves: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := PlanRollout(ControlPlane, tc.rendered, tc.deployed)
			require.NoError(t, err)
			require.Equal(t, tc.wantWaves, plan.Waves)
			require.Equal(t, tc.remove, plan.Remove)
			for n, want := range tc.wantNeeds {
				require.Equal(t, want, plan.Needs[n], "needs of %s", n)
			}
			for _, n := range plan.Components() {
				require.NotEmpty(t, plan.Reasons[n])
			}
		})
	}
}

// A preview is one update result: its diffs stay within the bound, in plan order, and the components
// past it keep their header and say their diff was left out.
func TestBoundPreview(t *testing.T) {
	d := func(c string, n int) helm.DiffResult {
		return helm.DiffResult{Component: c, From: "none", To: "0.1.0:h", Diff: strings.Repeat("x", n), Lines: n}
	}
	got := BoundPreview([]helm.DiffResult{d("keystone", 400), d("glance", 400), d("nova", 400)}, 1000)
	require.Len(t, got, 3)
	require.Equal(t, 400, len(got[0].Diff))
	require.Equal(t, 400, len(got[1].Diff))
	require.True(t, got[2].Truncated)
	require.Contains(t, got[2].Diff, "left out")
	require.Equal(t, "nova", got[2].Component)
	require.Equal(t, 400, got[2].Lines, "the header still counts the lines")
	total := 0
	for _, x := range got {
		total += len(x.Diff)
	}
	require.LessOrEqual(t, total, 1000)
}

// Teardown removes what a configuration recorded, and nothing when it recorded nothing (Waves of no
// list would be every component, in no namespace).
func TestTeardownWaves(t *testing.T) {
	none, err := teardownWaves(configRecord{})
	require.NoError(t, err)
	require.Empty(t, none)
	waves, err := teardownWaves(configRecord{Namespace: "openstack", Releases: []string{"keystone", "mariadb"}})
	require.NoError(t, err)
	require.Equal(t, [][]string{{"mariadb"}, {"keystone"}}, waves)
}
