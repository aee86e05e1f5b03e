package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/api/temporalconn"
)

// ClearText is a forbidden value found readable in a workflow history.
type ClearText struct {
	WorkflowID, RunID string
	EventID           int64
	EventType         string
	Value             string
}

func (c ClearText) String() string {
	return fmt.Sprintf("%q in clear in %s (run %s) event %d %s", c.Value, c.WorkflowID, c.RunID, c.EventID, c.EventType)
}

// ScanHistories reads the whole history of every workflow run in namespace started at or after since and
// reports where a value appears readable in what stackflow writes into Temporal: every payload (inputs,
// results, signals, heartbeats, memos, queries' user metadata…) and every failure's message and stack
// trace. Search attributes and IDs are not payloads and are not looked at. It returns the findings and
// the number of runs scanned.
func ScanHistories(ctx context.Context, c client.Client, namespace string, since time.Time, values []string) ([]ClearText, int, error) {
	s, err := scanHistories(ctx, c, namespace, sinceQuery(since), values, nil)
	return s.Found, s.Runs, err
}

// ScanNamespace scans every run of namespace started at or after since (see Scan), values being the
// ones no payload may show: the package's end-of-run scan for a Temporal namespace of a test's own.
func ScanNamespace(ctx context.Context, c client.Client, namespace string, since time.Time, values []string) (Scan, error) {
	return scanHistories(ctx, c, namespace, sinceQuery(since), values, nil)
}

// ScanWorkflow scans every run of one workflow (see Scan): what the package's end-of-run scan finds in it.
func ScanWorkflow(ctx context.Context, c client.Client, namespace, workflowID string) (Scan, error) {
	return scanHistories(ctx, c, namespace, fmt.Sprintf("WorkflowId = %q", workflowID), nil, nil)
}

func sinceQuery(since time.Time) string {
	return fmt.Sprintf("StartTime >= %q", since.UTC().Format(time.RFC3339))
}

// ScanRuns scans every run the package started so far (see Scan): sizes, payloads, non-determinism
// errors and the Forbidden values.
func (e *Env) ScanRuns(ctx context.Context) (Scan, error) {
	return scanHistories(ctx, e.Temporal, e.TemporalNamespace, sinceQuery(e.started), e.Forbidden(), nil)
}

// MaxPayload is the size every payload stackflow writes into Temporal stays under (encoded, as the
// server stores it): far below the server's limit (2 MiB), so no object's spec, values or diff can
// reach it.
const MaxPayload = 256 << 10

// Scan is what one pass over a namespace's histories found.
type Scan struct {
	// Found are the forbidden values readable in clear.
	Found []ClearText
	// Runs is the number of runs read.
	Runs int
	// Largest is the largest run by bytes (the sum of its events' encoded sizes), LongestEvents the
	// largest by events; LargestPayload the largest payload of any event.
	Largest, Longest RunSize
	LargestPayload   PayloadSize
	// Oversized are the payloads of MaxPayload bytes or more.
	Oversized []PayloadSize
	// Nondeterministic are the workflow tasks that failed with a non-determinism error: a run's history
	// no longer replays on the code that ran it.
	Nondeterministic []string
	// TaskFailures are the other workflow tasks that failed with a cause not in HarmlessTaskFailures: a
	// panic in workflow code (WORKFLOW_WORKER_UNHANDLED_FAILURE), a bad command, a payload too large...
	TaskFailures []string
	// Harmless counts the workflow task failures of HarmlessTaskFailures, by cause.
	Harmless map[string]int
	// ActivityPanics are the activity attempts that panicked (the SDK's PanicError): retried or not, a
	// panic is a defect of an activity, never an answer of the system it drives.
	ActivityPanics []string
}

// panicType is the failure type the Go SDK gives a panic (its PanicError).
const panicType = "PanicError"

// panicIn is the message of the first panic in a failure's chain, or "".
func panicIn(f *failurepb.Failure) string {
	for ; f != nil; f = f.GetCause() {
		if f.GetApplicationFailureInfo().GetType() == panicType {
			return f.GetMessage()
		}
	}
	return ""
}

