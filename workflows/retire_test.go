package workflows_test

import (
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"go.temporal.io/sdk/interceptor"

	"github.com/stackflow/stackflow/workflows/object"
)

// removedSupport is the SDK's message for a history that needs a version the code no longer supports:
// the change ID it names.
var removedSupport = regexp.MustCompile(`removed support of version -?\d+\. for "([^"]+)" changeID`)

// TestRetirementRefusesOnlyOldBranches replays the corpus as the release without any old branch would
// (every change retired, as the upgrade test's build B runs): a run recorded at the newest version of
// every change it met replays; a run that predates a change it met fails, naming that change, and only
// such runs fail. The corpus holds runs of both kinds, so the check is seen to fail on what it exists
// to catch. It is also the list of what may not be retired yet: the changes those runs name.
func TestRetirementRefusesOnlyOldBranches(t *testing.T) {
	files := corpusFiles(t)
	if len(files) == 0 {
		t.Fatalf("no recorded history under %s", corpus)
	}
	newest := map[string]int{}
	for id, c := range codeChanges(t, ".") {
		newest[id] = c.newest
	}
	retiredAll := newReplayerWith(t, []interceptor.WorkerInterceptor{object.Retirement(object.EveryChangeButTheProbe)})
	passed, refused := 0, map[string]int{}
	for _, f := range files {
		rel, _ := filepath.Rel(corpus, f)
		_, err := replay(t, retiredAll, f)
		if err == nil {
			passed++
			continue
		}
		m := removedSupport.FindStringSubmatch(err.Error())
		if m == nil {
			t.Errorf("%s: replay with every change retired failed, but not for a retired version: %v", rel, err)
			continue
		}
		id := m[1]
		if v, ok := fileChanges(t, f)[id]; ok && v >= newest[id] {
			t.Errorf("%s: refused for change %s, which it recorded at its newest version %d", rel, id, v)
		}
		refused[id]++
	}
	t.Logf("with every change retired: %d of %d recorded runs replay; refused for the changes they predate: %v",
		passed, len(files), refused)
	if passed == 0 || len(refused) == 0 {
		t.Fatalf("the corpus must hold runs that replay with every change retired (%d) and runs that predate a change (%d changes)",
			passed, len(refused))
	}
	for _, id := range slices.Sorted(maps.Keys(refused)) {
		if _, ok := newest[id]; !ok {
			t.Errorf("refused for change %s, which no GetVersion call of workflows/ asks for", id)
		}
	}
}
