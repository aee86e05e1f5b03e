package openstack

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/stackflow/stackflow/activities/internal/heartbeat"
	infrav1 "github.com/stackflow/stackflow/api/infrastructure/v1beta1"
)

func joinTags(t []infrav1.NeutronTag) string { return strings.Join(tagStrings(t), ",") }

// resolveNetwork finds exactly one network.
func resolveNetwork(ctx context.Context, neutron NetworkClient, p infrav1.NetworkParam) (string, error) {
	if p.ID != nil {
		n, err := neutron.GetNetwork(ctx, *p.ID)
		if err != nil {
			return "", classifyOS("network "+*p.ID, err)
		}
		return n.ID, nil
	}
	if p.Filter == nil {
		return "", notFound("network reference has neither id nor filter")
	}
	f := p.Filter
	all, err := neutron.ListNetworks(ctx, NetworkListOpts{Name: f.Name, Description: f.Description, ProjectID: f.ProjectID,
		Tags: joinTags(f.Tags), TagsAny: joinTags(f.TagsAny), NotTags: joinTags(f.NotTags), NotTagsAny: joinTags(f.NotTagsAny)})
	if err != nil {
		return "", classifyOS("list networks", err)
	}
	switch len(all) {
	case 0:
		return "", notFound("no network matches %+v", *f)
	case 1:
		return all[0].ID, nil
	}
	return "", ambiguous("%d networks match %+v", len(all), *f)
}

// ExternalNetwork finds the external network floating IPs come from: the one named by p, or the only
// network with router:external.
func resolveExternalNetwork(ctx context.Context, neutron NetworkClient, p *infrav1.NetworkParam) (string, error) {
	if p != nil {
		return resolveNetwork(ctx, neutron, *p)
	}
	yes := true
	all, err := neutron.ListNetworks(ctx, ExternalNetworkListOpts{ListOptsBuilder: NetworkListOpts{}, External: &yes})
	if err != nil {
		return "", classifyOS("list external networks", err)
	}
	switch len(all) {
	case 0:
		return "", notFound("no external network in this cloud")
	case 1:
		return all[0].ID, nil
	}
	return "", ambiguous("%d external networks; name one in the spec", len(all))
}

func resolveSubnet(ctx context.Context, neutron NetworkClient, networkID string, p infrav1.SubnetParam) (string, error) {
	if p.ID != nil {
		s, err := neutron.GetSubnet(ctx, *p.ID)
		if err != nil {
			return "", classifyOS("subnet "+*p.ID, err)
		}
		return s.ID, nil
	}
	if p.Filter == nil {
		return "", notFound("subnet reference has neither id nor filter")
	}
	f := p.Filter
	all, err := neutron.ListSubnets(ctx, SubnetListOpts{NetworkID: networkID, Name: f.Name, Description: f.Description, ProjectID: f.ProjectID,
		IPVersion: int(f.IPVersion), GatewayIP: f.GatewayIP, CIDR: f.CIDR,
		Tags: joinTags(f.Tags), TagsAny: joinTags(f.TagsAny), NotTags: joinTags(f.NotTags), NotTagsAny: joinTags(f.NotTagsAny)})
	if err != nil {
		return "", classifyOS("list subnets", err)
	}
	switch len(all) {
	case 0:
		return "", notFound("no subnet of network %s matches %+v", networkID, *f)
	case 1:
		return all[0].ID, nil
	}
	return "", ambiguous("%d subnets of network %s match %+v", len(all), networkID, *f)
}

func resolveSecurityGroup(ctx context.Context, neutron NetworkClient, p infrav1.SecurityGroupParam) (string, error) {
	if p.ID != nil {
		g, err := neutron.GetSecurityGroup(ctx, *p.ID)
		if err != nil {
			return "", classifyOS("security group "+*p.ID, err)
		}
		return g.ID, nil
	}
	if p.Filter == nil {
		return "", notFound("security group reference has neither id nor filter")
	}
	f := p.Filter
	all, err := neutron.ListSecurityGroups(ctx, SecGroupListOpts{Name: f.Name, Description: f.Description, ProjectID: f.ProjectID,
		Tags: joinTags(f.Tags), TagsAny: joinTags(f.TagsAny), NotTags: joinTags(f.NotTags), NotTagsAny: joinTags(f.NotTagsAny)})
	if err != nil {
		return "", classifyOS("list security groups", err)
	}
	switch len(all) {
	case 0:
		return "", notFound("no security group matches %+v", *f)
	case 1:
		return all[0].ID, nil
	}
	return "", ambiguous("%d security groups match %+v", len(all), *f)
}

// PortInput asks for one port, found again by its name and marker description on retry.
type PortInput struct {
	Identity Identity     `json:"identity"`
	Marker   Marker       `json:"marker"`
	Port     ResolvedPort `json:"port"`
}

