package openstack

import (
	"context"
	"slices"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/migrations"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
)

// The narrow clients the activities' decisions are written against (which instance moves where, what a
// sweep deletes), each one OpenStack service's calls they make, with the gophercloud client behind it
// (gopherCompute, gopherVolume; Neutron's is NetworkClient). Unit tests give fakes. Errors come back as gophercloud's
// (a 404 is gophercloud.ErrUnexpectedResponseCode): the callers classify them.

// computeAPI is what the drain and the sweep ask Nova.
type computeAPI interface {
	ListServers(ctx context.Context, opts servers.ListOpts) ([]servers.Server, error)
	GetServer(ctx context.Context, id string) (*servers.Server, error)
	DeleteServer(ctx context.Context, id string) error
	// LiveMigrate asks Nova to live-migrate the server to host (its scheduler picks when host is "").
	LiveMigrate(ctx context.Context, id, host string) error
	// LastMigration is the server's latest migration (nil when it has none).
	LastMigration(ctx context.Context, id string) (*migrations.Migration, error)
}

// volumeAPI is what the sweep asks Cinder.
type volumeAPI interface {
	ListVolumes(ctx context.Context, opts volumes.ListOpts) ([]volumes.Volume, error)
	GetVolume(ctx context.Context, id string) (*volumes.Volume, error)
	DeleteVolume(ctx context.Context, id string) error
}

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

type gopherVolume struct{ c *gophercloud.ServiceClient }

func (g gopherVolume) ListVolumes(ctx context.Context, opts volumes.ListOpts) ([]volumes.Volume, error) {
	pages, err := volumes.List(g.c, opts).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	return volumes.ExtractVolumes(pages)
}

func (g gopherVolume) GetVolume(ctx context.Context, id string) (*volumes.Volume, error) {
	return volumes.Get(ctx, g.c, id).Extract()
}

func (g gopherVolume) DeleteVolume(ctx context.Context, id string) error {
	return volumes.Delete(ctx, g.c, id, volumes.DeleteOpts{Cascade: true}).ExtractErr()
}
