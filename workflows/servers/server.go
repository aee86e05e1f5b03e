package servers

import (
	"encoding/json"
	"fmt"
	"slices"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/activities/openstack"
	"github.com/stackflow/stackflow/api"
	infrav1alpha1 "github.com/stackflow/stackflow/api/infrastructure/v1alpha1"
	infrav1 "github.com/stackflow/stackflow/api/infrastructure/v1beta1"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/workflows/object"
)

// Kinds served by the server workflows.
const (
	KindOpenStackServer  = "OpenStackServer"
	KindOpenStackMachine = "OpenStackMachine"
	KindOpenStackCluster = "OpenStackCluster"
	infrastructureGroup  = "infrastructure.cluster.x-k8s.io"
	// ClusterNameLabel names the cluster a machine belongs to; a machine without identityRef uses its
	// OpenStackCluster's.
	ClusterNameLabel = "cluster.x-k8s.io/cluster-name"
)

// Condition reasons of the server workflows.
const (
	ReasonInstanceDeleted = "InstanceDeleted"
	ReasonNoIdentity      = "NoIdentity"
)

// OpenStackServerWorkflow serves an OpenStackServer: it creates the server and everything it needs once,
// reports it in status, and on deletion removes what it recorded and sweeps what a crash left.
func OpenStackServerWorkflow(ctx workflow.Context, in object.Input) error {
	return object.Run(ctx, in, &serverReconciler{}, object.Options{})
}

// OpenStackMachineWorkflow serves an OpenStackMachine the same way: created once (its spec is immutable
// at admission); without an identityRef it uses its OpenStackCluster's identity and network.
func OpenStackMachineWorkflow(ctx workflow.Context, in object.Input) error {
	return object.Run(ctx, in, &serverReconciler{machine: true}, object.Options{})
}

type serverReconciler struct {
	machine bool
	state   serverState
}

// serverState is what a server or machine workflow records: the identity it used (teardown needs it
// even when the spec can no longer be read) and the one instance.
type serverState struct {
	Identity *openstack.Identity `json:"identity,omitempty"`
	Instance *serverRecord       `json:"instance,omitempty"`
}

func (r *serverReconciler) Detail() any { return r.state.Instance }

// Restore reads the state the previous run carried.
func (r *serverReconciler) Restore(lc *object.Lifecycle) error { return lc.Load(&r.state) }

func (r *serverReconciler) saver(lc *object.Lifecycle) func(workflow.Context) error {
	return func(ctx workflow.Context) error {
		if err := lc.Save(r.state); err != nil {
			return fmt.Errorf("record state of %s: %w", lc.Ref, err)
		}
		return publishServer(ctx, lc, r.state.Instance)
	}
}

func (r *serverReconciler) Reconcile(ctx workflow.Context, lc *object.Lifecycle, obj *kube.Object) error {
	r.state = serverState{}
	if err := lc.Load(&r.state); err != nil {
		return err
	}
	save := r.saver(lc)
	spec, err := DecodeServerSpec(r.machine, obj.Spec)
	if err != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("spec of %s: %v", lc.Ref, err), lifecycle.ReasonInvalidSpec, err)
	}
	if rec := r.state.Instance; rec != nil && rec.Ready {
		// Created once: a later generation changes nothing in OpenStack; report what Nova says now.
		if err := lc.Step(ctx, "refresh server "+rec.Name); err != nil {
			return err
		}
		var info openstack.ServerInfo
		if err := workflow.ExecuteActivity(OpenStackActivity(ctx), osActs.GetServer, openstack.ResourceRef{Identity: *r.state.Identity, ID: rec.ServerID}).Get(ctx, &info); err != nil {
			return fmt.Errorf("refresh server %s: %w", rec.Name, err)
		}
		rec.State, rec.Fault = info.Status, info.Fault
		if len(info.Addresses) > 0 {
			rec.Addresses = info.Addresses
		}
		if info.Status == openstack.ServerDeleted {
			rec.Ready = false
			_ = save(ctx)
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("server %s (%s) was deleted outside stackflow; it is not created again", rec.Name, rec.ServerID), ReasonInstanceDeleted, nil)
		}
		return save(ctx)
	}

	build := &serverBuild{lc: lc, spec: spec, save: save}
	ident, defaultNet, err := r.identity(ctx, lc, obj, spec)
	if err != nil {
		return err
	}
	if r.state.Identity == nil {
		r.state.Identity = &ident
	}
	build.identity, build.defaultNetwork = *r.state.Identity, defaultNet
	if err := waitIdentitySecret(ctx, lc, obj.Generation, build.identity); err != nil {
		return err
	}
	if r.state.Instance == nil {
		r.state.Instance = &serverRecord{Name: lc.Ref.Name, Marker: InstanceMarker(OwnerOf(lc.Ref), lc.Ref.Name)}
		if err := save(ctx); err != nil {
			return err
		}
	}
	return build.create(ctx, r.state.Instance)
}

