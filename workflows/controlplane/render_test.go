package controlplane

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/activities/helm"
	kupenstackv1alpha1 "github.com/stackflow/stackflow/api/kupenstack/v1alpha1"
)

// The API type is the one source of a profile's spec; ProfileSpec is the form the workflows decode it
// into. Every field set in the API type survives API → ProfileSpec → API, and a candidate a person
// sends to the preview update in the API's shape decodes the same.
func TestProfileSpecCarriesTheAPIsJSON(t *testing.T) {
	on := true
	api := kupenstackv1alpha1.OpenStackCloudConfigurationProfileSpec{
		From: "base",
		Components: map[string]kupenstackv1alpha1.ComponentProfile{"nova": {
			Enabled:          &on,
			External:         &on,
			Chart:            &kupenstackv1alpha1.ChartRef{Repository: "http://charts", Name: "nova", Version: "0.3.1"},
			Values:           &apiextensionsv1.JSON{Raw: []byte(`{"conf":{"nova":{"DEFAULT":{"debug":true}}},"pod":{"replicas":{"api":2}}}`)},
			Config:           map[string]kupenstackv1alpha1.ConfigSnippet{"nova.conf": "[DEFAULT]\ndebug = True\n"},
			Images:           map[string]kupenstackv1alpha1.ImageReference{"nova_api": "registry/nova:1"},
			Replicas:         map[string]int32{"api": 3},
			ReadinessTimeout: &metav1.Duration{Duration: 90 * time.Second},
		}},
	}
	in, err := json.Marshal(api)
	require.NoError(t, err)
	var decoded ProfileSpec
	require.NoError(t, json.Unmarshal(in, &decoded))
	out, err := json.Marshal(decoded)
	require.NoError(t, err)
	require.JSONEq(t, string(in), string(out))
	var back kupenstackv1alpha1.OpenStackCloudConfigurationProfileSpec
	require.NoError(t, json.Unmarshal(out, &back))
	require.Equal(t, api.Components["nova"].ReadinessTimeout, back.Components["nova"].ReadinessTimeout)
	require.Equal(t, api.Components["nova"].Chart, back.Components["nova"].Chart)
	// What the renderer reads of it.
	merged := MergeProfiles([]ProfileSpec{decoded})
	d, err := time.ParseDuration(merged["nova"].ReadinessTimeout)
	require.NoError(t, err)
	require.Equal(t, 90*time.Second, d)
	require.Equal(t, 3, merged["nova"].Replicas["api"])
}

func TestProfileChain(t *testing.T) {
	for _, tc := range []struct {
		name      string
		start     string
		read      map[string]ProfileSpec
		wantChain []string
		wantNext  string
		wantErr   string
	}{
		{name: "root only", start: "a", read: map[string]ProfileSpec{"a": {}}, wantChain: []string{"a"}},
		{name: "parent to read", start: "a", read: map[string]ProfileSpec{"a": {From: "b"}}, wantChain: []string{"a"}, wantNext: "b"},
		{name: "nothing read yet", start: "a", read: map[string]ProfileSpec{}, wantNext: "a"},
		{name: "three levels", start: "a", read: map[string]ProfileSpec{"a": {From: "b"}, "b": {From: "c"}, "c": {}}, wantChain: []string{"a", "b", "c"}},
		{name: "cycle", start: "a", read: map[string]ProfileSpec{"a": {From: "b"}, "b": {From: "a"}}, wantErr: "profile inheritance cycle: a → b → a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chain, next, err := ProfileChain(tc.start, tc.read)
			if tc.wantErr != "" {
				require.EqualError(t, err, tc.wantErr)
				var pe *ProfileError
				require.True(t, errors.As(err, &pe))
				require.Equal(t, ReasonProfileCycle, pe.Reason)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantChain, chain)
			require.Equal(t, tc.wantNext, next)
		})
	}
}

