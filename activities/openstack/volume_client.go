package openstack

import (
	"context"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
)

// VolumeClient is every call the activities make to Cinder: the activities decide against it, unit tests
// give them a generated mock, and gopherVolume is the one implementation. Errors are gophercloud's.
type VolumeClient interface {
	ListVolumes(ctx context.Context, opts volumes.ListOpts) ([]volumes.Volume, error)
	GetVolume(ctx context.Context, id string) (*volumes.Volume, error)
	CreateVolume(ctx context.Context, opts volumes.CreateOpts) (*volumes.Volume, error)
	// DeleteVolume deletes the volume with its snapshots.
	DeleteVolume(ctx context.Context, id string) error
}

// volumeFor is the Cinder client of an identity (a permanent error when the cloud has no block
// storage), or what a unit test set in o.volume.
func (o *OpenStack) volumeFor(ctx context.Context, id Identity) (VolumeClient, error) {
	if o.volume != nil {
		return o.volume(ctx, id)
	}
	c, err := o.regionClients(ctx, id)
	if err != nil {
		return nil, err
	}
	bs, err := c.blockStorage()
	if err != nil {
		return nil, err
	}
	return gopherVolume{bs}, nil
}

// regionVolumeFor is volumeFor that is nil (no error) for a cloud with no block storage: there is no
// volume to sweep.
func (o *OpenStack) regionVolumeFor(ctx context.Context, id Identity) (VolumeClient, error) {
	if o.volume != nil {
		return o.volume(ctx, id)
	}
	c, err := o.regionClients(ctx, id)
	if err != nil {
		return nil, err
	}
	bs, err := c.blockStorage()
	if err != nil {
		return nil, nil
	}
	return gopherVolume{bs}, nil
}

// gopherVolume is VolumeClient on gophercloud.
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

func (g gopherVolume) CreateVolume(ctx context.Context, opts volumes.CreateOpts) (*volumes.Volume, error) {
	return volumes.Create(ctx, g.c, opts, nil).Extract()
}

func (g gopherVolume) DeleteVolume(ctx context.Context, id string) error {
	return volumes.Delete(ctx, g.c, id, volumes.DeleteOpts{Cascade: true}).ExtractErr()
}

// The gophercloud types the activities use, under stackflow's names: this file is the only one of the
// package that imports the service's gophercloud packages (TestServiceTypesBehindClients).
type (
	Volume           = volumes.Volume
	VolumeCreateOpts = volumes.CreateOpts
	VolumeListOpts   = volumes.ListOpts
)
