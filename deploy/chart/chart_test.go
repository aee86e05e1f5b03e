package chart_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/stackflow/stackflow/deploy/chart"
	"github.com/stackflow/stackflow/deploy/rbac"
)

const root = "../.."

// helm lint, with default values and with every option on.
func TestLint(t *testing.T) {
	for name, vals := range map[string]map[string]any{"defaults": nil, "everything": everything()} {
		t.Run(name, func(t *testing.T) {
			res := lint.All(filepath.Join(root, chart.Path), vals, "stackflow-system", false)
			for _, m := range res.Messages {
				require.Less(t, m.Severity, support.WarningSev, "helm lint: %s", m)
			}
		})
	}
}

func everything() map[string]any {
	return map[string]any{
		"temporal": map[string]any{
			"tls":    map[string]any{"enabled": true, "secretName": "temporal-client", "serverName": "temporal.example"},
			"apiKey": map[string]any{"secretName": "temporal-api-key"},
		},
		"codec":           map[string]any{"server": map[string]any{"origins": []any{"https://temporal.example"}}},
		"watchNamespaces": []any{"openstack", "edpm"},
		"helmReleases": map[string]any{"namespaces": []any{"openstack"},
			"extraRules": []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"serviceaccounts"}, "verbs": []any{"get", "create", "patch", "delete"}}}},
		"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true}},
		"image":   map[string]any{"worker": map[string]any{"digest": "sha256:" + strings.Repeat("ab", 32)}},
	}
}

func render(t *testing.T, vals map[string]any) []*unstructured.Unstructured {
	t.Helper()
	objs, err := chart.Render(root, "stackflow", "stackflow-system", vals, false)
	require.NoError(t, err)
	return objs
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// What an installation consists of: the bridge (2 replicas, leader election in the release namespace),
// one worker Deployment per task queue under its own ServiceAccount, PDBs, probes, non-root pods with a
// read-only root filesystem, the codec on by default.
func TestRenderedObjects(t *testing.T) {
	objs := render(t, nil)
	b := find(objs, "Deployment", "stackflow-bridge")
	require.NotNil(t, b)
	replicas, _, _ := unstructured.NestedInt64(b.Object, "spec", "replicas")
	require.EqualValues(t, 2, replicas)
	require.NotNil(t, find(objs, "PodDisruptionBudget", "stackflow-bridge"))
	require.NotNil(t, find(objs, "Service", "stackflow-codec"), "codec endpoint on by default")

	sas := map[string]bool{}
	for _, q := range []string{"stackflow", "stackflow-kube", "stackflow-ansible", "stackflow-openstack"} {
		name := "stackflow-" + rbac.WorkerAccount(q)
		d := find(objs, "Deployment", name)
		require.NotNil(t, d, name)
		spec := podSpec(t, d)
		require.Equal(t, name, spec["serviceAccountName"])
		sas[name] = true
		c := spec["containers"].([]any)[0].(map[string]any)
		require.Contains(t, c["args"], "--queues="+q)
		require.NotNil(t, find(objs, "PodDisruptionBudget", name))
		// A worker pod is ready once it polls its task queue, not merely once its process lives.
		ready, _, _ := unstructured.NestedString(c, "readinessProbe", "httpGet", "path")
		require.Equal(t, "/readyz", ready, name)
		live, _, _ := unstructured.NestedString(c, "livenessProbe", "httpGet", "path")
		require.Equal(t, "/healthz", live, name)
	}
	require.Len(t, sas, 4, "a ServiceAccount per task queue")
	bc := podSpec(t, b)["containers"].([]any)[0].(map[string]any)
	ready, _, _ := unstructured.NestedString(bc, "readinessProbe", "httpGet", "path")
	require.Equal(t, "/healthz", ready, "the bridge serves no /readyz")

	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		spec := podSpec(t, o)
		require.Equal(t, true, spec["securityContext"].(map[string]any)["runAsNonRoot"], o.GetName())
		c := spec["containers"].([]any)[0].(map[string]any)
		require.Equal(t, true, c["securityContext"].(map[string]any)["readOnlyRootFilesystem"], o.GetName())
		for _, p := range []string{"livenessProbe", "readinessProbe", "startupProbe"} {
			require.Contains(t, c, p, o.GetName())
		}
		env := fmt.Sprint(c["env"])
		require.Contains(t, env, "STACKFLOW_CODEC_KEYS", "%s: the codec is on by default", o.GetName())
	}
}

// podAnnotations reach every pod of the release (a new image digest there rolls the pods), and none are
// set by default.
func TestPodAnnotations(t *testing.T) {
	for _, o := range render(t, nil) {
		if o.GetKind() == "Deployment" {
			_, found, _ := unstructured.NestedMap(o.Object, "spec", "template", "metadata", "annotations")
			require.False(t, found, o.GetName())
		}
	}
	deployments := 0
	for _, o := range render(t, map[string]any{"podAnnotations": map[string]any{"stackflow.io/worker-image": "abc"}}) {
		if o.GetKind() != "Deployment" {
			continue
		}
		deployments++
		v, _, _ := unstructured.NestedString(o.Object, "spec", "template", "metadata", "annotations", "stackflow.io/worker-image")
		require.Equal(t, "abc", v, o.GetName())
	}
	require.Equal(t, 5, deployments, "the bridge and four workers")
}

