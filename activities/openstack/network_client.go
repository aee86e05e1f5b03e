package openstack

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/agents"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/attributestags"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/external"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/portsecurity"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/groups"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
)

// NetworkClient is every call the activities make to Neutron, and nothing more: the activities decide
// (which port to adopt, what a conflict means, what to delete) against it, unit tests give them a
// generated mock (activities/openstack/mock, make generate), and gopherNetwork is the one
// implementation that talks to Neutron. Errors are gophercloud's (a 404 is
// gophercloud.ErrUnexpectedResponseCode): the callers classify them.
type NetworkClient interface {
	GetNetwork(ctx context.Context, id string) (*networks.Network, error)
	ListNetworks(ctx context.Context, opts networks.ListOptsBuilder) ([]networks.Network, error)
	GetSubnet(ctx context.Context, id string) (*subnets.Subnet, error)
	ListSubnets(ctx context.Context, opts subnets.ListOpts) ([]subnets.Subnet, error)
	GetSecurityGroup(ctx context.Context, id string) (*groups.SecGroup, error)
	ListSecurityGroups(ctx context.Context, opts groups.ListOpts) ([]groups.SecGroup, error)

	GetPort(ctx context.Context, id string) (*ports.Port, error)
	ListPorts(ctx context.Context, opts ports.ListOpts) ([]ports.Port, error)
	CreatePort(ctx context.Context, opts ports.CreateOptsBuilder) (*ports.Port, error)
	DeletePort(ctx context.Context, id string) error
	// ReplaceTags sets the tags of a resource of resourceType ("ports", "floatingips").
	ReplaceTags(ctx context.Context, resourceType, id string, tags []string) error

	ListFloatingIPs(ctx context.Context, opts floatingips.ListOpts) ([]floatingips.FloatingIP, error)
	CreateFloatingIP(ctx context.Context, opts floatingips.CreateOpts) (*floatingips.FloatingIP, error)
	// AssociateFloatingIP points the floating IP at portID; "" disassociates it.
	AssociateFloatingIP(ctx context.Context, id, portID string) error
	DeleteFloatingIP(ctx context.Context, id string) error

	// ListAgents lists Neutron's agents, with their ID, type, binary, host and liveness (see the
	// function ListAgents for why not through agents.List).
	ListAgents(ctx context.Context, opts agents.ListOpts) ([]agents.Agent, error)
	DeleteAgent(ctx context.Context, id string) error
}

// networkFor is the Neutron client of an identity: the cached gophercloud client (regionClients: Neutron
// needs no Nova, so a region with no compute API serves it, as the sweep and a node's teardown through a
// cloud with no Nova of its own ask), or what a unit test set in o.network.
func (o *OpenStack) networkFor(ctx context.Context, id Identity) (NetworkClient, error) {
	if o.network != nil {
		return o.network(ctx, id)
	}
	c, err := o.regionClients(ctx, id)
	if err != nil {
		return nil, err
	}
	return gopherNetwork{c.network}, nil
}

// gopherNetwork is NetworkClient on gophercloud.
type gopherNetwork struct{ c *gophercloud.ServiceClient }

func (g gopherNetwork) GetNetwork(ctx context.Context, id string) (*networks.Network, error) {
	return networks.Get(ctx, g.c, id).Extract()
}

func (g gopherNetwork) ListNetworks(ctx context.Context, opts networks.ListOptsBuilder) ([]networks.Network, error) {
	pages, err := networks.List(g.c, opts).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	return networks.ExtractNetworks(pages)
}

func (g gopherNetwork) GetSubnet(ctx context.Context, id string) (*subnets.Subnet, error) {
	return subnets.Get(ctx, g.c, id).Extract()
}

func (g gopherNetwork) ListSubnets(ctx context.Context, opts subnets.ListOpts) ([]subnets.Subnet, error) {
	pages, err := subnets.List(g.c, opts).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	return subnets.ExtractSubnets(pages)
}

func (g gopherNetwork) GetSecurityGroup(ctx context.Context, id string) (*groups.SecGroup, error) {
	return groups.Get(ctx, g.c, id).Extract()
}

func (g gopherNetwork) ListSecurityGroups(ctx context.Context, opts groups.ListOpts) ([]groups.SecGroup, error) {
	pages, err := groups.List(g.c, opts).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	return groups.ExtractGroups(pages)
}

func (g gopherNetwork) GetPort(ctx context.Context, id string) (*ports.Port, error) {
	return ports.Get(ctx, g.c, id).Extract()
}

