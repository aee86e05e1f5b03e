package workflows_test

import (
	"log/slog"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// A delete signal that reached a Node's run in the workflow task that closed it (the server refused the
// run's continue-as-new for the new signal, and the retried task continued as new again) was lost: the
// next run waited for ever with its Node deleted. The recorded run (tests/bridge, before the fix) replays
// on the current code only up to that task, where the code now takes the delete and starts the teardown
// (phase Deleting) instead of continuing as new.
func TestDeleteInTheClosingTaskIsTaken(t *testing.T) {
	f, err := os.Open("testdata/regressions/node-delete-in-closing-task.json")
	require.NoError(t, err)
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(t, err)
	start := h.Events[0].GetWorkflowExecutionStartedEventAttributes()
	orig := workflow.Execution{ID: start.GetWorkflowId(), RunID: start.GetOriginalExecutionRunId()}
	quiet := log.NewStructuredLogger(slog.New(slog.DiscardHandler))
	err = newReplayer(t).ReplayWorkflowHistoryWithOptions(quiet, h, worker.ReplayWorkflowHistoryOptions{OriginalExecution: orig})
	require.Error(t, err, "the code continues as new where the lost delete did")
	require.Contains(t, err.Error(), "nondeterministic")
	require.Contains(t, err.Error(), "UpsertWorkflowSearchAttributes")
	require.Contains(t, err.Error(), `\"Deleting\"`, "the teardown starts in that task")
}
