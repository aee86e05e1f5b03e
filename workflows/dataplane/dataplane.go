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

	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/activities/signals"
	dataplanev1beta1 "github.com/stackflow/stackflow/api/dataplane/v1beta1"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/workflows/object"
)

// An OpenStackDataPlane deploys its nodes (the nodes of its roles, plus the nodes it lists) as per-node
// pipelines: each node's own workflow runs its phases and its service CRs' workflows run phase 1 as soon
// as that node's phase 0 is done; there is no barrier between nodes. The data plane only admits nodes:
// at most maxConcurrency hold a slot at once, and once more nodes failed than the failure budget allows
// (maxFailedNodes or maxFailedPercentage) no new node is admitted while the others finish.
//
// The protocol between the data plane's workflow and its nodes' workflows, all by signals:
//
//	node → data plane   edpm-request {node}    the node has work and asks for a slot (plus refresh, to wake
//	                                           an idle data plane)
//	data plane → node   edpm-grant {dataPlane} the node may run its pipeline now
//	node → data plane   edpm-report {node, state, phase, step, message}   progress, success or failure
//
// A person steers the data plane like any object workflow: pause stops admitting and is forwarded to the
// running nodes (they hold at their next step); resume undoes both; retry (hosts, steps) re-runs only
// the failed hosts' failed steps in the same run; cancelling the workflow pauses the running nodes at a
// step boundary and reports the state every node reached.

// Signals of the data-plane admission protocol.
const (
	SignalEDPMRequest = "edpm-request"
	SignalEDPMGrant   = "edpm-grant"
	SignalEDPMReport  = "edpm-report"
)

// EDPMRequest asks the data plane for a slot.
type EDPMRequest struct {
	Node       string `json:"node"`
	Generation int64  `json:"generation"`
}

// EDPMGrant admits a node; DataPlane is the data plane's workflow ID, where the node reports.
type EDPMGrant struct {
	DataPlane string `json:"dataPlane"`
}

// EDPMReport is a node's progress as its data plane sees it.
type EDPMReport struct {
	Node       string `json:"node"`
	Host       string `json:"host,omitempty"`
	State      string `json:"state"`
	Phase      int32  `json:"phase"`
	Step       string `json:"step,omitempty"`
	Message    string `json:"message,omitempty"`
	Generation int64  `json:"generation,omitempty"`
}

// reportToDataPlane signals a report; a data plane that is gone is not the node's problem.
func reportToDataPlane(ctx workflow.Context, dataPlaneID string, r EDPMReport) {
	_ = workflow.SignalExternalWorkflow(ctx, dataPlaneID, "", SignalEDPMReport, r).Get(ctx, nil)
}

// OpenStackDataPlaneWorkflow serves an OpenStackDataPlane.
func OpenStackDataPlaneWorkflow(ctx workflow.Context, in object.Input) error {
	return object.Run(ctx, in, &dataPlaneReconciler{}, object.Options{})
}

type dataPlaneReconciler struct {
	rec dataPlaneRecord
	// unanswered is set when a reconcile read a request it could not act on (a node it does not know
	// yet): the refresh that came with it must stay, so the next reconcile reads the members again.
	unanswered bool
}

// ChangeRefreshAnswered is the GetVersion change after which a data plane drops the refreshes its nodes
// sent while its reconcile ran and read their requests: before it, a rollout that failed reconciled
// again at once on such a refresh, failed again, and its status went Failed, Running, Failed.
const ChangeRefreshAnswered = "edpm-dataplane-refresh-answered"

// dataPlaneRecord is the rollout's state: one entry per node, with the UID of its workflow's object.
type dataPlaneRecord struct {
	Nodes []EDPMNode        `json:"nodes,omitempty"`
	UIDs  map[string]string `json:"uids,omitempty"`
}

func (r *dataPlaneReconciler) Detail() any { return r.rec }

// Restore reads the record the previous run carried.
func (r *dataPlaneReconciler) Restore(lc *object.Lifecycle) error { return lc.Load(&r.rec) }

