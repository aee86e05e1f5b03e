package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/activities"
	"github.com/stackflow/stackflow/api/lifecycle"
)

// Reconciler plugs one kind into the object lifecycle: RunObject owns signals, pause/resume, retry, the
// status query, status mirroring, deletion and continue-as-new; the reconciler owns what the kind does.
type Reconciler interface {
	// Reconcile makes the world match obj (at obj.Generation). Long reconcilers call lc.Step between
	// steps, so pause holds them and progress is visible. An error fails this generation until a retry
	// signal or a newer generation arrives.
	Reconcile(ctx workflow.Context, lc *Lifecycle, obj *activities.Object) error
	// Teardown removes what the workflow recorded; it runs on deletion, before the finalizer is removed.
	Teardown(ctx workflow.Context, lc *Lifecycle) error
}

// Detailer is implemented by reconcilers whose status query shows kind-specific progress.
type Detailer interface {
	Detail() any
}

// Compensator is implemented by reconcilers that must undo partial work when the workflow is cancelled.
// It runs on a disconnected context, so cancellation cannot interrupt it.
type Compensator interface {
	Compensate(ctx workflow.Context, lc *Lifecycle) error
}

// ObjectInput is the input of every object workflow. The bridge starts workflows with an ObjectRef alone
// (the same JSON); Carry is set only by continue-as-new.
type ObjectInput struct {
	lifecycle.ObjectRef
	Carry *ObjectState `json:"carry,omitempty"`
}

// ObjectState is everything an object workflow carries across continue-as-new.
type ObjectState struct {
	Desired  int64 `json:"desired"`
	Observed int64 `json:"observed"`
	// Failed is the generation whose reconcile failed; it is not retried until a retry signal or a newer
	// generation.
	Failed   int64                  `json:"failed,omitempty"`
	Deleting bool                   `json:"deleting,omitempty"`
	Paused   bool                   `json:"paused,omitempty"`
	Retry    *lifecycle.RetrySignal `json:"retry,omitempty"`
	// Refresh asks for one more reconcile of the current generation: something the object depends on
	// (e.g. the profile a KupenstackConfiguration names) changed. Set by SignalRefresh.
	Refresh    bool               `json:"refresh,omitempty"`
	Phase      string             `json:"phase"`
	Step       string             `json:"step,omitempty"`
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Fields are kind-specific status fields the workflow mirrors into the object.
	Fields map[string]json.RawMessage `json:"fields,omitempty"`
	// Data is the kind's own recorded state (what it created), kept for teardown.
	Data json.RawMessage `json:"data,omitempty"`
}

// Options tunes RunObject for a kind.
type Options struct {
	// NoStatus is set for kinds whose status stackflow does not own (core Nodes).
	NoStatus bool
	// MaxHistory bounds the history of one run before continue-as-new (default 2000 events).
	MaxHistory int
}

// Lifecycle is the running state of one object workflow, shared with its reconciler.
type Lifecycle struct {
	Ref   lifecycle.ObjectRef
	State ObjectState

	opts            Options
	kind            string
	cancelReconcile workflow.CancelFunc
	dirty           bool
	writing         bool
	gates           map[string]bool
	approved        map[string]string
	detailer        Detailer
}

// SignalRefresh asks an object workflow to reconcile its current generation again because something it
// depends on changed (a profile's workflow sends it to the configurations and nodes that use profiles).
const SignalRefresh = "refresh"

// ErrDeleted ends a reconcile because the object is gone or being deleted.
var ErrDeleted = errors.New("object is being deleted")

