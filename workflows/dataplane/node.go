package dataplane

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/activities/ansible"
	"github.com/stackflow/stackflow/activities/baremetal"
	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/activities/openstack"
	dataplanev1beta1 "github.com/stackflow/stackflow/api/dataplane/v1beta1"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/workflows/object"
)

// What happens to an EDPM data-plane node, in order:
//
//  1. its effective configuration is resolved (role's nodeTemplate, node's own fields on top, effective
//     annotations node over role) and written as its inventory ConfigMap <node>-inventory;
//  2. its service CRs are created or patched from it (a NovaExternalCompute when it has a cell, an
//     OVNMetadataAgent when asked), and the ones it no longer asks for are removed;
//  3. with deploy true, and once its data plane (if any) admits it: phase -1 provisions the host through
//     Ironic unless it is pre-provisioned; phase 0 runs bootstrap, configure-network and configure-os over
//     SSH, waiting (visibly) for the SSH key Secret first; InfrastructureReady turns True;
//  4. phase 1 is its service CRs' own workflows (they wait for InfrastructureReady and their control-plane
//     dependencies); the node waits for them and reports ServicesReady, then Deployed.
//
// Steps that succeeded are recorded and never re-run for the same configuration, so a retry re-runs
// only the failed step; a change of the effective configuration re-runs phase 0. Deleting the node
// deletes its service CRs (whose teardown stops their services on the host), its inventory, and the
// Ironic node it enrolled.

// OpenStackDataPlaneNodeWorkflow serves an OpenStackDataPlaneNode.
func OpenStackDataPlaneNodeWorkflow(ctx workflow.Context, in object.Input) error {
	return object.Run(ctx, in, &edpmNodeReconciler{}, object.Options{})
}

type edpmNodeReconciler struct {
	rec edpmNodeRecord
	// steps and services of the reconcile under way, for status.phases.
	steps    []EDPMStep
	services []EDPMService
	// keyFound is set once this reconcile saw the SSH key Secret: one look per reconcile keeps the
	// Kubernetes round trip off every later step's path (the activity reads the key anyway).
	keyFound bool
	// ahead holds the reads a reconcile started side by side with its writes (since
	// ChangeEDPMNodeReadsAhead); each is taken by its first look.
	ahead readsAhead
}

// ChangeEDPMNodeReadsAhead is the GetVersion change after which a deploying node starts its look at the
// SSH key and at the data planes while it writes its inventory and service CRs, all side by side: a
// 500-node rollout's start-up was a queue of one-activity workflow tasks per node.
const ChangeEDPMNodeReadsAhead = "edpm-node-reads-ahead"

// readsAhead are reads started before their first use; nil when not started (or already taken).
type readsAhead struct {
	key, dataPlanes workflow.Future
}

// take returns *f (nil when unset) and forgets it: a read ahead answers the first look only, later
// looks read again.
func take(f *workflow.Future) workflow.Future {
	got := *f
	*f = nil
	return got
}

// edpmNodeRecord is what the node's workflow remembers across reconciles and continue-as-new.
type edpmNodeRecord struct {
	// InfraHash is the effective configuration phase 0 last ran with.
	InfraHash string                     `json:"infraHash,omitempty"`
	Steps     map[string]*edpmStepRecord `json:"steps,omitempty"`
	Ironic    *baremetal.Result          `json:"ironic,omitempty"`
	Cloud     *openstack.CloudSecret     `json:"cloud,omitempty"`
	// Services are the service CRs this node created or adopted.
	Services []lifecycle.ObjectRef `json:"services,omitempty"`
	// Inventory is true once the inventory ConfigMap was written.
	Inventory bool `json:"inventory,omitempty"`
	// DeployedGeneration and DeployedHash say what was last deployed completely: with both current,
	// the node has nothing to do and needs no admission.
	DeployedGeneration int64  `json:"deployedGeneration,omitempty"`
	DeployedHash       string `json:"deployedHash,omitempty"`
	// OVNKey is the SSH key Secret the ovn step last ran with: set, the host may be a chassis of the
	// cloud's OVN, which the node's teardown undoes (ovn-remove.yml, then the host's Neutron agents).
	OVNKey string `json:"ovnKey,omitempty"`
	// Host and DataPlane are shown by the status query.
	Host      string `json:"host,omitempty"`
	DataPlane string `json:"dataPlane,omitempty"`
	// PendingGrant is a data plane's grant that arrived as a run continued as new, not yet used.
	PendingGrant *EDPMGrant `json:"pendingGrant,omitempty"`
	// Held is the grant the node deploys under until it reports success or failure: its data plane
	// counts it running meanwhile and answers no second request, so a run that continued as new (or
	// restarted its reconcile) mid-deployment goes on under it instead of asking again.
	Held *EDPMGrant `json:"held,omitempty"`
}

// edpmStepRecord is one step's last outcome.
type edpmStepRecord struct {
	Phase    int32     `json:"phase"`
	State    string    `json:"state"`
	Attempts int       `json:"attempts"`
	Message  string    `json:"message,omitempty"`
	Hash     string    `json:"hash,omitempty"`
	Started  time.Time `json:"started,omitempty"`
	Finished time.Time `json:"finished,omitempty"`
}

func (r *edpmNodeReconciler) Detail() any { return r.rec }

// Restore reads the record the previous run carried.
func (r *edpmNodeReconciler) Restore(lc *object.Lifecycle) error { return lc.Load(&r.rec) }