func (r *dataPlaneReconciler) node(name string) *EDPMNode {
	for i := range r.rec.Nodes {
		if r.rec.Nodes[i].Name == name {
			return &r.rec.Nodes[i]
		}
	}
	return nil
}

func (r *dataPlaneReconciler) nodeWorkflowID(ns, name string) string {
	ref := DataPlaneNodeRef(ns, name)
	ref.UID = r.rec.UIDs[name]
	return lifecycle.WorkflowID(ref)
}

func (r *dataPlaneReconciler) Reconcile(ctx workflow.Context, lc *object.Lifecycle, obj *kube.Object) error {
	if err := lc.Load(&r.rec); err != nil {
		return err
	}
	if r.rec.UIDs == nil {
		r.rec.UIDs = map[string]string{}
	}
	defer func() { _ = lc.Save(r.rec) }()
	var spec dataplanev1beta1.OpenStackDataPlaneSpec
	if err := json.Unmarshal(obj.Spec, &spec); err != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("spec of %s: %v", lc.Ref, err), lifecycle.ReasonInvalidSpec, err)
	}
	if err := lc.Step(ctx, "read member nodes"); err != nil {
		return err
	}
	if err := r.syncMembers(ctx, lc, spec); err != nil {
		return err
	}
	requests := workflow.GetSignalChannel(ctx, SignalEDPMRequest)
	reports := workflow.GetSignalChannel(ctx, SignalEDPMReport)
	r.drain(ctx, requests, reports)
	if retry := lc.Retry(); retry != nil {
		r.retry(ctx, lc, *retry)
	}
	policy := EDPMPolicy{MaxConcurrency: 5, MaxFailed: MaxFailedNodes(spec.MaxFailedNodes, spec.MaxFailedPercentage, len(r.rec.Nodes))}
	if spec.MaxConcurrency != nil {
		policy.MaxConcurrency = int(*spec.MaxConcurrency)
	}
	lc.SetPhase(ctx, "Deploying")
	forwardedPause := false
	drains := workflow.GetVersion(ctx, ChangeRolloutDrains, workflow.DefaultVersion, 1) == 1
	for {
		SortEDPMNodes(r.rec.Nodes)
		plan := PlanEDPMRollout(r.rec.Nodes, policy, lc.Paused(), spec.Deploy)
		r.grant(ctx, lc, plan.Start)
		if len(plan.Start) > 0 {
			plan = PlanEDPMRollout(r.rec.Nodes, policy, lc.Paused(), spec.Deploy)
		}
		r.writeStatus(ctx, lc, plan, policy)
		if plan.Done {
			break
		}
		if lc.Paused() != forwardedPause {
			forwardedPause = lc.Paused()
			r.forwardPause(ctx, lc, forwardedPause)
		}
		if lc.ContinueAsNewDue(ctx) {
			// The next run resumes the rollout from the record (saved on return) and the signals drained.
			return object.ErrContinueAsNew
		}
		// Wait for news: a report or request, a pause or resume, a deletion, or the pace of re-grants.
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(reports, func(c workflow.ReceiveChannel, _ bool) {
			var rep EDPMReport
			c.Receive(ctx, &rep)
			r.onReport(rep)
		})
		sel.AddReceive(requests, func(c workflow.ReceiveChannel, _ bool) {
			var req EDPMRequest
			c.Receive(ctx, &req)
			r.onRequest(req)
		})
		paused := lc.Paused()
		ticked := false
		tctx, cancelTimer := workflow.WithCancel(ctx)
		sel.AddFuture(workflow.NewTimer(tctx, lc.Limits().PollInterval), func(f workflow.Future) { ticked = f.Get(ctx, nil) == nil })
		waitCtx, cancelWait := workflow.WithCancel(ctx)
		changed, settle := workflow.NewFuture(waitCtx)
		workflow.Go(waitCtx, func(ctx workflow.Context) {
			if workflow.Await(ctx, func() bool { return lc.Paused() != paused || lc.Deleting() }) == nil {
				settle.Set(nil, nil)
			}
		})
		sel.AddFuture(changed, func(workflow.Future) {})
		sel.Select(ctx)
		if drains {
			// Every report and request already delivered is taken now, in the order the selector takes
			// them: one pass of the loop (a plan, a batch of grants, a timer) per wake-up, not per signal.
			r.drainInOrder(reports, requests)
		}
		cancelTimer()
		cancelWait()
		if ticked {
			// Reports are signals, and a signal can be lost (a node that deployed before this data
			// plane governed it never sent one): the nodes' own status is the truth to fall back on.
			if err := r.pollRunning(ctx, lc); err != nil {
				return err
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if lc.Deleting() {
			return object.ErrDeleted
		}
	}
	if workflow.GetVersion(ctx, ChangeRefreshAnswered, workflow.DefaultVersion, 1) == 1 {
		r.answerRefresh(ctx, lc, requests, reports)
	}
	lc.SetPhase(ctx, lifecycle.PhaseRunning)
	if !spec.Deploy {
		lc.SetCondition(ctx, metav1.Condition{Type: ConditionDeployed, Status: metav1.ConditionFalse, Reason: ReasonDeployHeld, Message: "spec.deploy is false: no node is admitted"})
		return nil
	}
	var failed []string
	for _, n := range r.rec.Nodes {
		if n.State == EDPMFailed {
			failed = append(failed, fmt.Sprintf("%s (%s: %s)", n.Name, firstNonEmpty(n.Step, "?"), n.Message))
		}
	}
	if len(failed) > 0 {
		reason := ReasonNodesFailed
		if len(failed) > policy.MaxFailed {
			reason = dataplanev1beta1.ReasonMaxFailuresReached
		}
		lc.SetCondition(ctx, metav1.Condition{Type: ConditionDeployed, Status: metav1.ConditionFalse, Reason: reason,
			Message: fmt.Sprintf("%d of %d node(s) failed (failure budget %d): %s; send the retry signal to re-run their failed steps",
				len(failed), len(r.rec.Nodes), policy.MaxFailed, strings.Join(failed, "; "))})
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%d node(s) failed: %s", len(failed), strings.Join(failed, "; ")), reason, nil)
	}
	lc.SetCondition(ctx, metav1.Condition{Type: ConditionDeployed, Status: metav1.ConditionTrue, Reason: lifecycle.ReasonReconciled,
		Message: fmt.Sprintf("%d node(s) deployed", len(r.rec.Nodes))})
	return nil
}

// syncMembers updates the record from the nodes that belong to the data plane now.
func (r *dataPlaneReconciler) syncMembers(ctx workflow.Context, lc *object.Lifecycle, spec dataplanev1beta1.OpenStackDataPlaneSpec) error {
	listed := workflow.GetVersion(ctx, ChangeMembersListed, workflow.DefaultVersion, 1) == 1
	in := kube.ListInput{Ref: DataPlaneNodeRef(lc.Ref.Namespace, "")}
	if listed {
		in.Status = &memberStatus
	}
	all, err := object.ListObjects(ctx, in)
	if err != nil {
		return fmt.Errorf("list nodes of %s: %w", lc.Ref, err)
	}
	type pendingRead struct {
		index      int
		generation int64
		ref        lifecycle.ObjectRef
		future     workflow.Future
		status     *kube.ObjectStatus // the list's, since ChangeMembersListed
	}
	var keep []EDPMNode
	var reads []pendingRead
	for _, o := range all {
		var ns dataplanev1beta1.OpenStackDataPlaneNodeSpec
		if err := json.Unmarshal(o.Spec, &ns); err != nil || o.Deleting {
			continue
		}
		if !slices.Contains(spec.Roles, ns.Role) && !slices.Contains(spec.Nodes, o.Ref.Name) {
			continue
		}
		cur := r.node(o.Ref.Name)
		if cur != nil && r.rec.UIDs[o.Ref.Name] == o.Ref.UID && cur.Generation == o.Generation && cur.State != EDPMHeld {
			keep = append(keep, *cur)
			continue
		}
		n := EDPMNode{Name: o.Ref.Name, Host: ns.HostName, Generation: o.Generation}
		if cur != nil && r.rec.UIDs[o.Ref.Name] == o.Ref.UID {
			n.Attempts = cur.Attempts
		}
		r.rec.UIDs[o.Ref.Name] = o.Ref.UID
		if !ns.Deploy {
			n.State, n.Message = EDPMHeld, "spec.deploy is false"
			keep = append(keep, n)
			continue
		}
		// Where is the node? Deployed nodes need no slot; failed ones wait for a retry. The reads run
		// side by side: a large data plane must not read its nodes one after the other.
		ref := DataPlaneNodeRef(lc.Ref.Namespace, o.Ref.Name)
		ref.UID = o.Ref.UID
		n.State = EDPMPending
		rd := pendingRead{index: len(keep), generation: o.Generation, ref: ref, status: o.Status}
		if !listed {
			rd.future = workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.GetObjectStatus, kube.StatusInput{Ref: ref, Fields: []string{"deployed"}})
		}
		reads = append(reads, rd)
		keep = append(keep, n)
	}
	for _, rd := range reads {
		var st kube.ObjectStatus
		switch {
		case rd.future != nil:
			if err := rd.future.Get(ctx, &st); err != nil {
				return fmt.Errorf("read %s: %w", rd.ref, err)
			}
		case rd.status != nil:
			st = *rd.status
		}
		n := &keep[rd.index]
		n.Paused = st.Phase == lifecycle.PhasePaused || slices.ContainsFunc(st.Conditions, func(c metav1.Condition) bool {
			return c.Type == lifecycle.ConditionPaused && c.Status == metav1.ConditionTrue
		})
		switch {
		case string(st.Fields["deployed"]) == "true" && st.ObservedGeneration == rd.generation:
			n.State, n.Message = EDPMSucceeded, "already deployed"
		case st.Phase == lifecycle.PhaseFailed:
			n.State = EDPMFailed
			for _, c := range st.Conditions {
				if c.Type == lifecycle.ConditionReady {
					n.Message = c.Message
				}
			}
		}
	}
	r.rec.Nodes = keep
	//workflowcheck:ignore -- reviewed: the result does not depend on the map's order
	for name := range r.rec.UIDs {
		if r.node(name) == nil {
			delete(r.rec.UIDs, name)
		}
	}
	return nil
}