// RunObject runs the lifecycle of one object: it waits for generations, reconciles the newest, mirrors
// status into the object, obeys pause/resume/retry, tears down on delete and removes the finalizer last.
func RunObject(ctx workflow.Context, in ObjectInput, r Reconciler, opts Options) error {
	if opts.MaxHistory == 0 {
		opts.MaxHistory = 2000
	}
	lc := &Lifecycle{Ref: in.ObjectRef, opts: opts, kind: in.Kind, gates: map[string]bool{}, approved: map[string]string{}}
	if d, ok := r.(Detailer); ok {
		lc.detailer = d
	}
	if in.Carry != nil {
		lc.State = *in.Carry
	} else {
		lc.State.Phase = lifecycle.PhasePending
	}
	logger := workflow.GetLogger(ctx)
	if err := workflow.UpsertTypedSearchAttributes(ctx, SAKind.ValueSet(in.Kind), SAObject.ValueSet(in.Key()), SAPhase.ValueSet(lc.State.Phase)); err != nil {
		return fmt.Errorf("search attributes of %s: %w", in.ObjectRef, err)
	}
	if err := lc.setupHandlers(ctx); err != nil {
		return err
	}
	lc.markDirty(ctx)
	workflow.Go(ctx, lc.statusWriter)
	lc.receiveSignals(ctx)

	for {
		err := workflow.Await(ctx, func() bool {
			return lc.State.Deleting || lc.needsReconcile() || lc.shouldContinueAsNew(ctx)
		})
		if err != nil {
			return lc.cancelled(ctx, r, err)
		}
		if lc.State.Deleting {
			return lc.teardown(ctx, r)
		}
		if lc.needsReconcile() {
			if err := lc.reconcile(ctx, r); err != nil {
				if temporal.IsCanceledError(err) && ctx.Err() != nil {
					return lc.cancelled(ctx, r, err)
				}
				if errors.Is(err, ErrDeleted) {
					lc.State.Deleting = true
				}
			}
			continue
		}
		// Idle and the history is long: start a fresh run with the same state.
		if err := lc.flush(ctx); err != nil {
			return lc.cancelled(ctx, r, err)
		}
		if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
			return lc.cancelled(ctx, r, err)
		}
		lc.drainSignals(ctx)
		if lc.State.Deleting || lc.needsReconcile() {
			continue
		}
		logger.Info("continue-as-new", "object", in.ObjectRef.String(), "history", workflow.GetInfo(ctx).GetCurrentHistoryLength())
		return workflow.NewContinueAsNewError(ctx, workflow.GetInfo(ctx).WorkflowType.Name, ObjectInput{ObjectRef: in.ObjectRef, Carry: &lc.State})
	}
}

func (lc *Lifecycle) needsReconcile() bool {
	s := lc.State
	if s.Paused || s.Deleting {
		return false
	}
	if s.Desired > s.Observed && s.Desired != s.Failed {
		return true
	}
	return s.Retry != nil && s.Failed != 0 || s.Refresh && s.Desired > 0
}

