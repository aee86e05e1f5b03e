package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/api/infrastructure/v1beta1"
	"github.com/stackflow/stackflow/api/lifecycle"
)

// OpenStackServerSpec describes one OpenStack server and what it needs (ports, volumes). Flavor or
// flavorID: exactly one.
//
// +kubebuilder:validation:XValidation:rule="has(self.flavor) != has(self.flavorID)",message="exactly one of flavor or flavorID must be set"
type OpenStackServerSpec struct {
	// Flavor is the flavor's name.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Flavor *string `json:"flavor,omitempty"`
	// FlavorID is the flavor's ID.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	FlavorID *string `json:"flavorID,omitempty"`
	// Image is the image the server boots from.
	Image v1beta1.ImageParam `json:"image"`
	// Ports are the server's ports, created before the server in this order.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Ports []v1beta1.PortOpts `json:"ports"`
	// SecurityGroups apply to every port without its own.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	SecurityGroups []v1beta1.SecurityGroupParam `json:"securityGroups,omitempty"`
	// Trunk creates a trunk on every port without its own setting.
	// +optional
	Trunk *bool `json:"trunk,omitempty"`
	// RootVolume boots from a new volume instead of the hypervisor's disk.
	// +optional
	RootVolume *v1beta1.RootVolume `json:"rootVolume,omitempty"`
	// AdditionalBlockDevices are disks besides the root disk.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	AdditionalBlockDevices []v1beta1.AdditionalBlockDevice `json:"additionalBlockDevices,omitempty"`
	// ServerGroup is the server group the server joins.
	// +optional
	ServerGroup *v1beta1.ServerGroupParam `json:"serverGroup,omitempty"`
	// SSHKeyName is the Nova keypair injected into the server.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	SSHKeyName string `json:"sshKeyName,omitempty"`
	// Tags are set on the server and every resource created for it.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:items:MaxLength=255
	Tags []string `json:"tags,omitempty"`
	// ServerMetadata is the server's metadata.
	// +optional
	// +listType=map
	// +listMapKey=key
	// +kubebuilder:validation:MaxItems=128
	ServerMetadata []v1beta1.ServerMetadata `json:"serverMetadata,omitempty"`
	// ConfigDrive attaches a config drive.
	// +optional
	ConfigDrive *bool `json:"configDrive,omitempty"`
	// AvailabilityZone is the server's availability zone.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	AvailabilityZone *string `json:"availabilityZone,omitempty"`
	// UserDataRef names the Secret (same namespace) whose key "value" is the server's user data.
	// +optional
	UserDataRef *corev1.LocalObjectReference `json:"userDataRef,omitempty"`
	// IdentityRef names the credentials.
	IdentityRef v1beta1.OpenStackIdentityReference `json:"identityRef"`
}

// OpenStackServerStatus is the state of the server and what was created for it.
type OpenStackServerStatus struct {
	lifecycle.CommonStatus `json:",inline"`
	// Ready is true once the server is ACTIVE with its addresses.
	// +optional
	Ready bool `json:"ready"`
	// InstanceID is the server's UUID.
	// +optional
	InstanceID *string `json:"instanceID,omitempty"`
	// InstanceState is the server's state.
	// +optional
	InstanceState *v1beta1.InstanceState `json:"instanceState,omitempty"`
	// Addresses are the server's addresses.
	// +optional
	// +listType=atomic
	Addresses []corev1.NodeAddress `json:"addresses,omitempty"`
	// Resources is what the workflow created for the server.
	// +optional
	Resources *v1beta1.ServerResources `json:"resources,omitempty"`
}

// OpenStackServer is one OpenStack server, created once: its spec cannot change.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=oss,categories=stackflow;cluster-api
// +kubebuilder:printcolumn:name="Instance-ID",type=string,JSONPath=`.status.instanceID`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.instanceState`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type OpenStackServer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="OpenStackServer spec is immutable: replace the server to change it"
	Spec   OpenStackServerSpec   `json:"spec"`
	Status OpenStackServerStatus `json:"status,omitempty"`
}

// OpenStackServerList is a list of OpenStackServer.
//
// +kubebuilder:object:root=true
type OpenStackServerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []OpenStackServer `json:"items"`
}
