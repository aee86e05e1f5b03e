package servers

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/activities/openstack"
	infrav1alpha1 "github.com/stackflow/stackflow/api/infrastructure/v1alpha1"
	infrav1 "github.com/stackflow/stackflow/api/infrastructure/v1beta1"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/workflows/object"
)

// This file is the one server-creation logic shared by OpenStackServer, OpenStackMachine and the
// OpenStackCluster bastion. It records every resource it is about to need (the resolved plan, with the
// deterministic names) and every ID it gets back, in workflow state, before doing anything else; teardown
// deletes exactly that and then sweeps by the marker tags for what a crash left unrecorded.

// MaxServerRecreates is the policy for a server that goes to ERROR while building: it is deleted and
// booted again (same name, same ports and volumes) up to this many times; after that the build fails
// with Nova's fault message and everything created for it is removed.
const MaxServerRecreates = 2

// serverRecord is what the workflow knows it created for one server instance.
type serverRecord struct {
	// Name is the server's name; its ports and volumes are named after it.
	Name   string           `json:"name"`
	Marker openstack.Marker `json:"marker"`
	// SpecHash identifies the spec the instance was built from (the bastion replaces on change).
	SpecHash   string `json:"specHash,omitempty"`
	SSHKeyName string `json:"sshKeyName,omitempty"`
	// Resolved is the plan: IDs of what the spec references and the names of the ports to create.
	Resolved  *openstack.ResolvedServer `json:"resolved,omitempty"`
	Ports     []createdResource         `json:"ports,omitempty"`
	Volumes   []createdResource         `json:"volumes,omitempty"`
	ServerID  string                    `json:"serverID,omitempty"`
	State     string                    `json:"state,omitempty"`
	Fault     string                    `json:"fault,omitempty"`
	Addresses []openstack.Address       `json:"addresses,omitempty"`
	// FloatingIP is the bastion's address, once associated.
	FloatingIP *openstack.FloatingIPInfo `json:"floatingIP,omitempty"`
	// Recreates counts servers deleted after going to ERROR (see MaxServerRecreates).
	Recreates int  `json:"recreates,omitempty"`
	Ready     bool `json:"ready,omitempty"`
	// HasVolumes is set once the spec asked for Cinder volumes: sweeps then look in Cinder too.
	HasVolumes bool `json:"hasVolumes,omitempty"`
}

// createdResource is one created resource: its deterministic name and its ID.
type createdResource struct {
	Name string `json:"name"`
	ID   string `json:"id"`
}

func (r *serverRecord) portIDs() []string {
	var ids []string
	for _, p := range r.Ports {
		ids = append(ids, p.ID)
	}
	return ids
}

func (r *serverRecord) volumeID(name string) string {
	for _, v := range r.Volumes {
		if v.Name == name {
			return v.ID
		}
	}
	return ""
}

// empty reports whether nothing is recorded as existing for the instance.
func (r *serverRecord) empty() bool {
	return r.ServerID == "" && len(r.Ports) == 0 && len(r.Volumes) == 0 && r.FloatingIP == nil
}

// floatingIPRequest asks for a floating IP on the server's first port (the bastion).
type floatingIPRequest struct {
	Network *infrav1.NetworkParam
	// Address pins the address; the floating IP is then kept across replacements.
	Address string
}

// serverBuild builds one server instance from a spec, recording as it goes.
type serverBuild struct {
	lc             *object.Lifecycle
	identity       openstack.Identity
	spec           infrav1alpha1.OpenStackServerSpec
	defaultNetwork *infrav1.NetworkParam
	fip            *floatingIPRequest
	// fipMarker marks the floating IP: the instance's, or the owner's alone when the address is pinned
	// (it outlives instances).
	fipMarker openstack.Marker
	// save records the kind's whole state (lc.Save) and mirrors it into status; it runs after every
	// change to the record.
	save func(ctx workflow.Context) error
}

