package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

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

// WaitIronicState waits until the Ironic node is in provision state want with no transition under way;
// a failed state (one ending in "failed") or the timeout fails the test.
func WaitIronicState(t testing.TB, c *gophercloud.ServiceClient, id, want string, timeout time.Duration) *nodes.Node {
	t.Helper()
	var last *nodes.Node
	WaitFor(t, "Ironic node "+id+" "+want, timeout, func() (bool, string) {
		last = IronicNode(t, c, id)
		if last == nil {
			return false, "not in Ironic"
		}
		if strings.HasSuffix(last.ProvisionState, "failed") {
			t.Fatalf("Ironic node %s is %s: %s", id, last.ProvisionState, last.LastError)
		}
		return last.ProvisionState == want && last.TargetProvisionState == "", last.ProvisionState + " → " + last.TargetProvisionState
	})
	return last
}

// EnrollAvailable enrolls a machine in Ironic as an administrator does before handing it out (create
// with driver fake-hardware and properties, manage, provide) and returns it once available. The test's
// cleanup deletes it (undeploying it first if it is still deployed), so a failed test leaves no machine.
func (e *Env) EnrollAvailable(t testing.TB, c *gophercloud.ServiceClient, name string, properties map[string]any) *nodes.Node {
	t.Helper()
	ctx := context.Background()
	n, err := nodes.Create(ctx, c, nodes.CreateOpts{Name: name, Driver: "fake-hardware", Properties: properties}).Extract()
	if err != nil {
		t.Fatalf("enroll Ironic node %s: %v", name, err)
	}
	t.Cleanup(func() {
		cur := IronicNode(t, c, n.UUID)
		if cur == nil {
			return
		}
		if cur.ProvisionState == "active" || cur.ProvisionState == "deploy failed" {
			_ = nodes.ChangeProvisionState(ctx, c, n.UUID, nodes.ProvisionStateOpts{Target: nodes.TargetDeleted}).ExtractErr()
			WaitIronicState(t, c, n.UUID, "available", 3*time.Minute)
		}
		if err := nodes.Delete(ctx, c, n.UUID).ExtractErr(); err != nil && !gophercloud.ResponseCodeIs(err, 404) {
			t.Errorf("delete Ironic node %s: %v", name, err)
		}
	})
	for _, step := range []struct {
		target nodes.TargetProvisionState
		state  string
	}{{nodes.TargetManage, "manageable"}, {nodes.TargetProvide, "available"}} {
		if err := nodes.ChangeProvisionState(ctx, c, n.UUID, nodes.ProvisionStateOpts{Target: step.target}).ExtractErr(); err != nil {
			t.Fatalf("Ironic node %s to %s: %v", name, step.target, err)
		}
		n = WaitIronicState(t, c, n.UUID, step.state, 3*time.Minute)
	}
	return n
}
