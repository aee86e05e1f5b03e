package rollout

import (
	"context"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/activities/helm"
	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/tests/e2e"
	"github.com/stackflow/stackflow/workflows/controlplane"
)

// keystoneRegion is the region the test's Keystone registers itself in.
const keystoneRegion = "KeystoneE2E"

// TestKeystoneRunsForReal rolls out the keystone chart as real containers on the stack's real node
// (Debian's Keystone under uwsgi, its database on the stack's MariaDB, named in the profile as an
// external endpoint), then: a profile edit (debug on) rolls its pod and the new pod logs at debug level;
// a bad database password is rolled back while the API keeps answering; deleting the configuration
// drops the database and its user (the chart's db-drop hook). The infrastructure components it depends
// on are the test charts on kwok nodes.
func TestKeystoneRunsForReal(t *testing.T) {
	t.Cleanup(func() { restoreNodes(t) })
	startBridge(t, "bridge-keystone", servedKinds)
	startWorker(t, "worker-keystone", t.TempDir())
	ns := releaseNamespace(t, "keystone")
	ctx := context.Background()
	admin, err := env.Kube.CoreV1().Secrets(local.SystemNamespace).Get(ctx, local.DatabaseAdminSecretName, metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, env.CreateSecret(ctx, ns, local.DatabaseAdminSecretName, admin.Data))
	db := env.StackDB(t)
	dbName := env.Run + "_keystone"

	profile, cfgName := env.Run+"-ks", env.Run+"-ks"
	comps := map[string]any{}
	for _, c := range []string{"mariadb", "rabbitmq", "memcached"} {
		comps[c] = map[string]any{"chart": map[string]any{"repository": charts.URL, "name": c, "version": "0.1.0"}, "readinessTimeout": "2m"}
	}
	real := map[string]any{"node_selector_key": local.RealNodeLabel, "node_selector_value": "true"}
	comps["keystone"] = map[string]any{
		"chart":            map[string]any{"repository": charts.URL, "name": "keystone", "version": "0.1.0"},
		"readinessTimeout": "5m",
		"values": map[string]any{
			"labels": map[string]any{"api": real, "job": real},
			"pod": map[string]any{"tolerations": map[string]any{"keystone": map[string]any{"enabled": true, "tolerations": []any{
				map[string]any{"key": local.RealNodeTaint.Key, "operator": "Equal", "value": local.RealNodeTaint.Value, "effect": string(local.RealNodeTaint.Effect)},
			}}}},
			"endpoints": map[string]any{
				"oslo_db": map[string]any{
					"hosts": map[string]any{"default": local.HostGateway},
					"port":  map[string]any{"mysql": map[string]any{"default": local.MariaDBPort}},
					"path":  "/" + dbName,
					"auth":  map[string]any{"keystone": map[string]any{"username": dbName}},
				},
				"identity": map[string]any{"auth": map[string]any{"admin": map[string]any{"region_name": keystoneRegion}}},
			},
			"manifests": map[string]any{"job_db_drop": true},
		},
	}
	createObject(t, gvrProfile, "OpenStackCloudConfigurationProfile", profile, map[string]any{"components": comps})
	start := time.Now()
	createObject(t, gvrConfig, "KupenstackConfiguration", cfgName, map[string]any{
		"defaultProfile": profile, "releaseNamespace": ns, "nodes": nodeSpecs[:1],
	})
	t.Cleanup(func() {
		deleteAndWait(t, gvrConfig, cfgName, 3*time.Minute)
		deleteAndWait(t, gvrProfile, profile, time.Minute)
		// The release's uninstall ran the db-drop hook: nothing of it is left in the stack's MariaDB. What
		// is left fails the test, and is then dropped so that the next test starts from a clean server.
		left := e2e.QueryStrings(t, db, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", dbName)
		users := e2e.QueryStrings(t, db, "SELECT User FROM mysql.user WHERE User = ?", dbName)
		assert.Empty(t, left, "database dropped by the release's uninstall")
		assert.Empty(t, users, "user dropped by the release's uninstall")
		if len(left)+len(users) > 0 {
			_, _ = db.Exec("DROP DATABASE IF EXISTS `" + dbName + "`")
			_, _ = db.Exec("DROP USER IF EXISTS ?@'%'", dbName)
		}
	})
	ksReady := func(rev int) func(configStatus, int64) bool {
		return func(s configStatus, gen int64) bool {
			if s.ObservedGeneration != gen || s.condition(controlplane.ConditionComponentsReady).Status != metav1.ConditionTrue {
				return false
			}
			for _, c := range []string{"mariadb", "rabbitmq", "memcached", "keystone"} {
				if s.component(c).State != controlplane.ComponentDeployed {
					return false
				}
			}
			return int(s.component("keystone").Revision) == rev
		}
	}

	var api, firstPod string
	t.Run("keystone runs on the real node and answers", func(t *testing.T) {
		waitConfig(t, cfgName, 6*time.Minute, "keystone deployed", ksReady(1))
		t.Logf("keystone and its infrastructure Ready in %s", time.Since(start).Round(100*time.Millisecond))
		pod := keystonePod(t, ns)
		require.Equal(t, local.RealNode, pod.Spec.NodeName, "keystone-api runs on the real node")
		firstPod = pod.Name
		svc, err := env.Kube.CoreV1().Services(ns).Get(ctx, "keystone-api", metav1.GetOptions{})
		require.NoError(t, err)
		api = "http://" + net.JoinHostPort(svc.Spec.ClusterIP, "5000") + "/v3"

		// The bootstrap administrator logs in, and the catalog lists the identity endpoints the
		// bootstrap Job registered: the Service's address, in the profile's region.
		provider := keystoneLogin(t, ns, api)
		catalog, err := provider.GetAuthResult().(tokens.CreateResult).ExtractServiceCatalog()
		require.NoError(t, err)
		var urls []string
		for _, e := range catalog.Entries {
			if e.Type == "identity" {
				for _, ep := range e.Endpoints {
					require.Equal(t, keystoneRegion, ep.RegionID)
					urls = append(urls, ep.Interface+" "+ep.URL)
				}
			}
		}
		require.ElementsMatch(t, []string{"admin " + api, "internal " + api, "public " + api}, urls)
		require.NotContains(t, podLog(t, ns, pod.Name), " DEBUG ", "debug is off")
		require.Equal(t, []string{dbName}, e2e.QueryStrings(t, db, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", dbName))
	})

	t.Run("a profile edit rolls keystone and it runs with the option", func(t *testing.T) {
		require.NotEmpty(t, api)
		comps["keystone"].(map[string]any)["config"] = map[string]any{"keystone.conf": "[DEFAULT]\ndebug = true\n"}
		mergePatch(t, gvrProfile, profile, map[string]any{"spec": map[string]any{"components": map[string]any{"keystone": comps["keystone"]}}})
		waitConfig(t, cfgName, 4*time.Minute, "keystone at revision 2", ksReady(2))
		rels := releases(t, ns)
		for _, c := range []string{"mariadb", "rabbitmq", "memcached"} {
			require.Equal(t, 1, rels[c].Revision, "%s untouched", c)
		}
		pod := keystonePod(t, ns)
		require.NotEqual(t, firstPod, pod.Name, "the pod rolled")
		keystoneLogin(t, ns, api)
		require.Eventually(t, func() bool { return strings.Contains(podLog(t, ns, pod.Name), " DEBUG ") }, 30*time.Second, time.Second,
			"the new pod logs at debug level")
	})

	t.Run("a bad database password is rolled back while the API answers", func(t *testing.T) {
		require.NotEmpty(t, api)
		before := keystonePod(t, ns).Name
		var ok, failed atomic.Int64
		var lastErr atomic.Value
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			pw := env.SecretValue(t, ns, "keystone-admin", "OS_PASSWORD")
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Second):
				}
				if _, err := login(api, pw); err != nil {
					failed.Add(1)
					lastErr.Store(err.Error())
				} else {
					ok.Add(1)
				}
			}
		}()
		bad := comps["keystone"].(map[string]any)
		bad["readinessTimeout"] = "90s"
		bad["values"].(map[string]any)["endpoints"].(map[string]any)["oslo_db"].(map[string]any)["auth"] = map[string]any{
			"keystone": map[string]any{"username": dbName, "password": "not-the-password"}}
		mergePatch(t, gvrProfile, profile, map[string]any{"spec": map[string]any{"components": map[string]any{"keystone": bad}}})
		s := waitConfig(t, cfgName, 5*time.Minute, "keystone failed and rolled back", func(s configStatus, _ int64) bool {
			return s.component("keystone").State == controlplane.ComponentFailed
		})
		close(stop)
		<-done
		cond := s.condition(controlplane.ConditionComponentsReady)
		t.Logf("failed condition: %s", cond.Message)
		t.Logf("the API answered %d logins during the failed upgrade and its rollback, refused %d", ok.Load(), failed.Load())
		require.Equal(t, helm.ErrNotReady, cond.Reason)
		require.Contains(t, cond.Message, "keystone failed")
		require.Contains(t, cond.Message, "container db-sync exited 1")
		require.Contains(t, cond.Message, "Access denied for user", "the reason, from the container's log")
		require.Contains(t, cond.Message, "rolled back to revision 2")
		require.Zero(t, failed.Load(), "every login answered (last error: %v)", lastErr.Load())
		require.Positive(t, ok.Load())
		rels := releases(t, ns)
		require.Equal(t, helm.ReleaseDeployed, rels["keystone"].Status)
		require.Equal(t, 4, rels["keystone"].Revision)
		require.Equal(t, before, keystonePod(t, ns).Name, "the pod of the good revision kept serving")
		keystoneLogin(t, ns, api)
	})
}