func (r *edpmNodeReconciler) Reconcile(ctx workflow.Context, lc *object.Lifecycle, obj *kube.Object) error {
	if err := lc.Load(&r.rec); err != nil {
		return err
	}
	if r.rec.Steps == nil {
		r.rec.Steps = map[string]*edpmStepRecord{}
	}
	defer func() { _ = lc.Save(r.rec) }()
	gen := obj.Generation
	r.keyFound = false
	r.ahead = readsAhead{}

	cfg, err := r.resolve(ctx, lc, obj)
	if err != nil {
		return err
	}
	var services []EDPMService
	if cfg.Deploy && workflow.GetVersion(ctx, ChangeEDPMNodeReadsAhead, workflow.DefaultVersion, 1) == 1 {
		r.ahead = readsAhead{key: r.checkKey(ctx, lc, cfg), dataPlanes: listDataPlanes(ctx, lc)}
		services, err = r.deriveObjectsTogether(ctx, lc, cfg)
	} else {
		services, err = r.deriveObjects(ctx, lc, cfg)
	}
	if err != nil {
		return err
	}
	steps, hash := r.planSteps(cfg, services)
	r.setPhases(ctx, lc, steps, services)
	if !cfg.Deploy {
		lc.SetCondition(ctx, metav1.Condition{Type: ConditionDeployed, Status: metav1.ConditionFalse, Reason: ReasonDeployHeld,
			Message: "spec.deploy is false: nothing is deployed until it is true"})
		_ = lc.SetField(ctx, "deployed", false)
		return nil
	}
	report, err := r.admit(ctx, lc, gen, cfg, steps, hash)
	if err != nil {
		return err
	}
	if err := r.deployInfrastructure(ctx, lc, gen, cfg, steps, services, report); err != nil {
		return err
	}
	if err := r.followServices(ctx, lc, gen, steps, services, report); err != nil {
		return err
	}
	lc.SetCondition(ctx, metav1.Condition{Type: ConditionDeployed, Status: metav1.ConditionTrue, Reason: lifecycle.ReasonReconciled, Message: "every phase done"})
	r.setPhases(ctx, lc, steps, services)
	_ = lc.SetField(ctx, "deployed", true)
	r.rec.DeployedGeneration, r.rec.DeployedHash = gen, hash
	report(EDPMSucceeded, dataplanev1beta1.PhaseServices, "", "every phase done")
	return nil
}

// nodeReport tells the node's data plane (when it has one) where the node is.
type nodeReport func(state string, phase int32, step, msg string)

// resolve reads the node and its role (waiting while the role does not exist) and computes the node's
// effective configuration.
func (r *edpmNodeReconciler) resolve(ctx workflow.Context, lc *object.Lifecycle, obj *kube.Object) (EDPMNodeConfig, error) {
	var node dataplanev1beta1.OpenStackDataPlaneNode
	if err := json.Unmarshal(obj.Spec, &node.Spec); err != nil {
		return EDPMNodeConfig{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("spec of %s: %v", lc.Ref, err), lifecycle.ReasonInvalidSpec, err)
	}
	node.Name, node.Namespace, node.Annotations = lc.Ref.Name, lc.Ref.Namespace, obj.Annotations
	role, err := r.readRole(ctx, lc, obj.Generation, node.Spec.Role)
	if err != nil {
		return EDPMNodeConfig{}, err
	}
	cfg, err := ResolveEDPMNode(&node, role)
	if err == nil && cfg.BareMetal != nil && cfg.BareMetal.Driver == "" {
		if workflow.GetVersion(ctx, ChangeBaremetalDriverRequired, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
			cfg.BareMetal.Driver = "fake-hardware"
		} else {
			err = ErrNoDriver(node.Name, role.Name)
		}
	}
	if err != nil {
		return EDPMNodeConfig{}, specError(lifecycle.ReasonInvalidSpec, err)
	}
	gateOVNStep(ctx, &cfg)
	r.rec.Host = cfg.HostName
	_ = workflow.UpsertTypedSearchAttributes(ctx, lifecycle.SAHost.ValueSet(cfg.HostName), lifecycle.SACell.ValueSet(cfg.Cell))
	_ = lc.SetField(ctx, "cell", cfg.Cell)
	return cfg, nil
}

// deriveObjects writes the node's inventory and its service CRs first: they exist (held) even while the
// node does not deploy.
func (r *edpmNodeReconciler) deriveObjects(ctx workflow.Context, lc *object.Lifecycle, cfg EDPMNodeConfig) ([]EDPMService, error) {
	if err := lc.Step(ctx, "write inventory ConfigMap "+InventoryConfigMapName(lc.Ref.Name)); err != nil {
		return nil, err
	}
	if err := r.applyInventory(ctx, lc, cfg); err != nil {
		return nil, err
	}
	if err := lc.Step(ctx, "create or patch service CRs"); err != nil {
		return nil, err
	}
	return r.applyServices(ctx, lc, cfg)
}

// deriveObjects' writes, side by side: the inventory and every service CR at once.
func (r *edpmNodeReconciler) deriveObjectsTogether(ctx workflow.Context, lc *object.Lifecycle, cfg EDPMNodeConfig) ([]EDPMService, error) {
	if err := lc.Step(ctx, "write inventory ConfigMap "+InventoryConfigMapName(lc.Ref.Name)+" and service CRs"); err != nil {
		return nil, err
	}
	inventory := r.startInventory(ctx, lc, cfg)
	services := EDPMServices(cfg)
	applies := make([]workflow.Future, len(services))
	for i, svc := range services {
		applies[i] = r.startService(ctx, lc, svc)
	}
	if err := inventory.Get(ctx, nil); err != nil {
		return nil, fmt.Errorf("write inventory of %s: %w", lc.Ref, err)
	}
	r.rec.Inventory = true
	keep := make([]lifecycle.ObjectRef, len(services))
	for i, svc := range services {
		var uid string
		if err := applies[i].Get(ctx, &uid); err != nil {
			return nil, fmt.Errorf("create or patch %s: %w", svc.Ref, err)
		}
		keep[i] = svc.Ref
		keep[i].UID = uid
	}
	return services, r.dropServices(ctx, keep)
}

// planSteps fixes the node's steps; a new effective configuration makes phase 0 run again (provisioning
// stays done for the same host).
func (r *edpmNodeReconciler) planSteps(cfg EDPMNodeConfig, services []EDPMService) ([]EDPMStep, string) {
	steps := EDPMNodeSteps(cfg)
	r.steps, r.services = steps, services
	hash := cfg.InfrastructureHash()
	if r.rec.InfraHash != hash {
		//workflowcheck:ignore -- reviewed: the result does not depend on the map's order
		for name, s := range r.rec.Steps {
			if s.Phase == dataplanev1beta1.PhaseInfrastructure {
				delete(r.rec.Steps, name)
			}
		}
		r.rec.InfraHash = hash
	}
	return steps, hash
}

