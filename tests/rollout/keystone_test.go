package rollout

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/imagedata"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
	"github.com/gophercloud/gophercloud/v2/openstack/placement/v1/resourceproviders"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stackflow/stackflow/activities/helm"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/tests/e2e"
	"github.com/stackflow/stackflow/workflows/controlplane"
)

// keystoneRegion is the region the test's Keystone registers itself in.
const keystoneRegion = "KeystoneE2E"

// TestKeystoneRunsForReal rolls out the keystone, placement and glance charts as real containers on the
// stack's real node (Debian's Keystone, Placement and Glance under uwsgi, their databases on the stack's
// MariaDB, named in the profile as an external endpoint; Placement and Glance registered in Keystone by
// their charts; an image uploaded and read back), then: a profile
// edit (debug on) rolls keystone's pod alone and the new pod logs at debug level; a bad database password
// is rolled back while the API keeps answering; deleting the configuration drops the databases and their
// users (the charts' db-drop hooks). The infrastructure they depend on is the stack's, external in the
// profile: no release of it is installed.
func TestKeystoneRunsForReal(t *testing.T) {
	t.Cleanup(func() { restoreNodes(t) })
	startBridge(t, "bridge-keystone", servedKinds)
	startWorker(t, "worker-keystone", t.TempDir())
	nodesGivenBack(t)
	ns := releaseNamespace(t, "keystone")
	ctx := context.Background()
	admin, err := env.Kube.CoreV1().Secrets(local.SystemNamespace).Get(ctx, local.DatabaseAdminSecretName, metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, env.CreateSecret(ctx, ns, local.DatabaseAdminSecretName, admin.Data))
	db := env.StackDB(t)
	dbName, placementDB, glanceDB := env.Run+"_keystone", env.Run+"_placement", env.Run+"_glance"

	profile, cfgName := env.Run+"-ks", env.Run+"-ks"
	comps := map[string]any{}
	// The stack runs the database these services use; none uses RabbitMQ or memcached. As an
	// OpenStack-Helm user with such services would, the profile marks all three external.
	for _, c := range []string{"mariadb", "rabbitmq", "memcached"} {
		comps[c] = map[string]any{"external": true}
	}
	real := map[string]any{"node_selector_key": local.RealNodeLabel, "node_selector_value": "true"}
	// onRealNode is what puts a chart's pods on the real node, with its database (and user) named db on
	// the stack's MariaDB, dropped when the release is uninstalled.
	onRealNode := func(chart, db string, identity map[string]any) map[string]any {
		return map[string]any{
			"chart":            map[string]any{"repository": charts.URL, "name": chart, "version": "0.1.0"},
			"readinessTimeout": "5m",
			"values": map[string]any{
				"labels": map[string]any{"api": real, "job": real},
				"pod": map[string]any{"tolerations": map[string]any{chart: map[string]any{"enabled": true, "tolerations": []any{
					map[string]any{"key": local.RealNodeTaint.Key, "operator": "Equal", "value": local.RealNodeTaint.Value, "effect": string(local.RealNodeTaint.Effect)},
				}}}},
				"endpoints": map[string]any{
					"oslo_db": map[string]any{
						"hosts": map[string]any{"default": local.HostGateway},
						"port":  map[string]any{"mysql": map[string]any{"default": local.MariaDBPort}},
						"path":  "/" + db,
						"auth":  map[string]any{chart: map[string]any{"username": db}},
					},
					"identity": map[string]any{"auth": identity},
				},
				"manifests": map[string]any{"job_db_drop": true},
			},
		}
	}
	comps["keystone"] = onRealNode("keystone", dbName, map[string]any{"admin": map[string]any{"region_name": keystoneRegion}})
	comps["placement"] = onRealNode("placement", placementDB, map[string]any{"placement": map[string]any{"region_name": keystoneRegion}})
	comps["glance"] = onRealNode("glance", glanceDB, map[string]any{"glance": map[string]any{"region_name": keystoneRegion}})
	createObject(t, gvrProfile, "OpenStackCloudConfigurationProfile", profile, map[string]any{"components": comps})
	start := time.Now()
	createObject(t, gvrConfig, "KupenstackConfiguration", cfgName, map[string]any{
		"defaultProfile": profile, "releaseNamespace": ns, "nodes": nodeSpecs[:1],
	})
	t.Cleanup(func() {
		deleteAndWait(t, gvrConfig, cfgName, 3*time.Minute)
		deleteAndWait(t, gvrProfile, profile, time.Minute)
		// The releases' uninstall ran the db-drop hooks: nothing of them is left in the stack's MariaDB.
		// What is left fails the test, and is then dropped so that the next test starts from a clean server.
		for _, name := range []string{dbName, placementDB, glanceDB} {
			left := e2e.QueryStrings(t, db, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", name)
			users := e2e.QueryStrings(t, db, "SELECT User FROM mysql.user WHERE User = ?", name)
			assert.Empty(t, left, "database %s dropped by the release's uninstall", name)
			assert.Empty(t, users, "user %s dropped by the release's uninstall", name)
			if len(left)+len(users) > 0 {
				_, _ = db.Exec("DROP DATABASE IF EXISTS `" + name + "`")
				_, _ = db.Exec("DROP USER IF EXISTS ?@'%'", name)
			}
		}
	})
	ksReady := func(rev int) func(configStatus, int64) bool {
		return func(s configStatus, gen int64) bool {
			if s.ObservedGeneration != gen || s.condition(controlplane.ConditionComponentsReady).Status != metav1.ConditionTrue {
				return false
			}
			for _, c := range []string{"keystone", "placement", "glance"} {
				if s.component(c).State != controlplane.ComponentDeployed {
					return false
				}
			}
			return int(s.component("keystone").Revision) == rev
		}
	}

	var api, firstPod, workflowID string
	t.Run("keystone runs on the real node and answers", func(t *testing.T) {
		workflowID = waitConfig(t, cfgName, 6*time.Minute, "keystone deployed", ksReady(1)).WorkflowID
		t.Logf("keystone, placement and glance Ready in %s", time.Since(start).Round(100*time.Millisecond))
		// Placement and glance were installed beside keystone (once its release was applied, before it was
		// Ready): their charts waited for Keystone themselves, and still registered.
		ks := componentRun(t, workflowID, "keystone")
		for _, c := range []string{"placement", "glance"} {
			run := componentRun(t, workflowID, c)
			require.True(t, run.StartTime.AsTime().Before(ks.CloseTime.AsTime()), "%s started (%s) before keystone was Ready (%s)",
				c, run.StartTime.AsTime().Format(time.RFC3339Nano), ks.CloseTime.AsTime().Format(time.RFC3339Nano))
			t.Logf("%s started %s before keystone was Ready", c, ks.CloseTime.AsTime().Sub(run.StartTime.AsTime()).Round(100*time.Millisecond))
		}
		rels := releases(t, ns)
		for _, c := range []string{"mariadb", "rabbitmq", "memcached"} {
			require.False(t, rels[c].Exists, "no release of the external %s", c)
		}
		pod := apiPod(t, ns, "keystone")
		require.Equal(t, local.RealNode, pod.Spec.NodeName, "keystone-api runs on the real node")
		firstPod = pod.Name
		api = env.ChartKeystoneAPI(t, ns)

		// The bootstrap administrator logs in, and the catalog lists the identity endpoints the
		// bootstrap Job registered: the Service's address, in the profile's region.
		provider := env.ChartKeystoneLogin(t, ns, api)
		urls := map[string][]string{}
		for typ, eps := range e2e.Catalog(t, provider) {
			for _, ep := range eps {
				require.Equal(t, keystoneRegion, ep.Region)
				urls[typ] = append(urls[typ], ep.Interface+" "+ep.URL)
			}
		}
		require.ElementsMatch(t, []string{"admin " + api, "internal " + api, "public " + api}, urls["identity"])
		require.NotContains(t, podLog(t, ns, pod.Name, "keystone-api"), " DEBUG ", "debug is off")
		require.Equal(t, []string{dbName}, e2e.QueryStrings(t, db, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", dbName))

		// Placement's chart registered it (its user, the service, its endpoints on its Service's address),
		// and its API checks tokens with Keystone: the administrator's token lists resource providers (none
		// yet), a request without one is refused.
		papi := registeredAPI(t, ns, "placement", "8778", urls["placement"])
		placement, err := openstack.NewPlacementV1(provider, gophercloud.EndpointOpts{Region: keystoneRegion})
		require.NoError(t, err)
		list, err := resourceproviders.List(placement, nil).AllPages(ctx)
		require.NoError(t, err, "list resource providers with the administrator's token")
		rps, err := resourceproviders.ExtractResourceProviders(list)
		require.NoError(t, err)
		require.Empty(t, rps)
		requireUnauthorized(t, papi+"/resource_providers")
		require.Equal(t, []string{placementDB}, e2e.QueryStrings(t, db, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", placementDB))

		// Glance's chart registered it too; an image uploaded through the catalog's endpoint is active with
		// the data's size and checksum, reads back byte for byte, and goes on delete.
		gapi := registeredAPI(t, ns, "glance", "9292", urls["image"])
		glance, err := openstack.NewImageV2(provider, gophercloud.EndpointOpts{Region: keystoneRegion})
		require.NoError(t, err)
		uploadAndReadBack(t, glance)
		requireUnauthorized(t, gapi+"/v2/images")
	})

	t.Run("a profile edit rolls keystone and it runs with the option", func(t *testing.T) {
		require.NotEmpty(t, api)
		comps["keystone"].(map[string]any)["config"] = map[string]any{"keystone.conf": "[DEFAULT]\ndebug = true\n"}

		// The preview of the edit, against the running release: keystone alone changes, its configuration
		// shows debug on, and no secret value (the passwords the chart generated and keeps) is in it.
		var spec controlplane.ProfileSpec
		b, err := json.Marshal(map[string]any{"components": comps})
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &spec))
		pctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		h, err := env.Temporal.UpdateWorkflow(pctx, clientUpdate(workflowID, controlplane.PreviewRequest{Profile: &controlplane.NamedProfile{Name: profile, Spec: spec}}))
		require.NoError(t, err)
		var preview controlplane.PreviewResult
		require.NoError(t, h.Get(pctx, &preview))
		require.Equal(t, [][]string{{"keystone"}}, preview.Plan.Waves)
		require.Len(t, preview.Diffs, 1)
		diff := preview.Diffs[0].Diff
		t.Logf("preview of keystone (%d lines):\n%s", preview.Diffs[0].Lines, diff)
		require.Contains(t, diff, "-    debug = false")
		require.Contains(t, diff, "+    debug = true")
		for _, secret := range []string{env.SecretValue(t, ns, "keystone-admin", "OS_PASSWORD"), env.SecretValue(t, ns, "keystone-db", "password")} {
			require.NotContains(t, diff, secret, "a secret value in the preview")
		}
		require.Equal(t, 1, releases(t, ns)["keystone"].Revision, "the preview applied nothing")

		mergePatch(t, gvrProfile, profile, map[string]any{"spec": map[string]any{"components": map[string]any{"keystone": comps["keystone"]}}})
		waitConfig(t, cfgName, 4*time.Minute, "keystone at revision 2", ksReady(2))
		rels := releases(t, ns)
		for _, c := range []string{"placement", "glance"} {
			require.Equal(t, 1, rels[c].Revision, "%s untouched", c)
		}
		pod := apiPod(t, ns, "keystone")
		require.NotEqual(t, firstPod, pod.Name, "the pod rolled")
		env.ChartKeystoneLogin(t, ns, api)
		require.Eventually(t, func() bool { return strings.Contains(podLog(t, ns, pod.Name, "keystone-api"), " DEBUG ") }, 30*time.Second, time.Second,
			"the new pod logs at debug level")
	})

	t.Run("a bad database password is rolled back while the API answers", func(t *testing.T) {
		require.NotEmpty(t, api)
		before := apiPod(t, ns, "keystone").Name
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
				if _, err := e2e.KeystoneLogin(api, pw); err != nil {
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
		// The readiness check reports whichever failure it sees first, both from the bad password: the
		// db-sync Job's container, or the new API pod's db-wait init container crash-looping.
		require.Regexp(t, `container (db-sync exited 1|db-wait CrashLoopBackOff, last exited 1)`, cond.Message)
		require.Contains(t, cond.Message, "Access denied for user", "the reason, from the container's log")
		require.Contains(t, cond.Message, "rolled back to revision 2")
		require.Zero(t, failed.Load(), "every login answered (last error: %v)", lastErr.Load())
		require.Positive(t, ok.Load())
		rels := releases(t, ns)
		require.Equal(t, helm.ReleaseDeployed, rels["keystone"].Status)
		require.Equal(t, 4, rels["keystone"].Revision)
		require.Equal(t, before, apiPod(t, ns, "keystone").Name, "the pod of the good revision kept serving")
		env.ChartKeystoneLogin(t, ns, api)
	})

	// A server logging in with the configuration's cloud (unserved here: only its spec is read) keeps
	// the releases while the configuration is deleted, and Ready says why; once it goes, so do they.
	t.Run("deleting the configuration waits for the users of its cloud", func(t *testing.T) {
		server := env.Run + "-cloud-user"
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "OpenStackServer",
			"metadata": map[string]any{"name": server, "labels": map[string]any{"stackflow.io/test-run": env.Run}},
			"spec": map[string]any{
				"flavor":      "m1.tiny",
				"image":       map[string]any{"filter": map[string]any{"name": "cirros-tiny"}},
				"ports":       []any{map[string]any{"network": map[string]any{"filter": map[string]any{"name": "private"}}}},
				"identityRef": map[string]any{"name": controlplane.CloudsSecret, "cloudName": cfgName},
			},
		}}
		_, err := env.Dyn.Resource(gvrServer).Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = env.Dyn.Resource(gvrServer).Namespace(ns).Delete(ctx, server, metav1.DeleteOptions{}) })
		require.NoError(t, env.Dyn.Resource(gvrConfig).Delete(ctx, cfgName, metav1.DeleteOptions{}))
		s := waitConfig(t, cfgName, 2*time.Minute, "Ready CloudInUse", func(s configStatus, _ int64) bool {
			return s.condition(lifecycle.ConditionReady).Reason == controlplane.ReasonCloudInUse
		})
		ready := s.condition(lifecycle.ConditionReady)
		t.Logf("Ready while the cloud is in use: %s", ready.Message)
		require.Contains(t, ready.Message, "OpenStackServer/"+server)
		rels := releases(t, ns)
		for _, c := range []string{"keystone", "placement", "glance"} {
			require.Equal(t, helm.ReleaseDeployed, rels[c].Status, "%s stays while its cloud is in use", c)
		}
		require.NoError(t, env.Dyn.Resource(gvrServer).Namespace(ns).Delete(ctx, server, metav1.DeleteOptions{}))
		deleteAndWait(t, gvrConfig, cfgName, 3*time.Minute)
		for c, r := range releases(t, ns) {
			require.False(t, r.Exists, "%s went with the configuration once its cloud's user was gone", c)
		}
	})
}

