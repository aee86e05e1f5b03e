// Package samples proves the first thing a user meets: `make run`'s samples (exactly deploy/samples)
// converge on the local stack with stackflow's bridge and workers running as make run runs them (pods of
// the stack's release of the chart, from this checkout's images), an idle system then stays idle (no
// workflow makes progress while nothing changes, though kwok's Node heartbeats keep flowing), and day 2
// works on it. When it passes it leaves that cloud up and served, as make run does: the packages after
// it in its lane compose on it (tests/servers), and tests/samplesdown then deletes the samples and proves
// that their teardown leaves nothing. A failed run removes what it applied.
package samples

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/services"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/agents"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/external"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/routers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/portsbinding"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	"github.com/gophercloud/gophercloud/v2/openstack/placement/v1/resourceproviders"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	osacts "github.com/stackflow/stackflow/activities/openstack"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/api/oslo"
	"github.com/stackflow/stackflow/bridge"
	"github.com/stackflow/stackflow/deploy/describe"
	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/tests/e2e"
	"github.com/stackflow/stackflow/workflows/controlplane"
	"github.com/stackflow/stackflow/workflows/dataplane"
)

var env *e2e.Env

var (
	gvrServer  = schema.GroupVersionResource{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Resource: "openstackservers"}
	gvrCluster = schema.GroupVersionResource{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta1", Resource: "openstackclusters"}
	gvrAgent   = schema.GroupVersionResource{Group: "neutron.openstack.org", Version: "v1beta1", Resource: "ovnmetadataagents"}
)

func TestMain(m *testing.M) {
	os.Exit(mainErr(m))
}

func mainErr(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var err error
	env, err = e2e.Setup(ctx, e2e.Config{TemporalNamespace: "stackflow-e2e-samples", RunPrefix: "sm",
		// stackflow runs from the images make up imported, not from binaries of the test's own.
		Components: local.AllComponents, HostCount: 2, Binaries: []string{}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Close()
	return env.RunTests(m)
}

// IdleWindow is how long the system is watched while nothing changes. Idle object workflows have no
// timer and run no activity: their documented resync is none, so in this window no open workflow may
// add a single event to its history. Two minutes see every kwok Node's heartbeat (every 20–45 s) at
// least twice and four times the longest poll interval a waiting workflow uses (30 s).
const IdleWindow = 2 * time.Minute

// sampleControlPlane are the components of the sample profile with a database: each release's database
// is sample_<name>. The profile's ovn release has none.
var sampleControlPlane = []string{"keystone", "placement", "glance", "neutron"}

// sampleNovaMetadata is the metadata service of the samples' Nova, which the sample computes' agents name.
const sampleNovaMetadata = "nova-metadata"

// sampleNova is the Nova of the samples.
const sampleNova = "nova"

func TestSamplesConvergeAndStayIdle(t *testing.T) {
	ctx := context.Background()
	objs := samplesOf(t)
	// A stack that served `make run` before holds the same objects (Ctrl-C leaves them Ready, with no
	// worker): they are removed the way a user removes them, their workflows tearing down what they made.
	removeRunSamples(t)
	// The end check of the hosts is tests/samplesdown's, which tears the samples down.
	for _, name := range []string{"edpm-compute-0", "edpm-compute-1"} {
		e2e.PrepareHost(t, env.Host(t, name))
	}

	// stackflow as make run runs it: the stack's release of the chart, its bridge and workers pods of
	// this checkout's images, here in the test's Temporal namespace.
	serveRelease(t)
	// A failed test removes what it applied, served by the same release (this runs before the release
	// scales down), so that the next run or make run finds the hosts and the cloud clean: left behind,
	// the samples' workflows live in this test's Temporal namespace, where make delete-samples does not
	// look. The release's pods are shown first, as they were at the failure.
	var applied []local.Applied
	t.Cleanup(func() {
		if !t.Failed() || len(applied) == 0 {
			return
		}
		e2e.DumpPods(t, env.Kube, local.ChartNamespace, "app.kubernetes.io/instance="+local.ChartRelease)
		dctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		if err := local.DeleteSamples(dctx, env.Dyn, applied, testWriter{t}, 5*time.Second); err != nil {
			t.Errorf("remove the samples after the failure: %v", err)
		}
	})

	start := time.Now()
	applied, err := env.Stack.ApplySamples(ctx)
	require.NoError(t, err, "apply deploy/samples")
	require.Equal(t, len(objs), len(applied))

	wctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	states, err := local.WaitSamples(wctx, env.Dyn, applied, bridge.IsServed, testWriter{t}, 5*time.Second)
	cancel()
	require.NoError(t, err, "every sample Ready:\n%s", table(states))
	t.Logf("all %d samples Ready %s after they were applied", len(applied), time.Since(start).Round(time.Second))

	t.Run("the whole cloud as one tree", func(t *testing.T) {
		want := []string{
			`(?m)^KupenstackConfiguration/kupenstack\s+True`,
			`(?m)^├─ OpenStackCloudConfigurationProfile/default\s+True`,
			`(?m)^Nova/nova\s+True`,
			`(?m)^OpenStackDataPlane/edpm\s+True`,
			`(?m)^└─ OpenStackDataPlaneRole/edpm-compute\s+True`,
			`(?m)^   ├─ OpenStackDataPlaneNode/edpm-compute-0\s+True`,
			`(?m)^   │  ├─ NovaExternalCompute/edpm-compute-0\s+True`,
			`(?m)^   │  │  └─ → NovaCell/nova-cell1\s+True.*its cell, of Nova nova, region RegionOne`,
			`(?m)^   │  └─ OVNMetadataAgent/edpm-compute-0\s+True`,
			`(?m)^OpenStackCluster/sample-cluster\s+True`,
			`(?m)^└─ Bastion/sample-cluster-bastion-1\s+True\s+ACTIVE`,
		}
		// Read until the tree shows all of it: an object woken by a change of another (a data plane by
		// its member's status) reconciles again for a moment, Ready False while it does, then is back.
		var tree, missing string
		var failures int
		quiet := assert.Eventually(t, func() bool {
			roots, err := describe.Read(ctx, env.Dyn, describe.Scope{Namespace: local.SampleNamespace}, time.Now())
			if err != nil {
				missing = err.Error()
				return false
			}
			var b strings.Builder
			if err := describe.Render(&b, roots, describe.RenderOptions{}); err != nil {
				missing = err.Error()
				return false
			}
			tree, failures, missing = b.String(), describe.Failures(roots), ""
			for _, w := range want {
				if !regexp.MustCompile(w).MatchString(tree) {
					missing = w
					break
				}
			}
			return failures == 0 && missing == ""
		}, time.Minute, time.Second)
		t.Logf("kubectl stackflow describe -n %s:\n%s", local.SampleNamespace, tree)
		require.True(t, quiet, "the tree never showed the whole cloud Ready: %d failures, missing %s", failures, missing)
	})
	t.Run("make run's hints work as printed", func(t *testing.T) { runHints(t) })
	t.Run("the docs' runnable blocks", func(t *testing.T) { runDocBlocks(t) })

	// The idle window opens here: the checks that follow, up to the idle verdict, only read (the cloud's
	// objects, OpenStack, the hosts), so they run inside it rather than before it. The hints above signal
	// a node (pause, resume): the window starts once that has settled.
	idle := openIdleWindow(t)

	// The control plane of the sample profile runs for real on the real node: Keystone answers its
	// bootstrap administrator, and its catalog lists what the releases registered; Placement and Glance
	// answer with that token.
	t.Run("the sample control plane runs for real", func(t *testing.T) {
		for _, chart := range append(slices.Clone(sampleControlPlane), "ovn") {
			requireRunningOnRealNode(t, local.SampleNamespace, chart)
		}
		// The configuration wrote the administrator's clouds.yaml (Secret keystone-clouds, the cloud named
		// after it) once keystone was deployed: a client logs in with that file alone, at the Service's
		// address.
		api := env.ChartKeystoneAPI(t, local.SampleNamespace)
		yml := env.SecretValue(t, local.SampleNamespace, controlplane.CloudsSecret, "clouds.yaml")
		require.Equal(t, "kupenstack", env.SecretValue(t, local.SampleNamespace, controlplane.CloudsSecret, "cloud"))
		ao, eo, _, err := clouds.Parse(clouds.WithCloudsYAML(strings.NewReader(yml)), clouds.WithCloudName("kupenstack"), clouds.WithLocations())
		require.NoError(t, err)
		require.Equal(t, api, ao.IdentityEndpoint)
		actx, cancel := context.WithTimeout(ctx, 20*time.Second)
		provider, err := openstack.AuthenticatedClient(actx, ao)
		cancel()
		require.NoError(t, err, "log in with the clouds.yaml of Secret %s", controlplane.CloudsSecret)
		require.Equal(t, env.SecretValue(t, local.SampleNamespace, "keystone-admin", "OS_REGION_NAME"), eo.Region)
		catalog := e2e.Catalog(t, provider)
		for _, typ := range []string{"identity", "placement", "image", "network"} {
			require.Len(t, catalog[typ], 3, "%s's public, internal and admin endpoints in the catalog: %v", typ, catalog)
		}
		// and the samples' Nova registered its compute API there (public and internal).
		require.Len(t, catalog["compute"], 2, "the compute API's public and internal endpoints in the catalog: %v", catalog)
		// The test hosts, where the computes' services run, reach every endpoint the deployment registered
		// (a ClusterIP, through the stack's kube-proxy): each answers its version document.
		from := env.Host(t, "edpm-compute-0")
		for typ, eps := range catalog {
			for _, ep := range eps {
				hctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				out, err := exec.CommandContext(hctx, "ip", "netns", "exec", from.Namespace, "curl", "-sS", "-o", "/dev/null",
					"-w", "%{http_code}", "--max-time", "10", ep.URL).CombinedOutput()
				cancel()
				require.NoError(t, err, "%s's %s endpoint %s from %s: %s", typ, ep.Interface, ep.URL, from.Name, out)
				require.Regexp(t, `^[23]\d\d$`, string(out), "%s's %s endpoint %s answers %s from %s", typ, ep.Interface, ep.URL, out, from.Name)
			}
		}
		placement, err := openstack.NewPlacementV1(provider, gophercloud.EndpointOpts{})
		require.NoError(t, err)
		_, err = resourceproviders.List(placement, nil).AllPages(ctx)
		require.NoError(t, err, "Placement lists resource providers with Keystone's token")
		glance, err := openstack.NewImageV2(provider, gophercloud.EndpointOpts{})
		require.NoError(t, err)
		pages, err := images.List(glance, images.ListOpts{Name: local.ImageName}).AllPages(ctx)
		require.NoError(t, err, "Glance lists images with Keystone's token")
		imgs, err := images.ExtractImages(pages)
		require.NoError(t, err)
		require.Len(t, imgs, 1, "the glance release's bootstrap Job made image %s", local.ImageName)
		require.Equal(t, images.ImageStatusActive, imgs[0].Status)
		neutron, err := openstack.NewNetworkV2(provider, gophercloud.EndpointOpts{})
		require.NoError(t, err)
		requireNeutronOnItsOVN(t, neutron)
		// The neutron release's bootstrap Job made the tenant network, with its subnet.
		nwPages, err := networks.List(neutron, networks.ListOpts{Name: local.TenantNetwork}).AllPages(ctx)
		require.NoError(t, err)
		nws, err := networks.ExtractNetworks(nwPages)
		require.NoError(t, err)
		require.Len(t, nws, 1, "network %s", local.TenantNetwork)
		require.Len(t, nws[0].Subnets, 1, "network %s's subnet", local.TenantNetwork)
		// And the external network, with a router between it and the tenant subnet.
		yes := true
		extPages, err := networks.List(neutron, external.ListOptsExt{ListOptsBuilder: networks.ListOpts{Name: "public"}, External: &yes}).AllPages(ctx)
		require.NoError(t, err)
		exts, err := networks.ExtractNetworks(extPages)
		require.NoError(t, err)
		require.Len(t, exts, 1, "the external network public")
		rPages, err := routers.List(neutron, routers.ListOpts{Name: "router"}).AllPages(ctx)
		require.NoError(t, err)
		rs, err := routers.ExtractRouters(rPages)
		require.NoError(t, err)
		require.Len(t, rs, 1, "the router")
		require.Equal(t, exts[0].ID, rs[0].GatewayInfo.NetworkID, "the router's gateway is on the external network")
		ifPages, err := ports.List(neutron, ports.ListOpts{DeviceID: rs[0].ID, DeviceOwner: "network:router_interface"}).AllPages(ctx)
		require.NoError(t, err)
		ifs, err := ports.ExtractPorts(ifPages)
		require.NoError(t, err)
		require.Len(t, ifs, 1, "the router's interfaces")
		require.Equal(t, nws[0].Subnets[0], ifs[0].FixedIPs[0].SubnetID, "the router's interface is on the tenant subnet")
		// Its southbound database answers the test hosts at the node port the profile gives it, where
		// chassis outside the cluster connect.
		hctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		out, err := exec.CommandContext(hctx, "ip", "netns", "exec", from.Namespace, "ovsdb-client", "--timeout=10", "list-dbs",
			"tcp:"+local.HostGateway+":30642").CombinedOutput()
		cancel()
		require.NoError(t, err, "the sample OVN's southbound database from %s: %s", from.Name, out)
		require.Contains(t, strings.Fields(string(out)), "OVN_Southbound", "from %s", from.Name)
		// Neutron's message bus is a vhost of the stack's RabbitMQ, which its release created.
		vhost, err := env.BrokerAdmin(t, local.SampleNamespace).GetVhost("sample_neutron")
		require.NoError(t, err, "the neutron release's vhost")
		require.Equal(t, "sample_neutron", vhost.Name)
	})

	// Nothing of the cloud is a shape without a process: every pod of it (stackflow's own, the control
	// plane's releases, the Nova's services) is a container on the real node, running and ready,
	// or a Job's pod that ran.
	t.Run("every pod is a real container or a Job that ran", func(t *testing.T) { requireEveryPodReal(t) })

	// The samples are one cloud: the server and the bastion run on the EDPM computes of the Nova the
	// samples deployed, in its region, as make run prints.
	var placed map[string]string
	t.Run("the sample server and bastion run on the sample computes", func(t *testing.T) {
		placed = requireOnSampleComputes(t)
		hv, err := local.ServerHypervisor(ctx, env.Dyn, local.SampleNamespace, local.SampleServerName)
		require.NoError(t, err)
		require.Equal(t, placed[local.SampleServerName], hv, "make run prints where the server runs")
	})

	// The Nova wrote a clouds.yaml of its service user into the Secret it hands down, and the computes of
	// its cell reach it with that file, not with the namespace's cloud: every OpenStack call of their
	// workflows names that Secret, and the file logs in.
	t.Run("the sample computes reach their Nova as its service user", func(t *testing.T) {
		nova, err := env.Dyn.Resource(e2e.GVRNova).Namespace(local.SampleNamespace).Get(ctx, sampleNova, metav1.GetOptions{})
		require.NoError(t, err)
		secret := sampleNova + "-secret"
		require.Equal(t, sampleNova, env.SecretValue(t, local.SampleNamespace, secret, "cloud"))
		ao, _, _, err := clouds.Parse(clouds.WithCloudsYAML(strings.NewReader(env.SecretValue(t, local.SampleNamespace, secret, "clouds.yaml"))),
			clouds.WithCloudName(sampleNova), clouds.WithLocations())
		require.NoError(t, err)
		require.Empty(t, e2e.Str(nova, "spec", "keystoneAuthURL"), "the Nova finds its Keystone in keystoneAdminSecret")
		require.Equal(t, env.ChartKeystoneAPI(t, local.SampleNamespace), ao.IdentityEndpoint, "at the Keystone the samples deployed")
		require.Equal(t, "nova", ao.Username, "as the Nova's service user")
		require.Equal(t, "service", ao.TenantName)
		actx, cancel := context.WithTimeout(ctx, 20*time.Second)
		_, err = openstack.AuthenticatedClient(actx, ao)
		cancel()
		require.NoError(t, err, "log in with the clouds.yaml of Secret %s", secret)
		for _, c := range []struct {
			gvr      schema.GroupVersionResource
			kind     string
			activity string
		}{
			{e2e.GVRNovaExternalCompute, "NovaExternalCompute", "WaitComputeRegistered"},
			{gvrAgent, "OVNMetadataAgent", "WaitNetworkAgentAlive"},
		} {
			obj, err := env.Dyn.Resource(c.gvr).Namespace(local.SampleNamespace).Get(ctx, "edpm-compute-0", metav1.GetOptions{})
			require.NoError(t, err)
			events, err := env.History(ctx, lifecycle.WorkflowID(e2e.Ref(c.kind, c.gvr, obj)))
			require.NoError(t, err)
			dc, err := env.DataConverter()
			require.NoError(t, err)
			var used []string
			for _, ev := range events {
				if a := ev.GetActivityTaskScheduledEventAttributes(); a.GetActivityType().GetName() == c.activity {
					var in struct {
						Cloud struct {
							Name string `json:"name"`
						} `json:"cloud"`
					}
					require.NoError(t, dc.FromPayload(a.GetInput().GetPayloads()[0], &in))
					used = append(used, in.Cloud.Name)
				}
			}
			require.NotEmpty(t, used, "%s/edpm-compute-0 ran %s", c.kind, c.activity)
			for _, name := range used {
				require.Equal(t, secret, name, "%s/edpm-compute-0's %s logs in with Secret %s", c.kind, c.activity, secret)
			}
		}
	})

	// The sample computes are chassis of the cloud's OVN, each with its metadata agent, both alive in
	// Neutron; the server's port is bound by ML2/OVN to the chassis of the compute it runs on.
	t.Run("the sample computes are OVN chassis with live metadata agents", func(t *testing.T) {
		c := sampleCloud(t)
		for _, host := range []string{"edpm-compute-0", "edpm-compute-1"} {
			c.WaitNetworkAgents(t, host, 2*time.Minute, e2e.ChassisAgents...)
		}
		// The replay corpus keeps an agent's wait for Neutron and its record's deletion.
		agent, err := env.Dyn.Resource(gvrAgent).Namespace(local.SampleNamespace).Get(ctx, "edpm-compute-0", metav1.GetOptions{})
		require.NoError(t, err)
		require.NotEmpty(t, e2e.Str(agent, "status", "agentID"), "the status names the agent Neutron lists")
		id := lifecycle.WorkflowID(e2e.Ref("OVNMetadataAgent", gvrAgent, agent))
		env.RecordPath(id, "agent-alive", e2e.Scheduled("WaitNetworkAgentAlive"))
		env.RecordPath(id, "agent-removed", e2e.Scheduled("DeleteNetworkAgents"))
		srv, err := env.Dyn.Resource(gvrServer).Namespace(local.SampleNamespace).Get(ctx, local.SampleServerName, metav1.GetOptions{})
		require.NoError(t, err)
		var bound []struct {
			ports.Port
			portsbinding.PortsBindingExt
		}
		pages, err := ports.List(c.Network, ports.ListOpts{DeviceID: e2e.Str(srv, "status", "instanceID")}).AllPages(ctx)
		require.NoError(t, err)
		require.NoError(t, ports.ExtractPortsInto(pages, &bound))
		require.Len(t, bound, 1, "the sample server's port")
		require.Equal(t, placed[local.SampleServerName], bound[0].HostID, "bound to the server's compute")
		require.Equal(t, "ovs", bound[0].VIFType, "bound by ML2/OVN to that host's chassis")

		// Each agent forwards instances' metadata requests to the samples' Nova (the role's
		// neutron.openstack.org/nova-metadata): its configuration names that Nova's metadata API, where
		// the NovaMetadata says it answers, and holds that Nova's shared secret. The request the agent
		// forwards for the sample server, signed with the secret of its configuration and sent from the
		// compute's network, is answered with the server's metadata. The request from the instance's own
		// namespace through the agent's haproxy is the one check this cloud cannot make: Nova's fake
		// driver plugs no VIF, so no chassis claims the port and the agent serves no namespace for it.
		md, err := env.Dyn.Resource(e2e.GVRNovaMetadata).Namespace(local.SampleNamespace).Get(ctx, sampleNovaMetadata, metav1.GetOptions{})
		require.NoError(t, err)
		endpoint := e2e.Str(md, "status", "endpoint")
		require.NotEmpty(t, endpoint, "the NovaMetadata reports where it answers")
		shared := env.SecretValue(t, local.SampleNamespace, e2e.Str(md, "spec", "secret"), "MetadataSecret")
		for _, host := range []string{"edpm-compute-0", "edpm-compute-1"} {
			a, err := env.Dyn.Resource(gvrAgent).Namespace(local.SampleNamespace).Get(ctx, host, metav1.GetOptions{})
			require.NoError(t, err)
			require.Equal(t, sampleNovaMetadata, e2e.Str(a, "spec", "novaMetadata"), "the agent of %s names the samples' metadata service", host)
			ini, err := oslo.ParseServiceConfig(e2e.HostFile(env.Host(t, host), strings.TrimPrefix(dataplane.OVNMetadataGeneratedFile, "/")))
			require.NoError(t, err)
			conf := ini["DEFAULT"]
			require.Equal(t, endpoint, "http://"+net.JoinHostPort(conf["nova_metadata_host"], conf["nova_metadata_port"]), "the agent of %s forwards to the NovaMetadata's endpoint", host)
			require.Equal(t, shared, conf["metadata_proxy_shared_secret"], "the agent of %s signs with the Nova's shared secret", host)
		}
		serverID := e2e.Str(srv, "status", "instanceID")
		server, err := servers.Get(ctx, c.Compute, serverID).Extract()
		require.NoError(t, err)
		// The samples' metadata service is the Nova's global one and the server is in cell1.
		env.InstanceMetadata(ctx, t, local.SampleNamespace, sampleNovaMetadata, env.Host(t, placed[local.SampleServerName]),
			serverID, server.TenantID, bound[0].FixedIPs[0].IPAddress)
	})

	t.Run("an idle system stays idle", func(t *testing.T) { idle.verdict(t) })

	// The documented update of the sample data plane, on the computes of the Nova the samples deployed.
	t.Run("the documented update of the sample data plane", func(t *testing.T) {
		update := updateSample(t)
		applied = append(applied, update...)
		uctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		states, err := local.WaitSamples(uctx, env.Dyn, update, bridge.IsServed, testWriter{t}, 5*time.Second)
		require.NoError(t, err, "the update Ready:\n%s", table(states))
		requireComputesUpdated(t, "2", "edpm-compute-0", "edpm-compute-1")
		// Each compute was drained by live migration and its instances migrated back.
		require.Equal(t, placed, requireOnSampleComputes(t), "the instances are back where they ran")
	})

	// The documented limited run (tests/api/testdata's example): nova-compute's files put back on one
	// sample compute with the tag config, without a restart.
	t.Run("a limited run on the sample data plane", func(t *testing.T) {
		h := env.Host(t, "edpm-compute-0")
		pid := e2e.HostFile(h, "run/stackflow/nova-compute.pid")
		require.NotEmpty(t, pid)
		run, err := env.Stack.ApplyManifestObjects(ctx, filepath.Join(env.Stack.RepoRoot, "tests", "api", "testdata", "dataplane_v1beta1_openstackdataplanedeployment.yaml"))
		require.NoError(t, err)
		require.Len(t, run, 1)
		applied = append(applied, run...)
		rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		states, err := local.WaitSamples(rctx, env.Dyn, run, bridge.IsServed, testWriter{t}, 2*time.Second)
		require.NoError(t, err, "the run Ready:\n%s", table(states))
		u, err := env.Dyn.Resource(run[0].GVR).Namespace(run[0].Namespace).Get(ctx, run[0].Name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, "True", string(e2e.Condition(u, "Ran").Status), e2e.CondString(e2e.Condition(u, "Ran")))
		require.Contains(t, e2e.Str(u, "status", "nodeStates"), `"name":"nova-compute"`)
		require.Equal(t, pid, e2e.HostFile(h, "run/stackflow/nova-compute.pid"), "the tag config restarts nothing")
	})

	// Scale-in on the cloud the samples deployed: deleting a node's object removes the compute, its
	// agents and its chassis from that cloud (not from another the namespace's clouds Secret names). The
	// checks read the complete lists, not the records the node made.
	t.Run("scaling in a sample compute leaves nothing of it in the cloud", func(t *testing.T) {
		const host = "edpm-compute-1"
		c := sampleCloud(t)
		dctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		// The replay corpus keeps the node's teardown through its compute's cloud (edpm-node-chassis-cloud).
		node, err := env.Dyn.Resource(e2e.GVRDataPlaneNode).Namespace(local.SampleNamespace).Get(ctx, host, metav1.GetOptions{})
		require.NoError(t, err)
		env.RecordPath(lifecycle.WorkflowID(e2e.Ref("OpenStackDataPlaneNode", e2e.GVRDataPlaneNode, node)), "chassis-cloud", e2e.Scheduled("DeleteNetworkAgents"))
		start := time.Now()
		require.NoError(t, env.DeleteAndWait(dctx, e2e.GVRDataPlaneNode, local.SampleNamespace, host), "node %s torn down", host)
		t.Logf("node %s removed in %s", host, time.Since(start).Round(time.Second))
		// No Neutron agent of any type on the host, alive or dead.
		c.WaitNetworkAgents(t, host, 30*time.Second)
		all, err := osacts.ListAgents(ctx, c.Network, agents.ListOpts{})
		require.NoError(t, err)
		for _, a := range all {
			require.NotEqual(t, host, a.Host, "Neutron still lists %s %s (alive %v) on %s", a.Type, a.Binary, a.Alive, host)
		}
		// No compute service (its hypervisor record goes with it), no resource provider, no port bound there.
		svcPages, err := services.List(c.Compute, services.ListOpts{Host: host}).AllPages(ctx)
		require.NoError(t, err)
		svcs, err := services.ExtractServices(svcPages)
		require.NoError(t, err)
		require.Empty(t, svcs, "Nova's services on %s", host)
		rpPages, err := resourceproviders.List(c.Placement, nil).AllPages(ctx)
		require.NoError(t, err)
		rps, err := resourceproviders.ExtractResourceProviders(rpPages)
		require.NoError(t, err)
		for _, rp := range rps {
			require.NotEqual(t, host, rp.Name, "Placement's resource provider of %s", host)
		}
		portPages, err := ports.List(c.Network, ports.ListOpts{}).AllPages(ctx)
		require.NoError(t, err)
		var bound []struct {
			ports.Port
			portsbinding.PortsBindingExt
		}
		require.NoError(t, ports.ExtractPortsInto(portPages, &bound))
		for _, p := range bound {
			require.NotEqual(t, host, p.HostID, "port %s is bound to %s", p.ID, host)
		}
		// No chassis of the host in the cloud's OVN southbound database, public or private.
		for _, table := range []string{"Chassis", "Chassis_Private"} {
			out, err := exec.Command("ovn-sbctl", "--timeout=20", "--db=tcp:"+local.HostGateway+":30642", "--bare", "--columns=name", "list", table).CombinedOutput()
			require.NoError(t, err, "ovn-sbctl list %s: %s", table, out)
			require.NotContains(t, strings.Fields(string(out)), host, "the sample OVN's %s", table)
		}
		// and nothing of its services on the host.
		e2e.RequireRemoved(t, env.Host(t, host), "nova-compute", "ovn-metadata-agent", e2e.OVNChassis.Name)
	})

}

// runHints runs every command of the "In a new shell" block that make run prints (deploy/local/scripts/
// hints.sh), each in a new shell with the block's first line (cd and eval) before it, as a user pastes
// them; only the Temporal namespace is the test's. Each must succeed and print something.
func runHints(t *testing.T) {
	root := env.Stack.RepoRoot
	build := exec.Command("go", "build", "-o", filepath.Join(root, "bin")+"/", "./deploy/local/cmd/stackflow-local", "./deploy/describe/cmd/kubectl-stackflow")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "make build's binaries: %s", out)
	_, err = os.Stat(env.Stack.Path("bin", "kubectl-stackflow"))
	require.NoError(t, err, "up links kubectl-stackflow into the stack's bin once make build built it")
	hints := exec.Command("bash", filepath.Join(root, "deploy/local/scripts/hints.sh"))
	hints.Env = append(os.Environ(), "STACKFLOW_STATE="+env.Stack.StateDir)
	printed, err := hints.Output()
	require.NoError(t, err)
	var block []string
	in := false
	for _, line := range strings.Split(string(printed), "\n") {
		switch {
		case strings.HasPrefix(line, "In a new shell:"):
			in = true
		case in && strings.TrimSpace(line) == "":
			in = false
		case in:
			block = append(block, strings.TrimSpace(line))
		}
	}
	require.Greater(t, len(block), 5, "the hints:\n%s", printed)
	require.Contains(t, block[0], `eval "$(bin/stackflow-local env)"`)
	ns := env.TemporalNamespace
	for _, cmd := range block[1:] {
		script := block[0] + "\nexport TEMPORAL_NAMESPACE=" + ns + " TEMPORAL_CLI_NAMESPACE=" + ns + "\n" + cmd
		c := exec.Command("env", "-i", "HOME="+os.Getenv("HOME"), "PATH=/usr/bin:/bin", "bash", "-euc", script)
		out, err := c.CombinedOutput()
		require.NoError(t, err, "%s\n%s", cmd, out)
		require.NotEmpty(t, strings.TrimSpace(string(out)), cmd)
		t.Logf("$ %s\n%s", cmd, firstLines(string(out), 4))
	}
}

// runDocBlocks runs every runnable block of the README's tour and the operations guides (e2e.RunnableBlocks)
// against this cloud, each in a new shell in the checkout as a user pastes it, after the eval line only
// the Temporal namespace is the test's. A block that fails fails the test, naming its page and line.
func runDocBlocks(t *testing.T) {
	root := env.Stack.RepoRoot
	pages, err := e2e.RunnablePages(root)
	require.NoError(t, err)
	blocks, err := e2e.RunnableBlocks(root, pages...)
	require.NoError(t, err)
	require.NotEmpty(t, blocks)
	ns := env.TemporalNamespace
	redirect := e2e.EvalLine + "\nexport TEMPORAL_NAMESPACE=" + ns + " TEMPORAL_CLI_NAMESPACE=" + ns
	for _, b := range blocks {
		script := strings.Replace(b.Script, e2e.EvalLine, redirect, 1)
		require.NotEqual(t, script, b.Script, "%s does not start with %s", b, e2e.EvalLine)
		start := time.Now()
		c := exec.Command("env", "-i", "HOME="+os.Getenv("HOME"), "PATH=/usr/bin:/bin", "bash", "-euo", "pipefail", "-c", script)
		c.Dir = root
		out, err := c.CombinedOutput()
		require.NoError(t, err, "%s:\n%s\n%s", b, b.Script, out)
		t.Logf("%s ran in %s:\n%s", b, time.Since(start).Round(time.Second), firstLines(string(out), 6))
	}
}

func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = append(lines[:n], "…")
	}
	return strings.Join(lines, "\n")
}

