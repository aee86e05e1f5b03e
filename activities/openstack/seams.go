package openstack

import (
	"context"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
)

// The narrow clients the activities' decisions are written against (which instance moves where, what a
// sweep deletes), each one OpenStack service's calls they make, with the gophercloud client behind it
// (gopherVolume; Nova's is ComputeClient, Neutron's NetworkClient). Unit tests give fakes. Errors come back as gophercloud's
// (a 404 is gophercloud.ErrUnexpectedResponseCode): the callers classify them.

// volumeAPI is what the sweep asks Cinder.
type volumeAPI interface {
	ListVolumes(ctx context.Context, opts volumes.ListOpts) ([]volumes.Volume, error)
	GetVolume(ctx context.Context, id string) (*volumes.Volume, error)
	DeleteVolume(ctx context.Context, id string) error
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
