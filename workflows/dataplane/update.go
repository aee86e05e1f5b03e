package dataplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/activities/ansible"
	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/activities/openstack"
	dataplanev1beta1 "github.com/stackflow/stackflow/api/dataplane/v1beta1"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/api/oslo"
	"github.com/stackflow/stackflow/workflows/object"
)

// An OpenStackDataPlaneUpdate updates the compute nodes of a data plane, batch by batch (PlanUpdate),
// each node along its own path (UpdateNode.Advance):
//
//	checkpoint (files on the host, version and service state in Nova)
//	→ disable its nova-compute service → drain (live-migrate its instances to nodes outside the batch)
//	→ apply (playbook: configuration layer, version, restart) → verify (up, hypervisor, version reported)
//	→ enable → migrate its instances back
//
// with a rollback to the checkpoint when apply or verify fails, and the drain policy when a drain does
// not finish in time. The spec is immutable, so the workflow acts on generation 1 only; retry re-runs
// the failed nodes. Cancelling (or deleting) the update finishes the nodes in flight (their remaining
// steps, rollback included), starts no other, rolls back none that succeeded and leaves every node
// enabled.

// NovaComputeUpdateFile is where an update's configuration layer lives on a node: after the generated
// file, before the customServiceConfig file (which still wins). The playbooks know it as nova_update_conf.
const NovaComputeUpdateFile = NovaComputeConfigDir + "/50-stackflow-update.conf"

// Playbooks of an update.
const (
	PlaybookNovaCheckpoint = "nova-compute-checkpoint.yml"
	PlaybookNovaUpdate     = "nova-compute-update.yml"
	PlaybookNovaRollback   = "nova-compute-rollback.yml"
)

// Timeouts of an update's waits.
const (
	// UpdateVerifyTimeout bounds the wait for a restarted nova-compute to report its version.
	UpdateVerifyTimeout = 3 * time.Minute
	// DefaultDrainTimeout is the drain timeout when the spec sets none.
	DefaultDrainTimeout = 5 * time.Minute
)

// OpenStackDataPlaneUpdateWorkflow serves an OpenStackDataPlaneUpdate.
func OpenStackDataPlaneUpdateWorkflow(ctx workflow.Context, in object.Input) error {
	return object.Run(ctx, in, &updateReconciler{}, object.Options{})
}

// updateRecord is the update's state, carried across continue-as-new.
type updateRecord struct {
	Nodes []UpdateNode `json:"nodes,omitempty"`
	// Access is how each node is reached over SSH (names of Secrets and ConfigMaps, never values).
	Access map[string]nodeAccess `json:"access,omitempty"`
	// Approved is set once the canary gate was approved; Stopped once a drain failed under policy Stop.
	Approved bool `json:"approved,omitempty"`
	Stopped  bool `json:"stopped,omitempty"`
	// Batch numbers the batches started; Canary says whether the current one holds canaries.
	Batch  int  `json:"batch,omitempty"`
	Canary bool `json:"canary,omitempty"`
	// Playbooks is the version of the playbooks the update runs with.
	Playbooks string `json:"playbooks,omitempty"`
}

// nodeAccess is how the playbooks reach a node: what its NovaExternalCompute says.
type nodeAccess struct {
	SSHKeySecret       string                     `json:"sshKeySecret"`
	InventoryConfigMap string                     `json:"inventoryConfigMap,omitempty"`
	HostVars           map[string]json.RawMessage `json:"hostVars,omitempty"`
}

type updateReconciler struct {
	rec updateRecord
	// firstFailure is UpdateNodePolicy.KeepFirstFailure, decided once per run (see firstFailureVersion).
	firstFailure bool
	spec         dataplanev1beta1.OpenStackDataPlaneUpdateSpec
	// uid names the update's checkpoints on the hosts; ns is the update's namespace.
	uid string
	ns  string
	// batchBounded is ChangeUpdateBatchBoundary, decided once per run; batches counts the batches this
	// run started.
	batchBounded bool
	batches      int
}

// ChangeUpdateBatchBoundary is the GetVersion change after which an update continues as new before a
// batch whose events would take the run past its history limit, and stops nodes inside a batch only
// once the run is past object.Lifecycle.ContinueAsNewOverdue: stopping inside a batch holds each node
// that finished a short step until the slowest finished its long one (11.6 s of one 15 s batch of the
// 200-node benchmark). Runs recorded before it stopped every node after its current step once due.
const ChangeUpdateBatchBoundary = "update-batch-boundary"

// updateEventsPerNode bounds the history events one node's update adds to the run (44 measured by
// EDPMUpdateScale, status writes included).
const updateEventsPerNode = 50

