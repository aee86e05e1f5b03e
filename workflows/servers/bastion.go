package servers

import (
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/activities/openstack"
	infrav1alpha1 "github.com/stackflow/stackflow/api/infrastructure/v1alpha1"
	infrav1 "github.com/stackflow/stackflow/api/infrastructure/v1beta1"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/workflows/object"
)

// ReplacementAnnotation on an OpenStackCluster chooses how a bastion spec change replaces the bastion:
// ReplaceDeleteFirst (the default: delete the old one from its recorded IDs, then create the new one) or
// ReplaceCreateFirst (create the new one, move a pinned floating IP over, then delete the old one).
const ReplacementAnnotation = "stackflow.io/bastion-replacement"

// Values of ReplacementAnnotation.
const (
	ReplaceDeleteFirst = "delete-before-create"
	ReplaceCreateFirst = "create-before-delete"
)

// bastionEnabled reports whether a bastion is wanted: given, with a spec, and not disabled.
func bastionEnabled(b *infrav1.Bastion) bool {
	return b != nil && (b.Enabled == nil || *b.Enabled) && b.Spec != nil
}

// BastionHash identifies what the bastion is built from; any change means a new bastion. It hashes the
// canonical JSON (keys sorted), so the Go declaration order of the API's fields does not matter.
func BastionHash(b *infrav1.Bastion) string {
	c := *b
	c.Enabled = nil
	raw, _ := json.Marshal(c)
	var canonical any
	_ = json.Unmarshal(raw, &canonical)
	raw, _ = json.Marshal(canonical)
	return openstack.ShortHash(string(raw))
}

// pinnedAddress is the floating IP address the spec pins, or "".
func pinnedAddress(b *infrav1.Bastion) string {
	if b == nil || b.FloatingIP == nil {
		return ""
	}
	return *b.FloatingIP
}

// bastionServerSpec is the server a bastion stands for.
func bastionServerSpec(b *infrav1.Bastion) infrav1alpha1.OpenStackServerSpec {
	s := MachineServerSpec(*b.Spec)
	s.AvailabilityZone = b.AvailabilityZone
	return s
}

// OpenStackClusterWorkflow serves an OpenStackCluster's bastion: it creates it when enabled, replaces it
// when its spec changes, deletes it when disabled, and removes everything on deletion.
func OpenStackClusterWorkflow(ctx workflow.Context, in object.Input) error {
	return object.Run(ctx, in, &bastionReconciler{}, object.Options{})
}

type bastionReconciler struct {
	state bastionState
}

// bastionState is what the cluster workflow records.
type bastionState struct {
	Identity *openstack.Identity `json:"identity,omitempty"`
	// Seq numbers bastion instances: the bastion is named <cluster>-bastion-<seq>.
	Seq int `json:"seq"`
	// Current is the bastion that serves (or is being built).
	Current *serverRecord `json:"current,omitempty"`
	// Old are bastions being deleted (replaced or disabled).
	Old []serverRecord `json:"old,omitempty"`
	// Pinned is a pinned floating IP kept, disassociated, between a deleted bastion and the next.
	Pinned *openstack.FloatingIPInfo `json:"pinned,omitempty"`
}

func (r *bastionReconciler) Detail() any { return r.state }

// Restore reads the state the previous run carried.
func (r *bastionReconciler) Restore(lc *object.Lifecycle) error { return lc.Load(&r.state) }

func (r *bastionReconciler) saver(lc *object.Lifecycle) func(workflow.Context) error {
	return func(ctx workflow.Context) error {
		if err := lc.Save(r.state); err != nil {
			return fmt.Errorf("record bastion state of %s: %w", lc.Ref, err)
		}
		return publishBastion(ctx, lc, r.state.Current)
	}
}

// BastionPlan is what a reconcile of the bastion does.
type BastionPlan struct {
	// RetireCurrent moves the current bastion to the ones to delete.
	RetireCurrent bool
	// Create starts a new bastion instance.
	Create bool
	// DeleteOldFirst deletes retired bastions before building; otherwise after the new one is ready.
	DeleteOldFirst bool
	// KeepFloatingIP keeps the retired bastion's pinned floating IP for the new one.
	KeepFloatingIP bool
}

