package dataplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/activities/openstack"
	dataplanev1beta1 "github.com/stackflow/stackflow/api/dataplane/v1beta1"
	"github.com/stackflow/stackflow/api/lifecycle"
	novav1beta1 "github.com/stackflow/stackflow/api/nova/v1beta1"
	"github.com/stackflow/stackflow/api/oslo"
	"github.com/stackflow/stackflow/workflows/object"
)

// NovaExternalComputeWorkflow serves a NovaExternalCompute: nova-compute on a data-plane node, in its
// cell (see service.go for the shape every phase-1 service shares).
//
// Its NovaCell is the one named cellName, or else the one whose spec.cellName is cellName; when several
// are (two Novas in one namespace each have a cell1), it waits with reason CellAmbiguous, naming them,
// until the choice is made (cellName naming the NovaCell, or one of them gone). The cell is
// ready for computes once its message-bus Secret (spec.transportURLSecret, key transport_url) and its
// service Secret (spec.secret, the service password key) exist: that is all nova-compute needs of it.
// Besides the NovaCells a Nova creates, a NovaCell may therefore simply reference the connection Secret
// of a cell stackflow did not deploy; no NovaCell workflow has to have run. A cell without hasAPIAccess gets computes configured
// for a cell without upcalls (see NovaComputeOptions).
//
// Once the playbook started nova-compute, the workflow waits until the compute API lists the host's
// nova-compute service as up and its hypervisor (the cell's scheduler maps new hosts by itself), and
// records both in status.
func NovaExternalComputeWorkflow(ctx workflow.Context, in object.Input) error {
	return object.Run(ctx, in, &edpmServiceReconciler{kind: &novaComputeKind{}}, object.Options{})
}

// ComputeRegistrationTimeout bounds the wait for a started nova-compute to show up in Nova.
const ComputeRegistrationTimeout = 10 * time.Minute

// ChangeWaitComputeAPI is the GetVersion change that waits for the compute API before the registration
// deadline starts (runs recorded before it went straight to the registration).
const ChangeWaitComputeAPI = "nova-compute-wait-compute-api"

// ChangeTeardownWaitsForInstances is the GetVersion change after which a compute being removed waits
// for its instances to go before nova-compute stops (runs recorded before it stopped it at once).
const ChangeTeardownWaitsForInstances = "nova-compute-teardown-waits-for-instances"

// ChangeNoUpcalls is the GetVersion change after which a compute of a cell without API database access
// is configured without the server-group check upcall (runs recorded before it kept the configuration,
// and so the install hash, they had).
const ChangeNoUpcalls = "nova-compute-no-upcalls"

type novaComputeKind struct {
	spec novav1beta1.NovaExternalComputeSpec
	ns   string
	cell *novav1beta1.NovaCellSpec
	opts NovaComputeOptions
}

func (k *novaComputeKind) fresh() edpmServiceKind { return &novaComputeKind{} }
func (k *novaComputeKind) step() string           { return StepNovaCompute }
func (k *novaComputeKind) playbook() string       { return "nova-compute.yml" }
func (k *novaComputeKind) removePlaybook() string { return "nova-compute-remove.yml" }
func (k *novaComputeKind) condition() string      { return novav1beta1.ConditionComputeDeployed }

func (k *novaComputeKind) decode(raw json.RawMessage) error {
	k.spec, k.cell, k.opts = novav1beta1.NovaExternalComputeSpec{}, nil, NovaComputeOptions{}
	return json.Unmarshal(raw, &k.spec)
}

func (k *novaComputeKind) common() edpmServiceSpec {
	s := k.spec
	return edpmServiceSpec{DataplaneNodeName: s.DataplaneNodeName, CustomServiceConfig: s.CustomServiceConfig, SSHKeySecretName: s.SSHKeySecretName,
		InventoryConfigMapName: s.InventoryConfigMapName, AnsibleUser: s.AnsibleUser, AnsiblePort: s.AnsiblePort, AnsibleHost: s.AnsibleHost, Deploy: s.Deploy}
}

func (k *novaComputeKind) validate() error {
	if k.spec.CellName == novav1beta1.Cell0Name {
		return &EDPMSpecError{"cell0 has no computes: cellName must name another cell"}
	}
	return nil
}

