package workflows_test

import (
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/bridge"
	"github.com/stackflow/stackflow/workflows"
	"github.com/stackflow/stackflow/workflows/object"
)

// corpus is the replay corpus: histories the end-to-end tests recorded (`make histories`, see
// tests/e2e.Recorder), decoded, one file per workflow run at <e2e package>/<workflow type>/<path>.json.
const corpus = "testdata/histories"

// TestReplayRecordedHistories replays every recorded history against the current code, registered
// exactly as the worker registers it (workflows.Register). A change that makes a running workflow take
// another path than its history says fails here, before it fails on every running object at once:
// guard it with workflow.GetVersion (see docs/operations/upgrade.md), then record the corpus again.
func TestReplayRecordedHistories(t *testing.T) {
	files := corpusFiles(t)
	if len(files) == 0 {
		t.Fatalf("no recorded history under %s: record them with `make histories`", corpus)
	}
	covered := map[string]bool{}
	for _, f := range files {
		rel, _ := filepath.Rel(corpus, f)
		t.Run(rel, func(t *testing.T) {
			covered[replayFile(t, newReplayer(t), f)] = true
		})
	}
	for _, name := range mustReplay() {
		why, pending := notRecordedYet[name]
		switch {
		case !covered[name] && !pending:
			t.Errorf("no recorded history of %s: every workflow the worker runs must be in the corpus (make histories)", name)
		case covered[name] && pending:
			t.Errorf("%s is recorded now: take it off notRecordedYet", name)
		case pending:
			t.Logf("not recorded yet: %s (%s)", name, why)
		}
	}
}

// TestReplayTakesRecordedLimits replays the corpus on a worker whose limits differ from every recorded
// run's (the shortest history a run may reach, the shortest waits): each run replays with the limits it
// recorded, so a worker started with other flags (--max-history, --poll-interval) never changes the
// commands of a run under way. Were the limits read from the worker on replay, every run would be due to
// continue as new at once and fail here.
func TestReplayTakesRecordedLimits(t *testing.T) {
	files := corpusFiles(t)
	if len(files) == 0 {
		t.Fatalf("no recorded history under %s", corpus)
	}
	object.SetLimits(object.Limits{MaxHistory: 1, PollInterval: time.Millisecond, Burst: 1, MaxBackoff: time.Millisecond})
	defer object.SetLimits(object.DefaultLimits)
	replayer := newReplayer(t)
	for _, f := range files {
		rel, _ := filepath.Rel(corpus, f)
		t.Run(rel, func(t *testing.T) { replayFile(t, replayer, f) })
	}
}

// newReplayer is a replayer with every workflow registered exactly as the worker registers it, and the
// worker's interceptors (the retired changes).
func newReplayer(t *testing.T) worker.WorkflowReplayer {
	t.Helper()
	return newReplayerWith(t, object.Interceptors())
}

// newReplayerWith is newReplayer with the given worker interceptors instead of the worker's.
func newReplayerWith(t *testing.T, interceptors []interceptor.WorkerInterceptor) worker.WorkflowReplayer {
	t.Helper()
	replayer, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{Interceptors: interceptors})
	if err != nil {
		t.Fatal(err)
	}
	workflows.Register(replayer)
	return replayer
}

// replayFile replays the recorded run in file f and returns its workflow type.
func replayFile(t *testing.T, replayer worker.WorkflowReplayer, f string) string {
	t.Helper()
	typ, err := replay(t, replayer, f)
	if err != nil {
		t.Errorf("replay %s: %v", f, err)
	}
	return typ
}

// replay replays the recorded run in file f, as the run it was, and returns its workflow type and the
// replay's error.
func replay(t *testing.T, replayer worker.WorkflowReplayer, f string) (string, error) {
	t.Helper()
	r, err := os.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h, err := client.HistoryFromJSON(r, client.HistoryJSONOptions{})
	if err != nil {
		t.Fatalf("read %s: %v", f, err)
	}
	if len(h.Events) == 0 {
		t.Fatalf("%s holds no event", f)
	}
	start := h.Events[0].GetWorkflowExecutionStartedEventAttributes()
	// Replay as the run it was: workflows derive IDs from their own (a rollout's children).
	orig := workflow.Execution{ID: start.GetWorkflowId(), RunID: start.GetOriginalExecutionRunId()}
	// Replay logs every step of every workflow; a failure is in the error it returns.
	quiet := log.NewStructuredLogger(slog.New(slog.DiscardHandler))
	err = replayer.ReplayWorkflowHistoryWithOptions(quiet, h, worker.ReplayWorkflowHistoryOptions{OriginalExecution: orig})
	return start.GetWorkflowType().GetName(), err
}