func TestMergeProfilesChildWins(t *testing.T) {
	parent := ProfileSpec{Components: map[string]ComponentProfile{
		"nova": {
			Chart:    &ChartRef{Repository: "http://repo", Name: "nova", Version: "0.1.0"},
			Values:   map[string]any{"conf": map[string]any{"nova": map[string]any{"DEFAULT": map[string]any{"debug": "false", "workers": "2"}}}, "a": 1},
			Config:   map[string]string{"nova.conf": "[DEFAULT]\ncpu_allocation_ratio = 4.0\n"},
			Images:   map[string]string{"nova_api": "nova:zed"},
			Replicas: map[string]int{"api": 1, "conductor": 1},
		},
		"glance": {Chart: &ChartRef{Repository: "http://repo", Name: "glance", Version: "0.1.0"}},
	}}
	child := ProfileSpec{From: "parent", Components: map[string]ComponentProfile{
		"nova": {
			Chart:    &ChartRef{Version: "0.2.0"},
			Values:   map[string]any{"conf": map[string]any{"nova": map[string]any{"DEFAULT": map[string]any{"debug": "true"}}}},
			Config:   map[string]string{"nova.conf": "[DEFAULT]\ncpu_allocation_ratio = 8.0\n"},
			Replicas: map[string]int{"api": 3},
		},
		"glance": {Enabled: enabled(false)},
	}}
	m := MergeProfiles([]ProfileSpec{child, parent})
	nova := m["nova"]
	require.Equal(t, ChartRef{Repository: "http://repo", Name: "nova", Version: "0.2.0"}, *nova.Chart)
	require.Equal(t, map[string]any{"debug": "true", "workers": "2"}, nova.Values["conf"].(map[string]any)["nova"].(map[string]any)["DEFAULT"])
	require.Equal(t, 1, nova.Values["a"])
	require.Equal(t, map[string]int{"api": 3, "conductor": 1}, nova.Replicas)
	require.Equal(t, map[string]string{"nova_api": "nova:zed"}, nova.Images)
	require.False(t, *m["glance"].Enabled)
	// The parent is untouched by the merge.
	require.Equal(t, "0.1.0", parent.Components["nova"].Chart.Version)
	require.Equal(t, map[string]int{"api": 1, "conductor": 1}, parent.Components["nova"].Replicas)

	r, err := RenderComponents(ControlPlane, map[string]ComponentProfile{"nova": nova, "glance": {Enabled: enabled(false)}})
	// nova depends on glance, which the child disabled.
	require.ErrorContains(t, err, "component nova: depends on glance, which is disabled")
	require.Nil(t, r)
}

// An external component is the site's: it renders no release, satisfies its dependents without a chart,
// and a release of it deployed before is planned for removal.
func TestExternalComponentSatisfiesDependencies(t *testing.T) {
	repo := func(n string) *ChartRef { return &ChartRef{Repository: "http://repo", Name: n, Version: "0.1.0"} }
	parent := ProfileSpec{Components: map[string]ComponentProfile{
		"mariadb":   {Chart: repo("mariadb")},
		"rabbitmq":  {External: enabled(true)},
		"memcached": {External: enabled(true)},
		"keystone":  {Chart: repo("keystone")},
	}}
	child := ProfileSpec{From: "parent", Components: map[string]ComponentProfile{"mariadb": {External: enabled(true)}}}
	merged := MergeProfiles([]ProfileSpec{child, parent})
	r, err := RenderComponents(ControlPlane, merged)
	require.NoError(t, err)
	require.True(t, r["keystone"].Enabled)
	for _, name := range []string{"mariadb", "rabbitmq", "memcached"} {
		require.True(t, r[name].External, name)
		require.False(t, r[name].Enabled, "%s has no release", name)
	}
	deployed := map[string]helm.ReleaseInfo{"mariadb": {Exists: true, Status: helm.ReleaseDeployed, ValuesHash: "0123456789abcdef"}}
	plan, err := PlanRollout(ControlPlane, r, deployed)
	require.NoError(t, err)
	require.Equal(t, [][]string{{"keystone"}}, plan.Waves, "keystone rolls out at once")
	require.Equal(t, []string{"mariadb"}, plan.Remove)
	require.Equal(t, "external in the profile (the site provides it)", plan.Reasons["mariadb"])

	// A child that takes the component back needs its chart.
	back := ProfileSpec{From: "child", Components: map[string]ComponentProfile{"rabbitmq": {External: enabled(false)}}}
	_, err = RenderComponents(ControlPlane, MergeProfiles([]ProfileSpec{back, child, parent}))
	require.ErrorContains(t, err, "component rabbitmq: chart repository, name and version are required")
}

