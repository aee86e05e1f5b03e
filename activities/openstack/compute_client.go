package openstack

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/hypervisors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/keypairs"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/migrations"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servergroups"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/services"
)

// ComputeClient is every call the activities make to Nova, and nothing more: the activities decide
// (which server to adopt, what a 409 means, which instances a drain moves) against it, unit tests give
// them a generated mock (activities/openstack/mock, make generate), and gopherCompute is the one
// implementation that talks to Nova, at ComputeMicroversion. Errors are gophercloud's (a 404 is
// gophercloud.ErrUnexpectedResponseCode): the callers classify them.
type ComputeClient interface {
	ListServers(ctx context.Context, opts servers.ListOpts) ([]servers.Server, error)
	GetServer(ctx context.Context, id string) (*servers.Server, error)
	// CreateServer boots a server; hints may be nil.
	CreateServer(ctx context.Context, opts servers.CreateOptsBuilder, hints servers.SchedulerHintOptsBuilder) (*servers.Server, error)
	DeleteServer(ctx context.Context, id string) error
	// LiveMigrate asks Nova to live-migrate the server to host (its scheduler picks when host is "").
	LiveMigrate(ctx context.Context, id, host string) error
	// LastMigration is the server's latest migration (nil when it has none).
	LastMigration(ctx context.Context, id string) (*migrations.Migration, error)

	GetFlavor(ctx context.Context, id string) (*flavors.Flavor, error)
	// ListFlavors lists every flavor, public and private.
	ListFlavors(ctx context.Context) ([]flavors.Flavor, error)
	CreateFlavor(ctx context.Context, opts flavors.CreateOpts) (*flavors.Flavor, error)

	GetServerGroup(ctx context.Context, id string) (*servergroups.ServerGroup, error)
	ListServerGroups(ctx context.Context) ([]servergroups.ServerGroup, error)

	// ComputeServices lists the nova-compute service records of host.
	ComputeServices(ctx context.Context, host string) ([]services.Service, error)
	UpdateService(ctx context.Context, id string, opts services.UpdateOpts) error
	DeleteService(ctx context.Context, id string) error

	// Hypervisors lists the hypervisors whose host name matches pattern (Nova answers 404 for none).
	Hypervisors(ctx context.Context, pattern string) ([]hypervisors.Hypervisor, error)
	// ShowHypervisorServers shows a hypervisor with its servers, which looks up its host's cell
	// mapping: a 404 is a host not mapped to a cell yet.
	ShowHypervisorServers(ctx context.Context, id string) error
}

// computeFor is the Nova client of an identity: the cached gophercloud client (clientsFor, whose error
// wraps errNoComputeAPI for a catalog without one), or what a unit test set in o.compute.
func (o *OpenStack) computeFor(ctx context.Context, id Identity) (ComputeClient, error) {
	if o.compute != nil {
		return o.compute(ctx, id)
	}
	c, err := o.clientsFor(ctx, id)
	if err != nil {
		return nil, err
	}
	return gopherCompute{c.compute}, nil
}

// serviceCompute is the Nova client of a service user, at the internal compute endpoint of region (or
// what a unit test set in o.compute, asked for the region).
func (o *OpenStack) serviceCompute(ctx context.Context, u ServiceUser, region string) (ComputeClient, error) {
	if o.compute != nil {
		return o.compute(ctx, Identity{Region: region})
	}
	provider, err := o.serviceProvider(ctx, u)
	if err != nil {
		return nil, err
	}
	c, err := openstack.NewComputeV2(provider, gophercloud.EndpointOpts{Region: region, Availability: gophercloud.AvailabilityInternal})
	if err != nil {
		if errors.As(err, new(*gophercloud.ErrEndpointNotFound)) {
			// The API registers its endpoint before its Nova gets here; a catalog without it is one
			// being changed, which a retry sees settled.
			return nil, fmt.Errorf("no compute API in region %s of the catalog: %w", region, err)
		}
		return nil, classifyOS("compute API of region "+region, err)
	}
	return gopherCompute{c}, nil
}

// gopherCompute is ComputeClient on gophercloud.
type gopherCompute struct{ c *gophercloud.ServiceClient }

func (g gopherCompute) ListServers(ctx context.Context, opts servers.ListOpts) ([]servers.Server, error) {
	pages, err := servers.List(g.c, opts).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	return servers.ExtractServers(pages)
}

func (g gopherCompute) GetServer(ctx context.Context, id string) (*servers.Server, error) {
	return servers.Get(ctx, g.c, id).Extract()
}

func (g gopherCompute) CreateServer(ctx context.Context, opts servers.CreateOptsBuilder, hints servers.SchedulerHintOptsBuilder) (*servers.Server, error) {
	return servers.Create(ctx, g.c, opts, hints).Extract()
}

