package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/api/lifecycle"
)

// NovaMetadataTemplate is a metadata service inside a Nova (global) or a cell.
type NovaMetadataTemplate struct {
	// Enabled deploys the service. The Nova's global metadata service is enabled unless set false; a
	// cell's is disabled unless set true. Never both: metadata is global or per cell.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	NovaServiceBase `json:",inline"`
}

// NovaNoVNCProxyTemplate is the console proxy of a cell.
type NovaNoVNCProxyTemplate struct {
	// Enabled deploys the proxy; unset means enabled for every cell but cell0.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	NovaServiceBase `json:",inline"`
}

// NovaCellTemplate describes one cell of a Nova.
type NovaCellTemplate struct {
	// CellDatabase is the cell's database.
	CellDatabase DatabaseAccess `json:"cellDatabase"`
	// CellMessageBus is the cell's message bus; cell0 uses the API message bus and needs none.
	// +optional
	CellMessageBus *MessageBusAccess `json:"cellMessageBus,omitempty"`
	// HasAPIAccess lets the cell's services reach the API database (upcalls).
	// +optional
	HasAPIAccess bool `json:"hasAPIAccess,omitempty"`
	// ConductorServiceTemplate is the cell's conductor (cell0's is the superconductor).
	// +optional
	ConductorServiceTemplate NovaServiceBase `json:"conductorServiceTemplate,omitempty"`
	// MetadataServiceTemplate is the cell's own metadata service, when metadata is per cell.
	// +optional
	MetadataServiceTemplate NovaMetadataTemplate `json:"metadataServiceTemplate,omitempty"`
	// NoVNCProxyServiceTemplate is the cell's console proxy.
	// +optional
	NoVNCProxyServiceTemplate NovaNoVNCProxyTemplate `json:"noVNCProxyServiceTemplate,omitempty"`
}

// NovaSpec is a whole Nova control plane: API, scheduler, metadata and one NovaCell per cell template.
//
// +kubebuilder:validation:XValidation:rule="!self.cellTemplates[?'cell0'].?metadataServiceTemplate.?enabled.orValue(false)",message="cell0 has no metadata service: cellTemplates.cell0.metadataServiceTemplate.enabled must not be true",fieldPath=".cellTemplates"
// +kubebuilder:validation:XValidation:rule="!self.cellTemplates[?'cell0'].?noVNCProxyServiceTemplate.?enabled.orValue(false)",message="cell0 has no console proxy: cellTemplates.cell0.noVNCProxyServiceTemplate.enabled must not be true",fieldPath=".cellTemplates"
// +kubebuilder:validation:XValidation:rule="!self.?metadataServiceTemplate.?enabled.orValue(true) || !self.cellTemplates.exists(c, self.cellTemplates[c].?metadataServiceTemplate.?enabled.orValue(false))",message="metadata is either global or per cell: set metadataServiceTemplate.enabled to false before enabling it in a cell template",fieldPath=".metadataServiceTemplate"
// +kubebuilder:validation:XValidation:rule="self.cellTemplates.all(c, c == 'cell0' || has(self.cellTemplates[c].cellMessageBus))",message="every cell but cell0 needs cellMessageBus",fieldPath=".cellTemplates"
// +kubebuilder:validation:XValidation:rule="has(self.keystoneAuthURL) || has(self.keystoneAdminSecret)",message="keystoneAuthURL or keystoneAdminSecret is required",fieldPath=".keystoneAuthURL"
type NovaSpec struct {
	NovaServiceAuth `json:",inline"`
	// NodeSelector places every service whose template sets none.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations are those of every service whose template sets none.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// ContainerImage is the image of every service whose template names none (one image holding all of
	// Nova's services); the deployment's default per service when unset too.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9._-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$`
	ContainerImage string `json:"containerImage,omitempty"`
	// APIDatabase is the API database (nova_api).
	APIDatabase DatabaseAccess `json:"apiDatabase"`
	// APIMessageBus is the top-level message bus (API, scheduler, superconductor).
	APIMessageBus MessageBusAccess `json:"apiMessageBus"`
	// APIServiceTemplate is the compute API service.
	// +optional
	APIServiceTemplate NovaServiceBase `json:"apiServiceTemplate,omitempty"`
	// SchedulerServiceTemplate is the scheduler.
	// +optional
	SchedulerServiceTemplate NovaServiceBase `json:"schedulerServiceTemplate,omitempty"`
	// MetadataServiceTemplate is the global metadata service.
	// +optional
	MetadataServiceTemplate NovaMetadataTemplate `json:"metadataServiceTemplate,omitempty"`
	// CellTemplates holds one template per cell, keyed by cell name; cell0 is required (at most 10 cells).
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=10
	// +kubebuilder:validation:XValidation:rule="'cell0' in self",message="cellTemplates must contain cell0"
	// +kubebuilder:validation:XValidation:rule="self.all(c, c.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && size(c) <= 40)",message="cellTemplates keys are cell names: DNS-1123 labels of at most 40 characters"
	CellTemplates map[string]NovaCellTemplate `json:"cellTemplates"`
	// Flavors are created through this Nova's own API once it answers, as OpenStack-Helm's bootstrap
	// does: a new API database has none, and a server needs one. A flavor already there with the same
	// name and size is adopted; one of another size is refused (Nova flavors cannot change). A flavor
	// removed from the list stays in Nova: instances may still use it.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=50
	Flavors []Flavor `json:"flavors,omitempty"`
	// KeystoneAdminSecret names a Secret (same namespace) holding the clouds.yaml of Keystone's
	// administrator (key clouds.yaml; key cloud names the cloud when the file has several), such as the
	// Secret keystone-clouds a KupenstackConfiguration writes. The Nova then creates its service user
	// (serviceUser, with the password of spec.secret) with the roles admin and service in project service
	// of domain Default, before anything uses it, sets the password of one that exists, and deletes the user when
	// the Nova goes if it created it (a user left when the Secret is gone by then, as in a namespace
	// deleted whole). keystoneAuthURL defaults to the clouds.yaml's auth_url. Unset, the service user
	// must exist.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	KeystoneAdminSecret string `json:"keystoneAdminSecret,omitempty"`
}