// OpenStackActivity sets the options of OpenStack activities: they heartbeat every second, so a dead
// worker is noticed within the heartbeat timeout; transient failures (409, 5xx, timeouts) retry with backoff; a
// cancelled workflow waits until the activity has really stopped, so nothing is created behind teardown.
func OpenStackActivity(ctx workflow.Context) workflow.Context {
	return object.OnOpenStack(ctx, workflow.ActivityOptions{

		StartToCloseTimeout: 20 * time.Minute,
		// Long enough that a loaded machine's late heartbeat is not taken for a dead worker (a
		// second attempt racing a live one), short enough that a real crash is noticed quickly.
		HeartbeatTimeout:       15 * time.Second,
		ScheduleToCloseTimeout: 30 * time.Minute,
		WaitForCancellation:    true,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			// Short enough that work resumes quickly after a crashed worker comes back.
			MaximumInterval: 10 * time.Second,
		},
	})
}

// create builds the instance; on a permanent failure it removes what it created (the record is then
// empty) and returns the failure, whose message is OpenStack's.
func (b *serverBuild) create(ctx workflow.Context, rec *serverRecord) error {
	err := b.build(ctx, rec)
	if err == nil || !object.IsPermanent(err) || ctx.Err() != nil {
		return err
	}
	// A build that waits for what it names keeps what it made for the next try (runs recorded before
	// the change removed it).
	if object.IsRetryLater(err) && workflow.GetVersion(ctx, ChangeRetryLaterKeeps, workflow.DefaultVersion, 1) == 1 {
		return err
	}
	workflow.GetLogger(ctx).Warn("server build failed; removing what was created", "server", rec.Name, "error", err)
	_ = teardownStep(ctx, b.lc, "remove what was created for "+rec.Name)
	if derr := destroyServer(ctx, b.lc, b.identity, rec, false, b.save); derr != nil {
		return fmt.Errorf("%w (and removing what was created failed: %v)", err, derr)
	}
	return err
}

// build creates what the server still lacks, in order, each step recorded as soon as it is done, so a
// retried or resumed build goes on from there: its references resolved, its ports, its volumes, the
// server (booted again while it ends in ERROR, within MaxServerRecreates) and its floating IP.
func (b *serverBuild) build(ctx workflow.Context, rec *serverRecord) error {
	for _, step := range []func(workflow.Context, *serverRecord) error{b.resolve, b.createPorts, b.createVolumes} {
		if err := step(ctx, rec); err != nil {
			return err
		}
	}
	for !rec.Ready {
		again, err := b.bootServer(ctx, rec)
		if err != nil {
			return err
		}
		if again {
			continue
		}
		if err := b.associateFloatingIP(ctx, rec); err != nil {
			return err
		}
		rec.Ready = true
		if err := b.save(ctx); err != nil {
			return err
		}
	}
	return nil
}

// resolve turns the spec's references (image, flavor, networks, security groups) into IDs, once.
func (b *serverBuild) resolve(ctx workflow.Context, rec *serverRecord) error {
	if rec.Resolved != nil {
		return nil
	}
	if err := b.lc.Step(ctx, "resolve references of "+rec.Name); err != nil {
		return err
	}
	in := openstack.ResolveServerInput{Identity: b.identity, Name: rec.Name, Marker: rec.Marker, Spec: b.spec, DefaultNetwork: b.defaultNetwork}
	if b.fip != nil {
		in.FloatingIP, in.FloatingNetwork = true, b.fip.Network
	}
	var res openstack.ResolvedServer
	if err := workflow.ExecuteActivity(OpenStackActivity(ctx), osActs.ResolveServer, in).Get(ctx, &res); err != nil {
		err = fmt.Errorf("resolve server %s: %w", rec.Name, err)
		if object.FailureReason(err) == openstack.ErrOSNotFound {
			// What it names may be on its way (a flavor its Nova still has to create, the compute API of
			// a region still deploying): looked up again after a back-off, nothing created meanwhile.
			return object.RetryLater(err)
		}
		return err
	}
	rec.Resolved = &res
	return b.save(ctx)
}

// createPorts creates the ports not created yet, in the spec's order.
func (b *serverBuild) createPorts(ctx workflow.Context, rec *serverRecord) error {
	for i := len(rec.Ports); i < len(rec.Resolved.Ports); i++ {
		p := rec.Resolved.Ports[i]
		if err := b.lc.Step(ctx, "create port "+p.Name); err != nil {
			return err
		}
		var info openstack.PortInfo
		if err := workflow.ExecuteActivity(OpenStackActivity(ctx), osActs.EnsurePort, openstack.PortInput{Identity: b.identity, Marker: rec.Marker, Port: p}).Get(ctx, &info); err != nil {
			return fmt.Errorf("port %s: %w", p.Name, err)
		}
		rec.Ports = append(rec.Ports, createdResource{Name: p.Name, ID: info.ID})
		if err := b.save(ctx); err != nil {
			return err
		}
	}
	return nil
}

