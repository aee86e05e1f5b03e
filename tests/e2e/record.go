package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/proxy"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/stackflow/stackflow/api/lifecycle"
)

// RecordEnv names the environment variable that turns recording on: when it names a directory,
// RunTests writes the histories of the run's workflows into it (see Recorder), for the replay test of
// workflows/ (`make histories`).
const RecordEnv = "STACKFLOW_RECORD_HISTORIES"

// DefaultPerKind is how many histories of one workflow type a package records at most.
const DefaultPerKind = 4

// Recorder keeps a small corpus of decoded workflow histories for replay tests: one file per run, at
// Dir/Package/<workflow type>/<path>-<shape>.json, where path names what the run went through
// (completed, failed, cancel, delete, retry, continued, resumed, ...; see pathTags) and shape is a hash of
// its sequence of events and commands. Runs of the same shape replay the same code path, so only the
// smallest of a shape is kept, and a shape already recorded under Dir (by any package) is skipped. Per
// type, runs are kept while they add a path not yet recorded, at most PerKind of them, and at least one.
//
// Payloads are decoded with Codec before they are written, so the corpus replays without the key.
// Histories hold no secret values (nothing stackflow writes into Temporal does), only spec values of
// the test stack.
type Recorder struct {
	Dir, Package string
	Codec        converter.PayloadCodec
	PerKind      int

	// Paths name the runs of particular paths a test saw (a bastion replaced, a permanent error): each
	// matching run is tagged with its label, so it is kept as a path of its own (see Env.RecordPath).
	Paths []Path

	// best holds, per workflow type and shape, the smallest run seen.
	best map[string]map[string]candidate
}

// Path labels the runs of one workflow that went through a path the generic tags (pathTags) do not tell
// apart: the runs of WorkflowID for which Match holds get the tag Label.
type Path struct {
	WorkflowID string
	Label      string
	Match      func([]*historypb.HistoryEvent) bool
}

// Scheduled holds for a run that scheduled an activity of type activity.
func Scheduled(activity string) func([]*historypb.HistoryEvent) bool {
	return func(events []*historypb.HistoryEvent) bool {
		return slices.ContainsFunc(events, func(ev *historypb.HistoryEvent) bool {
			return ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == activity
		})
	}
}

// Signaled holds for a run that received the signal name.
func Signaled(name string) func([]*historypb.HistoryEvent) bool {
	return func(events []*historypb.HistoryEvent) bool {
		return slices.ContainsFunc(events, func(ev *historypb.HistoryEvent) bool {
			return ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == name
		})
	}
}

// Retried holds for a run in which an activity of type activity (any, when "") ran more than once (a
// worker killed mid-activity, a retryable error).
func Retried(activity string) func([]*historypb.HistoryEvent) bool {
	return func(events []*historypb.HistoryEvent) bool {
		scheduled := map[int64]bool{}
		for _, ev := range events {
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && (activity == "" || a.GetActivityType().GetName() == activity) {
				scheduled[ev.GetEventId()] = true
			}
			if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && scheduled[a.GetScheduledEventId()] && a.GetAttempt() > 1 {
				return true
			}
		}
		return false
	}
}

// All holds when every one of ms holds; Not when m does not.
func All(ms ...func([]*historypb.HistoryEvent) bool) func([]*historypb.HistoryEvent) bool {
	return func(events []*historypb.HistoryEvent) bool {
		for _, m := range ms {
			if !m(events) {
				return false
			}
		}
		return true
	}
}

// Not holds when m does not.
func Not(m func([]*historypb.HistoryEvent) bool) func([]*historypb.HistoryEvent) bool {
	return func(events []*historypb.HistoryEvent) bool { return !m(events) }
}

type candidate struct {
	kind, shape string
	tags        []string
	// changes are the GetVersion changes the run recorded, as changeKey names them.
	changes []string
	data    []byte
}

// changeKey names a GetVersion change at one version, among the keys pick counts as covered.
func changeKey(id string, version int) string { return fmt.Sprintf("change:%s@%d", id, version) }