// batchDue says whether a batch of n nodes starts in a new run: its events would take this run past its
// history limit, and this run has run a batch (a batch bigger than the limit runs in a run of its own).
func (r *updateReconciler) batchDue(ctx workflow.Context, lc *object.Lifecycle, n int) bool {
	if !r.batchBounded {
		return false
	}
	return r.batches > 0 && workflow.GetInfo(ctx).GetCurrentHistoryLength()+n*updateEventsPerNode > lc.Limits().MaxHistory
}

// nodeDue says whether a node of a running batch stops after its current step so the run continues as
// new.
func (r *updateReconciler) nodeDue(ctx workflow.Context, lc *object.Lifecycle) bool {
	if r.batchBounded {
		return lc.ContinueAsNewOverdue(ctx)
	}
	return lc.ContinueAsNewDue(ctx)
}

func (r *updateReconciler) Detail() any { return r.rec }

// Restore reads the record the previous run carried: the status query shows the nodes before anything
// runs, and a settled update does nothing more.
func (r *updateReconciler) Restore(lc *object.Lifecycle) error { return lc.Load(&r.rec) }

// updateSettings is the spec with its defaults resolved.
type updateSettings struct {
	policy UpdatePolicy
	node   UpdateNodePolicy
	canary int
	drain  time.Duration
}

func (r *updateReconciler) settings() updateSettings {
	s := r.spec.Strategy
	out := updateSettings{
		policy: UpdatePolicy{MaxUnavailable: 1, ApproveAfterCanary: s.ApproveAfterCanary},
		node: UpdateNodePolicy{DrainOnFailure: firstNonEmpty(r.spec.Drain.OnFailure, dataplanev1beta1.DrainStop), MigrateBack: true,
			KeepFirstFailure: r.firstFailure},
		canary: 1,
		drain:  DefaultDrainTimeout,
	}
	if s.MaxUnavailable != nil {
		out.policy.MaxUnavailable = int(*s.MaxUnavailable)
	}
	if s.MaxFailedNodes != nil {
		out.policy.MaxFailed = int(*s.MaxFailedNodes)
	}
	if s.Canary != nil {
		out.canary = int(*s.Canary)
	}
	if r.spec.Drain.MigrateBack != nil {
		out.node.MigrateBack = *r.spec.Drain.MigrateBack
	}
	if r.spec.Drain.Timeout != nil && r.spec.Drain.Timeout.Duration > 0 {
		out.drain = r.spec.Drain.Timeout.Duration
	}
	return out
}

func (r *updateReconciler) Reconcile(ctx workflow.Context, lc *object.Lifecycle, obj *kube.Object) error {
	if err := r.load(lc, obj); err != nil {
		return err
	}
	defer func() { _ = lc.Save(r.rec) }()
	r.firstFailureVersion(ctx)
	r.batchBounded = workflow.GetVersion(ctx, ChangeUpdateBatchBoundary, workflow.DefaultVersion, 1) == 1
	set := r.settings()
	if len(r.rec.Nodes) == 0 {
		if err := lc.Step(ctx, "resolve the nodes of data plane "+r.spec.DataPlane); err != nil {
			return err
		}
		if err := r.resolveNodes(ctx, lc, obj.Generation, set.canary); err != nil {
			lc.SetCondition(ctx, metav1.Condition{Type: dataplanev1beta1.ConditionUpdated, Status: metav1.ConditionFalse, Reason: object.FailureReason(err), Message: object.FailureMessage(err)})
			return err
		}
	}
	if retry := lc.Retry(); retry != nil {
		if names := SelectUpdateRetry(r.rec.Nodes, *retry); len(names) > 0 || r.rec.Stopped {
			r.rec.Stopped = false
			workflow.GetLogger(ctx).Info("retry", "object", lc.Ref.String(), "nodes", names)
		}
	}
	lc.SetPhase(ctx, "Updating")
	for {
		// A pause holds the update at lc.Step, before the next batch (and each node before its next
		// step), not in the planner: a paused update is not finished.
		plan := PlanUpdate(r.rec.Nodes, set.policy, r.rec.Approved, false, r.rec.Stopped)
		r.writeStatus(ctx, lc, plan, "")
		if len(plan.InFlight) > 0 {
			// A batch the previous run left to continue as new goes on where its nodes stopped.
			r.batches++
			if err := r.runBatch(ctx, lc, plan.InFlight, set); err != nil {
				return err
			}
			continue
		}
		if !plan.Done && lc.ContinueAsNewDue(ctx) {
			// Between batches (or before the gate): the next run resumes from the record, saved on return.
			return object.ErrContinueAsNew
		}
		switch {
		case plan.WaitGate:
			lc.SetPhase(ctx, dataplanev1beta1.ReasonAwaitingApproval)
			r.writeStatus(ctx, lc, plan, dataplanev1beta1.UpdateGateCanary)
			if err := lc.Gate(ctx, dataplanev1beta1.UpdateGateCanary); err != nil {
				return err
			}
			r.rec.Approved = true
			lc.SetPhase(ctx, "Updating")
			continue
		case len(plan.Start) > 0:
			if r.batchDue(ctx, lc, len(plan.Start)) {
				return object.ErrContinueAsNew
			}
			if err := lc.Step(ctx, "start batch "+strings.Join(plan.Start, ", ")); err != nil {
				return err
			}
			r.batches++
			r.rec.Batch++
			r.rec.Canary = plan.Canary
			for _, name := range plan.Start {
				r.node(name).Start()
			}
			if err := r.runBatch(ctx, lc, plan.Start, set); err != nil {
				return err
			}
			_ = lc.Save(r.rec)
			continue
		}
		return r.finish(ctx, lc, plan, set)
	}
}

