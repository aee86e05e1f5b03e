// Package dataplane is the EDPM data-plane family: external nodes become compute (or network, storage)
// hosts through phase -1 (Ironic), phase 0 (Ansible over SSH) and phase 1 (the services on the node,
// each its own CR and workflow), admitted by their data plane with bounded concurrency and a failure
// budget.
//
// One file per concern: node.go (what happens to one node), resolve.go (a node's effective
// configuration, pure), dataplane.go (admission of a data plane's nodes) and planner.go (its planner,
// pure), role.go, service.go (what every phase-1 service shares) with novacompute.go and ovn.go (the
// services), wait.go (visible, durable waits); update.go (a rolling minor update of a data plane's
// compute nodes: canary, gate, batches, drain, checkpoint and rollback) with update_plan.go (its batch
// planner and per-node state machine, pure).
package dataplane

import (
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/activities/ansible"
	"github.com/stackflow/stackflow/activities/baremetal"
	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/activities/openstack"
	"github.com/stackflow/stackflow/activities/signals"
	"github.com/stackflow/stackflow/workflows/object"
)

// Activities the family calls, named through nil receivers; the worker registers the real structs.
var (
	kubeActs    *kube.Kube
	ansibleActs *ansible.Ansible
	osActs      *openstack.OpenStack
	ironicActs  *baremetal.Ironic
	// signalActs runs on the workflow worker, as local activities.
	signalActs *signals.Sender
)

// Workflows lists the family's workflows by type name.
func Workflows() []object.Definition {
	// Every one auto-upgrades (see object.Definition): the chart replaces workers in place, so no build
	// outlives its pods to finish a pinned run.
	return []object.Definition{
		// Lives as long as the data plane and admits its nodes for months: it must move to new builds.
		{Name: "OpenStackDataPlane", Fn: OpenStackDataPlaneWorkflow, Versioning: workflow.VersioningBehaviorAutoUpgrade},
		// Lives as long as the role; idle between edits, so it upgrades at no cost.
		{Name: "OpenStackDataPlaneRole", Fn: OpenStackDataPlaneRoleWorkflow, Versioning: workflow.VersioningBehaviorAutoUpgrade},
		// Lives as long as the host (months) and may wait days for a Secret or its grant mid-phase.
		{Name: "OpenStackDataPlaneNode", Fn: OpenStackDataPlaneNodeWorkflow, Versioning: workflow.VersioningBehaviorAutoUpgrade},
		// Phase 1: one workflow per service CR a node derives, living as long as the node's service.
		{Name: "NovaExternalCompute", Fn: NovaExternalComputeWorkflow, Versioning: workflow.VersioningBehaviorAutoUpgrade},
		{Name: "OVNMetadataAgent", Fn: OVNMetadataAgentWorkflow, Versioning: workflow.VersioningBehaviorAutoUpgrade},
		// Day 2: a rolling update of a data plane's compute nodes; it may hold at its gate for days.
		{Name: "OpenStackDataPlaneUpdate", Fn: OpenStackDataPlaneUpdateWorkflow, Versioning: workflow.VersioningBehaviorAutoUpgrade},
		// Day 2: a limited run of some steps on some nodes; short, but it may hold paused.
		{Name: "OpenStackDataPlaneDeployment", Fn: OpenStackDataPlaneDeploymentWorkflow, Versioning: workflow.VersioningBehaviorAutoUpgrade},
	}
}
