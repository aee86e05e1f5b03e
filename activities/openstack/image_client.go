package openstack

import (
	"context"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
)

// ImageClient is every call the activities make to Glance: the activities decide against it, unit tests
// give them a generated mock, and gopherImage is the one implementation. Errors are gophercloud's.
type ImageClient interface {
	GetImage(ctx context.Context, id string) (*images.Image, error)
	ListImages(ctx context.Context, opts images.ListOpts) ([]images.Image, error)
}

// imageFor is the Glance client of an identity (Glance needs no Nova: bare-metal provisioning asks a
// cloud with no compute API), or what a unit test set in o.image.
func (o *OpenStack) imageFor(ctx context.Context, id Identity) (ImageClient, error) {
	if o.image != nil {
		return o.image(ctx, id)
	}
	c, err := o.regionClients(ctx, id)
	if err != nil {
		return nil, err
	}
	return gopherImage{c.image}, nil
}

// ImageClientFor is the Glance client of an identity: the bare-metal activities find a node's image with
// it.
func (o *OpenStack) ImageClientFor(ctx context.Context, id Identity) (ImageClient, error) {
	return o.imageFor(ctx, id)
}

// gopherImage is ImageClient on gophercloud.
type gopherImage struct{ c *gophercloud.ServiceClient }

func (g gopherImage) GetImage(ctx context.Context, id string) (*images.Image, error) {
	return images.Get(ctx, g.c, id).Extract()
}

func (g gopherImage) ListImages(ctx context.Context, opts images.ListOpts) ([]images.Image, error) {
	pages, err := images.List(g.c, opts).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	return images.ExtractImages(pages)
}

// The gophercloud types the activities use, under stackflow's names: this file is the only one of the
// package that imports the service's gophercloud packages (TestServiceTypesBehindClients).
type (
	Image         = images.Image
	ImageListOpts = images.ListOpts
)
