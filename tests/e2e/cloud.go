package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/services"
	"github.com/gophercloud/gophercloud/v2/openstack/config"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/agents"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/placement/v1/resourceproviders"

	osacts "github.com/stackflow/stackflow/activities/openstack"
)

// Cloud holds admin clients of the local cloud, for tests to look at what Nova and Placement say.
type Cloud struct {
	Compute   *gophercloud.ServiceClient
	Placement *gophercloud.ServiceClient
	Image     *gophercloud.ServiceClient
	Network   *gophercloud.ServiceClient
}

// CloudIn authenticates as the local cloud's admin (the stack's clouds.yaml), its compute client on the
// compute API of region: a Nova that stackflow deployed in a region of its own (the stack runs none, so
// region must name one). The other services are the cloud's.
func (e *Env) CloudIn(ctx context.Context, region string) (*Cloud, error) {
	yml, err := os.ReadFile(e.Stack.CloudsYAML)
	if err != nil {
		return nil, err
	}
	return CloudFrom(ctx, yml, e.Stack.CloudName, region)
}

// CloudFrom holds admin clients of cloud in a clouds.yaml (such as the one a configuration writes for
// the Keystone it deployed), the compute client on region's compute API (the cloud's region when empty).
func CloudFrom(ctx context.Context, yml []byte, cloud, region string) (*Cloud, error) {
	ao, eo, _, err := clouds.Parse(clouds.WithCloudsYAML(bytes.NewReader(yml)), clouds.WithCloudName(cloud))
	if err != nil {
		return nil, fmt.Errorf("clouds.yaml: %w", err)
	}
	provider, err := config.NewProviderClient(ctx, ao)
	if err != nil {
		return nil, fmt.Errorf("authenticate: %w", err)
	}
	c := &Cloud{}
	ceo := eo
	if region != "" {
		ceo.Region = region
	}
	if c.Compute, err = openstack.NewComputeV2(provider, ceo); err != nil {
		return nil, fmt.Errorf("compute API of region %q: %w", region, err)
	}
	c.Compute.Microversion = "2.53"
	if c.Placement, err = openstack.NewPlacementV1(provider, eo); err != nil {
		return nil, err
	}
	if c.Image, err = openstack.NewImageV2(provider, eo); err != nil {
		return nil, err
	}
	if c.Network, err = openstack.NewNetworkV2(provider, eo); err != nil {
		return nil, err
	}
	return c, nil
}

// BootServer boots a server of the m1.tiny flavor with image on network, on host, and waits until it is
// ACTIVE there.
func (c *Cloud) BootServer(ctx context.Context, name, host, image, network string) (string, error) {
	ipages, err := images.List(c.Image, images.ListOpts{Name: image}).AllPages(ctx)
	if err != nil {
		return "", err
	}
	imgs, err := images.ExtractImages(ipages)
	if err != nil || len(imgs) == 0 {
		return "", fmt.Errorf("image %s: %v", image, err)
	}
	npages, err := networks.List(c.Network, networks.ListOpts{Name: network}).AllPages(ctx)
	if err != nil {
		return "", err
	}
	nets, err := networks.ExtractNetworks(npages)
	if err != nil || len(nets) == 0 {
		return "", fmt.Errorf("network %s: %v", network, err)
	}
	fpages, err := flavors.ListDetail(c.Compute, flavors.ListOpts{}).AllPages(ctx)
	if err != nil {
		return "", err
	}
	flvs, err := flavors.ExtractFlavors(fpages)
	if err != nil {
		return "", err
	}
	i := slices.IndexFunc(flvs, func(f flavors.Flavor) bool { return f.Name == "m1.tiny" })
	if i < 0 {
		return "", fmt.Errorf("no flavor m1.tiny")
	}
	s, err := servers.Create(ctx, c.Compute, servers.CreateOpts{Name: name, ImageRef: imgs[0].ID, FlavorRef: flvs[i].ID,
		Networks: []servers.Network{{UUID: nets[0].ID}}, AvailabilityZone: "nova:" + host}, nil).Extract()
	if err != nil {
		return "", fmt.Errorf("create server %s: %w", name, err)
	}
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(time.Second) {
		got, err := servers.Get(ctx, c.Compute, s.ID).Extract()
		switch {
		case err != nil:
		case got.Status == "ERROR":
			return s.ID, fmt.Errorf("server %s: ERROR: %v", name, got.Fault)
		case got.Status == "ACTIVE" && got.Host == host:
			return s.ID, nil
		}
		if time.Now().After(deadline) {
			return s.ID, fmt.Errorf("server %s not ACTIVE on %s in time", name, host)
		}
	}
}

