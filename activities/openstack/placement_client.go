package openstack

import (
	"context"
	"sort"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/placement/v1/resourceproviders"
)

// PlacementClient is every call the activities make to Placement: the activities decide against it,
// unit tests give them a generated mock, and gopherPlacement is the one implementation. Errors are
// gophercloud's.
type PlacementClient interface {
	// Providers are the UUIDs of the resource providers named name.
	Providers(ctx context.Context, name string) ([]string, error)
	// ResourceClasses are the resource classes of the provider's inventory.
	ResourceClasses(ctx context.Context, provider string) ([]string, error)
	// Consumers are the consumers holding allocations against the provider, sorted.
	Consumers(ctx context.Context, provider string) ([]string, error)
	DeleteProvider(ctx context.Context, provider string) error
	// DeleteAllocations deletes every allocation of the consumer.
	DeleteAllocations(ctx context.Context, consumer string) error
}

// placementFor is the Placement client of an identity, or what a unit test set in o.placement. It is
// found in a region with no compute API too (regionClients): nova-compute registers its resource
// provider without the API, and what it left is removed without Nova.
func (o *OpenStack) placementFor(ctx context.Context, id Identity) (PlacementClient, error) {
	if o.placement != nil {
		return o.placement(ctx, id)
	}
	c, err := o.regionClients(ctx, id)
	if err != nil {
		return nil, err
	}
	pl, err := c.placementAPI()
	if err != nil {
		return nil, err
	}
	return gopherPlacement{pl}, nil
}

// gopherPlacement is PlacementClient on gophercloud.
type gopherPlacement struct{ pl *gophercloud.ServiceClient }

func (g gopherPlacement) Providers(ctx context.Context, name string) ([]string, error) {
	pages, err := resourceproviders.List(g.pl, resourceproviders.ListOpts{Name: name}).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	rps, err := resourceproviders.ExtractResourceProviders(pages)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(rps))
	for _, rp := range rps {
		out = append(out, rp.UUID)
	}
	return out, nil
}

func (g gopherPlacement) ResourceClasses(ctx context.Context, provider string) ([]string, error) {
	inv, err := resourceproviders.GetInventories(ctx, g.pl, provider).Extract()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(inv.Inventories))
	for rc := range inv.Inventories {
		out = append(out, rc)
	}
	sort.Strings(out)
	return out, nil
}

func (g gopherPlacement) Consumers(ctx context.Context, provider string) ([]string, error) {
	a, err := resourceproviders.GetAllocations(ctx, g.pl, provider).Extract()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(a.Allocations))
	for c := range a.Allocations {
		out = append(out, c)
	}
	sort.Strings(out)
	return out, nil
}

func (g gopherPlacement) DeleteProvider(ctx context.Context, provider string) error {
	return resourceproviders.Delete(ctx, g.pl, provider).ExtractErr()
}

func (g gopherPlacement) DeleteAllocations(ctx context.Context, consumer string) error {
	resp, err := g.pl.Delete(ctx, g.pl.ServiceURL("allocations", consumer), &gophercloud.RequestOpts{OkCodes: []int{204}})
	_, _, err = gophercloud.ParseResponse(resp, err)
	return err
}
