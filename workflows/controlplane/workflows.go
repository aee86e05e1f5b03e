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
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/activities/helm"
	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/workflows/object"
)

// Activities the family calls, named through nil receivers; the worker registers the real structs.
var (
	kubeActs *kube.Kube
	helmActs *helm.Helm
)

// Workflows lists the family's workflows by type name.
func Workflows() []object.Definition {
	// Every one auto-upgrades (see object.Definition): the chart replaces workers in place, so no build
	// outlives its pods to finish a pinned run.
	return []object.Definition{
		// Lives as long as its Kubernetes Node: years; it must move to every new build.
		{Name: "Node", Fn: NodeWorkflow, Versioning: workflow.VersioningBehaviorAutoUpgrade},
		// Lives as long as its Node too, and follows its profile's refreshes on whatever build runs.
		{Name: "OpenstackNode", Fn: OpenstackNodeWorkflow, Versioning: workflow.VersioningBehaviorAutoUpgrade},
		// Lives as long as the profile; idle between edits, so it upgrades at no cost.
		{Name: "OpenStackCloudConfigurationProfile", Fn: ProfileWorkflow, Versioning: workflow.VersioningBehaviorAutoUpgrade},
		// Lives as long as the cloud's configuration and re-renders on the build that runs it.
		{Name: "KupenstackConfiguration", Fn: KupenstackConfigurationWorkflow, Versioning: workflow.VersioningBehaviorAutoUpgrade},
		// One child per component of a configuration's rollout: minutes, but a release that waits to
		// become ready can wait across an upgrade, and a pinned child would wait for a build that is gone.
		{Name: RolloutComponentWorkflowName, Fn: RolloutComponentWorkflow, Versioning: workflow.VersioningBehaviorAutoUpgrade},
	}
}