// PortInfo is a port as created or adopted.
type PortInfo struct {
	ID       string   `json:"id"`
	Name     string   `json:"name"`
	MAC      string   `json:"mac,omitempty"`
	FixedIPs []string `json:"fixedIPs,omitempty"`
	Adopted  bool     `json:"adopted,omitempty"`
}

// portCreate adds the optional extensions (port security) to the base create options.
type portCreate struct {
	PortCreateOpts
	portSecurity *bool
}

func (p portCreate) ToPortCreateMap() (map[string]any, error) {
	m, err := p.PortCreateOpts.ToPortCreateMap()
	if err != nil || p.portSecurity == nil {
		return m, err
	}
	return PortSecurityCreateOpts{CreateOptsBuilder: p.PortCreateOpts, PortSecurityEnabled: p.portSecurity}.ToPortCreateMap()
}

// EnsurePort creates the port unless a port with its name and marker description exists on its network
// (a retry after a lost response or a crash), and makes sure it carries the marker tags.
func (o *OpenStack) EnsurePort(ctx context.Context, in PortInput) (*PortInfo, error) {
	return heartbeat.While(ctx, func(ctx context.Context) (*PortInfo, error) {
		neutron, err := o.networkFor(ctx, in.Identity)
		if err != nil {
			return nil, err
		}
		p := in.Port
		existing, err := findPort(ctx, neutron, p)
		if err != nil {
			return nil, err
		}
		info := &PortInfo{Adopted: existing != nil}
		port := existing
		if port == nil {
			opts := PortCreateOpts{NetworkID: p.NetworkID, Name: p.Name, Description: p.Description, AdminStateUp: p.AdminStateUp,
				PropagateUplinkStatus: p.PropagateUplinkStatus}
			if p.MACAddress != nil {
				opts.MACAddress = *p.MACAddress
			}
			if len(p.FixedIPs) > 0 {
				var ips []FixedIP
				for _, f := range p.FixedIPs {
					ip := FixedIP{}
					if f.SubnetID != nil {
						ip.SubnetID = *f.SubnetID
					}
					if f.IPAddress != nil {
						ip.IPAddress = *f.IPAddress
					}
					ips = append(ips, ip)
				}
				opts.FixedIPs = ips
			}
			disabled := p.DisablePortSecurity != nil && *p.DisablePortSecurity
			if !disabled {
				sgs := slices.Clone(p.SecurityGroups)
				if sgs == nil {
					sgs = []string{}
				}
				if len(sgs) > 0 {
					opts.SecurityGroups = &sgs
				}
			}
			for _, ap := range p.AllowedAddressPairs {
				pair := AddressPair{IPAddress: ap.IPAddress}
				if ap.MACAddress != nil {
					pair.MACAddress = *ap.MACAddress
				}
				opts.AllowedAddressPairs = append(opts.AllowedAddressPairs, pair)
			}
			if p.VNICType != nil {
				opts.ValueSpecs = &map[string]string{"binding:vnic_type": *p.VNICType}
			}
			var ps *bool
			if p.DisablePortSecurity != nil {
				enabled := !*p.DisablePortSecurity
				ps = &enabled
			}
			port, err = neutron.CreatePort(ctx, portCreate{PortCreateOpts: opts, portSecurity: ps})
			if err != nil {
				return nil, classifyOS(fmt.Sprintf("create port %s", p.Name), err)
			}
		}
		// Tags can only be set after creation; the description already marks the port, so a crash
		// between the two is repaired by the retry that adopts it.
		want := append(in.Marker.Tags(), p.Tags...)
		if !containsAll(port.Tags, want) {
			if err := neutron.ReplaceTags(ctx, "ports", port.ID, union(port.Tags, want)); err != nil {
				return nil, classifyOS(fmt.Sprintf("tag port %s", p.Name), err)
			}
		}
		info.ID, info.Name, info.MAC = port.ID, port.Name, port.MACAddress
		for _, ip := range port.FixedIPs {
			info.FixedIPs = append(info.FixedIPs, ip.IPAddress)
		}
		return info, nil
	})
}

