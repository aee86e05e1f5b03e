package lifecycle

import "go.temporal.io/sdk/temporal"

// Custom search attributes every stackflow workflow upserts (and the bridge sets at start), so a person
// can find runs in the Temporal UI or with `temporal workflow list --query 'StackflowKind="OpenstackNode"'`.
// All are Keyword attributes and never hold secret values. They are part of the bridge↔workflow contract:
// both sides, the worker's start-up check and the local stack's dev server take them from here.
var (
	// SAKind is the custom resource kind the workflow serves, e.g. OpenStackDataPlaneNode.
	SAKind = temporal.NewSearchAttributeKeyKeyword("StackflowKind")
	// SAObject is the object's namespace/name (name alone when cluster scoped).
	SAObject = temporal.NewSearchAttributeKeyKeyword("StackflowObject")
	// SAPhase is the workflow's current phase (e.g. Provisioning, Infrastructure, Services, Ready, Failed).
	SAPhase = temporal.NewSearchAttributeKeyKeyword("StackflowPhase")
	// SACell is the Nova cell a workflow concerns, when any.
	SACell = temporal.NewSearchAttributeKeyKeyword("StackflowCell")
	// SAComponent is the OpenStack component a rollout concerns, when any.
	SAComponent = temporal.NewSearchAttributeKeyKeyword("StackflowComponent")
	// SAHost is the data-plane host a workflow concerns, when any.
	SAHost = temporal.NewSearchAttributeKeyKeyword("StackflowHost")
)

// SearchAttributes lists the custom search attributes by name with their Temporal type name, as the
// server, the dev server's --search-attribute flag and the worker's start-up check expect them.
var SearchAttributes = map[string]string{
	SAKind.GetName():      "Keyword",
	SAObject.GetName():    "Keyword",
	SAPhase.GetName():     "Keyword",
	SACell.GetName():      "Keyword",
	SAComponent.GetName(): "Keyword",
	SAHost.GetName():      "Keyword",
}
