package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/api/lifecycle"
)

// OpenStackDataPlaneUpdateSpec is one minor update of a data plane's compute nodes. Like a Job it runs
// once: the spec cannot change after creation (a different update is a new object).
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="OpenStackDataPlaneUpdate spec is immutable: create a new update to change anything"
type OpenStackDataPlaneUpdateSpec struct {
	// DataPlane names the OpenStackDataPlane (same namespace) whose nodes are updated.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	DataPlane string `json:"dataPlane"`
	// Nodes limits the update to these nodes of the data plane, in this order; every node of the data
	// plane, by name, when empty.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Nodes []string `json:"nodes,omitempty"`
	// NovaCompute is what changes in each node's nova-compute.
	NovaCompute NovaComputeUpdate `json:"novaCompute"`
	// Strategy is the order and pace of the update: canaries, then batches.
	// +optional
	Strategy UpdateStrategy `json:"strategy,omitempty"`
	// Drain is how a node's instances leave it before it is updated.
	// +optional
	Drain DrainPolicy `json:"drain,omitempty"`
}

// NovaComputeUpdate is the new state of nova-compute on a node.
type NovaComputeUpdate struct {
	// Version names the release the node runs after the update. The node records it, and nova-compute
	// itself reports it to Placement as the trait CUSTOM_STACKFLOW_NOVA_COMPUTE_<VERSION> of its compute
	// node (upper case, other characters as _), through a provider config file; the update verifies it
	// there.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9._-]*$`
	Version string `json:"version"`
	// PlaybooksVersion, when set, is the version of stackflow's playbooks the update must run with
	// (their content hash, as the worker logs it and status reports it): a worker carrying other
	// playbooks refuses the update instead of applying something else.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-f0-9]+$`
	PlaybooksVersion string `json:"playbooksVersion,omitempty"`
	// CustomServiceConfig is an oslo.config INI snippet the release adds to nova-compute's configuration.
	// It is installed after the generated configuration and before the node's own customServiceConfig,
	// which still wins. Empty removes the snippet an earlier update installed.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	CustomServiceConfig string `json:"customServiceConfig,omitempty"`
}

// UpdateStrategy is the order and pace of an update.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.approveAfterCanary) && self.approveAfterCanary) || !has(self.canary) || self.canary > 0",message="approveAfterCanary needs at least one canary node (canary > 0)"
type UpdateStrategy struct {
	// Canary is how many nodes are updated first, before any other.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	Canary *int32 `json:"canary,omitempty"`
	// MaxUnavailable is how many nodes may be out of service (disabled in Nova) at once.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	MaxUnavailable *int32 `json:"maxUnavailable,omitempty"`
	// MaxFailedNodes is the failure budget: once more nodes than this failed, no new node starts and
	// the update stops as Failed (retry re-runs the failed nodes and goes on).
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	MaxFailedNodes *int32 `json:"maxFailedNodes,omitempty"`
	// ApproveAfterCanary holds the update after the canary nodes succeeded until a person approves the
	// gate "canary" (temporal workflow update execute --name approve --input '{"gate":"canary"}').
	// +optional
	ApproveAfterCanary bool `json:"approveAfterCanary,omitempty"`
}

// Drain policies for a node whose instances cannot all be moved away in time.
const (
	// DrainStop re-enables the node untouched and stops the update (Failed; retry re-runs the node).
	DrainStop = "Stop"
	// DrainSkip re-enables the node untouched, marks it Skipped and goes on.
	DrainSkip = "Skip"
	// DrainFail re-enables the node untouched and counts it as failed against the budget.
	DrainFail = "Fail"
)

// DrainPolicy is how a node's instances leave it before it is updated.
type DrainPolicy struct {
	// Timeout bounds the live migration of all of a node's instances.
	// +optional
	// +kubebuilder:default="5m"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// OnFailure says what happens to a node that cannot be drained in time: Stop, Skip or Fail.
	// +optional
	// +kubebuilder:default=Stop
	// +kubebuilder:validation:Enum=Stop;Skip;Fail
	OnFailure string `json:"onFailure,omitempty"`
	// MigrateBack moves the instances that were drained back to the node once it is updated.
	// +optional
	// +kubebuilder:default=true
	MigrateBack *bool `json:"migrateBack,omitempty"`
}

// States of one node in an update.
const (
	UpdateNodePending     = "Pending"
	UpdateNodeDraining    = "Draining"
	UpdateNodeUpdating    = "Updating"
	UpdateNodeVerifying   = "Verifying"
	UpdateNodeRollingBack = "RollingBack"
	UpdateNodeReturning   = "Returning"
	UpdateNodeSucceeded   = "Succeeded"
	UpdateNodeFailed      = "Failed"
	UpdateNodeSkipped     = "Skipped"
)

