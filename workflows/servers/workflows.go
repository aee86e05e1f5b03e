// Package servers is the OpenStack servers family (CAPO's OpenStackServer design): one server-building
// logic (build.go) behind OpenStackServer and OpenStackMachine (server.go, created once) and the
// OpenStackCluster bastion (bastion.go, replaced on a spec change). Cleanup is driven by what the
// workflow recorded it created, never by re-reading the spec.
package servers

import (
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/activities/openstack"
	"github.com/stackflow/stackflow/workflows/object"
)

// Activities the family calls, named through nil receivers; the worker registers the real structs.
var (
	kubeActs *kube.Kube
	osActs   *openstack.OpenStack
)

// Workflows lists the family's workflows by type name.
func Workflows() []object.Definition {
	// Every one auto-upgrades (see object.Definition): the chart replaces workers in place, so no build
	// outlives its pods to finish a pinned run.
	return []object.Definition{
		// Lives as long as the server, whose teardown (what it recorded) may come years later.
		{Name: KindOpenStackServer, Fn: OpenStackServerWorkflow, Versioning: workflow.VersioningBehaviorAutoUpgrade},
		// Immutable, but lives as long as the machine for its teardown, like a server.
		{Name: KindOpenStackMachine, Fn: OpenStackMachineWorkflow, Versioning: workflow.VersioningBehaviorAutoUpgrade},
		// Lives as long as the cluster and replaces its bastion on spec changes on whatever build runs.
		{Name: KindOpenStackCluster, Fn: OpenStackClusterWorkflow, Versioning: workflow.VersioningBehaviorAutoUpgrade},
	}
}
