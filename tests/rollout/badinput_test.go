package rollout

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/workflows/controlplane"
)

// TestRolloutBadInputs gives configurations a bad input each, side by side, with the real bridge,
// worker and Helm: an unreachable chart repository, a profile inheritance cycle and values the chart
// cannot render. Each fails with its own reason and a message naming what is wrong, installs nothing it
// should not, leaves the components it could roll out Deployed, and is deleted (its teardown removes
// what it recorded, nothing when it recorded nothing). A profile naming an unknown component is refused
// by the API server.
func TestRolloutBadInputs(t *testing.T) {
	startBridge(t, "bridge-bad", servedKinds)
	startWorker(t, "worker-bad", t.TempDir())
	chart := func(repo, name string) map[string]any {
		return map[string]any{"chart": map[string]any{"repository": repo, "name": name, "version": "0.1.0"}}
	}
	type badCase struct {
		name     string
		profiles map[string]map[string]any // profile suffix → spec; the first listed is the default
		first    string
		reason   string
		// message lists what the Ready message names; the last is also in the failed components'.
		message []string
		// deployed and failed are component states the status shows afterwards.
		deployed, failed []string
	}
	cases := []badCase{
		{name: "repo", first: "repo", reason: "HelmChartRepositoryUnreachable",
			profiles: map[string]map[string]any{"repo": {"components": map[string]any{
				"memcached": chart(charts.URL, "memcached"),
				// A port nothing listens on: connection refused, retried, then reported.
				"rabbitmq": chart("http://127.0.0.1:9/charts", "rabbitmq"),
			}}},
			message: []string{"rabbitmq", "127.0.0.1:9"}, deployed: []string{"memcached"}, failed: []string{"rabbitmq"}},
		{name: "cycle", first: "cycle-a", reason: controlplane.ReasonProfileCycle,
			profiles: map[string]map[string]any{
				"cycle-a": {"from": env.Run + "-bad-cycle-b", "components": map[string]any{"memcached": chart(charts.URL, "memcached")}},
				"cycle-b": {"from": env.Run + "-bad-cycle-a"},
			},
			message: []string{"profile inheritance cycle", "cycle-a", "cycle-b"}},
		{name: "render", first: "render", reason: "HelmRenderFailed",
			profiles: map[string]map[string]any{"render": {"components": map[string]any{
				"memcached": func() map[string]any {
					c := chart(charts.URL, "memcached")
					c["values"] = map[string]any{"pod": "not a map"}
					return c
				}(),
			}}},
			message: []string{"memcached", "template:"}, failed: []string{"memcached"}},
	}
	for _, c := range cases {
		for suffix, spec := range c.profiles {
			name := env.Run + "-bad-" + suffix
			createObject(t, gvrProfile, "OpenStackCloudConfigurationProfile", name, spec)
			t.Cleanup(func() { deleteAndWait(t, gvrProfile, name, time.Minute) })
		}
		cfg := env.Run + "-bad-" + c.name
		createObject(t, gvrConfig, "KupenstackConfiguration", cfg, map[string]any{
			"defaultProfile": env.Run + "-bad-" + c.first, "releaseNamespace": releaseNamespace(t, "bad-"+c.name)})
		t.Cleanup(func() { deleteAndWait(t, gvrConfig, cfg, 3*time.Minute) })
	}
	// An unknown component never reaches a workflow: the API server refuses the profile.
	t.Run("unknown", func(t *testing.T) {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kupenstack.io/v1alpha1", "kind": "OpenStackCloudConfigurationProfile",
			"metadata": map[string]any{"name": env.Run + "-bad-unknown", "labels": map[string]any{"stackflow.io/test-run": env.Run}},
			"spec": map[string]any{"components": map[string]any{
				"memcached": chart(charts.URL, "memcached"), "swift": chart(charts.URL, "swift"),
			}},
		}}
		_, err := env.Dyn.Resource(gvrProfile).Create(context.Background(), u, metav1.CreateOptions{})
		require.Error(t, err, "a profile with an unknown component is refused")
		require.Contains(t, err.Error(), "components keys must be known components")
	})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := env.Run + "-bad-" + c.name
			s := waitConfig(t, cfg, 4*time.Minute, "configuration failed with "+c.reason, func(s configStatus, _ int64) bool {
				return s.Phase == lifecycle.PhaseFailed
			})
			ready := s.condition(lifecycle.ConditionReady)
			require.Equal(t, metav1.ConditionFalse, ready.Status)
			require.Equal(t, c.reason, ready.Reason, ready.Message)
			comps := s.condition(controlplane.ConditionComponentsReady)
			require.Equal(t, c.reason, comps.Reason, "ComponentsReady says why too")
			for _, m := range c.message {
				require.Contains(t, ready.Message, m)
			}
			for _, name := range c.deployed {
				require.Equal(t, controlplane.ComponentDeployed, s.component(name).State, name)
			}
			for _, name := range c.failed {
				require.Equal(t, controlplane.ComponentFailed, s.component(name).State, name)
				last := c.message[len(c.message)-1]
				require.True(t, strings.Contains(s.component(name).Message, last), s.component(name).Message)
			}
			rels := releases(t, env.Run+"-bad-"+c.name)
			for _, name := range components {
				if !contains(c.deployed, name) {
					require.False(t, rels[name].Exists, "%s: no release %s is left", c.name, name)
				}
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