func (lc *Lifecycle) shouldContinueAsNew(ctx workflow.Context) bool {
	info := workflow.GetInfo(ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > lc.opts.MaxHistory
}

// reconcile fetches the object and runs the reconciler on it in a context a delete signal cancels.
func (lc *Lifecycle) reconcile(ctx workflow.Context, r Reconciler) error {
	rctx, cancel := workflow.WithCancel(ctx)
	lc.cancelReconcile = cancel
	defer func() { lc.cancelReconcile = nil; cancel() }()
	lc.State.Failed = 0
	// A refresh arriving while this reconcile runs asks for another one, so it is cleared before, not after.
	lc.State.Refresh = false
	// The retry request stays readable (lc.Retry) while this reconcile runs, and is spent by it.
	defer func() { lc.State.Retry = nil }()

	obj, err := lc.GetObject(rctx)
	if err != nil {
		return err
	}
	if !obj.Exists || obj.Deleting {
		return ErrDeleted
	}
	if obj.Generation > lc.State.Desired {
		lc.State.Desired = obj.Generation
	}
	lc.SetPhase(ctx, lifecycle.PhaseRunning)
	lc.SetCondition(ctx, metav1.Condition{Type: lifecycle.ConditionReady, Status: metav1.ConditionFalse,
		Reason: lifecycle.ReasonReconciling, Message: fmt.Sprintf("acting on generation %d", obj.Generation)})
	err = r.Reconcile(rctx, lc, obj)
	switch {
	case err == nil:
		lc.State.Observed = obj.Generation
		lc.State.Step = ""
		lc.SetPhase(ctx, lifecycle.PhaseReady)
		lc.SetCondition(ctx, metav1.Condition{Type: lifecycle.ConditionReady, Status: metav1.ConditionTrue,
			Reason: lifecycle.ReasonReconciled, Message: fmt.Sprintf("generation %d is in place", obj.Generation)})
		return nil
	case lc.State.Deleting || errors.Is(err, ErrDeleted):
		return ErrDeleted
	case temporal.IsCanceledError(err):
		return err
	}
	lc.State.Failed = obj.Generation
	lc.SetPhase(ctx, lifecycle.PhaseFailed)
	lc.SetCondition(ctx, metav1.Condition{Type: lifecycle.ConditionReady, Status: metav1.ConditionFalse,
		Reason: FailureReason(err), Message: FailureMessage(err)})
	workflow.GetLogger(ctx).Warn("reconcile failed", "object", lc.Ref.String(), "generation", obj.Generation, "error", err)
	return err
}

// teardown runs the reconciler's teardown, then removes the finalizer; a failed teardown keeps the
// finalizer and waits for a retry signal, so nothing is lost.
func (lc *Lifecycle) teardown(ctx workflow.Context, r Reconciler) error {
	lc.State.Paused = false
	for {
		lc.SetPhase(ctx, lifecycle.PhaseDeleting)
		lc.SetCondition(ctx, metav1.Condition{Type: lifecycle.ConditionReady, Status: metav1.ConditionFalse,
			Reason: lifecycle.ReasonTearingDown, Message: "deleting what this workflow created"})
		err := r.Teardown(ctx, lc)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return err
		}
		lc.SetCondition(ctx, metav1.Condition{Type: lifecycle.ConditionReady, Status: metav1.ConditionFalse,
			Reason: "TeardownFailed", Message: FailureMessage(err) + " (send the retry signal to try again)"})
		lc.State.Retry = nil
		if err := workflow.Await(ctx, func() bool { return lc.State.Retry != nil }); err != nil {
			return err
		}
		lc.State.Retry = nil
	}
	if err := lc.flush(ctx); err != nil {
		return err
	}
	if err := workflow.ExecuteActivity(lc.kubeCtx(ctx), kube.RemoveFinalizer, lc.Ref).Get(ctx, nil); err != nil {
		return fmt.Errorf("remove finalizer of %s: %w", lc.Ref, err)
	}
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
	lc.State.Step = ""
	lc.SetPhase(dctx, "Cancelled")
	lc.SetCondition(dctx, metav1.Condition{Type: lifecycle.ConditionReady, Status: metav1.ConditionFalse, Reason: "Cancelled", Message: msg})
	lc.dirty = false
	if !lc.opts.NoStatus {
		_ = workflow.ExecuteActivity(lc.kubeCtx(dctx), kube.PatchStatus, lc.statusPatch(dctx)).Get(dctx, nil)
	}
	return cause
}

// Step records the step the reconciler is on, shows it live, and holds while the workflow is paused. It
// returns ErrDeleted when the object is being deleted, so reconcilers stop between steps.
func (lc *Lifecycle) Step(ctx workflow.Context, step string) error {
	if lc.State.Paused {
		prev := lc.State.Phase
		lc.SetPhase(ctx, lifecycle.PhasePaused)
		lc.SetCondition(ctx, metav1.Condition{Type: "Paused", Status: metav1.ConditionTrue, Reason: lifecycle.ReasonPaused,
			Message: "paused before step " + step + "; send the resume signal to go on"})
		if err := workflow.Await(ctx, func() bool { return !lc.State.Paused || lc.State.Deleting }); err != nil {
			return err
		}
		lc.SetCondition(ctx, metav1.Condition{Type: "Paused", Status: metav1.ConditionFalse, Reason: "Resumed", Message: "resumed"})
		lc.SetPhase(ctx, prev)
	}
	if lc.State.Deleting {
		return ErrDeleted
	}
	lc.State.Step = step
	lc.markDirty(ctx)
	return nil
}