// Drain takes the requests and reports delivered but not yet read into the record, before the run
// continues as new: none is lost, and the next run's reconcile starts from them.
func (r *dataPlaneReconciler) Drain(ctx workflow.Context, lc *object.Lifecycle) error {
	if err := lc.Load(&r.rec); err != nil {
		return err
	}
	if r.rec.UIDs == nil {
		r.rec.UIDs = map[string]string{}
	}
	r.drain(ctx, workflow.GetSignalChannel(ctx, SignalEDPMRequest), workflow.GetSignalChannel(ctx, SignalEDPMReport))
	return lc.Save(r.rec)
}

// ChangeRolloutDrains is the GetVersion change after which a rollout's loop takes every report and
// request already delivered each time it wakes: before it, each signal cost a pass of the loop (a timer
// started and cancelled, a plan), and a 200-node rollout's start held 400 of them.
const ChangeRolloutDrains = "edpm-rollout-drains"

// drainInOrder takes the reports and requests already delivered as the rollout's selector would, one
// at a time, a report before a request.
func (r *dataPlaneReconciler) drainInOrder(reports, requests workflow.ReceiveChannel) {
	for {
		var rep EDPMReport
		if reports.ReceiveAsync(&rep) {
			r.onReport(rep)
			continue
		}
		var req EDPMRequest
		if requests.ReceiveAsync(&req) {
			r.onRequest(req)
			continue
		}
		return
	}
}

