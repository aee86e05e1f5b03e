package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/api/lifecycle"
)

// Bastion is the cluster's SSH jump host. Unlike a machine it is mutable: a change of its spec replaces
// the server (its floating IP is kept).
//
// +kubebuilder:validation:XValidation:rule="!self.?enabled.orValue(true) || has(self.spec)",message="bastion.spec is required when the bastion is enabled",fieldPath=".spec"
type Bastion struct {
	// Enabled runs the bastion; true when unset. Setting false deletes the server.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// Spec is the bastion's server.
	// +optional
	Spec *OpenStackMachineSpec `json:"spec,omitempty"`
	// AvailabilityZone is the bastion's availability zone.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	AvailabilityZone *string `json:"availabilityZone,omitempty"`
	// FloatingIP pins the bastion's floating IP address (from the external network).
	// +optional
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="floatingIP must be an IP address"
	FloatingIP *string `json:"floatingIP,omitempty"`
}

// ManagedSecurityGroups asks for the cluster's security groups to be created.
type ManagedSecurityGroups struct {
	// AllowAllInClusterTraffic opens all traffic between the cluster's servers.
	// +optional
	// +kubebuilder:default=false
	AllowAllInClusterTraffic bool `json:"allowAllInClusterTraffic"`
}

// OpenStackClusterSpec is the OpenStack side of a cluster: credentials, external network, security
// groups and bastion.
type OpenStackClusterSpec struct {
	// IdentityRef names the credentials.
	IdentityRef OpenStackIdentityReference `json:"identityRef"`
	// Network is the network the cluster's servers (and the bastion) attach to when their ports name
	// none.
	// +optional
	Network *NetworkParam `json:"network,omitempty"`
	// ExternalNetwork is where floating IPs come from; the only external network when unset.
	// +optional
	ExternalNetwork *NetworkParam `json:"externalNetwork,omitempty"`
	// DisableExternalNetwork runs the cluster without floating IPs.
	// +optional
	DisableExternalNetwork *bool `json:"disableExternalNetwork,omitempty"`
	// ManagedSecurityGroups creates the cluster's security groups.
	// +optional
	ManagedSecurityGroups *ManagedSecurityGroups `json:"managedSecurityGroups,omitempty"`
	// Bastion is the cluster's SSH jump host.
	// +optional
	Bastion *Bastion `json:"bastion,omitempty"`
	// Tags are set on every resource created for the cluster.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=50
	Tags []string `json:"tags,omitempty"`
}

// BastionStatus is the state of the bastion's server.
type BastionStatus struct {
	// ID is the server's UUID.
	// +optional
	ID string `json:"id,omitempty"`
	// Name is the server's name.
	// +optional
	Name string `json:"name,omitempty"`
	// SSHKeyName is the keypair the server was created with.
	// +optional
	SSHKeyName string `json:"sshKeyName,omitempty"`
	// State is the server's state.
	// +optional
	State InstanceState `json:"state,omitempty"`
	// IP is the server's fixed address.
	// +optional
	IP string `json:"ip,omitempty"`
	// FloatingIP is the server's floating address.
	// +optional
	FloatingIP string `json:"floatingIP,omitempty"`
	// SpecHash is the hash of the bastion spec the server was created from; a different hash replaces it.
	// +optional
	SpecHash string `json:"specHash,omitempty"`
	// Resources is what the workflow created for the bastion.
	// +optional
	Resources *ServerResources `json:"resources,omitempty"`
}

// NetworkStatus names a network the cluster uses.
type NetworkStatus struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

// OpenStackClusterStatus is the state of the cluster's OpenStack resources.
type OpenStackClusterStatus struct {
	lifecycle.CommonStatus `json:",inline"`
	// Ready is true once the cluster's resources (and bastion, when enabled) exist.
	// +optional
	Ready bool `json:"ready,omitempty"`
	// ExternalNetwork is the external network in use.
	// +optional
	ExternalNetwork *NetworkStatus `json:"externalNetwork,omitempty"`
	// Bastion is the bastion's state.
	// +optional
	Bastion *BastionStatus `json:"bastion,omitempty"`
}

// OpenStackCluster is the OpenStack side of a cluster, with its bastion.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=osc,categories=stackflow;cluster-api
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Bastion-IP",type=string,JSONPath=`.status.bastion.floatingIP`
// +kubebuilder:printcolumn:name="Bastion-State",type=string,JSONPath=`.status.bastion.state`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type OpenStackCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   OpenStackClusterSpec   `json:"spec"`
	Status OpenStackClusterStatus `json:"status,omitempty"`
}

// OpenStackClusterList is a list of OpenStackCluster.
//
// +kubebuilder:object:root=true
type OpenStackClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []OpenStackCluster `json:"items"`
}
