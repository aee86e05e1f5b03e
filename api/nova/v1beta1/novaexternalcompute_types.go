package v1beta1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/api/lifecycle"
)

// NovaExternalComputeSpec is the compute service of one EDPM data-plane node, deployed by Ansible.
// Created automatically (named after the node) for nodes with a nova.openstack.org/cell annotation.
type NovaExternalComputeSpec struct {
	// DataplaneNodeName names the OpenStackDataPlaneNode (same namespace) the compute runs on.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	DataplaneNodeName string `json:"dataplaneNodeName"`
	// CellName is the NovaCell the compute joins: a NovaCell's name, or a cell name (spec.cellName) that
	// exactly one NovaCell of the namespace serves (with two Novas in one namespace, name the NovaCell).
	// It cannot change once set.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="cellName is immutable once set"
	// +kubebuilder:validation:XValidation:rule="self != 'cell0'",message="cell0 has no computes: cellName must name another cell"
	CellName string `json:"cellName"`
	// CustomServiceConfig is an oslo.config INI snippet merged over nova-compute's generated
	// configuration; it always wins. Credentials never go here.
	// +optional
	// +kubebuilder:validation:MaxLength=32768
	// +kubebuilder:validation:XValidation:rule=`!self.matches(r'^([ \t\r]*([#;][^\n]*)?\n)*[ \t]*[^\s#;\[]')`,message="customServiceConfig must be an oslo.config INI snippet: the first line that is not blank or a comment must be a [section] header"
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^([ \t\r]*([#;][^\n]*)?|[ \t]*\[[^\]\n]+\][ \t\r]*|[^\s=:#;\[][^=:\n]*[=:][^\n]*|[ \t]+[^\n]*)(\n([ \t\r]*([#;][^\n]*)?|[ \t]*\[[^\]\n]+\][ \t\r]*|[^\s=:#;\[][^=:\n]*[=:][^\n]*|[ \t]+[^\n]*))*$')`,message="customServiceConfig must be an oslo.config INI snippet: every line must be a [section] header, a 'key = value' option, an indented continuation, a comment or blank"
	CustomServiceConfig string `json:"customServiceConfig,omitempty"`
	// SSHKeySecretName names the Secret (same namespace) holding the SSH private key Ansible uses.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	SSHKeySecretName string `json:"sshKeySecretName"`
	// InventoryConfigMapName names the ConfigMap (same namespace) holding the node's Ansible inventory.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	InventoryConfigMapName string `json:"inventoryConfigMapName"`
	// NetworkAttachments are the networks the compute attaches to.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	NetworkAttachments []string `json:"networkAttachments,omitempty"`
	// NovaComputeImage is nova-compute's container image; the deployment's default when unset.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9._-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$`
	NovaComputeImage string `json:"novaComputeImage,omitempty"`
	// NovaLibvirtImage is libvirt's container image; the deployment's default when unset.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9._-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$`
	NovaLibvirtImage string `json:"novaLibvirtImage,omitempty"`
	// AnsibleUser overrides the inventory's SSH user.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[a-z_][a-z0-9_-]*$`
	AnsibleUser string `json:"ansibleUser,omitempty"`
	// AnsiblePort overrides the inventory's SSH port.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	AnsiblePort int32 `json:"ansiblePort,omitempty"`
	// AnsibleHost overrides the inventory's address (IP or DNS name).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`isIP(self) || self.matches(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')`,message="ansibleHost must be an IP address or a DNS name"
	AnsibleHost string `json:"ansibleHost,omitempty"`
	// Deploy starts (true) or holds (false) the deployment. Go clients must set it: false is sent as is.
	// +optional
	// +kubebuilder:default=true
	Deploy bool `json:"deploy"`
	// Removal is how the compute leaves when it is deleted (with its data-plane node, or alone): it is
	// disabled in Nova, its instances are live-migrated away, then its services stop. The node sets
	// none of it: it is the user's to set, like customServiceConfig.
	// +optional
	// +kubebuilder:default={}
	Removal ComputeRemoval `json:"removal,omitempty"`
}

// ComputeRemoval is how a compute's instances leave it before it is removed.
type ComputeRemoval struct {
	// DrainTimeout bounds the live migration of all the compute's instances.
	// +optional
	// +kubebuilder:default="5m"
	DrainTimeout *metav1.Duration `json:"drainTimeout,omitempty"`
	// OnDrainFailure says what happens when instances cannot all be moved in time: Stop (the compute
	// stays, running its instances, with a condition naming them, until they are moved or deleted or a
	// person approves the gate "remove", which deletes them with the compute), Skip (they are deleted
	// with the compute at once) or Fail (the teardown fails; the retry signal tries again).
	// +optional
	// +kubebuilder:default=Stop
	// +kubebuilder:validation:Enum=Stop;Skip;Fail
	OnDrainFailure string `json:"onDrainFailure,omitempty"`
}

// Policies of ComputeRemoval.OnDrainFailure.
const (
	RemovalStop = "Stop"
	RemovalSkip = "Skip"
	RemovalFail = "Fail"
)

// DefaultRemovalDrainTimeout is ComputeRemoval.DrainTimeout when unset.
const DefaultRemovalDrainTimeout = 5 * time.Minute

// Policy returns the drain timeout and the failure policy, defaults filled in.
func (r ComputeRemoval) Policy() (time.Duration, string) {
	d := DefaultRemovalDrainTimeout
	if r.DrainTimeout != nil && r.DrainTimeout.Duration > 0 {
		d = r.DrainTimeout.Duration
	}
	p := r.OnDrainFailure
	if p == "" {
		p = RemovalStop
	}
	return d, p
}

// NovaExternalComputeStatus is the state of a NovaExternalCompute.
type NovaExternalComputeStatus struct {
	lifecycle.CommonStatus `json:",inline"`
	// HypervisorHostname is the compute host as Nova's placement and hypervisor list know it.
	// +optional
	HypervisorHostname string `json:"hypervisorHostname,omitempty"`
	// ComputeServiceID is the nova-compute service record's ID once it registered.
	// +optional
	ComputeServiceID string `json:"computeServiceID,omitempty"`
	// Deployed is true once the playbooks ran for the observed generation.
	// +optional
	Deployed bool `json:"deployed,omitempty"`
}

// NovaExternalCompute is nova-compute on an EDPM data-plane node.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=nec,categories=stackflow;openstack;nova
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.dataplaneNodeName`
// +kubebuilder:printcolumn:name="Cell",type=string,JSONPath=`.spec.cellName`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Hypervisor",type=string,JSONPath=`.status.hypervisorHostname`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NovaExternalCompute struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NovaExternalComputeSpec   `json:"spec"`
	Status NovaExternalComputeStatus `json:"status,omitempty"`
}

// NovaExternalComputeList is a list of NovaExternalCompute.
//
// +kubebuilder:object:root=true
type NovaExternalComputeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NovaExternalCompute `json:"items"`
}
