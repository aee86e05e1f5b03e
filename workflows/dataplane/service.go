package dataplane

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/activities/ansible"
	"github.com/stackflow/stackflow/activities/kube"
	dataplanev1beta1 "github.com/stackflow/stackflow/api/dataplane/v1beta1"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/api/oslo"
	"github.com/stackflow/stackflow/workflows/object"
)

// A phase-1 service of a data-plane node (nova-compute, the OVN metadata agent), whatever its kind:
//
//	customServiceConfig parsed first (refused with a condition, nothing deployed, when it is not INI)
//	→ held while deploy is false
//	→ waits, visibly, for its node's phase 0 (InfrastructureReady), for the kind's control-plane
//	  dependencies (the Nova cell and its Secrets), and for the SSH key Secret
//	→ the kind's playbook installs the rendered configuration (customServiceConfig in a later file)
//	  and (re)starts the service
//	→ the kind's check that the service joined the cloud.
//
// A succeeded playbook is recorded with the hash of what it installed, so a retry after a failed check
// does not run it again.

// edpmServiceSpec is what the runner needs of a service CR's spec: the fields every kind's API spec has
// (each kind copies them out of its own spec; see common).
type edpmServiceSpec struct {
	DataplaneNodeName      string
	CustomServiceConfig    string
	SSHKeySecretName       string
	InventoryConfigMapName string
	AnsibleUser            string
	AnsiblePort            int32
	AnsibleHost            string
	Deploy                 bool
}

// hostVars are how Ansible reaches the service's node, as the service CR says (inventory aside).
func (s edpmServiceSpec) hostVars() map[string]json.RawMessage {
	vars := map[string]json.RawMessage{}
	if s.AnsibleHost != "" {
		vars["ansible_host"], _ = json.Marshal(s.AnsibleHost)
	}
	if s.AnsibleUser != "" {
		vars["ansible_user"], _ = json.Marshal(s.AnsibleUser)
	}
	if s.AnsiblePort != 0 {
		vars["ansible_port"], _ = json.Marshal(s.AnsiblePort)
	}
	return vars
}

// edpmServiceKind plugs one kind into the runner.
type edpmServiceKind interface {
	// fresh returns a new kind of the same type, for a preview beside the running reconcile.
	fresh() edpmServiceKind
	// step and playbooks name the service's step and its deploy and removal playbooks.
	step() string
	playbook() string
	removePlaybook() string
	// condition is the kind's deployed condition type.
	condition() string
	// decode reads the kind's spec; common is what every kind's spec shares; validate refuses a bad
	// one before anything is deployed.
	decode(raw json.RawMessage) error
	common() edpmServiceSpec
	validate() error
	// waitDependencies waits for the kind's control-plane dependencies.
	waitDependencies(ctx workflow.Context, lc *object.Lifecycle, gen int64) error
	// files renders the configuration files for host.
	files(host string) ([]oslo.ConfigFile, error)
	// verify checks that the service joined the cloud and records what it learns in status.
	verify(ctx workflow.Context, lc *object.Lifecycle, host string) error
	// cleanup removes what the service left in the cloud, after the removal playbook.
	cleanup(ctx workflow.Context, lc *object.Lifecycle, rec *edpmServiceRecord) error
}

// hostEmptyWaiter is a kind whose services stop only once the host holds no workload (nova-compute:
// its instances).
type hostEmptyWaiter interface {
	waitHostEmpty(ctx workflow.Context, lc *object.Lifecycle, rec *edpmServiceRecord) error
}

// ChangeTeardownAfterFailedInstall is the GetVersion change after which deleting a service whose deploy
// playbook failed (and so never recorded an install) runs its removal: runs before it left what the
// failed playbook had written on the host.
const ChangeTeardownAfterFailedInstall = "edpm-service-teardown-after-failed-install"