// requiredPaths are, per workflow type, the paths the end-to-end suites take it through that the corpus
// must hold a run of: a path is a tag of a recorded file's name (tests/e2e.Recorder: how the run ended,
// what it received, what went wrong, and the labels a test named with RecordPath). A change to a path no
// recorded run took would go unreplayed.
var requiredPaths = map[string][]string{
	// Every object: its settled reconcile (continued as new) and its teardown (delete).
	"Node":                               {"continued", "delete"},
	"OpenstackNode":                      {"continued", "delete", "refresh"},
	"OpenStackCloudConfigurationProfile": {"continued", "delete"},
	"KupenstackConfiguration":            {"continued", "delete", "children", "update"},
	"RolloutComponent":                   {"completed", "failed"},
	"OpenStackDataPlane":                 {"continued", "delete", "edpm-request", "edpm-report", "update"},
	"OpenStackDataPlaneRole":             {"continued", "delete"},
	"OpenStackDataPlaneNode":             {"continued", "delete", "edpm-grant", "resume", "ovn-removed"},
	"OpenStackDataPlaneUpdate":           {"continued", "delete", "retry", "update"},
	"OpenStackDataPlaneDeployment":       {"continued", "delete", "ran-playbooks"},
	"NovaExternalCompute":                {"continued", "delete"},
	"OVNMetadataAgent":                   {"continued", "delete", "agent-alive", "agent-removed"},
	"Nova":                               {"continued", "delete"},
	"NovaCell":                           {"continued", "delete"},
	"NovaAPI":                            {"continued", "delete"},
	"NovaScheduler":                      {"continued", "delete"},
	"NovaConductor":                      {"continued", "delete", "activity-failed"},
	"NovaMetadata":                       {"continued", "delete"},
	"NovaNoVNCProxy":                     {"continued", "delete"},
	// The servers family (tests/servers): a bastion replaced on a spec change, a permanent OpenStack
	// error, activities retried after the worker was killed with SIGKILL (where the kills land is random:
	// a server's runs take them reliably, a cluster's runs build its bastion with the same code).
	"OpenStackServer":  {"continued", "delete", "permanent-error", "crash-retried"},
	"OpenStackMachine": {"continued", "delete"},
	"OpenStackCluster": {"continued", "delete", "bastion-replaced"},
}

// TestReplayCorpusCoversThePaths: for every workflow type, the corpus holds a run of each path in
// requiredPaths, and every type the worker runs has its list.
func TestReplayCorpusCoversThePaths(t *testing.T) {
	have := map[string]map[string]bool{}
	for _, f := range corpusFiles(t) {
		kind := filepath.Base(filepath.Dir(f))
		base := strings.TrimSuffix(filepath.Base(f), ".json")
		if i := strings.LastIndexByte(base, '-'); i > 0 {
			base = base[:i]
		}
		if have[kind] == nil {
			have[kind] = map[string]bool{}
		}
		for _, tag := range strings.Split(base, "+") {
			have[kind][tag] = true
		}
	}
	for _, name := range mustReplay() {
		paths, ok := requiredPaths[name]
		if !ok {
			t.Errorf("%s has no requiredPaths: say which paths the suites take it through", name)
			continue
		}
		for _, p := range paths {
			if !have[name][p] {
				t.Errorf("no recorded run of %s took path %q (tags recorded: %v): record it (make histories)", name, p, slices.Sorted(maps.Keys(have[name])))
			}
		}
	}
}

// notRecordedYet are the workflows the corpus does not hold yet, each with the reason; each is a gap to
// close by recording, not a place to park a failure, and the test fails once one of them is recorded.
var notRecordedYet = map[string]string{}

// mustReplay lists the workflow types the corpus must cover: every kind the bridge serves (by default,
// and the Nova kinds it serves when named), and every registered workflow that is no kind at all
// (children such as a rollout's components).
func mustReplay() []string {
	kinds := map[string]bool{}
	var out []string
	for _, k := range bridge.Served {
		kinds[k.Kind] = true
		out = append(out, k.Kind)
	}
	for _, d := range workflows.All() {
		if !kinds[d.Name] {
			out = append(out, d.Name)
		}
	}
	slices.Sort(out)
	return out
}

func corpusFiles(t *testing.T) []string {
	var files []string
	err := filepath.WalkDir(corpus, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".json") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return files
}