// identity is the spec's identityRef; a machine without one uses its cluster's identity (and its
// cluster's network as the default for ports).
func (r *serverReconciler) identity(ctx workflow.Context, lc *object.Lifecycle, obj *kube.Object, spec infrav1alpha1.OpenStackServerSpec) (openstack.Identity, *infrav1.NetworkParam, error) {
	var defaultNet *infrav1.NetworkParam
	ref := spec.IdentityRef
	if r.machine {
		if name := obj.Labels[ClusterNameLabel]; name != "" {
			cref := api.Ref(KindOpenStackCluster, lc.Ref.Namespace, name)
			var cluster kube.Object
			if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.GetObject, cref).Get(ctx, &cluster); err != nil {
				return openstack.Identity{}, nil, fmt.Errorf("read cluster %s of %s: %w", name, lc.Ref, err)
			}
			if cluster.Exists {
				var cs infrav1.OpenStackClusterSpec
				if err := json.Unmarshal(cluster.Spec, &cs); err == nil {
					if ref.Name == "" {
						ref = cs.IdentityRef
					}
					defaultNet = cs.Network
				}
			}
		}
	}
	if ref.Name == "" || ref.CloudName == "" {
		return openstack.Identity{}, nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s has no identityRef (name and cloudName)", lc.Ref), ReasonNoIdentity, nil)
	}
	return identityOf(lc.Ref.Namespace, ref), defaultNet, nil
}

// identityOf is the activities' identity of an identityRef in namespace.
func identityOf(namespace string, ref infrav1.OpenStackIdentityReference) openstack.Identity {
	return openstack.Identity{Namespace: namespace, SecretName: ref.Name, CloudName: ref.CloudName, Region: ref.Region}
}

func (r *serverReconciler) Teardown(ctx workflow.Context, lc *object.Lifecycle) error {
	r.state = serverState{}
	if err := lc.Load(&r.state); err != nil {
		return err
	}
	if r.state.Identity == nil {
		return nil // nothing was ever asked of OpenStack
	}
	var planned []openstack.ResolvedPort
	volumes := false
	if rec := r.state.Instance; rec != nil {
		volumes = rec.HasVolumes
		if rec.Resolved != nil {
			planned = rec.Resolved.Ports
		}
		if err := destroyServer(ctx, lc, *r.state.Identity, rec, false, r.saver(lc)); err != nil {
			return err
		}
	}
	return sweepOwner(ctx, *r.state.Identity, OwnerOf(lc.Ref), planned, volumes)
}

// Compensate removes a server whose creation a cancel interrupted; a finished server stays.
func (r *serverReconciler) Compensate(ctx workflow.Context, lc *object.Lifecycle) error {
	r.state = serverState{}
	if err := lc.Load(&r.state); err != nil {
		return err
	}
	if r.state.Identity == nil || r.state.Instance == nil || r.state.Instance.Ready {
		return nil
	}
	return destroyServer(ctx, lc, *r.state.Identity, r.state.Instance, false, r.saver(lc))
}

