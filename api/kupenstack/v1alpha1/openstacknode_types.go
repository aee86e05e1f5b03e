package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/api/lifecycle"
)

// Node types (roles) of an OpenStack node.
const (
	NodeTypeControl = "control"
	NodeTypeCompute = "compute"
)

// Values of an OpenstackNode's status.status.
const (
	NodeStatusReady    = "Ready"
	NodeStatusNotReady = "NotReady"
	NodeStatusMissing  = "NodeMissing"
	NodeStatusDisabled = "Disabled"
)

// OpenstackNodeSpec is what a person (or the KupenstackConfiguration) asks of one node. Every field is
// optional: an OpenstackNode is created empty for each Kubernetes Node.
type OpenstackNodeSpec struct {
	// Type is the node's role; unset, the roles follow the Node's OpenStack-Helm labels.
	// +optional
	// +kubebuilder:validation:Enum=control;compute
	Type string `json:"type,omitempty"`
	// Profile names the OpenStackCloudConfigurationProfile the node follows; the configuration's
	// default profile when unset.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Profile string `json:"profile,omitempty"`
	// Disabled keeps OpenStack off the node.
	// +optional
	Disabled bool `json:"disabled,omitempty"`
}

// OpenstackNodeStatus is the node's state and the configuration its profile generates for it.
type OpenstackNodeStatus struct {
	lifecycle.CommonStatus `json:",inline"`
	// Status is Ready, NotReady, NodeMissing or Disabled.
	// +optional
	Status string `json:"status,omitempty"`
	// Roles are the node's roles (control, compute).
	// +optional
	Roles []string `json:"roles,omitempty"`
	// RoleNames are the roles as kubectl shows them: plain, comma-separated ("control,compute").
	// +optional
	RoleNames string `json:"roleNames,omitempty"`
	// Profile is the profile in effect.
	// +optional
	Profile string `json:"profile,omitempty"`
	// DesiredNodeConfiguration is the configuration the profile generates for the node: per component,
	// the OpenStack-Helm values.
	// +optional
	// +kubebuilder:validation:Type=object
	DesiredNodeConfiguration *apiextensionsv1.JSON `json:"desiredNodeConfiguration,omitempty"`
}

// OpenstackNode is the OpenStack side of one Kubernetes Node (same name).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=osknode;osknodes,categories=stackflow;kupenstack
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.status`
// +kubebuilder:printcolumn:name="Roles",type=string,JSONPath=`.status.roleNames`
// +kubebuilder:printcolumn:name="Profile",type=string,JSONPath=`.status.profile`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,priority=1
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`,priority=1
type OpenstackNode struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec   OpenstackNodeSpec   `json:"spec,omitempty"`
	Status OpenstackNodeStatus `json:"status,omitempty"`
}

// OpenstackNodeList is a list of OpenstackNode.
//
// +kubebuilder:object:root=true
type OpenstackNodeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []OpenstackNode `json:"items"`
}
