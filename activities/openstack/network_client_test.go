package openstack

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/agents"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/external"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/groups"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	"github.com/gophercloud/gophercloud/v2/pagination"
	"github.com/stretchr/testify/require"
)

// decodeAgents reads agents as ML2/OVN lists them, whose timestamps gophercloud's own extraction
// refuses, and agents of other drivers alike.
func TestDecodeAgents(t *testing.T) {
	tests := []struct {
		name string
		body map[string]any
		want []NetworkAgent
	}{
		{
			name: "ML2/OVN: timestamps with microseconds and a zone",
			body: map[string]any{"agents": []any{
				map[string]any{"id": "edpm-compute-0", "agent_type": "OVN Controller agent", "binary": "ovn-controller", "host": "edpm-compute-0",
					"alive": true, "heartbeat_timestamp": "2026-11-27 12:35:49.366000+00:00", "created_at": nil},
				map[string]any{"id": "4464c498-f4d9-5cf2-aeae-e1406991e8d1", "agent_type": "OVN Metadata agent", "binary": "neutron-ovn-metadata-agent",
					"host": "edpm-compute-0", "alive": false, "heartbeat_timestamp": "2026-11-27 12:35:49.366000+00:00"},
			}},
			want: []NetworkAgent{
				{ID: "edpm-compute-0", Type: "OVN Controller agent", Binary: "ovn-controller", Host: "edpm-compute-0", Alive: true},
				{ID: "4464c498-f4d9-5cf2-aeae-e1406991e8d1", Type: "OVN Metadata agent", Binary: "neutron-ovn-metadata-agent", Host: "edpm-compute-0"},
			},
		},
		{
			name: "an agent-based driver's timestamps",
			body: map[string]any{"agents": []any{
				map[string]any{"id": "a1", "agent_type": "Open vSwitch agent", "binary": "neutron-openvswitch-agent", "host": "c1", "alive": true,
					"heartbeat_timestamp": "2026-11-27 12:35:49"},
			}},
			want: []NetworkAgent{{ID: "a1", Type: "Open vSwitch agent", Binary: "neutron-openvswitch-agent", Host: "c1", Alive: true}},
		},
		{name: "none", body: map[string]any{"agents": []any{}}, want: []NetworkAgent{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeAgents(tt.body)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
	// What gophercloud's extraction (which its pager calls on every page) does with the first case: the
	// reason ListAgents does not use agents.List's pager.
	_, err := agents.ExtractAgents(agents.AgentPage{LinkedPageBase: pagination.LinkedPageBase{PageResult: pagination.PageResult{Result: gophercloud.Result{Body: tests[0].body}}}})
	require.Error(t, err)
}

// ListAgents asks Neutron once, with the host and binary filters, and reads OVN's agents.
func TestListAgentsAsksWithTheFilters(t *testing.T) {
	var query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/v2.0/agents", r.URL.Path)
		query = r.URL.RawQuery
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"agents": [{"id": "4464c498", "agent_type": "OVN Metadata agent", "binary": "neutron-ovn-metadata-agent",
			"host": "edpm-compute-0", "alive": true, "heartbeat_timestamp": "2026-11-27 12:35:49.366000+00:00"}]}`))
	}))
	defer srv.Close()
	c := &gophercloud.ServiceClient{ProviderClient: &gophercloud.ProviderClient{HTTPClient: *srv.Client()}, Endpoint: srv.URL + "/v2.0/"}
	got, err := ListAgents(context.Background(), c, agents.ListOpts{Host: "edpm-compute-0", Binary: AgentBinaryOVNMetadata})
	require.NoError(t, err)
	require.Equal(t, []NetworkAgent{{ID: "4464c498", Type: "OVN Metadata agent", Binary: AgentBinaryOVNMetadata, Host: "edpm-compute-0", Alive: true}}, got)
	require.Contains(t, query, "host=edpm-compute-0")
	require.Contains(t, query, "binary=neutron-ovn-metadata-agent")
}

func TestGopherNetwork(t *testing.T) {
	ctx := context.Background()
	t.Run("a port created with port security off, tagged, found by its tags, deleted", func(t *testing.T) {
		api, c := serve(t, map[string]apiAnswer{
			"POST /ports":          {201, `{"port": {"id": "p-1", "name": "web-0", "network_id": "net-1", "fixed_ips": [{"subnet_id": "s-1", "ip_address": "10.0.0.5"}]}}`},
			"PUT /ports/p-1/tags":  {200, `{"tags": ["role=web", "owner"]}`},
			"GET /ports":           {200, `{"ports": [{"id": "p-1", "name": "web-0", "tags": ["role=web", "owner"]}]}`},
			"DELETE /ports/p-1":    {204, ""},
			"DELETE /ports/p-gone": {404, `{"NeutronError": {"type": "PortNotFound", "message": "Port p-gone could not be found."}}`},
		})
		neutron := gopherNetwork{c}
		off := false
		p, err := neutron.CreatePort(ctx, portCreate{PortCreateOpts: ports.CreateOpts{NetworkID: "net-1", Name: "web-0"}, portSecurity: &off})
		require.NoError(t, err)
		require.Equal(t, "10.0.0.5", p.FixedIPs[0].IPAddress)
		require.NoError(t, neutron.ReplaceTags(ctx, "ports", "p-1", []string{"role=web", "owner"}))
		list, err := neutron.ListPorts(ctx, ports.ListOpts{Tags: "owner", NetworkID: "net-1"})
		require.NoError(t, err)
		require.Len(t, list, 1)
		require.NoError(t, neutron.DeletePort(ctx, "p-1"))
		require.True(t, isNotFound(neutron.DeletePort(ctx, "p-gone")))
		got := api.requests()
		require.Equal(t, map[string]any{"port": map[string]any{"network_id": "net-1", "name": "web-0", "port_security_enabled": false}}, got[0].Body,
			"port security in the same request as the port")
		require.Equal(t, map[string]any{"tags": []any{"role=web", "owner"}}, got[1].Body)
		require.Contains(t, got[2].Query, "tags=owner")
		require.Contains(t, got[2].Query, "network_id=net-1")
	})
	t.Run("a floating IP created, pointed at a port and away, deleted", func(t *testing.T) {
		api, c := serve(t, map[string]apiAnswer{
			"POST /floatingips":        {201, `{"floatingip": {"id": "f-1", "floating_ip_address": "203.0.113.7", "floating_network_id": "ext"}}`},
			"PUT /floatingips/f-1":     {200, `{"floatingip": {"id": "f-1"}}`},
			"GET /floatingips":         {200, `{"floatingips": [{"id": "f-1", "floating_ip_address": "203.0.113.7", "port_id": "p-1"}]}`},
			"DELETE /floatingips/f-1":  {204, ""},
			"DELETE /floatingips/f-in": {409, `{"NeutronError": {"type": "FloatingIPPortAlreadyAssociated", "message": "in use"}}`},
		})
		neutron := gopherNetwork{c}
		fip, err := neutron.CreateFloatingIP(ctx, floatingips.CreateOpts{FloatingNetworkID: "ext", Description: "owner"})
		require.NoError(t, err)
		require.Equal(t, "203.0.113.7", fip.FloatingIP)
		require.NoError(t, neutron.AssociateFloatingIP(ctx, "f-1", "p-1"))
		require.NoError(t, neutron.AssociateFloatingIP(ctx, "f-1", ""))
		list, err := neutron.ListFloatingIPs(ctx, floatingips.ListOpts{FloatingIP: "203.0.113.7"})
		require.NoError(t, err)
		require.Equal(t, "p-1", list[0].PortID)
		require.NoError(t, neutron.DeleteFloatingIP(ctx, "f-1"))
		require.True(t, gophercloud.ResponseCodeIs(neutron.DeleteFloatingIP(ctx, "f-in"), http.StatusConflict))
		got := api.requests()
		require.Equal(t, map[string]any{"floatingip": map[string]any{"port_id": "p-1"}}, got[1].Body)
		require.Equal(t, map[string]any{"floatingip": map[string]any{"port_id": nil}}, got[2].Body, "an empty port disassociates")
		require.Equal(t, "floating_ip_address=203.0.113.7", got[3].Query)
	})
	t.Run("networks, subnets and security groups read", func(t *testing.T) {
		api, c := serve(t, map[string]apiAnswer{
			"GET /networks":             {200, `{"networks": [{"id": "ext", "name": "public", "router:external": true}]}`},
			"GET /networks/net-1":       {200, `{"network": {"id": "net-1", "name": "private", "subnets": ["s-1"]}}`},
			"GET /subnets":              {200, `{"subnets": [{"id": "s-1", "network_id": "net-1", "cidr": "10.0.0.0/24"}]}`},
			"GET /subnets/s-1":          {200, `{"subnet": {"id": "s-1", "cidr": "10.0.0.0/24"}}`},
			"GET /security-groups":      {200, `{"security_groups": [{"id": "sg-1", "name": "default"}]}`},
			"GET /security-groups/sg-1": {200, `{"security_group": {"id": "sg-1", "name": "default"}}`},
		})
		neutron := gopherNetwork{c}
		ext := true
		nets, err := neutron.ListNetworks(ctx, external.ListOptsExt{ListOptsBuilder: networks.ListOpts{}, External: &ext})
		require.NoError(t, err)
		require.Equal(t, "ext", nets[0].ID)
		n, err := neutron.GetNetwork(ctx, "net-1")
		require.NoError(t, err)
		require.Equal(t, []string{"s-1"}, n.Subnets)
		subs, err := neutron.ListSubnets(ctx, subnets.ListOpts{NetworkID: "net-1"})
		require.NoError(t, err)
		require.Equal(t, "10.0.0.0/24", subs[0].CIDR)
		s, err := neutron.GetSubnet(ctx, "s-1")
		require.NoError(t, err)
		require.Equal(t, "s-1", s.ID)
		sgs, err := neutron.ListSecurityGroups(ctx, groups.ListOpts{Name: "default"})
		require.NoError(t, err)
		require.Equal(t, "sg-1", sgs[0].ID)
		sg, err := neutron.GetSecurityGroup(ctx, "sg-1")
		require.NoError(t, err)
		require.Equal(t, "default", sg.Name)
		got := api.requests()
		require.Equal(t, "router%3Aexternal=true", got[0].Query)
		require.Equal(t, "network_id=net-1", got[2].Query)
		require.Equal(t, "name=default", got[4].Query)
	})
	t.Run("agents listed as stackflow reads them, deleted", func(t *testing.T) {
		api, c := serve(t, map[string]apiAnswer{
			"GET /agents": {200, `{"agents": [{"id": "a-1", "agent_type": "OVN Controller agent", "binary": "ovn-controller", "host": "c0",
				"alive": false, "heartbeat_timestamp": "2026-11-27 12:35:49.366000+00:00"}]}`},
			"DELETE /agents/a-1": {204, ""},
		})
		neutron := gopherNetwork{c}
		list, err := neutron.ListAgents(ctx, agents.ListOpts{Host: "c0"})
		require.NoError(t, err)
		require.Equal(t, []agents.Agent{{ID: "a-1", AgentType: "OVN Controller agent", Binary: "ovn-controller", Host: "c0"}}, list)
		require.NoError(t, neutron.DeleteAgent(ctx, "a-1"))
		require.Equal(t, "DELETE", api.requests()[1].Method)
	})
}

func TestGopherPlacementVolumeImage(t *testing.T) {
	ctx := context.Background()
	t.Run("placement: providers by name, their classes and consumers sorted, deletes", func(t *testing.T) {
		api, c := serve(t, map[string]apiAnswer{
			"GET /resource_providers": {200, `{"resource_providers": [{"uuid": "rp-1", "name": "c0", "generation": 3}]}`},
			"GET /resource_providers/rp-1/inventories": {200, `{"resource_provider_generation": 3, "inventories": {
				"VCPU": {"total": 4}, "MEMORY_MB": {"total": 8192}, "DISK_GB": {"total": 40}}}`},
			"GET /resource_providers/rp-1/allocations": {200, `{"resource_provider_generation": 3, "allocations": {
				"vm-b": {"resources": {"VCPU": 1}}, "vm-a": {"resources": {"VCPU": 1}}}}`},
			"DELETE /resource_providers/rp-1": {204, ""},
			"DELETE /allocations/vm-a":        {204, ""},
			"DELETE /allocations/vm-gone":     {404, `{"errors": [{"status": 404, "detail": "No allocations for consumer 'vm-gone'"}]}`},
		})
		pl := gopherPlacement{c}
		rps, err := pl.Providers(ctx, "c0")
		require.NoError(t, err)
		require.Equal(t, []string{"rp-1"}, rps)
		classes, err := pl.ResourceClasses(ctx, "rp-1")
		require.NoError(t, err)
		require.Equal(t, []string{"DISK_GB", "MEMORY_MB", "VCPU"}, classes)
		consumers, err := pl.Consumers(ctx, "rp-1")
		require.NoError(t, err)
		require.Equal(t, []string{"vm-a", "vm-b"}, consumers)
		require.NoError(t, pl.DeleteAllocations(ctx, "vm-a"))
		err = pl.DeleteAllocations(ctx, "vm-gone")
		require.True(t, isNotFound(err))
		require.Contains(t, classifyOS("delete allocations", err).Error(), "No allocations for consumer 'vm-gone'")
		require.NoError(t, pl.DeleteProvider(ctx, "rp-1"))
		require.Equal(t, "name=c0", api.requests()[0].Query)
	})
	t.Run("cinder: a volume created, listed by name, deleted with its snapshots", func(t *testing.T) {
		api, c := serve(t, map[string]apiAnswer{
			"POST /volumes":       {202, `{"volume": {"id": "v-1", "name": "web-0-root", "size": 1, "status": "creating"}}`},
			"GET /volumes/detail": {200, `{"volumes": [{"id": "v-1", "name": "web-0-root", "status": "available"}]}`},
			"GET /volumes/v-1":    {200, `{"volume": {"id": "v-1", "status": "in-use", "attachments": [{"server_id": "vm-1"}]}}`},
			"DELETE /volumes/v-1": {202, ""},
		})
		cinder := gopherVolume{c}
		v, err := cinder.CreateVolume(ctx, volumes.CreateOpts{Name: "web-0-root", Size: 1, ImageID: "img-1"})
		require.NoError(t, err)
		require.Equal(t, "creating", v.Status)
		list, err := cinder.ListVolumes(ctx, volumes.ListOpts{Name: "web-0-root"})
		require.NoError(t, err)
		require.Equal(t, "available", list[0].Status)
		got, err := cinder.GetVolume(ctx, "v-1")
		require.NoError(t, err)
		require.Equal(t, "vm-1", got.Attachments[0].ServerID)
		require.NoError(t, cinder.DeleteVolume(ctx, "v-1"))
		reqs := api.requests()
		require.Equal(t, map[string]any{"volume": map[string]any{"name": "web-0-root", "size": 1.0, "imageRef": "img-1"}}, reqs[0].Body)
		require.Contains(t, reqs[1].Query, "name=web-0-root")
		require.Equal(t, "cascade=true", reqs[3].Query, "a volume's snapshots go with it")
	})
	t.Run("glance: an image read and listed by name", func(t *testing.T) {
		api, c := serve(t, map[string]apiAnswer{
			"GET /images":       {200, `{"images": [{"id": "img-1", "name": "cirros", "status": "active"}]}`},
			"GET /images/img-1": {200, `{"id": "img-1", "name": "cirros", "status": "active"}`},
		})
		glance := gopherImage{c}
		list, err := glance.ListImages(ctx, images.ListOpts{Name: "cirros"})
		require.NoError(t, err)
		require.Equal(t, "img-1", list[0].ID)
		img, err := glance.GetImage(ctx, "img-1")
		require.NoError(t, err)
		require.Equal(t, "cirros", img.Name)
		require.Equal(t, "name=cirros", api.requests()[0].Query)
	})
}
