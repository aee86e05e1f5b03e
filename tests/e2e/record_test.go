package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/api/temporalconn"
)

// run builds a history of workflow type kind from events given by type, the first of them the start.
func run(kind string, input *commonpb.Payload, more ...*historypb.HistoryEvent) []*historypb.HistoryEvent {
	evs := []*historypb.HistoryEvent{{EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{
			WorkflowType: &commonpb.WorkflowType{Name: kind}, Input: &commonpb.Payloads{Payloads: []*commonpb.Payload{input}}}}}}
	evs = append(evs, more...)
	for i, ev := range evs {
		ev.EventId = int64(i + 1)
	}
	return evs
}

func ev(t enumspb.EventType) *historypb.HistoryEvent { return &historypb.HistoryEvent{EventType: t} }

func taskFailedWith(cause enumspb.WorkflowTaskFailedCause) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, Attributes: &historypb.HistoryEvent_WorkflowTaskFailedEventAttributes{
		WorkflowTaskFailedEventAttributes: &historypb.WorkflowTaskFailedEventAttributes{Cause: cause, Failure: &failurepb.Failure{Message: "panic: boom"}}}}
}

func signal(name string) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
		Attributes: &historypb.HistoryEvent_WorkflowExecutionSignaledEventAttributes{WorkflowExecutionSignaledEventAttributes: &historypb.WorkflowExecutionSignaledEventAttributes{SignalName: name}}}
}

func activity(name string) *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
		Attributes: &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{ActivityType: &commonpb.ActivityType{Name: name}}}}
}

func retried() *historypb.HistoryEvent {
	return &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED,
		Attributes: &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{Attempt: 3}}}
}

func TestPathTags(t *testing.T) {
	in := &commonpb.Payload{}
	for _, tc := range []struct {
		name   string
		events []*historypb.HistoryEvent
		want   []string
	}{
		{"still open", run("Node", in, signal(lifecycle.SignalSpec)), []string{"open"}},
		{"deleted", run("Node", in, signal(lifecycle.SignalDelete), ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED)), []string{"completed", "delete"}},
		{"failed after retries", run("OpenStackServer", in, activity("CreateServer"), retried(),
			ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED), ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED)), []string{"failed", "activity-failed", "activity-retried"}},
		{"cancelled", run("OpenStackServer", in, ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED),
			ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED)), []string{"canceled", "cancel"}},
		{"retried by a person, continued as new", run("OpenStackDataPlaneNode", in, signal(lifecycle.SignalRetry), signal("edpm-grant"),
			ev(enumspb.EVENT_TYPE_TIMER_STARTED), ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW)), []string{"continued", "edpm-grant", "retry", "timer"}},
		{"children and an update", run("KupenstackConfiguration", in, ev(enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED),
			ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED)), []string{"open", "children", "update"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, pathTags(tc.events))
		})
	}
	resumed := run("Node", in)
	resumed[0].GetWorkflowExecutionStartedEventAttributes().ContinuedExecutionRunId = "previous"
	require.Equal(t, []string{"open", "resumed"}, pathTags(resumed))
}

// Runs that differ only in values have one shape; another activity, signal or event makes another.
func TestShapeOf(t *testing.T) {
	a := run("Node", &commonpb.Payload{Data: []byte(`"a"`)}, activity("GetObject"), signal(lifecycle.SignalDelete))
	b := run("Node", &commonpb.Payload{Data: []byte(`"b"`)}, activity("GetObject"), signal(lifecycle.SignalDelete))
	require.Equal(t, shapeOf(a), shapeOf(b))
	for _, other := range [][]*historypb.HistoryEvent{
		run("Node", &commonpb.Payload{}, activity("PatchStatus"), signal(lifecycle.SignalDelete)),
		run("Node", &commonpb.Payload{}, activity("GetObject"), signal(lifecycle.SignalRetry)),
		run("Node", &commonpb.Payload{}, activity("GetObject"), signal(lifecycle.SignalDelete), ev(enumspb.EVENT_TYPE_TIMER_STARTED)),
	} {
		require.NotEqual(t, shapeOf(a), shapeOf(other))
	}
}

func withChanges(c candidate, changes ...string) candidate {
	c.changes = changes
	return c
}