// admit waits, when there is work, for the SSH key (before asking for a slot, so a node missing its key
// holds none), then for the data plane's admission, and returns how the node reports to it.
func (r *edpmNodeReconciler) admit(ctx workflow.Context, lc *object.Lifecycle, gen int64, cfg EDPMNodeConfig, steps []EDPMStep, hash string) (nodeReport, error) {
	work := r.rec.DeployedGeneration != gen || r.rec.DeployedHash != hash
	for _, st := range steps {
		if rec := r.rec.Steps[st.Name]; rec == nil || rec.State != EDPMSucceeded {
			work = true
		}
	}
	if work {
		if err := r.waitKey(ctx, lc, gen, cfg); err != nil {
			return nil, err
		}
	}
	dp, err := r.admission(ctx, lc, gen, cfg, work)
	if err != nil {
		return nil, err
	}
	if work {
		_ = lc.SetField(ctx, "deployed", false)
	}
	return func(state string, phase int32, step, msg string) {
		if dp == "" {
			return
		}
		rep := EDPMReport{Node: lc.Ref.Name, Host: cfg.HostName, State: state, Phase: phase, Step: step, Message: msg, Generation: gen}
		if state != EDPMRunning {
			r.rec.Held = nil
		}
		if state == EDPMRunning {
			// Progress is informative: the step does not wait for its delivery.
			workflow.SignalExternalWorkflow(ctx, dp, "", SignalEDPMReport, rep)
			return
		}
		reportToDataPlane(ctx, dp, rep)
	}, nil
}

// deployInfrastructure runs the steps not done yet: phase -1 (Ironic) and phase 0 (playbooks).
func (r *edpmNodeReconciler) deployInfrastructure(ctx workflow.Context, lc *object.Lifecycle, gen int64, cfg EDPMNodeConfig, steps []EDPMStep, services []EDPMService, report nodeReport) error {
	for _, st := range steps {
		if rec := r.rec.Steps[st.Name]; rec != nil && rec.State == EDPMSucceeded && (st.Name != StepProvision || rec.Hash == provisionHash(cfg)) {
			continue
		}
		report(EDPMRunning, st.Phase, st.Name, "")
		if err := r.runStep(ctx, lc, gen, cfg, st); err != nil {
			if object.Interrupted(err) {
				return err
			}
			r.setPhases(ctx, lc, steps, services)
			report(EDPMFailed, st.Phase, st.Name, object.FailureMessage(err))
			return err
		}
		r.setPhases(ctx, lc, steps, services)
	}
	lc.SetCondition(ctx, metav1.Condition{Type: dataplanev1beta1.ConditionInfrastructureReady, Status: metav1.ConditionTrue, Reason: lifecycle.ReasonReconciled,
		Message: fmt.Sprintf("phase 0 done on %s", cfg.HostName)})
	return nil
}

// followServices is phase 1: the service CRs deploy themselves once InfrastructureReady is True; the
// node follows them.
func (r *edpmNodeReconciler) followServices(ctx workflow.Context, lc *object.Lifecycle, gen int64, steps []EDPMStep, services []EDPMService, report nodeReport) error {
	lc.SetPhase(ctx, "Services")
	_ = workflow.UpsertTypedSearchAttributes(ctx, lifecycle.SAPhase.ValueSet("Services"))
	for _, svc := range services {
		report(EDPMRunning, dataplanev1beta1.PhaseServices, svc.Step, "")
		if err := r.waitService(ctx, lc, gen, svc); err != nil {
			if object.Interrupted(err) {
				return err
			}
			r.setPhases(ctx, lc, steps, services)
			report(EDPMFailed, dataplanev1beta1.PhaseServices, svc.Step, object.FailureMessage(err))
			return err
		}
	}
	lc.SetCondition(ctx, metav1.Condition{Type: dataplanev1beta1.ConditionServicesReady, Status: metav1.ConditionTrue, Reason: lifecycle.ReasonReconciled,
		Message: fmt.Sprintf("%d service(s) deployed", len(services))})
	return nil
}

// readRole reads the node's role, waiting (visibly) while it does not exist.
func (r *edpmNodeReconciler) readRole(ctx workflow.Context, lc *object.Lifecycle, gen int64, name string) (*dataplanev1beta1.OpenStackDataPlaneRole, error) {
	role := &dataplanev1beta1.OpenStackDataPlaneRole{}
	err := waitUntil(ctx, lc, gen, lifecycle.ConditionReady, func(ctx workflow.Context) (bool, string, string, error) {
		ref := DataPlaneRoleRef(lc.Ref.Namespace, name)
		o, err := object.GetObject(ctx, ref)
		if err != nil {
			return false, "", "", fmt.Errorf("read %s: %w", ref, err)
		}
		if !o.Exists {
			return false, ReasonWaitingForRole, fmt.Sprintf("waiting for OpenStackDataPlaneRole %s (it does not exist)", name), nil
		}
		if err := json.Unmarshal(o.Spec, &role.Spec); err != nil {
			return false, "", "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("spec of role %s: %v", name, err), lifecycle.ReasonInvalidSpec, err)
		}
		role.Name, role.Namespace, role.Annotations = name, lc.Ref.Namespace, o.Annotations
		return true, "", "", nil
	})
	return role, err
}

func (r *edpmNodeReconciler) applyInventory(ctx workflow.Context, lc *object.Lifecycle, cfg EDPMNodeConfig) error {
	if err := r.startInventory(ctx, lc, cfg).Get(ctx, nil); err != nil {
		return fmt.Errorf("write inventory of %s: %w", lc.Ref, err)
	}
	r.rec.Inventory = true
	return nil
}

