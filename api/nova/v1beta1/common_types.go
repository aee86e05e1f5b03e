package v1beta1

import corev1 "k8s.io/api/core/v1"

// Cell0Name is the cell holding instances that failed to schedule; it has no computes, no metadata
// service and no console proxy, and no message bus of its own.
const Cell0Name = "cell0"

// Condition types of the Nova kinds, besides lifecycle.ConditionReady.
const (
	ConditionDBSynced          = "DBSynced"
	ConditionCellMapped        = "CellMapped"
	ConditionServiceConfigured = "ServiceConfigReady"
	ConditionDeploymentReady   = "DeploymentReady"
	ConditionComputeDeployed   = "ComputeDeployed"
	// ConditionEndpointRegistered says whether the compute API's endpoints are in Keystone's catalog.
	ConditionEndpointRegistered = "KeystoneEndpointReady"
)

// NovaServiceBase is what every Nova service shares, whether it is its own CR or a template inside a
// Nova or NovaCell.
type NovaServiceBase struct {
	// CustomServiceConfig is an oslo.config INI snippet merged over the generated configuration; it
	// always wins. Credentials never go here: they come from the referenced Secrets.
	// +optional
	// +kubebuilder:validation:MaxLength=32768
	// +kubebuilder:validation:XValidation:rule=`!self.matches(r'^([ \t\r]*([#;][^\n]*)?\n)*[ \t]*[^\s#;\[]')`,message="customServiceConfig must be an oslo.config INI snippet: the first line that is not blank or a comment must be a [section] header"
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^([ \t\r]*([#;][^\n]*)?|[ \t]*\[[^\]\n]+\][ \t\r]*|[^\s=:#;\[][^=:\n]*[=:][^\n]*|[ \t]+[^\n]*)(\n([ \t\r]*([#;][^\n]*)?|[ \t]*\[[^\]\n]+\][ \t\r]*|[^\s=:#;\[][^=:\n]*[=:][^\n]*|[ \t]+[^\n]*))*$')`,message="customServiceConfig must be an oslo.config INI snippet: every line must be a [section] header, a 'key = value' option, an indented continuation, a comment or blank"
	CustomServiceConfig string `json:"customServiceConfig,omitempty"`
	// ContainerImage is the service's image; the deployment's default for the service when unset.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9._-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$`
	ContainerImage string `json:"containerImage,omitempty"`
	// Replicas is the number of service instances.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=32
	Replicas *int32 `json:"replicas,omitempty"`
	// NodeSelector places the service's pods.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations let the service's pods onto tainted nodes (a node set aside for the control plane).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// NetworkAttachments are the networks the service's pods attach to.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	NetworkAttachments []string `json:"networkAttachments,omitempty"`
}

// PasswordSelectors name the keys of the service Secret that hold each password.
type PasswordSelectors struct {
	// Service is the key of the Keystone service user's password.
	// +optional
	// +kubebuilder:default=NovaPassword
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Service string `json:"service,omitempty"`
	// APIDatabase is the key of the API database user's password.
	// +optional
	// +kubebuilder:default=NovaAPIDatabasePassword
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	APIDatabase string `json:"apiDatabase,omitempty"`
	// CellDatabase is the key of the cell database user's password.
	// +optional
	// +kubebuilder:default=NovaCellDatabasePassword
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	CellDatabase string `json:"cellDatabase,omitempty"`
	// MetadataSecret is the key of the metadata proxy's shared secret.
	// +optional
	// +kubebuilder:default=MetadataSecret
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	MetadataSecret string `json:"metadataSecret,omitempty"`
}

// NovaServiceAuth is how a Nova service reaches Keystone and which Secret holds its passwords. Only
// references: the values stay in the Secret.
type NovaServiceAuth struct {
	// Secret names the Secret (same namespace) holding the service's passwords.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Secret string `json:"secret"`
	// PasswordSelectors name the keys of Secret.
	// +optional
	// +kubebuilder:default={}
	PasswordSelectors PasswordSelectors `json:"passwordSelectors,omitempty"`
	// ServiceUser is the Keystone user of the service.
	// +optional
	// +kubebuilder:default=nova
	// +kubebuilder:validation:MaxLength=255
	ServiceUser string `json:"serviceUser,omitempty"`
	// KeystoneAuthURL is Keystone's endpoint. A Nova naming keystoneAdminSecret may leave it unset: the
	// administrator's clouds.yaml then gives it, and the Nova hands it down to its cells and services.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="keystoneAuthURL must be an http or https URL"
	KeystoneAuthURL string `json:"keystoneAuthURL,omitempty"`
	// Region is the Keystone region of this Nova's compute API: the NovaAPI registers its endpoints
	// there, and the computes of its cells are checked through the compute endpoint of that region. The
	// cloud's own region (RegionOne) when unset. Placement, Neutron and Glance are found in any region.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][-._A-Za-z0-9]*$`
	Region string `json:"region,omitempty"`
}

// DatabaseAccess names a database server and user; the password is in the service Secret.
type DatabaseAccess struct {
	// Hostname is the database server's DNS name or IP address.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`isIP(self) || self.matches(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')`,message="hostname must be an IP address or a DNS name"
	Hostname string `json:"hostname"`
	// Port is the database server's port.
	// +optional
	// +kubebuilder:default=3306
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`
	// User is the database user.
	// +optional
	// +kubebuilder:validation:MaxLength=80
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9_]+$`
	User string `json:"user,omitempty"`
	// Database is the database (schema) name; nova_api for the API database, nova_<cell> for cells.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9_]+$`
	Database string `json:"database,omitempty"`
	// AdminSecret names a Secret (same namespace) with the server's administrator credentials (keys
	// username, password). When set, the Nova creates the database and its user (default: the database's
	// name) with a generated password; when unset, both exist and the password is in the service Secret.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	AdminSecret string `json:"adminSecret,omitempty"`
}

// MessageBusAccess names the Secret holding a message bus's transport URL (key transport_url).
type MessageBusAccess struct {
	// AdminSecret names a Secret (same namespace) with the broker's administrator access (keys
	// management_url, username, password, amqp_host, amqp_port). When set, the Nova creates a vhost and a
	// user with a generated password and writes transportURLSecret itself.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	AdminSecret string `json:"adminSecret,omitempty"`
	// TransportURLSecret names the Secret (same namespace) holding transport_url.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	TransportURLSecret string `json:"transportURLSecret"`
}

// ServiceStatus is what a Nova service reports besides the common status.
type ServiceStatus struct {
	// ReadyCount is the number of ready service instances.
	// +optional
	ReadyCount int32 `json:"readyCount,omitempty"`
	// Hash is the hash of the service's rendered configuration; a change rolls the service.
	// +optional
	Hash string `json:"hash,omitempty"`
	// ConfigMaps names the service's <name>-config-data and <name>-scripts ConfigMaps.
	// +optional
	ConfigMaps []string `json:"configMaps,omitempty"`
	// InputHashes is the hash of each input of the configuration (config-data, scripts, secret/<name>):
	// when Hash changes, the ones that differ say why.
	// +optional
	InputHashes map[string]string `json:"inputHashes,omitempty"`
}

// MappedCells are the cells mapped in the API database, for the top-level services that read the cell
// mappings once, when they start (nova-api, nova-scheduler).
type MappedCells struct {
	// Cells are the cells mapped in the API database, as the Nova owning the service mapped and
	// unmapped them: a change of this list restarts the service, so it sees a cell mapped or unmapped
	// after it started. A service deployed on its own may leave it empty (restart it after mapping or
	// removing a cell).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	Cells []string `json:"cells,omitempty"`
}

// DatabaseNames name the databases (schemas) a service reaches, when not the defaults.
type DatabaseNames struct {
	// APIDatabaseName is the API database's name.
	// +optional
	// +kubebuilder:default=nova_api
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9_]+$`
	APIDatabaseName string `json:"apiDatabaseName,omitempty"`
	// CellDatabaseName is the cell database's name (cell0's for the top-level services); nova_<cellName>
	// (hyphens as underscores) when unset.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9_]+$`
	CellDatabaseName string `json:"cellDatabaseName,omitempty"`
}
