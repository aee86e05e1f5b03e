package nova

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/services"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/endpoints"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stackflow/stackflow/api/lifecycle"
	novav1beta1 "github.com/stackflow/stackflow/api/nova/v1beta1"
	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/tests/e2e"
	novawf "github.com/stackflow/stackflow/workflows/nova"
)

// NovaRegion is the Keystone region this test's Nova serves: a region of its own in the stack's Keystone.
const NovaRegion = "NovaE2E"

// apiPort is where this Nova's compute API listens (its pod's own address; a port apart from the stack's
// own nova-api's 8774 for clarity).
const apiPort = 18774

// computeConfig is the computes' customServiceConfig: the test hosts have no hypervisor and no network
// agent.
const computeConfig = `[DEFAULT]
compute_driver = fake.FakeDriver
vif_plugging_is_fatal = false
vif_plugging_timeout = 0
`

// schedulerConfig is the customServiceConfig the scheduler is rolled with: the generated configuration
// says discover_hosts_in_cells_interval = 30; the user's value must win in what the process loaded.
const schedulerConfig = `[DEFAULT]
debug = True
[scheduler]
discover_hosts_in_cells_interval = 5
`

// novaManifest is the Nova CR: cell0, cell1 and cell2 (each of the two with a message bus of its own),
// every database and vhost created by the Nova with the stack's administrators, its Keystone user too
// (keystoneAdminSecret, which also gives Keystone's endpoint), the global metadata service and cell1's
// console proxy, services on the real node from the Nova image.
func novaManifest() string {
	return fmt.Sprintf(`
apiVersion: nova.openstack.org/v1beta1
kind: Nova
metadata: {name: nova}
spec:
  secret: %[1]s
  keystoneAdminSecret: %[10]s
  serviceUser: %[11]s
  region: %[3]s
  nodeSelector: {%[4]s: "true"}
  tolerations: [{key: %[4]s, operator: Exists, effect: NoSchedule}]
  containerImage: %[5]s
  apiDatabase: {hostname: %[2]s, database: %[6]s_api, adminSecret: %[7]s}
  apiMessageBus: {adminSecret: %[8]s, transportURLSecret: nova-api-transport}
  apiServiceTemplate:
    customServiceConfig: |
      [DEFAULT]
      osapi_compute_listen_port = %[9]d
  cellTemplates:
    cell0:
      cellDatabase: {hostname: %[2]s, database: %[6]s_cell0, adminSecret: %[7]s}
    cell1:
      cellDatabase: {hostname: %[2]s, database: %[6]s_cell1, adminSecret: %[7]s}
      cellMessageBus: {adminSecret: %[8]s, transportURLSecret: nova-cell1-transport}
    cell2:
      cellDatabase: {hostname: %[2]s, database: %[6]s_cell2, adminSecret: %[7]s}
      cellMessageBus: {adminSecret: %[8]s, transportURLSecret: nova-cell2-transport}
      noVNCProxyServiceTemplate: {enabled: false}
  flavors:
  - {name: m1.tiny, vcpus: 1, ram: 512, disk: 1}
`, local.ServiceSecretName, local.HostGateway, NovaRegion, local.RealNodeLabel, local.ImageRef(e2e.NovaImage),
		env.Run, local.DatabaseAdminSecretName, local.MessageBusAdminSecretName, apiPort, local.CloudsSecretName, serviceUser())
}

// serviceUser is the Keystone user the test's Nova makes for itself.
func serviceUser() string { return env.Run + "-nova" }

// serviceUserLogin logs in as the Nova's service user, scoped to project service (so it holds a role
// there), with the password of the Nova's Secret.
func serviceUserLogin(t *testing.T) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := openstack.AuthenticatedClient(ctx, gophercloud.AuthOptions{
		IdentityEndpoint: "http://" + local.HostGateway + ":5000/v3", Username: serviceUser(), DomainName: "Default",
		Password: secretValue(t, local.ServiceSecretName, "NovaPassword"),
		Scope:    &gophercloud.AuthScope{ProjectName: "service", DomainName: "Default"},
	})
	return err
}