// Condition types and reasons of an update.
const (
	// ConditionUpdated is True once every node runs the new version.
	ConditionUpdated = "Updated"
	// ReasonVerificationFailed: a node did not come back on the new version; it was rolled back.
	ReasonVerificationFailed = "VerificationFailed"
	// ReasonDrainFailed: a node's instances could not be moved away in time.
	ReasonDrainFailed = "DrainFailed"
	// ReasonRollbackFailed: a node could not be restored to its checkpoint; it needs a person.
	ReasonRollbackFailed = "RollbackFailed"
	// ReasonAwaitingApproval: the canary nodes succeeded and the gate waits for approval.
	ReasonAwaitingApproval = "AwaitingApproval"
)

// UpdateGateCanary is the gate an update with approveAfterCanary waits at.
const UpdateGateCanary = "canary"

// OpenStackDataPlaneUpdateStatus is the update's progress, node by node.
type OpenStackDataPlaneUpdateStatus struct {
	lifecycle.CommonStatus `json:",inline"`
	// Nodes is the number of nodes the update covers.
	// +optional
	Nodes int32 `json:"nodes,omitempty"`
	// UpdatedNodes, FailedNodes, SkippedNodes and InFlightNodes count the nodes by state.
	// +optional
	UpdatedNodes int32 `json:"updatedNodes,omitempty"`
	// +optional
	FailedNodes int32 `json:"failedNodes,omitempty"`
	// +optional
	SkippedNodes int32 `json:"skippedNodes,omitempty"`
	// +optional
	InFlightNodes int32 `json:"inFlightNodes,omitempty"`
	// Batch names the nodes being updated now.
	// +optional
	Batch []string `json:"batch,omitempty"`
	// Gate is the gate waiting for approval, if any.
	// +optional
	Gate string `json:"gate,omitempty"`
	// PlaybooksVersion is the version of the playbooks the update runs.
	// +optional
	PlaybooksVersion string `json:"playbooksVersion,omitempty"`
	// NodeStates is each node's progress: at most 50 nodes, failed, in-flight and pending ones first
	// (updated ones last); the rest are counted in NodeStatesOmitted (the counts above cover every node).
	// +optional
	// +listType=map
	// +listMapKey=name
	NodeStates []UpdateNodeState `json:"nodeStates,omitempty"`
	// +optional
	NodeStatesOmitted int32 `json:"nodeStatesOmitted,omitempty"`
}

// MaxUpdateNodeStates bounds an update's status.nodeStates.
const MaxUpdateNodeStates = 50

// UpdateNodeState is one node's progress through the update.
type UpdateNodeState struct {
	// Name is the OpenStackDataPlaneNode; Host its hostName (its compute service's host).
	Name string `json:"name"`
	// +optional
	Host string `json:"host,omitempty"`
	// State is Pending, Draining, Updating, Verifying, RollingBack, Returning, Succeeded, Failed or Skipped.
	State string `json:"state"`
	// Step is what the node is doing, or where it failed.
	// +optional
	Step string `json:"step,omitempty"`
	// VersionBefore is the version nova-compute reported before the update ("" for none);
	// VersionAfter the one it reports after (the new one, or VersionBefore after a rollback).
	// +optional
	VersionBefore string `json:"versionBefore,omitempty"`
	// +optional
	VersionAfter string `json:"versionAfter,omitempty"`
	// InstancesMoved is how many instances were live-migrated away; InstancesReturned how many came back.
	// +optional
	InstancesMoved int32 `json:"instancesMoved,omitempty"`
	// +optional
	InstancesReturned int32 `json:"instancesReturned,omitempty"`
	// Message is the last thing that happened (the failure and what was done about it when failed).
	// +optional
	Message string `json:"message,omitempty"`
	// Attempts counts the runs of the node (1 plus retries).
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
}

// OpenStackDataPlaneUpdate is one rolling minor update of a data plane's compute nodes: per node,
// disable in Nova, drain, checkpoint, update, verify, re-enable, migrate back; canaries first, an
// optional approval gate, then batches bounded by maxUnavailable, within a failure budget.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=osdpupdate,categories=stackflow;openstack
// +kubebuilder:printcolumn:name="Data-Plane",type=string,JSONPath=`.spec.dataPlane`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.novaCompute.version`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.nodes`
// +kubebuilder:printcolumn:name="Updated",type=integer,JSONPath=`.status.updatedNodes`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failedNodes`
// +kubebuilder:printcolumn:name="Gate",type=string,JSONPath=`.status.gate`
// +kubebuilder:printcolumn:name="Batch",type=string,JSONPath=`.status.batch`,priority=1
// +kubebuilder:printcolumn:name="Step",type=string,JSONPath=`.status.currentStep`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type OpenStackDataPlaneUpdate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   OpenStackDataPlaneUpdateSpec   `json:"spec"`
	Status OpenStackDataPlaneUpdateStatus `json:"status,omitempty"`
}

// OpenStackDataPlaneUpdateList is a list of OpenStackDataPlaneUpdate.
//
// +kubebuilder:object:root=true
type OpenStackDataPlaneUpdateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []OpenStackDataPlaneUpdate `json:"items"`
}
