package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/api/lifecycle"
)

// OVNMetadataAgentSpec is the OVN metadata agent of one EDPM data-plane node, deployed by Ansible.
type OVNMetadataAgentSpec struct {
	// DataplaneNodeName names the OpenStackDataPlaneNode (same namespace) the agent runs on.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	DataplaneNodeName string `json:"dataplaneNodeName"`
	// CustomServiceConfig is an oslo.config INI snippet merged over the agent's generated
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
	// NetworkAttachments are the networks the agent attaches to.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	NetworkAttachments []string `json:"networkAttachments,omitempty"`
	// NovaMetadata names the NovaMetadata (same namespace) the agent forwards instances' metadata
	// requests to: its address (status.endpoint) and the shared secret of its Secret's metadata key
	// (never in the spec) go into the agent's configuration, and the agent waits until it has both.
	// Unset, the agent forwards to no Nova (its requests fail), as Neutron's defaults would.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	NovaMetadata string `json:"novaMetadata,omitempty"`
	// ContainerImage is the agent's container image; the deployment's default when unset.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9._-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$`
	ContainerImage string `json:"containerImage,omitempty"`
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
}

// OVNMetadataAgentStatus is the state of an OVNMetadataAgent.
type OVNMetadataAgentStatus struct {
	lifecycle.CommonStatus `json:",inline"`
	// Deployed is true once the playbooks ran for the observed generation.
	// +optional
	Deployed bool `json:"deployed,omitempty"`
	// AgentID is the agent's ID in Neutron's agent list (`openstack network agent show`), once Neutron
	// listed it alive on the node's host.
	// +optional
	AgentID string `json:"agentID,omitempty"`
}

// OVNMetadataAgent is the OVN metadata agent on an EDPM data-plane node.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ovnmeta,categories=stackflow;openstack;neutron
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.dataplaneNodeName`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type OVNMetadataAgent struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   OVNMetadataAgentSpec   `json:"spec"`
	Status OVNMetadataAgentStatus `json:"status,omitempty"`
}

// OVNMetadataAgentList is a list of OVNMetadataAgent.
//
// +kubebuilder:object:root=true
type OVNMetadataAgentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []OVNMetadataAgent `json:"items"`
}