// DecodeServerSpec reads an OpenStackServer's spec, or an OpenStackMachine's (machine) as the server
// spec it stands for.
func DecodeServerSpec(machine bool, raw json.RawMessage) (infrav1alpha1.OpenStackServerSpec, error) {
	if len(raw) == 0 {
		return infrav1alpha1.OpenStackServerSpec{}, fmt.Errorf("no spec")
	}
	if machine {
		var m infrav1.OpenStackMachineSpec
		if err := json.Unmarshal(raw, &m); err != nil {
			return infrav1alpha1.OpenStackServerSpec{}, err
		}
		return MachineServerSpec(m), nil
	}
	var s infrav1alpha1.OpenStackServerSpec
	err := json.Unmarshal(raw, &s)
	return s, err
}

// MachineServerSpec is the server an OpenStackMachine (or a bastion) stands for, as CAPO makes an
// OpenStackServer of each machine. A machine without identityRef leaves it empty: its cluster's applies.
func MachineServerSpec(m infrav1.OpenStackMachineSpec) infrav1alpha1.OpenStackServerSpec {
	s := infrav1alpha1.OpenStackServerSpec{
		Flavor: m.Flavor, FlavorID: m.FlavorID, Image: m.Image, Ports: m.Ports, SecurityGroups: m.SecurityGroups,
		RootVolume: m.RootVolume, AdditionalBlockDevices: m.AdditionalBlockDevices, ServerGroup: m.ServerGroup,
		SSHKeyName: m.SSHKeyName, Tags: m.Tags, ServerMetadata: m.ServerMetadata, ConfigDrive: m.ConfigDrive,
	}
	if m.Trunk {
		s.Trunk = &m.Trunk
	}
	if m.IdentityRef != nil {
		s.IdentityRef = *m.IdentityRef
	}
	return s
}

// ServerStatusFields is the kind-specific status of an OpenStackServer or OpenStackMachine, derived from
// the record: ready, instanceID, instanceState, addresses, resources (nil values remove the field).
func ServerStatusFields(rec *serverRecord) map[string]any {
	f := map[string]any{"ready": false, "instanceID": nil, "instanceState": nil, "addresses": nil, "resources": nil}
	if rec == nil {
		return f
	}
	f["ready"] = rec.Ready
	if rec.ServerID != "" {
		f["instanceID"] = rec.ServerID
	}
	if rec.State != "" {
		f["instanceState"] = rec.State
	}
	addrs := slices.Clone(rec.Addresses)
	if rec.FloatingIP != nil && !slices.ContainsFunc(addrs, func(a openstack.Address) bool { return a.Address == rec.FloatingIP.Address }) {
		addrs = append(addrs, openstack.Address{Type: "ExternalIP", Address: rec.FloatingIP.Address})
	}
	if len(addrs) > 0 {
		f["addresses"] = addrs
	}
	if res := resourcesOf(rec); len(res.Ports)+len(res.Volumes) > 0 || res.FloatingIPID != "" {
		f["resources"] = res
	}
	return f
}

func resourcesOf(rec *serverRecord) infrav1.ServerResources {
	var res infrav1.ServerResources
	for _, p := range rec.Ports {
		res.Ports = append(res.Ports, infrav1.PortStatus{ID: p.ID})
	}
	for _, v := range rec.Volumes {
		res.Volumes = append(res.Volumes, infrav1.VolumeStatus{Name: v.Name, ID: v.ID})
	}
	if rec.FloatingIP != nil {
		res.FloatingIPID = rec.FloatingIP.ID
	}
	return res
}

func publishServer(ctx workflow.Context, lc *object.Lifecycle, rec *serverRecord) error {
	fields := ServerStatusFields(rec)
	for _, k := range workflow.DeterministicKeys(fields) {
		if err := lc.SetField(ctx, k, fields[k]); err != nil {
			return err
		}
	}
	return nil
}
