// Package lifecycle is the contract between the bridge and the workflows: how an object names its
// workflow, which signals carry its intent, and the status fields every stackflow kind shares. It holds
// no logic beyond naming, so both sides can import it without importing each other.
package lifecycle

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Task queues by capability, so each kind of worker scales on its own.
const (
	// WorkflowQueue runs every workflow (deterministic orchestration, no I/O).
	WorkflowQueue = "stackflow"
	// KubeQueue runs Kubernetes and Helm activities.
	KubeQueue = "stackflow-kube"
	// AnsibleQueue runs ansible-playbook activities on workers that reach the data-plane hosts.
	AnsibleQueue = "stackflow-ansible"
	// OpenStackQueue runs OpenStack API activities (Nova, Neutron, Cinder, Ironic, Glance).
	OpenStackQueue = "stackflow-openstack"
)

// Signal, query and update names every object workflow understands.
const (
	// SignalSpec carries a SpecSignal: the object exists at a (new) generation.
	SignalSpec = "spec"
	// SignalDelete carries a DeleteSignal: the object is being deleted; tear down, then drop the finalizer.
	// With Gone set, the object has already left the API server: stop and end.
	SignalDelete = "delete"
	// SignalPause holds the workflow before its next step; SignalResume lets it go on.
	SignalPause  = "pause"
	SignalResume = "resume"
	// SignalRetry carries a RetrySignal: re-run what failed (only that).
	SignalRetry = "retry"
	// SignalRefresh asks for one more reconcile of the current generation because something the object
	// depends on changed (a profile's workflow sends it to the configurations and nodes that use it; a
	// data-plane node to its data plane). It carries nothing.
	SignalRefresh = "refresh"
	// QueryStatus returns the workflow's Status.
	QueryStatus = "status"
	// UpdateApprove opens a gate where a workflow has one; its validator refuses when none is waiting.
	UpdateApprove = "approve"
	// UpdatePreview returns what a reconcile of the object as it is now would change, changing nothing,
	// where the kind can tell (Helm rollouts: manifest diffs; data-plane services: a check-mode run).
	UpdatePreview = "preview"
)

// Finalizer is added by the bridge to every object it serves and removed by the workflow, last.
const Finalizer = "stackflow.io/teardown"

// WatchFilterLabel marks an object as served by the bridge and workers started with the same
// --watch-filter value; a bridge without a filter serves only objects without the label. Several
// stackflow installations (or test runs) then share one cluster, cluster-scoped kinds included, and no
// object is served twice. The workers put it on the objects they create.
const WatchFilterLabel = "stackflow.io/watch-filter"

