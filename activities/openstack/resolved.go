package openstack

import infrav1 "github.com/stackflow/stackflow/api/infrastructure/v1beta1"

// Server specs have one source, the infrastructure.cluster.x-k8s.io API types: a workflow decodes an
// OpenStackServer's spec (or makes one of an OpenStackMachine's, as CAPO does) and hands it to
// ResolveServer. What follows is what resolving makes of it: IDs, deterministic names, and the port
// settings that need no resolution, recorded in workflow state and shown in status.

// PortFields are the port settings that need no resolution, as the spec's PortOpts give them.
type PortFields struct {
	AdminStateUp          *bool                 `json:"adminStateUp,omitempty"`
	MACAddress            *string               `json:"macAddress,omitempty"`
	AllowedAddressPairs   []infrav1.AddressPair `json:"allowedAddressPairs,omitempty"`
	VNICType              *string               `json:"vnicType,omitempty"`
	DisablePortSecurity   *bool                 `json:"disablePortSecurity,omitempty"`
	PropagateUplinkStatus *bool                 `json:"propagateUplinkStatus,omitempty"`
}

// portFields takes the settings that need no resolution from a port of the spec.
func portFields(p infrav1.PortOpts) PortFields {
	return PortFields{AdminStateUp: p.AdminStateUp, MACAddress: p.MACAddress, AllowedAddressPairs: p.AllowedAddressPairs,
		VNICType: p.VNICType, DisablePortSecurity: p.DisablePortSecurity, PropagateUplinkStatus: p.PropagateUplinkStatus}
}

// tagStrings are Neutron tags as strings.
func tagStrings[T ~string](tags []T) []string {
	out := make([]string, 0, len(tags))
	for _, t := range tags {
		out = append(out, string(t))
	}
	return out
}

// ResolvedServer is a server spec (the API's OpenStackServerSpec) with every reference resolved to an ID; it is what the server is
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
