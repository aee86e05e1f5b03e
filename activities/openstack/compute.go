package openstack

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stackflow/stackflow/activities/internal/heartbeat"

	"github.com/stackflow/stackflow/activities/kube"

	"github.com/gophercloud/gophercloud/v2"
	"go.temporal.io/sdk/activity"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"go.temporal.io/sdk/temporal"

	infrav1alpha1 "github.com/stackflow/stackflow/api/infrastructure/v1alpha1"
	infrav1 "github.com/stackflow/stackflow/api/infrastructure/v1beta1"
)

// ResolveServerInput asks to resolve a server spec's references. Name is the server's name; its ports are
// named <Name>-<nameSuffix or index>.
type ResolveServerInput struct {
	Identity Identity                          `json:"identity"`
	Name     string                            `json:"name"`
	Marker   Marker                            `json:"marker"`
	Spec     infrav1alpha1.OpenStackServerSpec `json:"spec"`
	// DefaultNetwork is used by ports without a network, and for a single port when the spec has none.
	DefaultNetwork *infrav1.NetworkParam `json:"defaultNetwork,omitempty"`
	// FloatingIP asks to resolve the external network too (FloatingNetwork, or the only external one).
	FloatingIP      bool                  `json:"floatingIP,omitempty"`
	FloatingNetwork *infrav1.NetworkParam `json:"floatingNetwork,omitempty"`
}

// ResolveServer turns every reference of the spec (image, flavor, networks, subnets, security groups,
// server group) into an ID. A reference that matches nothing, or more than one thing, is a permanent
// failure carrying OpenStack's message; nothing is created here.
func (o *OpenStack) ResolveServer(ctx context.Context, in ResolveServerInput) (*ResolvedServer, error) {
	return heartbeat.While(ctx, func(ctx context.Context) (*ResolvedServer, error) {
		nova, err := o.computeFor(ctx, in.Identity)
		if err != nil {
			return nil, err
		}
		glance, err := o.imageFor(ctx, in.Identity)
		if err != nil {
			return nil, err
		}
		neutron, err := o.networkFor(ctx, in.Identity)
		if err != nil {
			return nil, err
		}
		out := &ResolvedServer{}
		if out.FlavorID, err = resolveFlavor(ctx, nova, in.Spec.Flavor, in.Spec.FlavorID); err != nil {
			return nil, err
		}
		if out.ImageID, err = resolveImage(ctx, glance, in.Spec.Image); err != nil {
			return nil, err
		}
		if in.Spec.ServerGroup != nil {
			if out.ServerGroupID, err = resolveServerGroup(ctx, nova, *in.Spec.ServerGroup); err != nil {
				return nil, err
			}
		}
		if in.FloatingIP {
			if out.FloatingNetworkID, err = resolveExternalNetwork(ctx, neutron, in.FloatingNetwork); err != nil {
				return nil, err
			}
		}
		var commonSGs []string
		for _, sg := range in.Spec.SecurityGroups {
			id, err := resolveSecurityGroup(ctx, neutron, sg)
			if err != nil {
				return nil, err
			}
			commonSGs = append(commonSGs, id)
		}
		portSpecs := in.Spec.Ports
		if len(portSpecs) == 0 {
			portSpecs = []infrav1.PortOpts{{}}
		}
		networkIDs := map[string]string{}
		for i, p := range portSpecs {
			rp := ResolvedPort{Name: PortName(in.Name, i, p.NameSuffix), Tags: union(slices.Clone(in.Spec.Tags), tagStrings(p.Tags)), PortFields: portFields(p)}
			rp.Description = in.Marker.Description()
			if p.Description != nil && *p.Description != "" {
				rp.Description += " " + *p.Description
			}
			np := p.Network
			if np == nil {
				np = in.DefaultNetwork
			}
			if np == nil {
				return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("port %s has no network and there is no default network", rp.Name), ErrOSInvalid, nil)
			}
			key := fmt.Sprintf("%v/%v", deref(np.ID), np.Filter)
			if id, ok := networkIDs[key]; ok {
				rp.NetworkID = id
			} else if rp.NetworkID, err = resolveNetwork(ctx, neutron, *np); err != nil {
				return nil, err
			}
			networkIDs[key] = rp.NetworkID
			for _, f := range p.FixedIPs {
				rf := ResolvedFixedIP{IPAddress: f.IPAddress}
				if f.Subnet != nil {
					id, err := resolveSubnet(ctx, neutron, rp.NetworkID, *f.Subnet)
					if err != nil {
						return nil, err
					}
					rf.SubnetID = &id
				}
				rp.FixedIPs = append(rp.FixedIPs, rf)
			}
			rp.SecurityGroups = slices.Clone(commonSGs)
			for _, sg := range p.SecurityGroups {
				id, err := resolveSecurityGroup(ctx, neutron, sg)
				if err != nil {
					return nil, err
				}
				rp.SecurityGroups = union(rp.SecurityGroups, []string{id})
			}
			out.Ports = append(out.Ports, rp)
		}
		return out, nil
	})
}

