package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/api/lifecycle"
)

// NovaAPISpec is the nova-api service on its own.
// +kubebuilder:validation:XValidation:rule="has(self.keystoneAuthURL)",message="keystoneAuthURL is required",fieldPath=".keystoneAuthURL"
type NovaAPISpec struct {
	NovaServiceBase `json:",inline"`
	NovaServiceAuth `json:",inline"`
	DatabaseNames   `json:",inline"`
	MappedCells     `json:",inline"`
	// APIDatabaseHostname is the API database server's DNS name or IP address.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`isIP(self) || self.matches(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')`,message="apiDatabaseHostname must be an IP address or a DNS name"
	APIDatabaseHostname string `json:"apiDatabaseHostname"`
	// APIDatabaseUser is the API database user.
	// +optional
	// +kubebuilder:default=nova_api
	// +kubebuilder:validation:MaxLength=80
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9_]+$`
	APIDatabaseUser string `json:"apiDatabaseUser,omitempty"`
	Cell0Database   `json:",inline"`
	// TransportURLSecret names the Secret holding the API message bus's transport_url.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	TransportURLSecret string `json:"transportURLSecret,omitempty"`
}

// Cell0Database is cell0's database, which the top-level services (API, scheduler, global metadata) reach
// besides the API database: their service records live there, and instances that failed to schedule.
// Its name is DatabaseNames' cellDatabaseName (nova_cell0 when unset), its password the service
// Secret's cell-database key.
type Cell0Database struct {
	// Cell0DatabaseHostname is cell0's database server.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`isIP(self) || self.matches(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')`,message="cell0DatabaseHostname must be an IP address or a DNS name"
	Cell0DatabaseHostname string `json:"cell0DatabaseHostname"`
	// Cell0DatabaseUser is cell0's database user.
	// +optional
	// +kubebuilder:default=nova_cell0
	// +kubebuilder:validation:MaxLength=80
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9_]+$`
	Cell0DatabaseUser string `json:"cell0DatabaseUser,omitempty"`
}

// NovaAPIStatus is the state of a NovaAPI.
type NovaAPIStatus struct {
	lifecycle.CommonStatus `json:",inline"`
	ServiceStatus          `json:",inline"`
	// Endpoint is the compute API's public URL as registered in Keystone.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
}

// NovaAPI is the Nova compute API service.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=stackflow;openstack;nova
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready-Replicas",type=integer,JSONPath=`.status.readyCount`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.status.endpoint`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NovaAPI struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NovaAPISpec   `json:"spec"`
	Status NovaAPIStatus `json:"status,omitempty"`
}

// NovaAPIList is a list of NovaAPI.
//
// +kubebuilder:object:root=true
type NovaAPIList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NovaAPI `json:"items"`
}