// updateSample applies the documented day-2 sample (the update of the sample data plane) as a user
// would: kubectl apply -f deploy/samples/day2.
func updateSample(t *testing.T) []local.Applied {
	t.Helper()
	objs, err := env.Stack.ApplyManifestObjects(context.Background(), filepath.Join(env.Stack.RepoRoot, local.Day2SamplesDir))
	require.NoError(t, err)
	require.Len(t, objs, 1)
	return objs
}

// requireComputesUpdated checks, in the compute API of the cloud the samples deployed, that each host's
// nova-compute is enabled, up and reports version (to Placement, as the update verifies it).
func requireComputesUpdated(t *testing.T, version string, hosts ...string) {
	t.Helper()
	ctx := context.Background()
	c := sampleCloud(t)
	for _, h := range hosts {
		svc, err := c.ComputeService(ctx, h)
		require.NoError(t, err, "nova-compute of %s", h)
		require.Equal(t, "enabled", svc.Status, "%s: %s", h, svc.DisabledReason)
		require.Equal(t, "up", svc.State, h)
		classes, err := c.VersionClasses(ctx, h)
		require.NoError(t, err, h)
		require.Equal(t, []string{dataplane.VersionClass(version)}, classes, "%s reports version %s", h, version)
	}
}

// requireOnSampleComputes requires the sample server and the sample cluster's bastion ACTIVE on
// sample EDPM computes, read through the compute API of the samples' Nova, and returns their
// hypervisors by instance name.
func requireOnSampleComputes(t *testing.T) map[string]string {
	t.Helper()
	ctx := context.Background()
	c := sampleCloud(t)
	srv, err := env.Dyn.Resource(gvrServer).Namespace(local.SampleNamespace).Get(ctx, local.SampleServerName, metav1.GetOptions{})
	require.NoError(t, err)
	cl, err := env.Dyn.Resource(gvrCluster).Namespace(local.SampleNamespace).Get(ctx, "sample-cluster", metav1.GetOptions{})
	require.NoError(t, err)
	out := map[string]string{}
	for _, id := range []string{e2e.Str(srv, "status", "instanceID"), e2e.Str(cl, "status", "bastion", "id")} {
		require.NotEmpty(t, id, "the status names the instance")
		s, err := servers.Get(ctx, c.Compute, id).Extract()
		require.NoError(t, err, "instance %s in the samples' cloud", id)
		require.Equal(t, "ACTIVE", s.Status, s.Name)
		require.Contains(t, []string{"edpm-compute-0", "edpm-compute-1"}, s.HypervisorHostname, "%s runs on a sample compute", s.Name)
		out[s.Name] = s.HypervisorHostname
	}
	t.Logf("instances on the sample computes: %v", out)
	return out
}