// waitDependencies waits for the NovaCell and its two Secrets, naming what is missing.
func (k *novaComputeKind) waitDependencies(ctx workflow.Context, lc *object.Lifecycle, gen int64) error {
	k.ns = lc.Ref.Namespace
	if !isPreview(ctx) {
		_ = workflow.UpsertTypedSearchAttributes(ctx, lifecycle.SACell.ValueSet(k.spec.CellName))
	}
	err := waitUntil(ctx, lc, gen, k.condition(), func(ctx workflow.Context) (bool, string, string, error) {
		var cells []kube.ListedObject
		if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.ListObjects, kube.ListInput{Ref: NovaCellRef(lc.Ref.Namespace, "")}).Get(ctx, &cells); err != nil {
			return false, "", "", fmt.Errorf("list NovaCells: %w", err)
		}
		cell, name, others := FindNovaCell(cells, k.spec.CellName)
		if len(others) > 0 {
			return false, dataplanev1beta1.ReasonCellAmbiguous, fmt.Sprintf("cell %s is served by NovaCells %s in %s: name the one to join in cellName (it cannot change: recreate this compute) or remove the others",
				k.spec.CellName, strings.Join(append([]string{name}, others...), ", "), lc.Ref.Namespace), nil
		}
		if cell == nil {
			return false, dataplanev1beta1.ReasonWaitingForCell, fmt.Sprintf("waiting for NovaCell %s (no NovaCell named so or with that cellName in %s)", k.spec.CellName, lc.Ref.Namespace), nil
		}
		checks := []kube.SecretCheck{
			{Namespace: lc.Ref.Namespace, Name: cell.TransportURLSecret, Keys: []string{"transport_url"}},
			{Namespace: lc.Ref.Namespace, Name: cell.Secret, Keys: []string{firstNonEmpty(cell.PasswordSelectors.Service, "NovaPassword")}},
		}
		for _, c := range checks {
			var p kube.SecretPresence
			if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.CheckSecret, c).Get(ctx, &p); err != nil {
				return false, "", "", fmt.Errorf("check Secret %s: %w", c.Name, err)
			}
			if !p.Ready() {
				return false, dataplanev1beta1.ReasonWaitingForCell, fmt.Sprintf("waiting for NovaCell %s: Secret %s/%s with key(s) %v", name, c.Namespace, c.Name, c.Keys), nil
			}
		}
		k.cell = cell
		return true, "", "", nil
	})
	if err == nil && !k.cell.HasAPIAccess {
		k.opts.NoUpcalls = workflow.GetVersion(ctx, ChangeNoUpcalls, workflow.DefaultVersion, 1) == 1
	}
	return err
}

// cloudSecret is the Secret of the cell's services, which holds a clouds.yaml of its Nova's service user
// when a Nova made the cell (openstack.ServiceCloud).
func (k *novaComputeKind) cloudSecret() string {
	if k.cell == nil {
		return ""
	}
	return k.cell.Secret
}

// computeRegion is the region of the cell's compute API (its Nova's); empty for the cloud's own.
func (k *novaComputeKind) computeRegion() string {
	if k.cell == nil {
		return ""
	}
	return k.cell.Region
}

// FindNovaCell finds the NovaCell of a cell: by object name first, else by spec.cellName. NovaCells being
// deleted are passed over. When several NovaCells have that cellName and none has that name, others names
// the rest (the choice is the user's: the found one is only the first by name).
func FindNovaCell(cells []kube.ListedObject, cell string) (spec *novav1beta1.NovaCellSpec, name string, others []string) {
	for _, o := range cells {
		if o.Deleting {
			continue
		}
		var s novav1beta1.NovaCellSpec
		if err := json.Unmarshal(o.Spec, &s); err != nil {
			continue
		}
		if o.Ref.Name == cell {
			return &s, o.Ref.Name, nil
		}
		switch {
		case s.CellName != cell:
		case spec == nil:
			spec, name = &s, o.Ref.Name
		default:
			others = append(others, o.Ref.Name)
		}
	}
	return spec, name, others
}

func (k *novaComputeKind) files(host string) ([]oslo.ConfigFile, error) {
	return NovaComputeConfigFiles(host, *k.cell, k.opts, k.spec.CustomServiceConfig)
}