// ComputeService is the host's nova-compute service.
func (c *Cloud) ComputeService(ctx context.Context, host string) (services.Service, error) {
	pages, err := services.List(c.Compute, services.ListOpts{Binary: "nova-compute", Host: host}).AllPages(ctx)
	if err != nil {
		return services.Service{}, err
	}
	svcs, err := services.ExtractServices(pages)
	if err != nil || len(svcs) != 1 {
		return services.Service{}, fmt.Errorf("compute service of %s: %d found (%v)", host, len(svcs), err)
	}
	return svcs[0], nil
}

// ServersOn lists the servers on host (every project).
func (c *Cloud) ServersOn(ctx context.Context, host string) ([]servers.Server, error) {
	pages, err := servers.List(c.Compute, servers.ListOpts{AllTenants: true, Host: host}).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	return servers.ExtractServers(pages)
}

// VersionClasses are the version resource classes host's nova-compute reports to Placement (see
// osacts.VersionClassPrefix), sorted.
func (c *Cloud) VersionClasses(ctx context.Context, host string) ([]string, error) {
	var body struct {
		Hypervisors []struct {
			ID       string `json:"id"`
			Hostname string `json:"hypervisor_hostname"`
		} `json:"hypervisors"`
	}
	if _, err := c.Compute.Get(ctx, c.Compute.ServiceURL("os-hypervisors")+"?hypervisor_hostname_pattern="+host, &body, nil); err != nil {
		return nil, fmt.Errorf("hypervisor of %s: %w", host, err)
	}
	id := ""
	for _, h := range body.Hypervisors {
		if h.Hostname == host {
			id = h.ID
		}
	}
	if id == "" {
		return nil, fmt.Errorf("no hypervisor %s", host)
	}
	inv, err := resourceproviders.GetInventories(ctx, c.Placement, id).Extract()
	if err != nil {
		return nil, err
	}
	out := []string{}
	for rc := range inv.Inventories {
		if strings.HasPrefix(rc, osacts.VersionClassPrefix) {
			out = append(out, rc)
		}
	}
	slices.Sort(out)
	return out, nil
}

// CloudProvider logs in as the local cloud's admin (clouds.yaml of the stack) and returns the provider
// and the cloud's endpoint options; a failure fails the test.
func (e *Env) CloudProvider(t testing.TB) (*gophercloud.ProviderClient, gophercloud.EndpointOpts) {
	t.Helper()
	yml, err := os.ReadFile(e.Stack.CloudsYAML)
	if err != nil {
		t.Fatal(err)
	}
	ao, eo, _, err := clouds.Parse(clouds.WithCloudsYAML(bytes.NewReader(yml)), clouds.WithCloudName(e.Stack.CloudName))
	if err != nil {
		t.Fatal(err)
	}
	provider, err := config.NewProviderClient(context.Background(), ao)
	if err != nil {
		t.Fatal(err)
	}
	return provider, eo
}

// ComputeClient is a Nova client of the local cloud's admin (microversion 2.53: service and hypervisor
// IDs are UUIDs), on the compute endpoint of region (the cloud's own when empty), as the catalog lists
// it.
func (e *Env) ComputeClient(t testing.TB, region string) *gophercloud.ServiceClient {
	t.Helper()
	provider, eo := e.CloudProvider(t)
	if region != "" {
		eo.Region = region
	}
	c, err := openstack.NewComputeV2(provider, eo)
	if err != nil {
		t.Fatal(err)
	}
	c.Microversion = "2.53"
	return c
}