// startInventory starts the write of the node's inventory ConfigMap.
func (r *edpmNodeReconciler) startInventory(ctx workflow.Context, lc *object.Lifecycle, cfg EDPMNodeConfig) workflow.Future {
	data, _ := json.Marshal(map[string]string{ansible.InventoryConfigMapKey: cfg.Inventory()})
	ref := lifecycle.ObjectRef{Version: "v1", Kind: "ConfigMap", Resource: "configmaps", Namespace: lc.Ref.Namespace, Name: InventoryConfigMapName(lc.Ref.Name)}
	in := kube.ApplyInput{Ref: ref, Labels: map[string]string{LabelDataPlaneNode: lc.Ref.Name, "app.kubernetes.io/managed-by": "stackflow"},
		Owned: map[string]json.RawMessage{"data": data}}
	return workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.ApplyObject, in)
}

// startService starts the create-or-patch of one service CR; its result is the CR's UID.
func (r *edpmNodeReconciler) startService(ctx workflow.Context, lc *object.Lifecycle, svc EDPMService) workflow.Future {
	in := kube.ApplyInput{Ref: svc.Ref, Labels: map[string]string{LabelDataPlaneNode: lc.Ref.Name, "app.kubernetes.io/managed-by": "stackflow"},
		Owned: svc.Owned, SpecEnvDefaults: svc.ImageDefaults}
	return workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.ApplyObject, in)
}

// applyServices creates or patches the node's service CRs and deletes the ones it no longer asks for.
func (r *edpmNodeReconciler) applyServices(ctx workflow.Context, lc *object.Lifecycle, cfg EDPMNodeConfig) ([]EDPMService, error) {
	services := EDPMServices(cfg)
	var keep []lifecycle.ObjectRef
	for _, svc := range services {
		var uid string
		if err := r.startService(ctx, lc, svc).Get(ctx, &uid); err != nil {
			return nil, fmt.Errorf("create or patch %s: %w", svc.Ref, err)
		}
		ref := svc.Ref
		ref.UID = uid
		keep = append(keep, ref)
	}
	return services, r.dropServices(ctx, keep)
}

// dropServices deletes the service CRs the node created before and no longer asks for; keep is what it
// asks for now, recorded once the others are gone.
func (r *edpmNodeReconciler) dropServices(ctx workflow.Context, keep []lifecycle.ObjectRef) error {
	for _, old := range r.rec.Services {
		if slices.ContainsFunc(keep, func(k lifecycle.ObjectRef) bool { return k.Kind == old.Kind && k.Name == old.Name }) {
			continue
		}
		if err := deleteAndWait(ctx, old); err != nil {
			return err
		}
	}
	r.rec.Services = keep
	return nil
}

// admission returns the workflow ID of the data plane that governs the node ("" when none) once the
// data plane admitted the node, or at once when the node has no work left (nothing to hold a slot for).
func (r *edpmNodeReconciler) admission(ctx workflow.Context, lc *object.Lifecycle, gen int64, cfg EDPMNodeConfig, work bool) (string, error) {
	var dp *kube.ListedObject
	// A role that names its data plane puts its nodes under it: they wait for it to exist rather than
	// deploy on their own.
	err := waitUntil(ctx, lc, gen, conditionDataPlaneAdmitted, func(ctx workflow.Context) (bool, string, string, error) {
		var dps []kube.ListedObject
		f := take(&r.ahead.dataPlanes)
		if f == nil {
			f = listDataPlanes(ctx, lc)
		}
		if err := f.Get(ctx, &dps); err != nil {
			return false, "", "", fmt.Errorf("list data planes of %s: %w", lc.Ref, err)
		}
		dp = GoverningDataPlane(dps, cfg.DataPlane, cfg.Role, lc.Ref.Name)
		if dp == nil && cfg.DataPlane != "" && work {
			return false, ReasonWaitingForDataPlane, fmt.Sprintf("waiting for OpenStackDataPlane %s, named by role %s (it does not exist)", cfg.DataPlane, cfg.Role), nil
		}
		return true, "", "", nil
	})
	if err != nil {
		return "", err
	}
	if dp == nil {
		r.rec.DataPlane = ""
		return "", nil
	}
	dpRef := DataPlaneRef(lc.Ref.Namespace, dp.Ref.Name)
	dpRef.UID = dp.Ref.UID
	dpID := lifecycle.WorkflowID(dpRef)
	r.rec.DataPlane = dp.Ref.Name
	if !work {
		return dpID, nil
	}
	admitted := func(g EDPMGrant) (string, error) {
		r.rec.Held = &g
		lc.SetCondition(ctx, metav1.Condition{Type: conditionDataPlaneAdmitted, Status: metav1.ConditionTrue, Reason: "Admitted",
			Message: fmt.Sprintf("admitted by OpenStackDataPlane %s", dp.Ref.Name)})
		return g.DataPlane, nil
	}
	if h := r.rec.Held; h != nil && h.DataPlane == dpID &&
		workflow.GetVersion(ctx, "edpm-node-held-grant", workflow.DefaultVersion, 1) == 1 {
		return admitted(*h)
	}
	if g := r.rec.PendingGrant; g != nil {
		// A grant that came as the previous run continued as new.
		r.rec.PendingGrant = nil
		return admitted(*g)
	}
	grants := workflow.GetSignalChannel(ctx, SignalEDPMGrant)
	if workflow.GetVersion(ctx, ChangeGrantBeforeAsk, workflow.DefaultVersion, 1) == 1 {
		// The data plane grants the members it lists at its start without being asked: a grant here
		// already needs no request (the data plane would ignore it: the node runs in its record).
		var g EDPMGrant
		if grants.ReceiveAsync(&g) {
			return admitted(g)
		}
	}
	// Ask to be admitted; the refresh wakes a data plane that is idle.
	unawaited := workflow.GetVersion(ctx, ChangeAskUnawaited, workflow.DefaultVersion, 1) == 1
	ask := func() {
		req := workflow.SignalExternalWorkflow(ctx, dpID, "", SignalEDPMRequest, EDPMRequest{Node: lc.Ref.Name, Generation: gen})
		if unawaited {
			// A lost ask is asked again below, after a few poll intervals without a grant.
			workflow.SignalExternalWorkflow(ctx, dpID, "", lifecycle.SignalRefresh, nil)
			return
		}
		_ = req.Get(ctx, nil)
		_ = workflow.SignalExternalWorkflow(ctx, dpID, "", lifecycle.SignalRefresh, nil).Get(ctx, nil)
	}
	ask()
	msg := fmt.Sprintf("waiting for OpenStackDataPlane %s to admit the node (bounded concurrency, failure budget, deploy)", dp.Ref.Name)
	lc.SetCondition(ctx, metav1.Condition{Type: conditionDataPlaneAdmitted, Status: metav1.ConditionFalse, Reason: ReasonWaitingForDataPlane, Message: msg})
	if err := lc.Step(ctx, msg); err != nil {
		return "", err
	}
	for {
		var g EDPMGrant
		got := false
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(grants, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &g); got = true })
		// No answer within a few poll intervals: ask again (the data plane may have been restarted, or
		// not running before).
		tctx, cancelTimer := workflow.WithCancel(ctx)
		sel.AddFuture(workflow.NewTimer(tctx, 4*lc.Limits().PollInterval), func(workflow.Future) {})
		sel.Select(ctx)
		cancelTimer()
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if lc.Deleting() {
			return "", object.ErrDeleted
		}
		if got {
			return admitted(g)
		}
		if lc.Desired() > gen {
			return "", errSuperseded(gen, lc.Desired())
		}
		if lc.ContinueAsNewDue(ctx) {
			// A grant arriving from now on is drained into the record (Drain) for the next run.
			return "", object.ErrContinueAsNew
		}
		ask()
	}
}