// NovaSchedulerSpec is the nova-scheduler service on its own.
// +kubebuilder:validation:XValidation:rule="has(self.keystoneAuthURL)",message="keystoneAuthURL is required",fieldPath=".keystoneAuthURL"
type NovaSchedulerSpec struct {
	NovaServiceBase `json:",inline"`
	NovaServiceAuth `json:",inline"`
	DatabaseNames   `json:",inline"`
	MappedCells     `json:",inline"`
	Cell0Database   `json:",inline"`
	// APIDatabaseHostname is the API database server's DNS name or IP address.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`isIP(self) || self.matches(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')`,message="apiDatabaseHostname must be an IP address or a DNS name"
	APIDatabaseHostname string `json:"apiDatabaseHostname"`
	// APIDatabaseUser is the API database user.
	// +optional
	// +kubebuilder:default=nova_api
	// +kubebuilder:validation:MaxLength=80
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9_]+$`
	APIDatabaseUser string `json:"apiDatabaseUser,omitempty"`
	// TransportURLSecret names the Secret holding the API message bus's transport_url.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	TransportURLSecret string `json:"transportURLSecret"`
}

// NovaSchedulerStatus is the state of a NovaScheduler.
type NovaSchedulerStatus struct {
	lifecycle.CommonStatus `json:",inline"`
	ServiceStatus          `json:",inline"`
}

// NovaScheduler is the Nova scheduler service.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=stackflow;openstack;nova
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready-Replicas",type=integer,JSONPath=`.status.readyCount`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NovaScheduler struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NovaSchedulerSpec   `json:"spec"`
	Status NovaSchedulerStatus `json:"status,omitempty"`
}

// NovaSchedulerList is a list of NovaScheduler.
//
// +kubebuilder:object:root=true
type NovaSchedulerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NovaScheduler `json:"items"`
}

// NovaConductorSpec is the nova-conductor service of one cell. cell0's conductor is the superconductor:
// it also reaches the API database.
//
// +kubebuilder:validation:XValidation:rule="self.cellName != 'cell0' || has(self.apiDatabaseHostname)",message="the cell0 conductor is the superconductor: apiDatabaseHostname is required",fieldPath=".apiDatabaseHostname"
// +kubebuilder:validation:XValidation:rule="has(self.keystoneAuthURL)",message="keystoneAuthURL is required",fieldPath=".keystoneAuthURL"
type NovaConductorSpec struct {
	NovaServiceBase `json:",inline"`
	NovaServiceAuth `json:",inline"`
	DatabaseNames   `json:",inline"`
	// CellName is the cell the conductor serves.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
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
	// APIDatabaseHostname is the API database server; required for cell0 (the superconductor) and for
	// cells with API access (upcalls).
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
	// TransportURLSecret names the Secret holding the cell's message-bus transport_url (the API
	// message bus for cell0).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	TransportURLSecret string `json:"transportURLSecret"`
}

// NovaConductorStatus is the state of a NovaConductor.
type NovaConductorStatus struct {
	lifecycle.CommonStatus `json:",inline"`
	ServiceStatus          `json:",inline"`
}

// NovaConductor is the Nova conductor service of one cell.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=stackflow;openstack;nova
// +kubebuilder:printcolumn:name="Cell",type=string,JSONPath=`.spec.cellName`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready-Replicas",type=integer,JSONPath=`.status.readyCount`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NovaConductor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NovaConductorSpec   `json:"spec"`
	Status NovaConductorStatus `json:"status,omitempty"`
}

// NovaConductorList is a list of NovaConductor.
//
// +kubebuilder:object:root=true
type NovaConductorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NovaConductor `json:"items"`
}

// NovaMetadataSpec is the nova-metadata service, global (no cellName) or for one cell.
//
// +kubebuilder:validation:XValidation:rule="has(self.cellName) || has(self.apiDatabaseHostname)",message="a global metadata service (no cellName) needs apiDatabaseHostname",fieldPath=".apiDatabaseHostname"
// +kubebuilder:validation:XValidation:rule="has(self.cellDatabaseHostname)",message="a metadata service needs cellDatabaseHostname (its cell's, or cell0's for the global one)",fieldPath=".cellDatabaseHostname"
// +kubebuilder:validation:XValidation:rule="has(self.keystoneAuthURL)",message="keystoneAuthURL is required",fieldPath=".keystoneAuthURL"
type NovaMetadataSpec struct {
	NovaServiceBase `json:",inline"`
	NovaServiceAuth `json:",inline"`
	DatabaseNames   `json:",inline"`
	// CellName is the cell served by a per-cell metadata service; empty for the global one.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self != 'cell0'",message="cell0 has no metadata service"
	CellName string `json:"cellName,omitempty"`
	// APIDatabaseHostname is the API database server (global metadata service).
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
	// CellDatabaseHostname is the cell database server: the cell's for a per-cell metadata service,
	// cell0's for the global one (where its service record lives).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule=`isIP(self) || self.matches(r'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')`,message="cellDatabaseHostname must be an IP address or a DNS name"
	CellDatabaseHostname string `json:"cellDatabaseHostname,omitempty"`
	// CellDatabaseUser is the cell database user.
	// +optional
	// +kubebuilder:default=nova_cell
	// +kubebuilder:validation:MaxLength=80
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9_]+$`
	CellDatabaseUser string `json:"cellDatabaseUser,omitempty"`
	// TransportURLSecret names the Secret holding the message bus's transport_url.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	TransportURLSecret string `json:"transportURLSecret,omitempty"`
}

// NovaMetadataStatus is the state of a NovaMetadata.
type NovaMetadataStatus struct {
	lifecycle.CommonStatus `json:",inline"`
	ServiceStatus          `json:",inline"`
	// Endpoint is the URL the metadata API answers on (its ready pod's address): where the data plane's
	// OVN metadata agents forward instances' requests.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
}

// NovaMetadata is the Nova metadata service.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=novametadata,categories=stackflow;openstack;nova
// +kubebuilder:printcolumn:name="Cell",type=string,JSONPath=`.spec.cellName`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready-Replicas",type=integer,JSONPath=`.status.readyCount`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NovaMetadata struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NovaMetadataSpec   `json:"spec"`
	Status NovaMetadataStatus `json:"status,omitempty"`
}

// NovaMetadataList is a list of NovaMetadata.
//
// +kubebuilder:object:root=true
type NovaMetadataList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NovaMetadata `json:"items"`
}

// NovaNoVNCProxySpec is the noVNC console proxy of one cell.
// +kubebuilder:validation:XValidation:rule="has(self.keystoneAuthURL)",message="keystoneAuthURL is required",fieldPath=".keystoneAuthURL"
type NovaNoVNCProxySpec struct {
	NovaServiceBase `json:",inline"`
	NovaServiceAuth `json:",inline"`
	DatabaseNames   `json:",inline"`
	// CellName is the cell whose consoles the proxy serves.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self != 'cell0'",message="cell0 has no console proxy"
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
	// TransportURLSecret names the Secret holding the cell's message-bus transport_url.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	TransportURLSecret string `json:"transportURLSecret,omitempty"`
}

// NovaNoVNCProxyStatus is the state of a NovaNoVNCProxy.
type NovaNoVNCProxyStatus struct {
	lifecycle.CommonStatus `json:",inline"`
	ServiceStatus          `json:",inline"`
	// Endpoint is the proxy's public URL (novncproxy_base_url).
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
}

// NovaNoVNCProxy is the noVNC console proxy of one cell.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=novanovncproxies,categories=stackflow;openstack;nova
// +kubebuilder:printcolumn:name="Cell",type=string,JSONPath=`.spec.cellName`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready-Replicas",type=integer,JSONPath=`.status.readyCount`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NovaNoVNCProxy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NovaNoVNCProxySpec   `json:"spec"`
	Status NovaNoVNCProxyStatus `json:"status,omitempty"`
}

// NovaNoVNCProxyList is a list of NovaNoVNCProxy.
//
// +kubebuilder:object:root=true
type NovaNoVNCProxyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NovaNoVNCProxy `json:"items"`
}