// drain takes the requests and reports that arrived while no reconcile read them.
func (r *dataPlaneReconciler) drain(ctx workflow.Context, requests, reports workflow.ReceiveChannel) {
	for {
		var req EDPMRequest
		if !requests.ReceiveAsync(&req) {
			break
		}
		r.onRequest(req)
	}
	for {
		var rep EDPMReport
		if !reports.ReceiveAsync(&rep) {
			break
		}
		r.onReport(rep)
	}
}

// answerRefresh ends a rollout's loop: a node asking for admission signals its request and a refresh
// (which wakes an idle data plane); when this reconcile read every request and acted on each, the
// refreshes that came with them ask for nothing more and are dropped. A request still unread, or one
// from a node not in the record, keeps them: the next reconcile reads the members again.
func (r *dataPlaneReconciler) answerRefresh(ctx workflow.Context, lc *object.Lifecycle, requests, reports workflow.ReceiveChannel) {
	late := false
	for {
		var req EDPMRequest
		if !requests.ReceiveAsync(&req) {
			break
		}
		r.onRequest(req)
		late = true
	}
	r.drain(ctx, requests, reports)
	if !late && !r.unanswered {
		lc.RefreshAnswered()
	}
}

func (r *dataPlaneReconciler) onRequest(req EDPMRequest) {
	n := r.node(req.Node)
	if n == nil {
		r.unanswered = true
		return
	}
	if n.State == EDPMRunning || n.State == EDPMHeld || n.State == EDPMPending {
		return
	}
	// A node with new work (a changed role, a retried step) asks for a slot again.
	n.State, n.Message = EDPMPending, "asked for a slot"
	if req.Generation > n.Generation {
		n.Generation = req.Generation
	}
}