// TestNovaControlPlane is the Nova control plane's life on the real stack, in one flow: a Nova with
// cell0, cell1 and cell2 deploys its services as containers of the Nova image on the real node; bad input is said in conditions; a NovaConductor runs alone from hand-made Secrets; a
// customServiceConfig change rolls the scheduler alone; the EDPM computes join cell1 and cell2 through
// host discovery and a server boots on cell2's through the deployed compute API; removing cell2 waits
// for its compute, then unmaps it and removes its database, user and vhost; deleting the Nova removes
// the rest.
func TestNovaControlPlane(t *testing.T) {
	start := time.Now()
	ctx := context.Background()
	h0, h1 := env.Host(t, host0), env.Host(t, host1)
	e2e.CleanHost(t, h0)
	e2e.CleanHost(t, h1)
	env.StartBridge(t, e2e.BridgeOptions{Identity: env.Run + "-bridge", Kinds: servedKinds, Namespaces: []string{ns}})
	worker := env.StartWorker(t, e2e.WorkerOptions{Identity: env.Run + "-worker"})
	db := env.StackDB(t)
	broker := env.BrokerAdmin(t, ns)

	// The computes first: their phase 0 runs while the control plane comes up. The role puts its nodes
	// in cell1; edpm-compute-1's own annotation puts it in cell2.
	hostA, hostB := env.Run+"-compute-0", env.Run+"-compute-1"
	// The hosts join the cloud's OVN (the ovn step): Neutron binds the server's port only on a chassis.
	create(t, gvrRole, fmt.Sprintf(`
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneRole
metadata:
  name: compute
  annotations: {nova.openstack.org/cell: cell1}
spec:
  preProvisioned: true
  nodeTemplate:
    ansibleUser: root
    ansibleSSHPrivateKeySecret: edpm-ssh-key
    managementNetwork: ctlplane
    ansibleVars: {edpm_ovn_sb_connection: %q}
`, local.OVNSouthbound))
	create(t, gvrNode, fmt.Sprintf(`
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneNode
metadata: {name: edpm-compute-0}
spec: {role: compute, hostName: %s, ansibleHost: %s, deploy: true}
`, hostA, h0.Address))
	create(t, gvrNode, fmt.Sprintf(`
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneNode
metadata:
  name: edpm-compute-1
  annotations: {nova.openstack.org/cell: cell2}
spec: {role: compute, hostName: %s, ansibleHost: %s, deploy: true}
`, hostB, h1.Address))
	for _, node := range []string{"edpm-compute-0", "edpm-compute-1"} {
		e2e.WaitFor(t, "NovaExternalCompute "+node+" created by its node", 3*time.Minute, func() (bool, string) {
			u := get(t, gvrNEC, node)
			return u != nil, e2e.Summary(u)
		})
		patch(t, gvrNEC, node, fmt.Sprintf(`{"spec":{"customServiceConfig":%q}}`, computeConfig))
	}

	novaStart := time.Now()
	nova := create(t, gvrNova, novaManifest())
	// After a failure, the computes go before the Nova (cleanups run last first): a Nova waits for the
	// computes of its cells before it goes.
	t.Cleanup(func() {
		for _, node := range []string{"edpm-compute-0", "edpm-compute-1"} {
			deleteAndWait(t, gvrNode, node)
		}
	})
	// kill -9 of the worker while the Nova creates its databases and users, and while cell1 maps itself
	// (its cell-mapping Job): the lists below show no duplicate cell mapping, database or user, and
	// nothing is left after the Nova is deleted.
	killDuring(t, worker, e2e.Ref("Nova", gvrNova, nova), "EnsureDatabase", 2*time.Minute)
	e2e.WaitFor(t, "NovaCell nova-cell1 created by the Nova", 8*time.Minute, func() (bool, string) {
		u := get(t, gvrCell, "nova-cell1")
		return u != nil, e2e.Summary(u)
	})
	// The cell's first Job is its mapping (the conductor's db sync is the NovaConductor's).
	killDuring(t, worker, e2e.Ref("NovaCell", gvrCell, get(t, gvrCell, "nova-cell1")), "RunJob", 8*time.Minute)
	waitReady(t, gvrNova, "nova", 12*time.Minute)
	t.Logf("FIGURE: Nova with cell0, cell1 and cell2 Ready %s after it was created", time.Since(novaStart).Round(time.Second))
	forbidSecrets(t)

	// The Nova made its Keystone user, a member of project service; its API registered its endpoints and
	// created the flavor as that user (checked below).
	inputs := e2e.Condition(get(t, gvrNova, "nova"), "InputsReady")
	require.Equal(t, "ServiceUserReady", inputs.Reason, inputs.Message)
	require.Contains(t, inputs.Message, "Keystone user "+serviceUser()+" at http://"+local.HostGateway+":5000/v3 created by this Nova")
	require.NoError(t, serviceUserLogin(t), "the Nova's service user logs in to project service")
	// The Secret it hands down holds that user's clouds.yaml, which the computes of its cells log in
	// with (they register below).
	ao, _, _, err := clouds.Parse(clouds.WithCloudsYAML(strings.NewReader(secretValue(t, "nova-secret", "clouds.yaml"))),
		clouds.WithCloudName(secretValue(t, "nova-secret", "cloud")), clouds.WithLocations())
	require.NoError(t, err)
	require.Equal(t, serviceUser(), ao.Username)
	require.Equal(t, "http://"+local.HostGateway+":5000/v3", ao.IdentityEndpoint)
	actx, cancel := context.WithTimeout(ctx, 20*time.Second)
	_, err = openstack.AuthenticatedClient(actx, ao)
	cancel()
	require.NoError(t, err, "log in with the handed-down clouds.yaml")

	// Every service a container on the real node, which loaded its merged configuration.
	for _, inst := range []string{"nova-api", "nova-scheduler", "nova-metadata", "nova-cell0-conductor", "nova-cell1-conductor", "nova-cell1-novncproxy", "nova-cell2-conductor"} {
		s := mustService(t, inst)
		require.Equal(t, local.RealNode, s.node, "%s runs on the real node", inst)
		require.Contains(t, e2e.ReadFile(t, s.mergedConfig()), "[DEFAULT]", "%s loaded its merged configuration", inst)
	}

	// Databases, users and vhosts, each once; cell2 has a vhost of its own.
	want := []string{env.Run + "_api", env.Run + "_cell0", env.Run + "_cell1", env.Run + "_cell2"}
	require.Equal(t, want, databases(t, db))
	require.Equal(t, want, users(t, db))
	require.Equal(t, []string{ns + "-nova-api", ns + "-nova-cell1", ns + "-nova-cell2"}, vhosts(t, broker))

	// The cells as nova-manage lists them with the superconductor's configuration: each once, with its
	// own database and transport URL.
	superconductor := mustService(t, "nova-cell0-conductor")
	cells, names := listCells(t, superconductor.mergedConfig())
	t.Logf("cell_v2 list_cells: %v", cells)
	require.Equal(t, []string{"cell0", "cell1", "cell2"}, names, "each cell mapped once")
	require.Equal(t, "none:/", cells["cell0"].transport, "cell0 has no message bus: its none:/// mapping, as nova-manage prints it")
	for _, c := range names {
		require.True(t, strings.HasSuffix(cells[c].database, "/"+env.Run+"_"+c+"?charset=utf8"), "%s: %s", c, cells[c].database)
		if c != "cell0" {
			require.True(t, strings.HasSuffix(cells[c].transport, "/"+ns+"-nova-"+c), "%s: %s", c, cells[c].transport)
		}
	}
	require.Contains(t, e2e.ReadFile(t, mustService(t, "nova-cell2-conductor").mergedConfig()), "/"+ns+"-nova-cell2\n",
		"cell2's conductor on cell2's own vhost")

	// The compute API answers through the deployed API, registered in Keystone in the Nova's region at
	// its Service's address, which outlives the pod (checked again once the pod is replaced, below).
	apiSvc, err := env.Kube.CoreV1().Services(ns).Get(ctx, "nova-api", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"app.kubernetes.io/instance": "nova-api", "app.kubernetes.io/managed-by": "stackflow", "app.kubernetes.io/name": "nova-api"}, apiSvc.Spec.Selector)
	firstAPI := mustService(t, "nova-api")
	endpoint := fmt.Sprintf("http://%s:%d/v2.1", apiSvc.Spec.ClusterIP, apiPort)
	require.Equal(t, endpoint, e2e.Str(get(t, gvrAPI, "nova-api"), "status", "endpoint"))
	require.Equal(t, "True", string(e2e.Condition(get(t, gvrAPI, "nova-api"), "KeystoneEndpointReady").Status))
	cc := env.ComputeClient(t, NovaRegion)
	require.Equal(t, endpoint+"/", cc.Endpoint, "the catalog's compute endpoint of region "+NovaRegion)

	// Bad input surfaces as conditions, beside the running Nova.
	badInput(t)

	// A NovaConductor on its own, from Secrets made by hand: cell1's database and message bus.
	require.NoError(t, createSecret(ctx, "byhand", map[string][]byte{
		"NovaPassword":             []byte(secretValue(t, local.ServiceSecretName, "NovaPassword")),
		"NovaCellDatabasePassword": []byte(secretValue(t, "nova-secret", "NovaCellDatabasePassword-cell1")),
	}))
	require.NoError(t, createSecret(ctx, "byhand-transport", map[string][]byte{"transport_url": []byte(secretValue(t, "nova-cell1-transport", "transport_url"))}))
	create(t, gvrConductor, byHandConductor("byhand-conductor"))

	// A service whose Deployment name is taken by another tool's (a Helm release's) fails saying so, and
	// its deletion leaves that Deployment alone.
	zero := int32(0)
	helmLabels := map[string]string{"app.kubernetes.io/managed-by": "Helm", "app": "clash"}
	_, err = env.Kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "clash-conductor", Labels: helmLabels},
		Spec: appsv1.DeploymentSpec{Replicas: &zero, Selector: &metav1.LabelSelector{MatchLabels: helmLabels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: helmLabels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "helm-made"}}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	create(t, gvrConductor, byHandConductor("clash-conductor"))
	// A conductor whose image cannot be pulled (a registry on a closed loopback port): while its db-sync
	// Job waits, Ready says which pod and container and why, and the workflow does not go on.
	create(t, gvrConductor, strings.Replace(byHandConductor("noimage-conductor"), local.ImageRef(e2e.NovaImage), noImage, 1))
	clash := waitCondition(t, gvrConductor, "clash-conductor", "Ready", "ManagedByOther", 5*time.Minute)
	require.Contains(t, clash.Message, "managed by Helm")
	deleteAndWait(t, gvrConductor, "clash-conductor")
	kept, err := env.Kube.AppsV1().Deployments(ns).Get(ctx, "clash-conductor", metav1.GetOptions{})
	require.NoError(t, err, "the Helm release's Deployment outlives the NovaConductor of its name")
	require.Equal(t, "helm-made", kept.Spec.Template.Spec.Containers[0].Image, "and was not taken over")
	noimg := waitCondition(t, gvrConductor, "noimage-conductor", "Ready", novawf.ReasonPodsNotReady, 3*time.Minute)
	require.Equal(t, metav1.ConditionFalse, noimg.Status)
	require.Regexp(t, `^Job `+ns+`/noimage-conductor-db-sync running: pod noimage-conductor-db-sync-\S+ container config-merge (ErrImagePull|ImagePullBackOff): .*`+regexp.QuoteMeta(noImage), noimg.Message)
	require.Equal(t, noimg.Message, e2e.Condition(get(t, gvrConductor, "noimage-conductor"), novav1beta1.ConditionDBSynced).Message, "DBSynced says the same")
	_, err = env.Kube.AppsV1().Deployments(ns).Get(ctx, "noimage-conductor", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "no Deployment before its database is synced: %v", err)
	deleteAndWait(t, gvrConductor, "noimage-conductor")
	_, err = env.Kube.BatchV1().Jobs(ns).Get(ctx, "noimage-conductor-db-sync", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "its Job deleted with it: %v", err)

	// A customServiceConfig change on the scheduler rolls the scheduler alone.
	pods := map[string]string{}
	for _, inst := range []string{"nova-api", "nova-scheduler", "nova-metadata", "nova-cell0-conductor", "nova-cell1-conductor", "nova-cell2-conductor"} {
		pods[inst] = mustService(t, inst).uid
	}
	hashBefore := e2e.Str(get(t, gvrScheduler, "nova-scheduler"), "status", "hash")
	patch(t, gvrNova, "nova", fmt.Sprintf(`{"spec":{"schedulerServiceTemplate":{"customServiceConfig":%q}}}`, schedulerConfig))
	e2e.WaitFor(t, "the scheduler re-rendered and Ready", 3*time.Minute, func() (bool, string) {
		sched := get(t, gvrScheduler, "nova-scheduler")
		return e2e.Str(sched, "status", "hash") != hashBefore && e2e.Ready(sched), e2e.Summary(sched)
	})
	waitReady(t, gvrNova, "nova", 5*time.Minute)
	require.Contains(t, e2e.Condition(get(t, gvrScheduler, "nova-scheduler"), "ServiceConfigReady").Message, "changed config-data",
		"the status says which input changed")
	var rolled service
	e2e.WaitFor(t, "the rolled scheduler running", 2*time.Minute, func() (bool, string) {
		s, ok := runningService(t, "nova-scheduler")
		rolled = s
		return ok && s.uid != pods["nova-scheduler"], fmt.Sprint(s)
	})
	for inst, uid := range pods {
		if inst != "nova-scheduler" {
			require.Equal(t, uid, mustService(t, inst).uid, "%s was not rolled", inst)
		}
	}
	merged := e2e.ReadFile(t, rolled.mergedConfig())
	require.Regexp(t, `(?m)^discover_hosts_in_cells_interval = 5$`, merged, "the user's value wins in the file the scheduler loaded")
	require.NotContains(t, merged, "discover_hosts_in_cells_interval = 30")
	e2e.WaitFor(t, "the scheduler's own dump of its options", time.Minute, func() (bool, string) {
		return strings.Contains(rolled.log(t, "nova-scheduler"), "scheduler.discover_hosts_in_cells_interval = 5"), "…"
	})

	waitReady(t, gvrConductor, "byhand-conductor", 5*time.Minute)
	e2e.WaitFor(t, "the hand-made conductor up in Nova", 2*time.Minute, func() (bool, string) {
		pages, err := services.List(cc, services.ListOpts{Binary: "nova-conductor", Host: "byhand-conductor"}).AllPages(ctx)
		if err != nil {
			return false, err.Error()
		}
		svcs, _ := services.ExtractServices(pages)
		return len(svcs) == 1 && svcs[0].State == "up", fmt.Sprint(svcs)
	})

	// The computes register in cell1 and cell2: mapped by host discovery, their services up in the
	// deployed API, cell2's on cell2's vhost.
	for _, node := range []string{"edpm-compute-0", "edpm-compute-1"} {
		waitReady(t, gvrNEC, node, 15*time.Minute)
		// Deployed before the control plane, each compute waited for the compute API in the catalog
		// before its registration deadline started.
		events, err := env.History(ctx, lifecycle.WorkflowID(e2e.Ref("NovaExternalCompute", gvrNEC, get(t, gvrNEC, node))))
		require.NoError(t, err)
		var order []string
		for _, ev := range events {
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && strings.HasPrefix(a.GetActivityType().GetName(), "WaitCompute") {
				order = append(order, a.GetActivityType().GetName())
			}
		}
		require.NotEmpty(t, order, node)
		for i, name := range order {
			want := map[bool]string{true: "WaitComputeAPI", false: "WaitComputeRegistered"}[i%2 == 0]
			require.Equal(t, want, name, "%s: the compute API first, then the registration, in every reconcile: %v", node, order)
		}
		require.Len(t, order, len(order)/2*2, "%s ended on a registration: %v", node, order)
	}
	e2e.WaitFor(t, "the computes mapped in their cells", 2*time.Minute, func() (bool, string) {
		mapped := listHosts(t, superconductor.mergedConfig())
		return mapped[hostA] == "cell1" && mapped[hostB] == "cell2", fmt.Sprint(mapped)
	})
	pages, err := services.List(cc, services.ListOpts{Binary: "nova-compute"}).AllPages(ctx)
	require.NoError(t, err)
	computes, err := services.ExtractServices(pages)
	require.NoError(t, err)
	up := map[string]string{}
	for _, s := range computes {
		up[s.Host] = s.State
	}
	require.Equal(t, map[string]string{hostA: "up", hostB: "up"}, up, "the computes, as the deployed API lists them")
	require.Regexp(t, `(?m)^transport_url = rabbit://\S+@`+local.HostGateway+`:5672/`+ns+`-nova-cell1$`, e2e.HostFile(h0, "etc/nova/nova.conf.d/01-nova.conf"))
	require.Regexp(t, `(?m)^transport_url = rabbit://\S+@`+local.HostGateway+`:5672/`+ns+`-nova-cell2$`, e2e.HostFile(h1, "etc/nova/nova.conf.d/01-nova.conf"))

	// A server boots on the cell2 compute, through the deployed API, with the flavor the Nova created in
	// its own API database (which has flavors of its own: none but the spec's).
	fpages, err := flavors.ListDetail(cc, flavors.ListOpts{AccessType: flavors.AllAccess}).AllPages(ctx)
	require.NoError(t, err)
	flvs, err := flavors.ExtractFlavors(fpages)
	require.NoError(t, err)
	require.Len(t, flvs, 1, "the spec's flavor, and only it")
	require.Equal(t, []any{"m1.tiny", 1, 512, 1}, []any{flvs[0].Name, flvs[0].VCPUs, flvs[0].RAM, flvs[0].Disk})
	require.Equal(t, `["m1.tiny"]`, e2e.Str(get(t, gvrNova, "nova"), "status", "flavors"))
	cloud, err := env.CloudIn(ctx, NovaRegion)
	require.NoError(t, err)
	cloud.Compute = cc
	serverID, err := cloud.BootServer(ctx, env.Run+"-vm", hostB, env.Stack.OpenStack.Image, env.Stack.OpenStack.TenantNetwork)
	require.NoError(t, err)
	require.NoError(t, servers.Delete(ctx, cc, serverID).ExtractErr())
	e2e.WaitFor(t, "server deleted", 3*time.Minute, func() (bool, string) {
		_, err := servers.Get(ctx, cc, serverID).Extract()
		return gophercloud.ResponseCodeIs(err, 404), fmt.Sprint(err)
	})

	// Removing cell2 while it has a compute is refused, saying why; once the compute is gone the cell
	// is unmapped and its database, user and vhost removed.
	patch(t, gvrNova, "nova", `{"spec":{"cellTemplates":{"cell2":null}}}`)
	blocked := waitCondition(t, gvrNova, "nova", "CellsReady", "CellRemovalBlocked", 3*time.Minute)
	require.Contains(t, blocked.Message, "edpm-compute-1")
	_, names = listCells(t, superconductor.mergedConfig())
	require.Equal(t, []string{"cell0", "cell1", "cell2"}, names, "cell2 stays mapped while its compute remains")
	deleteAndWait(t, gvrNode, "edpm-compute-1")
	waitReady(t, gvrNova, "nova", 5*time.Minute)
	_, names = listCells(t, superconductor.mergedConfig())
	require.Equal(t, []string{"cell0", "cell1"}, names)
	want = []string{env.Run + "_api", env.Run + "_cell0", env.Run + "_cell1"}
	require.Equal(t, want, databases(t, db))
	require.Equal(t, want, users(t, db))
	require.Equal(t, []string{ns + "-nova-api", ns + "-nova-cell1"}, vhosts(t, broker))
	require.Nil(t, get(t, gvrCell, "nova-cell2"))
	// The API and the scheduler restarted without cell2 (they read the mappings once, at start).
	for _, inst := range []string{"nova-api", "nova-scheduler"} {
		require.True(t, strings.HasSuffix(e2e.ReadFile(t, mustService(t, inst).mappedCells()), "\ncell0\ncell1\n"), "%s restarted with cell0 and cell1 mapped", inst)
	}
	// The API runs in a new pod at a new address; the catalog still names the Service, and the compute
	// API answers through it.
	restarted := mustService(t, "nova-api")
	require.NotEqual(t, firstAPI.uid, restarted.uid, "the API pod was replaced")
	require.Equal(t, endpoint, e2e.Str(get(t, gvrAPI, "nova-api"), "status", "endpoint"))
	cc = env.ComputeClient(t, NovaRegion)
	require.Equal(t, endpoint+"/", cc.Endpoint)
	_, err = flavors.ListDetail(cc, nil).AllPages(ctx)
	require.NoError(t, err, "the compute API answers at its catalog endpoint after the pod changed (old pod %s, new pod %s)", firstAPI.ip, restarted.ip)

	// Everything goes with the Nova: services, cells, databases, users, vhosts, endpoints.
	forbidSecrets(t)
	deleteAndWait(t, gvrConductor, "byhand-conductor")
	deleteAndWait(t, gvrNode, "edpm-compute-0")
	deleteAndWait(t, gvrNova, "nova")
	err = serviceUserLogin(t)
	require.True(t, gophercloud.ResponseCodeIs(err, http.StatusUnauthorized), "the Nova's service user went with it: %v", err)
	svcs, err := env.Kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=stackflow"})
	require.NoError(t, err)
	require.Empty(t, svcs.Items, "the services' Services went with them")
	// Nor do the Jobs' pods stay behind (a Job deleted with the API's default orphans them).
	e2e.WaitFor(t, "no pod of the Nova left", 2*time.Minute, func() (bool, string) {
		pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=stackflow"})
		if err != nil {
			return false, err.Error()
		}
		var names []string
		for _, p := range pods.Items {
			names = append(names, p.Name)
		}
		return len(names) == 0, strings.Join(names, ", ")
	})
	require.Empty(t, databases(t, db))
	require.Empty(t, users(t, db))
	require.Empty(t, vhosts(t, broker))
	for _, gvr := range []schema.GroupVersionResource{gvrCell, gvrAPI, gvrScheduler, gvrConductor, gvrMetadata} {
		list, err := env.Dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		require.Empty(t, list.Items, "no %s left", gvr.Resource)
	}
	// Keystone's endpoint list, not a token's catalog: each of the stack's two Keystone processes caches
	// the catalog it computed, so a new token may list a deleted endpoint for a while.
	provider, eo := env.CloudProvider(t)
	identity, err := openstack.NewIdentityV3(provider, eo)
	require.NoError(t, err)
	pages, err = endpoints.List(identity, endpoints.ListOpts{RegionID: NovaRegion}).AllPages(ctx)
	require.NoError(t, err)
	left, err := endpoints.ExtractEndpoints(pages)
	require.NoError(t, err)
	require.Empty(t, left, "no endpoint left in region "+NovaRegion)
	t.Logf("FIGURE: scenario done in %s", time.Since(start).Round(time.Second))
}