// sampleCloud holds admin clients of the cloud the samples deployed, logged in with the clouds.yaml its
// configuration wrote (Secret keystone-clouds), as make run's hints do.
func sampleCloud(t *testing.T) *e2e.Cloud {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	yml, err := local.SampleCloudsYAML(ctx, env.Dyn, local.SampleNamespace)
	require.NoError(t, err)
	c, err := e2e.CloudFrom(ctx, yml, local.SampleCloud, "")
	require.NoError(t, err, "log in with the clouds.yaml of Secret %s", local.SampleCloudsSecret)
	return c
}

// samplesOf reads deploy/samples without applying them.
// The samples serve and are described by namespace (the stack's release serves the samples' namespace
// only, so that other packages can run beside this one): every namespaced object of deploy/samples and
// deploy/samples/day2 lives in it.
func TestSamplesLiveInTheSampleNamespace(t *testing.T) {
	objs, err := env.Stack.AllSampleObjects(context.Background())
	require.NoError(t, err)
	namespaced := 0
	for _, o := range objs {
		if o.Namespace == "" {
			continue
		}
		namespaced++
		require.Equal(t, local.SampleNamespace, o.Namespace, "%s/%s", o.Kind, o.Name)
	}
	require.Positive(t, namespaced)
}

func samplesOf(t *testing.T) []local.Applied {
	t.Helper()
	objs, err := env.Stack.SampleObjects(context.Background())
	require.NoError(t, err)
	require.NotEmpty(t, objs)
	return objs
}

