package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/api/lifecycle"
)

// NodeConfiguration assigns one Kubernetes Node its type and profile.
type NodeConfiguration struct {
	// Name is the Kubernetes Node's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
	// Type is the node's role.
	// +optional
	// +kubebuilder:validation:Enum=control;compute
	Type string `json:"type,omitempty"`
	// Profile overrides the default profile for this node.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Profile string `json:"profile,omitempty"`
	// Disabled keeps OpenStack off the node.
	// +optional
	Disabled bool `json:"disabled,omitempty"`
}

// KupenstackConfigurationSpec is the cloud-wide configuration: the default profile and each node's
// assignment.
type KupenstackConfigurationSpec struct {
	// DefaultProfile names the OpenStackCloudConfigurationProfile of nodes without their own.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	DefaultProfile string `json:"defaultProfile"`
	// ReleaseNamespace is the namespace of the components' Helm releases (default openstack).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	ReleaseNamespace string `json:"releaseNamespace,omitempty"`
	// Nodes assigns nodes their type and profile, by Node name.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1000
	Nodes []NodeConfiguration `json:"nodes,omitempty"`
}

// ComponentStatus is the rollout state of one component's Helm release.
type ComponentStatus struct {
	// Name is the component (keystone, nova, ...).
	Name string `json:"name"`
	// Release is the Helm release's name.
	// +optional
	Release string `json:"release,omitempty"`
	// ChartVersion is the deployed chart version.
	// +optional
	ChartVersion string `json:"chartVersion,omitempty"`
	// Revision is the Helm release's revision.
	// +optional
	Revision int32 `json:"revision,omitempty"`
	// ValuesHash identifies the chart and rendered values of the deployed revision.
	// +optional
	ValuesHash string `json:"valuesHash,omitempty"`
	// State is Pending, Deploying, Deployed, Failed, Blocked (a dependency failed) or Disabled.
	// +optional
	State string `json:"state,omitempty"`
	// Message says what happened last, in words.
	// +optional
	Message string `json:"message,omitempty"`
}

// KupenstackConfigurationStatus is the rollout state of the whole control plane.
type KupenstackConfigurationStatus struct {
	lifecycle.CommonStatus `json:",inline"`
	// Components is the state of each component's release.
	// +optional
	// +listType=map
	// +listMapKey=name
	Components []ComponentStatus `json:"components,omitempty"`
}

// KupenstackConfiguration is the cloud-wide control-plane configuration.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=kscfg,categories=stackflow;kupenstack
// +kubebuilder:printcolumn:name="Default-Profile",type=string,JSONPath=`.spec.defaultProfile`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Step",type=string,JSONPath=`.status.currentStep`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type KupenstackConfiguration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   KupenstackConfigurationSpec   `json:"spec"`
	Status KupenstackConfigurationStatus `json:"status,omitempty"`
}

// KupenstackConfigurationList is a list of KupenstackConfiguration.
//
// +kubebuilder:object:root=true
type KupenstackConfigurationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KupenstackConfiguration `json:"items"`
}
