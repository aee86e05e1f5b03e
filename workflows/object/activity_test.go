package object_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/api/lifecycle"
	. "github.com/stackflow/stackflow/workflows/object"
)

// TestFailureReasonOfActivityErrors: the reason a workflow reports for an activity's failure, through
// the SDK's own conversion of what the activity returned. A classified error keeps its type; an
// unclassified one is Failed, never the name of a Go type (seen as reason "wrapError" on a node).
func TestFailureReasonOfActivityErrors(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"classified", temporal.NewNonRetryableApplicationError("chart does not render", "HelmRenderFailed", nil), "HelmRenderFailed"},
		{"classified and wrapped", fmt.Errorf("memcached: %w", temporal.NewNonRetryableApplicationError("no", "HelmRenderFailed", nil)), "HelmRenderFailed"},
		{"fmt.Errorf", fmt.Errorf("compute endpoint of ns/clouds: %w", io.EOF), lifecycle.ReasonFailed},
		{"errors.New", errors.New("no compute API in the catalog"), lifecycle.ReasonFailed},
		{"errors.Join", errors.Join(io.EOF, io.ErrUnexpectedEOF), lifecycle.ReasonFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.RegisterActivityWithOptions(func(context.Context) error { return c.err }, activity.RegisterOptions{Name: "Fail"})
			env.RegisterWorkflowWithOptions(func(ctx workflow.Context) (string, error) {
				ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
					RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
				err := workflow.ExecuteActivity(ctx, "Fail").Get(ctx, nil)
				require.Error(t, err)
				return FailureReason(err), nil
			}, workflow.RegisterOptions{Name: "Reason"})
			env.ExecuteWorkflow("Reason")
			require.NoError(t, env.GetWorkflowError())
			var got string
			require.NoError(t, env.GetWorkflowResult(&got))
			require.Equal(t, c.want, got)
		})
	}
}