// finish reports how the update ended: Ready when every node was updated (or skipped), Failed naming
// each failed node, its step and why.
func (r *updateReconciler) finish(ctx workflow.Context, lc *object.Lifecycle, plan UpdatePlan, set updateSettings) error {
	r.writeStatus(ctx, lc, plan, "")
	names, text := UpdateFailures(r.rec.Nodes)
	if len(names) > 0 || r.rec.Stopped || plan.Pending > 0 {
		reason := dataplanev1beta1.ReasonVerificationFailed
		for _, n := range r.rec.Nodes {
			if n.State == dataplanev1beta1.UpdateNodeFailed && n.Reason != "" {
				reason = n.Reason
				break
			}
		}
		if plan.BudgetExceeded && !set.node.KeepFirstFailure {
			reason = dataplanev1beta1.ReasonMaxFailuresReached
		}
		msg := fmt.Sprintf("%d of %d node(s) failed (failure budget %d): %s; %d not started; send the retry signal to re-run the failed nodes",
			len(names), len(r.rec.Nodes), set.policy.MaxFailed, text, plan.Pending)
		if set.node.KeepFirstFailure && plan.BudgetExceeded {
			// The first failed node's reason is the update's: the exhausted budget is why the others did
			// not start, which the message says.
			msg = fmt.Sprintf("%d of %d node(s) failed, more than the failure budget (%d) allows: %s; %d not started; send the retry signal to re-run the failed nodes",
				len(names), len(r.rec.Nodes), set.policy.MaxFailed, text, plan.Pending)
		}
		lc.SetCondition(ctx, metav1.Condition{Type: dataplanev1beta1.ConditionUpdated, Status: metav1.ConditionFalse, Reason: reason, Message: msg})
		return temporal.NewNonRetryableApplicationError(msg, reason, nil)
	}
	lc.SetCondition(ctx, metav1.Condition{Type: dataplanev1beta1.ConditionUpdated, Status: metav1.ConditionTrue, Reason: "Updated",
		Message: fmt.Sprintf("%d node(s) run nova-compute %s, %d skipped", plan.Succeeded, r.spec.NovaCompute.Version, plan.Skipped)})
	return nil
}

// firstFailureVersion decides whether a node keeps its first failure and the update ends with that
// failure's reason rather than MaxFailuresReached: changed after runs were recorded that took the last
// failure, which replay as they ran.
func (r *updateReconciler) firstFailureVersion(ctx workflow.Context) {
	r.firstFailure = workflow.GetVersion(ctx, "update-first-failure", workflow.DefaultVersion, 1) == 1
}

func (r *updateReconciler) load(lc *object.Lifecycle, obj *kube.Object) error {
	if err := lc.Load(&r.rec); err != nil {
		return err
	}
	if err := json.Unmarshal(obj.Spec, &r.spec); err != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("spec of %s: %v", lc.Ref, err), lifecycle.ReasonInvalidSpec, err)
	}
	if r.spec.NovaCompute.CustomServiceConfig != "" {
		if _, err := oslo.ParseServiceConfig(r.spec.NovaCompute.CustomServiceConfig); err != nil {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: novaCompute.customServiceConfig is not an oslo.config INI snippet: %v", lc.Ref, err), ReasonCustomServiceConfig, err)
		}
	}
	r.ns = lc.Ref.Namespace
	r.uid = strings.ReplaceAll(lc.Ref.UID, "-", "")
	if len(r.uid) > 12 {
		r.uid = r.uid[:12]
	}
	return nil
}

func (r *updateReconciler) node(name string) *UpdateNode {
	for i := range r.rec.Nodes {
		if r.rec.Nodes[i].Name == name {
			return &r.rec.Nodes[i]
		}
	}
	return nil
}

