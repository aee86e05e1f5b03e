package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/api/lifecycle"
)

// OpenStackDataPlaneRoleSpec is the template shared by a group of data-plane nodes. A
// nova.openstack.org/cell annotation on the role makes its nodes computes of that cell.
//
// +kubebuilder:validation:XValidation:rule="!(self.preProvisioned && has(self.baremetalSetTemplate))",message="baremetalSetTemplate must not be set when preProvisioned is true",fieldPath=".baremetalSetTemplate"
type OpenStackDataPlaneRoleSpec struct {
	// DataPlane names the OpenStackDataPlane (same namespace) the role belongs to.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	DataPlane string `json:"dataPlane,omitempty"`
	// NodeTemplate holds the defaults of every node of the role.
	// +optional
	NodeTemplate NodeSection `json:"nodeTemplate,omitempty"`
	// PreProvisioned says the nodes' hosts already run an operating system: phase -1 is skipped.
	// +optional
	// +kubebuilder:default=false
	PreProvisioned bool `json:"preProvisioned"`
	// BaremetalSetTemplate provisions the role's hosts through Ironic when they are not pre-provisioned.
	// +optional
	BaremetalSetTemplate *BaremetalSetTemplate `json:"baremetalSetTemplate,omitempty"`
}

// OpenStackDataPlaneRoleStatus summarizes the role's nodes.
type OpenStackDataPlaneRoleStatus struct {
	lifecycle.CommonStatus `json:",inline"`
	// Nodes names the OpenStackDataPlaneNodes of the role.
	// +optional
	// +listType=set
	Nodes []string `json:"nodes,omitempty"`
	// ReadyNodes is how many of them are ready.
	// +optional
	ReadyNodes int32 `json:"readyNodes,omitempty"`
}

// OpenStackDataPlaneRole templates a group of data-plane nodes.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=osdprole,categories=stackflow;openstack
// +kubebuilder:printcolumn:name="Data-Plane",type=string,JSONPath=`.spec.dataPlane`
// +kubebuilder:printcolumn:name="Cell",type=string,JSONPath=`.metadata.annotations.nova\.openstack\.org/cell`
// +kubebuilder:printcolumn:name="Pre-Provisioned",type=boolean,JSONPath=`.spec.preProvisioned`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type OpenStackDataPlaneRole struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   OpenStackDataPlaneRoleSpec   `json:"spec"`
	Status OpenStackDataPlaneRoleStatus `json:"status,omitempty"`
}

// OpenStackDataPlaneRoleList is a list of OpenStackDataPlaneRole.
//
// +kubebuilder:object:root=true
type OpenStackDataPlaneRoleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []OpenStackDataPlaneRole `json:"items"`
}