// Flavor is a compute flavor: a name and a size.
type Flavor struct {
	// Name is the flavor's name (and its ID in Nova, unless id is set).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Name string `json:"name"`
	// ID is the flavor's ID in Nova; the name when unset.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	ID string `json:"id,omitempty"`
	// VCPUs is the number of virtual CPUs.
	// +kubebuilder:validation:Minimum=1
	VCPUs int32 `json:"vcpus"`
	// RAM is the memory in MiB.
	// +kubebuilder:validation:Minimum=1
	RAM int32 `json:"ram"`
	// Disk is the root disk in GiB (0: the image's size).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Disk int32 `json:"disk,omitempty"`
}

// CellSummary is one cell's state as the Nova sees it.
type CellSummary struct {
	// Name is the cell's name.
	Name string `json:"name"`
	// NovaCell names the NovaCell created for it.
	// +optional
	NovaCell string `json:"novaCell,omitempty"`
	// Ready is true once the cell's NovaCell is ready.
	// +optional
	Ready bool `json:"ready,omitempty"`
}

// NovaStatus is the state of a Nova.
type NovaStatus struct {
	lifecycle.CommonStatus `json:",inline"`
	// Cells is the state of each cell.
	// +optional
	// +listType=map
	// +listMapKey=name
	Cells []CellSummary `json:"cells,omitempty"`
	// APIReady, SchedulerReady and MetadataReady are the ready instance counts of the services.
	// +optional
	APIReady int32 `json:"apiReady,omitempty"`
	// +optional
	SchedulerReady int32 `json:"schedulerReady,omitempty"`
	// +optional
	MetadataReady int32 `json:"metadataReady,omitempty"`
	// Flavors names the spec's flavors in Nova (created or adopted).
	// +optional
	Flavors []string `json:"flavors,omitempty"`
}

// Nova is a whole Nova control plane with cells v2.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=novas,categories=stackflow;openstack;nova
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Step",type=string,JSONPath=`.status.currentStep`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Nova struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NovaSpec   `json:"spec"`
	Status NovaStatus `json:"status,omitempty"`
}

// NovaList is a list of Nova.
//
// +kubebuilder:object:root=true
type NovaList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Nova `json:"items"`
}