// serveRelease scales the stack's release up as make run does. It stays up when the test passes, serving
// the cloud the next packages compose on (tests/samplesdown scales it down); on failure it goes back to
// no pods once the samples are removed, the pods' state and logs going to the test's output first.
func serveRelease(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t0 := time.Now()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		e2e.DumpPods(t, env.Kube, local.ChartNamespace, "app.kubernetes.io/instance="+local.ChartRelease)
		require.NoError(t, env.Stack.StopRelease(context.Background()), "the stack's release back to no pods")
	})
	// The samples' namespace only: edpm and nova run beside this package with bridges of their own in
	// their namespaces (TestSamplesLiveInTheSampleNamespace proves that this serves every sample).
	require.NoError(t, env.Stack.ServeRelease(ctx, env.TemporalNamespace, local.SampleNamespace), "stackflow served by the stack's release")
	t.Logf("the stack's release serves with every pod ready in %s", time.Since(t0).Round(100*time.Millisecond))
}

// removeRunSamples removes what `make run` left with `make delete-samples`'s script (a no-op when
// nothing is left): make run's own worker build and bridge serve its workflows, in its Temporal
// namespace, while they tear down.
func removeRunSamples(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(env.Stack.RepoRoot, "deploy/local/scripts/delete-samples.sh"))
	cmd.Env = append(os.Environ(), "STACKFLOW_STATE="+env.Stack.StateDir)
	out, err := cmd.CombinedOutput()
	if len(out) > 0 {
		t.Logf("make delete-samples:\n%s", out)
	}
	require.NoError(t, err, "make run's samples removed as a user removes them")
}

