package api

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stackflow/stackflow/api/lifecycle"

	dataplanev1beta1 "github.com/stackflow/stackflow/api/dataplane/v1beta1"
	infrav1alpha1 "github.com/stackflow/stackflow/api/infrastructure/v1alpha1"
	infrav1beta1 "github.com/stackflow/stackflow/api/infrastructure/v1beta1"
	kupenstackv1alpha1 "github.com/stackflow/stackflow/api/kupenstack/v1alpha1"
	neutronv1beta1 "github.com/stackflow/stackflow/api/neutron/v1beta1"
	novav1beta1 "github.com/stackflow/stackflow/api/nova/v1beta1"
)

// Kind is one kind stackflow serves as the API server serves it: the one table the bridge (what it
// watches), the workflows and activities (how they name objects), the RBAC derivation and the tests read.
// Adding a kind: its Go types in its group's package, a line here, its workflow (workflows.Register).
type Kind struct {
	// GVK is the kind's group, version and kind.
	GVK schema.GroupVersionKind
	// Resource is the plural resource name.
	Resource string
	// ClusterScoped is true for kinds without a namespace.
	ClusterScoped bool
	// Workflow is the type of the workflow that serves each object of the kind, on
	// lifecycle.WorkflowQueue: the kind's own name.
	Workflow string
	// BuiltIn is true for Kubernetes' own kinds (Node): no CRD of this module.
	BuiltIn bool
}

// TaskQueue is the task queue the kind's workflows run on.
func (k Kind) TaskQueue() string { return lifecycle.WorkflowQueue }

// Ref names an object of the kind (cluster-scoped kinds ignore namespace).
func (k Kind) Ref(namespace, name string) lifecycle.ObjectRef {
	if k.ClusterScoped {
		namespace = ""
	}
	return lifecycle.ObjectRef{Group: k.GVK.Group, Version: k.GVK.Version, Kind: k.GVK.Kind, Resource: k.Resource, Namespace: namespace, Name: name}
}

// GVR is the kind's group, version and resource.
func (k Kind) GVR() schema.GroupVersionResource { return k.GVK.GroupVersion().WithResource(k.Resource) }

// CRDName is the name of the kind's CustomResourceDefinition (<resource>.<group>).
func (k Kind) CRDName() string { return k.Resource + "." + k.GVK.Group }

func kind(gv schema.GroupVersion, kind, resource string, clusterScoped bool) Kind {
	return Kind{GVK: gv.WithKind(kind), Resource: resource, ClusterScoped: clusterScoped, Workflow: kind}
}

// Kinds lists every kind defined in this module, one CRD each in deploy/crds.
var Kinds = []Kind{
	kind(dataplanev1beta1.SchemeGroupVersion, "OpenStackDataPlane", dataplanev1beta1.OpenStackDataPlaneResource, false),
	kind(dataplanev1beta1.SchemeGroupVersion, "OpenStackDataPlaneRole", dataplanev1beta1.OpenStackDataPlaneRoleResource, false),
	kind(dataplanev1beta1.SchemeGroupVersion, "OpenStackDataPlaneNode", dataplanev1beta1.OpenStackDataPlaneNodeResource, false),
	kind(dataplanev1beta1.SchemeGroupVersion, "OpenStackDataPlaneUpdate", dataplanev1beta1.OpenStackDataPlaneUpdateResource, false),
	kind(dataplanev1beta1.SchemeGroupVersion, "OpenStackDataPlaneDeployment", dataplanev1beta1.OpenStackDataPlaneDeploymentResource, false),

	kind(novav1beta1.SchemeGroupVersion, "Nova", novav1beta1.NovaResource, false),
	kind(novav1beta1.SchemeGroupVersion, "NovaCell", novav1beta1.NovaCellResource, false),
	kind(novav1beta1.SchemeGroupVersion, "NovaAPI", novav1beta1.NovaAPIResource, false),
	kind(novav1beta1.SchemeGroupVersion, "NovaScheduler", novav1beta1.NovaSchedulerResource, false),
	kind(novav1beta1.SchemeGroupVersion, "NovaConductor", novav1beta1.NovaConductorResource, false),
	kind(novav1beta1.SchemeGroupVersion, "NovaMetadata", novav1beta1.NovaMetadataResource, false),
	kind(novav1beta1.SchemeGroupVersion, "NovaNoVNCProxy", novav1beta1.NovaNoVNCProxyResource, false),
	kind(novav1beta1.SchemeGroupVersion, "NovaExternalCompute", novav1beta1.NovaExternalComputeResource, false),

	kind(neutronv1beta1.SchemeGroupVersion, "OVNMetadataAgent", neutronv1beta1.OVNMetadataAgentResource, false),

	kind(kupenstackv1alpha1.SchemeGroupVersion, "OpenstackNode", kupenstackv1alpha1.OpenstackNodeResource, true),
	kind(kupenstackv1alpha1.SchemeGroupVersion, "OpenStackCloudConfigurationProfile", kupenstackv1alpha1.OpenStackCloudConfigurationProfileResource, true),
	kind(kupenstackv1alpha1.SchemeGroupVersion, "KupenstackConfiguration", kupenstackv1alpha1.KupenstackConfigurationResource, true),

	kind(infrav1alpha1.SchemeGroupVersion, "OpenStackServer", infrav1alpha1.OpenStackServerResource, false),
	kind(infrav1beta1.SchemeGroupVersion, "OpenStackMachine", infrav1beta1.OpenStackMachineResource, false),
	kind(infrav1beta1.SchemeGroupVersion, "OpenStackCluster", infrav1beta1.OpenStackClusterResource, false),
}

// Node is Kubernetes' Node: every Node gets an OpenstackNode of its name (the control-plane family).
var Node = Kind{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Node"}, Resource: "nodes", ClusterScoped: true, Workflow: "Node", BuiltIn: true}

// Served is every kind stackflow runs a workflow for: Kubernetes' Node and every kind of this module.
var Served = append([]Kind{Node}, Kinds...)

// Lookup finds a served kind by its name.
func Lookup(kind string) (Kind, bool) {
	for _, k := range Served {
		if k.GVK.Kind == kind {
			return k, true
		}
	}
	return Kind{}, false
}

// Ref names an object of a served kind; kind must be one (a misspelt kind is a programming error).
func Ref(kind, namespace, name string) lifecycle.ObjectRef {
	k, ok := Lookup(kind)
	if !ok {
		panic(fmt.Sprintf("api.Ref: %s is no served kind", kind))
	}
	return k.Ref(namespace, name)
}

// schemeBuilder registers every group version of this module.
var schemeBuilder = runtime.NewSchemeBuilder(
	dataplanev1beta1.AddToScheme,
	novav1beta1.AddToScheme,
	neutronv1beta1.AddToScheme,
	kupenstackv1alpha1.AddToScheme,
	infrav1alpha1.AddToScheme,
	infrav1beta1.AddToScheme,
)

// AddToScheme adds every kind of this module to a scheme.
var AddToScheme = schemeBuilder.AddToScheme