// edpmServiceRecord is what a service workflow remembers.
type edpmServiceRecord struct {
	Host string `json:"host,omitempty"`
	// Installed is the hash of the configuration and host variables the playbook last installed.
	Installed string `json:"installed,omitempty"`
	Attempts  int    `json:"attempts,omitempty"`
	// Deploy input of the last run, for the removal playbook.
	SSHKeySecret       string                     `json:"sshKeySecret,omitempty"`
	InventoryConfigMap string                     `json:"inventoryConfigMap,omitempty"`
	HostVars           map[string]json.RawMessage `json:"hostVars,omitempty"`
	Cell               string                     `json:"cell,omitempty"`
	// ComputeRegion is the region of the compute API the service registered with (its cell's Nova).
	ComputeRegion string `json:"computeRegion,omitempty"`
	// CloudSecret is the Secret whose clouds.yaml reaches the service's Nova or Neutron (its Nova's
	// services' Secret, see openstack.ServiceCloud); empty for the namespace's clouds Secret.
	CloudSecret string `json:"cloudSecret,omitempty"`
}

// regional is implemented by kinds whose service registers with a compute API of a region of its own.
type regional interface {
	computeRegion() string
}

// novaBound is implemented by kinds whose service belongs to a Nova: they reach the cloud with the
// clouds.yaml of that Nova's services' Secret.
type novaBound interface {
	cloudSecret() string
}

type edpmServiceReconciler struct {
	kind edpmServiceKind
	rec  edpmServiceRecord
}

func (r *edpmServiceReconciler) Detail() any { return r.rec }

// Restore reads the record the previous run carried.
func (r *edpmServiceReconciler) Restore(lc *object.Lifecycle) error { return lc.Load(&r.rec) }

