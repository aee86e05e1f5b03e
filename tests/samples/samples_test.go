// Package samples proves the first thing a user meets: `make run`'s samples (exactly deploy/samples)
// converge on the local stack with the real bridge and worker, an idle system then stays idle (no
// workflow makes progress while nothing changes, though kwok's Node heartbeats keep flowing), and
// deleting the samples tears everything down.
package samples

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/bridge"
	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/tests/e2e"
)

var env *e2e.Env

func TestMain(m *testing.M) {
	os.Exit(mainErr(m))
}

func mainErr(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var err error
	env, err = e2e.Setup(ctx, e2e.Config{TemporalNamespace: "stackflow-e2e-samples", RunPrefix: "sm",
		Components: local.AllComponents, HostCount: 2})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Close()
	return env.RunTests(m)
}

// IdleWindow is how long the system is watched while nothing changes. Idle object workflows have no
// timer and run no activity: their documented resync is none, so in this window no open workflow may
// add a single event to its history.
const IdleWindow = 3 * time.Minute

func TestSamplesConvergeAndStayIdle(t *testing.T) {
	ctx := context.Background()
	objs := samplesOf(t)
	// A stack that served `make run` before holds the same objects: start from none.
	removeLeftovers(t, objs)

	env.StartBridge(t, e2e.BridgeOptions{Identity: env.Run + "-bridge"})
	env.StartWorker(t, e2e.WorkerOptions{Identity: env.Run + "-worker"})

	start := time.Now()
	applied, err := env.Stack.ApplySamples(ctx)
	require.NoError(t, err, "apply deploy/samples")
	require.Equal(t, len(objs), len(applied))

	wctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	states, err := local.WaitSamples(wctx, env.Dyn, applied, bridge.IsServed, testWriter{t}, 5*time.Second)
	cancel()
	require.NoError(t, err, "every sample Ready:\n%s", table(states))
	t.Logf("all %d samples Ready %s after they were applied", len(applied), time.Since(start).Round(time.Second))

	t.Run("an idle system stays idle", func(t *testing.T) {
		nodeRV := nodeVersions(t)
		before := openHistories(t)
		require.NotEmpty(t, before)
		time.Sleep(IdleWindow)
		after := openHistories(t)
		var grew []string
		for id, b := range before {
			a, ok := after[id]
			switch {
			case !ok:
				grew = append(grew, fmt.Sprintf("%s: closed while idle", id))
			case a.run != b.run:
				grew = append(grew, fmt.Sprintf("%s: new run (%s → %s) while idle", id, b.run, a.run))
			case a.length != b.length:
				grew = append(grew, fmt.Sprintf("%s: %d → %d events: %s", id, b.length, a.length, newEvents(t, id, a.run, b.length)))
			}
		}
		for id := range after {
			if _, ok := before[id]; !ok {
				grew = append(grew, fmt.Sprintf("%s: started while idle", id))
			}
		}
		require.Empty(t, grew, "workflows made progress during %s with nothing to do", IdleWindow)
		// The window saw the Nodes change (kwok heartbeats), which must not have woken anything.
		heartbeats := 0
		for name, rv := range nodeVersions(t) {
			if rv != nodeRV[name] {
				heartbeats++
			}
		}
		require.Positive(t, heartbeats, "no Node changed during the idle window: the test saw no heartbeat")
		t.Logf("%d open workflows idle for %s (0 events added) while %d Nodes changed", len(before), IdleWindow, heartbeats)
	})

	t.Run("deleting the samples tears everything down", func(t *testing.T) {
		start := time.Now()
		dctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		// All at once, as `kubectl delete -f deploy/samples` does: each workflow waits for what it needs
		// to go first (the Nova for the computes in its cells), so no order is required.
		for _, o := range applied {
			err := env.Dyn.Resource(o.GVR).Namespace(o.Namespace).Delete(dctx, o.Name, metav1.DeleteOptions{})
			require.True(t, err == nil || apierrors.IsNotFound(err), "delete %s %s: %v", o.Kind, o.Name, err)
		}
		for _, o := range applied {
			require.NoError(t, env.DeleteAndWait(dctx, o.GVR, o.Namespace, o.Name), "%s %s torn down", o.Kind, o.Name)
		}
		t.Logf("all samples deleted and torn down in %s", time.Since(start).Round(time.Second))
	})
}

// samplesOf reads deploy/samples without applying them.
func samplesOf(t *testing.T) []local.Applied {
	t.Helper()
	objs, err := env.Stack.SampleObjects(context.Background())
	require.NoError(t, err)
	require.NotEmpty(t, objs)
	return objs
}

// removeLeftovers deletes sample objects an earlier user of the stack left, finalizers included.
func removeLeftovers(t *testing.T, objs []local.Applied) {
	t.Helper()
	for i := len(objs) - 1; i >= 0; i-- {
		o := objs[i]
		env.ForceDelete(o.GVR, o.Namespace, o.Name)
	}
}

type history struct {
	run    string
	length int64
}

// openHistories returns the run and history length of every open workflow of the run's namespace.
func openHistories(t *testing.T) map[string]history {
	t.Helper()
	ctx := context.Background()
	out := map[string]history{}
	var token []byte
	for {
		resp, err := env.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: env.TemporalNamespace, Query: "ExecutionStatus = 'Running'", PageSize: 1000, NextPageToken: token,
		})
		require.NoError(t, err)
		for _, x := range resp.Executions {
			d, err := env.Temporal.DescribeWorkflowExecution(ctx, x.Execution.WorkflowId, x.Execution.RunId)
			require.NoError(t, err)
			if d.WorkflowExecutionInfo.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				continue
			}
			out[x.Execution.WorkflowId] = history{run: x.Execution.RunId, length: d.WorkflowExecutionInfo.HistoryLength}
		}
		token = resp.NextPageToken
		if len(token) == 0 {
			return out
		}
	}
}

// newEvents names the events a history gained after the first n, for the failure message.
func newEvents(t *testing.T, id, run string, n int64) string {
	it := env.Temporal.GetWorkflowHistory(context.Background(), id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var names []string
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return err.Error()
		}
		if ev.EventId > n {
			names = append(names, strings.TrimPrefix(ev.EventType.String(), "EVENT_TYPE_"))
		}
	}
	if len(names) > 12 {
		names = append(names[:12], "…")
	}
	return strings.Join(names, ", ")
}

// nodeVersions returns every Kubernetes Node's resourceVersion.
func nodeVersions(t *testing.T) map[string]string {
	t.Helper()
	l, err := env.Kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string]string{}
	for _, n := range l.Items {
		out[n.Name] = n.ResourceVersion
	}
	return out
}

func table(states []local.SampleState) string {
	var b strings.Builder
	local.WriteSampleStates(&b, states)
	return b.String()
}

// testWriter logs the live table into the test's output.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