// ChangeAskUnawaited is the GetVersion change after which a node asking its data plane for admission
// waits for the grant only, not for its request and refresh to be delivered: a busy data plane took
// its signals a minute late, and the grant that had come meanwhile waited for them.
const ChangeAskUnawaited = "edpm-node-ask-unawaited"

// ChangeGrantBeforeAsk is the GetVersion change after which a node that holds a grant when it comes to
// ask for one takes it without asking: a request and a refresh less per node at a rollout's start.
const ChangeGrantBeforeAsk = "edpm-node-grant-before-ask"

// listDataPlanes starts the listing of the data planes of the node's namespace.
func listDataPlanes(ctx workflow.Context, lc *object.Lifecycle) workflow.Future {
	return object.StartListObjects(ctx, kube.ListInput{Ref: DataPlaneRef(lc.Ref.Namespace, "")})
}

// Drain takes a grant delivered but not yet read into the record, before the run continues as new: the
// next run's admission starts from it instead of asking again.
func (r *edpmNodeReconciler) Drain(ctx workflow.Context, lc *object.Lifecycle) error {
	if err := lc.Load(&r.rec); err != nil {
		return err
	}
	var g EDPMGrant
	found := false
	for workflow.GetSignalChannel(ctx, SignalEDPMGrant).ReceiveAsync(&g) {
		found = true
	}
	if !found {
		return nil
	}
	r.rec.PendingGrant = &g
	return lc.Save(r.rec)
}

// GoverningDataPlane picks the data plane that deploys a node: the one its role names, else the first
// (by name) listing its role or the node itself; nil when none does.
func GoverningDataPlane(dps []kube.ListedObject, roleDataPlane, role, node string) *kube.ListedObject {
	var first *kube.ListedObject
	for i := range dps {
		d := &dps[i]
		if d.Deleting {
			continue
		}
		var spec dataplanev1beta1.OpenStackDataPlaneSpec
		_ = json.Unmarshal(d.Spec, &spec)
		if d.Ref.Name == roleDataPlane {
			return d
		}
		if first == nil && (slices.Contains(spec.Roles, role) || slices.Contains(spec.Nodes, node)) {
			first = d
		}
	}
	return first
}

func provisionHash(cfg EDPMNodeConfig) string {
	if cfg.BareMetal == nil {
		return ""
	}
	return cfg.BareMetal.IronicNodeName + "|" + cfg.BareMetal.Image
}

// runStep runs one step of phases -1 or 0 and records its outcome.
func (r *edpmNodeReconciler) runStep(ctx workflow.Context, lc *object.Lifecycle, gen int64, cfg EDPMNodeConfig, st EDPMStep) error {
	rec := r.rec.Steps[st.Name]
	if rec == nil {
		rec = &edpmStepRecord{Phase: st.Phase}
		r.rec.Steps[st.Name] = rec
	}
	phaseName := "Infrastructure"
	if st.Phase == dataplanev1beta1.PhaseBareMetal {
		phaseName = "Provisioning"
	}
	lc.SetPhase(ctx, phaseName)
	if st.Playbook != "" {
		if err := r.waitKey(ctx, lc, gen, cfg); err != nil {
			return err
		}
	}
	rec.Attempts++
	where := fmt.Sprintf("phase %d · %s", st.Phase, st.Name)
	if st.Playbook != "" {
		where += fmt.Sprintf(" · %s on host %s (%s)", st.Playbook, cfg.HostName, cfg.AnsibleHost)
	} else {
		where += fmt.Sprintf(" · Ironic node %s", cfg.BareMetal.IronicNodeName)
	}
	if rec.Attempts > 1 {
		where += fmt.Sprintf(" · attempt %d", rec.Attempts)
	}
	if err := lc.Step(ctx, where); err != nil {
		return err
	}
	rec.State, rec.Message, rec.Started, rec.Finished = EDPMRunning, "", workflow.Now(ctx), time.Time{}
	r.setStepSearch(ctx, st)
	r.setPhases(ctx, lc, r.steps, r.services)

	var err error
	if st.Name == StepProvision {
		err = r.provision(ctx, lc, cfg)
		rec.Hash = provisionHash(cfg)
	} else {
		var res ansible.PlaybookResult
		err = workflow.ExecuteActivity(AnsibleActivity(ctx), ansibleActs.RunPlaybook, ansible.PlaybookInput{
			Namespace: lc.Ref.Namespace, Host: cfg.HostName, Step: st.Name, Playbook: st.Playbook,
			HostVars: cfg.HostVars(), SSHKeySecret: cfg.SSHKeySecret,
		}).Get(ctx, &res)
		if err == nil {
			rec.Message = fmt.Sprintf("%d ok, %d changed", res.Ok, res.Changed)
		}
	}
	rec.Finished = workflow.Now(ctx)
	if st.Name == StepOVN {
		// Even a failed run may have started ovn-controller.
		r.rec.OVNKey = cfg.SSHKeySecret
	}
	if err != nil {
		rec.State, rec.Message = EDPMFailed, object.FailureMessage(err)
		cond := dataplanev1beta1.ConditionInfrastructureReady
		if st.Phase == dataplanev1beta1.PhaseBareMetal {
			cond = dataplanev1beta1.ConditionBareMetalProvisioned
		}
		lc.SetCondition(ctx, metav1.Condition{Type: cond, Status: metav1.ConditionFalse, Reason: object.FailureReason(err),
			Message: fmt.Sprintf("step %s failed on host %s: %s (send the retry signal to re-run it)", st.Name, cfg.HostName, object.FailureMessage(err))})
		return fmt.Errorf("step %s of %s: %w", st.Name, lc.Ref, err)
	}
	rec.State = EDPMSucceeded
	return nil
}