// SetPhase sets the phase, upserting the phase search attribute.
func (lc *Lifecycle) SetPhase(ctx workflow.Context, phase string) {
	if lc.State.Phase != phase {
		lc.State.Phase = phase
		_ = workflow.UpsertTypedSearchAttributes(ctx, SAPhase.ValueSet(phase))
	}
	lc.markDirty(ctx)
}

// SetCondition sets a condition by type (its transition time is stamped when its status changes).
func (lc *Lifecycle) SetCondition(ctx workflow.Context, c metav1.Condition) {
	c.ObservedGeneration = lc.State.Desired
	for i, old := range lc.State.Conditions {
		if old.Type == c.Type {
			if old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			} else {
				c.LastTransitionTime = metav1.NewTime(workflow.Now(ctx).Truncate(time.Second))
			}
			lc.State.Conditions[i] = c
			lc.markDirty(ctx)
			return
		}
	}
	c.LastTransitionTime = metav1.NewTime(workflow.Now(ctx).Truncate(time.Second))
	lc.State.Conditions = append(lc.State.Conditions, c)
	lc.markDirty(ctx)
}

// SetField sets a kind-specific status field (nil removes it).
func (lc *Lifecycle) SetField(ctx workflow.Context, key string, value any) error {
	b, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("status field %s: %w", key, err)
	}
	if lc.State.Fields == nil {
		lc.State.Fields = map[string]json.RawMessage{}
	}
	if string(lc.State.Fields[key]) != string(b) {
		lc.State.Fields[key] = b
		lc.markDirty(ctx)
	}
	return nil
}

// Save records the kind's own state (what it created) so it survives continue-as-new.
func (lc *Lifecycle) Save(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	lc.State.Data = b
	return nil
}

// Load reads back what Save recorded; it leaves v alone when nothing was saved.
func (lc *Lifecycle) Load(v any) error {
	if len(lc.State.Data) == 0 {
		return nil
	}
	return json.Unmarshal(lc.State.Data, v)
}

// Gate blocks until a person approves the named gate with the approve update.
func (lc *Lifecycle) Gate(ctx workflow.Context, gate string) error {
	if _, ok := lc.approved[gate]; ok {
		return nil
	}
	lc.gates[gate] = true
	defer delete(lc.gates, gate)
	lc.SetCondition(ctx, metav1.Condition{Type: "Approved", Status: metav1.ConditionFalse, Reason: "AwaitingApproval",
		Message: fmt.Sprintf("waiting for approval of gate %q (temporal workflow update execute --name approve)", gate)})
	if err := workflow.Await(ctx, func() bool { _, ok := lc.approved[gate]; return ok || lc.State.Deleting }); err != nil {
		return err
	}
	if lc.State.Deleting {
		return ErrDeleted
	}
	lc.SetCondition(ctx, metav1.Condition{Type: "Approved", Status: metav1.ConditionTrue, Reason: "Approved",
		Message: fmt.Sprintf("gate %q approved by %s", gate, lc.approved[gate])})
	return nil
}

// Status is what the status query answers.
func (lc *Lifecycle) Status() lifecycle.Status {
	st := lifecycle.Status{
		Object:             lc.Ref.String(),
		Phase:              lc.State.Phase,
		Step:               lc.State.Step,
		Paused:             lc.State.Paused,
		Deleting:           lc.State.Deleting,
		DesiredGeneration:  lc.State.Desired,
		ObservedGeneration: lc.State.Observed,
		Conditions:         lc.State.Conditions,
	}
	if lc.detailer != nil {
		st.Detail = lc.detailer.Detail()
	}
	return st
}

