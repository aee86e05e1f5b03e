package v1beta1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NovaCellAnnotation on an OpenStackDataPlaneRole (inherited by its nodes) or an OpenStackDataPlaneNode
// (overrides the role's) names the NovaCell the node's compute service joins. Once set it cannot change
// or be removed: the ValidatingAdmissionPolicy in deploy/admission refuses such updates.
const NovaCellAnnotation = "nova.openstack.org/cell"

// Deployment phases of a data-plane node, in order.
const (
	// PhaseBareMetal (-1) provisions the host through Ironic; skipped for pre-provisioned hosts.
	PhaseBareMetal int32 = -1
	// PhaseInfrastructure (0) configures the operating system and network over SSH.
	PhaseInfrastructure int32 = 0
	// PhaseServices (1) deploys OpenStack services (nova-compute, ovn-metadata-agent, ...) on the host.
	PhaseServices int32 = 1
)

// Condition types of the data-plane kinds, one per phase, besides lifecycle.ConditionReady.
const (
	ConditionBareMetalProvisioned = "BareMetalProvisioned"
	ConditionInfrastructureReady  = "InfrastructureReady"
	ConditionServicesReady        = "ServicesReady"
)

// Reasons specific to the data plane.
const (
	ReasonPreProvisioned = "PreProvisioned"
	ReasonWaitingForCell = "WaitingForCell"
	// ReasonCellAmbiguous: a compute's cellName is the cellName of several NovaCells (two Novas in one
	// namespace each have a cell1) and the name of none; it waits until it names one NovaCell.
	ReasonCellAmbiguous      = "CellAmbiguous"
	ReasonWaitingForPhase    = "WaitingForPreviousPhase"
	ReasonMaxFailuresReached = "MaxFailuresReached"
)

// NodeSection is how Ansible reaches and configures a node. A role's nodeTemplate gives the defaults;
// a node's own section overrides them field by field.
type NodeSection struct {
	// AnsibleUser is the SSH user Ansible connects as.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[a-z_][a-z0-9_-]*$`
	AnsibleUser string `json:"ansibleUser,omitempty"`
	// AnsiblePort is the SSH port.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	AnsiblePort int32 `json:"ansiblePort,omitempty"`
	// AnsibleVars are extra Ansible variables for the node (any JSON value per variable).
	// +optional
	// +kubebuilder:validation:MaxProperties=256
	AnsibleVars map[string]apiextensionsv1.JSON `json:"ansibleVars,omitempty"`
	// NetworkAttachments are the networks the node's services attach to.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	NetworkAttachments []string `json:"networkAttachments,omitempty"`
	// AnsibleSSHPrivateKeySecret names the Secret (same namespace) holding the SSH private key under
	// the key ssh-privatekey.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	AnsibleSSHPrivateKeySecret string `json:"ansibleSSHPrivateKeySecret,omitempty"`
	// ManagementNetwork is the network Ansible reaches the node on.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	ManagementNetwork string `json:"managementNetwork,omitempty"`
}

// BaremetalSetTemplate is how the nodes of a role that are not pre-provisioned are provisioned through
// Ironic (phase -1).
type BaremetalSetTemplate struct {
	// Driver is the Ironic hardware type of the nodes: the site's (ipmi, redfish, idrac, ilo), or
	// fake-hardware on a test Ironic, which provisions nothing. It has no default.
	// +kubebuilder:validation:Enum=fake-hardware;ipmi;redfish;idrac;ilo
	Driver string `json:"driver"`
	// Image is the Glance image (name or ID) deployed to the nodes' root disks.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Image string `json:"image"`
	// Properties are Ironic node properties (cpus, memory_mb, local_gb, cpu_arch, ...).
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	Properties map[string]string `json:"properties,omitempty"`
}

// NodeBareMetal is how one node is provisioned through Ironic; unset fields come from the role's
// baremetalSetTemplate.
type NodeBareMetal struct {
	// IronicNodeName is the Ironic node's name (enrolled if it does not exist).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9][a-zA-Z0-9._~-]*$`
	IronicNodeName string `json:"ironicNodeName"`
	// Driver is the Ironic hardware type; the role's baremetalSetTemplate.driver when unset. A node with
	// neither is refused (condition Ready=False, InvalidSpec): there is no default.
	// +optional
	// +kubebuilder:validation:Enum=fake-hardware;ipmi;redfish;idrac;ilo
	Driver string `json:"driver,omitempty"`
	// Image is the Glance image (name or ID) deployed to the root disk.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Image string `json:"image,omitempty"`
	// Properties are Ironic node properties (cpus, memory_mb, local_gb, cpu_arch, ...).
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	Properties map[string]string `json:"properties,omitempty"`
}

// PhaseStatus is the state of one deployment phase of a node.
type PhaseStatus struct {
	// Phase is -1 (bare metal), 0 (infrastructure) or 1 (services).
	// +kubebuilder:validation:Enum=-1;0;1
	Phase int32 `json:"phase"`
	// Name is the phase's name (BareMetal, Infrastructure, Services).
	// +optional
	Name string `json:"name,omitempty"`
	// State is Pending, Running, Succeeded, Failed or Skipped.
	// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed;Skipped
	State string `json:"state"`
	// Message says what happened last, in words.
	// +optional
	Message string `json:"message,omitempty"`
	// StartTime and CompletionTime bound the phase's last run.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
}

// Phase states.
const (
	PhaseStatePending   = "Pending"
	PhaseStateRunning   = "Running"
	PhaseStateSucceeded = "Succeeded"
	PhaseStateFailed    = "Failed"
	PhaseStateSkipped   = "Skipped"
)
