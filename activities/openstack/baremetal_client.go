package openstack

import (
	"context"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

// BaremetalClient is every call the activities make to Ironic: the activities decide against it (the
// moves themselves are provisionStep's and deprovisionStep's), unit tests give them a generated mock, and
// gopherBaremetal is the one implementation, at BaremetalMicroversion. Errors are gophercloud's.
type BaremetalClient interface {
	// GetNode reads a node by UUID or name.
	GetNode(ctx context.Context, id string) (*nodes.Node, error)
	CreateNode(ctx context.Context, opts nodes.CreateOpts) (*nodes.Node, error)
	UpdateNode(ctx context.Context, id string, opts nodes.UpdateOpts) error
	// ChangeProvisionState asks Ironic to move the node towards target.
	ChangeProvisionState(ctx context.Context, id string, target nodes.TargetProvisionState) error
	DeleteNode(ctx context.Context, id string) error
}

// baremetalFor is the Ironic client of an identity (a permanent error when the cloud has none), or what
// a unit test set in o.baremetal.
func (o *OpenStack) baremetalFor(ctx context.Context, id Identity) (BaremetalClient, error) {
	if o.baremetal != nil {
		return o.baremetal(ctx, id)
	}
	c, err := o.clientsFor(ctx, id)
	if err != nil {
		return nil, err
	}
	bm, err := c.bareMetal()
	if err != nil {
		return nil, err
	}
	return gopherBaremetal{bm}, nil
}

// gopherBaremetal is BaremetalClient on gophercloud.
type gopherBaremetal struct{ c *gophercloud.ServiceClient }

func (g gopherBaremetal) GetNode(ctx context.Context, id string) (*nodes.Node, error) {
	return nodes.Get(ctx, g.c, id).Extract()
}

func (g gopherBaremetal) CreateNode(ctx context.Context, opts nodes.CreateOpts) (*nodes.Node, error) {
	return nodes.Create(ctx, g.c, opts).Extract()
}

func (g gopherBaremetal) UpdateNode(ctx context.Context, id string, opts nodes.UpdateOpts) error {
	_, err := nodes.Update(ctx, g.c, id, opts).Extract()
	return err
}

func (g gopherBaremetal) ChangeProvisionState(ctx context.Context, id string, target nodes.TargetProvisionState) error {
	return nodes.ChangeProvisionState(ctx, g.c, id, nodes.ProvisionStateOpts{Target: target}).ExtractErr()
}

func (g gopherBaremetal) DeleteNode(ctx context.Context, id string) error {
	return nodes.Delete(ctx, g.c, id).ExtractErr()
}
