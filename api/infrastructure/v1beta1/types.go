package v1beta1

// OpenStackIdentityReference names the Secret holding a clouds.yaml and the cloud in it to use.
type OpenStackIdentityReference struct {
	// Name is the Secret's name (same namespace); the clouds.yaml is under the key clouds.yaml.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
	// CloudName is the cloud's name in the clouds.yaml.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	CloudName string `json:"cloudName"`
	// Region overrides the cloud's region.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Region string `json:"region,omitempty"`
}

// ImageFilter selects a Glance image by properties.
//
// +kubebuilder:validation:XValidation:rule="has(self.name) || has(self.tags)",message="filter must set name or tags"
type ImageFilter struct {
	// Name is the image's name.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Name *string `json:"name,omitempty"`
	// Tags are tags the image must all have.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=255
	Tags []string `json:"tags,omitempty"`
}

// ImageParam selects a Glance image by ID or by filter: exactly one of them.
//
// +kubebuilder:validation:XValidation:rule="has(self.id) != has(self.filter)",message="exactly one of image id or image filter must be set"
type ImageParam struct {
	// ID is the image's UUID.
	// +optional
	// +kubebuilder:validation:Format=uuid
	ID *string `json:"id,omitempty"`
	// Filter selects the image by name or tags; it must match exactly one image.
	// +optional
	Filter *ImageFilter `json:"filter,omitempty"`
}

// NeutronTag is a Neutron resource tag: no commas.
//
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=255
// +kubebuilder:validation:Pattern=`^[^,]+$`
type NeutronTag string

// FilterByNeutronTags selects Neutron resources by their tags.
type FilterByNeutronTags struct {
	// Tags: the resource has all of them.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	Tags []NeutronTag `json:"tags,omitempty"`
	// TagsAny: the resource has at least one of them.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	TagsAny []NeutronTag `json:"tagsAny,omitempty"`
	// NotTags: the resource does not have all of them.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	NotTags []NeutronTag `json:"notTags,omitempty"`
	// NotTagsAny: the resource has none of them.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	NotTagsAny []NeutronTag `json:"notTagsAny,omitempty"`
}

// NetworkFilter selects a Neutron network by properties.
type NetworkFilter struct {
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Name string `json:"name,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Description string `json:"description,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=255
	ProjectID string `json:"projectID,omitempty"`

	FilterByNeutronTags `json:",inline"`
}

// NetworkParam selects a network by ID or by filter: exactly one of them.
//
// +kubebuilder:validation:XValidation:rule="has(self.id) != has(self.filter)",message="exactly one of network id or network filter must be set"
type NetworkParam struct {
	// ID is the network's UUID.
	// +optional
	// +kubebuilder:validation:Format=uuid
	ID *string `json:"id,omitempty"`
	// Filter selects the network; it must match exactly one.
	// +optional
	Filter *NetworkFilter `json:"filter,omitempty"`
}

// SubnetFilter selects a subnet by properties.
type SubnetFilter struct {
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Name string `json:"name,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Description string `json:"description,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=255
	ProjectID string `json:"projectID,omitempty"`
	// +optional
	// +kubebuilder:validation:Enum=4;6
	IPVersion int32 `json:"ipVersion,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="gatewayIP must be an IP address"
	GatewayIP string `json:"gatewayIP,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="cidr must be a CIDR such as 10.0.0.0/24"
	CIDR string `json:"cidr,omitempty"`

	FilterByNeutronTags `json:",inline"`
}

// SubnetParam selects a subnet by ID or by filter: exactly one of them.
//
// +kubebuilder:validation:XValidation:rule="has(self.id) != has(self.filter)",message="exactly one of subnet id or subnet filter must be set"
type SubnetParam struct {
	// ID is the subnet's UUID.
	// +optional
	// +kubebuilder:validation:Format=uuid
	ID *string `json:"id,omitempty"`
	// Filter selects the subnet; it must match exactly one.
	// +optional
	Filter *SubnetFilter `json:"filter,omitempty"`
}