// badInput applies what a user gets wrong and checks each is said in a condition: a Nova whose Secret
// does not exist, a Nova whose Keystone administrator's Secret does not exist (one naming no Keystone at
// all is refused at admission), a metadata service of a cell nobody serves, a second NovaCell claiming cell0 on the
// Nova's API database; a Nova naming cell0 twice in cellTemplates does not even reach the API server's
// storage.
func badInput(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	create(t, gvrNova, fmt.Sprintf(`
apiVersion: nova.openstack.org/v1beta1
kind: Nova
metadata: {name: nosecret}
spec:
  secret: no-such-secret
  keystoneAuthURL: http://%s:5000/v3
  apiDatabase: {hostname: 127.0.0.1, database: %s_bad_api, adminSecret: %s}
  apiMessageBus: {transportURLSecret: nova-api-transport}
  cellTemplates:
    cell0: {cellDatabase: {hostname: 127.0.0.1, database: %s_bad_cell0}}
`, local.HostGateway, env.Run, local.DatabaseAdminSecretName, env.Run))
	create(t, gvrMetadata, fmt.Sprintf(`
apiVersion: nova.openstack.org/v1beta1
kind: NovaMetadata
metadata: {name: cell9-metadata}
spec:
  cellName: cell9
  secret: nova-secret
  keystoneAuthURL: http://%s:5000/v3
  cellDatabaseHostname: 127.0.0.1
`, local.HostGateway))
	create(t, gvrCell, fmt.Sprintf(`
apiVersion: nova.openstack.org/v1beta1
kind: NovaCell
metadata: {name: cell0-again}
spec:
  cellName: cell0
  secret: nova-secret
  keystoneAuthURL: http://%[1]s:5000/v3
  cellDatabaseHostname: %[1]s
  apiDatabaseHostname: %[1]s
  apiDatabaseName: %[2]s_api
  transportURLSecret: nova-api-transport
`, local.HostGateway, env.Run))
	// JSON that names cell0 twice, as a hand-edited manifest could: refused with the duplicate named.
	raw := fmt.Sprintf(`{"apiVersion":"nova.openstack.org/v1beta1","kind":"Nova","metadata":{"name":"twice","namespace":%q},
"spec":{"secret":"osp-secret","keystoneAuthURL":"http://%s:5000/v3","apiDatabase":{"hostname":"127.0.0.1"},
"apiMessageBus":{"transportURLSecret":"nova-api-transport"},
"cellTemplates":{"cell0":{"cellDatabase":{"hostname":"127.0.0.1"}},"cell0":{"cellDatabase":{"hostname":"127.0.0.2"}}}}}`, ns, local.HostGateway)
	err := env.Kube.Discovery().RESTClient().Post().AbsPath("/apis/nova.openstack.org/v1beta1/namespaces/"+ns+"/novas").
		Param("fieldValidation", "Strict").SetHeader("Content-Type", "application/json").Body([]byte(raw)).Do(ctx).Error()
	require.ErrorContains(t, err, `duplicate field "spec.cellTemplates.cell0"`)

	// Keystone named neither way: refused at admission, saying what is missing.
	raw = fmt.Sprintf(`{"apiVersion":"nova.openstack.org/v1beta1","kind":"Nova","metadata":{"name":"nokeystone","namespace":%q},
"spec":{"secret":"osp-secret","apiDatabase":{"hostname":"127.0.0.1"},"apiMessageBus":{"transportURLSecret":"nova-api-transport"},
"cellTemplates":{"cell0":{"cellDatabase":{"hostname":"127.0.0.1"}}}}}`, ns)
	err = env.Kube.Discovery().RESTClient().Post().AbsPath("/apis/nova.openstack.org/v1beta1/namespaces/"+ns+"/novas").
		SetHeader("Content-Type", "application/json").Body([]byte(raw)).Do(ctx).Error()
	require.ErrorContains(t, err, "keystoneAuthURL or keystoneAdminSecret is required")
	// An administrator's Secret that does not exist (yet: a configuration writes keystone-clouds once its
	// Keystone is deployed): the Nova waits for it, saying so in InputsReady, before any database is made.
	create(t, gvrNova, fmt.Sprintf(`
apiVersion: nova.openstack.org/v1beta1
kind: Nova
metadata: {name: noadmin}
spec:
  secret: %[1]s
  keystoneAdminSecret: no-such-clouds
  apiDatabase: {hostname: 127.0.0.1, database: %[2]s_bad_admin_api, adminSecret: %[3]s}
  apiMessageBus: {transportURLSecret: nova-api-transport}
  cellTemplates:
    cell0: {cellDatabase: {hostname: 127.0.0.1, database: %[2]s_bad_admin_cell0, adminSecret: %[3]s}}
`, local.ServiceSecretName, env.Run, local.DatabaseAdminSecretName))

	c := waitCondition(t, gvrNova, "nosecret", "InputsReady", "SecretMissing", 2*time.Minute)
	require.Contains(t, c.Message, ns+"/no-such-secret")
	c = waitCondition(t, gvrNova, "noadmin", "InputsReady", "SecretMissing", 2*time.Minute)
	require.Contains(t, c.Message, ns+"/no-such-clouds with key clouds.yaml")
	c = waitCondition(t, gvrMetadata, "cell9-metadata", "InputsReady", "UnknownCell", 2*time.Minute)
	require.Contains(t, c.Message, `cell "cell9"`)
	c = waitCondition(t, gvrCell, "cell0-again", "CellMapped", "DuplicateCell", 2*time.Minute)
	require.Contains(t, c.Message, "NovaCell nova-cell0")
	require.Equal(t, lifecycle.PhaseFailed, e2e.Str(get(t, gvrCell, "cell0-again"), "status", "phase"))
	// None of them created anything.
	require.Empty(t, e2e.QueryStrings(t, env.StackDB(t), "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE ?", env.Run+`\_bad%`))
	_, err = env.Kube.AppsV1().Deployments(ns).Get(ctx, "cell0-again-conductor", metav1.GetOptions{})
	require.Error(t, err)
	deleteAndWait(t, gvrNova, "nosecret")
	deleteAndWait(t, gvrNova, "noadmin")
	deleteAndWait(t, gvrMetadata, "cell9-metadata")
	deleteAndWait(t, gvrCell, "cell0-again")
}

// noImage is an image no registry serves: its registry is a closed port on loopback, so the pull fails
// at once and sends nothing off the machine.
const noImage = "127.0.0.1:1/stackflow-no-such-image:dev"

// byHandConductor is a NovaConductor of cell1 from the Secrets made by hand (byhand, byhand-transport).
func byHandConductor(name string) string {
	return fmt.Sprintf(`
apiVersion: nova.openstack.org/v1beta1
kind: NovaConductor
metadata: {name: %[1]s}
spec:
  cellName: cell1
  secret: byhand
  keystoneAuthURL: http://%[2]s:5000/v3
  cellDatabaseHostname: %[2]s
  cellDatabaseUser: %[3]s_cell1
  cellDatabaseName: %[3]s_cell1
  transportURLSecret: byhand-transport
  nodeSelector: {%[4]s: "true"}
  tolerations: [{key: %[4]s, operator: Exists, effect: NoSchedule}]
  containerImage: %[5]s
`, name, local.HostGateway, env.Run, local.RealNodeLabel, local.ImageRef(e2e.NovaImage))
}
