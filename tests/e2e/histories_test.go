package e2e

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/stackflow/stackflow/api/temporalconn"
)

func TestClearValues(t *testing.T) {
	codec := temporalconn.NewCodec(must(temporalconn.NewKeyring(map[string][]byte{"k": make([]byte, 32)})))
	clear := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`{"address":"198.51.100.10"}`)}
	enc, err := codec.Encode([]*commonpb.Payload{clear})
	require.NoError(t, err)
	started := func(p *commonpb.Payload) *historypb.HistoryEvent {
		return &historypb.HistoryEvent{Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{
			WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{
				Input: &commonpb.Payloads{Payloads: []*commonpb.Payload{p}},
				// Search attributes are indexed, never encoded: not looked at.
				SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{"StackflowObject": {Data: []byte(`"edpm-0"`)}}},
			}}}
	}
	values := []string{"198.51.100.10", "edpm-0"}
	for _, tc := range []struct {
		name string
		ev   *historypb.HistoryEvent
		want []string
	}{
		{"clear input", started(clear), []string{"198.51.100.10"}},
		{"encrypted input", started(enc[0]), nil},
		{"failure message", &historypb.HistoryEvent{Attributes: &historypb.HistoryEvent_ActivityTaskFailedEventAttributes{
			ActivityTaskFailedEventAttributes: &historypb.ActivityTaskFailedEventAttributes{Failure: &failurepb.Failure{Message: "ssh to 198.51.100.10: refused"}}}}, []string{"198.51.100.10"}},
		{"encoded failure", &historypb.HistoryEvent{Attributes: &historypb.HistoryEvent_ActivityTaskFailedEventAttributes{
			ActivityTaskFailedEventAttributes: &historypb.ActivityTaskFailedEventAttributes{Failure: &failurepb.Failure{Message: "Encoded failure", EncodedAttributes: enc[0]}}}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, clearValues(tc.ev, values))
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestScanMeasuresRunsAndFindsWhatBreaksUpgrades(t *testing.T) {
	payload := func(n int) *commonpb.Payloads {
		return &commonpb.Payloads{Payloads: []*commonpb.Payload{{Metadata: map[string][]byte{"encoding": []byte("binary/plain")}, Data: make([]byte, n)}}}
	}
	scheduled := func(n int) *historypb.HistoryEvent {
		return &historypb.HistoryEvent{EventId: 5, EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, Attributes: &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{
			ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{Input: payload(n)}}}
	}
	taskFailed := func(cause enumspb.WorkflowTaskFailedCause) *historypb.HistoryEvent {
		return &historypb.HistoryEvent{EventId: 7, EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, Attributes: &historypb.HistoryEvent_WorkflowTaskFailedEventAttributes{
			WorkflowTaskFailedEventAttributes: &historypb.WorkflowTaskFailedEventAttributes{Cause: cause, Failure: &failurepb.Failure{Message: "[TMPRL1100] nondeterministic workflow"}}}}
	}
	for _, tc := range []struct {
		name              string
		runs              [][]*historypb.HistoryEvent
		largestPayload    int
		longest           int
		oversized, nondet int
		failed, harmless  int
	}{
		{"small runs", [][]*historypb.HistoryEvent{{scheduled(10)}, {scheduled(100), scheduled(20)}}, 100, 2, 0, 0, 0, 0},
		{"a payload of 256 KiB", [][]*historypb.HistoryEvent{{scheduled(10)}, {scheduled(MaxPayload)}}, MaxPayload, 1, 1, 0, 0, 0},
		{"just under 256 KiB", [][]*historypb.HistoryEvent{{scheduled(MaxPayload - 64)}}, MaxPayload - 64, 1, 0, 0, 0, 0},
		{"a panic in workflow code", [][]*historypb.HistoryEvent{{scheduled(1), taskFailed(enumspb.WORKFLOW_TASK_FAILED_CAUSE_WORKFLOW_WORKER_UNHANDLED_FAILURE)}}, 1, 2, 0, 0, 1, 0},
		{"a bad command", [][]*historypb.HistoryEvent{{taskFailed(enumspb.WORKFLOW_TASK_FAILED_CAUSE_BAD_SCHEDULE_ACTIVITY_ATTRIBUTES)}}, 0, 1, 0, 0, 1, 0},
		{"a payload too large", [][]*historypb.HistoryEvent{{taskFailed(enumspb.WORKFLOW_TASK_FAILED_CAUSE_PAYLOADS_TOO_LARGE)}}, 0, 1, 0, 0, 1, 0},
		{"non-determinism", [][]*historypb.HistoryEvent{{scheduled(1)}, {taskFailed(enumspb.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR)}}, 1, 1, 0, 1, 0, 0},
		{"a signal while the run closed (harmless)", [][]*historypb.HistoryEvent{{scheduled(1), taskFailed(enumspb.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND)}}, 1, 2, 0, 0, 0, 1},
		{"a lost sticky cache (harmless)", [][]*historypb.HistoryEvent{{taskFailed(enumspb.WORKFLOW_TASK_FAILED_CAUSE_RESET_STICKY_TASK_QUEUE)}}, 0, 1, 0, 0, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Scan
			for i, r := range tc.runs {
				s.add("wf", fmt.Sprint(i), r, nil)
			}
			require.Equal(t, len(tc.runs), s.Runs)
			// A payload's encoded size holds its data and its metadata.
			require.InDelta(t, tc.largestPayload, s.LargestPayload.Bytes, 64)
			require.Equal(t, tc.longest, s.Longest.Events)
			require.GreaterOrEqual(t, s.Largest.Bytes, s.LargestPayload.Bytes)
			require.Len(t, s.Oversized, tc.oversized)
			require.Len(t, s.Nondeterministic, tc.nondet)
			require.Len(t, s.TaskFailures, tc.failed)
			harmless := 0
			for _, n := range s.Harmless {
				harmless += n
			}
			require.Equal(t, tc.harmless, harmless)
			if tc.oversized+tc.nondet+tc.failed == 0 {
				require.NoError(t, s.Check())
			} else {
				require.Error(t, s.Check())
			}
		})
	}
}

// An activity that panicked fails the scan, whether the panic ended the activity (ActivityTaskFailed)
// or a later attempt succeeded (the panic is then its ActivityTaskStarted's LastFailure); an activity's
// ordinary error does not.
func TestScanFindsActivityPanics(t *testing.T) {
	panicked := &failurepb.Failure{Message: "runtime error: index out of range", FailureInfo: &failurepb.Failure_ApplicationFailureInfo{
		ApplicationFailureInfo: &failurepb.ApplicationFailureInfo{Type: "PanicError"}}}
	ordinary := &failurepb.Failure{Message: "409 conflict", FailureInfo: &failurepb.Failure_ApplicationFailureInfo{
		ApplicationFailureInfo: &failurepb.ApplicationFailureInfo{Type: "ErrUnexpectedResponseCode"}}}
	wrapped := &failurepb.Failure{Message: "activity error", Cause: panicked}
	failed := func(f *failurepb.Failure) *historypb.HistoryEvent {
		return &historypb.HistoryEvent{EventId: 9, EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED, Attributes: &historypb.HistoryEvent_ActivityTaskFailedEventAttributes{
			ActivityTaskFailedEventAttributes: &historypb.ActivityTaskFailedEventAttributes{Failure: f}}}
	}
	startedAfter := func(f *failurepb.Failure) *historypb.HistoryEvent {
		return &historypb.HistoryEvent{EventId: 6, EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED, Attributes: &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{
			ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{Attempt: 2, LastFailure: f}}}
	}
	for _, tc := range []struct {
		name   string
		event  *historypb.HistoryEvent
		panics int
	}{
		{"failed with a panic", failed(panicked), 1},
		{"failed with a panic as the cause", failed(wrapped), 1},
		{"retried after a panic", startedAfter(panicked), 1},
		{"failed with an error", failed(ordinary), 0},
		{"retried after an error", startedAfter(ordinary), 0},
		{"started the first time", startedAfter(nil), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Scan
			s.add("wf", "run", []*historypb.HistoryEvent{tc.event}, nil)
			require.Len(t, s.ActivityPanics, tc.panics)
			if tc.panics > 0 {
				require.ErrorContains(t, s.Check(), "activity panicked")
			} else {
				require.NoError(t, s.Check())
			}
		})
	}
}