// PlanBastion decides, from the desired bastion (nil when disabled) and the current one, what to do. A
// bastion built from the same spec is resumed (or left alone when ready); another spec replaces it.
func PlanBastion(desired *infrav1.Bastion, cur *serverRecord, createFirst bool) BastionPlan {
	if !bastionEnabled(desired) {
		return BastionPlan{RetireCurrent: cur != nil, DeleteOldFirst: true}
	}
	if cur == nil {
		return BastionPlan{Create: true, DeleteOldFirst: true}
	}
	if cur.SpecHash == BastionHash(desired) {
		return BastionPlan{DeleteOldFirst: !cur.Ready}
	}
	p := BastionPlan{RetireCurrent: true, Create: true, DeleteOldFirst: !(createFirst && cur.Ready)}
	if addr := pinnedAddress(desired); addr != "" && cur.FloatingIP != nil && cur.FloatingIP.Address == addr {
		p.KeepFloatingIP = true
	}
	return p
}

// BastionName is the name of the seq-th bastion of a cluster.
func BastionName(cluster string, seq int) string {
	return fmt.Sprintf("%s-bastion-%d", cluster, seq)
}

func (r *bastionReconciler) Reconcile(ctx workflow.Context, lc *object.Lifecycle, obj *kube.Object) error {
	r.state = bastionState{}
	if err := lc.Load(&r.state); err != nil {
		return err
	}
	save := r.saver(lc)
	var spec infrav1.OpenStackClusterSpec
	if len(obj.Spec) > 0 {
		if err := json.Unmarshal(obj.Spec, &spec); err != nil {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("spec of %s: %v", lc.Ref, err), lifecycle.ReasonInvalidSpec, err)
		}
	}
	desired := spec.Bastion
	if bastionEnabled(desired) && r.state.Identity == nil {
		ref := spec.IdentityRef
		if desired.Spec.IdentityRef != nil {
			ref = *desired.Spec.IdentityRef
		}
		if ref.Name == "" || ref.CloudName == "" {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s has no identityRef (name and cloudName)", lc.Ref), ReasonNoIdentity, nil)
		}
		id := identityOf(lc.Ref.Namespace, ref)
		r.state.Identity = &id
	}
	if r.state.Identity == nil {
		// Never enabled: nothing exists in OpenStack.
		return save(ctx)
	}
	ident := *r.state.Identity
	if err := waitIdentitySecret(ctx, lc, obj.Generation, ident); err != nil {
		return err
	}
	plan := PlanBastion(desired, r.state.Current, obj.Annotations[ReplacementAnnotation] == ReplaceCreateFirst)
	owner := OwnerOf(lc.Ref)

	if plan.RetireCurrent {
		old := *r.state.Current
		r.state.Old = append(r.state.Old, old)
		r.state.Current = nil
	}
	if plan.Create {
		r.state.Seq++
		name := BastionName(lc.Ref.Name, r.state.Seq)
		r.state.Current = &serverRecord{Name: name, Marker: InstanceMarker(owner, name), SpecHash: BastionHash(desired), SSHKeyName: desired.Spec.SSHKeyName}
	}
	if err := save(ctx); err != nil {
		return err
	}
	if plan.DeleteOldFirst {
		if err := r.deleteOld(ctx, lc, ident, plan.KeepFloatingIP); err != nil {
			return err
		}
	}
	if !bastionEnabled(desired) {
		if err := r.releasePinned(ctx, lc, ident, ""); err != nil {
			return err
		}
		return save(ctx)
	}

	cur := r.state.Current
	build := &serverBuild{lc: lc, identity: ident, spec: bastionServerSpec(desired), defaultNetwork: spec.Network, save: save}
	if spec.DisableExternalNetwork == nil || !*spec.DisableExternalNetwork {
		build.fip = &floatingIPRequest{Network: spec.ExternalNetwork, Address: pinnedAddress(desired)}
		build.fipMarker = cur.Marker
		if build.fip.Address != "" {
			// A pinned address outlives bastions: it carries the owner's marker only.
			build.fipMarker = openstack.Marker{Owner: owner}
		}
	}
	if err := build.create(ctx, cur); err != nil {
		if object.IsPermanent(err) && !plan.DeleteOldFirst && cur.empty() && len(r.state.Old) > 0 {
			// Create-before-delete failed: the old bastion still serves; keep it as the current one.
			r.state.Current = &r.state.Old[len(r.state.Old)-1]
			r.state.Old = r.state.Old[:len(r.state.Old)-1]
			_ = save(ctx)
		}
		return err
	}
	if r.state.Pinned != nil && cur.FloatingIP != nil && cur.FloatingIP.ID == r.state.Pinned.ID {
		r.state.Pinned = nil
	}
	// The old bastion must not release the address the new one took over.
	for i := range r.state.Old {
		if o := &r.state.Old[i]; o.FloatingIP != nil && cur.FloatingIP != nil && o.FloatingIP.ID == cur.FloatingIP.ID {
			o.FloatingIP = nil
		}
	}
	if err := save(ctx); err != nil {
		return err
	}
	if err := r.deleteOld(ctx, lc, ident, false); err != nil {
		return err
	}
	return r.releasePinned(ctx, lc, ident, pinnedAddress(desired))
}