func podSpec(t *testing.T, d *unstructured.Unstructured) map[string]any {
	t.Helper()
	spec, ok, _ := unstructured.NestedMap(d.Object, "spec", "template", "spec")
	require.True(t, ok)
	return spec
}

// Temporal TLS, API key and codec reach both commands as the environment they read, from Secrets.
func TestTemporalConnectionValues(t *testing.T) {
	objs := render(t, everything())
	for _, name := range []string{"stackflow-bridge", "stackflow-worker-kube"} {
		d := find(objs, "Deployment", name)
		spec := podSpec(t, d)
		c := spec["containers"].([]any)[0].(map[string]any)
		env := fmt.Sprint(c["env"])
		for _, want := range []string{"TEMPORAL_TLS_SERVER_CA_CERT_PATH", "TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_SERVER_NAME", "TEMPORAL_API_KEY_FILE", "STACKFLOW_CODEC_KEYS"} {
			require.Contains(t, env, want, name)
		}
		vols := fmt.Sprint(spec["volumes"])
		for _, want := range []string{"temporal-client", "temporal-api-key", "stackflow-codec"} {
			require.Contains(t, vols, want, name)
		}
	}
	require.NotNil(t, find(objs, "ServiceMonitor", "stackflow"))
	require.Contains(t, fmt.Sprint(podSpec(t, find(objs, "Deployment", "stackflow-worker-kube"))["containers"]), "@sha256:")
}

// grant is one verb on one resource for one ServiceAccount, in one namespace ("*" for every namespace).
type grant struct{ sa, where, group, resource, verb string }

// rendered are the grants the chart's RBAC objects give its ServiceAccounts.
func rendered(t *testing.T, objs []*unstructured.Unstructured) map[grant]bool {
	t.Helper()
	roles := map[string][]rbacv1.PolicyRule{} // "ClusterRole/name" or "Role/ns/name"
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole", "Role":
			var r rbacv1.ClusterRole
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r))
			key := "ClusterRole/" + o.GetName()
			if o.GetKind() == "Role" {
				key = "Role/" + o.GetNamespace() + "/" + o.GetName()
			}
			roles[key] = r.Rules
		}
	}
	out := map[grant]bool{}
	for _, o := range objs {
		if o.GetKind() != "ClusterRoleBinding" && o.GetKind() != "RoleBinding" {
			continue
		}
		var b rbacv1.RoleBinding
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b))
		where, key := "*", "ClusterRole/"+b.RoleRef.Name
		if o.GetKind() == "RoleBinding" {
			where = o.GetNamespace()
			if b.RoleRef.Kind == "Role" {
				key = "Role/" + o.GetNamespace() + "/" + b.RoleRef.Name
			}
		}
		rules, ok := roles[key]
		require.True(t, ok, "%s %s binds missing %s", o.GetKind(), o.GetName(), key)
		for _, s := range b.Subjects {
			for _, r := range rules {
				for _, g := range r.APIGroups {
					for _, res := range r.Resources {
						for _, v := range r.Verbs {
							out[grant{s.Name, where, g, res, v}] = true
						}
					}
				}
			}
		}
	}
	return out
}

// expected are the grants the rules file asks for, placed as the values say.
func expected(t *testing.T, watch, helmNS []string, extra []rbacv1.PolicyRule) map[grant]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rbac.RulesFile))
	require.NoError(t, err)
	var f rbac.File
	require.NoError(t, yaml.Unmarshal(b, &f))
	out := map[grant]bool{}
	for account, scopes := range f.Accounts {
		sa := "stackflow-" + account
		for scope, rules := range scopes {
			var where []string
			switch scope {
			case rbac.Cluster:
				where = []string{"*"}
			case rbac.Watched:
				where = watch
			case rbac.Release:
				where = []string{"stackflow-system"}
			case rbac.HelmReleases:
				where = helmNS
				rules = append(slices.Clone(rules), extra...)
			default:
				t.Fatalf("unknown scope %s", scope)
			}
			if len(where) == 0 {
				where = []string{"*"}
			}
			for _, w := range where {
				for _, r := range rules {
					for _, g := range r.APIGroups {
						for _, res := range r.Resources {
							for _, v := range r.Verbs {
								out[grant{sa, w, g, res, v}] = true
							}
						}
					}
				}
			}
		}
	}
	return out
}

// The chart grants exactly the rules derived from the code (deploy/rbac), placed by watchNamespaces and
// helmReleases: no rule more, none less.
func TestRBACIsTheDerivedRules(t *testing.T) {
	extra := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"create", "delete", "get", "patch"}}
	for _, tc := range []struct {
		name          string
		vals          map[string]any
		watch, helmNS []string
		extra         []rbacv1.PolicyRule
	}{
		{name: "cluster-wide"},
		{name: "scoped", vals: everything(), watch: []string{"openstack", "edpm"}, helmNS: []string{"openstack"}, extra: []rbacv1.PolicyRule{extra}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, want := rendered(t, render(t, tc.vals)), expected(t, tc.watch, tc.helmNS, tc.extra)
			var missing, extra []string
			for g := range want {
				if !got[g] {
					missing = append(missing, fmt.Sprint(g))
				}
			}
			for g := range got {
				if !want[g] {
					extra = append(extra, fmt.Sprint(g))
				}
			}
			slices.Sort(missing)
			slices.Sort(extra)
			require.Empty(t, missing, "rules the code needs that the chart does not grant")
			require.Empty(t, extra, "rules the chart grants that the code does not need")
			require.NotEmpty(t, got)
		})
	}
}

