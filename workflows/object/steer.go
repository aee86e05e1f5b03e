package object

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/api/lifecycle"
)

// This file is how a person (and other workflows) steer an object workflow, and what its reconciler may
// ask of that: the step it is on, pause, the generation it should act on, deletion, retry and gates.

// Step records the step the reconciler is on, shows it live, and holds while the workflow is paused. It
// returns ErrDeleted when the object is being deleted, so reconcilers stop between steps.
func (lc *Lifecycle) Step(ctx workflow.Context, step string) error {
	if lc.state.Paused {
		prev := lc.state.Phase
		lc.SetPhase(ctx, lifecycle.PhasePaused)
		lc.SetCondition(ctx, metav1.Condition{Type: lifecycle.ConditionPaused, Status: metav1.ConditionTrue, Reason: lifecycle.ReasonPaused,
			Message: "paused before step " + step + "; send the resume signal to go on"})
		if err := workflow.Await(ctx, func() bool { return !lc.state.Paused || lc.state.Deleting }); err != nil {
			return err
		}
		lc.SetCondition(ctx, metav1.Condition{Type: lifecycle.ConditionPaused, Status: metav1.ConditionFalse, Reason: "Resumed", Message: "resumed"})
		lc.SetPhase(ctx, prev)
	}
	if lc.state.Deleting {
		return ErrDeleted
	}
	lc.ShowStep(ctx, step)
	return nil
}

// ShowStep records and shows what the workflow is doing without holding for a pause or refusing during
// deletion: for progress summaries and teardown steps.
func (lc *Lifecycle) ShowStep(ctx workflow.Context, step string) {
	if lc.state.Step != step {
		lc.state.Step = step
		lc.markDirty(ctx)
	}
}

// Paused reports whether a person paused the workflow (it holds at its next Step).
func (lc *Lifecycle) Paused() bool { return lc.state.Paused }

// Deleting reports whether the object is being deleted.
func (lc *Lifecycle) Deleting() bool { return lc.state.Deleting }

// Desired is the newest generation the workflow has been told of; a reconcile of an older generation is
// superseded once it is higher.
func (lc *Lifecycle) Desired() int64 { return lc.state.Desired }

// Options are the options the workflow runs with.
func (lc *Lifecycle) Options() Options { return lc.opts }

// Limits are the limits this run recorded (see Limits).
func (lc *Lifecycle) Limits() Limits { return lc.limits }

// RefreshAnswered drops the refresh requests that arrived while the running reconcile ran, for a
// reconciler that read and acted on what they announced (the data plane reads its nodes' admission
// requests itself); refreshes arriving after this call still count.
func (lc *Lifecycle) RefreshAnswered() { lc.state.Refresh = false }

// Retry returns the pending retry request, if the current reconcile was started by one.
func (lc *Lifecycle) Retry() *lifecycle.RetrySignal { return lc.state.Retry }

// Gate blocks until a person approves the named gate with the approve update.
func (lc *Lifecycle) Gate(ctx workflow.Context, gate string) error {
	if _, ok := lc.approved[gate]; ok {
		return nil
	}
	lc.gates[gate] = true
	defer delete(lc.gates, gate)
	lc.SetCondition(ctx, metav1.Condition{Type: "Approved", Status: metav1.ConditionFalse, Reason: "AwaitingApproval",
		Message: fmt.Sprintf("waiting for approval of gate %q (temporal workflow update execute --name approve)", gate)})
	if err := workflow.Await(ctx, func() bool { _, ok := lc.approved[gate]; return ok || lc.state.Deleting }); err != nil {
		return err
	}
	if lc.state.Deleting {
		return ErrDeleted
	}
	lc.SetCondition(ctx, metav1.Condition{Type: "Approved", Status: metav1.ConditionTrue, Reason: "Approved",
		Message: fmt.Sprintf("gate %q approved by %s", gate, lc.approved[gate])})
	return nil
}

// ApproveOr waits, unlike Gate also in a teardown (removing a compute may need a person's word), until
// a person approves gate or done reports true, asking done every poll. It returns who approved, or ""
// when done ended the wait.
func (lc *Lifecycle) ApproveOr(ctx workflow.Context, gate string, poll time.Duration, done func(ctx workflow.Context) (bool, error)) (string, error) {
	lc.gates[gate] = true
	defer delete(lc.gates, gate)
	for {
		if by, ok := lc.approved[gate]; ok {
			return by, nil
		}
		ok, err := done(ctx)
		if err != nil || ok {
			return "", err
		}
		if _, err := workflow.AwaitWithTimeout(ctx, poll, func() bool { _, ok := lc.approved[gate]; return ok }); err != nil {
			return "", err
		}
	}
}

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

// setupPreview serves the preview update. An update, not a query: a preview runs activities.
func (lc *Lifecycle) setupPreview(ctx workflow.Context, p Previewer) error {
	return workflow.SetUpdateHandlerWithOptions(ctx, lifecycle.UpdatePreview,
		func(ctx workflow.Context) (any, error) { return p.Preview(ctx, lc) },
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context) error {
			if lc.state.Deleting {
				return fmt.Errorf("%s is being deleted: nothing to preview", lc.Ref)
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
		var s lifecycle.DeleteSignal
		c.Receive(ctx, &s)
		lc.onDelete(ctx, s)
	})
	sel.AddReceive(workflow.GetSignalChannel(ctx, lifecycle.SignalPause), func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, nil)
		if !lc.state.Paused {
			lc.state.Paused = true
			lc.markDirty(ctx)
		}
	})
	sel.AddReceive(workflow.GetSignalChannel(ctx, lifecycle.SignalResume), func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, nil)
		if lc.state.Paused {
			lc.state.Paused = false
			lc.markDirty(ctx)
		}
	})
	sel.AddReceive(workflow.GetSignalChannel(ctx, lifecycle.SignalRefresh), func(c workflow.ReceiveChannel, _ bool) {
		c.Receive(ctx, nil)
		lc.state.Refresh = true
	})
	sel.AddReceive(workflow.GetSignalChannel(ctx, lifecycle.SignalRetry), func(c workflow.ReceiveChannel, _ bool) {
		var s lifecycle.RetrySignal
		c.Receive(ctx, &s)
		lc.state.Retry = &s
	})
}

// drainSignals takes every signal already delivered, so continue-as-new loses none. It first yields once:
// a signal delivered in this workflow task to the receiveSignals goroutine, blocked in its Select, is
// handed to that goroutine and is in no channel, so only letting it run takes it (a delete arriving as
// the run closed was lost so, the run continuing as new with its object deleted).
func (lc *Lifecycle) drainSignals(ctx workflow.Context) {
	yielded := false
	_ = workflow.Await(ctx, func() bool {
		done := yielded
		yielded = true
		return done
	})
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
	if s.Generation > lc.state.Desired {
		lc.state.Desired = s.Generation
		lc.markDirty(ctx)
	}
	// A newer generation supersedes a running reconcile of an older one only at the reconciler's next
	// step: reconcilers are idempotent, so finishing the step is safe and cheaper than aborting it.
}

func (lc *Lifecycle) onDelete(ctx workflow.Context, s lifecycle.DeleteSignal) {
	if s.Gone && !lc.state.Gone {
		lc.state.Gone = true
		if lc.cancelTeardown != nil {
			lc.cancelTeardown()
		}
	}
	if lc.state.Deleting {
		return
	}
	lc.state.Deleting = true
	if lc.cancelReconcile != nil {
		lc.cancelReconcile()
	}
	lc.markDirty(ctx)
}
