package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/openstack/config"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/endpoints"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/services"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/users"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/external"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/stretchr/testify/require"

	"github.com/stackflow/stackflow/deploy/local"
)

// openStackCloud is the admin cloud from the stack's clouds.yaml.
type openStackCloud struct {
	provider *gophercloud.ProviderClient
	eo       gophercloud.EndpointOpts
}

func newOpenStackCloud(ctx context.Context, t *testing.T) *openStackCloud {
	t.Helper()
	require.NotEmpty(t, st.CloudsYAML, "stack has no clouds.yaml: is openstack among STACKFLOW_COMPONENTS?")
	require.NotNil(t, st.OpenStack)
	ao, eo, tlsConfig, err := clouds.Parse(clouds.WithLocations(st.CloudsYAML), clouds.WithCloudName(st.CloudName))
	require.NoError(t, err)
	ao.AllowReauth = true
	provider, err := config.NewProviderClient(ctx, ao, config.WithTLSConfig(tlsConfig))
	require.NoError(t, err)
	return &openStackCloud{provider: provider, eo: eo}
}

func (c *openStackCloud) service(t *testing.T, newClient func(*gophercloud.ProviderClient, gophercloud.EndpointOpts) (*gophercloud.ServiceClient, error)) *gophercloud.ServiceClient {
	t.Helper()
	sc, err := newClient(c.provider, c.eo)
	require.NoError(t, err)
	return sc
}

// uniqueName names a test object so that parallel and repeated runs never collide.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
}

// gone is true when err says the object does not exist (any more).
func gone(err error) bool {
	return gophercloud.ResponseCodeIs(err, http.StatusNotFound)
}

// eventually polls check every interval until it returns nil or the timeout passes; the last error
// explains a failure.
func eventually(t *testing.T, what string, timeout, interval time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if errors.Is(err, errStop) || time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %s: %v", what, timeout, err)
		}
		time.Sleep(interval)
	}
}

// TestOpenStackNetworkWithFloatingIP proves the networking every family's servers use: a port on the
// tenant network and a floating IP from the external network through the cloud's router, whose gateway
// OVN schedules to the stack's own chassis; and that the stack runs no Nova (every Nova is stackflow's).
func TestOpenStackNetworkWithFloatingIP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cloud := newOpenStackCloud(ctx, t)
	network := cloud.service(t, openstack.NewNetworkV2)
	image := cloud.service(t, openstack.NewImageV2)

	tenant := findNetwork(ctx, t, network, st.OpenStack.TenantNetwork)
	external := findNetwork(ctx, t, network, st.OpenStack.ExternalNetwork)
	require.True(t, external.External, "network %s is not external", external.Name)
	findImage(ctx, t, image, st.OpenStack.Image)

	// The router's gateway is on the stack's chassis.
	northbound := fmt.Sprintf("tcp:127.0.0.1:%d", local.OVNNorthboundPort)
	out, err := exec.Command("ovn-nbctl", "--timeout=10", "--db="+northbound, "--bare", "--columns=chassis_name", "list", "Gateway_Chassis").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, strings.Fields(string(out)), local.GatewayChassis, "the router's gateway chassis")

	name := uniqueName("stack-test")
	port, err := ports.Create(ctx, network, ports.CreateOpts{Name: name, NetworkID: tenant.ID}).Extract()
	require.NoError(t, err)
	t.Cleanup(func() { _ = ports.Delete(context.Background(), network, port.ID).ExtractErr() })
	require.NotEmpty(t, port.FixedIPs, "port %s got no address on %s", port.ID, tenant.Name)

	fip, err := floatingips.Create(ctx, network, floatingips.CreateOpts{FloatingNetworkID: external.ID, PortID: port.ID}).Extract()
	require.NoError(t, err)
	t.Cleanup(func() { _ = floatingips.Delete(context.Background(), network, fip.ID).ExtractErr() })
	require.Equal(t, port.ID, fip.PortID)
	require.Equal(t, port.FixedIPs[0].IPAddress, fip.FixedIP)
	require.NotEmpty(t, fip.FloatingIP)
	// ML2/OVN writes the floating IP as a NAT rule of the router in the northbound database.
	eventually(t, "floating IP "+fip.FloatingIP+" a NAT rule of the router", time.Minute, time.Second, func() error {
		out, err := exec.Command("ovn-nbctl", "--timeout=10", "--db="+northbound, "--bare", "--columns=external_ip", "find", "NAT", "type=dnat_and_snat").CombinedOutput()
		if err != nil {
			return backoffStop(fmt.Errorf("%w: %s", err, out))
		}
		if !slices.Contains(strings.Fields(string(out)), fip.FloatingIP) {
			return fmt.Errorf("NAT external IPs %q", strings.Fields(string(out)))
		}
		return nil
	})

	// Tear down in dependency order and prove each object is gone.
	require.NoError(t, floatingips.Delete(ctx, network, fip.ID).ExtractErr())
	_, err = floatingips.Get(ctx, network, fip.ID).Extract()
	require.True(t, gone(err), "floating IP %s still exists: %v", fip.ID, err)
	require.NoError(t, ports.Delete(ctx, network, port.ID).ExtractErr())
	_, err = ports.Get(ctx, network, port.ID).Extract()
	require.True(t, gone(err), "port %s still exists: %v", port.ID, err)

	// No Nova of the stack's: no compute endpoint in its region (the Novas stackflow deploys register
	// theirs in regions of their own), no process of its own that runs Nova.
	identity := cloud.service(t, openstack.NewIdentityV3)
	pages, err := services.List(identity, services.ListOpts{ServiceType: "compute"}).AllPages(ctx)
	require.NoError(t, err)
	compute, err := services.ExtractServices(pages)
	require.NoError(t, err)
	for _, svc := range compute {
		pages, err := endpoints.List(identity, endpoints.ListOpts{ServiceID: svc.ID, RegionID: st.OpenStack.Region}).AllPages(ctx)
		require.NoError(t, err)
		eps, err := endpoints.ExtractEndpoints(pages)
		require.NoError(t, err)
		require.Empty(t, eps, "compute endpoints of service %s in the stack's region %s", svc.Name, st.OpenStack.Region)
	}
	for name := range st.StartedPIDs() {
		require.NotContains(t, name, "nova", "the stack started %s", name)
	}
}

