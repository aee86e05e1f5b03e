package bridge

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/tests/e2e"
)

// Two bridges share the cluster and the Temporal namespace, one with a watch filter and one without, as
// two installations do. Each object is served by one of them only: the one labelled with the filter by
// the filtered bridge, the other by the unfiltered one. Every start and every signal of an object's
// workflow, through a spec edit and the deletion, comes from that bridge.
func TestWatchFilterSplitsObjectsBetweenBridges(t *testing.T) {
	startWorker(t, env.Run+"-w-filter")
	filter := env.Run + "-tenant"
	bridges := map[string]string{ // object → identity of the bridge that must serve it
		env.Run + "-plain":    env.Run + "-b-plain",
		env.Run + "-filtered": env.Run + "-b-filtered",
	}
	env.StartBridge(t, e2e.BridgeOptions{Identity: env.Run + "-b-plain", Kinds: "OpenstackNode", Lease: "e2e-" + env.Run + "-plain", Workers: 4})
	env.StartBridge(t, e2e.BridgeOptions{Identity: env.Run + "-b-filtered", Kinds: "OpenstackNode", Lease: "e2e-" + env.Run + "-filtered",
		Workers: 4, WatchFilter: filter})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	ids := map[string]string{}
	for name := range bridges {
		t.Cleanup(func() { env.ForceDelete(osknodes, "", name) })
		u := newOpenstackNode(name, map[string]any{"type": "control"})
		if name == env.Run+"-filtered" {
			u.SetLabels(map[string]string{"stackflow.io/test-run": env.Run, lifecycle.WatchFilterLabel: filter})
		}
		created, err := env.Dyn.Resource(osknodes).Create(ctx, u, metav1.CreateOptions{})
		require.NoError(t, err)
		ids[name] = lifecycle.WorkflowID(e2e.Ref("OpenstackNode", osknodes, created))
	}
	for name := range bridges {
		waitObserved(t, ctx, name, 1, "control")
		_, err := env.Dyn.Resource(osknodes).Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"type":"compute"}}`), metav1.PatchOptions{})
		require.NoError(t, err)
	}
	for name := range bridges {
		waitObserved(t, ctx, name, 2, "compute")
	}
	names := make([]string, 0, len(bridges))
	for name := range bridges {
		names = append(names, name)
	}
	deleteAndWait(t, osknodes, names, 2*time.Minute)

	for name, bridge := range bridges {
		starts, signals := callers(t, ctx, ids[name])
		want := "stackflow-bridge/" + bridge
		require.Equal(t, []string{want}, starts, "%s: who started its workflow", name)
		// A spec signal per generation and the delete signal, all from its bridge (the other bridge would
		// have signalled each generation once more).
		require.GreaterOrEqual(t, len(signals), 3, "%s: the signals of its workflow: %v", name, signals)
		for _, s := range signals {
			require.Equal(t, want, s, "%s: a signal of its workflow came from another bridge: %v", name, signals)
		}
	}
}

// callers follows the chain of runs of workflow id from its first run to its last and returns the
// identities that started it and that sent each signal.
func callers(t *testing.T, ctx context.Context, id string) (starts, signals []string) {
	t.Helper()
	d, err := env.Temporal.DescribeWorkflowExecution(ctx, id, "")
	require.NoError(t, err)
	run := d.WorkflowExecutionInfo.GetFirstRunId()
	for first := true; run != ""; first = false {
		it := env.Temporal.GetWorkflowHistory(ctx, id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		next := ""
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(t, err)
			switch a := ev.Attributes.(type) {
			case *historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes:
				if first {
					starts = append(starts, a.WorkflowExecutionStartedEventAttributes.GetIdentity())
				}
			case *historypb.HistoryEvent_WorkflowExecutionSignaledEventAttributes:
				signals = append(signals, a.WorkflowExecutionSignaledEventAttributes.GetIdentity())
			case *historypb.HistoryEvent_WorkflowExecutionContinuedAsNewEventAttributes:
				next = a.WorkflowExecutionContinuedAsNewEventAttributes.GetNewExecutionRunId()
			}
		}
		run = next
	}
	return starts, signals
}
