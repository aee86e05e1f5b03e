package activities

// The shapes below are the server parts of the infrastructure.cluster.x-k8s.io API (OpenStackServer,
// OpenStackMachine, the OpenStackCluster bastion), with the same JSON names, so a workflow decodes an
// object's spec straight into them and hands them to the activities. They hold references, never secrets.

// ServerSpec is what one OpenStack server is made of.
type ServerSpec struct {
	Flavor                 *string                 `json:"flavor,omitempty"`
	FlavorID               *string                 `json:"flavorID,omitempty"`
	Image                  ImageParam              `json:"image"`
	SSHKeyName             string                  `json:"sshKeyName,omitempty"`
	Ports                  []PortOpts              `json:"ports,omitempty"`
	SecurityGroups         []SecurityGroupParam    `json:"securityGroups,omitempty"`
	Tags                   []string                `json:"tags,omitempty"`
	ServerMetadata         []ServerMetadata        `json:"serverMetadata,omitempty"`
	ConfigDrive            *bool                   `json:"configDrive,omitempty"`
	RootVolume             *RootVolume             `json:"rootVolume,omitempty"`
	AdditionalBlockDevices []AdditionalBlockDevice `json:"additionalBlockDevices,omitempty"`
	ServerGroup            *ServerGroupParam       `json:"serverGroup,omitempty"`
	AvailabilityZone       *string                 `json:"availabilityZone,omitempty"`
	IdentityRef            *IdentityRef            `json:"identityRef,omitempty"`
	UserDataRef            *LocalObjectRef         `json:"userDataRef,omitempty"`
}

// IdentityRef names the Secret with clouds.yaml and the cloud in it, in the object's namespace.
type IdentityRef struct {
	Name      string `json:"name"`
	CloudName string `json:"cloudName"`
	Region    string `json:"region,omitempty"`
}

// LocalObjectRef names an object in the same namespace.
type LocalObjectRef struct {
	Name string `json:"name"`
}

// ImageParam is a Glance image by ID or by filter (name and/or tags).
type ImageParam struct {
	ID     *string      `json:"id,omitempty"`
	Filter *ImageFilter `json:"filter,omitempty"`
}

// ImageFilter selects exactly one image.
type ImageFilter struct {
	Name *string  `json:"name,omitempty"`
	Tags []string `json:"tags,omitempty"`
}

// FilterByNeutronTags filters Neutron resources by tags.
type FilterByNeutronTags struct {
	Tags       []string `json:"tags,omitempty"`
	TagsAny    []string `json:"tagsAny,omitempty"`
	NotTags    []string `json:"notTags,omitempty"`
	NotTagsAny []string `json:"notTagsAny,omitempty"`
}

// NetworkParam is a Neutron network by ID or filter.
type NetworkParam struct {
	ID     *string        `json:"id,omitempty"`
	Filter *NetworkFilter `json:"filter,omitempty"`
}

// NetworkFilter selects exactly one network.
type NetworkFilter struct {
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	ProjectID   string `json:"projectID,omitempty"`
	FilterByNeutronTags
}

// SubnetParam is a Neutron subnet by ID or filter.
type SubnetParam struct {
	ID     *string       `json:"id,omitempty"`
	Filter *SubnetFilter `json:"filter,omitempty"`
}

// SubnetFilter selects exactly one subnet (of the port's network).
type SubnetFilter struct {
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	ProjectID   string `json:"projectID,omitempty"`
	IPVersion   int    `json:"ipVersion,omitempty"`
	GatewayIP   string `json:"gatewayIP,omitempty"`
	CIDR        string `json:"cidr,omitempty"`
	FilterByNeutronTags
}

// SecurityGroupParam is a security group by ID or filter.
type SecurityGroupParam struct {
	ID     *string              `json:"id,omitempty"`
	Filter *SecurityGroupFilter `json:"filter,omitempty"`
}

// SecurityGroupFilter selects exactly one security group.
type SecurityGroupFilter struct {
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	ProjectID   string `json:"projectID,omitempty"`
	FilterByNeutronTags
}

// ServerGroupParam is a Nova server group by ID or name.
type ServerGroupParam struct {
	ID     *string            `json:"id,omitempty"`
	Filter *ServerGroupFilter `json:"filter,omitempty"`
}