func (g gopherNetwork) ListPorts(ctx context.Context, opts ports.ListOpts) ([]ports.Port, error) {
	pages, err := ports.List(g.c, opts).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	return ports.ExtractPorts(pages)
}

func (g gopherNetwork) CreatePort(ctx context.Context, opts ports.CreateOptsBuilder) (*ports.Port, error) {
	return ports.Create(ctx, g.c, opts).Extract()
}

func (g gopherNetwork) DeletePort(ctx context.Context, id string) error {
	return ports.Delete(ctx, g.c, id).ExtractErr()
}

func (g gopherNetwork) ReplaceTags(ctx context.Context, resourceType, id string, tags []string) error {
	_, err := attributestags.ReplaceAll(ctx, g.c, resourceType, id, attributestags.ReplaceAllOpts{Tags: tags}).Extract()
	return err
}

func (g gopherNetwork) ListFloatingIPs(ctx context.Context, opts floatingips.ListOpts) ([]floatingips.FloatingIP, error) {
	pages, err := floatingips.List(g.c, opts).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	return floatingips.ExtractFloatingIPs(pages)
}

func (g gopherNetwork) CreateFloatingIP(ctx context.Context, opts floatingips.CreateOpts) (*floatingips.FloatingIP, error) {
	return floatingips.Create(ctx, g.c, opts).Extract()
}

func (g gopherNetwork) AssociateFloatingIP(ctx context.Context, id, portID string) error {
	_, err := floatingips.Update(ctx, g.c, id, floatingips.UpdateOpts{PortID: &portID}).Extract()
	return err
}

func (g gopherNetwork) DeleteFloatingIP(ctx context.Context, id string) error {
	return floatingips.Delete(ctx, g.c, id).ExtractErr()
}

func (g gopherNetwork) ListAgents(ctx context.Context, opts agents.ListOpts) ([]agents.Agent, error) {
	list, err := ListAgents(ctx, g.c, opts)
	if err != nil {
		return nil, err
	}
	out := make([]agents.Agent, len(list))
	for i, a := range list {
		out[i] = agents.Agent{ID: a.ID, AgentType: a.Type, Binary: a.Binary, Host: a.Host, Alive: a.Alive}
	}
	return out, nil
}

func (g gopherNetwork) DeleteAgent(ctx context.Context, id string) error {
	return agents.Delete(ctx, g.c, id).ExtractErr()
}

// ListAgents lists Neutron's agents in one request. gophercloud's agents.List cannot be used with
// ML2/OVN: its pager checks each page with agents.ExtractAgents, which parses the timestamps as
// "2006-01-02 15:04:05" and fails on OVN's ("2026-11-27 12:35:49.366000+00:00"); stackflow needs none of
// them. Neutron's agent list is not paginated unless asked (no limit is sent).
func ListAgents(ctx context.Context, c *gophercloud.ServiceClient, opts agents.ListOpts) ([]NetworkAgent, error) {
	q, err := opts.ToAgentListQuery()
	if err != nil {
		return nil, err
	}
	var body map[string]any
	if _, err := c.Get(ctx, c.ServiceURL("agents")+q, &body, nil); err != nil {
		return nil, err
	}
	return decodeAgents(body)
}

// decodeAgents reads the agents of a decoded agent list.
func decodeAgents(body any) ([]NetworkAgent, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	var out struct {
		Agents []NetworkAgent `json:"agents"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("agent list: %w", err)
	}
	return out.Agents, nil
}

// The gophercloud types the activities use, under stackflow's names: this file is the only one of the
// package that imports the service's gophercloud packages (TestServiceTypesBehindClients).
type (
	AddressPair             = ports.AddressPair
	Agent                   = agents.Agent
	AgentListOpts           = agents.ListOpts
	ExternalNetworkListOpts = external.ListOptsExt
	FixedIP                 = ports.IP
	FloatingIP              = floatingips.FloatingIP
	FloatingIPCreateOpts    = floatingips.CreateOpts
	FloatingIPListOpts      = floatingips.ListOpts
	Network                 = networks.Network
	NetworkListOpts         = networks.ListOpts
	Port                    = ports.Port
	PortCreateOpts          = ports.CreateOpts
	PortCreateOptsBuilder   = ports.CreateOptsBuilder
	PortListOpts            = ports.ListOpts
	PortSecurityCreateOpts  = portsecurity.PortCreateOptsExt
	SecGroup                = groups.SecGroup
	SecGroupListOpts        = groups.ListOpts
	Subnet                  = subnets.Subnet
	SubnetListOpts          = subnets.ListOpts
)