// HarmlessTaskFailures are the causes of a failed workflow task that are harmless by construction:
// nothing in them says the workflow code is wrong, and the run goes on with its next task. Every other
// cause fails the scan. (A worker killed with SIGKILL fails no task: its task times out.)
var HarmlessTaskFailures = map[enumspb.WorkflowTaskFailedCause]string{
	// The server's own refusal: the task closed the run (completed, continued as new) while a signal
	// arrived; the next task sees the signal and decides again.
	enumspb.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND: "a signal arrived while the task closed the run; the next task handles it",
	// The same for an update (approve, preview) that arrived while the task closed the run.
	enumspb.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_UPDATE: "an update arrived while the task closed the run; the next task handles it",
	// A worker no longer held the run in its cache (restarted, evicted): the next task replays the
	// whole history.
	enumspb.WORKFLOW_TASK_FAILED_CAUSE_RESET_STICKY_TASK_QUEUE: "a worker lost the run from its cache; the next task replays it whole",
}

// taskFailure describes a failed workflow task for a report.
func taskFailure(wid, rid string, ev *historypb.HistoryEvent, f *historypb.WorkflowTaskFailedEventAttributes) string {
	return fmt.Sprintf("%s (run %s) event %d: %s: %s", wid, rid, ev.GetEventId(),
		f.GetCause().String(), f.GetFailure().GetMessage())
}

// RunSize is the size of one run's history.
type RunSize struct {
	WorkflowID, RunID string
	Events, Bytes     int
}

func (r RunSize) String() string {
	return fmt.Sprintf("%d events, %d bytes (%s run %s)", r.Events, r.Bytes, r.WorkflowID, r.RunID)
}

// PayloadSize is the size of one payload of a run's event.
type PayloadSize struct {
	WorkflowID, RunID string
	EventID           int64
	EventType         string
	Bytes             int
}

func (p PayloadSize) String() string {
	return fmt.Sprintf("%d bytes in %s (run %s) event %d %s", p.Bytes, p.WorkflowID, p.RunID, p.EventID, p.EventType)
}

// Check is an error naming every payload of MaxPayload bytes or more, every non-determinism error and
// every other workflow task failure not harmless by construction that the scan found, or nil.
func (s Scan) Check() error {
	var errs []error
	for _, p := range s.Oversized {
		errs = append(errs, fmt.Errorf("payload of %s is %d KiB or more", p, MaxPayload>>10))
	}
	for _, n := range s.Nondeterministic {
		errs = append(errs, fmt.Errorf("non-determinism: %s", n))
	}
	for _, n := range s.TaskFailures {
		errs = append(errs, fmt.Errorf("workflow task failed: %s", n))
	}
	for _, n := range s.ActivityPanics {
		errs = append(errs, fmt.Errorf("activity panicked: %s", n))
	}
	return errors.Join(errs...)
}

