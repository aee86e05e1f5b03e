// Package object is the lifecycle every stackflow object workflow shares: one durable workflow per
// custom resource that waits for generations, reconciles the newest through its family's Reconciler,
// mirrors status into the object, obeys pause/resume/retry/refresh, tears down on delete and removes the
// finalizer last, and continues as new to keep its history short.
//
// It is its own package, apart from the families (workflows/dataplane, workflows/servers,
// workflows/controlplane) that plug into it, so that they can only use its API: a Reconciler gets a
// *Lifecycle and calls its methods (Step, Paused, Desired, SetPhase, SetCondition, SetField, Save, Load,
// Gate, Retry, ...), never its state. It is named object, not lifecycle, because every family also imports
// api/lifecycle, the bridge↔workflow contract (names, signals, shared status), and call sites read best as
// object.Run and *object.Lifecycle next to lifecycle.ObjectRef.
package object

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/api/lifecycle"
)

// Reconciler plugs one kind into the object lifecycle: Run owns signals, pause/resume, retry, the status
// query, status mirroring, deletion and continue-as-new; the reconciler owns what the kind does.
type Reconciler interface {
	// Reconcile makes the world match obj (at obj.Generation). Long reconcilers call lc.Step between
	// steps, so pause holds them and progress is visible. An error fails this generation until a retry
	// signal or a newer generation arrives.
	Reconcile(ctx workflow.Context, lc *Lifecycle, obj *kube.Object) error
	// Teardown removes what the workflow recorded; it runs on deletion, before the finalizer is removed.
	Teardown(ctx workflow.Context, lc *Lifecycle) error
}

// Detailer is implemented by reconcilers whose status query shows kind-specific progress.
type Detailer interface {
	Detail() any
}

// Restorer is implemented by reconcilers that hold their record in memory (for Detail) between Load and
// Save: Run calls Restore at the start of every run, so the status query shows the carried record before
// any reconcile of the run.
type Restorer interface {
	Restore(lc *Lifecycle) error
}

// Previewer is implemented by reconcilers that can tell what a reconcile of the object as it is now would
// change without changing anything; Run serves it as the preview update (lifecycle.UpdatePreview). It
// runs beside the reconcile loop, so it must keep to state of its own (no lc status writes).
type Previewer interface {
	Preview(ctx workflow.Context, lc *Lifecycle) (any, error)
}

// Compensator is implemented by reconcilers that must undo partial work when the workflow is cancelled.
// It runs on a disconnected context, so cancellation cannot interrupt it.
type Compensator interface {
	Compensate(ctx workflow.Context, lc *Lifecycle) error
}

// Input is the input of every object workflow. The bridge starts workflows with an ObjectRef alone (the
// same JSON); Carry is set only by continue-as-new.
type Input struct {
	lifecycle.ObjectRef
	Carry *State `json:"carry,omitempty"`
}

// State is everything an object workflow carries across continue-as-new.
type State struct {
	Desired  int64 `json:"desired"`
	Observed int64 `json:"observed"`
	// Failed is the generation whose reconcile failed; it is not retried until a retry signal or a newer
	// generation.
	Failed   int64 `json:"failed,omitempty"`
	Deleting bool  `json:"deleting,omitempty"`
	// Gone is set once the object left the API server before this workflow let it go (its finalizer was
	// taken off by hand): the workflow stops and ends without finishing its teardown.
	Gone   bool                   `json:"gone,omitempty"`
	Paused bool                   `json:"paused,omitempty"`
	Retry  *lifecycle.RetrySignal `json:"retry,omitempty"`
	// Refresh asks for one more reconcile of the current generation: something the object depends on
	// (e.g. the profile a KupenstackConfiguration names) changed. Set by lifecycle.SignalRefresh.
	Refresh    bool               `json:"refresh,omitempty"`
	Phase      string             `json:"phase"`
	Step       string             `json:"step,omitempty"`
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Fields are kind-specific status fields the workflow mirrors into the object.
	Fields map[string]json.RawMessage `json:"fields,omitempty"`
	// Data is the kind's own recorded state (what it created), kept for teardown.
	Data json.RawMessage `json:"data,omitempty"`
	// Resume is set when a reconcile was cut short to continue as new (a long wait): the next run
	// reconciles again at once, and the reconciler resumes from what it recorded.
	Resume bool `json:"resume,omitempty"`
	// Streak counts the runs in a row that found work waiting at their start (refreshes, retries or
	// generations that kept coming): past Limits.Burst the next reconcile waits, longer each time.
	Streak int `json:"streak,omitempty"`
	// StatusStale is set when a status write failed: the next run writes the whole status once.
	StatusStale bool `json:"statusStale,omitempty"`
	// Unwritten lists what of the status the previous run changed but did not write before it continued
	// as new (so it did not wait for that write): the next run writes it, and only it.
	Unwritten *Unwritten `json:"unwritten,omitempty"`
	// AutoRetry is set while a failure that may clear by itself (RetryLater) waits for its next try.
	AutoRetry *AutoRetry `json:"autoRetry,omitempty"`
}