// registeredAPI checks that chart's API pod runs on the real node and that the catalog's endpoints (each
// "<interface> <url>") are its Service's ClusterIP at port, on the three interfaces; it returns that URL.
func registeredAPI(t *testing.T, ns, chart, port string, endpoints []string) string {
	t.Helper()
	require.Equal(t, local.RealNode, apiPod(t, ns, chart).Spec.NodeName, "%s-api runs on the real node", chart)
	svc, err := env.Kube.CoreV1().Services(ns).Get(context.Background(), chart+"-api", metav1.GetOptions{})
	require.NoError(t, err)
	url := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, port)
	require.ElementsMatch(t, []string{"admin " + url, "internal " + url, "public " + url}, endpoints, "%s's endpoints in the catalog", chart)
	return url
}

// requireUnauthorized checks that a request without a token is refused.
func requireUnauthorized(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "GET %s without a token", url)
}

// uploadAndReadBack creates an image in glance, uploads its data (chunked), checks what Glance recorded
// and reads the data back, then deletes the image.
func uploadAndReadBack(t *testing.T, glance *gophercloud.ServiceClient) {
	t.Helper()
	ctx := context.Background()
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(i * 7 % 251)
	}
	sum := md5.Sum(data)
	img, err := images.Create(ctx, glance, images.CreateOpts{Name: "e2e-upload", DiskFormat: "raw", ContainerFormat: "bare"}).Extract()
	require.NoError(t, err)
	t.Cleanup(func() { _ = images.Delete(ctx, glance, img.ID).ExtractErr() })
	// A reader of unknown length goes out chunked, as the openstack client streams a file.
	require.NoError(t, imagedata.Upload(ctx, glance, img.ID, io.MultiReader(bytes.NewReader(data))).ExtractErr(), "upload the image's data, chunked")
	img, err = images.Get(ctx, glance, img.ID).Extract()
	require.NoError(t, err)
	require.Equal(t, images.ImageStatusActive, img.Status)
	require.Equal(t, int64(len(data)), img.SizeBytes)
	require.Equal(t, hex.EncodeToString(sum[:]), img.Checksum)
	rc, err := imagedata.Download(ctx, glance, img.ID).Extract()
	require.NoError(t, err)
	got, err := io.ReadAll(rc)
	rc.Close()
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, got), "the data read back (%d bytes) is what was uploaded (%d)", len(got), len(data))
	require.NoError(t, images.Delete(ctx, glance, img.ID).ExtractErr())
	_, err = images.Get(ctx, glance, img.ID).Extract()
	require.True(t, gophercloud.ResponseCodeIs(err, http.StatusNotFound), "the image is gone after delete: %v", err)
}

// apiPod is the one ready API pod of chart's release in ns (a rollout in progress is waited out).
func apiPod(t *testing.T, ns, chart string) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	require.Eventually(t, func() bool {
		pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "component=api,app.kubernetes.io/name=" + chart})
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
	}, 2*time.Minute, time.Second, "one ready %s-api pod in %s", chart, ns)
	return pod
}

// podLog is the log of a pod's container.
func podLog(t *testing.T, ns, pod, container string) string {
	t.Helper()
	rc, err := env.Kube.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container}).Stream(context.Background())
	require.NoError(t, err)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	require.NoError(t, err)
	return string(b)
}
