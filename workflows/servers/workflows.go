// Package servers is the OpenStack servers family (CAPO's OpenStackServer design): one server-building
// logic (build.go) behind OpenStackServer and OpenStackMachine (server.go, created once) and the
// OpenStackCluster bastion (bastion.go, replaced on a spec change). Cleanup is driven by what the
// workflow recorded it created, never by re-reading the spec.
package servers

import (
	"github.com/stackflow/stackflow/activities"
	"github.com/stackflow/stackflow/workflows/object"
)

// Activities the family calls, named through nil receivers; the worker registers the real structs.
var (
	kube      *activities.Kube
	openstack *activities.OpenStack
)

// Workflows lists the family's workflows by type name.
func Workflows() []object.Definition {
	return []object.Definition{
		{Name: KindOpenStackServer, Fn: OpenStackServerWorkflow},
		{Name: KindOpenStackMachine, Fn: OpenStackMachineWorkflow},
		{Name: KindOpenStackCluster, Fn: OpenStackClusterWorkflow},
	}
}