// AutoRetry is the schedule of a failed reconcile the lifecycle tries again by itself.
type AutoRetry struct {
	// Attempt counts the failed reconciles in a row that asked to be retried later.
	Attempt int `json:"attempt"`
	// At is when the next reconcile starts (workflow time).
	At time.Time `json:"at"`
}

// Options tunes Run for a kind.
type Options struct {
	// NoStatus is set for kinds whose status stackflow does not own (core Nodes).
	NoStatus bool
}

// Limits bound the history of an object workflow's runs and pace its waits. Every run records the limits
// it starts with (a side effect in its history), so a worker started with other limits never changes an
// existing run's commands on replay; the next run takes the worker's.
type Limits struct {
	// MaxHistory is how many events one run may hold before a long wait (or an idle run) continues as
	// new; the server's own suggestion is followed too.
	MaxHistory int `json:"maxHistory"`
	// PollInterval is the longest a workflow waits between two looks at what it waits for (a data
	// plane's nodes, a grant it asked for; a wait of WaitUntil looks MaxWaitDelay apart at most).
	PollInterval time.Duration `json:"pollInterval"`
	// Burst is how many runs in a row may find work waiting at their start before the next reconcile
	// backs off (a loop of refreshes or retries that never settles).
	Burst int `json:"burst"`
	// MaxBackoff bounds that back-off.
	MaxBackoff time.Duration `json:"maxBackoff"`
}

// DefaultLimits are the limits of production runs.
var DefaultLimits = Limits{MaxHistory: 2000, PollInterval: 30 * time.Second, Burst: 5, MaxBackoff: 10 * time.Minute}

// workerLimits are the limits new runs of this worker record; SetLimits changes them.
var workerLimits = DefaultLimits

// SetLimits sets the limits new runs take, zero fields keeping the defaults. The worker calls it once,
// before it starts; tests shorten the limits to see continue-as-new happen.
func SetLimits(l Limits) {
	if l.MaxHistory <= 0 {
		l.MaxHistory = DefaultLimits.MaxHistory
	}
	if l.PollInterval <= 0 {
		l.PollInterval = DefaultLimits.PollInterval
	}
	if l.Burst <= 0 {
		l.Burst = DefaultLimits.Burst
	}
	if l.MaxBackoff <= 0 {
		l.MaxBackoff = DefaultLimits.MaxBackoff
	}
	workerLimits = l
}

// Lifecycle is the running state of one object workflow. Its reconciler reaches it only through its
// methods.
type Lifecycle struct {
	// Ref is the object the workflow serves.
	Ref lifecycle.ObjectRef

	state State
	opts  Options
	// autoRetried and prevFailed are the auto retry and failed generation the running reconcile
	// started from.
	autoRetried     *AutoRetry
	prevFailed      int64
	limits          Limits
	cancelReconcile workflow.CancelFunc
	cancelTeardown  workflow.CancelFunc
	// dirty is set when the state may differ from the status written (written); writing while a write
	// is in flight.
	dirty   bool
	writing bool
	// closing is set once the run continues as new: no write starts after it (one the server would
	// still deliver could land after the next run's).
	closing  bool
	written  written
	gates    map[string]bool
	approved map[string]string
	detailer Detailer
}

// ErrDeleted ends a reconcile because the object is gone or being deleted.
var ErrDeleted = errors.New("object is being deleted")

// ChangeCancelledFailure is the GetVersion change after which a run cancelled while its reconcile ran
// ends cancelled even when the reconcile failed rather than returned the cancellation (a component's
// rollout rolled back on it and failed): runs before it recorded the failure and continued as new,
// which dropped the cancellation.
const ChangeCancelledFailure = "lifecycle-cancelled-failure"

// ErrContinueAsNew ends a reconcile that waited long enough for its run's history to be due (see
// Lifecycle.ContinueAsNewDue): the lifecycle continues as new, and the next run reconciles the same
// generation again from what the reconciler recorded.
var ErrContinueAsNew = errors.New("the run's history is due: continue as new")