// resolveNodes fixes the nodes the update covers, once the data plane is deployed (an update does not
// race a deployment): its member nodes that run nova-compute (have a NovaExternalCompute), in
// spec.nodes' order when given, else by name.
func (r *updateReconciler) resolveNodes(ctx workflow.Context, lc *object.Lifecycle, gen int64, canary int) error {
	ns := lc.Ref.Namespace
	ref := DataPlaneRef(ns, r.spec.DataPlane)
	err := waitUntil(ctx, lc, gen, dataplanev1beta1.ConditionUpdated, func(ctx workflow.Context) (bool, string, string, error) {
		var st kube.ObjectStatus
		if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.GetObjectStatus, kube.StatusInput{Ref: ref}).Get(ctx, &st); err != nil {
			return false, "", "", fmt.Errorf("read %s: %w", ref, err)
		}
		if !st.Exists {
			return false, ReasonWaitingForDataPlane, fmt.Sprintf("waiting for OpenStackDataPlane %s/%s (it does not exist)", ns, r.spec.DataPlane), nil
		}
		for _, c := range st.Conditions {
			if c.Type == ConditionDeployed {
				if c.Status == metav1.ConditionTrue {
					return true, "", "", nil
				}
				return false, ReasonWaitingForDataPlane, fmt.Sprintf("waiting for data plane %s to be deployed (%s: %s)", r.spec.DataPlane, c.Reason, c.Message), nil
			}
		}
		return false, ReasonWaitingForDataPlane, fmt.Sprintf("waiting for data plane %s to be deployed", r.spec.DataPlane), nil
	})
	if err != nil {
		return err
	}
	var dp kube.Object
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.GetObject, ref).Get(ctx, &dp); err != nil {
		return fmt.Errorf("read data plane %s/%s: %w", ns, r.spec.DataPlane, err)
	}
	var dpSpec dataplanev1beta1.OpenStackDataPlaneSpec
	if err := json.Unmarshal(dp.Spec, &dpSpec); err != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("spec of data plane %s: %v", r.spec.DataPlane, err), lifecycle.ReasonInvalidSpec, err)
	}
	nodesF := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.ListObjects, kube.ListInput{Ref: DataPlaneNodeRef(ns, "")})
	computesF := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.ListObjects, kube.ListInput{Ref: NovaExternalComputeRef(ns, "")})
	// Each compute is updated against its own Nova: the region of its cell. Runs recorded before this
	// asked the cloud's region for every node.
	var cellsF workflow.Future
	if workflow.GetVersion(ctx, ChangeUpdateComputeRegion, workflow.DefaultVersion, 1) == 1 {
		cellsF = workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.ListObjects, kube.ListInput{Ref: NovaCellRef(ns, "")})
	}
	var nodes, computes, cells []kube.ListedObject
	if err := nodesF.Get(ctx, &nodes); err != nil {
		return fmt.Errorf("list nodes in %s: %w", ns, err)
	}
	if err := computesF.Get(ctx, &computes); err != nil {
		return fmt.Errorf("list NovaExternalComputes in %s: %w", ns, err)
	}
	if cellsF != nil {
		if err := cellsF.Get(ctx, &cells); err != nil {
			return fmt.Errorf("list NovaCells in %s: %w", ns, err)
		}
	}
	members, err := UpdateMembers(dpSpec, nodes, computes, cells, r.spec.Nodes)
	if err != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: %v", lc.Ref, err), lifecycle.ReasonInvalidSpec, nil)
	}
	hosts := map[string]string{}
	r.rec.Access = map[string]nodeAccess{}
	var names []string
	for _, m := range members {
		names = append(names, m.Name)
		hosts[m.Name] = m.Host
		r.rec.Access[m.Name] = m.Access
	}
	r.rec.Nodes = NewUpdateNodes(names, hosts, canary)
	for i := range r.rec.Nodes {
		r.rec.Nodes[i].Region, r.rec.Nodes[i].CloudSecret = members[i].Region, members[i].CloudSecret
	}
	return nil
}

// ChangeUpdateComputeRegion marks the update that asks each compute's own Nova (the region of its cell).
const ChangeUpdateComputeRegion = "update-compute-region"

// UpdateMember is one node an update covers.
type UpdateMember struct {
	Name   string
	Host   string
	Access nodeAccess
	// Region is the region of the compute API of the node's cell (its Nova's); "" for the cloud's own.
	Region string
	// CloudSecret is the Secret of that cell's services (openstack.ServiceCloud).
	CloudSecret string
}

