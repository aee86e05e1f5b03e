package workflows

// Definition is one workflow the worker registers; Name is its workflow type, which for object workflows is
// the Kind it serves (the bridge starts "OpenstackNode" for an OpenstackNode).
type Definition struct {
	Name string
	Fn   any
}

// All lists every workflow stackflow runs, all on lifecycle.WorkflowQueue.
func All() []Definition {
	return []Definition{
		{Name: "Node", Fn: NodeWorkflow},
		{Name: "OpenstackNode", Fn: OpenstackNodeWorkflow},
		// OpenStack servers and bastions: one server-creation logic (server_build.go) behind three kinds.
		{Name: KindOpenStackServer, Fn: OpenStackServerWorkflow},
		{Name: KindOpenStackMachine, Fn: OpenStackMachineWorkflow},
		{Name: KindOpenStackCluster, Fn: OpenStackClusterWorkflow},
		// Control-plane rollouts: profiles, the cluster configuration and one child per component.
		{Name: "OpenStackCloudConfigurationProfile", Fn: ProfileWorkflow},
		{Name: "KupenstackConfiguration", Fn: KupenstackConfigurationWorkflow},
		{Name: RolloutComponentWorkflowName, Fn: RolloutComponentWorkflow},
		// EDPM data plane: per-node pipelines admitted by their data plane; phase 1 by the service CRs.
		{Name: "OpenStackDataPlane", Fn: OpenStackDataPlaneWorkflow},
		{Name: "OpenStackDataPlaneRole", Fn: OpenStackDataPlaneRoleWorkflow},
		{Name: "OpenStackDataPlaneNode", Fn: OpenStackDataPlaneNodeWorkflow},
		{Name: "NovaExternalCompute", Fn: NovaExternalComputeWorkflow},
		{Name: "OVNMetadataAgent", Fn: OVNMetadataAgentWorkflow},
	}
}
