// Package install proves the chart on the real local stack: the release the stack installed from
// deploy/chart/stackflow is deployed, every object the chart renders (with every option on) passes the
// API server's dry run, and least privilege holds: a worker bound to the chart's rules for one watched
// namespace is refused a Secret of another, and the object shows it as a clear condition. The chart
// serving for real, with pods, is proven where a cloud is at hand: tests/samples serves make run's
// samples through the stack's release, and tests/servers installs a second release (a server and a
// data-plane node through it, kill -9 of its workers, helm upgrade, helm uninstall).
package install

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/yaml"

	"github.com/stackflow/stackflow/deploy/chart"
	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/tests/e2e"
)

var env *e2e.Env

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var err error
	env, err = e2e.Setup(ctx, e2e.Config{TemporalNamespace: "stackflow-e2e-install", RunPrefix: "in"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := env.RunTests(m)
	env.Close()
	os.Exit(code)
}

// The stack installed the chart with the Helm SDK (helm install): the release is deployed.
func TestReleaseDeployed(t *testing.T) {
	ns, kubeconfig := local.ChartNamespace, env.Stack.Kubeconfig
	cfg := new(action.Configuration)
	require.NoError(t, cfg.Init(&genericclioptions.ConfigFlags{KubeConfig: &kubeconfig, Namespace: &ns}, ns, "secret", func(string, ...any) {}))
	rel, err := action.NewStatus(cfg).Run(local.ChartRelease)
	require.NoError(t, err)
	require.Equal(t, release.StatusDeployed, rel.Info.Status)
	for _, sa := range []string{"bridge", "worker", "worker-kube", "worker-ansible", "worker-openstack"} {
		_, err := env.Kube.CoreV1().ServiceAccounts(ns).Get(context.Background(), local.ChartRelease+"-"+sa, metav1.GetOptions{})
		require.NoError(t, err, "ServiceAccount %s", sa)
	}
}

// helm template | kubectl apply --dry-run=server, with the CRDs and every option on (TLS, API key,
// watched namespaces, Helm release namespaces and extra rules).
func TestServerDryRun(t *testing.T) {
	// Into the stack's own release namespace (a dry run creates no namespace); the objects are named after
	// another release, so nothing collides with the installed one.
	objs, err := chart.Render(env.Stack.RepoRoot, "stackflow-dryrun", local.ChartNamespace, map[string]any{
		"temporal": map[string]any{
			"tls":    map[string]any{"enabled": true, "secretName": "temporal-client", "serverName": "temporal.example"},
			"apiKey": map[string]any{"secretName": "temporal-api-key"},
		},
		"codec":           map[string]any{"server": map[string]any{"origins": []any{"https://temporal.example"}}},
		"watchNamespaces": []any{local.SystemNamespace},
		"helmReleases":    map[string]any{"namespaces": []any{local.SystemNamespace}},
	}, true)
	require.NoError(t, err)
	var manifest bytes.Buffer
	for _, o := range objs {
		b, err := yaml.Marshal(o.Object)
		require.NoError(t, err)
		manifest.WriteString("---\n")
		manifest.Write(b)
	}
	kubectl, err := env.Stack.Kubectl()
	require.NoError(t, err)
	cmd := exec.Command(kubectl, "--kubeconfig", env.Stack.Kubeconfig, "apply", "--dry-run=server", "--server-side", "--force-conflicts", "-f", "-")
	cmd.Stdin = &manifest
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	lines := strings.Count(strings.TrimSpace(string(out)), "\n") + 1
	require.GreaterOrEqual(t, lines, len(objs), "%s", out)
	t.Logf("server dry run accepted %d objects", lines)
}

// A worker bound by the chart's rules to one watched namespace is refused an identity Secret in another
// namespace: the OpenStackServer there reports the refusal in its Ready condition, and nothing retries.
func TestSecretOutsideWatchedNamespaceIsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	watched, other := env.Run+"-watched", env.Run+"-other"
	for _, ns := range []string{watched, other} {
		_, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = env.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
		_, err = env.Kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "openstack-clouds"},
			StringData: map[string]string{"clouds.yaml": "clouds: {}\n"}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	// The chart with watchNamespaces=[watched] binds the OpenStack workers' "watched" ClusterRole there
	// only; the same binding, for a ServiceAccount of this test's own.
	objs, err := chart.Render(env.Stack.RepoRoot, local.ChartRelease, local.ChartNamespace, map[string]any{"watchNamespaces": []any{watched}}, false)
	require.NoError(t, err)
	scoped := env.Run + "-scoped-openstack"
	_, err = env.Kube.CoreV1().ServiceAccounts(local.ChartNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: scoped}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = env.Kube.CoreV1().ServiceAccounts(local.ChartNamespace).Delete(context.Background(), scoped, metav1.DeleteOptions{})
	})
	bound := 0
	for _, o := range objs {
		if o.GetKind() != "RoleBinding" || !strings.HasPrefix(o.GetName(), local.ChartRelease+"-worker-openstack-") {
			continue
		}
		var rb rbacv1.RoleBinding
		b, _ := o.MarshalJSON()
		require.NoError(t, yaml.Unmarshal(b, &rb))
		require.Equal(t, watched, rb.Namespace)
		rb.Name = scoped
		rb.Subjects = []rbacv1.Subject{{Kind: "ServiceAccount", Name: scoped, Namespace: local.ChartNamespace}}
		_, err := env.Kube.RbacV1().RoleBindings(watched).Create(ctx, &rb, metav1.CreateOptions{})
		require.NoError(t, err)
		bound++
	}
	require.Equal(t, 1, bound, "the chart binds the OpenStack workers' rules in the watched namespace")

	env.StartBridge(t, e2e.BridgeOptions{Identity: env.Run + "-bridge", Kinds: "OpenStackServer", Namespaces: []string{watched, other}})
	env.StartWorker(t, e2e.WorkerOptions{Identity: env.Run + "-worker", Queues: []string{"stackflow", "stackflow-kube"}})
	// The OpenStack worker of a chart installed with watchNamespaces=[watched].
	env.StartProc(t, e2e.ProcSpec{Name: env.Run + "-scoped-openstack", Binary: e2e.Worker,
		Args:    []string{"--namespace", env.TemporalNamespace, "--identity", env.Run + "-scoped", "--stop-timeout", "5s", "--queues", "stackflow-openstack"},
		Account: strings.TrimPrefix(scoped, local.ChartRelease+"-")})

	gvr := schema.GroupVersionResource{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Resource: "openstackservers"}
	srv := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "OpenStackServer",
		"metadata": map[string]any{"name": "refused", "namespace": other},
		"spec": map[string]any{"flavor": "m1.tiny", "image": map[string]any{"filter": map[string]any{"name": "cirros-tiny"}},
			"ports":       []any{map[string]any{"network": map[string]any{"filter": map[string]any{"name": "private"}}}},
			"identityRef": map[string]any{"name": "openstack-clouds", "cloudName": "stackflow"}},
	}}
	_, err = env.Dyn.Resource(gvr).Namespace(other).Create(ctx, srv, metav1.CreateOptions{})
	require.NoError(t, err)
	var msg string
	require.Eventually(t, func() bool {
		u, err := env.Dyn.Resource(gvr).Namespace(other).Get(ctx, "refused", metav1.GetOptions{})
		if err != nil {
			return false
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m := c.(map[string]any)
			if m["type"] == "Ready" && m["status"] == "False" && strings.Contains(fmt.Sprint(m["message"]), "forbidden") {
				msg = fmt.Sprint(m["message"])
				return true
			}
		}
		return false
	}, 3*time.Minute, time.Second, "no Ready=False condition naming the refusal")
	t.Logf("condition: %s", msg)
	require.Contains(t, msg, "secrets")
	require.Contains(t, msg, other)

	// Deleting it: its teardown (which sweeps OpenStack by the owner marker) needs the same Secret, so it
	// is refused the same way and says so; an operator would grant the namespace or remove the finalizer,
	// as the test does.
	require.NoError(t, env.Dyn.Resource(gvr).Namespace(other).Delete(ctx, "refused", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		u, err := env.Dyn.Resource(gvr).Namespace(other).Get(ctx, "refused", metav1.GetOptions{})
		if err != nil {
			return true // gone: the teardown needed nothing it may not read
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m := c.(map[string]any)
			if m["type"] == "Ready" && m["reason"] == "TeardownFailed" && strings.Contains(fmt.Sprint(m["message"]), "forbidden") {
				return true
			}
		}
		return false
	}, 2*time.Minute, time.Second, "the refused teardown is not reported")
	env.ForceDelete(gvr, other, "refused")
}