type history struct {
	run    string
	length int64
	// busy says what the run has pending (a workflow task, activities), "" when nothing.
	busy string
}

// idleWindow is what an open idle window saw at its start: every open workflow's run and length, and
// the Nodes' resource versions.
type idleWindow struct {
	start  time.Time
	before map[string]history
	nodeRV map[string]string
}

// openIdleWindow waits until no open workflow has a workflow task or an activity pending (the last
// object to settle may still be ending its run), then notes where every open workflow stands.
func openIdleWindow(t *testing.T) idleWindow {
	t.Helper()
	waitQuiet(t, time.Minute)
	w := idleWindow{nodeRV: nodeVersions(t), before: openHistories(t)}
	w.start = time.Now()
	require.NotEmpty(t, w.before)
	return w
}

// verdict waits until IdleWindow has passed since the window opened, then requires that no workflow
// made progress in it: none closed, started, continued as new or added an event, though the Nodes
// changed (kwok heartbeats).
func (w idleWindow) verdict(t *testing.T) {
	time.Sleep(time.Until(w.start.Add(IdleWindow)))
	window := time.Since(w.start).Round(time.Second)
	after := openHistories(t)
	var grew []string
	for id, b := range w.before {
		a, ok := after[id]
		switch {
		case !ok:
			grew = append(grew, fmt.Sprintf("%s: closed while idle", id))
		case a.run != b.run:
			grew = append(grew, fmt.Sprintf("%s: new run (%s → %s) while idle", id, b.run, a.run))
		case a.length != b.length:
			grew = append(grew, fmt.Sprintf("%s: %d → %d events: %s", id, b.length, a.length, newEvents(t, id, a.run, b.length)))
		}
	}
	for id := range after {
		if _, ok := w.before[id]; !ok {
			grew = append(grew, fmt.Sprintf("%s: started while idle", id))
		}
	}
	require.Empty(t, grew, "workflows made progress during %s with nothing to do", window)
	// The window saw the Nodes change (kwok heartbeats), which must not have woken anything.
	heartbeats := 0
	for name, rv := range nodeVersions(t) {
		if rv != w.nodeRV[name] {
			heartbeats++
		}
	}
	require.Positive(t, heartbeats, "no Node changed during the idle window: the test saw no heartbeat")
	t.Logf("%d open workflows idle for %s (0 events added) while %d Nodes changed", len(w.before), window, heartbeats)
}