// SecurityGroupFilter selects a security group by properties.
type SecurityGroupFilter struct {
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Name string `json:"name,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Description string `json:"description,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=255
	ProjectID string `json:"projectID,omitempty"`

	FilterByNeutronTags `json:",inline"`
}

// SecurityGroupParam selects a security group by ID or by filter: exactly one of them.
//
// +kubebuilder:validation:XValidation:rule="has(self.id) != has(self.filter)",message="exactly one of security group id or security group filter must be set"
type SecurityGroupParam struct {
	// ID is the security group's UUID.
	// +optional
	// +kubebuilder:validation:Format=uuid
	ID *string `json:"id,omitempty"`
	// Filter selects the security group; it must match exactly one.
	// +optional
	Filter *SecurityGroupFilter `json:"filter,omitempty"`
}

// FixedIP asks for an address on a subnet, or a specific address.
//
// +kubebuilder:validation:XValidation:rule="has(self.subnet) || has(self.ipAddress)",message="fixedIP must set subnet or ipAddress"
type FixedIP struct {
	// Subnet is the subnet the address comes from.
	// +optional
	Subnet *SubnetParam `json:"subnet,omitempty"`
	// IPAddress is the address to ask for.
	// +optional
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="ipAddress must be an IPv4 or IPv6 address"
	IPAddress *string `json:"ipAddress,omitempty"`
}

// AddressPair is an address (and MAC) a port may also send from.
type AddressPair struct {
	// IPAddress is an address or CIDR.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isIP(self) || isCIDR(self)",message="ipAddress must be an IP address or a CIDR"
	IPAddress string `json:"ipAddress"`
	// MACAddress is the pair's MAC address.
	// +optional
	// +kubebuilder:validation:Pattern=`^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$`
	MACAddress *string `json:"macAddress,omitempty"`
}

// PortOpts describes one port of a server.
type PortOpts struct {
	// Network is the port's network; the first fixed IP's subnet's network when unset.
	// +optional
	Network *NetworkParam `json:"network,omitempty"`
	// Description is the port's description.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Description *string `json:"description,omitempty"`
	// NameSuffix is appended to the server's name to name the port; the port's index when unset.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9]([-_.a-zA-Z0-9]*[a-zA-Z0-9])?$`
	NameSuffix *string `json:"nameSuffix,omitempty"`
	// FixedIPs are the port's addresses.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	FixedIPs []FixedIP `json:"fixedIPs,omitempty"`
	// SecurityGroups are the port's security groups (the cluster's managed ones come in addition).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	SecurityGroups []SecurityGroupParam `json:"securityGroups,omitempty"`
	// Tags are set on the port.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	Tags []NeutronTag `json:"tags,omitempty"`
	// Trunk creates a trunk on the port.
	// +optional
	Trunk *bool `json:"trunk,omitempty"`
	// AdminStateUp sets the port's administrative state.
	// +optional
	AdminStateUp *bool `json:"adminStateUp,omitempty"`
	// MACAddress asks for a MAC address.
	// +optional
	// +kubebuilder:validation:Pattern=`^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$`
	MACAddress *string `json:"macAddress,omitempty"`
	// AllowedAddressPairs are addresses the port may also send from.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	AllowedAddressPairs []AddressPair `json:"allowedAddressPairs,omitempty"`
	// VNICType is the port's binding:vnic_type.
	// +optional
	// +kubebuilder:validation:Enum=normal;direct;direct-physical;macvtap;baremetal;virtio-forwarder
	VNICType *string `json:"vnicType,omitempty"`
	// DisablePortSecurity turns port security (and security groups) off for the port.
	// +optional
	DisablePortSecurity *bool `json:"disablePortSecurity,omitempty"`
	// PropagateUplinkStatus propagates the uplink status to the port.
	// +optional
	PropagateUplinkStatus *bool `json:"propagateUplinkStatus,omitempty"`
}

// BlockDeviceVolume is a Cinder volume's type and availability zone.
type BlockDeviceVolume struct {
	// Type is the volume type; the cloud's default when unset.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Type string `json:"type,omitempty"`
	// AvailabilityZone is the volume's availability zone; the server's when unset.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	AvailabilityZone *string `json:"availabilityZone,omitempty"`
}