func TestPick(t *testing.T) {
	c := func(shape string, size int, tags ...string) candidate {
		return candidate{shape: shape, tags: tags, data: make([]byte, size)}
	}
	shapes := func(cs []candidate) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.shape)
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		cands    []candidate
		covered  map[string]bool
		recorded bool
		n        int
		want     []string
	}{
		{"most new paths first, then what still adds one",
			[]candidate{c("small-success", 10, "completed"), c("big-success-delete", 50, "completed", "delete"), c("cancel", 30, "canceled", "cancel"), c("delete-again", 5, "completed", "delete")},
			map[string]bool{}, false, 4, []string{"delete-again", "cancel"}},
		{"at most n", []candidate{c("a", 1, "completed"), c("b", 1, "failed"), c("c", 1, "canceled")}, map[string]bool{}, false, 2, []string{"a", "b"}},
		{"paths another package recorded add nothing", []candidate{c("a", 1, "completed"), c("b", 1, "failed")},
			map[string]bool{"completed": true}, true, 4, []string{"b"}},
		{"nothing new and something recorded: none", []candidate{c("a", 1, "completed")}, map[string]bool{"completed": true}, true, 4, nil},
		{"nothing recorded of the type: its smallest run", []candidate{c("big", 9, "open"), c("small", 2, "open")},
			map[string]bool{"open": true}, false, 4, []string{"small"}},
		{"past n, the runs that still add a change", []candidate{c("a", 1, "canceled"), c("b", 2, "timedout"),
			withChanges(c("c", 3, "completed"), "change:x@1"), withChanges(c("d", 1, "completed"), "change:y@1")},
			map[string]bool{"completed": true, "change:y@1": true}, true, 1, []string{"a", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, shapes(pick(tc.cands, tc.covered, tc.recorded, tc.n)))
		})
	}
}

// A recorded history is decoded (it replays without the key), named by package, type and path, and
// read back by the SDK's JSON loader; a second package's run of the same shape is not written again.
func TestRecorderWritesDecodedHistories(t *testing.T) {
	ctx := context.Background()
	codec := temporalconn.NewCodec(must(temporalconn.NewKeyring(map[string][]byte{"k": make([]byte, 32)})))
	clear := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`{"name":"edpm-0"}`)}
	enc := must(codec.Encode([]*commonpb.Payload{clear}))[0]
	dir := t.TempDir()
	events := func() []*historypb.HistoryEvent {
		return run("OpenStackDataPlaneNode", enc, signal(lifecycle.SignalDelete), ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED))
	}

	r := &Recorder{Dir: dir, Package: "edpm", Codec: codec}
	require.NoError(t, r.Add(ctx, events()))
	// A run whose workflow task panicked is refused, not dropped: it shows a defect.
	panicked := run("OpenStackDataPlaneNode", enc, taskFailedWith(enumspb.WORKFLOW_TASK_FAILED_CAUSE_WORKFLOW_WORKER_UNHANDLED_FAILURE))
	require.ErrorContains(t, r.Add(ctx, panicked), "WorkflowWorkerUnhandledFailure")
	files, size, err := r.Write()
	require.NoError(t, err)
	require.Equal(t, 1, files)

	written, err := filepath.Glob(filepath.Join(dir, "edpm", "OpenStackDataPlaneNode", "completed+delete-*.json"))
	require.NoError(t, err)
	require.Len(t, written, 1)
	data := must(os.ReadFile(written[0]))
	require.EqualValues(t, len(data), size)
	f := must(os.Open(written[0]))
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(t, err)
	require.Equal(t, `{"name":"edpm-0"}`, string(h.Events[0].GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()[0].GetData()))

	again := &Recorder{Dir: dir, Package: "samples", Codec: codec}
	require.NoError(t, again.Add(ctx, events()))
	files, _, err = again.Write()
	require.NoError(t, err)
	require.Zero(t, files, "a shape recorded by another package is not written twice")
}

