package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/api/lifecycle"
)

// OpenStackDataPlaneNodeSpec is one EDPM host. Its node section overrides its role's nodeTemplate; a
// nova.openstack.org/cell annotation on it overrides the role's.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.preProvisioned) && self.preProvisioned && has(self.bareMetal))",message="bareMetal must not be set when preProvisioned is true",fieldPath=".bareMetal"
type OpenStackDataPlaneNodeSpec struct {
	// Role names the OpenStackDataPlaneRole (same namespace) the node belongs to.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Role string `json:"role"`
	// HostName is the host's name (RFC 1123), as the compute service and Ansible's inventory know it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	HostName string `json:"hostName"`
	// AnsibleHost is the address (IP or DNS name) Ansible connects to; HostName when unset.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`isIP(self) || self.matches(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')`,message="ansibleHost must be an IP address or a DNS name"
	AnsibleHost string `json:"ansibleHost,omitempty"`
	// Node overrides the role's nodeTemplate field by field.
	// +optional
	Node NodeSection `json:"node,omitempty"`
	// PreProvisioned overrides the role's preProvisioned.
	// +optional
	PreProvisioned *bool `json:"preProvisioned,omitempty"`
	// BareMetal provisions the host through Ironic (phase -1).
	// +optional
	BareMetal *NodeBareMetal `json:"bareMetal,omitempty"`
	// Deploy starts (true) or holds (false) the node's deployment.
	// +optional
	// +kubebuilder:default=true
	Deploy bool `json:"deploy"`
}

// OpenStackDataPlaneNodeStatus is the node's progress through its phases.
type OpenStackDataPlaneNodeStatus struct {
	lifecycle.CommonStatus `json:",inline"`
	// Phases is the state of each deployment phase (-1, 0, 1).
	// +optional
	// +listType=map
	// +listMapKey=phase
	Phases []PhaseStatus `json:"phases,omitempty"`
	// Cell is the Nova cell the node's compute service joined (from the annotation).
	// +optional
	Cell string `json:"cell,omitempty"`
	// IronicNodeUUID is the Ironic node provisioned for the host.
	// +optional
	IronicNodeUUID string `json:"ironicNodeUUID,omitempty"`
	// ProvisionState is the Ironic node's provision state.
	// +optional
	ProvisionState string `json:"provisionState,omitempty"`
	// Deployed is true once every phase succeeded for the observed generation.
	// +optional
	Deployed bool `json:"deployed,omitempty"`
}

// OpenStackDataPlaneNode is one EDPM data-plane host.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=osdpnode,categories=stackflow;openstack
// +kubebuilder:printcolumn:name="Host",type=string,JSONPath=`.spec.hostName`
// +kubebuilder:printcolumn:name="Role",type=string,JSONPath=`.spec.role`
// +kubebuilder:printcolumn:name="Cell",type=string,JSONPath=`.status.cell`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Step",type=string,JSONPath=`.status.currentStep`,priority=1
// +kubebuilder:printcolumn:name="Ansible-Host",type=string,JSONPath=`.spec.ansibleHost`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type OpenStackDataPlaneNode struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   OpenStackDataPlaneNodeSpec   `json:"spec"`
	Status OpenStackDataPlaneNodeStatus `json:"status,omitempty"`
}

// OpenStackDataPlaneNodeList is a list of OpenStackDataPlaneNode.
//
// +kubebuilder:object:root=true
type OpenStackDataPlaneNodeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []OpenStackDataPlaneNode `json:"items"`
}