// createVolumes creates the volumes not created yet; a volume that went to error is recorded too, so it
// is removed with the rest.
func (b *serverBuild) createVolumes(ctx workflow.Context, rec *serverRecord) error {
	for _, v := range plannedVolumes(rec.Name, b.spec, rec.Resolved.ImageID) {
		if !rec.HasVolumes {
			rec.HasVolumes = true
			if err := b.save(ctx); err != nil {
				return err
			}
		}
		if rec.volumeID(v.Name) != "" {
			continue
		}
		if err := b.lc.Step(ctx, "create volume "+v.Name); err != nil {
			return err
		}
		v.Identity, v.Marker = b.identity, rec.Marker
		var info openstack.VolumeInfo
		err := workflow.ExecuteActivity(OpenStackActivity(ctx), osActs.EnsureVolume, v).Get(ctx, &info)
		if err != nil {
			var app *temporal.ApplicationError
			if errors.As(err, &app) && app.HasDetails() {
				if derr := app.Details(&info); derr == nil && info.ID != "" {
					rec.Volumes = append(rec.Volumes, createdResource{Name: v.Name, ID: info.ID})
					_ = b.save(ctx)
				}
			}
			return fmt.Errorf("volume %s: %w", v.Name, err)
		}
		rec.Volumes = append(rec.Volumes, createdResource{Name: v.Name, ID: info.ID})
		if err := b.save(ctx); err != nil {
			return err
		}
	}
	return nil
}

// bootServer creates the server when it has none, waits for it, and applies ServerErrorPolicy: again is
// true when a server in ERROR was deleted to be booted again.
func (b *serverBuild) bootServer(ctx workflow.Context, rec *serverRecord) (again bool, err error) {
	octx := OpenStackActivity(ctx)
	if rec.ServerID == "" {
		if err := b.lc.Step(ctx, "create server "+rec.Name); err != nil {
			return false, err
		}
		var info openstack.ServerInfo
		if err := workflow.ExecuteActivity(octx, osActs.EnsureServer, b.serverInput(rec)).Get(ctx, &info); err != nil {
			return false, fmt.Errorf("server %s: %w", rec.Name, err)
		}
		rec.ServerID, rec.State, rec.Fault = info.ID, info.Status, ""
		if err := b.save(ctx); err != nil {
			return false, err
		}
	}
	if err := b.lc.Step(ctx, "wait for server "+rec.Name+" to become ACTIVE"); err != nil {
		return false, err
	}
	var info openstack.ServerInfo
	if err := workflow.ExecuteActivity(octx, osActs.WaitServer, openstack.ResourceRef{Identity: b.identity, ID: rec.ServerID}).Get(ctx, &info); err != nil {
		return false, fmt.Errorf("wait for server %s: %w", rec.Name, err)
	}
	rec.State, rec.Fault, rec.Addresses = info.Status, info.Fault, info.Addresses
	wait := false
	switch {
	case NoComputeYet(info):
		wait = workflow.GetVersion(ctx, ChangeNoValidHostWaits, workflow.DefaultVersion, 1) == 1
	case HostNotMappedYet(info):
		wait = workflow.GetVersion(ctx, ChangeUnmappedHostWaits, workflow.DefaultVersion, 1) == 1
	}
	if wait {
		// No compute can take it yet (computes still joining their cell): the server goes, the ports
		// stay, and the build is tried again after a back-off without spending a recreate.
		if err := b.deleteErrored(ctx, rec, "delete server "+rec.Name+" (no host for it yet)"); err != nil {
			return false, err
		}
		if err := b.save(ctx); err != nil {
			return false, err
		}
		return false, object.RetryLater(temporal.NewApplicationError(fmt.Sprintf("no compute can take server %s yet: %s", rec.Name, info.Fault), ReasonNoValidHost))
	}
	switch ServerErrorPolicy(info.Status, rec.Recreates) {
	case ServerRecreate:
		workflow.GetLogger(ctx).Warn("server is in ERROR; deleting it to boot it again", "server", rec.Name, "fault", info.Fault, "recreates", rec.Recreates)
		if err := b.deleteErrored(ctx, rec, "delete server "+rec.Name+" in ERROR"); err != nil {
			return false, err
		}
		rec.Recreates++
		return true, b.save(ctx)
	case ServerGiveUp:
		_ = b.save(ctx)
		msg := fmt.Sprintf("server %s is in %s after %d attempts", rec.Name, info.Status, rec.Recreates+1)
		if info.Fault != "" {
			msg += ": " + info.Fault
		}
		return false, temporal.NewNonRetryableApplicationError(msg, openstack.ErrServerFailed, nil)
	}
	return false, b.save(ctx)
}

