package baremetal

import (
	"context"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

// Client is every call the activities make to Ironic: the activities decide against it (the moves
// themselves are provisionStep's and deprovisionStep's), unit tests give them a generated mock
// (activities/baremetal/mock, make generate), and gopherClient is the one implementation, at
// openstack.BaremetalMicroversion. Errors are gophercloud's.
type Client interface {
	// GetNode reads a node by UUID or name.
	GetNode(ctx context.Context, id string) (*nodes.Node, error)
	CreateNode(ctx context.Context, opts nodes.CreateOpts) (*nodes.Node, error)
	UpdateNode(ctx context.Context, id string, opts nodes.UpdateOpts) error
	// ChangeProvisionState asks Ironic to move the node towards target.
	ChangeProvisionState(ctx context.Context, id string, target nodes.TargetProvisionState) error
	DeleteNode(ctx context.Context, id string) error
}

// gopherClient is Client on gophercloud.
type gopherClient struct{ c *gophercloud.ServiceClient }

func (g gopherClient) GetNode(ctx context.Context, id string) (*nodes.Node, error) {
	return nodes.Get(ctx, g.c, id).Extract()
}

func (g gopherClient) CreateNode(ctx context.Context, opts nodes.CreateOpts) (*nodes.Node, error) {
	return nodes.Create(ctx, g.c, opts).Extract()
}

func (g gopherClient) UpdateNode(ctx context.Context, id string, opts nodes.UpdateOpts) error {
	_, err := nodes.Update(ctx, g.c, id, opts).Extract()
	return err
}

func (g gopherClient) ChangeProvisionState(ctx context.Context, id string, target nodes.TargetProvisionState) error {
	return nodes.ChangeProvisionState(ctx, g.c, id, nodes.ProvisionStateOpts{Target: target}).ExtractErr()
}

func (g gopherClient) DeleteNode(ctx context.Context, id string) error {
	return nodes.Delete(ctx, g.c, id).ExtractErr()
}

// The gophercloud types the activities use, under stackflow's names: this file is the only one of the
// package that imports the service's gophercloud packages (TestServiceTypesBehindClients).
type (
	Node                 = nodes.Node
	NodeCreateOpts       = nodes.CreateOpts
	NodeUpdateOperation  = nodes.UpdateOperation
	NodeUpdateOpts       = nodes.UpdateOpts
	ProvisionState       = nodes.ProvisionState
	TargetProvisionState = nodes.TargetProvisionState
)

// Their constants, likewise.
const (
	AddOp            = nodes.AddOp
	StateActive      = nodes.Active
	StateAdoptFail   = nodes.AdoptFail
	StateAvailable   = nodes.Available
	StateCleanFail   = nodes.CleanFail
	StateDeployFail  = nodes.DeployFail
	StateEnroll      = nodes.Enroll
	StateError       = nodes.Error
	StateInspectFail = nodes.InspectFail
	StateManageable  = nodes.Manageable
	TargetActive     = nodes.TargetActive
	TargetDeleted    = nodes.TargetDeleted
	TargetManage     = nodes.TargetManage
	TargetProvide    = nodes.TargetProvide
)
