// Package controlplane is the control-plane family (KupenStack style): every Kubernetes Node gets an
// OpenstackNode, profiles render into OpenStack-Helm values, and a KupenstackConfiguration rolls each
// OpenStack component out as its own Helm release, in dependency order and in parallel where the graph
// allows.
//
// One file per concern: node.go (Node and OpenstackNode), profile.go (the profile workflow),
// render.go (profiles merged and rendered, pure), configuration.go (the KupenstackConfiguration
// workflow and its preview), graph.go and plan.go (the component graph and the rollout planner, pure),
// rollout.go (one component's rollout and the execution of a plan).
package controlplane

import (
	"github.com/stackflow/stackflow/activities"
	"github.com/stackflow/stackflow/workflows/object"
)

// Activities the family calls, named through nil receivers; the worker registers the real structs.
var (
	kube *activities.Kube
	helm *activities.Helm
)

// Workflows lists the family's workflows by type name.
func Workflows() []object.Definition {
	return []object.Definition{
		{Name: "Node", Fn: NodeWorkflow},
		{Name: "OpenstackNode", Fn: OpenstackNodeWorkflow},
		{Name: "OpenStackCloudConfigurationProfile", Fn: ProfileWorkflow},
		{Name: "KupenstackConfiguration", Fn: KupenstackConfigurationWorkflow},
		// One child per component of a configuration's rollout.
		{Name: RolloutComponentWorkflowName, Fn: RolloutComponentWorkflow},
	}
}