// changesOf lists the GetVersion changes a run recorded (its Version markers, payloads decoded).
func changesOf(events []*historypb.HistoryEvent) []string {
	dc := converter.GetDefaultDataConverter()
	var out []string
	for _, ev := range events {
		m := ev.GetMarkerRecordedEventAttributes()
		if m.GetMarkerName() != versionMarker {
			continue
		}
		var id string
		var version int
		if dc.FromPayloads(m.GetDetails()["change-id"], &id) != nil || dc.FromPayloads(m.GetDetails()["version"], &version) != nil {
			continue
		}
		if k := changeKey(id, version); !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// versionMarker is the name of the marker workflow.GetVersion records.
const versionMarker = "Version"

// keys are what a candidate covers: its path tags and its changes.
func (c candidate) keys() []string { return append(slices.Clone(c.tags), c.changes...) }

// Add considers one run's history (as read from the server, payloads still encoded). A run in which a
// workflow task failed for a cause not in HarmlessTaskFailures (a panic, non-determinism) is refused
// with an error: it shows a defect, and the corpus must not hide it or replay around it.
func (r *Recorder) Add(ctx context.Context, events []*historypb.HistoryEvent) error {
	if len(events) == 0 {
		return nil
	}
	for _, ev := range events {
		if f := ev.GetWorkflowTaskFailedEventAttributes(); f != nil {
			if _, ok := HarmlessTaskFailures[f.GetCause()]; !ok {
				return fmt.Errorf("not recorded: event %d: a workflow task failed with %s: %s", ev.GetEventId(), f.GetCause(), f.GetFailure().GetMessage())
			}
		}
	}
	h := &historypb.History{Events: events}
	err := proxy.VisitPayloads(ctx, h, proxy.VisitPayloadsOptions{
		SkipSearchAttributes: true,
		Visitor: func(_ *proxy.VisitPayloadsContext, p []*commonpb.Payload) ([]*commonpb.Payload, error) {
			return r.Codec.Decode(p)
		},
	})
	if err != nil {
		return fmt.Errorf("decode history: %w", err)
	}
	data, err := protojson.MarshalOptions{Multiline: true, Indent: " "}.Marshal(h)
	if err != nil {
		return fmt.Errorf("history to JSON: %w", err)
	}
	start := events[0].GetWorkflowExecutionStartedEventAttributes()
	c := candidate{
		kind:    start.GetWorkflowType().GetName(),
		shape:   shapeOf(events),
		tags:    pathTags(events),
		changes: changesOf(h.Events),
		data:    data,
	}
	for _, p := range r.Paths {
		if p.WorkflowID == start.GetWorkflowId() && p.Match(events) && !slices.Contains(c.tags, p.Label) {
			c.tags = append(c.tags, p.Label)
		}
	}
	// The end first, the rest sorted: a file's name stays the same for the same path.
	slices.Sort(c.tags[1:])
	if r.best == nil {
		r.best = map[string]map[string]candidate{}
	}
	if r.best[c.kind] == nil {
		r.best[c.kind] = map[string]candidate{}
	}
	if old, ok := r.best[c.kind][c.shape]; !ok || len(c.data) < len(old.data) {
		r.best[c.kind][c.shape] = c
	}
	return nil
}

// Write picks the runs to keep and writes them; it returns the files and bytes it wrote.
func (r *Recorder) Write() (files int, size int64, err error) {
	perKind := r.PerKind
	if perKind <= 0 {
		perKind = DefaultPerKind
	}
	// The changes any recorded run holds: a run that adds a change at a version no run recorded is kept
	// (the branch that objects started on this code take).
	changes, err := recordedChanges(r.Dir)
	if err != nil {
		return 0, 0, err
	}
	for _, kind := range slices.Sorted(maps.Keys(r.best)) {
		known, covered, err := recordedPaths(filepath.Join(r.Dir, "*", safeName(kind)))
		if err != nil {
			return files, size, err
		}
		maps.Copy(covered, changes)
		var cands []candidate
		for _, c := range r.best[kind] {
			// A shape recorded already replays the same code, unless the run is of a path not recorded
			// yet (a label a test named) or of a change at a version not recorded yet.
			if !known[c.shape[:shapeLen]] || slices.ContainsFunc(c.keys(), func(t string) bool { return !covered[t] }) {
				cands = append(cands, c)
			}
		}
		for _, c := range pick(cands, covered, len(known) > 0, perKind) {
			for _, k := range c.changes {
				changes[k] = true
			}
			dir := filepath.Join(r.Dir, safeName(r.Package), safeName(kind))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return files, size, err
			}
			name := strings.Join(c.tags, "+") + "-" + c.shape[:shapeLen] + ".json"
			// Written whole, then renamed: packages side by side read each other's files (recordedChanges).
			tmp := filepath.Join(dir, "."+name+".tmp")
			if err := os.WriteFile(tmp, c.data, 0o644); err != nil {
				return files, size, err
			}
			if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
				return files, size, err
			}
			files++
			size += int64(len(c.data))
		}
	}
	return files, size, nil
}

// shapeLen is how many hex digits of a shape name a file.
const shapeLen = 10

