package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/api/lifecycle"
)

// OpenStackMachineSpec describes one OpenStack server. It is also the bastion's spec in an
// OpenStackCluster. Flavor or flavorID: exactly one.
//
// +kubebuilder:validation:XValidation:rule="has(self.flavor) != has(self.flavorID)",message="exactly one of flavor or flavorID must be set"
type OpenStackMachineSpec struct {
	// ProviderID is openstack:///<server UUID>, set once the server exists.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^openstack://[^/]*/[0-9a-fA-F-]{36}$`
	ProviderID *string `json:"providerID,omitempty"`
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
	Image ImageParam `json:"image"`
	// SSHKeyName is the Nova keypair injected into the server.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	SSHKeyName string `json:"sshKeyName,omitempty"`
	// Ports are the server's ports; one port on the cluster's network when empty.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Ports []PortOpts `json:"ports,omitempty"`
	// SecurityGroups apply to every port without its own.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	SecurityGroups []SecurityGroupParam `json:"securityGroups,omitempty"`
	// Trunk creates a trunk on every port without its own setting.
	// +optional
	Trunk bool `json:"trunk,omitempty"`
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
	ServerMetadata []ServerMetadata `json:"serverMetadata,omitempty"`
	// ConfigDrive attaches a config drive.
	// +optional
	ConfigDrive *bool `json:"configDrive,omitempty"`
	// RootVolume boots from a new volume instead of the hypervisor's disk.
	// +optional
	RootVolume *RootVolume `json:"rootVolume,omitempty"`
	// AdditionalBlockDevices are disks besides the root disk.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	AdditionalBlockDevices []AdditionalBlockDevice `json:"additionalBlockDevices,omitempty"`
	// ServerGroup is the server group the server joins.
	// +optional
	ServerGroup *ServerGroupParam `json:"serverGroup,omitempty"`
	// IdentityRef names the credentials; the cluster's when unset.
	// +optional
	IdentityRef *OpenStackIdentityReference `json:"identityRef,omitempty"`
}

// OpenStackMachineStatus is the state of the machine's server.
type OpenStackMachineStatus struct {
	lifecycle.CommonStatus `json:",inline"`
	// Ready is true once the server is ACTIVE with its addresses.
	// +optional
	Ready bool `json:"ready,omitempty"`
	// InstanceID is the server's UUID.
	// +optional
	InstanceID *string `json:"instanceID,omitempty"`
	// InstanceState is the server's state.
	// +optional
	InstanceState *InstanceState `json:"instanceState,omitempty"`
	// Addresses are the server's addresses.
	// +optional
	// +listType=atomic
	Addresses []corev1.NodeAddress `json:"addresses,omitempty"`
	// Resources is what the workflow created for the server.
	// +optional
	Resources *ServerResources `json:"resources,omitempty"`
}

// OpenStackMachine is an OpenStack server created once from its spec: the spec cannot change (only
// providerID may be set, once); replace the machine to change it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=osm,categories=stackflow;cluster-api
// +kubebuilder:printcolumn:name="Instance-ID",type=string,JSONPath=`.status.instanceID`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.instanceState`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Provider-ID",type=string,JSONPath=`.spec.providerID`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type OpenStackMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is immutable: every field but providerID must stay as created; providerID may be set once.
	// +kubebuilder:validation:XValidation:rule="!has(oldSelf.providerID) || (has(self.providerID) && self.providerID == oldSelf.providerID)",message="spec.providerID is immutable once set"
	// +kubebuilder:validation:XValidation:rule="self.image == oldSelf.image && (has(self.flavor) ? has(oldSelf.flavor) && self.flavor == oldSelf.flavor : !has(oldSelf.flavor)) && (has(self.flavorID) ? has(oldSelf.flavorID) && self.flavorID == oldSelf.flavorID : !has(oldSelf.flavorID)) && (has(self.sshKeyName) ? has(oldSelf.sshKeyName) && self.sshKeyName == oldSelf.sshKeyName : !has(oldSelf.sshKeyName)) && (has(self.ports) ? has(oldSelf.ports) && self.ports == oldSelf.ports : !has(oldSelf.ports)) && (has(self.securityGroups) ? has(oldSelf.securityGroups) && self.securityGroups == oldSelf.securityGroups : !has(oldSelf.securityGroups)) && (has(self.trunk) ? has(oldSelf.trunk) && self.trunk == oldSelf.trunk : !has(oldSelf.trunk)) && (has(self.tags) ? has(oldSelf.tags) && self.tags == oldSelf.tags : !has(oldSelf.tags)) && (has(self.serverMetadata) ? has(oldSelf.serverMetadata) && self.serverMetadata == oldSelf.serverMetadata : !has(oldSelf.serverMetadata)) && (has(self.configDrive) ? has(oldSelf.configDrive) && self.configDrive == oldSelf.configDrive : !has(oldSelf.configDrive)) && (has(self.rootVolume) ? has(oldSelf.rootVolume) && self.rootVolume == oldSelf.rootVolume : !has(oldSelf.rootVolume)) && (has(self.additionalBlockDevices) ? has(oldSelf.additionalBlockDevices) && self.additionalBlockDevices == oldSelf.additionalBlockDevices : !has(oldSelf.additionalBlockDevices)) && (has(self.serverGroup) ? has(oldSelf.serverGroup) && self.serverGroup == oldSelf.serverGroup : !has(oldSelf.serverGroup)) && (has(self.identityRef) ? has(oldSelf.identityRef) && self.identityRef == oldSelf.identityRef : !has(oldSelf.identityRef))",message="OpenStackMachine spec is immutable: only providerID may be set, once; replace the machine to change anything else"
	Spec   OpenStackMachineSpec   `json:"spec"`
	Status OpenStackMachineStatus `json:"status,omitempty"`
}

// OpenStackMachineList is a list of OpenStackMachine.
//
// +kubebuilder:object:root=true
type OpenStackMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []OpenStackMachine `json:"items"`
}