func (r *edpmServiceReconciler) Reconcile(ctx workflow.Context, lc *object.Lifecycle, obj *kube.Object) error {
	if err := lc.Load(&r.rec); err != nil {
		return err
	}
	defer func() { _ = lc.Save(r.rec) }()
	gen := obj.Generation
	if err := r.kind.decode(obj.Spec); err != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("spec of %s: %v", lc.Ref, err), lifecycle.ReasonInvalidSpec, err)
	}
	spec := r.kind.common()
	cond := r.kind.condition()
	// A bad customServiceConfig is refused before anything else: nothing is deployed with it.
	if spec.CustomServiceConfig != "" {
		if _, err := oslo.ParseServiceConfig(spec.CustomServiceConfig); err != nil {
			msg := fmt.Sprintf("customServiceConfig is not an oslo.config INI snippet: %v; nothing was deployed", err)
			lc.SetCondition(ctx, metav1.Condition{Type: cond, Status: metav1.ConditionFalse, Reason: ReasonCustomServiceConfig, Message: msg})
			return temporal.NewNonRetryableApplicationError(msg, ReasonCustomServiceConfig, err)
		}
	}
	if err := r.kind.validate(); err != nil {
		lc.SetCondition(ctx, metav1.Condition{Type: cond, Status: metav1.ConditionFalse, Reason: lifecycle.ReasonInvalidSpec, Message: err.Error()})
		return specError(lifecycle.ReasonInvalidSpec, err)
	}
	if !spec.Deploy {
		lc.SetCondition(ctx, metav1.Condition{Type: cond, Status: metav1.ConditionFalse, Reason: ReasonDeployHeld,
			Message: "spec.deploy is false (it follows the node's): nothing is deployed until it is true"})
		_ = lc.SetField(ctx, "deployed", false)
		return nil
	}

	lc.SetPhase(ctx, "Waiting")
	host, err := r.nodeHost(ctx, lc, gen, spec.DataplaneNodeName)
	if err != nil {
		return err
	}
	r.rec.Host = host
	_ = workflow.UpsertTypedSearchAttributes(ctx, lifecycle.SAHost.ValueSet(host))
	if err := waitNodeInfrastructure(ctx, lc, gen, cond, lc.Ref.Namespace, spec.DataplaneNodeName); err != nil {
		return err
	}
	if err := r.kind.waitDependencies(ctx, lc, gen); err != nil {
		return err
	}
	if rk, ok := r.kind.(regional); ok {
		r.rec.ComputeRegion = rk.computeRegion()
	}
	if nb, ok := r.kind.(novaBound); ok {
		r.rec.CloudSecret = nb.cloudSecret()
	}
	if err := waitSecret(ctx, lc, gen, cond, lc.Ref.Namespace, spec.SSHKeySecretName, ansible.SSHKeySecretKey); err != nil {
		return err
	}

	files, err := r.kind.files(host)
	if err != nil {
		lc.SetCondition(ctx, metav1.Condition{Type: cond, Status: metav1.ConditionFalse, Reason: ReasonCustomServiceConfig, Message: err.Error()})
		return specError(ReasonCustomServiceConfig, err)
	}
	hostVars := spec.hostVars()
	in := ansible.PlaybookInput{
		Namespace: lc.Ref.Namespace, Host: host, Step: r.kind.step(), Playbook: r.kind.playbook(),
		InventoryConfigMap: spec.InventoryConfigMapName, HostVars: hostVars, SSHKeySecret: spec.SSHKeySecretName, Files: files,
	}
	hash := installHash(in)
	r.rec.SSHKeySecret, r.rec.InventoryConfigMap, r.rec.HostVars = spec.SSHKeySecretName, spec.InventoryConfigMapName, hostVars
	if r.rec.Installed != hash {
		lc.SetPhase(ctx, "Deploying")
		_ = workflow.UpsertTypedSearchAttributes(ctx, lifecycle.SAPhase.ValueSet("1:"+r.kind.step()))
		r.rec.Attempts++
		where := fmt.Sprintf("phase 1 · %s · %s on host %s", r.kind.step(), r.kind.playbook(), host)
		if r.rec.Attempts > 1 {
			where += fmt.Sprintf(" · attempt %d", r.rec.Attempts)
		}
		if err := lc.Step(ctx, where); err != nil {
			return err
		}
		lc.SetCondition(ctx, metav1.Condition{Type: cond, Status: metav1.ConditionFalse, Reason: lifecycle.ReasonReconciling, Message: where})
		_ = lc.SetField(ctx, "deployed", false)
		var res ansible.PlaybookResult
		if err := workflow.ExecuteActivity(AnsibleActivity(ctx), ansibleActs.RunPlaybook, in).Get(ctx, &res); err != nil {
			lc.SetCondition(ctx, metav1.Condition{Type: cond, Status: metav1.ConditionFalse, Reason: object.FailureReason(err),
				Message: fmt.Sprintf("step %s failed on host %s: %s (send the retry signal to re-run it)", r.kind.step(), host, object.FailureMessage(err))})
			return fmt.Errorf("step %s of %s: %w", r.kind.step(), lc.Ref, err)
		}
		r.rec.Installed = hash
	}
	lc.SetPhase(ctx, "Verifying")
	if err := r.kind.verify(ctx, lc, host); err != nil {
		return err
	}
	_ = lc.SetField(ctx, "deployed", true)
	return nil
}

// ServicePreview is what the preview update of a data-plane service returns: what a reconcile of the
// object as it is now would change on its host, from a check-mode run of the service's playbook.
type ServicePreview struct {
	Host       string `json:"host"`
	Step       string `json:"step"`
	Playbook   string `json:"playbook"`
	Generation int64  `json:"generation"`
	// UpToDate is true when the configuration is the one last installed: a reconcile would run no
	// playbook (Changes then shows only drift on the host: what was changed there by hand).
	UpToDate bool `json:"upToDate"`
	// Changes are the tasks that would change the host, with diffs (Secret values redacted).
	Changes   []ansible.TaskChange `json:"changes"`
	Truncated bool                 `json:"truncated,omitempty"`
}