// add accounts one run's history.
func (s *Scan) add(wid, rid string, events []*historypb.HistoryEvent, values []string) {
	s.Runs++
	size := RunSize{WorkflowID: wid, RunID: rid, Events: len(events)}
	for _, ev := range events {
		size.Bytes += proto.Size(ev)
		for _, v := range clearValues(ev, values) {
			s.Found = append(s.Found, ClearText{WorkflowID: wid, RunID: rid, EventID: ev.GetEventId(), EventType: ev.GetEventType().String(), Value: v})
		}
		visit(ev.ProtoReflect(), true, func(p *commonpb.Payload) {
			ps := PayloadSize{WorkflowID: wid, RunID: rid, EventID: ev.GetEventId(), EventType: ev.GetEventType().String(), Bytes: proto.Size(p)}
			if ps.Bytes > s.LargestPayload.Bytes {
				s.LargestPayload = ps
			}
			if ps.Bytes >= MaxPayload {
				s.Oversized = append(s.Oversized, ps)
			}
		}, nil)
		// An attempt's failure is in the ActivityTaskFailed event of the last one, and in the
		// ActivityTaskStarted event (LastFailure) of the attempt after it.
		for _, f := range []*failurepb.Failure{ev.GetActivityTaskFailedEventAttributes().GetFailure(), ev.GetActivityTaskStartedEventAttributes().GetLastFailure()} {
			if msg := panicIn(f); msg != "" {
				s.ActivityPanics = append(s.ActivityPanics, fmt.Sprintf("%s (run %s) event %d %s: %s", wid, rid, ev.GetEventId(), ev.GetEventType(), msg))
			}
		}
		if f := ev.GetWorkflowTaskFailedEventAttributes(); f != nil {
			switch _, harmless := HarmlessTaskFailures[f.GetCause()]; {
			case f.GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR:
				s.Nondeterministic = append(s.Nondeterministic, fmt.Sprintf("%s (run %s) event %d: %s", wid, rid, ev.GetEventId(), f.GetFailure().GetMessage()))
			case harmless:
				if s.Harmless == nil {
					s.Harmless = map[string]int{}
				}
				s.Harmless[f.GetCause().String()]++
			default:
				s.TaskFailures = append(s.TaskFailures, taskFailure(wid, rid, ev, f))
			}
		}
	}
	if size.Bytes > s.Largest.Bytes {
		s.Largest = size
	}
	if size.Events > s.Longest.Events {
		s.Longest = size
	}
}

// scanHistories is ScanHistories over the runs a visibility query lists that also measures every run and
// payload and looks for failed workflow tasks (see Scan), and hands each run's whole history to also, when
// not nil, so one read of every history serves the scan and the recording of a replay corpus.
func scanHistories(ctx context.Context, c client.Client, namespace, query string, values []string,
	also func(context.Context, []*historypb.HistoryEvent) error) (Scan, error) {
	var s Scan
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace:     namespace,
			Query:         query,
			PageSize:      1000,
			NextPageToken: token,
		})
		if err != nil {
			return s, fmt.Errorf("list workflows of %s: %w", namespace, err)
		}
		for _, x := range resp.Executions {
			wid, rid := x.GetExecution().GetWorkflowId(), x.GetExecution().GetRunId()
			it := c.GetWorkflowHistory(ctx, wid, rid, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			var events []*historypb.HistoryEvent
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					return s, fmt.Errorf("history of %s: %w", wid, err)
				}
				events = append(events, ev)
			}
			s.add(wid, rid, events, values)
			if also != nil {
				if err := also(ctx, events); err != nil {
					return s, fmt.Errorf("history of %s (run %s): %w", wid, rid, err)
				}
			}
		}
		if token = resp.NextPageToken; len(token) == 0 {
			return s, nil
		}
	}
}

// clearValues returns the values readable in the payloads and failure texts of one event.
func clearValues(ev *historypb.HistoryEvent, values []string) []string {
	var texts [][]byte
	visit(ev.ProtoReflect(), false, func(p *commonpb.Payload) {
		texts = append(texts, p.GetData())
		for _, v := range p.GetMetadata() {
			texts = append(texts, v)
		}
	}, func(f *failurepb.Failure) {
		texts = append(texts, []byte(f.GetMessage()), []byte(f.GetStackTrace()))
	})
	var out []string
	for _, v := range values {
		for _, t := range texts {
			if bytes.Contains(t, []byte(v)) {
				out = append(out, v)
				break
			}
		}
	}
	return out
}

var (
	payloadName          = (&commonpb.Payload{}).ProtoReflect().Descriptor().FullName()
	failureName          = (&failurepb.Failure{}).ProtoReflect().Descriptor().FullName()
	searchAttributesName = (&commonpb.SearchAttributes{}).ProtoReflect().Descriptor().FullName()
)