// ObjectRef names one object of a stackflow-served kind. It is the whole input the bridge starts an
// object workflow with: the spec enters history only as the result of the workflow's read activity,
// once per reconcile (without status, managed fields or kubectl's last-applied copy), and is never
// carried across continue-as-new; Secret values never enter history (workflows pass Secret references).
type ObjectRef struct {
	Group     string `json:"group"`
	Version   string `json:"version"`
	Kind      string `json:"kind"`
	Resource  string `json:"resource"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

// String is Kind/namespace/name (Kind/name when cluster scoped).
func (r ObjectRef) String() string {
	if r.Namespace == "" {
		return r.Kind + "/" + r.Name
	}
	return r.Kind + "/" + r.Namespace + "/" + r.Name
}

// Key is namespace/name (name when cluster scoped), as search attributes and events show it.
func (r ObjectRef) Key() string {
	if r.Namespace == "" {
		return r.Name
	}
	return r.Namespace + "/" + r.Name
}

// APIVersion is group/version ("v1" for the core group).
func (r ObjectRef) APIVersion() string {
	if r.Group == "" {
		return r.Version
	}
	return r.Group + "/" + r.Version
}

// WorkflowID is the object's workflow ID: readable, and unique per object lifetime because it ends with
// the start of the UID (a re-created object with the same name gets a new workflow).
func WorkflowID(r ObjectRef) string {
	uid := strings.ReplaceAll(r.UID, "-", "")
	if len(uid) > 8 {
		uid = uid[:8]
	}
	return fmt.Sprintf("%s/%s", r.String(), uid)
}

// SpecSignal tells the workflow that the object exists at Generation. The workflow acts on the highest
// generation it has been told of and reports it as status.observedGeneration once acted on.
type SpecSignal struct {
	Generation int64 `json:"generation"`
}

// DeleteSignal tells the workflow that the object has a deletion timestamp, or is gone.
type DeleteSignal struct {
	// Gone is set by the bridge when the object left the API server while its workflow still ran:
	// someone took stackflow's finalizer off by hand, which in Kubernetes means "do not clean up". The
	// workflow stops whatever it was doing (a reconcile, a wait, a teardown) and ends; what it created
	// stays as it is (Kubernetes objects it owns go with their owner).
	Gone bool `json:"gone,omitempty"`
}

// RetrySignal asks to re-run failed work. Empty Hosts and Steps mean everything that failed.
type RetrySignal struct {
	Hosts []string `json:"hosts,omitempty"`
	Steps []string `json:"steps,omitempty"`
}

// ApproveRequest opens the named gate.
type ApproveRequest struct {
	Gate string `json:"gate"`
	By   string `json:"by,omitempty"`
}

// Status is what the status query returns and the shape every workflow mirrors into its object.
type Status struct {
	Object             string             `json:"object"`
	Phase              string             `json:"phase"`
	Step               string             `json:"step,omitempty"`
	Paused             bool               `json:"paused"`
	Deleting           bool               `json:"deleting"`
	DesiredGeneration  int64              `json:"desiredGeneration"`
	ObservedGeneration int64              `json:"observedGeneration"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
	// Detail is kind-specific progress (per-host, per-component state).
	Detail any `json:"detail,omitempty"`
}

// Phases shared by every kind; kinds add their own in between.
const (
	PhasePending  = "Pending"
	PhaseRunning  = "Running"
	PhaseReady    = "Ready"
	PhaseFailed   = "Failed"
	PhasePaused   = "Paused"
	PhaseDeleting = "Deleting"
	// PhaseWaiting is a reconcile that stopped on something that may still appear by itself (a flavor
	// the Nova applied beside it has yet to create, computes still joining their cell) and runs again on
	// its own; Ready is False with the reason and message, as for Failed.
	PhaseWaiting = "Waiting"
)

// Condition types and reasons shared by every kind.
const (
	ConditionReady = "Ready"
	// ConditionPaused is True while a workflow holds at a step because it is paused.
	ConditionPaused = "Paused"

	ReasonReconciling  = "Reconciling"
	ReasonReconciled   = "Reconciled"
	ReasonPaused       = "Paused"
	ReasonFailed       = "Failed"
	ReasonInvalidSpec  = "InvalidSpec"
	ReasonWaiting      = "Waiting"
	ReasonTearingDown  = "TearingDown"
	ReasonRetryPending = "RetryPending"
)

// CommonStatus is embedded in every kind's status: what the workflow writes for every object.
//
// +kubebuilder:object:generate=true
type CommonStatus struct {
	// ObservedGeneration is the generation the workflow last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions in Kubernetes convention; Ready is always present once the workflow runs.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Phase is a one-word summary (Pending, Running, Ready, Waiting, Failed, Paused, Deleting, or
	// kind-specific).
	// +optional
	Phase string `json:"phase,omitempty"`
	// CurrentStep is what the workflow is doing now.
	// +optional
	CurrentStep string `json:"currentStep,omitempty"`
	// WorkflowID is the Temporal workflow serving this object.
	// +optional
	WorkflowID string `json:"workflowID,omitempty"`
	// WorkflowURL links to the workflow in the Temporal UI.
	// +optional
	WorkflowURL string `json:"workflowURL,omitempty"`
}