func TestOpenStackIronicFakeHardwareLifecycle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cloud := newOpenStackCloud(ctx, t)
	baremetal := cloud.service(t, openstack.NewBareMetalV1)
	baremetal.Microversion = "1.78"

	name := uniqueName("stack-bm")
	node, err := nodes.Create(ctx, baremetal, nodes.CreateOpts{Name: name, Driver: "fake-hardware", ResourceClass: "baremetal"}).Extract()
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx := context.Background()
		if n, err := nodes.Get(ctx, baremetal, node.UUID).Extract(); err == nil && n.ProvisionState == string(nodes.Active) {
			_ = nodes.ChangeProvisionState(ctx, baremetal, node.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetDeleted}).ExtractErr()
			_ = nodes.WaitForProvisionState(ctx, baremetal, node.UUID, nodes.Available)
		}
		_ = nodes.Delete(ctx, baremetal, node.UUID).ExtractErr()
	})
	require.Equal(t, string(nodes.Enroll), node.ProvisionState)

	steps := []struct {
		target nodes.TargetProvisionState
		want   nodes.ProvisionState
	}{
		{nodes.TargetManage, nodes.Manageable},
		{nodes.TargetProvide, nodes.Available},
		{nodes.TargetActive, nodes.Active},
		{nodes.TargetDeleted, nodes.Available},
	}
	for _, step := range steps {
		require.NoError(t, nodes.ChangeProvisionState(ctx, baremetal, node.UUID, nodes.ProvisionStateOpts{Target: step.target}).ExtractErr(),
			"%s node %s", step.target, node.UUID)
		eventually(t, fmt.Sprintf("node %s %s", node.UUID, step.want), 2*time.Minute, 500*time.Millisecond, func() error {
			n, err := nodes.Get(ctx, baremetal, node.UUID).Extract()
			if err != nil {
				return err
			}
			if n.LastError != "" {
				return fmt.Errorf("last error: %s", n.LastError)
			}
			if n.ProvisionState != string(step.want) {
				return fmt.Errorf("provision state %s (target %s)", n.ProvisionState, n.TargetProvisionState)
			}
			return nil
		})
	}

	require.NoError(t, nodes.Delete(ctx, baremetal, node.UUID).ExtractErr())
	_, err = nodes.Get(ctx, baremetal, node.UUID).Extract()
	require.True(t, gone(err), "node %s still exists: %v", node.UUID, err)
}