// verify waits until Nova lists the host's nova-compute (up) and its hypervisor.
func (k *novaComputeKind) verify(ctx workflow.Context, lc *object.Lifecycle, host string) error {
	msg := fmt.Sprintf("waiting for nova-compute on %s to register in Nova (cell %s): compute service up and hypervisor listed", host, k.spec.CellName)
	lc.SetCondition(ctx, metav1.Condition{Type: k.condition(), Status: metav1.ConditionFalse, Reason: ReasonWaitingForCompute, Message: msg})
	if err := lc.Step(ctx, "phase 1 · nova-compute · "+msg); err != nil {
		return err
	}
	cloud := openstack.ServiceCloud(lc.Ref.Namespace, k.cloudSecret(), k.computeRegion())
	// A data plane may be deployed before its control plane: the registration deadline starts once the
	// compute API is in the catalog, and until then the compute waits for it, saying so.
	if workflow.GetVersion(ctx, ChangeWaitComputeAPI, workflow.DefaultVersion, 1) == 1 {
		region := cloud.ComputeRegion
		if region == "" {
			region = "(the cloud's)"
		}
		lc.SetCondition(ctx, metav1.Condition{Type: k.condition(), Status: metav1.ConditionFalse, Reason: ReasonWaitingForComputeAPI,
			Message: fmt.Sprintf("waiting for the compute API (Nova) of region %s in the catalog, then for nova-compute on %s to register", region, host)})
		if err := workflow.ExecuteActivity(computeAPIActivity(ctx), osActs.WaitComputeAPI, cloud).Get(ctx, nil); err != nil {
			return fmt.Errorf("wait for the compute API: %w", err)
		}
		lc.SetCondition(ctx, metav1.Condition{Type: k.condition(), Status: metav1.ConditionFalse, Reason: ReasonWaitingForCompute, Message: msg})
	}
	var reg openstack.ComputeRegistration
	err := workflow.ExecuteActivity(registrationActivity(ctx, ComputeRegistrationTimeout), osActs.WaitComputeRegistered,
		openstack.ComputeHostInput{Cloud: cloud, Host: host}).Get(ctx, &reg)
	if err != nil {
		m := fmt.Sprintf("nova-compute on %s did not register in Nova within %s: %s", host, ComputeRegistrationTimeout, object.FailureMessage(err))
		lc.SetCondition(ctx, metav1.Condition{Type: k.condition(), Status: metav1.ConditionFalse, Reason: ReasonWaitingForCompute, Message: m})
		return temporal.NewNonRetryableApplicationError(m, ReasonWaitingForCompute, err)
	}
	_ = lc.SetField(ctx, "computeServiceID", reg.ServiceID)
	_ = lc.SetField(ctx, "hypervisorHostname", reg.HypervisorHostname)
	lc.SetCondition(ctx, metav1.Condition{Type: k.condition(), Status: metav1.ConditionTrue, Reason: "Registered",
		Message: fmt.Sprintf("nova-compute on %s is up in Nova (service %s, hypervisor %s) in cell %s", host, reg.ServiceID, reg.HypervisorHostname, k.spec.CellName)})
	return nil
}

// ChangeRemovalDrains is the GetVersion change after which a compute being removed is disabled in Nova
// and its instances are live-migrated away under spec.removal before anything waits for them (runs
// recorded before it only waited for them to go).
const ChangeRemovalDrains = "nova-compute-removal-drains"

// GateRemove is the gate a person approves to remove a compute whose instances could not move: they are
// deleted with it.
const GateRemove = "remove"

// ReasonDraining is the compute's condition while its instances are live-migrated away before removal.
const ReasonDraining = "Draining"

