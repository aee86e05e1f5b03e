// Package v1beta1 is the dataplane.openstack.org/v1beta1 API: EDPM data-plane nodes, the roles that
// template them and the data planes that deploy them.
//
// +kubebuilder:object:generate=true
// +groupName=dataplane.openstack.org
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of this package.
const GroupName = "dataplane.openstack.org"

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
	OpenStackDataPlaneResource           = "openstackdataplanes"
	OpenStackDataPlaneRoleResource       = "openstackdataplaneroles"
	OpenStackDataPlaneNodeResource       = "openstackdataplanenodes"
	OpenStackDataPlaneUpdateResource     = "openstackdataplaneupdates"
	OpenStackDataPlaneDeploymentResource = "openstackdataplanedeployments"
)

// Resource qualifies a resource name with this package's group.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&OpenStackDataPlane{}, &OpenStackDataPlaneList{},
		&OpenStackDataPlaneRole{}, &OpenStackDataPlaneRoleList{},
		&OpenStackDataPlaneNode{}, &OpenStackDataPlaneNodeList{},
		&OpenStackDataPlaneUpdate{}, &OpenStackDataPlaneUpdateList{},
		&OpenStackDataPlaneDeployment{}, &OpenStackDataPlaneDeploymentList{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