// TestOpenStackCatalogHasNoBlockStorage: the stack runs no block storage (no family uses it): no such
// service in its catalog (an earlier stack's entries are removed by its bootstrap), no cinder service
// user, no process of its own that runs Cinder.
func TestOpenStackCatalogHasNoBlockStorage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	identity := newOpenStackCloud(ctx, t).service(t, openstack.NewIdentityV3)
	pages, err := services.List(identity, services.ListOpts{}).AllPages(ctx)
	require.NoError(t, err)
	all, err := services.ExtractServices(pages)
	require.NoError(t, err)
	var types []string
	for _, svc := range all {
		types = append(types, svc.Type)
	}
	require.Contains(t, types, "identity", "the listing holds the catalog")
	for _, typ := range []string{"volumev3", "block-storage", "volume"} {
		require.NotContains(t, types, typ)
	}
	upages, err := users.List(identity, users.ListOpts{Name: "cinder"}).AllPages(ctx)
	require.NoError(t, err)
	found, err := users.ExtractUsers(upages)
	require.NoError(t, err)
	require.Empty(t, found, "a cinder service user in the stack's Keystone")
	for name := range st.StartedPIDs() {
		require.NotContains(t, name, "cinder", "the stack started %s", name)
	}
}

// networkWithExternal is a network with the router:external attribute.
type networkWithExternal struct {
	networks.Network
	external.NetworkExternalExt
}

// TestOpenStackReachableOnHostGateway proves what an EDPM test host needs: every API and the message bus
// answer on the hosts' gateway address too, not only on loopback.
func TestOpenStackReachableOnHostGateway(t *testing.T) {
	require.NotNil(t, st.OpenStack)
	cl := &http.Client{Timeout: 10 * time.Second}
	for name, port := range map[string]int{
		"keystone": local.KeystonePort, "placement": local.PlacementPort, "glance": local.GlancePort,
		"neutron": local.NeutronPort, "ironic": local.IronicPort,
	} {
		url := fmt.Sprintf("http://%s:%d/", local.HostGateway, port)
		resp, err := cl.Get(url)
		require.NoError(t, err, "%s on the gateway", name)
		resp.Body.Close()
		require.Less(t, resp.StatusCode, 400, "%s: GET %s: %s", name, url, resp.Status)
	}

	// OVN's southbound database, which the hosts' ovn-controller and metadata agents join.
	out, err := exec.Command("ovsdb-client", "--timeout=10", "list-dbs", local.OVNSouthbound).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, strings.Fields(string(out)), "OVN_Southbound")

	// AMQP 0-9-1: after the protocol header the broker opens with a connection.start method frame.
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(local.HostGateway, fmt.Sprint(local.RabbitMQPort)), 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = conn.Write([]byte("AMQP\x00\x00\x09\x01"))
	require.NoError(t, err)
	frame := make([]byte, 11)
	_, err = io.ReadFull(conn, frame)
	require.NoError(t, err)
	require.Equal(t, byte(1), frame[0], "frame type method")
	require.Equal(t, []byte{0, 10, 0, 10}, frame[7:11], "connection.start")
}

func findNetwork(ctx context.Context, t *testing.T, client *gophercloud.ServiceClient, name string) networkWithExternal {
	t.Helper()
	pages, err := networks.List(client, networks.ListOpts{Name: name}).AllPages(ctx)
	require.NoError(t, err)
	var all []networkWithExternal
	require.NoError(t, networks.ExtractNetworksInto(pages, &all))
	require.Len(t, all, 1, "network %s", name)
	return all[0]
}

func findImage(ctx context.Context, t *testing.T, client *gophercloud.ServiceClient, name string) string {
	t.Helper()
	pages, err := images.List(client, images.ListOpts{Name: name}).AllPages(ctx)
	require.NoError(t, err)
	all, err := images.ExtractImages(pages)
	require.NoError(t, err)
	require.Len(t, all, 1, "image %s", name)
	require.Equal(t, images.ImageStatusActive, all[0].Status)
	return all[0].ID
}

// backoffStop marks an error that no amount of waiting will fix.
func backoffStop(err error) error { return errors.Join(errStop, err) }

var errStop = errors.New("permanent")