func (r *dataPlaneReconciler) onReport(rep EDPMReport) {
	n := r.node(rep.Node)
	if n == nil {
		return
	}
	switch rep.State {
	case EDPMRunning:
		if n.State != EDPMRunning && n.State != EDPMPending {
			return
		}
		n.State, n.Phase, n.Step, n.Message = EDPMRunning, rep.Phase, rep.Step, ""
	case EDPMSucceeded:
		n.State, n.Message = EDPMSucceeded, rep.Message
	case EDPMFailed:
		n.State, n.Phase, n.Step, n.Message = EDPMFailed, rep.Phase, rep.Step, rep.Message
	}
	if rep.Host != "" {
		n.Host = rep.Host
	}
}

// pollRunning reads the status of the nodes the data plane believes running: a node deployed for its
// generation succeeded, a node that failed after its grant failed.
func (r *dataPlaneReconciler) pollRunning(ctx workflow.Context, lc *object.Lifecycle) error {
	type read struct {
		i int
		f workflow.Future
	}
	var reads []read
	running := slices.ContainsFunc(r.rec.Nodes, func(n EDPMNode) bool { return n.State == EDPMRunning })
	var listed map[string]*kube.ObjectStatus
	if running && workflow.GetVersion(ctx, ChangeMembersListed, workflow.DefaultVersion, 1) == 1 {
		// One list of every node's status instead of a read per running node at every tick.
		all, err := object.ListObjects(ctx, kube.ListInput{Ref: DataPlaneNodeRef(lc.Ref.Namespace, ""), Status: &pollStatus})
		if err != nil {
			return fmt.Errorf("list nodes of %s: %w", lc.Ref, err)
		}
		listed = map[string]*kube.ObjectStatus{}
		for _, o := range all {
			if o.Status != nil && o.Ref.UID == r.rec.UIDs[o.Ref.Name] {
				listed[o.Ref.Name] = o.Status
			}
		}
	}
	for i, n := range r.rec.Nodes {
		if n.State != EDPMRunning {
			continue
		}
		if listed != nil {
			reads = append(reads, read{i: i})
			continue
		}
		ref := DataPlaneNodeRef(lc.Ref.Namespace, n.Name)
		ref.UID = r.rec.UIDs[n.Name]
		reads = append(reads, read{i, workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.GetObjectStatus, kube.StatusInput{Ref: ref, Fields: []string{"deployed"}})})
	}
	var gone []string
	for _, rd := range reads {
		var st kube.ObjectStatus
		if rd.f == nil {
			// Not in the list (or another object of its name): gone, as a read by UID would say.
			if l := listed[r.rec.Nodes[rd.i].Name]; l != nil {
				st = *l
			}
		} else if err := rd.f.Get(ctx, &st); err != nil {
			return fmt.Errorf("read node %s: %w", r.rec.Nodes[rd.i].Name, err)
		}
		n := &r.rec.Nodes[rd.i]
		// A running node deleted mid-rollout may never report again: its object is the truth.
		if (!st.Exists || st.Deleting) && workflow.GetVersion(ctx, ChangeNodesLeave, workflow.DefaultVersion, 1) == 1 {
			gone = append(gone, n.Name)
			continue
		}
		var ready *metav1.Condition
		for i := range st.Conditions {
			if st.Conditions[i].Type == lifecycle.ConditionReady {
				ready = &st.Conditions[i]
			}
		}
		switch {
		case string(st.Fields["deployed"]) == "true" && st.ObservedGeneration == n.Generation && st.Phase == lifecycle.PhaseReady:
			n.State, n.Message = EDPMSucceeded, "deployed (from its status)"
		case st.Phase == lifecycle.PhaseFailed && ready != nil && ready.LastTransitionTime.After(n.Granted):
			n.State, n.Message = EDPMFailed, ready.Message
		}
	}
	if len(gone) > 0 {
		r.rec.Nodes = slices.DeleteFunc(r.rec.Nodes, func(n EDPMNode) bool { return slices.Contains(gone, n.Name) })
		for _, name := range gone {
			delete(r.rec.UIDs, name)
		}
	}
	return nil
}