// deleteErrored records the server's state, then deletes the server in ERROR (shown as step) and forgets
// its ID; its ports and volumes stay for the next boot.
func (b *serverBuild) deleteErrored(ctx workflow.Context, rec *serverRecord, step string) error {
	if err := b.save(ctx); err != nil {
		return err
	}
	if err := b.lc.Step(ctx, step); err != nil {
		return err
	}
	if err := workflow.ExecuteActivity(OpenStackActivity(ctx), osActs.DeleteServer, openstack.ResourceRef{Identity: b.identity, ID: rec.ServerID}).Get(ctx, nil); err != nil {
		return fmt.Errorf("delete server %s in ERROR: %w", rec.Name, err)
	}
	rec.ServerID = ""
	return nil
}

// associateFloatingIP gives the server its floating IP (on its first port) when the spec asks for one.
func (b *serverBuild) associateFloatingIP(ctx workflow.Context, rec *serverRecord) error {
	if b.fip == nil || rec.FloatingIP != nil || len(rec.Ports) == 0 {
		return nil
	}
	if err := b.lc.Step(ctx, "associate floating IP with "+rec.Name); err != nil {
		return err
	}
	var fip openstack.FloatingIPInfo
	in := openstack.FloatingIPInput{Identity: b.identity, Marker: b.fipMarker, NetworkID: rec.Resolved.FloatingNetworkID,
		Address: b.fip.Address, PortID: rec.Ports[0].ID}
	if err := workflow.ExecuteActivity(OpenStackActivity(ctx), osActs.EnsureFloatingIP, in).Get(ctx, &fip); err != nil {
		return fmt.Errorf("floating IP of %s: %w", rec.Name, err)
	}
	rec.FloatingIP = &fip
	return nil
}

// ChangeNoValidHostWaits is the GetVersion change after which a server Nova found no host for waits and
// is booted again later, in place of being recreated at once.
const ChangeNoValidHostWaits = "server-no-valid-host-waits"

// ChangeUnmappedHostWaits is the GetVersion change after which a server the scheduler placed on a
// compute not yet mapped to its cell waits like one with no host (runs before it recreated it at once).
const ChangeUnmappedHostWaits = "server-unmapped-host-waits"

// ChangeRetryLaterKeeps is the GetVersion change after which a build failing to be retried later (a
// reference not found yet) keeps its record for the next try in place of removing what it created.
const ChangeRetryLaterKeeps = "server-retry-later-keeps"

// ReasonNoValidHost is the failure of a server no compute could take (yet).
const ReasonNoValidHost = "NoValidHost"

// NoComputeYet reports whether a server ended in ERROR because the scheduler found no compute for it
// (Nova's "No valid host was found"): a capacity matter that computes joining later resolve, not a
// fault of the server.
func NoComputeYet(info openstack.ServerInfo) bool {
	return info.Status == openstack.ServerError && strings.Contains(info.Fault, "No valid host was found")
}

// HostNotMappedYet reports whether a server ended in ERROR because the scheduler chose a compute that
// Placement lists but host discovery has not mapped to a cell yet (Nova's "Host … is not mapped to any
// cell"): a compute still joining, which the next discovery resolves.
func HostNotMappedYet(info openstack.ServerInfo) bool {
	return info.Status == openstack.ServerError && strings.Contains(info.Fault, "is not mapped to any cell")
}

// ServerPolicyAction is what to do with a server after waiting for it.
type ServerPolicyAction int

// Outcomes of ServerErrorPolicy.
const (
	ServerKeep ServerPolicyAction = iota
	ServerRecreate
	ServerGiveUp
)

