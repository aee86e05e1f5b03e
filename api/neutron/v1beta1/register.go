// Package v1beta1 is the neutron.openstack.org/v1beta1 API: Neutron agents on EDPM data-plane nodes.
//
// +kubebuilder:object:generate=true
// +groupName=neutron.openstack.org
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of this package.
const GroupName = "neutron.openstack.org"

var (
	// SchemeGroupVersion is the group and version of every kind in this package.
	SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1beta1"}
	// SchemeBuilder registers the kinds of this package.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// OVNMetadataAgentResource is the resource name of OVNMetadataAgent.
const OVNMetadataAgentResource = "ovnmetadataagents"

// Resource qualifies a resource name with this package's group.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &OVNMetadataAgent{}, &OVNMetadataAgentList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
