package dataplane

import (
	"encoding/json"
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
// of a cell stackflow did not deploy (the local stack publishes openstack/cell1-transport for its own
// cell1); no NovaCell workflow has to have run. A cell without hasAPIAccess gets computes configured
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
	cloud := openstack.CloudSecret{Namespace: lc.Ref.Namespace, Name: openstack.DefaultCloudsSecret, ComputeRegion: k.computeRegion()}
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

// waitHostEmpty holds the removal while Nova lists instances on the host, saying which, with no
// deadline: a person (or the objects being deleted with it) decides where they go.
func (k *novaComputeKind) waitHostEmpty(ctx workflow.Context, lc *object.Lifecycle, rec *edpmServiceRecord) error {
	cloud := openstack.CloudSecret{Namespace: lc.Ref.Namespace, Name: openstack.DefaultCloudsSecret, ComputeRegion: rec.ComputeRegion}
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
	cloud := openstack.CloudSecret{Namespace: lc.Ref.Namespace, Name: openstack.DefaultCloudsSecret, ComputeRegion: rec.ComputeRegion}
	octx := object.OnOpenStack(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 2 * time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second, MaximumAttempts: 10},
	})
	if err := workflow.ExecuteActivity(octx, osActs.DeleteComputeService, openstack.ComputeHostInput{Cloud: cloud, Host: rec.Host}).Get(ctx, nil); err != nil {
		return fmt.Errorf("delete compute service of %s: %w", rec.Host, err)
	}
	return nil
}