// Drainer is implemented by reconcilers that receive signals of their own, besides the lifecycle's:
// before continue-as-new, Drain takes every one already delivered into what the reconciler records
// (lc.Save), so none is lost. It runs after every update handler finished and must not block.
type Drainer interface {
	Drain(ctx workflow.Context, lc *Lifecycle) error
}

// Run runs the lifecycle of one object. One run waits for work, reconciles once and continues as new
// when the reconcile settled, so every run's history is one reconcile long and an idle workflow holds
// nothing but its state: it waits for generations, reconciles the newest, mirrors status into the object,
// obeys pause/resume/retry/refresh, tears down on delete and removes the finalizer last.
func Run(ctx workflow.Context, in Input, r Reconciler, opts Options) error {
	lc := &Lifecycle{Ref: in.ObjectRef, opts: opts, gates: map[string]bool{}, approved: map[string]string{}}
	if d, ok := r.(Detailer); ok {
		lc.detailer = d
	}
	if err := lc.recordLimits(ctx); err != nil {
		return err
	}
	if in.Carry != nil {
		lc.state = *in.Carry
		// The object holds the carried status but for what the previous run left unwritten (or all of it
		// after a failed write); search attributes carry over.
		if !lc.state.StatusStale {
			lc.written = writtenOf(lc.state, lc.state.Unwritten)
		}
	} else {
		lc.state.Phase = lifecycle.PhasePending
		if err := workflow.UpsertTypedSearchAttributes(ctx, lifecycle.SAKind.ValueSet(in.Kind), lifecycle.SAObject.ValueSet(in.Key()), lifecycle.SAPhase.ValueSet(lc.state.Phase)); err != nil {
			return fmt.Errorf("search attributes of %s: %w", in.ObjectRef, err)
		}
	}
	lc.state.StatusStale, lc.state.Unwritten = false, nil
	if rs, ok := r.(Restorer); ok {
		if err := rs.Restore(lc); err != nil {
			return fmt.Errorf("restore the record of %s: %w", in.ObjectRef, err)
		}
	}
	if err := lc.setupHandlers(ctx); err != nil {
		return err
	}
	if p, ok := r.(Previewer); ok {
		if err := lc.setupPreview(ctx, p); err != nil {
			return err
		}
	}
	lc.markDirty(ctx)
	workflow.Go(ctx, lc.statusWriter)
	lc.receiveSignals(ctx)

	// A reconcile cut short by continue-as-new resumes at once: it is no loop of reconciles.
	resuming := lc.state.Resume
	busy := lc.needsReconcile()
	if !busy {
		lc.settled(ctx)
	}
	if err := lc.awaitWork(ctx); err != nil {
		return lc.cancelled(ctx, r, err)
	}
	if !lc.state.Deleting && lc.needsReconcile() && !resuming {
		if err := lc.backOff(ctx, busy); err != nil {
			return lc.cancelled(ctx, r, err)
		}
	}
	if !lc.state.Deleting && lc.needsReconcile() {
		err := lc.reconcile(ctx, r)
		switch {
		case temporal.IsCanceledError(err) && ctx.Err() != nil:
			return lc.cancelled(ctx, r, err)
		case errors.Is(err, ErrDeleted):
			lc.state.Deleting = true
		case err != nil && ctx.Err() != nil && workflow.GetVersion(ctx, ChangeCancelledFailure, workflow.DefaultVersion, 1) == 1:
			// Cancelled while reconciling, and the reconcile failed of it (a child compensated and
			// failed): the cancellation stands. The next run would not know of it.
			return lc.cancelled(ctx, r, ctx.Err())
		case errors.Is(err, ErrContinueAsNew):
			lc.state.Resume = true
		}
	}
	if lc.state.Deleting {
		return lc.teardown(ctx, r)
	}
	return lc.continueAsNew(ctx, r)
}

// awaitWork waits until there is something to do: a delete, a reconcile, a due history or, for a
// failure that asked to be retried later, its time (which then counts as a retry request).
func (lc *Lifecycle) awaitWork(ctx workflow.Context) error {
	work := func() bool { return lc.state.Deleting || lc.needsReconcile() || lc.ContinueAsNewDue(ctx) }
	if ar := lc.state.AutoRetry; ar != nil && lc.state.Failed != 0 && !work() {
		// Only runs that carry an AutoRetry (none recorded before it existed) start this timer.
		if d := ar.At.Sub(workflow.Now(ctx)); d > 0 {
			ok, err := workflow.AwaitWithTimeout(ctx, d, work)
			if err != nil || ok {
				return err
			}
		}
		if lc.state.Retry == nil {
			lc.state.Retry = &lifecycle.RetrySignal{}
		}
	}
	return workflow.Await(ctx, work)
}