// ServerErrorPolicy decides on a server's state after the wait: ACTIVE (or stopped) is kept; ERROR, or a
// server that vanished while building, is deleted and booted again until MaxServerRecreates is spent.
func ServerErrorPolicy(state string, recreates int) ServerPolicyAction {
	switch state {
	case openstack.ServerError, openstack.ServerDeleted, "SOFT_DELETED":
		if recreates < MaxServerRecreates {
			return ServerRecreate
		}
		return ServerGiveUp
	}
	return ServerKeep
}

func (b *serverBuild) serverInput(rec *serverRecord) openstack.ServerInput {
	s := b.spec
	in := openstack.ServerInput{Identity: b.identity, Marker: rec.Marker, Name: rec.Name, ImageID: rec.Resolved.ImageID,
		FlavorID: rec.Resolved.FlavorID, ServerGroupID: rec.Resolved.ServerGroupID, PortIDs: rec.portIDs(),
		KeyName: s.SSHKeyName, ConfigDrive: s.ConfigDrive, Tags: s.Tags}
	if s.AvailabilityZone != nil {
		in.AZ = *s.AvailabilityZone
	}
	if len(s.ServerMetadata) > 0 {
		in.Metadata = map[string]string{}
		for _, m := range s.ServerMetadata {
			in.Metadata[m.Key] = m.Value
		}
	}
	if s.UserDataRef != nil {
		in.UserDataSecret = s.UserDataRef.Name
	}
	if s.RootVolume != nil && s.RootVolume.SizeGiB > 0 {
		in.RootVolumeID = rec.volumeID(rec.Name + "-root")
	}
	for _, d := range s.AdditionalBlockDevices {
		if d.Storage.Type == infrav1.StorageLocal {
			in.Ephemeral = append(in.Ephemeral, openstack.NamedDisk{Name: d.Name, SizeGiB: int(d.SizeGiB)})
		} else {
			in.Volumes = append(in.Volumes, openstack.NamedDisk{Name: d.Name, ID: rec.volumeID(rec.Name + "-" + d.Name)})
		}
	}
	return in
}

// plannedVolumes lists the Cinder volumes a spec asks for, with their deterministic names: <server>-root
// (from the image) and <server>-<device name>.
func plannedVolumes(server string, s infrav1alpha1.OpenStackServerSpec, imageID string) []openstack.VolumeInput {
	var out []openstack.VolumeInput
	az := func(v infrav1.BlockDeviceVolume) string {
		if v.AvailabilityZone != nil {
			return *v.AvailabilityZone
		}
		return ""
	}
	if s.RootVolume != nil && s.RootVolume.SizeGiB > 0 {
		out = append(out, openstack.VolumeInput{Name: server + "-root", SizeGiB: int(s.RootVolume.SizeGiB), Type: s.RootVolume.Type,
			AvailabilityZone: az(s.RootVolume.BlockDeviceVolume), ImageID: imageID})
	}
	for _, d := range s.AdditionalBlockDevices {
		if d.Storage.Type == infrav1.StorageLocal {
			continue
		}
		v := openstack.VolumeInput{Name: server + "-" + d.Name, SizeGiB: int(d.SizeGiB)}
		if d.Storage.Volume != nil {
			v.Type, v.AvailabilityZone = d.Storage.Volume.Type, az(*d.Storage.Volume)
		}
		out = append(out, v)
	}
	return out
}

