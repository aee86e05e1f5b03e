package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/config"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/external"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/portsbinding"
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

func TestOpenStackServerOnTenantPortWithFloatingIP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cloud := newOpenStackCloud(ctx, t)
	network := cloud.service(t, openstack.NewNetworkV2)
	compute := cloud.service(t, openstack.NewComputeV2)
	image := cloud.service(t, openstack.NewImageV2)

	tenant := findNetwork(ctx, t, network, st.OpenStack.TenantNetwork)
	external := findNetwork(ctx, t, network, st.OpenStack.ExternalNetwork)
	require.True(t, external.External, "network %s is not external", external.Name)

	name := uniqueName("stack-test")
	port, err := ports.Create(ctx, network, ports.CreateOpts{Name: name, NetworkID: tenant.ID}).Extract()
	require.NoError(t, err)
	t.Cleanup(func() { _ = ports.Delete(context.Background(), network, port.ID).ExtractErr() })
	require.NotEmpty(t, port.FixedIPs, "port %s got no address on %s", port.ID, tenant.Name)

	imageID := findImage(ctx, t, image, st.OpenStack.Image)
	flavorID := findFlavor(ctx, t, compute, st.OpenStack.Flavors[0])
	server, err := servers.Create(ctx, compute, servers.CreateOpts{
		Name: name, ImageRef: imageID, FlavorRef: flavorID,
		Networks: []servers.Network{{Port: port.ID}},
	}, nil).Extract()
	require.NoError(t, err)
	serverGone := false
	t.Cleanup(func() {
		if !serverGone {
			_ = servers.Delete(context.Background(), compute, server.ID).ExtractErr()
		}
	})
	waitServerActive(ctx, t, compute, server.ID)

	// The port is now the server's, bound by ML2/OVN to the chassis of the compute host.
	var bound struct {
		ports.Port
		portsbinding.PortsBindingExt
	}
	require.NoError(t, ports.Get(ctx, network, port.ID).ExtractInto(&bound))
	require.Equal(t, server.ID, bound.DeviceID)
	require.Equal(t, local.LocalComputeHost, bound.HostID)
	require.Equal(t, "ovs", bound.VIFType, "bound by ML2/OVN")
	// Nova's fake driver plugs no VIF; a hypervisor would add the port to br-int with its iface-id, and
	// then ovn-controller claims it on the chassis and Neutron reports it ACTIVE: done here as it would.
	tap := "tap" + port.ID[:11]
	_, err = st.OVSVsctl(ctx, "--", "add-port", "br-int", tap, "--", "set", "Interface", tap, "type=internal",
		"external_ids:iface-id="+port.ID, "external_ids:attached-mac="+port.MACAddress, "external_ids:iface-status=active")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = st.OVSVsctl(context.Background(), "--if-exists", "del-port", "br-int", tap) })
	eventually(t, "port "+port.ID+" ACTIVE once plugged on the chassis", time.Minute, time.Second, func() error {
		p, err := ports.Get(ctx, network, port.ID).Extract()
		if err != nil {
			return err
		}
		if p.Status != "ACTIVE" {
			return fmt.Errorf("port is %s", p.Status)
		}
		return nil
	})
	port, err = ports.Get(ctx, network, port.ID).Extract()
	require.NoError(t, err)

	fip, err := floatingips.Create(ctx, network, floatingips.CreateOpts{FloatingNetworkID: external.ID, PortID: port.ID}).Extract()
	require.NoError(t, err)
	t.Cleanup(func() { _ = floatingips.Delete(context.Background(), network, fip.ID).ExtractErr() })
	require.Equal(t, port.ID, fip.PortID)
	require.Equal(t, port.FixedIPs[0].IPAddress, fip.FixedIP)
	require.NotEmpty(t, fip.FloatingIP)

	// Tear down in dependency order and prove each object is gone.
	require.NoError(t, floatingips.Delete(ctx, network, fip.ID).ExtractErr())
	_, err = floatingips.Get(ctx, network, fip.ID).Extract()
	require.True(t, gone(err), "floating IP %s still exists: %v", fip.ID, err)

	_, err = st.OVSVsctl(ctx, "del-port", "br-int", tap)
	require.NoError(t, err)
	require.NoError(t, servers.Delete(ctx, compute, server.ID).ExtractErr())
	eventually(t, "server "+server.ID+" deleted", 2*time.Minute, time.Second, func() error {
		s, err := servers.Get(ctx, compute, server.ID).Extract()
		if gone(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("server is %s", s.Status)
	})
	serverGone = true

	// A port the user created survives the server that used it; it must be free again before deletion.
	eventually(t, "port "+port.ID+" released", time.Minute, time.Second, func() error {
		p, err := ports.Get(ctx, network, port.ID).Extract()
		if err != nil {
			return err
		}
		if p.DeviceID != "" {
			return fmt.Errorf("port still used by %s", p.DeviceID)
		}
		return nil
	})
	require.NoError(t, ports.Delete(ctx, network, port.ID).ExtractErr())
	_, err = ports.Get(ctx, network, port.ID).Extract()
	require.True(t, gone(err), "port %s still exists: %v", port.ID, err)
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

func TestOpenStackCinderVolume(t *testing.T) {
	require.True(t, st.OpenStack != nil && st.OpenStack.Cinder, "the local cloud runs without Cinder")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cloud := newOpenStackCloud(ctx, t)
	blockStorage := cloud.service(t, openstack.NewBlockStorageV3)

	name := uniqueName("stack-vol")
	vol, err := volumes.Create(ctx, blockStorage, volumes.CreateOpts{Name: name, Size: 1}, nil).Extract()
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = volumes.Delete(context.Background(), blockStorage, vol.ID, volumes.DeleteOpts{}).ExtractErr()
	})
	eventually(t, "volume "+vol.ID+" available", 2*time.Minute, 500*time.Millisecond, func() error {
		v, err := volumes.Get(ctx, blockStorage, vol.ID).Extract()
		if err != nil {
			return err
		}
		if v.Status == "error" {
			return backoffStop(fmt.Errorf("volume went to error"))
		}
		if v.Status != "available" {
			return fmt.Errorf("status %s", v.Status)
		}
		require.Equal(t, 1, v.Size)
		return nil
	})

	require.NoError(t, volumes.Delete(ctx, blockStorage, vol.ID, volumes.DeleteOpts{}).ExtractErr())
	eventually(t, "volume "+vol.ID+" deleted", 2*time.Minute, 500*time.Millisecond, func() error {
		v, err := volumes.Get(ctx, blockStorage, vol.ID).Extract()
		if gone(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("status %s", v.Status)
	})
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
		"neutron": local.NeutronPort, "nova": local.NovaPort, "ironic": local.IronicPort, "cinder": local.CinderPort,
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

func findFlavor(ctx context.Context, t *testing.T, client *gophercloud.ServiceClient, name string) string {
	t.Helper()
	pages, err := flavors.ListDetail(client, nil).AllPages(ctx)
	require.NoError(t, err)
	all, err := flavors.ExtractFlavors(pages)
	require.NoError(t, err)
	for _, f := range all {
		if f.Name == name {
			return f.ID
		}
	}
	t.Fatalf("flavor %s not found", name)
	return ""
}

func waitServerActive(ctx context.Context, t *testing.T, compute *gophercloud.ServiceClient, id string) {
	t.Helper()
	eventually(t, "server "+id+" ACTIVE", 3*time.Minute, time.Second, func() error {
		s, err := servers.Get(ctx, compute, id).Extract()
		if err != nil {
			return err
		}
		switch s.Status {
		case "ACTIVE":
			return nil
		case "ERROR":
			t.Fatalf("server %s went to ERROR: %v", id, s.Fault)
		}
		return fmt.Errorf("status %s", s.Status)
	})
}

// backoffStop marks an error that no amount of waiting will fix.
func backoffStop(err error) error { return errors.Join(errStop, err) }

var errStop = errors.New("permanent")
