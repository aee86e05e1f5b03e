// Package workflows is stackflow's deterministic orchestration. The shared lifecycle of every object
// workflow is workflows/object; each family of work has its own package that plugs into it:
//
//	workflows/controlplane  Node, OpenstackNode, profiles, KupenstackConfiguration and the rollout of
//	                        each component
//	workflows/dataplane     EDPM nodes, roles, data planes and the phase-1 services on them
//	                        (NovaExternalCompute, OVNMetadataAgent)
//	workflows/servers       OpenStackServer, OpenStackMachine and the OpenStackCluster bastion
//	workflows/nova          the Nova control plane: Nova, NovaCell and the service CRs
//
// This package only lists them: All is what the worker registers, and Register registers it, on a worker
// and on the replayer of the replay test alike, so what is replayed is what runs.
package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/workflows/controlplane"
	"github.com/stackflow/stackflow/workflows/dataplane"
	"github.com/stackflow/stackflow/workflows/nova"
	"github.com/stackflow/stackflow/workflows/object"
	"github.com/stackflow/stackflow/workflows/servers"
)

// All lists every workflow stackflow runs, all on lifecycle.WorkflowQueue: each family's, by workflow type
// name (the Kind for object workflows).
func All() []object.Definition {
	var all []object.Definition
	for _, family := range [][]object.Definition{controlplane.Workflows(), dataplane.Workflows(), servers.Workflows(), nova.Workflows()} {
		all = append(all, family...)
	}
	return all
}

// Registry is what workflows are registered on: a worker (go.temporal.io/sdk/worker.Worker) or a
// workflow replayer (worker.WorkflowReplayer).
type Registry interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
}

// Register registers every workflow of All on r under its type name with its versioning behaviour, and
// returns how many it registered.
func Register(r Registry) int {
	defs := All()
	for _, d := range defs {
		r.RegisterWorkflowWithOptions(d.Fn, workflow.RegisterOptions{Name: d.Name, VersioningBehavior: d.Versioning})
	}
	return len(defs)
}
