package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/api/lifecycle"
)

// OpenStackDataPlaneDeploymentSpec is one limited run over part of a data plane: some of its nodes,
// some of their steps, some Ansible tags. A data plane is desired state; a limited run is an act that
// happens once and records what it covered, so it is a kind of its own and, like a Job, its spec cannot
// change after creation (another run is another object).
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="OpenStackDataPlaneDeployment spec is immutable: create a new run to change anything"
type OpenStackDataPlaneDeploymentSpec struct {
	// DataPlane names the OpenStackDataPlane (same namespace) whose nodes the run covers.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	DataPlane string `json:"dataPlane"`
	// Nodes limits the run to these member nodes of the data plane (like Ansible's --limit); every
	// member node when empty. A name that is not a member fails the run before anything runs.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Nodes []string `json:"nodes,omitempty"`
	// Services limits the run to these steps of each node, run in the node's own order: the phase-0
	// steps bootstrap, configure-network, configure-os and ovn (nodes that join an OVN southbound
	// database), and the phase-1 services nova-compute and ovn-metadata-agent (a node runs those of
	// them it has). Every step of each node when empty.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=6
	// +kubebuilder:validation:items:Enum=bootstrap;configure-network;configure-os;ovn;nova-compute;ovn-metadata-agent
	Services []string `json:"services,omitempty"`
	// Tags runs only the tasks with these Ansible tags (ansible-playbook --tags); SkipTags skips the
	// tasks with these (--skip-tags). docs/operations/limited-runs.md lists the playbooks' tags.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9][A-Za-z0-9_.-]*$`
	Tags []string `json:"tags,omitempty"`
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9][A-Za-z0-9_.-]*$`
	SkipTags []string `json:"skipTags,omitempty"`
	// MaxParallel is how many nodes run at the same time (each runs its steps one after the other).
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	MaxParallel *int32 `json:"maxParallel,omitempty"`
}

// States of a node and of a step in a limited run.
const (
	RunPending   = "Pending"
	RunRunning   = "Running"
	RunSucceeded = "Succeeded"
	RunFailed    = "Failed"
)

// Condition type and reasons of a limited run.
const (
	// ConditionRan is True once every step of every covered node ran.
	ConditionRan = "Ran"
	// ReasonNodeNotSettled: a node (or one of its services) is being deployed, failed, or paused
	// with a newer generation; a limited run acts only on settled nodes.
	ReasonNodeNotSettled = "NodeNotSettled"
)

// MaxRunNodeStates bounds status.nodeStates of a run, like a data plane's.
const MaxRunNodeStates = 50

// OpenStackDataPlaneDeploymentStatus is what the run covered and how each node fared.
type OpenStackDataPlaneDeploymentStatus struct {
	lifecycle.CommonStatus `json:",inline"`
	// Nodes is the number of nodes the run covers; SucceededNodes and FailedNodes count them by state.
	// +optional
	Nodes int32 `json:"nodes,omitempty"`
	// +optional
	SucceededNodes int32 `json:"succeededNodes,omitempty"`
	// +optional
	FailedNodes int32 `json:"failedNodes,omitempty"`
	// Services are the steps the run covers (the union over its nodes), in pipeline order.
	// +optional
	Services []string `json:"services,omitempty"`
	// PlaybooksVersion is the version of the playbooks that ran.
	// +optional
	PlaybooksVersion string `json:"playbooksVersion,omitempty"`
	// NodeStates is each covered node with each of its steps: at most 50 nodes, failed and running ones
	// first; the rest are counted in NodeStatesOmitted.
	// +optional
	// +listType=map
	// +listMapKey=name
	NodeStates []RunNodeState `json:"nodeStates,omitempty"`
	// +optional
	NodeStatesOmitted int32 `json:"nodeStatesOmitted,omitempty"`
}

// RunNodeState is one node of a limited run.
type RunNodeState struct {
	// Name is the OpenStackDataPlaneNode; Host its hostName.
	Name string `json:"name"`
	// +optional
	Host string `json:"host,omitempty"`
	// State is Pending, Running, Succeeded or Failed.
	State string `json:"state"`
	// Message says why a node failed.
	// +optional
	Message string `json:"message,omitempty"`
	// Steps are the node's steps the run covers, in order.
	// +optional
	Steps []RunStepState `json:"steps,omitempty"`
}

// RunStepState is one step of one node in a limited run.
type RunStepState struct {
	Name  string `json:"name"`
	State string `json:"state"`
	// Ok, Changed and Skipped count the playbook's tasks on the host as Ansible does (tasks outside the
	// tags are not run and not counted).
	// +optional
	Ok int32 `json:"ok,omitempty"`
	// +optional
	Changed int32 `json:"changed,omitempty"`
	// +optional
	Skipped int32 `json:"skipped,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// OpenStackDataPlaneDeployment runs chosen steps (and Ansible tags) on chosen nodes of a data plane,
// once, without touching the rest: the redeploy of a service on some hosts, a host's drifted settings
// put back, a restart. Nodes and services that are being deployed, failed, or hold an edit not yet
// deployed are not run (the node's own workflow owns them then); retry re-runs what failed.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=osdpdeployment;osdpd,categories=stackflow;openstack
// +kubebuilder:printcolumn:name="Data-Plane",type=string,JSONPath=`.spec.dataPlane`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.nodes`
// +kubebuilder:printcolumn:name="Succeeded",type=integer,JSONPath=`.status.succeededNodes`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failedNodes`
// +kubebuilder:printcolumn:name="Services",type=string,JSONPath=`.status.services`,priority=1
// +kubebuilder:printcolumn:name="Step",type=string,JSONPath=`.status.currentStep`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type OpenStackDataPlaneDeployment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   OpenStackDataPlaneDeploymentSpec   `json:"spec"`
	Status OpenStackDataPlaneDeploymentStatus `json:"status,omitempty"`
}

// OpenStackDataPlaneDeploymentList is a list of OpenStackDataPlaneDeployment.
//
// +kubebuilder:object:root=true
type OpenStackDataPlaneDeploymentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []OpenStackDataPlaneDeployment `json:"items"`
}
