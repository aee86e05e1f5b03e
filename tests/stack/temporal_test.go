package stack

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/api/lifecycle"
)

// tagged is a workflow that upserts stackflow's search attributes, as every product workflow does.
func tagged(ctx workflow.Context, object string) (string, error) {
	if err := workflow.UpsertTypedSearchAttributes(ctx,
		lifecycle.SAKind.ValueSet("StackTest"), lifecycle.SAObject.ValueSet(object), lifecycle.SAPhase.ValueSet("Ready")); err != nil {
		return "", err
	}
	return "done " + object, nil
}

func TestTemporalWorkflowFoundBySearchAttribute(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: st.TemporalAddress, Namespace: st.TemporalNamespace})
	require.NoError(t, err)
	defer c.Close()

	queue := fmt.Sprintf("stack-test-%d", time.Now().UnixNano())
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflow(tagged)
	require.NoError(t, w.Start())
	defer w.Stop()

	object := fmt.Sprintf("obj-%d", time.Now().UnixNano())
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "stack-test/" + object, TaskQueue: queue}, tagged, object)
	require.NoError(t, err)
	var out string
	require.NoError(t, run.Get(ctx, &out))
	require.Equal(t, "done "+object, out)

	// Visibility is eventually consistent: poll until the run is listed by its custom attribute.
	query := fmt.Sprintf(`StackflowKind = "StackTest" AND StackflowObject = %q AND StackflowPhase = "Ready"`, object)
	require.Eventually(t, func() bool {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query})
		return err == nil && len(resp.Executions) == 1 && resp.Executions[0].Execution.WorkflowId == run.GetID()
	}, time.Minute, 200*time.Millisecond, "workflow not found by %s", query)

	// An unknown value finds nothing: the query really filters.
	resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: `StackflowObject = "no-such-object"`})
	require.NoError(t, err)
	require.Empty(t, resp.Executions)
}