// UpdateMembers picks the compute nodes an update covers: members of the data plane (by role or by
// name) with a NovaExternalCompute of their name, restricted to and ordered as only when given. A node
// named in only that is not such a member is an error. Each member's Region is that of the NovaCell its
// compute joined (found as the compute found it, FindNovaCell), so the update asks that cell's Nova.
func UpdateMembers(dp dataplanev1beta1.OpenStackDataPlaneSpec, nodes, computes, cells []kube.ListedObject, only []string) ([]UpdateMember, error) {
	access := map[string]nodeAccess{}
	regions, secrets := map[string]string{}, map[string]string{}
	for _, c := range computes {
		var spec edpmServiceSpec
		var cell struct {
			CellName string `json:"cellName"`
		}
		if c.Deleting || json.Unmarshal(c.Spec, &spec) != nil || json.Unmarshal(c.Spec, &cell) != nil {
			continue
		}
		a := nodeAccess{SSHKeySecret: spec.SSHKeySecretName, InventoryConfigMap: spec.InventoryConfigMapName, HostVars: spec.hostVars()}
		node := firstNonEmpty(spec.DataplaneNodeName, c.Ref.Name)
		access[node] = a
		if found, _, _ := FindNovaCell(cells, cell.CellName); found != nil {
			regions[node], secrets[node] = found.Region, found.Secret
		}
	}
	byName := map[string]UpdateMember{}
	var order []string
	for _, o := range nodes {
		var ns dataplanev1beta1.OpenStackDataPlaneNodeSpec
		if o.Deleting || json.Unmarshal(o.Spec, &ns) != nil {
			continue
		}
		if !slices.Contains(dp.Roles, ns.Role) && !slices.Contains(dp.Nodes, o.Ref.Name) {
			continue
		}
		a, ok := access[o.Ref.Name]
		if !ok {
			continue
		}
		byName[o.Ref.Name] = UpdateMember{Name: o.Ref.Name, Host: ns.HostName, Access: a, Region: regions[o.Ref.Name], CloudSecret: secrets[o.Ref.Name]}
		order = append(order, o.Ref.Name)
	}
	slices.Sort(order)
	if len(only) > 0 {
		order = nil
		for _, name := range only {
			if _, ok := byName[name]; !ok {
				return nil, fmt.Errorf("node %s is not a compute node of the data plane (a member with a NovaExternalCompute)", name)
			}
			order = append(order, name)
		}
	}
	if len(order) == 0 {
		return nil, fmt.Errorf("the data plane has no compute node to update (no member node has a NovaExternalCompute)")
	}
	out := make([]UpdateMember, 0, len(order))
	for _, name := range order {
		out = append(out, byName[name])
	}
	return out, nil
}

// runBatch runs the nodes of a batch side by side until each is finished. A cancelled context stops
// them between (or inside) steps, and a run whose history is due stops each after its current step
// (object.ErrContinueAsNew); their records say where to go on.
func (r *updateReconciler) runBatch(ctx workflow.Context, lc *object.Lifecycle, names []string, set updateSettings) error {
	wg := workflow.NewWaitGroup(ctx)
	var stepErr error
	for _, name := range names {
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			err := r.runNode(ctx, lc, name, set, true)
			// A deletion or cancel wins over continuing as new.
			if err != nil && (stepErr == nil || errors.Is(stepErr, object.ErrContinueAsNew)) {
				stepErr = err
			}
		})
	}
	wg.Wait(ctx)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return stepErr
}

// runNode runs the node's remaining steps. With steered (a running update, not its compensation), a
// pause holds it before its next step and a due history ends it after its current one.
func (r *updateReconciler) runNode(ctx workflow.Context, lc *object.Lifecycle, name string, set updateSettings, steered bool) error {
	n := r.node(name)
	for n.InFlight() {
		step := n.Next
		if steered {
			if r.nodeDue(ctx, lc) {
				return object.ErrContinueAsNew
			}
			if err := lc.Step(ctx, r.stepText()); err != nil {
				return err
			}
		}
		out := r.runStep(ctx, lc, n, step, set)
		if out.Err != nil && ctx.Err() != nil {
			// Cancelled, not failed: the step runs again where the node goes on.
			return ctx.Err()
		}
		if n.Advance(step, out, set.node) {
			r.rec.Stopped = true
		}
		r.writeStatus(ctx, lc, PlanUpdate(r.rec.Nodes, set.policy, r.rec.Approved, false, r.rec.Stopped), "")
	}
	return nil
}