// RootVolume boots the server from a new Cinder volume made from the image.
type RootVolume struct {
	// SizeGiB is the volume's size.
	// +kubebuilder:validation:Minimum=1
	SizeGiB int32 `json:"sizeGiB"`

	BlockDeviceVolume `json:",inline"`
}

// BlockDeviceStorage is where an additional block device lives.
//
// +kubebuilder:validation:XValidation:rule="self.type == 'Volume' || !has(self.volume)",message="volume is only valid when type is Volume"
type BlockDeviceStorage struct {
	// Type is Local (ephemeral, on the hypervisor) or Volume (Cinder).
	// +kubebuilder:validation:Enum=Local;Volume
	Type string `json:"type"`
	// Volume sets the volume's type and availability zone.
	// +optional
	Volume *BlockDeviceVolume `json:"volume,omitempty"`
}

// Types of BlockDeviceStorage.
const (
	StorageLocal  = "Local"
	StorageVolume = "Volume"
)

// AdditionalBlockDevice is a disk attached to the server besides its root disk.
type AdditionalBlockDevice struct {
	// Name identifies the device; the volume is named <server>-<name>. "root" is reserved.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self != 'root'",message="additionalBlockDevices name 'root' is reserved for the root volume"
	Name string `json:"name"`
	// SizeGiB is the device's size.
	// +kubebuilder:validation:Minimum=1
	SizeGiB int32 `json:"sizeGiB"`
	// Storage is where the device lives.
	Storage BlockDeviceStorage `json:"storage"`
}

// ServerGroupFilter selects a server group by name.
type ServerGroupFilter struct {
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Name *string `json:"name,omitempty"`
}

// ServerGroupParam selects a server group by ID or by filter: exactly one of them.
//
// +kubebuilder:validation:XValidation:rule="has(self.id) != has(self.filter)",message="exactly one of server group id or server group filter must be set"
type ServerGroupParam struct {
	// ID is the server group's UUID.
	// +optional
	// +kubebuilder:validation:Format=uuid
	ID *string `json:"id,omitempty"`
	// Filter selects the server group.
	// +optional
	Filter *ServerGroupFilter `json:"filter,omitempty"`
}

// ServerMetadata is one key/value of the server's metadata.
type ServerMetadata struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Key string `json:"key"`
	// +kubebuilder:validation:MaxLength=255
	Value string `json:"value"`
}

// InstanceState is a Nova server's state as stackflow reports it.
type InstanceState string

// Instance states.
const (
	InstanceStateBuild    InstanceState = "BUILD"
	InstanceStateActive   InstanceState = "ACTIVE"
	InstanceStateError    InstanceState = "ERROR"
	InstanceStateStopped  InstanceState = "STOPPED"
	InstanceStateShutoff  InstanceState = "SHUTOFF"
	InstanceStateDeleted  InstanceState = "DELETED"
	InstanceStateUnknown  InstanceState = "UNKNOWN"
	InstanceStateNotFound InstanceState = "NOT_FOUND"
)

// PortStatus is one port the workflow created.
type PortStatus struct {
	// ID is the port's UUID.
	ID string `json:"id"`
}

// VolumeStatus is one volume the workflow created.
type VolumeStatus struct {
	// Name is the device's name (root or an additional block device's).
	Name string `json:"name"`
	// ID is the volume's UUID.
	ID string `json:"id"`
}

// ServerResources is what the workflow recorded it created for a server; cleanup is driven by it,
// never by re-reading the spec.
type ServerResources struct {
	// Ports created for the server, in spec order.
	// +optional
	// +listType=atomic
	Ports []PortStatus `json:"ports,omitempty"`
	// Volumes created for the server.
	// +optional
	// +listType=atomic
	Volumes []VolumeStatus `json:"volumes,omitempty"`
	// Trunks created on the server's ports (IDs).
	// +optional
	// +listType=atomic
	Trunks []string `json:"trunks,omitempty"`
	// FloatingIPID is the floating IP created (or adopted) for the server.
	// +optional
	FloatingIPID string `json:"floatingIPID,omitempty"`
}