// Preview runs the service's playbook in check mode (--check --diff) with the object's spec as it is in
// the API now, and returns what would change on the host, changing nothing. With the workflow paused,
// an edit shows what it would do before resume applies it. It does not wait: a dependency that is not
// ready (the node's host, its cell, the SSH key) is an error naming it.
func (r *edpmServiceReconciler) Preview(ctx workflow.Context, lc *object.Lifecycle) (any, error) {
	ctx = previewing(ctx)
	var obj kube.Object
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.GetObject, lc.Ref).Get(ctx, &obj); err != nil {
		return nil, fmt.Errorf("read %s: %w", lc.Ref, err)
	}
	if !obj.Exists {
		return nil, fmt.Errorf("%s does not exist", lc.Ref)
	}
	in, err := servicePlaybook(ctx, lc, r.kind.fresh(), &obj)
	if err != nil {
		return nil, err
	}
	host, gen := in.Host, obj.Generation
	out := ServicePreview{Host: host, Step: in.Step, Playbook: in.Playbook, Generation: gen, UpToDate: installHash(in) == r.rec.Installed}
	in.Check = true
	var res ansible.PlaybookResult
	if err := workflow.ExecuteActivity(AnsibleActivity(ctx), ansibleActs.RunPlaybook, in).Get(ctx, &res); err != nil {
		return nil, fmt.Errorf("check-mode run of %s on host %s: %w", in.Playbook, host, err)
	}
	out.Changes, out.Truncated = res.Changes, res.ChangesTruncated
	if out.Changes == nil {
		out.Changes = []ansible.TaskChange{}
	}
	return out, nil
}

// servicePlaybook builds the playbook run a reconcile of the service obj (of kind) would make for its
// spec as it is, without waiting: a dependency that is not ready (the node's host, the cell, the SSH
// key) is an error naming it. lc serves the look-ups; only its namespace (the service's) matters.
func servicePlaybook(ctx workflow.Context, lc *object.Lifecycle, kind edpmServiceKind, obj *kube.Object) (ansible.PlaybookInput, error) {
	ctx = previewing(ctx)
	p := &edpmServiceReconciler{kind: kind}
	if err := p.kind.decode(obj.Spec); err != nil {
		return ansible.PlaybookInput{}, fmt.Errorf("spec: %w", err)
	}
	spec := p.kind.common()
	if spec.CustomServiceConfig != "" {
		if _, err := oslo.ParseServiceConfig(spec.CustomServiceConfig); err != nil {
			return ansible.PlaybookInput{}, fmt.Errorf("customServiceConfig is not an oslo.config INI snippet: %w", err)
		}
	}
	if err := p.kind.validate(); err != nil {
		return ansible.PlaybookInput{}, err
	}
	if !spec.Deploy {
		return ansible.PlaybookInput{}, fmt.Errorf("spec.deploy is false: nothing would be deployed")
	}
	gen, cond := obj.Generation, p.kind.condition()
	host, err := p.nodeHost(ctx, lc, gen, spec.DataplaneNodeName)
	if err != nil {
		return ansible.PlaybookInput{}, err
	}
	if err := p.kind.waitDependencies(ctx, lc, gen); err != nil {
		return ansible.PlaybookInput{}, err
	}
	if err := waitSecret(ctx, lc, gen, cond, lc.Ref.Namespace, spec.SSHKeySecretName, ansible.SSHKeySecretKey); err != nil {
		return ansible.PlaybookInput{}, err
	}
	files, err := p.kind.files(host)
	if err != nil {
		return ansible.PlaybookInput{}, err
	}
	return ansible.PlaybookInput{
		Namespace: lc.Ref.Namespace, Host: host, Step: p.kind.step(), Playbook: p.kind.playbook(),
		InventoryConfigMap: spec.InventoryConfigMapName, HostVars: spec.hostVars(), SSHKeySecret: spec.SSHKeySecretName, Files: files,
	}, nil
}