// NovaManage runs Debian's nova-manage (under /usr/bin/python3) with a configuration file; a failure
// fails the test with its output.
func NovaManage(t testing.TB, configFile string, args ...string) string {
	t.Helper()
	argv := append([]string{"-c", "import sys; sys.argv[0] = 'nova-manage'; from nova.cmd.manage import main; sys.exit(main())",
		"--config-file", configFile}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "/usr/bin/python3", argv...).CombinedOutput()
	if err != nil {
		t.Fatalf("nova-manage %v: %v: %s", args, err, out)
	}
	return string(out)
}

// RemoveLeakedServers deletes, after a failure, the servers of the cloud (every project; the regions of
// the Novas the run deployed and the regions named, such as a Nova another Env deployed) whose name
// carries the run's name, and their ports, and says what it removed. Object teardown is what removes a
// run's servers; this only keeps one failure from failing what comes next on the cloud's quota or on a
// Nova's compute teardown. RunTests calls it after a failed package.
func (e *Env) RemoveLeakedServers(regions ...string) {
	if e.Stack == nil || e.Stack.OpenStack == nil || e.Run == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e.mu.Lock()
	regions = append(slices.Clone(e.regions), regions...)
	e.mu.Unlock()
	for _, region := range regions {
		c, err := e.CloudIn(ctx, region)
		if err != nil {
			continue
		}
		pages, err := servers.List(c.Compute, servers.ListOpts{AllTenants: true}).AllPages(ctx)
		if err != nil {
			continue
		}
		list, _ := servers.ExtractServers(pages)
		var gone []string
		for _, s := range list {
			if strings.Contains(s.Name, e.Run) {
				if err := servers.Delete(ctx, c.Compute, s.ID).ExtractErr(); err == nil {
					gone = append(gone, s.Name)
				}
			}
		}
		if len(gone) > 0 {
			fmt.Fprintf(os.Stderr, "after the failure: deleted %d server(s) of run %s the teardown left in region %q: %s\n", len(gone), e.Run, region, strings.Join(gone, ", "))
		}
		ppages, err := ports.List(c.Network, ports.ListOpts{}).AllPages(ctx)
		if err != nil {
			continue
		}
		pl, _ := ports.ExtractPorts(ppages)
		for _, p := range pl {
			if strings.Contains(p.Name, e.Run) && p.DeviceOwner == "" {
				_ = ports.Delete(ctx, c.Network, p.ID).ExtractErr()
			}
		}
	}
}

// NetworkAgents lists "type binary alive" for each Neutron agent on host, sorted: what
// `openstack network agent list --host` shows.
func (c *Cloud) NetworkAgents(ctx context.Context, host string) ([]string, error) {
	all, err := osacts.ListAgents(ctx, c.Network, agents.ListOpts{Host: host})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, a := range all {
		if a.Host == host {
			out = append(out, fmt.Sprintf("%s %s alive=%v", a.Type, a.Binary, a.Alive))
		}
	}
	slices.Sort(out)
	return out, nil
}

// ChassisAgents are the Neutron agents of an OVN chassis with a metadata agent, alive, as NetworkAgents
// lists them.
var ChassisAgents = []string{"OVN Controller agent ovn-controller alive=true", "OVN Metadata agent neutron-ovn-metadata-agent alive=true"}

// WaitNetworkAgents waits until Neutron lists exactly want on host (nothing when want is empty): Neutron
// reports an agent alive only after its next liveness ping, seconds after it started.
func (c *Cloud) WaitNetworkAgents(t testing.TB, host string, timeout time.Duration, want ...string) {
	t.Helper()
	WaitFor(t, fmt.Sprintf("Neutron agents of %s: %v", host, want), timeout, func() (bool, string) {
		got, err := c.NetworkAgents(context.Background(), host)
		if err != nil {
			return false, err.Error()
		}
		return slices.Equal(got, want) || (len(want) == 0 && len(got) == 0), fmt.Sprint(got)
	})
}