// continueAsNew ends the run with a fresh one carrying the state: once no status write is under way,
// every update handler finished, and every signal already delivered (the lifecycle's and the
// reconciler's own) is in the state.
func (lc *Lifecycle) continueAsNew(ctx workflow.Context, r Reconciler) error {
	// A write under way finishes first and none starts after (an abandoned one could land after the
	// next run's); what is not written yet goes with the state, so the object shows a settled reconcile
	// only once the run that holds it is there.
	lc.closing = true
	if err := workflow.Await(ctx, func() bool { return !lc.writing }); err != nil {
		return lc.cancelled(ctx, r, err)
	}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return lc.cancelled(ctx, r, err)
	}
	lc.drainSignals(ctx)
	if d, ok := r.(Drainer); ok {
		if err := d.Drain(ctx, lc); err != nil {
			return fmt.Errorf("take the pending signals of %s: %w", lc.Ref, err)
		}
	}
	if lc.state.Deleting {
		lc.closing = false
		return lc.teardown(ctx, r)
	}
	if p, ok := lc.statusPatch(ctx); ok && !lc.opts.NoStatus {
		lc.state.Unwritten = unwrittenOf(p)
	}
	info := workflow.GetInfo(ctx)
	workflow.GetLogger(ctx).Debug("continue-as-new", "object", lc.Ref.String(), "history", info.GetCurrentHistoryLength(), "resume", lc.state.Resume)
	return workflow.NewContinueAsNewError(ctx, info.WorkflowType.Name, Input{ObjectRef: lc.Ref, Carry: &lc.state})
}

// recordLimits takes the worker's limits once per run, recorded in history so replay uses the same.
//
// It stays unguarded on purpose. GetVersion answers DefaultVersion alike for a run recorded with this
// marker and for a run from before it, so a guard could keep only one kind replaying, and every run
// since short histories (the replay corpus, every run on a deployment since) holds the marker. The runs
// from before it do not replay on this code with or without a guard: their Run upserted search
// attributes first in every run and reconciled in a loop within one run. They were started by
// unversioned builds; re-run them on the current build from their first task (`temporal workflow reset
// --type FirstWorkflowTask`; signals are reapplied, activities adopt what exists).
func (lc *Lifecycle) recordLimits(ctx workflow.Context) error {
	v := workflow.SideEffect(ctx, func(workflow.Context) any { return workerLimits })
	if err := v.Get(&lc.limits); err != nil {
		return fmt.Errorf("limits of %s: %w", lc.Ref, err)
	}
	return nil
}

// backOff bounds a loop of reconciles that never settles: a run that found work waiting at its start
// (busy) extends the streak; past Limits.Burst in a row it waits, twice as long each time up to
// MaxBackoff, and says why in the Throttled condition.
func (lc *Lifecycle) backOff(ctx workflow.Context, busy bool) error {
	if !busy {
		return nil
	}
	lc.state.Streak++
	over := lc.state.Streak - lc.limits.Burst
	if over <= 0 {
		return nil
	}
	d := lc.limits.MaxBackoff
	if over < 20 && time.Second<<over < d {
		d = time.Second << over
	}
	lc.SetCondition(ctx, metav1.Condition{Type: ConditionThrottled, Status: metav1.ConditionTrue, Reason: ReasonReconcileLoop,
		Message: fmt.Sprintf("%d reconciles in a row found more work at once (refresh, retry or new generations keep coming); the next waits %s", lc.state.Streak, d)})
	_, err := workflow.AwaitWithTimeout(ctx, d, func() bool { return lc.state.Deleting })
	return err
}

// settled ends a streak: a run that starts with nothing to do waits for its work.
func (lc *Lifecycle) settled(ctx workflow.Context) {
	lc.state.Streak = 0
	if c, ok := lc.Condition(ConditionThrottled); ok && c.Status == metav1.ConditionTrue {
		lc.SetCondition(ctx, metav1.Condition{Type: ConditionThrottled, Status: metav1.ConditionFalse, Reason: "Settled", Message: "reconciles settle again"})
	}
}

// Condition type and reason of a reconcile loop that backs off.
const (
	ConditionThrottled  = "Throttled"
	ReasonReconcileLoop = "ReconcileLoop"
)