// A path a test names (RecordPath) tags the runs of that workflow that match, and only those: the run
// that replaced a bastion is kept as a path of its own though its generic tags are common.
func TestRecorderTagsNamedPaths(t *testing.T) {
	ctx := context.Background()
	codec := temporalconn.NewCodec(must(temporalconn.NewKeyring(map[string][]byte{"k": make([]byte, 32)})))
	enc := must(codec.Encode([]*commonpb.Payload{{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`{}`)}}))[0]
	withID := func(id string, evs []*historypb.HistoryEvent) []*historypb.HistoryEvent {
		evs[0].GetWorkflowExecutionStartedEventAttributes().WorkflowId = id
		return evs
	}
	replaced := withID("OpenStackCluster/ns/c1", run("OpenStackCluster", enc, activity("EnsureServer"), activity("DeleteServer"),
		ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW)))
	deleted := withID("OpenStackCluster/ns/c1", run("OpenStackCluster", enc, signal(lifecycle.SignalDelete), activity("DeleteServer"),
		ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED)))
	other := withID("OpenStackCluster/ns/c2", run("OpenStackCluster", enc, activity("EnsureServer"), ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW)))
	dir := t.TempDir()
	r := &Recorder{Dir: dir, Package: "servers", Codec: codec, Paths: []Path{
		{WorkflowID: "OpenStackCluster/ns/c1", Label: "bastion-replaced", Match: All(Scheduled("DeleteServer"), Not(Signaled(lifecycle.SignalDelete)))},
	}}
	for _, h := range [][]*historypb.HistoryEvent{replaced, deleted, other} {
		require.NoError(t, r.Add(ctx, h))
	}
	_, _, err := r.Write()
	require.NoError(t, err)
	names, err := filepath.Glob(filepath.Join(dir, "servers", "OpenStackCluster", "*.json"))
	require.NoError(t, err)
	var tags []string
	for _, n := range names {
		base := filepath.Base(n)
		tags = append(tags, base[:strings.LastIndexByte(base, '-')])
	}
	require.ElementsMatch(t, []string{"continued+bastion-replaced", "completed+delete"}, tags,
		"the replacing run is kept under its label; the delete run, though it deleted a server, is not labelled")
}

func TestRetried(t *testing.T) {
	sched := &historypb.HistoryEvent{EventId: 5, Attributes: &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{
		ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{ActivityType: &commonpb.ActivityType{Name: "EnsureServer"}}}}
	started := func(attempt int32) *historypb.HistoryEvent {
		return &historypb.HistoryEvent{EventId: 6, Attributes: &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{
			ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{ScheduledEventId: 5, Attempt: attempt}}}
	}
	require.True(t, Retried("EnsureServer")([]*historypb.HistoryEvent{sched, started(2)}))
	require.False(t, Retried("EnsureServer")([]*historypb.HistoryEvent{sched, started(1)}))
	require.False(t, Retried("WaitServer")([]*historypb.HistoryEvent{sched, started(2)}))
}

func versionEvent(t *testing.T, id string, version int) *historypb.HistoryEvent {
	t.Helper()
	dc := converter.GetDefaultDataConverter()
	return &historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_MARKER_RECORDED,
		Attributes: &historypb.HistoryEvent_MarkerRecordedEventAttributes{MarkerRecordedEventAttributes: &historypb.MarkerRecordedEventAttributes{
			MarkerName: "Version",
			Details:    map[string]*commonpb.Payloads{"change-id": must(dc.ToPayloads(id)), "version": must(dc.ToPayloads(version))}}}}
}

// A run that adds a GetVersion change at a version no recorded run holds is kept though its path tags
// are all recorded (the branch objects started on this code take); a run of a change recorded already,
// by any package, is not.
func TestRecorderKeepsRunsOfChangesNotRecorded(t *testing.T) {
	ctx := context.Background()
	codec := temporalconn.NewCodec(must(temporalconn.NewKeyring(map[string][]byte{"k": make([]byte, 32)})))
	enc := must(codec.Encode([]*commonpb.Payload{{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`{}`)}}))[0]
	dir := t.TempDir()
	old := run("Nova", enc, activity("EnsureDatabase"), ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW))
	first := &Recorder{Dir: dir, Package: "nova", Codec: codec}
	require.NoError(t, first.Add(ctx, old))
	files, _, err := first.Write()
	require.NoError(t, err)
	require.Equal(t, 1, files)

	// The same tags, a new change: kept. Recorded again by another package: skipped.
	changed := func() []*historypb.HistoryEvent {
		return run("Nova", enc, versionEvent(t, "nova-wait-admin-secret", 1), activity("EnsureDatabase"),
			ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW))
	}
	second := &Recorder{Dir: dir, Package: "samples", Codec: codec}
	require.NoError(t, second.Add(ctx, changed()))
	files, _, err = second.Write()
	require.NoError(t, err)
	require.Equal(t, 1, files, "the run of a change not recorded yet is kept")
	got, err := recordedChanges(dir)
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"change:nova-wait-admin-secret@1": true}, got)

	third := &Recorder{Dir: dir, Package: "edpm", Codec: codec}
	require.NoError(t, third.Add(ctx, changed()))
	files, _, err = third.Write()
	require.NoError(t, err)
	require.Zero(t, files, "a change recorded by another package is not recorded twice")
}