// ChangeMembersListed is the GetVersion change after which the data plane learns its nodes' status
// from one list (with statuses) instead of a read per node: at 500 nodes those reads were 1,500 events
// and hundreds of workflow tasks at the rollout's start, and again at every poll.
const ChangeMembersListed = "edpm-members-listed"

// memberStatus is what of a node's status the data plane reads of its members; pollStatus what it reads
// of its running nodes.
var (
	memberStatus = kube.StatusFilter{Fields: []string{"deployed"}, Conditions: []string{lifecycle.ConditionReady, lifecycle.ConditionPaused}}
	pollStatus   = kube.StatusFilter{Fields: []string{"deployed"}, Conditions: []string{lifecycle.ConditionReady}}
)

// ChangeNodesLeave is the GetVersion change after which a rollout drops a running node whose object is
// gone or being deleted: before it, the rollout waited for that node's report forever.
const ChangeNodesLeave = "edpm-nodes-leave"

// ChangeGrantResumesPaused is the GetVersion change after which a grant resumes only a node that may be
// paused (Compensate paused it, or its status said Paused when the members were read): one signal and
// one workflow task less per node, which a 500-node rollout's start-up waited for.
const ChangeGrantResumesPaused = "edpm-grant-resumes-paused"

// ChangeGrantsBatched is the GetVersion change after which a data plane sends its grants as one batch
// from its worker (a local activity, activities/signals) instead of one external signal per node: each
// external signal held the data plane's lock on the server while its node was signalled, and cost the
// data plane's history two events and a workflow task; 200 grants took 90 s to arrive.
const ChangeGrantsBatched = "edpm-grants-batched"

// grant admits nodes, all at once: each that may be paused (a cancelled rollout pauses its running
// nodes) is resumed, and each is signalled its grant.
func (r *dataPlaneReconciler) grant(ctx workflow.Context, lc *object.Lifecycle, names []string) {
	if len(names) == 0 {
		return
	}
	self := workflow.GetInfo(ctx).WorkflowExecution.ID
	resumeAll := workflow.GetVersion(ctx, ChangeGrantResumesPaused, workflow.DefaultVersion, 1) == workflow.DefaultVersion
	batched := workflow.GetVersion(ctx, ChangeGrantsBatched, workflow.DefaultVersion, 1) == 1
	grants := make([]workflow.Future, len(names))
	batch := signals.Batch{Signal: SignalEDPMGrant}
	for i, name := range names {
		id := r.nodeWorkflowID(lc.Ref.Namespace, name)
		n := r.node(name)
		if resumeAll || n.Paused {
			workflow.SignalExternalWorkflow(ctx, id, "", lifecycle.SignalResume, nil)
		}
		if batched {
			// The grant's request ID is unique per data plane, node and admission: a retried batch
			// delivers it once.
			batch.Targets = append(batch.Targets, signals.Target{WorkflowID: id, RequestID: fmt.Sprintf("%s/grant/%s/%d", self, name, n.Attempts+1)})
			continue
		}
		grants[i] = workflow.SignalExternalWorkflow(ctx, id, "", SignalEDPMGrant, EDPMGrant{DataPlane: self})
	}
	var sent signals.Result
	var batchErr error
	if batched {
		batch.Arg, _ = json.Marshal(EDPMGrant{DataPlane: self})
		batchErr = workflow.ExecuteLocalActivity(signalActivity(ctx), signalActs.SignalWorkflows, batch).Get(ctx, &sent)
	}
	for i, name := range names {
		n := r.node(name)
		var err error
		switch {
		case !batched:
			err = grants[i].Get(ctx, nil)
		case batchErr != nil:
			err = batchErr
		case slices.Contains(sent.NotFound, batch.Targets[i].WorkflowID):
			err = errors.New("no running workflow")
		}
		if err != nil {
			// The node's workflow is not there (yet): it stays pending and is granted again later.
			n.Message = "its workflow is not running yet: " + object.FailureMessage(err)
			continue
		}
		n.State, n.Message, n.Granted, n.Paused = EDPMRunning, "admitted", workflow.Now(ctx), false
		n.Attempts++
	}
}

