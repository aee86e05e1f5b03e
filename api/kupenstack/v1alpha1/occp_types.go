package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/api/lifecycle"
)

// ChartRef locates a Helm chart.
type ChartRef struct {
	// Repository is the chart repository's URL (http, https, oci or file).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https', 'oci', 'file']",message="repository must be an http, https, oci or file URL"
	Repository string `json:"repository"`
	// Name is the chart's name in the repository.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// Version is the chart's semantic version (e.g. 0.3.1 or 2024.1.0+abc).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^v?(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`
	Version string `json:"version"`
}

// ConfigSnippet is the content of one configuration file override (an oslo.config INI snippet).
//
// +kubebuilder:validation:MaxLength=32768
type ConfigSnippet string

// ImageReference is a container image reference: registry/repository[:tag][@sha256:digest].
//
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=512
// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9._-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$`
type ImageReference string

// ComponentProfile configures one OpenStack (or infrastructure) component's Helm release.
type ComponentProfile struct {
	// Enabled deploys the component; unset inherits from the parent profile (enabled at the root).
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// External says the site provides the component outside this cloud (a database or message bus its
	// operators already run): no release is deployed for it (one deployed before is uninstalled), and
	// the components that depend on it roll out without waiting for it. Their values name its endpoints.
	// An external component needs no chart. Unset inherits from the parent profile (false at the root).
	// +optional
	External *bool `json:"external,omitempty"`
	// Chart is the component's chart; unset inherits from the parent profile or the built-in default.
	// +optional
	Chart *ChartRef `json:"chart,omitempty"`
	// Values are Helm values merged over the parent profile's (free-form).
	// +optional
	// +kubebuilder:validation:Type=object
	Values *apiextensionsv1.JSON `json:"values,omitempty"`
	// Config holds oslo.config INI snippets per configuration file (e.g. nova.conf).
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(f, f.matches('^[A-Za-z0-9][A-Za-z0-9_.-]*$') && size(f) <= 128)",message="config keys are configuration file names such as nova.conf"
	Config map[string]ConfigSnippet `json:"config,omitempty"`
	// Images overrides container images by the chart's image key.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	Images map[string]ImageReference `json:"images,omitempty"`
	// Replicas sets the replicas of the chart's Deployments by pod group (pod.replicas.<group>).
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, self[k] >= 0 && self[k] <= 100)",message="replicas must be between 0 and 100"
	Replicas map[string]int32 `json:"replicas,omitempty"`
	// ReadinessTimeout bounds how long the component's release may take to become Ready before it is
	// rolled back (default 10m).
	// +optional
	ReadinessTimeout *metav1.Duration `json:"readinessTimeout,omitempty"`
}

// OpenStackCloudConfigurationProfileSpec configures the components of the cloud. A profile may derive
// from a parent: its components are merged over the parent's, value by value.
type OpenStackCloudConfigurationProfileSpec struct {
	// From names the parent profile.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	From string `json:"from,omitempty"`
	// Components configures each component, keyed by component name.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(c, c in ['keystone', 'glance', 'placement', 'nova', 'neutron', 'cinder', 'horizon', 'heat', 'ironic', 'barbican', 'octavia', 'mariadb', 'rabbitmq', 'memcached', 'libvirt', 'openvswitch', 'ovn', 'ingress'])",message="components keys must be known components: keystone, glance, placement, nova, neutron, cinder, horizon, heat, ironic, barbican, octavia, mariadb, rabbitmq, memcached, libvirt, openvswitch, ovn, ingress"
	Components map[string]ComponentProfile `json:"components,omitempty"`
}

// OpenStackCloudConfigurationProfileStatus is the state of a profile.
type OpenStackCloudConfigurationProfileStatus struct {
	lifecycle.CommonStatus `json:",inline"`
	// Nodes is the number of OpenstackNodes following the profile.
	// +optional
	Nodes int32 `json:"nodes,omitempty"`
}

// OpenStackCloudConfigurationProfile ("OCCP") is a named configuration of the cloud's components.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=occp,categories=stackflow;kupenstack
// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.from) || self.spec.from != self.metadata.name",message="spec.from must name another profile, not the profile itself"
// +kubebuilder:printcolumn:name="From",type=string,JSONPath=`.spec.from`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.nodes`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type OpenStackCloudConfigurationProfile struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec   OpenStackCloudConfigurationProfileSpec   `json:"spec,omitempty"`
	Status OpenStackCloudConfigurationProfileStatus `json:"status,omitempty"`
}

// OpenStackCloudConfigurationProfileList is a list of OpenStackCloudConfigurationProfile.
//
// +kubebuilder:object:root=true
type OpenStackCloudConfigurationProfileList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []OpenStackCloudConfigurationProfile `json:"items"`
}
