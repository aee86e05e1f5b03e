package rbac_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stackflow/stackflow/deploy/rbac"
)

// The chart's rules file is what the code's clients need: regenerate it (go generate ./deploy/rbac) when
// this fails, and review the difference.
func TestRulesFileMatchesTheCode(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	want, accounts, err := rbac.DeriveFile(root)
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(root, rbac.RulesFile))
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "%s is stale: run go generate ./deploy/rbac", rbac.RulesFile)

	// What the derivation must find, whatever else the code grows: these calls are in the code today
	// and losing one would mean the analysis went blind.
	has := func(account string, r rbac.Rule) bool {
		for _, a := range accounts {
			if a.Name != account {
				continue
			}
			for _, x := range a.Rules {
				if x.Scope == r.Scope && x.Group == r.Group && x.Resource == r.Resource {
					for _, v := range r.Verbs {
						if !contains(x.Verbs, v) {
							return false
						}
					}
					return true
				}
			}
		}
		return false
	}
	for _, c := range []struct {
		account string
		rule    rbac.Rule
	}{
		{"bridge", rbac.Rule{Scope: rbac.Release, Group: "coordination.k8s.io", Resource: "leases", Verbs: []string{"get", "create", "update"}}},
		{"bridge", rbac.Rule{Scope: rbac.Watched, Group: "dataplane.openstack.org", Resource: "openstackdataplanenodes", Verbs: []string{"list", "watch", "patch"}}},
		{"bridge", rbac.Rule{Scope: rbac.Cluster, Group: "", Resource: "nodes", Verbs: []string{"list", "watch", "patch"}}},
		{"bridge", rbac.Rule{Scope: rbac.Watched, Group: "", Resource: "events", Verbs: []string{"create", "patch"}}},
		{"worker-ansible", rbac.Rule{Scope: rbac.Watched, Group: "", Resource: "secrets", Verbs: []string{"get"}}},
		{"worker-ansible", rbac.Rule{Scope: rbac.Watched, Group: "", Resource: "configmaps", Verbs: []string{"get"}}},
		{"worker-openstack", rbac.Rule{Scope: rbac.Watched, Group: "", Resource: "secrets", Verbs: []string{"get"}}},
		{"worker-kube", rbac.Rule{Scope: rbac.Cluster, Group: "", Resource: "nodes", Verbs: []string{"get", "patch"}}},
		{"worker-kube", rbac.Rule{Scope: rbac.Watched, Group: "nova.openstack.org", Resource: "novaexternalcomputes/status", Verbs: []string{"update"}}},
		{"worker-kube", rbac.Rule{Scope: rbac.HelmReleases, Group: "apps", Resource: "deployments", Verbs: []string{"get", "create", "patch", "delete"}}},
	} {
		require.True(t, has(c.account, c.rule), "%s lacks %s", c.account, c.rule)
	}
	for _, a := range accounts {
		if a.Name == "worker" {
			// The workflow workers write their objects' status and read objects (local activities), and
			// record Events: they get and list objects and update their status subresource, nothing more.
			require.NotEmpty(t, a.Rules)
			for _, r := range a.Rules {
				switch {
				case r.Resource == "events":
					require.Subset(t, []string{"create", "patch"}, r.Verbs, "worker: %s", r)
				case strings.HasSuffix(r.Resource, "/status"):
					require.Equal(t, []string{"update"}, r.Verbs, "worker: %s", r)
				default:
					require.Subset(t, []string{"get", "list"}, r.Verbs, "worker: %s", r)
					require.NotEqual(t, "secrets", r.Resource, "worker: %s", r)
				}
			}
			require.True(t, has("worker", rbac.Rule{Scope: rbac.Watched, Group: "nova.openstack.org", Resource: "novas/status", Verbs: []string{"update"}}))
		}
		for _, r := range a.Rules {
			// What must never be granted: writing core Nodes beyond labels, or the bridge touching Secrets.
			require.False(t, r.Resource == "nodes" && (contains(r.Verbs, "delete") || contains(r.Verbs, "create")), "%s: %s", a.Name, r)
			require.False(t, a.Name == "bridge" && r.Resource == "secrets", "bridge: %s", r)
			require.False(t, r.Resource == "namespaces" && a.Name == "bridge", "the lease namespace is best effort: %s", r)
		}
	}
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