// needsReconcile reports whether there is work: a newer generation (not the one that failed), a retry of
// a failure, a refresh, or a reconcile cut short by continue-as-new.
func (lc *Lifecycle) needsReconcile() bool {
	s := lc.state
	if s.Paused || s.Deleting {
		return false
	}
	if s.Desired > s.Observed && s.Desired != s.Failed {
		return true
	}
	return s.Retry != nil && s.Failed != 0 || (s.Refresh || s.Resume) && s.Desired > 0
}

// ContinueAsNewDue reports whether the run's history is long enough to continue as new: the server
// suggests it, or it passed Limits.MaxHistory. Long waits inside a reconcile check it and return
// ErrContinueAsNew.
func (lc *Lifecycle) ContinueAsNewDue(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > lc.limits.MaxHistory
}

// ContinueAsNewOverdue reports whether the run is far enough past its history limit (three times
// Limits.MaxHistory, or Temporal suggests continuing as new) that work which ends at its own boundaries
// (an update's batch) stops in the middle.
func (lc *Lifecycle) ContinueAsNewOverdue(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > 3*lc.limits.MaxHistory
}

// reconcileStep, when set, is a step every reconcile takes first. Only the upgrade test's second build
// sets it (upgrade_probe.go, build tag upgradeprobe): a changed reconcile path, guarded as a release
// guards one.
var reconcileStep func(ctx workflow.Context, lc *Lifecycle) error

// reconcile fetches the object and runs the reconciler on it in a context a delete signal cancels.
func (lc *Lifecycle) reconcile(ctx workflow.Context, r Reconciler) error {
	rctx, cancel := workflow.WithCancel(ctx)
	lc.cancelReconcile = cancel
	defer func() { lc.cancelReconcile = nil; cancel() }()
	// A reconcile of the same generation that fails again to be retried later counts on from the one
	// before.
	lc.autoRetried, lc.prevFailed = lc.state.AutoRetry, lc.state.Failed
	lc.state.Failed, lc.state.AutoRetry = 0, nil
	resumed := lc.state.Resume
	// A refresh arriving while this reconcile runs asks for another one, so it is cleared before, not after.
	lc.state.Refresh, lc.state.Resume = false, false
	// The retry request stays readable (lc.Retry) while this reconcile runs, and is spent by it.
	defer func() { lc.state.Retry = nil }()
	if reconcileStep != nil {
		if err := reconcileStep(rctx, lc); err != nil {
			return err
		}
	}

	obj, err := lc.GetObject(rctx)
	if err != nil {
		return err
	}
	if !obj.Exists || obj.Deleting {
		return ErrDeleted
	}
	if obj.Generation > lc.state.Desired {
		lc.state.Desired = obj.Generation
	}
	if !resumed {
		// A resumed reconcile already shows the phase it is in.
		lc.SetPhase(ctx, lifecycle.PhaseRunning)
	}
	lc.SetCondition(ctx, metav1.Condition{Type: lifecycle.ConditionReady, Status: metav1.ConditionFalse,
		Reason: lifecycle.ReasonReconciling, Message: fmt.Sprintf("acting on generation %d", obj.Generation)})
	err = r.Reconcile(rctx, lc, obj)
	switch {
	case err == nil:
		lc.state.Observed = obj.Generation
		lc.state.Step = ""
		lc.SetPhase(ctx, lifecycle.PhaseReady)
		lc.SetCondition(ctx, metav1.Condition{Type: lifecycle.ConditionReady, Status: metav1.ConditionTrue,
			Reason: lifecycle.ReasonReconciled, Message: fmt.Sprintf("generation %d is in place", obj.Generation)})
		return nil
	case lc.state.Deleting || errors.Is(err, ErrDeleted):
		return ErrDeleted
	case temporal.IsCanceledError(err), errors.Is(err, ErrContinueAsNew):
		return err
	}
	lc.state.Failed = obj.Generation
	msg := FailureMessage(err)
	phase := lifecycle.PhaseFailed
	if IsRetryLater(err) {
		if workflow.GetVersion(ctx, ChangeRetryLaterWaits, workflow.DefaultVersion, 1) == 1 {
			phase = lifecycle.PhaseWaiting
		}
		n := 1
		if prev := lc.autoRetried; prev != nil && lc.prevFailed == obj.Generation {
			n = prev.Attempt + 1
		}
		at := workflow.Now(ctx).Add(AutoRetryDelay(n))
		lc.state.AutoRetry = &AutoRetry{Attempt: n, At: at}
		msg += fmt.Sprintf(" (failed %d time(s) in a row; tried again by itself at %s, or at once on a retry signal)", n, at.UTC().Format(time.TimeOnly))
	}
	lc.SetPhase(ctx, phase)
	lc.SetCondition(ctx, metav1.Condition{Type: lifecycle.ConditionReady, Status: metav1.ConditionFalse,
		Reason: FailureReason(err), Message: msg})
	workflow.GetLogger(ctx).Warn("reconcile failed", "object", lc.Ref.String(), "generation", obj.Generation, "error", err)
	return err
}

