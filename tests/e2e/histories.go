package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/reflect/protoreflect"

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
	return scanHistories(ctx, c, namespace, since, values, nil)
}

// scanHistories is ScanHistories that also hands each run's whole history to also, when not nil, so one
// read of every history serves the scan and the recording of a replay corpus.
func scanHistories(ctx context.Context, c client.Client, namespace string, since time.Time, values []string,
	also func(context.Context, []*historypb.HistoryEvent) error) ([]ClearText, int, error) {
	var found []ClearText
	runs := 0
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace:     namespace,
			Query:         fmt.Sprintf("StartTime >= %q", since.UTC().Format(time.RFC3339)),
			PageSize:      1000,
			NextPageToken: token,
		})
		if err != nil {
			return nil, runs, fmt.Errorf("list workflows of %s: %w", namespace, err)
		}
		for _, x := range resp.Executions {
			runs++
			wid, rid := x.GetExecution().GetWorkflowId(), x.GetExecution().GetRunId()
			it := c.GetWorkflowHistory(ctx, wid, rid, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			var events []*historypb.HistoryEvent
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					return nil, runs, fmt.Errorf("history of %s: %w", wid, err)
				}
				for _, v := range clearValues(ev, values) {
					found = append(found, ClearText{WorkflowID: wid, RunID: rid, EventID: ev.GetEventId(), EventType: ev.GetEventType().String(), Value: v})
				}
				if also != nil {
					events = append(events, ev)
				}
			}
			if also != nil {
				if err := also(ctx, events); err != nil {
					return nil, runs, fmt.Errorf("history of %s (run %s): %w", wid, rid, err)
				}
			}
		}
		if token = resp.NextPageToken; len(token) == 0 {
			return found, runs, nil
		}
	}
}

// clearValues returns the values readable in the payloads and failure texts of one event.
func clearValues(ev *historypb.HistoryEvent, values []string) []string {
	var texts [][]byte
	collectTexts(ev.ProtoReflect(), &texts)
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

// collectTexts walks a message and gathers the bytes of every Payload (data and metadata values) and
// every Failure's message and stack trace, skipping search attributes (indexed, never encoded).
func collectTexts(m protoreflect.Message, out *[][]byte) {
	switch m.Descriptor().FullName() {
	case searchAttributesName:
		return
	case payloadName:
		p := m.Interface().(*commonpb.Payload)
		*out = append(*out, p.GetData())
		for _, v := range p.GetMetadata() {
			*out = append(*out, v)
		}
		return
	case failureName:
		f := m.Interface().(*failurepb.Failure)
		*out = append(*out, []byte(f.GetMessage()), []byte(f.GetStackTrace()))
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind:
		case fd.IsList():
			for i := 0; i < v.List().Len(); i++ {
				collectTexts(v.List().Get(i).Message(), out)
			}
		case fd.IsMap():
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					collectTexts(mv.Message(), out)
					return true
				})
			}
		default:
			collectTexts(v.Message(), out)
		}
		return true
	})
}

// Forbid adds spec values (host names, addresses, image names…) that no history of the run may hold in
// clear; RunTests checks them with those of the stack.
func (e *Env) Forbid(values ...string) { e.forbidden = append(e.forbidden, values...) }

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
		return code
	}
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
	found, runs, err := scanHistories(ctx, e.Temporal, e.TemporalNamespace, e.started, values, also)
	if err != nil {
		fmt.Fprintln(os.Stderr, "history scan:", err)
		return 1
	}
	if len(found) > 0 {
		for _, f := range found {
			fmt.Fprintln(os.Stderr, "history scan:", f)
		}
		fmt.Fprintf(os.Stderr, "history scan: %d spec values readable in %d runs of namespace %s\n", len(found), runs, e.TemporalNamespace)
		return 1
	}
	fmt.Printf("history scan: %d runs of namespace %s, none holds any of %d spec values in clear\n", runs, e.TemporalNamespace, len(values))
	if rec != nil {
		files, size, err := rec.Write()
		if err != nil {
			fmt.Fprintln(os.Stderr, "history recording:", err)
			return 1
		}
		fmt.Printf("history recording: %d of %d runs written to %s (%d bytes); %d left out (a workflow task failed in them)\n",
			files, runs, filepath.Join(rec.Dir, rec.Package), size, rec.skipped)
	}
	return 0
}

// recorder is the run's Recorder when $STACKFLOW_RECORD_HISTORIES names a directory, else nil. The
// package's files are named after the test package's directory (go test runs in it).
func (e *Env) recorder() (*Recorder, error) {
	dir := os.Getenv(RecordEnv)
	if dir == "" {
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
	keys := e.TemporalOptions().CodecKeys
	if keys == "" {
		return nil, errors.New("the stack's Temporal options name no codec keys to decode histories with")
	}
	ring, err := temporalconn.LoadKeyring(keys)
	if err != nil {
		return nil, err
	}
	return &Recorder{Dir: dir, Package: filepath.Base(wd), Codec: temporalconn.NewCodec(ring)}, nil
}