// waitQuiet waits until no open workflow of the run's namespace has a workflow task or an activity
// pending, twice in a row with the same runs.
func waitQuiet(t *testing.T, timeout time.Duration) {
	t.Helper()
	var last map[string]history
	e2e.WaitFor(t, "every open workflow quiet", timeout, func() (bool, string) {
		now := openHistories(t)
		var busy []string
		for id, h := range now {
			if h.busy != "" {
				busy = append(busy, id+": "+h.busy)
			}
		}
		same := len(busy) == 0 && len(now) == len(last)
		for id, h := range now {
			same = same && last[id] == h
		}
		last = now
		return same, fmt.Sprintf("%d open, busy: %v", len(now), busy)
	})
}

// openHistories returns the run and history length of every open workflow of the run's namespace.
func openHistories(t *testing.T) map[string]history {
	t.Helper()
	ctx := context.Background()
	out := map[string]history{}
	var token []byte
	for {
		resp, err := env.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: env.TemporalNamespace, Query: "ExecutionStatus = 'Running'", PageSize: 1000, NextPageToken: token,
		})
		require.NoError(t, err)
		for _, x := range resp.Executions {
			d, err := env.Temporal.DescribeWorkflowExecution(ctx, x.Execution.WorkflowId, x.Execution.RunId)
			require.NoError(t, err)
			if d.WorkflowExecutionInfo.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				continue
			}
			h := history{run: x.Execution.RunId, length: d.WorkflowExecutionInfo.HistoryLength}
			if d.PendingWorkflowTask != nil {
				h.busy = "workflow task"
			}
			if n := len(d.PendingActivities); n > 0 {
				h.busy += fmt.Sprintf(" %d activities", n)
			}
			out[x.Execution.WorkflowId] = h
		}
		token = resp.NextPageToken
		if len(token) == 0 {
			return out
		}
	}
}