// Retry returns the pending retry request, if the current reconcile was started by one.
func (lc *Lifecycle) Retry() *lifecycle.RetrySignal { return lc.State.Retry }

func (lc *Lifecycle) setupHandlers(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, lifecycle.QueryStatus, func() (lifecycle.Status, error) {
		return lc.Status(), nil
	}); err != nil {
		return fmt.Errorf("status query: %w", err)
	}
	// An update, not a signal, so the caller learns at once whether the gate exists and was opened.
	return workflow.SetUpdateHandlerWithOptions(ctx, lifecycle.UpdateApprove,
		func(ctx workflow.Context, req lifecycle.ApproveRequest) (string, error) {
			by := req.By
			if by == "" {
				by = "an operator"
			}
			lc.approved[req.Gate] = by
			return "approved " + req.Gate, nil
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req lifecycle.ApproveRequest) error {
			if !lc.gates[req.Gate] {
				open := workflow.DeterministicKeys(lc.gates)
				return fmt.Errorf("no gate %q is waiting for approval (waiting: %v)", req.Gate, open)
			}
			return nil
		}})
}

// receiveSignals turns signals into state changes in a workflow goroutine, so they are taken at once even
// while a reconcile runs (a delete cancels it; a pause holds it at its next step).
func (lc *Lifecycle) receiveSignals(ctx workflow.Context) {
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			sel := workflow.NewSelector(ctx)
			lc.addSignalCases(ctx, sel)
			sel.Select(ctx)
			if ctx.Err() != nil {
				return
			}
		}
	})
}

func (lc *Lifecycle) addSignalCases(ctx workflow.Context, sel workflow.Selector) {
	sel.AddReceive(workflow.GetSignalChannel(ctx, lifecycle.SignalSpec), func(c workflow.ReceiveChannel, _ bool) {
		var s lifecycle.SpecSignal
		c.Receive(ctx, &s)
		lc.onSpec(ctx, s)
	})
	sel.AddReceive(workflow.GetSignalChannel(ctx, lifecycle.SignalDelete), func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, nil)
		lc.onDelete(ctx)
	})
	sel.AddReceive(workflow.GetSignalChannel(ctx, lifecycle.SignalPause), func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, nil)
		lc.State.Paused = true
		lc.markDirty(ctx)
	})
	sel.AddReceive(workflow.GetSignalChannel(ctx, lifecycle.SignalResume), func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, nil)
		lc.State.Paused = false
		lc.markDirty(ctx)
	})
	sel.AddReceive(workflow.GetSignalChannel(ctx, SignalRefresh), func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, nil)
		lc.State.Refresh = true
	})
	sel.AddReceive(workflow.GetSignalChannel(ctx, lifecycle.SignalRetry), func(c workflow.ReceiveChannel, _ bool) {
		var s lifecycle.RetrySignal
		c.Receive(ctx, &s)
		lc.State.Retry = &s
	})
}

// drainSignals takes every signal already delivered, so continue-as-new loses none.
func (lc *Lifecycle) drainSignals(ctx workflow.Context) {
	for {
		sel := workflow.NewSelector(ctx)
		lc.addSignalCases(ctx, sel)
		if !sel.HasPending() {
			return
		}
		sel.Select(ctx)
	}
}

func (lc *Lifecycle) onSpec(ctx workflow.Context, s lifecycle.SpecSignal) {
	if s.Generation > lc.State.Desired {
		lc.State.Desired = s.Generation
		lc.markDirty(ctx)
	}
	// A newer generation supersedes a running reconcile of an older one only at the reconciler's next
	// step: reconcilers are idempotent, so finishing the step is safe and cheaper than aborting it.
}

func (lc *Lifecycle) onDelete(ctx workflow.Context) {
	if lc.State.Deleting {
		return
	}
	lc.State.Deleting = true
	if lc.cancelReconcile != nil {
		lc.cancelReconcile()
	}
	lc.markDirty(ctx)
}