// waitHostEmpty empties the host before nova-compute stops: disabled in Nova, its instances live-migrated
// away (spec.removal says how long and what then), and then held while Nova still lists instances on it,
// saying which, with no deadline (the objects being deleted with it, or a person, decide where they go).
func (k *novaComputeKind) waitHostEmpty(ctx workflow.Context, lc *object.Lifecycle, rec *edpmServiceRecord) error {
	cloud := openstack.ServiceCloud(lc.Ref.Namespace, rec.CloudSecret, rec.ComputeRegion)
	if workflow.GetVersion(ctx, ChangeRemovalDrains, workflow.DefaultVersion, 1) == 1 {
		if err := k.drainForRemoval(ctx, lc, cloud, rec.Host); err != nil {
			return err
		}
	}
	lc.ShowStep(ctx, "wait for the instances on "+rec.Host+" to go")
	lc.SetCondition(ctx, metav1.Condition{Type: k.condition(), Status: metav1.ConditionFalse, Reason: ReasonWaitingForInstances,
		Message: fmt.Sprintf("removing nova-compute from %s once Nova lists no instance on it (delete or move them)", rec.Host)})
	octx := object.OnOpenStack(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 2 * time.Second, BackoffCoefficient: 2, MaximumInterval: 15 * time.Second},
	})
	if err := workflow.ExecuteActivity(octx, osActs.WaitHostEmpty, openstack.ComputeHostInput{Cloud: cloud, Host: rec.Host}).Get(ctx, nil); err != nil {
		return fmt.Errorf("wait for the instances on %s: %w", rec.Host, err)
	}
	return nil
}

// cleanup removes the host's compute service (and with it its compute node and resource provider).
func (k *novaComputeKind) cleanup(ctx workflow.Context, lc *object.Lifecycle, rec *edpmServiceRecord) error {
	cloud := openstack.ServiceCloud(lc.Ref.Namespace, rec.CloudSecret, rec.ComputeRegion)
	octx := object.OnOpenStack(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 2 * time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second, MaximumAttempts: 10},
	})
	if err := workflow.ExecuteActivity(octx, osActs.DeleteComputeService, openstack.ComputeHostInput{Cloud: cloud, Host: rec.Host}).Get(ctx, nil); err != nil {
		return fmt.Errorf("delete compute service of %s: %w", rec.Host, err)
	}
	return nil
}

// removal reads spec.removal from the object as the API server holds it now: a teardown may run in a
// run that never decoded the spec, and the policy may have been set just before the deletion.
func (k *novaComputeKind) removal(ctx workflow.Context, lc *object.Lifecycle) (time.Duration, string, error) {
	var obj kube.Object
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.GetObject, lc.Ref).Get(ctx, &obj); err != nil {
		return 0, "", fmt.Errorf("read %s: %w", lc.Ref, err)
	}
	var spec novav1beta1.NovaExternalComputeSpec
	if len(obj.Spec) > 0 {
		if err := json.Unmarshal(obj.Spec, &spec); err != nil {
			return 0, "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("spec of %s: %v", lc.Ref, err), lifecycle.ReasonInvalidSpec, err)
		}
	}
	d, p := spec.Removal.Policy()
	return d, p, nil
}