// runStep runs one step of a node and says how it ended.
func (r *updateReconciler) runStep(ctx workflow.Context, lc *object.Lifecycle, n *UpdateNode, step string, set updateSettings) StepOutcome {
	cloud := n.cloud(lc.Ref.Namespace)
	host := n.Host
	fail := func(reason string, err error) StepOutcome {
		return StepOutcome{Err: err, Reason: firstNonEmpty(reason, object.FailureReason(err)), Message: fmt.Sprintf("%s on %s: %s", step, host, object.FailureMessage(err))}
	}
	switch step {
	case UpdateStepCheckpoint:
		n.Checkpoint = r.uid
		stateF := workflow.ExecuteActivity(novaActivity(ctx, time.Minute), osActs.ComputeNodeState, openstack.ComputeHostInput{Cloud: cloud, Host: host})
		var pb ansible.PlaybookResult
		if err := workflow.ExecuteActivity(AnsibleActivity(ctx), ansibleActs.RunPlaybook, r.playbook(n, step, PlaybookNovaCheckpoint, nil, nil)).Get(ctx, &pb); err != nil {
			return fail("", err)
		}
		var st openstack.ComputeNodeState
		if err := stateF.Get(ctx, &st); err != nil {
			return fail("", err)
		}
		r.rec.Playbooks = pb.PlaybooksVersion
		n.VersionBefore, n.VersionAfter = pb.Outputs["version"], pb.Outputs["version"]
		n.WasDisabled = st.Status == "disabled" && !strings.HasPrefix(st.DisabledReason, disabledReasonPrefix)
		n.Message = fmt.Sprintf("checkpoint %s taken (version %s, service %s)", r.uid, firstNonEmpty(n.VersionBefore, "none"), st.Status)
	case UpdateStepDisable:
		var list []string
		if err := workflow.ExecuteActivity(novaActivity(ctx, time.Minute), osActs.SetComputeService,
			openstack.ServiceStateInput{Cloud: cloud, Host: host, Enabled: false, Reason: r.disabledReason(lc)}).Get(ctx, &list); err != nil {
			return fail("", err)
		}
		n.Servers = list
		n.Message = fmt.Sprintf("disabled in Nova; %d instance(s) on it", len(list))
	case UpdateStepDrain:
		deadline := workflow.Now(ctx).Add(set.drain)
		var res openstack.MigrateResult
		err := workflow.ExecuteActivity(migrateActivity(ctx, set.drain), osActs.MigrateServers, openstack.MigrateInput{
			Cloud: cloud, From: host, Servers: n.Servers, Targets: r.drainTargets(n), Deadline: deadline}).Get(ctx, &res)
		if err != nil {
			return fail(dataplanev1beta1.ReasonDrainFailed, err)
		}
		n.Moved = len(res.Moved)
		n.Message = fmt.Sprintf("drained: %d instance(s) live-migrated away", n.Moved)
	case UpdateStepApply:
		var files []oslo.ConfigFile
		if c := r.spec.NovaCompute.CustomServiceConfig; c != "" {
			files = append(files, oslo.ConfigFile{Dest: NovaComputeUpdateFile, Raw: c})
		}
		extra := map[string]json.RawMessage{}
		extra["stackflow_nova_version"], _ = json.Marshal(r.spec.NovaCompute.Version)
		extra["stackflow_nova_version_class"], _ = json.Marshal(VersionClass(r.spec.NovaCompute.Version))
		var pb ansible.PlaybookResult
		if err := workflow.ExecuteActivity(AnsibleActivity(ctx), ansibleActs.RunPlaybook, r.playbook(n, step, PlaybookNovaUpdate, files, extra)).Get(ctx, &pb); err != nil {
			return fail(dataplanev1beta1.ReasonVerificationFailed, err)
		}
		n.Restarted = startedAt(pb)
		n.Message = "nova-compute " + r.spec.NovaCompute.Version + " installed and restarted"
	case UpdateStepVerify:
		if err := r.verify(ctx, cloud, host, r.spec.NovaCompute.Version, n.Restarted); err != nil {
			return fail(dataplanev1beta1.ReasonVerificationFailed, err)
		}
		n.VersionAfter = r.spec.NovaCompute.Version
		n.Message = fmt.Sprintf("nova-compute is up and reports version %s", n.VersionAfter)
	case UpdateStepRollback:
		var pb ansible.PlaybookResult
		if err := workflow.ExecuteActivity(AnsibleActivity(ctx), ansibleActs.RunPlaybook, r.playbook(n, step, PlaybookNovaRollback, nil, nil)).Get(ctx, &pb); err != nil {
			return fail(dataplanev1beta1.ReasonRollbackFailed, err)
		}
		restored := pb.Outputs["version"]
		if err := r.verify(ctx, cloud, host, restored, startedAt(pb)); err != nil {
			return fail(dataplanev1beta1.ReasonRollbackFailed, err)
		}
		n.VersionAfter = restored
	case UpdateStepEnable:
		if n.WasDisabled {
			n.Message += "; left disabled, as it was before the update"
			break
		}
		if err := workflow.ExecuteActivity(novaActivity(ctx, 10*time.Minute), osActs.SetComputeService,
			openstack.ServiceStateInput{Cloud: cloud, Host: host, Enabled: true}).Get(ctx, nil); err != nil {
			return fail("", err)
		}
	case UpdateStepMigrateBack:
		var res openstack.MigrateResult
		err := workflow.ExecuteActivity(migrateActivity(ctx, set.drain), osActs.MigrateServers, openstack.MigrateInput{
			Cloud: cloud, Servers: n.Servers, Targets: []string{host}, Deadline: workflow.Now(ctx).Add(set.drain)}).Get(ctx, &res)
		n.Returned = len(res.Moved)
		if err != nil {
			out := fail("", err)
			if !set.node.KeepFirstFailure {
				out.Message = n.Message + "; " + out.Message
			}
			return out
		}
	}
	return StepOutcome{}
}