func (g gopherCompute) DeleteServer(ctx context.Context, id string) error {
	return servers.Delete(ctx, g.c, id).ExtractErr()
}

// LiveMigrate asks with block migration decided by Nova (microversion 2.25 and later).
func (g gopherCompute) LiveMigrate(ctx context.Context, id, host string) error {
	body := map[string]any{"block_migration": "auto", "host": nil}
	if host != "" {
		body["host"] = host
	}
	resp, err := g.c.Post(ctx, g.c.ServiceURL("servers", id, "action"), map[string]any{"os-migrateLive": body}, nil, &gophercloud.RequestOpts{OkCodes: []int{202}})
	_, _, err = gophercloud.ParseResponse(resp, err)
	return err
}

func (g gopherCompute) LastMigration(ctx context.Context, id string) (*migrations.Migration, error) {
	pages, err := migrations.List(g.c, migrations.ListOpts{InstanceID: &id}).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	list, err := migrations.ExtractMigrations(pages)
	if err != nil || len(list) == 0 {
		return nil, err
	}
	slices.SortFunc(list, func(a, b migrations.Migration) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return &list[len(list)-1], nil
}

func (g gopherCompute) GetFlavor(ctx context.Context, id string) (*flavors.Flavor, error) {
	return flavors.Get(ctx, g.c, id).Extract()
}

func (g gopherCompute) ListFlavors(ctx context.Context) ([]flavors.Flavor, error) {
	pages, err := flavors.ListDetail(g.c, flavors.ListOpts{AccessType: flavors.AllAccess}).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	return flavors.ExtractFlavors(pages)
}

func (g gopherCompute) CreateFlavor(ctx context.Context, opts flavors.CreateOpts) (*flavors.Flavor, error) {
	return flavors.Create(ctx, g.c, opts).Extract()
}

func (g gopherCompute) GetServerGroup(ctx context.Context, id string) (*servergroups.ServerGroup, error) {
	return servergroups.Get(ctx, g.c, id).Extract()
}

func (g gopherCompute) ListServerGroups(ctx context.Context) ([]servergroups.ServerGroup, error) {
	pages, err := servergroups.List(g.c, servergroups.ListOpts{}).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	return servergroups.ExtractServerGroups(pages)
}

func (g gopherCompute) ComputeServices(ctx context.Context, host string) ([]services.Service, error) {
	pages, err := services.List(g.c, services.ListOpts{Binary: "nova-compute", Host: host}).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	return services.ExtractServices(pages)
}

func (g gopherCompute) UpdateService(ctx context.Context, id string, opts services.UpdateOpts) error {
	_, err := services.Update(ctx, g.c, id, opts).Extract()
	return err
}

func (g gopherCompute) DeleteService(ctx context.Context, id string) error {
	return services.Delete(ctx, g.c, id).ExtractErr()
}

func (g gopherCompute) Hypervisors(ctx context.Context, pattern string) ([]hypervisors.Hypervisor, error) {
	pages, err := hypervisors.List(g.c, hypervisors.ListOpts{HypervisorHostnamePattern: &pattern}).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	return hypervisors.ExtractHypervisors(pages)
}

func (g gopherCompute) ShowHypervisorServers(ctx context.Context, id string) error {
	var body map[string]any
	_, err := g.c.Get(ctx, g.c.ServiceURL("os-hypervisors", id)+"?with_servers=true", &body, nil)
	return err
}

// The gophercloud types the activities use, under stackflow's names: this file is the only one of the
// package that imports the service's gophercloud packages (TestServiceTypesBehindClients).
type (
	BlockDevice              = servers.BlockDevice
	FlavorCreateOpts         = flavors.CreateOpts
	Hypervisor               = hypervisors.Hypervisor
	KeyPairCreateOpts        = keypairs.CreateOptsExt
	Migration                = migrations.Migration
	NovaFlavor               = flavors.Flavor
	NovaService              = services.Service
	NovaServiceUpdateOpts    = services.UpdateOpts
	SchedulerHintOpts        = servers.SchedulerHintOpts
	SchedulerHintOptsBuilder = servers.SchedulerHintOptsBuilder
	Server                   = servers.Server
	ServerCreateOpts         = servers.CreateOpts
	ServerCreateOptsBuilder  = servers.CreateOptsBuilder
	ServerFault              = servers.Fault
	ServerGroup              = servergroups.ServerGroup
	ServerListOpts           = servers.ListOpts
	ServerNetwork            = servers.Network
)

// Their constants, likewise.
const (
	DestinationLocal  = servers.DestinationLocal
	DestinationVolume = servers.DestinationVolume
	ServiceDisabled   = services.ServiceDisabled
	ServiceEnabled    = services.ServiceEnabled
	SourceBlank       = servers.SourceBlank
	SourceImage       = servers.SourceImage
	SourceVolume      = servers.SourceVolume
)