// visit walks a message and calls payload for every Payload in it and failure (when not nil) for every
// Failure; search attributes (indexed, never encoded) are left out unless withSearchAttributes.
func visit(m protoreflect.Message, withSearchAttributes bool, payload func(*commonpb.Payload), failure func(*failurepb.Failure)) {
	switch m.Descriptor().FullName() {
	case searchAttributesName:
		if !withSearchAttributes {
			return
		}
	case payloadName:
		payload(m.Interface().(*commonpb.Payload))
		return
	case failureName:
		if failure != nil {
			failure(m.Interface().(*failurepb.Failure))
		}
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind:
		case fd.IsList():
			for i := 0; i < v.List().Len(); i++ {
				visit(v.List().Get(i).Message(), withSearchAttributes, payload, failure)
			}
		case fd.IsMap():
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					visit(mv.Message(), withSearchAttributes, payload, failure)
					return true
				})
			}
		default:
			visit(v.Message(), withSearchAttributes, payload, failure)
		}
		return true
	})
}

// Forbid adds spec values (host names, addresses, image names…) that no history of the run may hold in
// clear; RunTests checks them with those of the stack.
func (e *Env) Forbid(values ...string) { e.forbidden = append(e.forbidden, values...) }

// ForbidSecrets adds every credential held by a Secret of namespace ns (passwords, transport URLs,
// keys: values of 8 characters or more, raw and URL-escaped) to the Forbidden values; addresses and
// names, which are in every spec, are left out.
func (e *Env) ForbidSecrets(ctx context.Context, ns string) error {
	list, err := e.Kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("secrets of %s: %w", ns, err)
	}
	for _, s := range list.Items {
		for k, v := range s.Data {
			switch k {
			case "username", "host", "port", "management_url", "amqp_host", "amqp_port", "clouds.yaml", "cloud":
				continue
			}
			if len(v) >= 8 {
				e.Forbid(string(v), url.QueryEscape(string(v)))
			}
		}
	}
	return nil
}

// Forbidden are the values RunTests looks for: the stack's EDPM test host addresses, the local cloud's image
// and network names, and what the package added with Forbid.
func (e *Env) Forbidden() []string {
	out := append([]string(nil), e.forbidden...)
	for _, h := range e.Stack.TestHosts {
		out = append(out, h.Address)
	}
	if o := e.Stack.OpenStack; o != nil {
		out = append(out, o.Image, o.TenantNetwork, o.ExternalNetwork)
	}
	var nonEmpty []string
	for _, v := range out {
		if v != "" {
			nonEmpty = append(nonEmpty, v)
		}
	}
	return nonEmpty
}

// RunTests runs the package's tests (m.Run) and, when they pass, scans the history of every workflow the run
// started for the Forbidden values: with the payload codec on, none may be readable. A finding fails the
// package. With $STACKFLOW_RECORD_HISTORIES set, the same pass records the histories (see Recorder).
// Call it from TestMain in place of m.Run.
func (e *Env) RunTests(m *testing.M) int {
	code := m.Run()
	if code != 0 {
		// A failed test may leave servers its objects' teardown never removed: they would hold the cloud's
		// quota and fail the packages after this one.
		e.RemoveLeakedServers()
		return code
	}
	return e.CheckHistories()
}

// ScanSince makes RunTests scan the workflows started since t as well, when t is before Setup: a package
// that tears down what an earlier package left running (tests/samplesdown) scans those runs whole.
func (e *Env) ScanSince(t time.Time) {
	if t.Before(e.started) {
		e.started = t
	}
}

// SkipRecording keeps the run's histories out of the replay corpus (a build of other code than this
// tree's, say); CheckHistories still scans them.
func (e *Env) SkipRecording() { e.noRecord = true }