// signalActivity runs a batch of signals on the workflow worker: a few tries within a minute; a batch
// that still fails leaves its nodes pending, granted again at the next pass of the rollout's loop.
func signalActivity(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 10 * time.Second},
	})
}

// retry re-admits the failed nodes the request covers and tells their workflows (and, for a failed
// service, the service CR's workflow) to re-run what failed.
func (r *dataPlaneReconciler) retry(ctx workflow.Context, lc *object.Lifecycle, sig lifecycle.RetrySignal) {
	for _, name := range SelectEDPMRetry(r.rec.Nodes, sig) {
		n := r.node(name)
		if svc := serviceRefForStep(lc.Ref.Namespace, name, n.Step); svc != nil {
			var st kube.ObjectStatus
			if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.GetObjectStatus, kube.StatusInput{Ref: *svc}).Get(ctx, &st); err == nil && st.Exists {
				svc.UID = st.UID
				_ = workflow.SignalExternalWorkflow(ctx, lifecycle.WorkflowID(*svc), "", lifecycle.SignalRetry, lifecycle.RetrySignal{Steps: sig.Steps}).Get(ctx, nil)
			}
		}
		_ = workflow.SignalExternalWorkflow(ctx, r.nodeWorkflowID(lc.Ref.Namespace, name), "", lifecycle.SignalRetry, lifecycle.RetrySignal{Steps: sig.Steps}).Get(ctx, nil)
		n.State, n.Message = EDPMPending, "retry of "+firstNonEmpty(n.Step, "its failed step")
	}
}

// serviceRefForStep names the service CR behind a phase-1 step, nil for the node's own steps.
func serviceRefForStep(namespace, node, step string) *lifecycle.ObjectRef {
	switch step {
	case StepNovaCompute:
		ref := NovaExternalComputeRef(namespace, node)
		return &ref
	case StepOVNMetadataAgent:
		ref := OVNMetadataAgentRef(namespace, node)
		return &ref
	}
	return nil
}

// forwardPause pauses (or resumes) the running nodes' workflows, so they hold at their next step.
func (r *dataPlaneReconciler) forwardPause(ctx workflow.Context, lc *object.Lifecycle, pause bool) {
	sig := lifecycle.SignalResume
	msg := "resumed"
	if pause {
		sig, msg = lifecycle.SignalPause, "paused: no node is admitted and running nodes hold at their next step; send resume to go on"
	}
	for _, n := range r.rec.Nodes {
		if n.State == EDPMRunning {
			_ = workflow.SignalExternalWorkflow(ctx, r.nodeWorkflowID(lc.Ref.Namespace, n.Name), "", sig, nil).Get(ctx, nil)
		}
	}
	lc.SetCondition(ctx, metav1.Condition{Type: lifecycle.ConditionPaused, Status: object.BoolCondition(pause), Reason: map[bool]string{true: lifecycle.ReasonPaused, false: "Resumed"}[pause], Message: msg})
}

