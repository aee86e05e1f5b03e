package workflows_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A delete signal that reached a Node's run in the workflow task that closed it (the server refused the
// run's continue-as-new for the new signal, and the retried task continued as new again) was lost: the
// next run waited for ever with its Node deleted. The recorded run (tests/bridge, before the fix) replays
// on the current code only up to that task, where the code now takes the delete and starts the teardown
// (phase Deleting) instead of continuing as new.
func TestDeleteInTheClosingTaskIsTaken(t *testing.T) {
	_, err := replay(t, newReplayer(t), "testdata/regressions/node-delete-in-closing-task.json")
	require.Error(t, err, "the code continues as new where the lost delete did")
	require.Contains(t, err.Error(), "nondeterministic")
	require.Contains(t, err.Error(), "UpsertWorkflowSearchAttributes")
	require.Contains(t, err.Error(), `\"Deleting\"`, "the teardown starts in that task")
}