// drainForRemoval disables the host's compute in Nova and live-migrates its instances away (the
// scheduler picks where; the update's drain, retried safely after a crash). When they cannot all move in
// time, spec.removal.onDrainFailure decides: Stop holds the removal, naming them, until they are gone
// or a person approves GateRemove (then they are deleted); Skip deletes them at once; Fail fails the
// teardown (the retry signal tries again). A host Nova does not know has nothing to drain.
func (k *novaComputeKind) drainForRemoval(ctx workflow.Context, lc *object.Lifecycle, cloud openstack.CloudSecret, host string) error {
	timeout, policy, err := k.removal(ctx, lc)
	if err != nil {
		return err
	}
	reason := fmt.Sprintf("stackflow: removing %s", lc.Ref)
	lc.ShowStep(ctx, "removal · disable nova-compute on "+host+" in Nova")
	var on []string
	if err := workflow.ExecuteActivity(novaActivity(ctx, 10*time.Minute), osActs.SetComputeService, openstack.ServiceStateInput{
		Cloud: cloud, Host: host, Enabled: false, Reason: reason, IfRegistered: true}).Get(ctx, &on); err != nil {
		return fmt.Errorf("disable the compute service of %s: %w", host, err)
	}
	if len(on) == 0 {
		return nil
	}
	lc.ShowStep(ctx, fmt.Sprintf("removal · live-migrate %d instance(s) off %s (within %s)", len(on), host, timeout))
	lc.SetCondition(ctx, metav1.Condition{Type: k.condition(), Status: metav1.ConditionFalse, Reason: ReasonDraining,
		Message: fmt.Sprintf("disabled in Nova (%q); live-migrating %d instance(s) away within %s: %s", reason, len(on), timeout, strings.Join(on, ", "))})
	var res openstack.MigrateResult
	err = workflow.ExecuteActivity(migrateActivity(ctx, timeout), osActs.MigrateServers, openstack.MigrateInput{
		Cloud: cloud, From: host, Deadline: workflow.Now(ctx).Add(timeout)}).Get(ctx, &res)
	if err == nil {
		lc.SetCondition(ctx, metav1.Condition{Type: k.condition(), Status: metav1.ConditionFalse, Reason: ReasonDraining,
			Message: fmt.Sprintf("%d instance(s) live-migrated away from %s: %s", len(res.Moved), host, movedList(res.Moved))})
		return nil
	}
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != openstack.ErrDrainFailed {
		return fmt.Errorf("drain %s: %w", host, err)
	}
	why := object.FailureMessage(err)
	switch policy {
	case novav1beta1.RemovalFail:
		msg := why + "; onDrainFailure is Fail: the compute stays, disabled, until its instances are moved or deleted and the retry signal is sent"
		lc.SetCondition(ctx, metav1.Condition{Type: k.condition(), Status: metav1.ConditionFalse, Reason: dataplanev1beta1.ReasonDrainFailed, Message: msg})
		return temporal.NewNonRetryableApplicationError(msg, dataplanev1beta1.ReasonDrainFailed, err)
	case novav1beta1.RemovalSkip:
		return k.deleteInstances(ctx, lc, cloud, host, why+"; onDrainFailure is Skip")
	}
	lc.ShowStep(ctx, fmt.Sprintf("removal · held: instances on %s could not move (approve gate %q to delete them with the compute)", host, GateRemove))
	lc.SetCondition(ctx, metav1.Condition{Type: k.condition(), Status: metav1.ConditionFalse, Reason: dataplanev1beta1.ReasonDrainFailed,
		Message: fmt.Sprintf("%s. onDrainFailure is Stop: the compute stays, running them, until they are moved or deleted, or until a person approves the gate %q (temporal workflow update execute --name approve --input '{\"gate\":\"%s\"}'), which deletes them with the compute",
			why, GateRemove, GateRemove)})
	by, err := lc.ApproveOr(ctx, GateRemove, time.Minute, func(ctx workflow.Context) (bool, error) {
		var st openstack.ComputeNodeState
		if err := workflow.ExecuteActivity(novaActivity(ctx, 10*time.Minute), osActs.ComputeNodeState, openstack.ComputeHostInput{Cloud: cloud, Host: host}).Get(ctx, &st); err != nil {
			return false, fmt.Errorf("instances on %s: %w", host, err)
		}
		return len(st.Servers) == 0, nil
	})
	if err != nil || by == "" {
		return err
	}
	return k.deleteInstances(ctx, lc, cloud, host, fmt.Sprintf("gate %q approved by %s", GateRemove, by))
}

// deleteInstances deletes what is left on the host, saying why in the condition first.
func (k *novaComputeKind) deleteInstances(ctx workflow.Context, lc *object.Lifecycle, cloud openstack.CloudSecret, host, why string) error {
	lc.ShowStep(ctx, "removal · delete the instances left on "+host)
	var gone []string
	if err := workflow.ExecuteActivity(novaActivity(ctx, 10*time.Minute), osActs.DeleteServersOnHost, openstack.ComputeHostInput{Cloud: cloud, Host: host}).Get(ctx, &gone); err != nil {
		return fmt.Errorf("delete the instances on %s: %w", host, err)
	}
	lc.SetCondition(ctx, metav1.Condition{Type: k.condition(), Status: metav1.ConditionFalse, Reason: dataplanev1beta1.ReasonDrainFailed,
		Message: fmt.Sprintf("%s: deleting the %d instance(s) left on %s with the compute: %s", why, len(gone), host, strings.Join(gone, ", "))})
	return nil
}

// movedList is "id → host" for each moved instance, sorted by ID.
func movedList(moved map[string]string) string {
	out := make([]string, 0, len(moved))
	for _, id := range workflow.DeterministicKeys(moved) {
		out = append(out, id+" → "+moved[id])
	}
	return strings.Join(out, ", ")
}