// PortName is the deterministic name of a server's port: <server>-<suffix>, the suffix defaulting to
// the port's index.
func PortName(server string, index int, suffix *string) string {
	if suffix != nil && *suffix != "" {
		return server + "-" + *suffix
	}
	return server + "-" + strconv.Itoa(index)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// resolveFlavor finds a flavor by ID, or by name (falling back to the name as an ID, so an unknown
// flavor fails with Nova's own message).
func resolveFlavor(ctx context.Context, nova ComputeClient, name, id *string) (string, error) {
	if id != nil && *id != "" {
		f, err := nova.GetFlavor(ctx, *id)
		if err != nil {
			return "", classifyOS("flavor "+*id, err)
		}
		return f.ID, nil
	}
	if name == nil || *name == "" {
		return "", temporal.NewNonRetryableApplicationError("the spec names no flavor", ErrOSInvalid, nil)
	}
	all, err := nova.ListFlavors(ctx)
	if err != nil {
		return "", classifyOS("list flavors", err)
	}
	var match []string
	for _, f := range all {
		if f.Name == *name {
			match = append(match, f.ID)
		}
	}
	switch len(match) {
	case 1:
		return match[0], nil
	case 0:
		f, err := nova.GetFlavor(ctx, *name)
		if err != nil {
			return "", classifyOS("flavor "+*name, err)
		}
		return f.ID, nil
	}
	return "", ambiguous("%d flavors are named %s", len(match), *name)
}

func resolveServerGroup(ctx context.Context, nova ComputeClient, p infrav1.ServerGroupParam) (string, error) {
	if p.ID != nil {
		g, err := nova.GetServerGroup(ctx, *p.ID)
		if err != nil {
			return "", classifyOS("server group "+*p.ID, err)
		}
		return g.ID, nil
	}
	if p.Filter == nil || p.Filter.Name == nil {
		return "", notFound("server group reference has neither id nor name")
	}
	all, err := nova.ListServerGroups(ctx)
	if err != nil {
		return "", classifyOS("list server groups", err)
	}
	var match []string
	for _, g := range all {
		if g.Name == *p.Filter.Name {
			match = append(match, g.ID)
		}
	}
	switch len(match) {
	case 0:
		return "", notFound("no server group named %s", *p.Filter.Name)
	case 1:
		return match[0], nil
	}
	return "", ambiguous("%d server groups are named %s", len(match), *p.Filter.Name)
}

// ServerInput is everything Nova needs to boot the server; the resources it uses already exist.
type ServerInput struct {
	Identity      Identity          `json:"identity"`
	Marker        Marker            `json:"marker"`
	Name          string            `json:"name"`
	ImageID       string            `json:"imageID"`
	FlavorID      string            `json:"flavorID"`
	ServerGroupID string            `json:"serverGroupID,omitempty"`
	PortIDs       []string          `json:"portIDs"`
	RootVolumeID  string            `json:"rootVolumeID,omitempty"`
	Volumes       []NamedDisk       `json:"volumes,omitempty"`
	Ephemeral     []NamedDisk       `json:"ephemeral,omitempty"`
	KeyName       string            `json:"keyName,omitempty"`
	AZ            string            `json:"availabilityZone,omitempty"`
	ConfigDrive   *bool             `json:"configDrive,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	Tags          []string          `json:"tags,omitempty"`
	// UserDataSecret names a Secret in Identity.Namespace whose key "value" is the user data; it is read
	// here, so user data never enters workflow history.
	UserDataSecret string `json:"userDataSecret,omitempty"`
}

// NamedDisk is an additional disk: a volume by ID, or a local disk by size.
type NamedDisk struct {
	Name    string `json:"name"`
	ID      string `json:"id,omitempty"`
	SizeGiB int    `json:"sizeGiB,omitempty"`
}

// UserDataKey is the key of the user-data Secret (Cluster API's bootstrap data convention).
const UserDataKey = "value"

// ServerInfo is what Nova reports of a server.
type ServerInfo struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Status    string    `json:"status"`
	Fault     string    `json:"fault,omitempty"`
	Addresses []Address `json:"addresses,omitempty"`
	Adopted   bool      `json:"adopted,omitempty"`
}

// Server states the workflows act on.
const (
	ServerActive  = "ACTIVE"
	ServerError   = "ERROR"
	ServerDeleted = "DELETED"
)

// EnsureServer boots the server unless one with its name and marker tags exists (a retry after a lost
// response or a crash); it does not wait for it to become active.
func (o *OpenStack) EnsureServer(ctx context.Context, in ServerInput) (*ServerInfo, error) {
	return heartbeat.While(ctx, func(ctx context.Context) (*ServerInfo, error) {
		nova, err := o.computeFor(ctx, in.Identity)
		if err != nil {
			return nil, err
		}
		// A retry may follow an attempt whose create is still on its way through Nova (the worker died,
		// or was thought dead, mid-request): give that create time to show before making another.
		wait := time.Duration(0)
		if activity.IsActivity(ctx) && activity.GetInfo(ctx).Attempt > 1 {
			wait = o.adoptWindow()
		}
		if s, err := o.adoptServer(ctx, nova, in, wait); err != nil || s != nil {
			return s, err
		}
		opts := ServerCreateOpts{Name: in.Name, FlavorRef: in.FlavorID, AvailabilityZone: in.AZ, ConfigDrive: in.ConfigDrive,
			Tags: union(in.Marker.Tags(), in.Tags), Metadata: map[string]string{}}
		for k, v := range in.Metadata {
			opts.Metadata[k] = v
		}
		for k, v := range in.Marker.Metadata() {
			opts.Metadata[k] = v
		}
		var nets []ServerNetwork
		for _, p := range in.PortIDs {
			nets = append(nets, ServerNetwork{Port: p})
		}
		opts.Networks = nets
		if in.RootVolumeID != "" {
			opts.BlockDevice = append(opts.BlockDevice, BlockDevice{SourceType: SourceVolume, DestinationType: DestinationVolume,
				UUID: in.RootVolumeID, BootIndex: 0})
		} else {
			opts.ImageRef = in.ImageID
			if len(in.Volumes)+len(in.Ephemeral) > 0 {
				opts.BlockDevice = append(opts.BlockDevice, BlockDevice{SourceType: SourceImage, DestinationType: DestinationLocal,
					UUID: in.ImageID, BootIndex: 0, DeleteOnTermination: true})
			}
		}
		for _, v := range in.Volumes {
			opts.BlockDevice = append(opts.BlockDevice, BlockDevice{SourceType: SourceVolume, DestinationType: DestinationVolume,
				UUID: v.ID, BootIndex: -1, Tag: v.Name})
		}
		for _, e := range in.Ephemeral {
			opts.BlockDevice = append(opts.BlockDevice, BlockDevice{SourceType: SourceBlank, DestinationType: DestinationLocal,
				VolumeSize: e.SizeGiB, BootIndex: -1, DeleteOnTermination: true, Tag: e.Name})
		}
		if in.UserDataSecret != "" {
			sec, err := o.Core.CoreV1().Secrets(in.Identity.Namespace).Get(ctx, in.UserDataSecret, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("user-data Secret %s/%s not found", in.Identity.Namespace, in.UserDataSecret), ErrOSInvalid, err)
			}
			if err != nil {
				return nil, kube.Classify("get user-data Secret "+in.UserDataSecret, err)
			}
			opts.UserData = sec.Data[UserDataKey]
		}
		var builder ServerCreateOptsBuilder = opts
		if in.KeyName != "" {
			builder = KeyPairCreateOpts{CreateOptsBuilder: opts, KeyName: in.KeyName}
		}
		var hints SchedulerHintOptsBuilder
		if in.ServerGroupID != "" {
			hints = SchedulerHintOpts{Group: in.ServerGroupID}
		}
		s, err := nova.CreateServer(ctx, builder, hints)
		if err != nil {
			// Nova refuses a port another create of ours already holds: adopt that server instead.
			if gophercloud.ResponseCodeIs(err, 400) || gophercloud.ResponseCodeIs(err, 409) {
				if found, ferr := o.adoptServer(ctx, nova, in, o.adoptWindow()); ferr == nil && found != nil {
					return found, nil
				}
			}
			return nil, classifyOS("create server "+in.Name, err)
		}
		return &ServerInfo{ID: s.ID, Name: in.Name, Status: "BUILD"}, nil
	})
}

// retryAdoptWindow is how long a retried create looks for the server of an earlier attempt.
const retryAdoptWindow = 15 * time.Second

func (o *OpenStack) adoptWindow() time.Duration {
	if o.AdoptWindow > 0 {
		return o.AdoptWindow
	}
	return retryAdoptWindow
}

// adoptServer looks for the server (for up to wait) and reports it as adopted.
func (o *OpenStack) adoptServer(ctx context.Context, nova ComputeClient, in ServerInput, wait time.Duration) (*ServerInfo, error) {
	deadline := time.Now().Add(wait)
	for {
		s, err := findServer(ctx, nova, in.Name, in.Marker)
		if err != nil {
			return nil, err
		}
		if s != nil {
			info := serverInfo(s)
			info.Adopted = true
			return info, nil
		}
		if time.Now().After(deadline) {
			return nil, nil
		}
		if err := sleep(ctx, o.poll()); err != nil {
			return nil, err
		}
	}
}

// findServer finds the live server with this name carrying the marker's tags.
func findServer(ctx context.Context, nova ComputeClient, name string, m Marker) (*Server, error) {
	all, err := nova.ListServers(ctx, ServerListOpts{Name: "^" + regexp.QuoteMeta(name) + "$", Tags: strings.Join(m.Tags(), ",")})
	if err != nil {
		return nil, classifyOS("list servers named "+name, err)
	}
	for i := range all {
		if all[i].Name == name && all[i].Status != "DELETED" && all[i].Status != "SOFT_DELETED" {
			return &all[i], nil
		}
	}
	return nil, nil
}

func serverInfo(s *Server) *ServerInfo {
	info := &ServerInfo{ID: s.ID, Name: s.Name, Status: s.Status, Addresses: serverAddresses(s)}
	if s.Fault.Message != "" {
		info.Fault = s.Fault.Message
		if s.Fault.Code != 0 {
			info.Fault = fmt.Sprintf("%s (code %d)", s.Fault.Message, s.Fault.Code)
		}
	}
	return info
}

// serverAddresses lists a server's addresses in a stable order: by network name, then as Nova lists them.
func serverAddresses(s *Server) []Address {
	var out []Address
	nets := make([]string, 0, len(s.Addresses))
	for n := range s.Addresses {
		nets = append(nets, n)
	}
	slices.Sort(nets)
	for _, n := range nets {
		list, _ := s.Addresses[n].([]any)
		for _, a := range list {
			m, _ := a.(map[string]any)
			addr, _ := m["addr"].(string)
			if addr == "" {
				continue
			}
			typ := "InternalIP"
			if t, _ := m["OS-EXT-IPS:type"].(string); t == "floating" {
				typ = "ExternalIP"
			}
			out = append(out, Address{Type: typ, Address: addr})
		}
	}
	return out
}

// WaitServer waits (heartbeat.While) until the server is ACTIVE or ERROR, or gone (reported as DELETED), and
// reports it. ERROR is not an error here: what to do about it is the workflow's policy.
func (o *OpenStack) WaitServer(ctx context.Context, in ResourceRef) (*ServerInfo, error) {
	return heartbeat.While(ctx, func(ctx context.Context) (*ServerInfo, error) {
		nova, err := o.computeFor(ctx, in.Identity)
		if err != nil {
			return nil, err
		}
		for {
			s, err := nova.GetServer(ctx, in.ID)
			if isNotFound(err) {
				return &ServerInfo{ID: in.ID, Status: ServerDeleted}, nil
			}
			if err != nil {
				return nil, classifyOS("server "+in.ID, err)
			}
			switch s.Status {
			case ServerActive, ServerError, "SHUTOFF", "STOPPED", "DELETED", "SOFT_DELETED":
				return serverInfo(s), nil
			}
			if err := sleep(ctx, o.poll()); err != nil {
				return nil, err
			}
		}
	})
}

// GetServer reports a server as it is now (DELETED when gone).
func (o *OpenStack) GetServer(ctx context.Context, in ResourceRef) (*ServerInfo, error) {
	return heartbeat.While(ctx, func(ctx context.Context) (*ServerInfo, error) {
		nova, err := o.computeFor(ctx, in.Identity)
		if err != nil {
			return nil, err
		}
		s, err := nova.GetServer(ctx, in.ID)
		if isNotFound(err) {
			return &ServerInfo{ID: in.ID, Status: ServerDeleted}, nil
		}
		if err != nil {
			return nil, classifyOS("server "+in.ID, err)
		}
		return serverInfo(s), nil
	})
}

// DeleteServer deletes a server and waits (heartbeat.While) until Nova no longer lists it; one already gone
// is not an error. The delete is sent again now and then, in case Nova lost it.
func (o *OpenStack) DeleteServer(ctx context.Context, in ResourceRef) error {
	_, err := heartbeat.While(ctx, func(ctx context.Context) (struct{}, error) {
		nova, err := o.computeFor(ctx, in.Identity)
		if err != nil {
			return struct{}{}, err
		}
		return struct{}{}, deleteServerAndWait(ctx, nova, in.ID, o.poll())
	})
	return err
}

func deleteServerAndWait(ctx context.Context, nova ComputeClient, id string, poll time.Duration) error {
	var sent time.Time
	for {
		if time.Since(sent) > 30*time.Second {
			if err := nova.DeleteServer(ctx, id); err != nil {
				if isNotFound(err) {
					return nil
				}
				// 409: a task is running on it (building); deleting again later works.
				if !gophercloud.ResponseCodeIs(err, 409) {
					return classifyOS("delete server "+id, err)
				}
			}
			sent = time.Now()
		}
		s, err := nova.GetServer(ctx, id)
		if isNotFound(err) || err == nil && s.Status == "DELETED" {
			return nil
		}
		if err != nil {
			return classifyOS("server "+id, err)
		}
		if err := sleep(ctx, poll); err != nil {
			return err
		}
	}
}