// destroyServer deletes what the record holds, in dependency order (server, floating IP, ports,
// volumes), recording each deletion, then sweeps the instance's marker for anything created but never
// recorded. keepFloatingIP leaves the floating IP allocated (disassociated) and in the record.
func destroyServer(ctx workflow.Context, lc *object.Lifecycle, id openstack.Identity, rec *serverRecord, keepFloatingIP bool, save func(workflow.Context) error) error {
	octx := OpenStackActivity(ctx)
	if rec.ServerID != "" {
		if err := workflow.ExecuteActivity(octx, osActs.DeleteServer, openstack.ResourceRef{Identity: id, ID: rec.ServerID}).Get(ctx, nil); err != nil {
			return fmt.Errorf("delete server %s: %w", rec.Name, err)
		}
		rec.ServerID, rec.State, rec.Addresses, rec.Ready = "", openstack.ServerDeleted, nil, false
		if err := save(ctx); err != nil {
			return err
		}
	}
	var keep []string
	if rec.FloatingIP != nil {
		rel := openstack.FloatingIPRelease{Identity: id, ID: rec.FloatingIP.ID, Delete: rec.FloatingIP.Owned && !keepFloatingIP}
		if err := workflow.ExecuteActivity(octx, osActs.ReleaseFloatingIP, rel).Get(ctx, nil); err != nil {
			return fmt.Errorf("release floating IP %s of %s: %w", rec.FloatingIP.Address, rec.Name, err)
		}
		if keepFloatingIP {
			keep = append(keep, rec.FloatingIP.ID)
		} else {
			rec.FloatingIP = nil
			if err := save(ctx); err != nil {
				return err
			}
		}
	}
	for len(rec.Ports) > 0 {
		p := rec.Ports[len(rec.Ports)-1]
		if err := workflow.ExecuteActivity(octx, osActs.DeletePort, openstack.ResourceRef{Identity: id, ID: p.ID}).Get(ctx, nil); err != nil {
			return fmt.Errorf("delete port %s: %w", p.Name, err)
		}
		rec.Ports = rec.Ports[:len(rec.Ports)-1]
		if err := save(ctx); err != nil {
			return err
		}
	}
	for len(rec.Volumes) > 0 {
		v := rec.Volumes[len(rec.Volumes)-1]
		if err := workflow.ExecuteActivity(octx, osActs.DeleteVolume, openstack.ResourceRef{Identity: id, ID: v.ID}).Get(ctx, nil); err != nil {
			return fmt.Errorf("delete volume %s: %w", v.Name, err)
		}
		rec.Volumes = rec.Volumes[:len(rec.Volumes)-1]
		if err := save(ctx); err != nil {
			return err
		}
	}
	in := openstack.SweepInput{Identity: id, Marker: rec.Marker, KeepFloatingIPs: keep, Volumes: rec.HasVolumes}
	if rec.Resolved != nil {
		in.Ports = rec.Resolved.Ports
	}
	var swept openstack.SweepResult
	if err := workflow.ExecuteActivity(octx, osActs.SweepOwned, in).Get(ctx, &swept); err != nil {
		return fmt.Errorf("sweep what %s left: %w", rec.Name, err)
	}
	if swept.Found() > 0 {
		workflow.GetLogger(ctx).Info("sweep removed unrecorded resources", "server", rec.Name, "servers", swept.Servers,
			"ports", swept.Ports, "floatingIPs", swept.FloatingIPs, "volumes", swept.Volumes)
	}
	rec.Resolved, rec.Ready, rec.Recreates = nil, false, 0
	return save(ctx)
}

// teardownStep shows a step of a deletion: during teardown it only records the step (Step would refuse
// because the object is being deleted); otherwise it is an ordinary step that a pause holds.
func teardownStep(ctx workflow.Context, lc *object.Lifecycle, step string) error {
	if lc.Deleting() {
		lc.ShowStep(ctx, step)
		return nil
	}
	return lc.Step(ctx, step)
}

// sweepOwner sweeps every resource of the owner (all its instances) by marker.
func sweepOwner(ctx workflow.Context, id openstack.Identity, owner string, planned []openstack.ResolvedPort, volumes bool) error {
	var swept openstack.SweepResult
	in := openstack.SweepInput{Identity: id, Marker: openstack.Marker{Owner: owner}, Ports: planned, Volumes: volumes}
	if err := workflow.ExecuteActivity(OpenStackActivity(ctx), osActs.SweepOwned, in).Get(ctx, &swept); err != nil {
		return fmt.Errorf("sweep resources of owner %s: %w", owner, err)
	}
	if swept.Found() > 0 {
		workflow.GetLogger(ctx).Info("sweep removed unrecorded resources", "owner", owner, "servers", swept.Servers,
			"ports", swept.Ports, "floatingIPs", swept.FloatingIPs, "volumes", swept.Volumes)
	}
	return nil
}

// OwnerOf is the owner marker of an object's resources: a short hash of its workflow ID, so every
// resource of one object lifetime carries the same tag and none of another's.
func OwnerOf(ref lifecycle.ObjectRef) string {
	return openstack.ShortHash(lifecycle.WorkflowID(ref))
}

// InstanceMarker marks the resources of one server instance of an owner.
func InstanceMarker(owner, serverName string) openstack.Marker {
	return openstack.Marker{Owner: owner, Instance: openstack.ShortHash(owner + "/" + serverName)}
}