// NovaCellSpec is one cell: its conductor, optionally its metadata service, and its console proxy.
//
// +kubebuilder:validation:XValidation:rule="self.cellName != 'cell0' || has(self.apiDatabaseHostname)",message="cell0 runs the superconductor: apiDatabaseHostname is required",fieldPath=".apiDatabaseHostname"
// +kubebuilder:validation:XValidation:rule="!self.?hasAPIAccess.orValue(false) || has(self.apiDatabaseHostname)",message="hasAPIAccess needs apiDatabaseHostname",fieldPath=".apiDatabaseHostname"
// +kubebuilder:validation:XValidation:rule="self.cellName != 'cell0' || !self.?metadataServiceTemplate.?enabled.orValue(false)",message="cell0 has no metadata service",fieldPath=".metadataServiceTemplate.enabled"
// +kubebuilder:validation:XValidation:rule="self.cellName != 'cell0' || !self.?noVNCProxyServiceTemplate.?enabled.orValue(false)",message="cell0 has no console proxy",fieldPath=".noVNCProxyServiceTemplate.enabled"
// +kubebuilder:validation:XValidation:rule="has(self.keystoneAuthURL)",message="keystoneAuthURL is required",fieldPath=".keystoneAuthURL"
type NovaCellSpec struct {
	NovaServiceAuth `json:",inline"`
	DatabaseNames   `json:",inline"`
	// CellName is the cell's name in Nova's cell mappings.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="cellName is immutable"
	CellName string `json:"cellName"`
	// CellDatabaseHostname is the cell database server's DNS name or IP address.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`isIP(self) || self.matches(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')`,message="cellDatabaseHostname must be an IP address or a DNS name"
	CellDatabaseHostname string `json:"cellDatabaseHostname"`
	// CellDatabaseUser is the cell database user.
	// +optional
	// +kubebuilder:default=nova_cell
	// +kubebuilder:validation:MaxLength=80
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9_]+$`
	CellDatabaseUser string `json:"cellDatabaseUser,omitempty"`
	// APIDatabaseHostname is the API database server; required for cell0 and with hasAPIAccess.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`isIP(self) || self.matches(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')`,message="apiDatabaseHostname must be an IP address or a DNS name"
	APIDatabaseHostname string `json:"apiDatabaseHostname,omitempty"`
	// APIDatabaseUser is the API database user.
	// +optional
	// +kubebuilder:default=nova_api
	// +kubebuilder:validation:MaxLength=80
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9_]+$`
	APIDatabaseUser string `json:"apiDatabaseUser,omitempty"`
	// HasAPIAccess lets the cell's services reach the API database (upcalls).
	// +optional
	HasAPIAccess bool `json:"hasAPIAccess,omitempty"`
	// TransportURLSecret names the Secret holding the cell's transport_url; it may be an existing
	// cell's connection Secret (cell0 uses the API message bus's).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	TransportURLSecret string `json:"transportURLSecret"`
	// ConductorServiceTemplate is the cell's conductor.
	// +optional
	ConductorServiceTemplate NovaServiceBase `json:"conductorServiceTemplate,omitempty"`
	// MetadataServiceTemplate is the cell's own metadata service (disabled unless enabled is true).
	// +optional
	MetadataServiceTemplate NovaMetadataTemplate `json:"metadataServiceTemplate,omitempty"`
	// NoVNCProxyServiceTemplate is the cell's console proxy (enabled unless set false; never in cell0).
	// +optional
	NoVNCProxyServiceTemplate NovaNoVNCProxyTemplate `json:"noVNCProxyServiceTemplate,omitempty"`
}

// NovaCellStatus is the state of a NovaCell.
type NovaCellStatus struct {
	lifecycle.CommonStatus `json:",inline"`
	// CellUUID is the cell's UUID in Nova's cell mappings.
	// +optional
	CellUUID string `json:"cellUUID,omitempty"`
	// ConductorReady, MetadataReady and NoVNCProxyReady are the ready instance counts of the services.
	// +optional
	ConductorReady int32 `json:"conductorReady,omitempty"`
	// +optional
	MetadataReady int32 `json:"metadataReady,omitempty"`
	// +optional
	NoVNCProxyReady int32 `json:"noVNCProxyReady,omitempty"`
	// Computes is the number of compute hosts discovered in the cell.
	// +optional
	Computes int32 `json:"computes,omitempty"`
}

// NovaCell is one Nova cell.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=stackflow;openstack;nova
// +kubebuilder:printcolumn:name="Cell",type=string,JSONPath=`.spec.cellName`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Computes",type=integer,JSONPath=`.status.computes`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NovaCell struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NovaCellSpec   `json:"spec"`
	Status NovaCellStatus `json:"status,omitempty"`
}

// NovaCellList is a list of NovaCell.
//
// +kubebuilder:object:root=true
type NovaCellList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NovaCell `json:"items"`
}