// startedAt is when the playbook started nova-compute (its stackflow_out_started), to the second as Nova
// records service reports; when it is missing, when the playbook ended.
func startedAt(pb ansible.PlaybookResult) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, pb.Outputs["started"]); err == nil {
		return t.Truncate(time.Second)
	}
	return pb.Finished
}

// verify waits until the host's nova-compute, restarted at since, reports version (none when "").
func (r *updateReconciler) verify(ctx workflow.Context, cloud openstack.CloudSecret, host, version string, since time.Time) error {
	return workflow.ExecuteActivity(registrationActivity(ctx, UpdateVerifyTimeout), osActs.WaitComputeVersion,
		openstack.VersionCheckInput{Cloud: cloud, Host: host, Class: VersionClass(version), Since: since}).Get(ctx, nil)
}

// disabledReasonPrefix starts the disabled reason an update gives a compute service, so a service
// disabled by someone else before the update is told apart (and left disabled).
const disabledReasonPrefix = "stackflow update "

func (r *updateReconciler) disabledReason(lc *object.Lifecycle) string {
	return disabledReasonPrefix + lc.Ref.Key() + " (to " + r.spec.NovaCompute.Version + ")"
}

// drainTargets are the hosts a node's instances may go to: the update's other nodes of the same Nova
// (an instance cannot leave its region) that are not in flight and did not fail.
func (r *updateReconciler) drainTargets(self *UpdateNode) []string {
	var out []string
	for _, n := range r.rec.Nodes {
		if n.Name == self.Name || n.InFlight() || n.State == dataplanev1beta1.UpdateNodeFailed || n.Region != self.Region {
			continue
		}
		out = append(out, n.Host)
	}
	return out
}

func (r *updateReconciler) playbook(n *UpdateNode, step, playbook string, files []oslo.ConfigFile, extra map[string]json.RawMessage) ansible.PlaybookInput {
	a := r.rec.Access[n.Name]
	if extra == nil {
		extra = map[string]json.RawMessage{}
	}
	extra["stackflow_checkpoint"], _ = json.Marshal(n.Checkpoint)
	return ansible.PlaybookInput{
		Namespace: r.ns, Host: n.Host, Step: "update-" + strings.ReplaceAll(step, " ", "-"), Playbook: playbook,
		InventoryConfigMap: a.InventoryConfigMap, HostVars: a.HostVars, SSHKeySecret: a.SSHKeySecret,
		ExtraVars: extra, Files: files, PlaybooksVersion: r.spec.NovaCompute.PlaybooksVersion,
	}
}

// stepText is what the update is doing, as its current step shows it (and the Temporal UI's details).
func (r *updateReconciler) stepText() string {
	var parts []string
	for _, n := range r.rec.Nodes {
		if n.InFlight() {
			parts = append(parts, fmt.Sprintf("%s: %s", n.Name, n.Next))
		}
	}
	kind := "batch"
	if r.rec.Canary {
		kind = "canary batch"
	}
	return fmt.Sprintf("%s %d · %s", kind, r.rec.Batch, strings.Join(parts, ", "))
}

