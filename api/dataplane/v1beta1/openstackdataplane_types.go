package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/api/lifecycle"
)

// OpenStackDataPlaneSpec lists the roles and nodes a data plane deploys and how many at once.
//
// +kubebuilder:validation:XValidation:rule="(has(self.roles) && size(self.roles) > 0) || (has(self.nodes) && size(self.nodes) > 0)",message="a data plane deploys at least one role or node: set roles or nodes"
// +kubebuilder:validation:XValidation:rule="!(has(self.maxFailedNodes) && has(self.maxFailedPercentage))",message="maxFailedNodes and maxFailedPercentage are mutually exclusive: set at most one"
type OpenStackDataPlaneSpec struct {
	// Roles names the OpenStackDataPlaneRoles (same namespace) whose nodes this data plane deploys.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Roles []string `json:"roles,omitempty"`
	// Nodes names OpenStackDataPlaneNodes (same namespace) deployed in addition to the roles' nodes.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Nodes []string `json:"nodes,omitempty"`
	// Deploy starts (true) or holds (false) the deployment of every node.
	// +optional
	// +kubebuilder:default=true
	Deploy bool `json:"deploy"`
	// MaxConcurrency is how many nodes deploy at the same time.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxConcurrency *int32 `json:"maxConcurrency,omitempty"`
	// MaxFailedNodes stops the rollout once more nodes than this failed. Unset with maxFailedPercentage
	// unset means 0: the first failure stops it.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxFailedNodes *int32 `json:"maxFailedNodes,omitempty"`
	// MaxFailedPercentage stops the rollout once more than this share of the nodes failed.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	MaxFailedPercentage *int32 `json:"maxFailedPercentage,omitempty"`
}

// OpenStackDataPlaneStatus is the rollout's progress over all its nodes.
type OpenStackDataPlaneStatus struct {
	lifecycle.CommonStatus `json:",inline"`
	// Nodes is the number of nodes the data plane deploys.
	// +optional
	Nodes int32 `json:"nodes,omitempty"`
	// ReadyNodes is the number of nodes with every phase done.
	// +optional
	ReadyNodes int32 `json:"readyNodes,omitempty"`
	// FailedNodes names the nodes whose deployment failed.
	// +optional
	// +listType=set
	FailedNodes []string `json:"failedNodes,omitempty"`
	// NodeStates is where each node's pipeline is: state, phase, step, last message, admissions. It
	// lists at most 50 nodes, failed, stopped, running and pending ones first (succeeded ones last); the
	// rest are counted in NodeStatesOmitted (each node's own status has all of it).
	// +optional
	// +listType=map
	// +listMapKey=name
	NodeStates []DataPlaneNodeState `json:"nodeStates,omitempty"`
	// NodeStatesOmitted is how many nodes NodeStates leaves out.
	// +optional
	NodeStatesOmitted int32 `json:"nodeStatesOmitted,omitempty"`
}

// DataPlaneNodeState is one node's pipeline as its data plane sees it.
type DataPlaneNodeState struct {
	// Name is the OpenStackDataPlaneNode.
	Name string `json:"name"`
	// Host is its hostName.
	// +optional
	Host string `json:"host,omitempty"`
	// State is Pending, Running, Succeeded, Failed, Held or Stopped.
	State string `json:"state"`
	// Phase (-1, 0, 1) and Step are where the node is, or where it failed.
	// +optional
	Phase int32 `json:"phase,omitempty"`
	// +optional
	Step string `json:"step,omitempty"`
	// Message is the node's last report (the failure message when it failed).
	// +optional
	Message string `json:"message,omitempty"`
	// Attempts counts the times the node was admitted in this rollout (1 plus retries).
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
}

// OpenStackDataPlane deploys a set of EDPM data-plane nodes, in batches, with a failure budget.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=osdp,categories=stackflow;openstack
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.nodes`
// +kubebuilder:printcolumn:name="Ready-Nodes",type=integer,JSONPath=`.status.readyNodes`
// +kubebuilder:printcolumn:name="Step",type=string,JSONPath=`.status.currentStep`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type OpenStackDataPlane struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   OpenStackDataPlaneSpec   `json:"spec"`
	Status OpenStackDataPlaneStatus `json:"status,omitempty"`
}

// OpenStackDataPlaneList is a list of OpenStackDataPlane.
//
// +kubebuilder:object:root=true
type OpenStackDataPlaneList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []OpenStackDataPlane `json:"items"`
}