// nodeHost reads the node's hostName (the inventory host), waiting while the node does not exist.
func (r *edpmServiceReconciler) nodeHost(ctx workflow.Context, lc *object.Lifecycle, gen int64, node string) (string, error) {
	var host string
	err := waitUntil(ctx, lc, gen, r.kind.condition(), func(ctx workflow.Context) (bool, string, string, error) {
		var o kube.Object
		ref := DataPlaneNodeRef(lc.Ref.Namespace, node)
		if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.GetObject, ref).Get(ctx, &o); err != nil {
			return false, "", "", fmt.Errorf("read %s: %w", ref, err)
		}
		if !o.Exists {
			return false, dataplanev1beta1.ReasonWaitingForPhase, fmt.Sprintf("waiting for OpenStackDataPlaneNode %s (it does not exist)", node), nil
		}
		var spec dataplanev1beta1.OpenStackDataPlaneNodeSpec
		if err := json.Unmarshal(o.Spec, &spec); err != nil {
			return false, "", "", fmt.Errorf("spec of node %s: %w", node, err)
		}
		host = spec.HostName
		return true, "", "", nil
	})
	return host, err
}

func installHash(in ansible.PlaybookInput) string {
	b, _ := json.Marshal(in)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func (r *edpmServiceReconciler) Teardown(ctx workflow.Context, lc *object.Lifecycle) error {
	if err := lc.Load(&r.rec); err != nil {
		return err
	}
	if r.rec.Installed == "" {
		// A deploy playbook that failed part-way may have written to the host (a nova-compute whose
		// configuration is in place and that exited at start): it is removed too.
		ran := r.rec.Attempts > 0 && r.rec.Host != ""
		if !ran || workflow.GetVersion(ctx, ChangeTeardownAfterFailedInstall, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
			return nil
		}
	}
	if w, ok := r.kind.(hostEmptyWaiter); ok && workflow.GetVersion(ctx, ChangeTeardownWaitsForInstances, workflow.DefaultVersion, 1) == 1 {
		if err := w.waitHostEmpty(ctx, lc, &r.rec); err != nil {
			return err
		}
	}
	if err := runRemovalPlaybook(ctx, lc, r.kind.step(), ansible.PlaybookInput{
		Namespace: lc.Ref.Namespace, Host: r.rec.Host, Step: r.kind.step() + "-remove", Playbook: r.kind.removePlaybook(),
		InventoryConfigMap: r.rec.InventoryConfigMap, HostVars: r.rec.HostVars, SSHKeySecret: r.rec.SSHKeySecret,
	}); err != nil {
		return err
	}
	if err := r.kind.cleanup(ctx, lc, &r.rec); err != nil {
		return err
	}
	r.rec.Installed = ""
	return lc.Save(r.rec)
}

// runRemovalPlaybook runs a teardown playbook on a host. The host may already be gone with its node: an
// unreachable host (or its SSH key Secret deleted) does not block the teardown, it is logged.
func runRemovalPlaybook(ctx workflow.Context, lc *object.Lifecycle, what string, in ansible.PlaybookInput) error {
	rctx := object.OnAnsible(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute, HeartbeatTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 5 * time.Second, BackoffCoefficient: 2, MaximumAttempts: 3},
	})
	err := workflow.ExecuteActivity(rctx, ansibleActs.RunPlaybook, in).Get(ctx, nil)
	var app *temporal.ApplicationError
	if err != nil && !(errors.As(err, &app) && (app.Type() == ansible.ErrHostUnreachable || app.Type() == kube.ErrSecretMissing)) {
		return fmt.Errorf("remove %s from host %s: %w", what, in.Host, err)
	}
	if err != nil {
		workflow.GetLogger(ctx).Warn(what+" left on a host that is gone", "object", lc.Ref.String(), "host", in.Host, "error", err)
	}
	return nil
}