// CheckHistories is RunTests' scan (and recording) of the histories of the workflows started in the
// run's Temporal namespace since Setup: 0 when they pass, 1 (having said why) when not.
func (e *Env) CheckHistories() int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	values := e.Forbidden()
	rec, err := e.recorder()
	if err != nil {
		fmt.Fprintln(os.Stderr, "history recording:", err)
		return 1
	}
	var also func(context.Context, []*historypb.HistoryEvent) error
	if rec != nil {
		also = rec.Add
	}
	scan, err := scanHistories(ctx, e.Temporal, e.TemporalNamespace, sinceQuery(e.started), values, also)
	if err != nil {
		fmt.Fprintln(os.Stderr, "history scan:", err)
		return 1
	}
	runs := scan.Runs
	fmt.Printf("history sizes: %d runs of namespace %s; largest run %s; longest run %s; largest payload %s\n",
		runs, e.TemporalNamespace, scan.Largest, scan.Longest, scan.LargestPayload)
	if err := reportSizes(os.Getenv(HistoryReportEnv), e.TemporalNamespace, scan); err != nil {
		fmt.Fprintln(os.Stderr, "history report:", err)
		return 1
	}
	if err := scan.Check(); err != nil {
		fmt.Fprintln(os.Stderr, "history scan:", err)
		return 1
	}
	if len(scan.Found) > 0 {
		for _, f := range scan.Found {
			fmt.Fprintln(os.Stderr, "history scan:", f)
		}
		fmt.Fprintf(os.Stderr, "history scan: %d spec values readable in %d runs of namespace %s\n", len(scan.Found), runs, e.TemporalNamespace)
		return 1
	}
	fmt.Printf("history scan: %d runs of namespace %s, none holds any of %d spec values in clear, no workflow task failed but for harmless causes %v, every payload under %d KiB\n",
		runs, e.TemporalNamespace, len(values), scan.Harmless, MaxPayload>>10)
	if rec != nil {
		files, size, err := rec.Write()
		if err != nil {
			fmt.Fprintln(os.Stderr, "history recording:", err)
			return 1
		}
		fmt.Printf("history recording: %d of %d runs written to %s (%d bytes)\n", files, runs, filepath.Join(rec.Dir, rec.Package), size)
	}
	return 0
}

// recorder is the run's Recorder when $STACKFLOW_RECORD_HISTORIES names a directory, else nil. The
// package's files are named after the test package's directory (go test runs in it).
func (e *Env) recorder() (*Recorder, error) {
	dir := os.Getenv(RecordEnv)
	if dir == "" || e.noRecord {
		return nil, nil
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	codec, err := e.Codec()
	if err != nil {
		return nil, err
	}
	return &Recorder{Dir: dir, Package: filepath.Base(wd), Codec: codec, Paths: e.paths}, nil
}

// RecordPath labels the runs of a workflow that match as a path of their own for the replay corpus
// (see Path): a test says what it made a workflow go through that the generic tags do not tell apart,
// and `make histories` keeps such a run. It does nothing unless histories are being recorded.
func (e *Env) RecordPath(workflowID, label string, match func([]*historypb.HistoryEvent) bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.paths = append(e.paths, Path{WorkflowID: workflowID, Label: label, Match: match})
}

// Codec is the payload codec of the stack's Temporal: what reads the payloads of a history as the
// workers wrote them (they are encrypted in Temporal).
func (e *Env) Codec() (converter.PayloadCodec, error) {
	keys := e.TemporalOptions().CodecKeys
	if keys == "" {
		return nil, errors.New("the stack's Temporal options name no codec keys to decode histories with")
	}
	ring, err := temporalconn.LoadKeyring(keys)
	if err != nil {
		return nil, err
	}
	return temporalconn.NewCodec(ring), nil
}

// HistoryReportEnv names the environment variable that, when it names a file, has every package append
// its history sizes to it: go test shows nothing of a package that passes, so `make e2e` prints the
// file, the whole suite's largest run first.
const HistoryReportEnv = "STACKFLOW_HISTORY_REPORT"

// reportSizes appends one line to path: the largest run's bytes and events first, so that a numeric
// sort ranks the packages.
func reportSizes(path, namespace string, scan Scan) error {
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	_, err = fmt.Fprintf(f, "%d bytes\t%d events\tlargest run of %s (%d runs): %s; longest run %s; largest payload %s\n",
		scan.Largest.Bytes, scan.Largest.Events, namespace, scan.Runs, scan.Largest, scan.Longest, scan.LargestPayload)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