// writeStatus mirrors the rollout into the data plane's status.
func (r *dataPlaneReconciler) writeStatus(ctx workflow.Context, lc *object.Lifecycle, plan EDPMPlan, policy EDPMPolicy) {
	var failed []string
	states := make([]dataplanev1beta1.DataPlaneNodeState, 0, len(r.rec.Nodes))
	for _, n := range r.rec.Nodes {
		if n.State == EDPMFailed {
			failed = append(failed, n.Name)
		}
		states = append(states, dataplanev1beta1.DataPlaneNodeState{Name: n.Name, Host: n.Host, State: n.State, Phase: n.Phase, Step: n.Step, Message: n.Message, Attempts: int32(n.Attempts)})
	}
	_ = lc.SetField(ctx, "nodes", len(r.rec.Nodes))
	_ = lc.SetField(ctx, "readyNodes", plan.Succeeded)
	_ = lc.SetField(ctx, "failedNodes", failed)
	states, omitted := BoundNodeStates(states, MaxNodeStates)
	_ = lc.SetField(ctx, "nodeStates", states)
	if ok, _ := lc.Field("nodeStatesOmitted", new(int)); ok || omitted > 0 {
		_ = lc.SetField(ctx, "nodeStatesOmitted", omitted)
	}
	if plan.BudgetExceeded {
		lc.SetCondition(ctx, metav1.Condition{Type: "Admitting", Status: metav1.ConditionFalse, Reason: dataplanev1beta1.ReasonMaxFailuresReached,
			Message: fmt.Sprintf("%d node(s) failed, more than the budget of %d: no new node is admitted", plan.Failed, policy.MaxFailed)})
	} else {
		lc.SetCondition(ctx, metav1.Condition{Type: "Admitting", Status: object.BoolCondition(plan.Pending > 0 || plan.Running > 0), Reason: "Rollout",
			Message: fmt.Sprintf("%d running (at most %d), %d pending, %d succeeded, %d failed, %d held", plan.Running, policy.MaxConcurrency, plan.Pending, plan.Succeeded, plan.Failed, plan.Held)})
	}
	lc.ShowStep(ctx, fmt.Sprintf("%d/%d nodes deployed, %d running, %d failed", plan.Succeeded, len(r.rec.Nodes), plan.Running, plan.Failed))
}

func (r *dataPlaneReconciler) Teardown(workflow.Context, *object.Lifecycle) error { return nil }

// Compensate stops a cancelled rollout cleanly: running nodes are paused (they hold at their next step,
// nothing is cut in the middle) and the state every node reached is reported.
func (r *dataPlaneReconciler) Compensate(ctx workflow.Context, lc *object.Lifecycle) error {
	var summary []string
	for i := range r.rec.Nodes {
		n := &r.rec.Nodes[i]
		if n.State == EDPMRunning {
			_ = workflow.SignalExternalWorkflow(ctx, r.nodeWorkflowID(lc.Ref.Namespace, n.Name), "", lifecycle.SignalPause, nil).Get(ctx, nil)
			n.State, n.Message, n.Paused = EDPMStopped, "stopped at a step boundary after "+firstNonEmpty(n.Step, "admission")+" (paused; a new rollout resumes it)", true
		}
		summary = append(summary, fmt.Sprintf("%s: %s%s", n.Name, n.State, map[bool]string{true: " at " + n.Step, false: ""}[n.Step != "" && n.State != EDPMSucceeded]))
	}
	SortEDPMNodes(r.rec.Nodes)
	plan := PlanEDPMRollout(r.rec.Nodes, EDPMPolicy{MaxConcurrency: 1, MaxFailed: len(r.rec.Nodes)}, true, false)
	r.writeStatus(ctx, lc, plan, EDPMPolicy{})
	lc.SetCondition(ctx, metav1.Condition{Type: "RolloutStopped", Status: metav1.ConditionTrue, Reason: "Cancelled",
		Message: "rollout cancelled; " + strings.Join(summary, "; ")})
	_ = lc.Save(r.rec)
	return nil
}