// ServerGroupFilter selects a server group by name.
type ServerGroupFilter struct {
	Name *string `json:"name,omitempty"`
}

// ServerMetadata is one metadata item of the server.
type ServerMetadata struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// PortOpts describes one port of the server.
type PortOpts struct {
	Network        *NetworkParam        `json:"network,omitempty"`
	Description    *string              `json:"description,omitempty"`
	NameSuffix     *string              `json:"nameSuffix,omitempty"`
	FixedIPs       []FixedIP            `json:"fixedIPs,omitempty"`
	SecurityGroups []SecurityGroupParam `json:"securityGroups,omitempty"`
	Tags           []string             `json:"tags,omitempty"`
	PortFields
}

// PortFields are the port settings that need no resolution.
type PortFields struct {
	AdminStateUp          *bool         `json:"adminStateUp,omitempty"`
	MACAddress            *string       `json:"macAddress,omitempty"`
	AllowedAddressPairs   []AddressPair `json:"allowedAddressPairs,omitempty"`
	VNICType              *string       `json:"vnicType,omitempty"`
	DisablePortSecurity   *bool         `json:"disablePortSecurity,omitempty"`
	PropagateUplinkStatus *bool         `json:"propagateUplinkStatus,omitempty"`
}

// AddressPair is an extra address a port may send from.
type AddressPair struct {
	IPAddress  string  `json:"ipAddress"`
	MACAddress *string `json:"macAddress,omitempty"`
}

// FixedIP asks for an address on a subnet and/or a specific address.
type FixedIP struct {
	Subnet    *SubnetParam `json:"subnet,omitempty"`
	IPAddress *string      `json:"ipAddress,omitempty"`
}

// RootVolume makes the server boot from a new volume created from its image.
type RootVolume struct {
	SizeGiB int `json:"sizeGiB"`
	BlockDeviceVolume
}

// BlockDeviceVolume holds Cinder options of a volume.
type BlockDeviceVolume struct {
	Type             string  `json:"type,omitempty"`
	AvailabilityZone *string `json:"availabilityZone,omitempty"`
}

// AdditionalBlockDevice is an extra disk: a Cinder volume or local ephemeral storage.
type AdditionalBlockDevice struct {
	Name    string             `json:"name"`
	SizeGiB int                `json:"sizeGiB"`
	Storage BlockDeviceStorage `json:"storage"`
}

// BlockDeviceStorage is Local (ephemeral) or Volume (Cinder).
type BlockDeviceStorage struct {
	Type   string             `json:"type"`
	Volume *BlockDeviceVolume `json:"volume,omitempty"`
}

// Block device storage types.
const (
	StorageLocal  = "Local"
	StorageVolume = "Volume"
)

// ResolvedServer is a ServerSpec with every reference resolved to an ID; it is what the server is
// built from, recorded in workflow state and shown in status.resolved.
type ResolvedServer struct {
	ImageID       string         `json:"imageID"`
	FlavorID      string         `json:"flavorID"`
	ServerGroupID string         `json:"serverGroupID,omitempty"`
	Ports         []ResolvedPort `json:"ports,omitempty"`
	// FloatingNetworkID is the external network a floating IP comes from, when one was asked for.
	FloatingNetworkID string `json:"floatingNetworkID,omitempty"`
}

// ResolvedPort is a port with its network, subnets and security groups resolved, and its deterministic
// name and description.
type ResolvedPort struct {
	Name           string            `json:"name"`
	Description    string            `json:"description"`
	NetworkID      string            `json:"networkID"`
	Tags           []string          `json:"tags,omitempty"`
	FixedIPs       []ResolvedFixedIP `json:"fixedIPs,omitempty"`
	SecurityGroups []string          `json:"securityGroups,omitempty"`
	PortFields
}

// ResolvedFixedIP is a FixedIP with its subnet resolved.
type ResolvedFixedIP struct {
	SubnetID  *string `json:"subnet,omitempty"`
	IPAddress *string `json:"ipAddress,omitempty"`
}

// Address is one address of a server, in Kubernetes NodeAddress shape.
type Address struct {
	Type    string `json:"type"`
	Address string `json:"address"`
}