// deleteOld deletes every retired bastion from its record; with keepFloatingIP a pinned floating IP is
// disassociated and kept (in state.Pinned) for the next bastion.
func (r *bastionReconciler) deleteOld(ctx workflow.Context, lc *object.Lifecycle, ident openstack.Identity, keepFloatingIP bool) error {
	save := r.saver(lc)
	for len(r.state.Old) > 0 {
		old := &r.state.Old[0]
		if err := teardownStep(ctx, lc, "delete bastion "+old.Name); err != nil {
			return err
		}
		keep := keepFloatingIP && old.FloatingIP != nil
		if err := destroyServer(ctx, lc, ident, old, keep, save); err != nil {
			return err
		}
		if keep {
			r.state.Pinned = old.FloatingIP
		}
		r.state.Old = r.state.Old[1:]
		if err := save(ctx); err != nil {
			return err
		}
	}
	return nil
}

// releasePinned lets go of a kept floating IP whose address the spec no longer pins: deleted when
// stackflow allocated it, left alone otherwise.
func (r *bastionReconciler) releasePinned(ctx workflow.Context, lc *object.Lifecycle, ident openstack.Identity, stillPinned string) error {
	p := r.state.Pinned
	if p == nil || p.Address == stillPinned {
		return nil
	}
	rel := openstack.FloatingIPRelease{Identity: ident, ID: p.ID, Delete: p.Owned}
	if err := workflow.ExecuteActivity(OpenStackActivity(ctx), osActs.ReleaseFloatingIP, rel).Get(ctx, nil); err != nil {
		return fmt.Errorf("release floating IP %s: %w", p.Address, err)
	}
	r.state.Pinned = nil
	return r.saver(lc)(ctx)
}

func (r *bastionReconciler) Teardown(ctx workflow.Context, lc *object.Lifecycle) error {
	r.state = bastionState{}
	if err := lc.Load(&r.state); err != nil {
		return err
	}
	if r.state.Identity == nil {
		return nil
	}
	ident := *r.state.Identity
	var planned []openstack.ResolvedPort
	if r.state.Current != nil {
		r.state.Old = append(r.state.Old, *r.state.Current)
		r.state.Current = nil
	}
	volumes := false
	for _, o := range r.state.Old {
		if o.Resolved != nil {
			planned = append(planned, o.Resolved.Ports...)
		}
		volumes = volumes || o.HasVolumes
	}
	if err := r.deleteOld(ctx, lc, ident, false); err != nil {
		return err
	}
	if err := r.releasePinned(ctx, lc, ident, ""); err != nil {
		return err
	}
	return sweepOwner(ctx, ident, OwnerOf(lc.Ref), planned, volumes)
}

// Compensate deletes a bastion whose creation a cancel interrupted; a ready bastion stays.
func (r *bastionReconciler) Compensate(ctx workflow.Context, lc *object.Lifecycle) error {
	r.state = bastionState{}
	if err := lc.Load(&r.state); err != nil {
		return err
	}
	if r.state.Identity == nil || r.state.Current == nil || r.state.Current.Ready {
		return nil
	}
	return destroyServer(ctx, lc, *r.state.Identity, r.state.Current, false, r.saver(lc))
}

// BastionStatusOf derives status.bastion from the current bastion's record (nil: no bastion).
func BastionStatusOf(rec *serverRecord) *infrav1.BastionStatus {
	if rec == nil {
		return nil
	}
	st := &infrav1.BastionStatus{ID: rec.ServerID, Name: rec.Name, SSHKeyName: rec.SSHKeyName, State: infrav1.InstanceState(rec.State), SpecHash: rec.SpecHash}
	for _, a := range rec.Addresses {
		if a.Type == "InternalIP" && st.IP == "" {
			st.IP = a.Address
		}
	}
	if rec.FloatingIP != nil {
		st.FloatingIP = rec.FloatingIP.Address
	}
	if res := resourcesOf(rec); len(res.Ports)+len(res.Volumes) > 0 || res.FloatingIPID != "" {
		st.Resources = &res
	}
	return st
}

func publishBastion(ctx workflow.Context, lc *object.Lifecycle, rec *serverRecord) error {
	if err := lc.SetField(ctx, "bastion", BastionStatusOf(rec)); err != nil {
		return err
	}
	return lc.SetField(ctx, "ready", rec == nil || rec.Ready)
}