// newEvents names the events a history gained after the first n, for the failure message.
func newEvents(t *testing.T, id, run string, n int64) string {
	it := env.Temporal.GetWorkflowHistory(context.Background(), id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var names []string
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return err.Error()
		}
		if ev.EventId > n {
			names = append(names, strings.TrimPrefix(ev.EventType.String(), "EVENT_TYPE_"))
		}
	}
	if len(names) > 12 {
		names = append(names[:12], "…")
	}
	return strings.Join(names, ", ")
}

// nodeVersions returns every Kubernetes Node's resourceVersion.
func nodeVersions(t *testing.T) map[string]string {
	t.Helper()
	l, err := env.Kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string]string{}
	for _, n := range l.Items {
		out[n.Name] = n.ResourceVersion
	}
	return out
}

func table(states []local.SampleState) string {
	var b strings.Builder
	local.WriteSampleStates(&b, states)
	return b.String()
}

// testWriter logs the live table into the test's output.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// requireRunningOnRealNode checks that chart's API pods in ns are ready containers on the real node.
func requireRunningOnRealNode(t *testing.T, ns, chart string) {
	t.Helper()
	// The release's long-running pods (API, server, OVN's central services), not its Jobs'.
	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "component in (api,server,central),app.kubernetes.io/name=" + chart})
	require.NoError(t, err)
	require.NotEmpty(t, pods.Items, "%s's pods", chart)
	for _, p := range pods.Items {
		require.Equal(t, local.RealNode, p.Spec.NodeName, "%s runs on the real node", p.Name)
		ready := false
		for _, c := range p.Status.Conditions {
			ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
		}
		require.True(t, ready, "%s is ready", p.Name)
	}
}