func (lc *Lifecycle) markDirty(ctx workflow.Context) {
	lc.dirty = true
	workflow.SetCurrentDetails(ctx, lc.details())
}

func (lc *Lifecycle) details() string {
	s := lc.State
	out := fmt.Sprintf("**%s** · phase **%s**", lc.Ref.String(), s.Phase)
	if s.Step != "" {
		out += " · step `" + s.Step + "`"
	}
	out += fmt.Sprintf(" · generation %d (observed %d)", s.Desired, s.Observed)
	if s.Paused {
		out += " · **paused**"
	}
	if s.Deleting {
		out += " · deleting"
	}
	for _, c := range s.Conditions {
		if c.Type == lifecycle.ConditionReady {
			out += fmt.Sprintf("\n\nReady=%s (%s): %s", c.Status, c.Reason, c.Message)
		}
	}
	return out
}

// statusWriter mirrors the state into the object whenever it changed, one write at a time; writes that
// pile up while one is in flight coalesce into the next.
func (lc *Lifecycle) statusWriter(ctx workflow.Context) {
	for {
		if err := workflow.Await(ctx, func() bool { return lc.dirty }); err != nil {
			return
		}
		lc.dirty = false
		if lc.opts.NoStatus {
			continue
		}
		lc.writing = true
		err := workflow.ExecuteActivity(lc.kubeCtx(ctx), kube.PatchStatus, lc.statusPatch(ctx)).Get(ctx, nil)
		lc.writing = false
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			workflow.GetLogger(ctx).Warn("status write failed; will write again on the next change", "object", lc.Ref.String(), "error", err)
		}
	}
}

// flush waits until the status in the object matches the workflow's state.
func (lc *Lifecycle) flush(ctx workflow.Context) error {
	return workflow.Await(ctx, func() bool { return !lc.dirty && !lc.writing })
}

func (lc *Lifecycle) statusPatch(ctx workflow.Context) activities.StatusPatch {
	info := workflow.GetInfo(ctx)
	step := lc.State.Step
	p := activities.StatusPatch{
		Ref:         lc.Ref,
		Phase:       lc.State.Phase,
		CurrentStep: &step,
		WorkflowID:  info.WorkflowExecution.ID,
		RunID:       info.WorkflowExecution.RunID,
		Conditions:  slices.Clone(lc.State.Conditions),
		Fields:      lc.State.Fields,
	}
	if lc.State.Observed > 0 {
		g := lc.State.Observed
		p.ObservedGeneration = &g
	}
	return p
}

// GetObject reads the workflow's object through the Kubernetes activity.
func (lc *Lifecycle) GetObject(ctx workflow.Context) (*activities.Object, error) {
	var obj activities.Object
	if err := workflow.ExecuteActivity(lc.kubeCtx(ctx), kube.GetObject, lc.Ref).Get(ctx, &obj); err != nil {
		return nil, fmt.Errorf("read %s: %w", lc.Ref, err)
	}
	return &obj, nil
}

// kube is a nil receiver used only to name the Kubernetes activities; the worker registers the real one.
var kube *activities.Kube

// kubeCtx routes an activity to the Kubernetes queue with the retry policy for API calls: quick first
// retries, then backoff, for as long as the API server needs to come back.
func (lc *Lifecycle) kubeCtx(ctx workflow.Context) workflow.Context {
	return KubeActivity(ctx)
}

// KubeActivity sets the activity options for Kubernetes activities.
func KubeActivity(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              lifecycle.KubeQueue,
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: 30 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    500 * time.Millisecond,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
		},
	})
}

// FailureReason is the condition reason for a failure: the application error type when there is one.
func FailureReason(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.Type() != "" {
		return app.Type()
	}
	return lifecycle.ReasonFailed
}

// FailureMessage is the innermost useful message of a failure, without Temporal's wrapping.
func FailureMessage(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	return err.Error()
}