// waitKey waits, visibly, until the SSH key Secret exists; once per reconcile.
func (r *edpmNodeReconciler) waitKey(ctx workflow.Context, lc *object.Lifecycle, gen int64, cfg EDPMNodeConfig) error {
	if r.keyFound {
		return nil
	}
	if err := waitSecretFrom(ctx, lc, gen, ConditionSSHKeyReady, lc.Ref.Namespace, cfg.SSHKeySecret, take(&r.ahead.key), ansible.SSHKeySecretKey); err != nil {
		return err
	}
	lc.SetCondition(ctx, metav1.Condition{Type: ConditionSSHKeyReady, Status: metav1.ConditionTrue, Reason: "Found",
		Message: fmt.Sprintf("Secret %s holds %s", cfg.SSHKeySecret, ansible.SSHKeySecretKey)})
	r.keyFound = true
	return nil
}

// checkKey starts a look at the node's SSH key Secret.
func (r *edpmNodeReconciler) checkKey(ctx workflow.Context, lc *object.Lifecycle, cfg EDPMNodeConfig) workflow.Future {
	return checkSecret(ctx, lc.Ref.Namespace, cfg.SSHKeySecret, ansible.SSHKeySecretKey)
}

func (r *edpmNodeReconciler) setStepSearch(ctx workflow.Context, st EDPMStep) {
	_ = workflow.UpsertTypedSearchAttributes(ctx, lifecycle.SAPhase.ValueSet(fmt.Sprintf("%d:%s", st.Phase, st.Name)))
}

// provision runs phase -1 through Ironic.
func (r *edpmNodeReconciler) provision(ctx workflow.Context, lc *object.Lifecycle, cfg EDPMNodeConfig) error {
	cloud := openstack.CloudSecret{Namespace: lc.Ref.Namespace, Name: openstack.DefaultCloudsSecret}
	var res baremetal.Result
	err := workflow.ExecuteActivity(BaremetalActivity(ctx), ironicActs.ProvisionBaremetal, baremetal.ProvisionInput{
		Cloud: cloud, Name: cfg.BareMetal.IronicNodeName, Driver: cfg.BareMetal.Driver, Image: cfg.BareMetal.Image, Properties: cfg.BareMetal.Properties,
	}).Get(ctx, &res)
	if err != nil {
		return err
	}
	if r.rec.Ironic == nil || r.rec.Ironic.UUID != res.UUID {
		r.rec.Ironic = &res
	} else {
		r.rec.Ironic.ProvisionState = res.ProvisionState
	}
	r.rec.Cloud = &cloud
	_ = lc.SetField(ctx, "ironicNodeUUID", res.UUID)
	_ = lc.SetField(ctx, "provisionState", res.ProvisionState)
	lc.SetCondition(ctx, metav1.Condition{Type: dataplanev1beta1.ConditionBareMetalProvisioned, Status: metav1.ConditionTrue, Reason: "Active",
		Message: fmt.Sprintf("Ironic node %s (%s) is %s with image %s", cfg.BareMetal.IronicNodeName, res.UUID, res.ProvisionState, cfg.BareMetal.Image)})
	return nil
}

// waitService waits until a service CR deployed its current generation, or fails with its message.
func (r *edpmNodeReconciler) waitService(ctx workflow.Context, lc *object.Lifecycle, gen int64, svc EDPMService) error {
	var failure error
	err := waitUntil(ctx, lc, gen, dataplanev1beta1.ConditionServicesReady, func(ctx workflow.Context) (bool, string, string, error) {
		var st kube.ObjectStatus
		if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.GetObjectStatus, kube.StatusInput{Ref: svc.Ref, Fields: []string{"deployed"}}).Get(ctx, &st); err != nil {
			return false, "", "", fmt.Errorf("read %s: %w", svc.Ref, err)
		}
		ready := false
		for _, c := range st.Conditions {
			if c.Type == lifecycle.ConditionReady {
				ready = c.Status == metav1.ConditionTrue && c.ObservedGeneration == st.Generation
				if st.Phase == lifecycle.PhaseFailed {
					failure = temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s %s failed: %s", svc.Ref.Kind, svc.Ref.Name, c.Message), ReasonStepFailed, nil)
					return true, "", "", nil
				}
			}
		}
		if ready && string(st.Fields["deployed"]) == "true" && st.ObservedGeneration == st.Generation {
			return true, "", "", nil
		}
		step := st.Phase
		return false, ReasonWaitingForServices, fmt.Sprintf("waiting for %s %s (phase 1, %s)", svc.Ref.Kind, svc.Ref.Name, firstNonEmpty(step, "not started")), nil
	})
	if err != nil {
		return err
	}
	if failure != nil {
		lc.SetCondition(ctx, metav1.Condition{Type: dataplanev1beta1.ConditionServicesReady, Status: metav1.ConditionFalse, Reason: ReasonStepFailed, Message: object.FailureMessage(failure)})
		return failure
	}
	return nil
}

