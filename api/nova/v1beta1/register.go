// Package v1beta1 is the nova.openstack.org/v1beta1 API: the Nova control plane with cells v2, every
// Nova service on its own, and the compute service on EDPM data-plane nodes.
//
// +kubebuilder:object:generate=true
// +groupName=nova.openstack.org
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of this package.
const GroupName = "nova.openstack.org"

var (
	// SchemeGroupVersion is the group and version of every kind in this package.
	SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1beta1"}
	// SchemeBuilder registers the kinds of this package.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Resource names of the kinds, as the API server serves them.
const (
	NovaResource                = "novas"
	NovaCellResource            = "novacells"
	NovaAPIResource             = "novaapis"
	NovaSchedulerResource       = "novaschedulers"
	NovaConductorResource       = "novaconductors"
	NovaMetadataResource        = "novametadata"
	NovaNoVNCProxyResource      = "novanovncproxies"
	NovaExternalComputeResource = "novaexternalcomputes"
)

// Resource qualifies a resource name with this package's group.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&Nova{}, &NovaList{},
		&NovaCell{}, &NovaCellList{},
		&NovaAPI{}, &NovaAPIList{},
		&NovaScheduler{}, &NovaSchedulerList{},
		&NovaConductor{}, &NovaConductorList{},
		&NovaMetadata{}, &NovaMetadataList{},
		&NovaNoVNCProxy{}, &NovaNoVNCProxyList{},
		&NovaExternalCompute{}, &NovaExternalComputeList{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