// teardown runs the reconciler's teardown, then removes the finalizer; a failed teardown keeps the
// finalizer and waits for a retry signal, so nothing is lost.
func (lc *Lifecycle) teardown(ctx workflow.Context, r Reconciler) error {
	lc.state.Paused = false
	// An object that leaves the API server stops the teardown wherever it is (a wait for other objects to
	// go has no deadline).
	tctx, cancel := workflow.WithCancel(ctx)
	lc.cancelTeardown = cancel
	defer func() { lc.cancelTeardown = nil; cancel() }()
	for {
		if lc.state.Gone {
			return lc.letGo(ctx, nil)
		}
		lc.SetPhase(ctx, lifecycle.PhaseDeleting)
		lc.SetCondition(ctx, metav1.Condition{Type: lifecycle.ConditionReady, Status: metav1.ConditionFalse,
			Reason: lifecycle.ReasonTearingDown, Message: "deleting what this workflow created"})
		err := r.Teardown(tctx, lc)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return err
		}
		if lc.state.Gone {
			return lc.letGo(ctx, err)
		}
		lc.SetCondition(ctx, metav1.Condition{Type: lifecycle.ConditionReady, Status: metav1.ConditionFalse,
			Reason: "TeardownFailed", Message: FailureMessage(err) + " (send the retry signal to try again)"})
		lc.state.Retry = nil
		if err := workflow.Await(ctx, func() bool { return lc.state.Retry != nil || lc.state.Gone }); err != nil {
			return err
		}
		lc.state.Retry = nil
	}
	if err := lc.flush(ctx); err != nil {
		return err
	}
	if err := workflow.ExecuteActivity(KubeActivity(ctx), kubeActs.RemoveFinalizer, lc.Ref).Get(ctx, nil); err != nil {
		return fmt.Errorf("remove finalizer of %s: %w", lc.Ref, err)
	}
	return nil
}

// letGo ends the workflow of an object that left the API server before its teardown finished: someone
// took stackflow's finalizer off by hand, which in Kubernetes says "do not clean up". Nobody is left to
// report to or to send a retry, so the workflow ends (completed) instead of waiting or polling forever;
// what it created stays as it is, and its history shows how far the teardown got.
func (lc *Lifecycle) letGo(ctx workflow.Context, cause error) error {
	msg := "the object left the API server before its teardown finished (stackflow's finalizer was taken off by hand): letting go, what was created stays"
	if cause != nil && !temporal.IsCanceledError(cause) {
		msg += "; the teardown had failed: " + FailureMessage(cause)
	}
	workflow.GetLogger(ctx).Warn(msg, "object", lc.Ref.String(), "step", lc.state.Step)
	return nil
}

// cancelled compensates on a disconnected context and reports a consistent state, then ends the run as
// cancelled. A later spec change starts a fresh run (the bridge's reuse policy allows it).
func (lc *Lifecycle) cancelled(ctx workflow.Context, r Reconciler, cause error) error {
	dctx, cancel := workflow.NewDisconnectedContext(ctx)
	defer cancel()
	msg := "workflow cancelled; the next spec change starts a new run"
	if c, ok := r.(Compensator); ok {
		if err := c.Compensate(dctx, lc); err != nil {
			msg = "workflow cancelled; compensation failed: " + FailureMessage(err)
		}
	}
	lc.state.Step = ""
	lc.SetPhase(dctx, "Cancelled")
	lc.SetCondition(dctx, metav1.Condition{Type: lifecycle.ConditionReady, Status: metav1.ConditionFalse, Reason: "Cancelled", Message: msg})
	lc.dirty = false
	if p, ok := lc.statusPatch(dctx); ok && !lc.opts.NoStatus {
		_ = workflow.ExecuteActivity(KubeActivity(dctx), kubeActs.PatchStatus, p).Get(dctx, nil)
	}
	return cause
}