func findPort(ctx context.Context, neutron NetworkClient, p ResolvedPort) (*Port, error) {
	all, err := neutron.ListPorts(ctx, PortListOpts{Name: p.Name, Description: p.Description, NetworkID: p.NetworkID})
	if err != nil {
		return nil, classifyOS("list ports named "+p.Name, err)
	}
	if len(all) == 0 {
		return nil, nil
	}
	// More than one can only come from outside this workflow (our creates are serial and adopt first);
	// take the oldest, the sweep at teardown removes any other carrying the marker.
	return &all[0], nil
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// ResourceRef names one OpenStack resource by ID.
type ResourceRef struct {
	Identity Identity `json:"identity"`
	ID       string   `json:"id"`
}

// DeletePort deletes a port; a port already gone is not an error.
func (o *OpenStack) DeletePort(ctx context.Context, in ResourceRef) error {
	_, err := heartbeat.While(ctx, func(ctx context.Context) (struct{}, error) {
		neutron, err := o.networkFor(ctx, in.Identity)
		if err != nil {
			return struct{}{}, err
		}
		if err := neutron.DeletePort(ctx, in.ID); err != nil && !isNotFound(err) {
			return struct{}{}, classifyOS("delete port "+in.ID, err)
		}
		return struct{}{}, nil
	})
	return err
}

// FloatingIPInput asks for a floating IP from NetworkID associated with PortID. With Address set, that
// address is used: an existing floating IP of that address is adopted (and not owned), otherwise it is
// allocated with that address. Without Address, the floating IP carrying the marker is reused or a new one
// allocated.
type FloatingIPInput struct {
	Identity  Identity `json:"identity"`
	Marker    Marker   `json:"marker"`
	NetworkID string   `json:"networkID"`
	Address   string   `json:"address,omitempty"`
	PortID    string   `json:"portID"`
}

// FloatingIPInfo is a floating IP as associated. Owned is false for an address allocated outside
// stackflow: it is only ever disassociated, never deleted.
type FloatingIPInfo struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	Owned   bool   `json:"owned"`
}

// EnsureFloatingIP finds or allocates the floating IP and associates it with the port.
func (o *OpenStack) EnsureFloatingIP(ctx context.Context, in FloatingIPInput) (*FloatingIPInfo, error) {
	return heartbeat.While(ctx, func(ctx context.Context) (*FloatingIPInfo, error) {
		neutron, err := o.networkFor(ctx, in.Identity)
		if err != nil {
			return nil, err
		}
		opts := FloatingIPListOpts{FloatingNetworkID: in.NetworkID}
		if in.Address != "" {
			opts.FloatingIP = in.Address
		} else {
			opts.Description = in.Marker.Description()
		}
		all, err := neutron.ListFloatingIPs(ctx, opts)
		if err != nil {
			return nil, classifyOS("list floating IPs", err)
		}
		var fip *FloatingIP
		if len(all) > 0 {
			fip = &all[0]
		} else {
			fip, err = neutron.CreateFloatingIP(ctx, FloatingIPCreateOpts{FloatingNetworkID: in.NetworkID, FloatingIP: in.Address,
				Description: in.Marker.Description(), PortID: in.PortID})
			if err != nil {
				return nil, classifyOS("allocate floating IP "+in.Address, err)
			}
		}
		owned := in.Marker.Owns(fip.Tags, fip.Description)
		if fip.PortID != "" && fip.PortID != in.PortID {
			// Taking the address over is fine from a port of the same owner (the previous bastion during
			// a create-before-delete replacement), never from anyone else's.
			cur, err := neutron.GetPort(ctx, fip.PortID)
			if err != nil && !isNotFound(err) {
				return nil, classifyOS("port of floating IP "+fip.FloatingIP, err)
			}
			if err == nil && !(Marker{Owner: in.Marker.Owner}).Owns(cur.Tags, cur.Description) {
				return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("floating IP %s is in use by port %s, which stackflow did not create for this object",
					fip.FloatingIP, fip.PortID), ErrOSInvalid, nil)
			}
		}
		if owned && !containsAll(fip.Tags, in.Marker.Tags()) {
			if err := neutron.ReplaceTags(ctx, "floatingips", fip.ID, union(fip.Tags, in.Marker.Tags())); err != nil {
				return nil, classifyOS("tag floating IP "+fip.FloatingIP, err)
			}
		}
		if fip.PortID != in.PortID {
			if err := neutron.AssociateFloatingIP(ctx, fip.ID, in.PortID); err != nil {
				return nil, classifyOS("associate floating IP "+fip.FloatingIP, err)
			}
		}
		return &FloatingIPInfo{ID: fip.ID, Address: fip.FloatingIP, Owned: owned}, nil
	})
}

// FloatingIPRelease names a floating IP to give back: deleted when Delete, otherwise only disassociated
// (kept for the next server, or not ours to delete).
type FloatingIPRelease struct {
	Identity Identity `json:"identity"`
	ID       string   `json:"id"`
	Delete   bool     `json:"delete"`
}

// ReleaseFloatingIP deletes or disassociates a floating IP; one already gone is not an error.
func (o *OpenStack) ReleaseFloatingIP(ctx context.Context, in FloatingIPRelease) error {
	_, err := heartbeat.While(ctx, func(ctx context.Context) (struct{}, error) {
		neutron, err := o.networkFor(ctx, in.Identity)
		if err != nil {
			return struct{}{}, err
		}
		if in.Delete {
			err = neutron.DeleteFloatingIP(ctx, in.ID)
		} else {
			err = neutron.AssociateFloatingIP(ctx, in.ID, "")
		}
		if err != nil && !isNotFound(err) {
			return struct{}{}, classifyOS("release floating IP "+in.ID, err)
		}
		return struct{}{}, nil
	})
	return err
}