// setPhases writes status.phases from the recorded steps.
func (r *edpmNodeReconciler) setPhases(ctx workflow.Context, lc *object.Lifecycle, steps []EDPMStep, services []EDPMService) {
	var out []dataplanev1beta1.PhaseStatus
	add := func(phase int32, name string, stepNames []string) {
		ps := dataplanev1beta1.PhaseStatus{Phase: phase, Name: name, State: dataplanev1beta1.PhaseStatePending}
		done := 0
		for _, n := range stepNames {
			rec := r.rec.Steps[n]
			if rec == nil {
				continue
			}
			if !rec.Started.IsZero() && (ps.StartTime == nil || rec.Started.Before(ps.StartTime.Time)) {
				t := metav1.NewTime(rec.Started.Truncate(time.Second))
				ps.StartTime = &t
			}
			switch rec.State {
			case EDPMSucceeded:
				done++
				t := metav1.NewTime(rec.Finished.Truncate(time.Second))
				ps.CompletionTime = &t
			case EDPMFailed:
				ps.State, ps.Message = dataplanev1beta1.PhaseStateFailed, n+": "+rec.Message
			case EDPMRunning:
				if ps.State != dataplanev1beta1.PhaseStateFailed {
					ps.State, ps.Message = dataplanev1beta1.PhaseStateRunning, n
				}
			}
		}
		if done == len(stepNames) && len(stepNames) > 0 {
			ps.State, ps.Message = dataplanev1beta1.PhaseStateSucceeded, fmt.Sprintf("%d step(s) done", done)
		}
		if done > 0 && done < len(stepNames) && ps.State == dataplanev1beta1.PhaseStatePending {
			ps.State, ps.Message = dataplanev1beta1.PhaseStateRunning, fmt.Sprintf("%d of %d steps done", done, len(stepNames))
		}
		if done < len(stepNames) {
			ps.CompletionTime = nil
		}
		out = append(out, ps)
	}
	var bm, infra []string
	for _, s := range steps {
		if s.Phase == dataplanev1beta1.PhaseBareMetal {
			bm = append(bm, s.Name)
		} else {
			infra = append(infra, s.Name)
		}
	}
	if len(bm) == 0 {
		out = append(out, dataplanev1beta1.PhaseStatus{Phase: dataplanev1beta1.PhaseBareMetal, Name: "BareMetal", State: dataplanev1beta1.PhaseStateSkipped, Message: "pre-provisioned"})
	} else {
		add(dataplanev1beta1.PhaseBareMetal, "BareMetal", bm)
	}
	add(dataplanev1beta1.PhaseInfrastructure, "Infrastructure", infra)
	svc := dataplanev1beta1.PhaseStatus{Phase: dataplanev1beta1.PhaseServices, Name: "Services", State: dataplanev1beta1.PhaseStatePending}
	names := make([]string, 0, len(services))
	for _, s := range services {
		names = append(names, s.Ref.Kind+"/"+s.Ref.Name)
	}
	switch {
	case len(services) == 0:
		svc.State, svc.Message = dataplanev1beta1.PhaseStateSkipped, "no service CRs (no cell or agent annotation)"
	default:
		svc.Message = fmt.Sprintf("deployed by %v", names)
		if c, ok := lc.Condition(dataplanev1beta1.ConditionServicesReady); ok {
			switch {
			case c.Status == metav1.ConditionTrue:
				svc.State = dataplanev1beta1.PhaseStateSucceeded
			case c.Reason == ReasonStepFailed:
				svc.State, svc.Message = dataplanev1beta1.PhaseStateFailed, c.Message
			case c.Reason == ReasonWaitingForServices:
				svc.State = dataplanev1beta1.PhaseStateRunning
			}
		}
	}
	out = append(out, svc)
	_ = lc.SetField(ctx, "phases", out)
}

func (r *edpmNodeReconciler) Teardown(ctx workflow.Context, lc *object.Lifecycle) error {
	if err := lc.Load(&r.rec); err != nil {
		return err
	}
	// Which cloud lists the host's Neutron agents is read first, while its compute still names its cell.
	chassisCloud := ""
	if r.rec.OVNKey != "" && workflow.GetVersion(ctx, ChangeChassisCloud, workflow.DefaultVersion, 1) == 1 {
		chassisCloud = r.chassisCloud(ctx, lc)
	}
	// Service CRs first (their teardown stops the services on the host and needs the inventory), looked
	// up by name too, since the node may be deleted before its first reconcile recorded them.
	refs := append([]lifecycle.ObjectRef{}, r.rec.Services...)
	for _, ref := range []lifecycle.ObjectRef{NovaExternalComputeRef(lc.Ref.Namespace, lc.Ref.Name), OVNMetadataAgentRef(lc.Ref.Namespace, lc.Ref.Name)} {
		if !slices.ContainsFunc(refs, func(k lifecycle.ObjectRef) bool { return k.Kind == ref.Kind && k.Name == ref.Name }) {
			refs = append(refs, r.derivedOnly(ctx, ref)...)
		}
	}
	for _, ref := range refs {
		if err := deleteAndWait(ctx, ref); err != nil {
			return err
		}
	}
	// The host leaves the cloud's OVN while its inventory still exists (the removal playbook reads it).
	if r.rec.OVNKey != "" {
		if err := r.removeChassis(ctx, lc, chassisCloud); err != nil {
			return err
		}
	}
	inv := lifecycle.ObjectRef{Version: "v1", Kind: "ConfigMap", Resource: "configmaps", Namespace: lc.Ref.Namespace, Name: InventoryConfigMapName(lc.Ref.Name)}
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.DeleteObject, inv).Get(ctx, nil); err != nil {
		return fmt.Errorf("delete inventory of %s: %w", lc.Ref, err)
	}
	if r.rec.Ironic != nil && r.rec.Cloud != nil {
		err := workflow.ExecuteActivity(BaremetalActivity(ctx), ironicActs.DeprovisionBaremetal, baremetal.DeprovisionInput{
			Cloud: *r.rec.Cloud, UUID: r.rec.Ironic.UUID, Delete: r.rec.Ironic.Enrolled,
		}).Get(ctx, nil)
		if err != nil {
			return fmt.Errorf("deprovision Ironic node %s of %s: %w", r.rec.Ironic.UUID, lc.Ref, err)
		}
	}
	// The data plane counts its nodes again without this one.
	if r.rec.DataPlane != "" {
		var dps []kube.ListedObject
		if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.ListObjects, kube.ListInput{Ref: DataPlaneRef(lc.Ref.Namespace, "")}).Get(ctx, &dps); err == nil {
			for _, d := range dps {
				if d.Ref.Name == r.rec.DataPlane {
					ref := DataPlaneRef(lc.Ref.Namespace, d.Ref.Name)
					ref.UID = d.Ref.UID
					_ = workflow.SignalExternalWorkflow(ctx, lifecycle.WorkflowID(ref), "", lifecycle.SignalRefresh, nil).Get(ctx, nil)
				}
			}
		}
	}
	return nil
}

