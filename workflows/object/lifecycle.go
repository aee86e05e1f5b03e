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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/activities"
	"github.com/stackflow/stackflow/api/lifecycle"
)

// Reconciler plugs one kind into the object lifecycle: Run owns signals, pause/resume, retry, the status
// query, status mirroring, deletion and continue-as-new; the reconciler owns what the kind does.
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
	Failed   int64                  `json:"failed,omitempty"`
	Deleting bool                   `json:"deleting,omitempty"`
	Paused   bool                   `json:"paused,omitempty"`
	Retry    *lifecycle.RetrySignal `json:"retry,omitempty"`
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
}

// Options tunes Run for a kind.
type Options struct {
	// NoStatus is set for kinds whose status stackflow does not own (core Nodes).
	NoStatus bool
	// MaxHistory bounds the history of one run before continue-as-new (default 2000 events).
	MaxHistory int
}

// Lifecycle is the running state of one object workflow. Its reconciler reaches it only through its
// methods.
type Lifecycle struct {
	// Ref is the object the workflow serves.
	Ref lifecycle.ObjectRef

	state           State
	opts            Options
	cancelReconcile workflow.CancelFunc
	dirty           bool
	writing         bool
	gates           map[string]bool
	approved        map[string]string
	detailer        Detailer
}

// ErrDeleted ends a reconcile because the object is gone or being deleted.
var ErrDeleted = errors.New("object is being deleted")

// Run runs the lifecycle of one object: it waits for generations, reconciles the newest, mirrors status
// into the object, obeys pause/resume/retry, tears down on delete and removes the finalizer last.
func Run(ctx workflow.Context, in Input, r Reconciler, opts Options) error {
	if opts.MaxHistory == 0 {
		opts.MaxHistory = 2000
	}
	lc := &Lifecycle{Ref: in.ObjectRef, opts: opts, gates: map[string]bool{}, approved: map[string]string{}}
	if d, ok := r.(Detailer); ok {
		lc.detailer = d
	}
	if in.Carry != nil {
		lc.state = *in.Carry
	} else {
		lc.state.Phase = lifecycle.PhasePending
	}
	logger := workflow.GetLogger(ctx)
	if err := workflow.UpsertTypedSearchAttributes(ctx, lifecycle.SAKind.ValueSet(in.Kind), lifecycle.SAObject.ValueSet(in.Key()), lifecycle.SAPhase.ValueSet(lc.state.Phase)); err != nil {
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
			return lc.state.Deleting || lc.needsReconcile() || lc.shouldContinueAsNew(ctx)
		})
		if err != nil {
			return lc.cancelled(ctx, r, err)
		}
		if lc.state.Deleting {
			return lc.teardown(ctx, r)
		}
		if lc.needsReconcile() {
			if err := lc.reconcile(ctx, r); err != nil {
				if temporal.IsCanceledError(err) && ctx.Err() != nil {
					return lc.cancelled(ctx, r, err)
				}
				if errors.Is(err, ErrDeleted) {
					lc.state.Deleting = true
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
		if lc.state.Deleting || lc.needsReconcile() {
			continue
		}
		logger.Info("continue-as-new", "object", in.ObjectRef.String(), "history", workflow.GetInfo(ctx).GetCurrentHistoryLength())
		return workflow.NewContinueAsNewError(ctx, workflow.GetInfo(ctx).WorkflowType.Name, Input{ObjectRef: in.ObjectRef, Carry: &lc.state})
	}
}

func (lc *Lifecycle) needsReconcile() bool {
	s := lc.state
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
	lc.state.Failed = 0
	// A refresh arriving while this reconcile runs asks for another one, so it is cleared before, not after.
	lc.state.Refresh = false
	// The retry request stays readable (lc.Retry) while this reconcile runs, and is spent by it.
	defer func() { lc.state.Retry = nil }()

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
	lc.SetPhase(ctx, lifecycle.PhaseRunning)
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
	case temporal.IsCanceledError(err):
		return err
	}
	lc.state.Failed = obj.Generation
	lc.SetPhase(ctx, lifecycle.PhaseFailed)
	lc.SetCondition(ctx, metav1.Condition{Type: lifecycle.ConditionReady, Status: metav1.ConditionFalse,
		Reason: FailureReason(err), Message: FailureMessage(err)})
	workflow.GetLogger(ctx).Warn("reconcile failed", "object", lc.Ref.String(), "generation", obj.Generation, "error", err)
	return err
}

// teardown runs the reconciler's teardown, then removes the finalizer; a failed teardown keeps the
// finalizer and waits for a retry signal, so nothing is lost.
func (lc *Lifecycle) teardown(ctx workflow.Context, r Reconciler) error {
	lc.state.Paused = false
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
		lc.state.Retry = nil
		if err := workflow.Await(ctx, func() bool { return lc.state.Retry != nil }); err != nil {
			return err
		}
		lc.state.Retry = nil
	}
	if err := lc.flush(ctx); err != nil {
		return err
	}
	if err := workflow.ExecuteActivity(KubeActivity(ctx), kube.RemoveFinalizer, lc.Ref).Get(ctx, nil); err != nil {
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
	lc.state.Step = ""
	lc.SetPhase(dctx, "Cancelled")
	lc.SetCondition(dctx, metav1.Condition{Type: lifecycle.ConditionReady, Status: metav1.ConditionFalse, Reason: "Cancelled", Message: msg})
	lc.dirty = false
	if !lc.opts.NoStatus {
		_ = workflow.ExecuteActivity(KubeActivity(dctx), kube.PatchStatus, lc.statusPatch(dctx)).Get(dctx, nil)
	}
	return cause
}
