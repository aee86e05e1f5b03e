package e2e

import (
	"context"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

// BaremetalClient is an Ironic client of the local cloud's admin, at the microversion stackflow's
// activities use (1.78).
func (e *Env) BaremetalClient(t testing.TB) *gophercloud.ServiceClient {
	t.Helper()
	provider, eo := e.CloudProvider(t)
	c, err := openstack.NewBareMetalV1(provider, eo)
	if err != nil {
		t.Fatal(err)
	}
	c.Microversion = "1.78"
	return c
}

// IronicNode reads an Ironic node by UUID or name; nil when Ironic has none (404). Any other error fails
// the test.
func IronicNode(t testing.TB, c *gophercloud.ServiceClient, id string) *nodes.Node {
	t.Helper()
	n, err := nodes.Get(context.Background(), c, id).Extract()
	if gophercloud.ResponseCodeIs(err, 404) {
		return nil
	}
	if err != nil {
		t.Fatalf("Ironic node %s: %v", id, err)
	}
	return n
}
