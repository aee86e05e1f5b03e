package nova

import (
	"context"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/tests/e2e"
)

// killDuring kills the worker (kill -9, every queue's process) once the workflow of ref has an activity
// of type activity in flight (scheduled or running), and starts it again; the log says which. The
// workflow must finish as if nothing happened: the activity is retried (at once
// when it was only scheduled, after its start-to-close timeout when the dead worker held it).
func killDuring(t *testing.T, worker *e2e.Proc, ref lifecycle.ObjectRef, activity string, within time.Duration) {
	t.Helper()
	ctx := context.Background()
	id := lifecycle.WorkflowID(ref)
	deadline := time.Now().Add(within)
	for {
		if d, err := env.Temporal.DescribeWorkflowExecution(ctx, id, ""); err == nil {
			for _, a := range d.GetPendingActivities() {
				if a.GetActivityType().GetName() != activity {
					continue
				}
				state := a.GetState()
				if state == enumspb.PENDING_ACTIVITY_STATE_SCHEDULED || state == enumspb.PENDING_ACTIVITY_STATE_STARTED {
					worker.Kill9()
					t.Logf("kill -9 of the worker while %s of %s was %s (attempt %d)", activity, ref, state, a.GetAttempt())
					time.Sleep(time.Second)
					worker.Start()
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s in flight in %s's workflow within %s", activity, ref, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
