package stack

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/api/temporalconn"
	"github.com/stackflow/stackflow/tests/e2e"
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

// Through the TLS front (mutual TLS and an API key) with the payload codec, as stackflow's processes
// connect: the workflow runs, what Temporal stores is encrypted, and the codec endpoint the UI uses
// shows it decrypted. Each missing or wrong credential is refused with a message that names it.
func TestTemporalTLSFrontAndCodec(t *testing.T) {
	require.NotNil(t, st.TemporalTLS, "the stack publishes no TLS front")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	good := st.TemporalOptions(st.TemporalNamespace)
	opts, err := good.ClientOptions()
	require.NoError(t, err)
	require.NoError(t, good.Preflight(ctx))
	c, err := client.DialContext(ctx, opts)
	require.NoError(t, err)
	defer c.Close()

	queue := fmt.Sprintf("stack-tls-%d", time.Now().UnixNano())
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflow(tagged)
	require.NoError(t, w.Start())
	defer w.Stop()
	object := fmt.Sprintf("host-198.51.100.250-%d", time.Now().UnixNano())
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "stack-tls/" + object[len(object)-6:], TaskQueue: queue}, tagged, object)
	require.NoError(t, err)
	var out string
	require.NoError(t, run.Get(ctx, &out))
	require.Equal(t, "done "+object, out)

	// Read back without the codec, straight from the dev server: the input is not readable.
	plain, err := client.DialContext(ctx, client.Options{HostPort: st.TemporalAddress, Namespace: st.TemporalNamespace})
	require.NoError(t, err)
	defer plain.Close()
	ev, err := plain.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, 0).Next()
	require.NoError(t, err)
	input := ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0]
	require.NotContains(t, string(input.GetData()), object)
	require.Equal(t, temporalconn.EncodingEncrypted, string(input.GetMetadata()[temporalconn.MetadataEncoding]))
	found, _, err := e2e.ScanHistories(ctx, plain, st.TemporalNamespace, time.Now().Add(-time.Minute), []string{object})
	require.NoError(t, err)
	require.Empty(t, found)

	// The codec endpoint (what the UI, started with --ui-codec-endpoint, calls from the browser) decrypts it.
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: []*commonpb.Payload{input}})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, st.CodecEndpoint+"/decode", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Namespace", st.TemporalNamespace)
	req.Header.Set("Origin", st.TemporalUI)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, st.TemporalUI, resp.Header.Get("Access-Control-Allow-Origin"), "the UI's origin may call it")
	decoded, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var dp commonpb.Payloads
	require.NoError(t, protojson.Unmarshal(decoded, &dp))
	require.Contains(t, string(dp.Payloads[0].GetData()), object)

	// Refusals, each naming its cause.
	for _, tc := range []struct {
		name   string
		change func(*temporalconn.Options)
		want   string
	}{
		{"wrong CA", func(o *temporalconn.Options) { o.TLS.CAFile = st.TemporalTLS.WrongCA }, "did not sign"},
		{"no client certificate", func(o *temporalconn.Options) { o.TLS.CertFile, o.TLS.KeyFile = "", "" }, "client certificate"},
		{"wrong server name", func(o *temporalconn.Options) { o.TLS.ServerName = "elsewhere.test" }, "--temporal-tls-server-name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := good
			tc.change(&o)
			err := o.Preflight(ctx)
			require.ErrorIs(t, err, temporalconn.ErrTLS)
			require.ErrorContains(t, err, tc.want)
		})
	}
	t.Run("no API key", func(t *testing.T) {
		o := good
		o.APIKeyFile = ""
		opts, err := o.ClientOptions()
		require.NoError(t, err)
		_, err = client.DialContext(ctx, opts)
		require.ErrorContains(t, err, "API key")
	})
}

// panics is workflow code with a defect: it panics on its first task, as a nil map write or an index out
// of range would.
func panics(workflow.Context) error { panic("stack test: a defect in workflow code") }

// The end-of-run history scan every e2e package runs fails on a real workflow panic (the Go SDK reports
// it as a failed workflow task, WORKFLOW_WORKER_UNHANDLED_FAILURE, and retries the task for ever), not
// only on non-determinism: a panic must not pass a package.
func TestHistoryScanFailsOnAWorkflowPanic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: st.TemporalAddress, Namespace: st.TemporalNamespace})
	require.NoError(t, err)
	defer c.Close()
	queue := fmt.Sprintf("stack-panic-%d", time.Now().UnixNano())
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflow(panics)
	require.NoError(t, w.Start())
	defer w.Stop()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, panics)
	require.NoError(t, err)
	defer func() { _ = c.TerminateWorkflow(context.Background(), run.GetID(), "", "test done") }()

	var scan e2e.Scan
	require.Eventually(t, func() bool {
		scan, err = e2e.ScanWorkflow(ctx, c, st.TemporalNamespace, run.GetID())
		return err == nil && scan.Check() != nil
	}, time.Minute, 200*time.Millisecond, "the scan never failed on the panicking run (last: %+v, %v)", scan, err)
	require.Len(t, scan.TaskFailures, 1)
	require.Contains(t, scan.TaskFailures[0], "WorkflowWorkerUnhandledFailure")
	require.Contains(t, scan.TaskFailures[0], "a defect in workflow code")
	require.Empty(t, scan.Nondeterministic, "a panic is not non-determinism: only the broader check catches it")
}