// writeStatus mirrors the nodes into the update's status.
func (r *updateReconciler) writeStatus(ctx workflow.Context, lc *object.Lifecycle, plan UpdatePlan, gate string) {
	states := make([]dataplanev1beta1.UpdateNodeState, 0, len(r.rec.Nodes))
	for _, n := range r.rec.Nodes {
		states = append(states, dataplanev1beta1.UpdateNodeState{Name: n.Name, Host: n.Host, State: n.State, Step: firstNonEmpty(n.Next, n.Failed),
			VersionBefore: n.VersionBefore, VersionAfter: n.VersionAfter, InstancesMoved: int32(n.Moved), InstancesReturned: int32(n.Returned),
			Message: n.Message, Attempts: int32(n.Attempts)})
	}
	_ = lc.SetField(ctx, "nodes", len(r.rec.Nodes))
	_ = lc.SetField(ctx, "updatedNodes", plan.Succeeded)
	_ = lc.SetField(ctx, "failedNodes", plan.Failed)
	_ = lc.SetField(ctx, "skippedNodes", plan.Skipped)
	_ = lc.SetField(ctx, "inFlightNodes", len(plan.InFlight))
	_ = lc.SetField(ctx, "batch", plan.InFlight)
	_ = lc.SetField(ctx, "gate", gate)
	_ = lc.SetField(ctx, "playbooksVersion", r.rec.Playbooks)
	states, omitted := BoundUpdateNodeStates(states, dataplanev1beta1.MaxUpdateNodeStates)
	_ = lc.SetField(ctx, "nodeStates", states)
	_ = lc.SetField(ctx, "nodeStatesOmitted", omitted)
	if gate != "" {
		lc.ShowStep(ctx, fmt.Sprintf("canary done (%d updated, %d failed): waiting for approval of gate %q", plan.Succeeded, plan.Failed, gate))
	} else if len(plan.InFlight) > 0 {
		lc.ShowStep(ctx, r.stepText())
	}
}

// Teardown of a deleted update finishes what is in flight, like a cancel: no node stays disabled.
func (r *updateReconciler) Teardown(ctx workflow.Context, lc *object.Lifecycle) error {
	return r.Compensate(ctx, lc)
}

// Compensate finishes the nodes in flight (their remaining steps, rollback included) on the
// disconnected context, starts no other, and makes sure each of them is enabled. Nodes not in flight
// are enabled already: every node's path ends with its enable step.
func (r *updateReconciler) Compensate(ctx workflow.Context, lc *object.Lifecycle) error {
	if len(r.rec.Nodes) == 0 {
		if err := lc.Load(&r.rec); err != nil || len(r.rec.Nodes) == 0 {
			return err
		}
	}
	r.ns = lc.Ref.Namespace
	r.firstFailureVersion(ctx)
	set := r.settings()
	var inFlight []string
	for _, n := range r.rec.Nodes {
		if n.InFlight() {
			inFlight = append(inFlight, n.Name)
		}
	}
	wg := workflow.NewWaitGroup(ctx)
	for _, name := range inFlight {
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			_ = r.runNode(ctx, lc, name, set, false)
		})
	}
	wg.Wait(ctx)
	// A node in flight that could not finish (its enable step failed too) is enabled once more:
	// enabling is idempotent, and no node may stay disabled.
	var futures []workflow.Future
	for _, name := range inFlight {
		if n := r.node(name); !n.WasDisabled {
			futures = append(futures, workflow.ExecuteActivity(novaActivity(ctx, 10*time.Minute), osActs.SetComputeService,
				openstack.ServiceStateInput{Cloud: n.cloud(lc.Ref.Namespace), Host: n.Host, Enabled: true}))
		}
	}
	var errs []string
	for _, f := range futures {
		if err := f.Get(ctx, nil); err != nil {
			errs = append(errs, object.FailureMessage(err))
		}
	}
	plan := PlanUpdate(r.rec.Nodes, set.policy, r.rec.Approved, true, true)
	r.writeStatus(ctx, lc, plan, "")
	_ = lc.Save(r.rec)
	if len(errs) > 0 {
		return fmt.Errorf("enable nodes after cancel: %s", strings.Join(errs, "; "))
	}
	return nil
}

// novaActivity routes a Nova call to the OpenStack queue; API errors retry with backoff within within.
func novaActivity(ctx workflow.Context, within time.Duration) workflow.Context {
	return object.OnOpenStack(ctx, workflow.ActivityOptions{

		StartToCloseTimeout:    time.Minute,
		ScheduleToCloseTimeout: within,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 15 * time.Second},
	})
}

// migrateActivity runs a live migration of a node's instances: it heartbeats, so a worker that dies
// is replaced within seconds, and it carries its own deadline across attempts.
func migrateActivity(ctx workflow.Context, timeout time.Duration) workflow.Context {
	return object.OnOpenStack(ctx, workflow.ActivityOptions{

		StartToCloseTimeout: timeout + 2*time.Minute,
		HeartbeatTimeout:    15 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 2 * time.Second, BackoffCoefficient: 2, MaximumInterval: 20 * time.Second, MaximumAttempts: 10},
	})
}