// keystonePod is the one ready keystone-api pod of ns (a rollout in progress is waited out).
func keystonePod(t *testing.T, ns string) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	require.Eventually(t, func() bool {
		pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "component=api"})
		if err != nil {
			return false
		}
		var ready []corev1.Pod
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				return false
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					ready = append(ready, p)
				}
			}
		}
		if len(ready) != 1 || len(pods.Items) != 1 {
			return false
		}
		pod = ready[0]
		return true
	}, 2*time.Minute, time.Second, "one ready keystone-api pod in %s", ns)
	return pod
}

// podLog is the keystone-api container's log.
func podLog(t *testing.T, ns, pod string) string {
	t.Helper()
	rc, err := env.Kube.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: "keystone-api"}).Stream(context.Background())
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return string(b)
}

// keystoneLogin logs in as the chart's bootstrap administrator (its Secret <release>-admin).
func keystoneLogin(t *testing.T, ns, api string) *gophercloud.ProviderClient {
	t.Helper()
	p, err := login(api, env.SecretValue(t, ns, "keystone-admin", "OS_PASSWORD"))
	require.NoError(t, err, "log in to %s", api)
	return p
}

func login(api, password string) (*gophercloud.ProviderClient, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return openstack.AuthenticatedClient(ctx, gophercloud.AuthOptions{
		IdentityEndpoint: api, Username: "admin", Password: password, DomainName: "Default",
		Scope: &gophercloud.AuthScope{ProjectName: "admin", DomainName: "Default"},
	})
}
