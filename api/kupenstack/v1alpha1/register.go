// Package v1alpha1 is the kupenstack.io/v1alpha1 API: the OpenStack control plane rolled out per
// Kubernetes Node from cloud configuration profiles, one Helm release per component.
//
// +kubebuilder:object:generate=true
// +groupName=kupenstack.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of this package.
const GroupName = "kupenstack.io"

var (
	// SchemeGroupVersion is the group and version of every kind in this package.
	SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}
	// SchemeBuilder registers the kinds of this package.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Resource names of the kinds, as the API server serves them.
const (
	OpenstackNodeResource                      = "openstacknodes"
	OpenStackCloudConfigurationProfileResource = "openstackcloudconfigurationprofiles"
	KupenstackConfigurationResource            = "kupenstackconfigurations"
)

// Resource qualifies a resource name with this package's group.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&OpenstackNode{}, &OpenstackNodeList{},
		&OpenStackCloudConfigurationProfile{}, &OpenStackCloudConfigurationProfileList{},
		&KupenstackConfiguration{}, &KupenstackConfigurationList{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