// The admission policies are the files of deploy/admission, each policy with its binding; a second
// release in a cluster (admission.enabled=false) renders none of them.
func TestAdmissionPoliciesToggle(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root, "deploy", "admission", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, tc := range []struct {
		name    string
		values  map[string]any
		wantPol int
	}{
		{"default", nil, len(files)},
		{"disabled", map[string]any{"admission": map[string]any{"enabled": false}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol, bind := 0, 0
			for _, o := range render(t, tc.values) {
				switch o.GetKind() {
				case "ValidatingAdmissionPolicy":
					pol++
				case "ValidatingAdmissionPolicyBinding":
					bind++
				}
			}
			require.GreaterOrEqual(t, pol, tc.wantPol)
			if tc.wantPol == 0 {
				require.Zero(t, pol)
			}
			require.Equal(t, pol, bind, "each policy has its binding")
		})
	}
}

// bridge.namespaces narrows what the bridge serves, without touching RBAC; a namespace outside
// watchNamespaces is refused at render, since the workers could not serve it.
func TestBridgeNamespaces(t *testing.T) {
	args := func(objs []*unstructured.Unstructured) []string {
		b := find(objs, "Deployment", "stackflow-bridge")
		require.NotNil(t, b)
		cs, _, _ := unstructured.NestedSlice(b.Object, "spec", "template", "spec", "containers")
		a, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
		var watch []string
		for _, s := range a {
			if v, ok := strings.CutPrefix(s, "--watch-namespaces="); ok {
				watch = append(watch, v)
			}
		}
		return watch
	}
	for _, tc := range []struct {
		name  string
		vals  map[string]any
		watch []string
	}{
		{name: "default: every namespace", vals: nil, watch: nil},
		{name: "watchNamespaces", vals: map[string]any{"watchNamespaces": []any{"openstack", "edpm"}}, watch: []string{"openstack,edpm"}},
		{name: "bridge.namespaces within watchNamespaces", vals: map[string]any{"watchNamespaces": []any{"openstack", "edpm"},
			"bridge": map[string]any{"namespaces": []any{"openstack"}}}, watch: []string{"openstack"}},
		{name: "bridge.namespaces of a cluster-wide release", vals: map[string]any{"bridge": map[string]any{"namespaces": []any{"openstack"}}},
			watch: []string{"openstack"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, tc.vals)
			require.Equal(t, tc.watch, args(objs))
			// RBAC is placed by watchNamespaces alone.
			want := render(t, map[string]any{"watchNamespaces": tc.vals["watchNamespaces"]})
			require.Equal(t, rendered(t, want), rendered(t, objs))
		})
	}
	_, err := chart.Render(root, "stackflow", "stackflow-system", map[string]any{"watchNamespaces": []any{"openstack"},
		"bridge": map[string]any{"namespaces": []any{"edpm"}}}, false)
	require.ErrorContains(t, err, "bridge.namespaces: edpm is not among watchNamespaces (openstack)")
}

// bridge.watchFilter reaches the bridge and every worker Deployment (which label what they create with
// it), and nothing else changes; a value that is no label value is refused at render.
func TestBridgeWatchFilter(t *testing.T) {
	filters := func(objs []*unstructured.Unstructured) map[string][]string {
		out := map[string][]string{}
		for _, o := range objs {
			if o.GetKind() != "Deployment" {
				continue
			}
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			a, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
			out[o.GetName()] = nil
			for _, s := range a {
				if v, ok := strings.CutPrefix(s, "--watch-filter="); ok {
					out[o.GetName()] = append(out[o.GetName()], v)
				}
			}
		}
		return out
	}
	unfiltered := filters(render(t, nil))
	require.Contains(t, unfiltered, "stackflow-bridge")
	require.Len(t, unfiltered, 5, "the bridge and one worker Deployment per task queue")
	for name, f := range unfiltered {
		require.Empty(t, f, name)
	}
	objs := render(t, map[string]any{"bridge": map[string]any{"watchFilter": "tenant-a"}})
	for name, f := range filters(objs) {
		require.Equal(t, []string{"tenant-a"}, f, name)
	}
	require.Equal(t, rendered(t, render(t, nil)), rendered(t, objs), "RBAC unchanged")
	for _, bad := range []string{"has space", "-x", strings.Repeat("a", 64)} {
		_, err := chart.Render(root, "stackflow", "stackflow-system", map[string]any{"bridge": map[string]any{"watchFilter": bad}}, false)
		require.ErrorContains(t, err, "is no label value", bad)
	}
}