// pick chooses, greedily, the candidates that add the most paths and changes not yet covered (the
// smallest first on a tie), at most n (and past n those that still add a change), and one when nothing
// of the type is recorded yet (recorded is false).
func pick(cands []candidate, covered map[string]bool, recorded bool, n int) []candidate {
	slices.SortFunc(cands, func(a, b candidate) int {
		if d := len(a.data) - len(b.data); d != 0 {
			return d
		}
		return strings.Compare(a.shape, b.shape)
	})
	covered = maps.Clone(covered)
	var out []candidate
	for len(out) < n && len(cands) > 0 {
		best, gain := -1, 0
		for i, c := range cands {
			g := 0
			for _, t := range c.keys() {
				if !covered[t] {
					g++
				}
			}
			if g > gain {
				best, gain = i, g
			}
		}
		if best < 0 {
			if recorded || len(out) > 0 {
				break
			}
			best = 0 // nothing recorded of this type: keep its smallest run
		}
		c := cands[best]
		out = append(out, c)
		for _, t := range c.keys() {
			covered[t] = true
		}
		cands = slices.Delete(cands, best, best+1)
	}
	// Past n, a run still holding a change at a version no kept run holds is kept too: the corpus must
	// replay every change's newest branch (TestReplayCorpusCoversEveryChange), and changes are few.
	for _, c := range cands {
		if slices.ContainsFunc(c.changes, func(k string) bool { return !covered[k] }) {
			out = append(out, c)
			for _, t := range c.keys() {
				covered[t] = true
			}
		}
	}
	return out
}

// recordedPaths reads the shapes and path tags of the files already recorded for a type, from their
// names, in every package directory matching pattern.
func recordedPaths(pattern string) (shapes, tags map[string]bool, err error) {
	shapes, tags = map[string]bool{}, map[string]bool{}
	files, err := filepath.Glob(filepath.Join(pattern, "*.json"))
	if err != nil {
		return nil, nil, err
	}
	for _, f := range files {
		base := strings.TrimSuffix(filepath.Base(f), ".json")
		i := strings.LastIndexByte(base, '-')
		if i < 0 {
			continue
		}
		shapes[base[i+1:]] = true
		for _, t := range strings.Split(base[:i], "+") {
			tags[t] = true
		}
	}
	return shapes, tags, nil
}

// recordedChanges reads the changes (changeKey) of every run recorded under dir, by any package.
func recordedChanges(dir string) (map[string]bool, error) {
	out := map[string]bool{}
	files, err := filepath.Glob(filepath.Join(dir, "*", "*", "*.json"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var h historypb.History
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, &h); err != nil {
			return nil, fmt.Errorf("read %s: %w", f, err)
		}
		for _, k := range changesOf(h.GetEvents()) {
			out[k] = true
		}
	}
	return out, nil
}

// pathTags names what a run went through, in a fixed order: how it started (resumed: continued from a
// previous run) and ended (completed, failed, canceled, terminated, timedout, continued, open), what a
// person or another workflow asked (the signals other than spec, cancel, update) and what went wrong on
// the way (activity-failed, activity-retried), and whether it ran children or timers.
func pathTags(events []*historypb.HistoryEvent) []string {
	set := map[string]bool{}
	end := "open"
	for _, ev := range events {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			if ev.GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId() != "" {
				set["resumed"] = true
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
			end = "completed"
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
			end = "failed"
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED:
			end = "canceled"
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
			end = "terminated"
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
			end = "timedout"
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
			end = "continued"
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			if name := ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName(); name != lifecycle.SignalSpec {
				set[safeName(name)] = true
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED:
			set["cancel"] = true
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
			set["update"] = true
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED, enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
			set["activity-failed"] = true
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			if ev.GetActivityTaskStartedEventAttributes().GetAttempt() > 1 {
				set["activity-retried"] = true
			}
		case enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
			set["children"] = true
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			set["timer"] = true
		}
	}
	return append([]string{end}, slices.Sorted(maps.Keys(set))...)
}

// shapeOf hashes the sequence of a run's events with what decides its code path: the activities,
// children and markers it scheduled and the signals and updates it received, by name (not their values).
func shapeOf(events []*historypb.HistoryEvent) string {
	h := sha256.New()
	for _, ev := range events {
		name := ""
		switch {
		case ev.GetActivityTaskScheduledEventAttributes() != nil:
			name = ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
		case ev.GetStartChildWorkflowExecutionInitiatedEventAttributes() != nil:
			name = ev.GetStartChildWorkflowExecutionInitiatedEventAttributes().GetWorkflowType().GetName()
		case ev.GetMarkerRecordedEventAttributes() != nil:
			name = ev.GetMarkerRecordedEventAttributes().GetMarkerName()
		case ev.GetWorkflowExecutionSignaledEventAttributes() != nil:
			name = ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName()
		case ev.GetWorkflowExecutionUpdateAcceptedEventAttributes() != nil:
			name = ev.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput().GetName()
		}
		fmt.Fprintf(h, "%d %s\n", ev.GetEventType(), name)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// safeName keeps a name usable as one path element.
func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == '+' || r < ' ' {
			return '_'
		}
		return r
	}, s)
}