// requireNeutronOnItsOVN checks that the sample Neutron runs ML2/OVN on the OVN the configuration
// deployed: a network, a subnet and a router with an interface on it, made through the catalog's network
// endpoint, appear in that OVN's northbound database, and leave it when deleted (removing the interface
// runs ovsdb-client, from the server's image).
func requireNeutronOnItsOVN(t *testing.T, c *gophercloud.ServiceClient) {
	t.Helper()
	ctx := context.Background()
	name := "sf-samples-" + env.Run
	nw, err := networks.Create(ctx, c, networks.CreateOpts{Name: name}).Extract()
	require.NoError(t, err, "create a network in the sample Neutron")
	t.Cleanup(func() { _ = networks.Delete(context.Background(), c, nw.ID).ExtractErr() })
	sub, err := subnets.Create(ctx, c, subnets.CreateOpts{NetworkID: nw.ID, Name: name, CIDR: "10.250.0.0/24", IPVersion: gophercloud.IPv4}).Extract()
	require.NoError(t, err)
	r, err := routers.Create(ctx, c, routers.CreateOpts{Name: name}).Extract()
	require.NoError(t, err)
	t.Cleanup(func() { _ = routers.Delete(context.Background(), c, r.ID).ExtractErr() })
	_, err = routers.AddInterface(ctx, c, r.ID, routers.AddInterfaceOpts{SubnetID: sub.ID}).Extract()
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = routers.RemoveInterface(context.Background(), c, r.ID, routers.RemoveInterfaceOpts{SubnetID: sub.ID}).Extract()
	})
	require.Contains(t, ovnNorthbound(t, "Logical_Switch"), "neutron-"+nw.ID, "the network is a logical switch of the sample OVN")
	require.Contains(t, ovnNorthbound(t, "Logical_Router"), "neutron-"+r.ID, "the router is a logical router of the sample OVN")

	_, err = routers.RemoveInterface(ctx, c, r.ID, routers.RemoveInterfaceOpts{SubnetID: sub.ID}).Extract()
	require.NoError(t, err, "remove the router's interface")
	require.NoError(t, routers.Delete(ctx, c, r.ID).ExtractErr())
	require.NoError(t, networks.Delete(ctx, c, nw.ID).ExtractErr())
	require.NotContains(t, ovnNorthbound(t, "Logical_Switch"), "neutron-"+nw.ID, "the deleted network left the sample OVN")
	require.NotContains(t, ovnNorthbound(t, "Logical_Router"), "neutron-"+r.ID, "the deleted router left the sample OVN")
}

// ovnNorthbound lists the names of a table's rows in the northbound database of the sample's ovn
// release, read with ovn-nbctl in its pod.
func ovnNorthbound(t *testing.T, table string) []string {
	t.Helper()
	kubectl, err := env.Stack.Kubectl()
	require.NoError(t, err)
	out, err := exec.Command(kubectl, "--kubeconfig", env.Stack.Kubeconfig, "-n", local.SampleNamespace, "exec", "deploy/ovn-central",
		"-c", "ovn-ovsdb-nb", "--", "/usr/bin/ovn-nbctl", "--db=unix:/run/ovn/ovnnb_db.sock", "--bare", "--columns=name", "list", table).CombinedOutput()
	require.NoError(t, err, "ovn-nbctl list %s: %s", table, out)
	return strings.Fields(string(out))
}

// requireEveryPodReal checks every pod of the cloud (the samples' namespace and stackflow's own; other
// packages' pods come and go beside this one): scheduled on the real node (no kwok node, where a pod runs
// nothing), and ready, or finished: succeeded, or failed as one try of a Job that then completed.
func requireEveryPodReal(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var items []corev1.Pod
	for _, ns := range []string{local.SampleNamespace, local.ChartNamespace} {
		pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		require.NotEmpty(t, pods.Items, "pods of namespace %s", ns)
		items = append(items, pods.Items...)
	}
	var lines []string
	for _, p := range items {
		lines = append(lines, fmt.Sprintf("%s/%s on %s: %s", p.Namespace, p.Name, p.Spec.NodeName, p.Status.Phase))
		require.Equal(t, local.RealNode, p.Spec.NodeName, "pod %s/%s runs on the real node", p.Namespace, p.Name)
		switch p.Status.Phase {
		case corev1.PodRunning:
			ready := false
			for _, c := range p.Status.Conditions {
				ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
			}
			require.True(t, ready, "pod %s/%s is ready", p.Namespace, p.Name)
		case corev1.PodSucceeded:
		case corev1.PodFailed:
			job := ""
			for _, o := range p.OwnerReferences {
				if o.Kind == "Job" {
					job = o.Name
				}
			}
			require.NotEmpty(t, job, "failed pod %s/%s belongs to a Job", p.Namespace, p.Name)
			j, err := env.Kube.BatchV1().Jobs(p.Namespace).Get(ctx, job, metav1.GetOptions{})
			require.NoError(t, err)
			require.Positive(t, j.Status.Succeeded, "Job %s/%s, whose try %s failed, completed", p.Namespace, job, p.Name)
		default:
			t.Fatalf("pod %s/%s is %s", p.Namespace, p.Name, p.Status.Phase)
		}
	}
	t.Logf("%d pods, every one a real container:\n%s", len(items), strings.Join(lines, "\n"))
}