// removeChassis undoes the ovn step: ovn-controller exits removing its chassis, Open vSwitch stops, and
// whatever Neutron still lists of the host's agents (a host that was unreachable, an agent another tool
// started) is deleted. Its records are only ever set by runs that had the step, so older histories
// replay unchanged.
func (r *edpmNodeReconciler) removeChassis(ctx workflow.Context, lc *object.Lifecycle, cloudSecret string) error {
	lc.ShowStep(ctx, "remove the OVN chassis "+r.rec.Host)
	if err := runRemovalPlaybook(ctx, lc, "the OVN controller", ansible.PlaybookInput{
		Namespace: lc.Ref.Namespace, Host: r.rec.Host, Step: StepOVN + "-remove", Playbook: "ovn-remove.yml",
		InventoryConfigMap: InventoryConfigMapName(lc.Ref.Name), SSHKeySecret: r.rec.OVNKey,
	}); err != nil {
		return err
	}
	// The cloud of the compute's cell first; its credentials may be gone with its Nova (deleted at the
	// same time), and then the namespace's clouds Secret is what is left to ask.
	clouds := []openstack.CloudSecret{openstack.ServiceCloud(lc.Ref.Namespace, "", "")}
	if cloudSecret != "" {
		clouds = append([]openstack.CloudSecret{openstack.ServiceCloud(lc.Ref.Namespace, cloudSecret, "")}, clouds...)
	}
	if err := deleteNetworkAgents(ctx, lc, r.rec.Host, "", clouds...); err != nil {
		return err
	}
	r.rec.OVNKey = ""
	return lc.Save(r.rec)
}

// ChangeChassisCloud: a node's teardown deletes the host's Neutron agents from the cloud its compute
// joined (the Secret of its NovaCell, whose clouds.yaml reaches that Nova's Keystone and so its Neutron),
// not from the namespace's clouds Secret, which may name another cloud: there the agents stayed, dead.
const ChangeChassisCloud = "edpm-node-chassis-cloud"

// chassisCloud is the Secret whose clouds.yaml reaches the Neutron of the cloud the node's compute joined:
// its NovaCell's Secret, found by the NovaExternalCompute's cellName. Empty (the namespace's clouds
// Secret) when the node has no compute or its cell is gone or ambiguous.
func (r *edpmNodeReconciler) chassisCloud(ctx workflow.Context, lc *object.Lifecycle) string {
	var nec kube.Object
	ref := NovaExternalComputeRef(lc.Ref.Namespace, lc.Ref.Name)
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.GetObject, ref).Get(ctx, &nec); err != nil || !nec.Exists {
		return ""
	}
	var spec struct {
		CellName string `json:"cellName"`
	}
	if err := json.Unmarshal(nec.Spec, &spec); err != nil || spec.CellName == "" {
		return ""
	}
	var cells []kube.ListedObject
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.ListObjects, kube.ListInput{Ref: NovaCellRef(lc.Ref.Namespace, "")}).Get(ctx, &cells); err != nil {
		return ""
	}
	// A cell being deleted still counts: its Nova keeps it, and its Secret, until its computes are gone.
	for i := range cells {
		cells[i].Deleting = false
	}
	cell, _, others := FindNovaCell(cells, spec.CellName)
	if cell == nil || len(others) > 0 {
		return ""
	}
	return cell.Secret
}

// derivedOnly returns ref when the object exists and carries this node's label (so a CR a person made
// for another purpose under the same name is left alone).
func (r *edpmNodeReconciler) derivedOnly(ctx workflow.Context, ref lifecycle.ObjectRef) []lifecycle.ObjectRef {
	var o kube.Object
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.GetObject, ref).Get(ctx, &o); err != nil || !o.Exists {
		return nil
	}
	if o.Labels[LabelDataPlaneNode] != ref.Name {
		return nil
	}
	return []lifecycle.ObjectRef{ref}
}

// deleteAndWait deletes an object and waits until its own workflow finished its teardown.
func deleteAndWait(ctx workflow.Context, ref lifecycle.ObjectRef) error {
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.DeleteObject, ref).Get(ctx, nil); err != nil {
		return fmt.Errorf("delete %s: %w", ref, err)
	}
	// No overall deadline: a compute's removal may wait for a person (its drain policy Stop), and its own
	// condition says why.
	wctx := object.OnKube(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 15 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 1.5, MaximumInterval: 10 * time.Second},
	})
	if err := workflow.ExecuteActivity(wctx, kubeActs.WaitDeleted, ref).Get(ctx, nil); err != nil {
		return fmt.Errorf("wait for %s to go: %w", ref, err)
	}
	return nil
}