func TestRenderComponentInOpenStackHelmConventions(t *testing.T) {
	p := testProfile("0.1.0", map[string]ComponentProfile{"nova": {
		Values:   map[string]any{"conf": map[string]any{"nova": map[string]any{"DEFAULT": map[string]any{"debug": "false", "x": "1"}}}},
		Config:   map[string]string{"nova.conf": "[DEFAULT]\ndebug = true\n"},
		Images:   map[string]string{"nova_api": "registry.local/nova:zed"},
		Replicas: map[string]int{"api": 2},
	}})
	r, err := RenderComponents(ControlPlane, p)
	require.NoError(t, err)
	nova := r["nova"]
	require.True(t, nova.Enabled)
	v := nova.Values
	// The config snippet wins over values.
	require.Equal(t, map[string]any{"debug": "true", "x": "1"}, v["conf"].(map[string]any)["nova"].(map[string]any)["DEFAULT"])
	require.Equal(t, "registry.local/nova:zed", v["images"].(map[string]any)["tags"].(map[string]any)["nova_api"])
	require.EqualValues(t, 2, v["pod"].(map[string]any)["replicas"].(map[string]any)["api"])
	labels := v["labels"].(map[string]any)
	require.Equal(t, map[string]any{"node_selector_key": LabelControlPlane, "node_selector_value": "enabled"}, labels["api"])
	require.Equal(t, map[string]any{"node_selector_key": LabelCompute, "node_selector_value": "enabled"}, labels["compute"])
	require.Len(t, nova.ValuesHash, 16)
	require.Equal(t, DefaultReadinessTimeout, nova.ReadinessTimeout)

	// Same input, same hash; any change, another hash.
	again, err := RenderComponents(ControlPlane, p)
	require.NoError(t, err)
	require.Equal(t, nova.ValuesHash, again["nova"].ValuesHash)
	p2 := testProfile("0.1.1", nil)
	other, err := RenderComponents(ControlPlane, p2)
	require.NoError(t, err)
	require.NotEqual(t, r["glance"].ValuesHash, other["glance"].ValuesHash, "a chart version change changes the hash")
	require.NotContains(t, r["nova"].Values, RestartTokenKey)
	require.Contains(t, r["horizon"].Values, RestartTokenKey)
}

func TestRenderRefusesBadProfiles(t *testing.T) {
	for _, tc := range []struct {
		name       string
		profile    map[string]ComponentProfile
		wantReason string
		wantMsg    string
	}{
		{"unknown component", map[string]ComponentProfile{"swift": {}}, ReasonUnknownComponent, "component swift: unknown component"},
		{"missing chart", map[string]ComponentProfile{"mariadb": {}}, ReasonMissingChart, "component mariadb: chart repository, name and version are required"},
		{"bad snippet", testProfile("0.1.0", map[string]ComponentProfile{"glance": {Config: map[string]string{"glance-api.conf": "debug=true"}}}), ReasonInvalidConfig, "component glance: config glance-api.conf: line 1"},
		{"bad timeout", testProfile("0.1.0", map[string]ComponentProfile{"glance": {ReadinessTimeout: "soon"}}), ReasonInvalidConfig, "readinessTimeout"},
		{"dependency disabled", testProfile("0.1.0", map[string]ComponentProfile{"keystone": {Enabled: enabled(false)}}), ReasonDependency, "depends on keystone, which is disabled (enable it, or mark it external"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := RenderComponents(ControlPlane, tc.profile)
			var pe *ProfileError
			require.True(t, errors.As(err, &pe), "got %v", err)
			require.Equal(t, tc.wantReason, pe.Reason)
			require.Contains(t, pe.Msg, tc.wantMsg)
		})
	}
}

func TestDesiredNodeConfiguration(t *testing.T) {
	r, err := RenderComponents(ControlPlane, testProfile("0.1.0", nil))
	require.NoError(t, err)
	compute := DesiredNodeConfiguration(ControlPlane, "default", []string{RoleCompute}, false, r)
	require.Equal(t, map[string]string{LabelCompute: "enabled"}, compute.Labels)
	require.ElementsMatch(t, []string{"nova", "neutron"}, keys(compute.Components))
	require.Equal(t, []string{"compute"}, compute.Components["nova"].Groups)
	control := DesiredNodeConfiguration(ControlPlane, "default", []string{RoleControl}, false, r)
	require.Contains(t, control.Components, "keystone")
	require.Equal(t, []string{"api", "conductor", "job", "scheduler"}, control.Components["nova"].Groups)
	off := DesiredNodeConfiguration(ControlPlane, "default", []string{RoleControl}, true, r)
	require.Empty(t, off.Labels)
	require.Empty(t, off.Components)
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
