package object

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReasonSuperseded is the failure reason of a reconcile whose generation a newer one replaced while it
// waited.
const ReasonSuperseded = "Superseded"

// Superseded ends a reconcile of generation gen that a newer generation replaced while it waited.
func Superseded(gen, desired int64) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("generation %d was superseded by generation %d while waiting", gen, desired), ReasonSuperseded, nil)
}

// MaxWaitDelay bounds the pause between two looks of a wait, whatever the limits' poll interval: what a
// wait waits for is mostly another object's progress (a node's phase 0, a cell, a compute), a look is
// one read, and a chain of such waits (node, compute, cell, Nova) would otherwise add up to a poll
// interval per link after the thing it waits for is done. Timer durations are not matched on replay,
// so runs started with the longer pause replay unchanged.
const MaxWaitDelay = 10 * time.Second

// WaitCheck is one look at what a wait waits for: ready, or why not (a condition reason and message).
type WaitCheck func(ctx workflow.Context) (ready bool, reason, message string, err error)

// WaitUntil waits durably and visibly: it looks, and while not ready shows why in the condition of type
// condType and in the current step, then looks again with backoff (2 s up to the limits' poll interval,
// MaxWaitDelay at most).
// notReady, when set, is asked first each time the look finds it not ready: an error from it ends the
// wait (a preview, which never waits, says what is missing so). The wait ends early when the object is
// deleted (ErrDeleted), a newer generation arrives (Superseded), or the run's history is due
// (ErrContinueAsNew: the next run looks again). waited reports whether it showed a wait.
func WaitUntil(ctx workflow.Context, lc *Lifecycle, gen int64, condType string, check WaitCheck, notReady func(ctx workflow.Context, message string) error) (waited bool, err error) {
	limit := min(lc.Limits().PollInterval, MaxWaitDelay)
	delay := min(2*time.Second, limit)
	shown := ""
	if c, ok := lc.Condition(condType); ok && c.Status == metav1.ConditionFalse {
		// A resumed wait already shows why it waits.
		shown = c.Message
	}
	for {
		ready, reason, msg, err := check(ctx)
		if err != nil {
			return waited, err
		}
		if ready {
			return waited, nil
		}
		if notReady != nil {
			if err := notReady(ctx, msg); err != nil {
				return waited, err
			}
		}
		waited = true
		if msg != shown {
			lc.SetCondition(ctx, metav1.Condition{Type: condType, Status: metav1.ConditionFalse, Reason: reason, Message: msg})
			if err := lc.Step(ctx, "waiting: "+msg); err != nil {
				return waited, err
			}
			shown = msg
		}
		if lc.ContinueAsNewDue(ctx) {
			return waited, ErrContinueAsNew
		}
		if _, err := workflow.AwaitWithTimeout(ctx, delay, func() bool { return lc.Desired() > gen || lc.Deleting() }); err != nil {
			return waited, err
		}
		if lc.Deleting() {
			return waited, ErrDeleted
		}
		if lc.Desired() > gen {
			return waited, Superseded(gen, lc.Desired())
		}
		delay = min(delay*2, limit)
	}
}
