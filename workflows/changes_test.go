package workflows_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// versionChange is one workflow.GetVersion change ID of the code with the newest version it asks for,
// and where.
type versionChange struct {
	id     string
	newest int
	at     []string
}

// TestReplayCorpusCoversEveryChange: every GetVersion change ID in workflows/ has a recorded run at its
// newest version (the run's history holds the change's Version marker with that version). The path
// taken on new code is what every object started after a release runs; a later edit of that branch
// that no replayed history exercises would break them all at the next release unseen. make e2e records
// what its packages exercised into the corpus (tests/e2e.Recorder keeps a run that adds a change
// version the corpus lacks): commit the new files with the change.
func TestReplayCorpusCoversEveryChange(t *testing.T) {
	changes := codeChanges(t, ".")
	if len(changes) < 20 {
		t.Fatalf("found %d GetVersion change IDs in workflows/: the scan misses calls", len(changes))
	}
	recorded := corpusChanges(t)
	for _, id := range slices.Sorted(maps.Keys(changes)) {
		c := changes[id]
		have := recorded[id]
		why, pending := changesNotRecordedYet[id]
		switch {
		case !have[c.newest] && !pending:
			t.Errorf("change %s (%s) has no recorded run at version %d (recorded: %v): run the e2e package whose "+
				"tests take that branch (make e2e records it into workflows/testdata/histories) and commit the file",
				id, strings.Join(c.at, ", "), c.newest, slices.Sorted(maps.Keys(have)))
		case have[c.newest] && pending:
			t.Errorf("change %s is recorded at version %d now: take it off changesNotRecordedYet", id, c.newest)
		case pending:
			t.Logf("not recorded yet: change %s (%s)", id, why)
		}
	}
	for id := range changesNotRecordedYet {
		if _, ok := changes[id]; !ok {
			t.Errorf("changesNotRecordedYet names %s, which no GetVersion call of workflows/ asks for", id)
		}
	}
}

// changesNotRecordedYet are change IDs whose newest branch no recorded run took, each with the reason:
// a gap to close by recording, never a place to park a failure; the test fails once one is recorded.
var changesNotRecordedYet = map[string]string{}

// codeChanges finds the workflow.GetVersion calls of the Go files under dir (tests and files built
// only with build tags left out) and resolves their change IDs: a string literal, or a constant of
// the code. A call whose ID is a variable (a change chosen from a table) stands for every constant
// named Change… that no call names directly.
func codeChanges(t *testing.T, dir string) map[string]*versionChange {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	consts := map[string]string{} // constant name (and pkg.Name) → string value
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				if strings.HasPrefix(c.Text, "//go:build") && c.Pos() < f.Package {
					return nil // not in the worker's build (the upgrade test's probe)
				}
			}
		}
		files = append(files, f)
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, _ := strconv.Unquote(lit.Value)
						consts[name.Name] = v
						consts[f.Name.Name+"."+name.Name] = v
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*versionChange{}
	add := func(id string, newest int, at string) {
		c := out[id]
		if c == nil {
			c = &versionChange{id: id}
			out[id] = c
		}
		c.newest = max(c.newest, newest)
		c.at = append(c.at, at)
	}
	dynamicNewest, dynamicAt := 0, ""
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "GetVersion" {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "workflow" || len(call.Args) != 4 {
				return true
			}
			pos := fset.Position(call.Pos())
			at := fmt.Sprintf("%s:%d", pos.Filename, pos.Line)
			lit, ok := call.Args[3].(*ast.BasicLit)
			if !ok || lit.Kind != token.INT {
				t.Errorf("%s: the newest version of a GetVersion call is not a number literal", at)
				return true
			}
			newest, _ := strconv.Atoi(lit.Value)
			switch a := call.Args[1].(type) {
			case *ast.BasicLit:
				id, _ := strconv.Unquote(a.Value)
				add(id, newest, at)
			case *ast.Ident:
				if id, ok := consts[a.Name]; ok {
					add(id, newest, at)
				} else {
					dynamicNewest, dynamicAt = max(dynamicNewest, newest), at
				}
			case *ast.SelectorExpr:
				x, _ := a.X.(*ast.Ident)
				id, ok := consts[fmt.Sprint(x)+"."+a.Sel.Name]
				if !ok {
					t.Errorf("%s: cannot resolve the change ID %s.%s", at, x, a.Sel.Name)
					return true
				}
				add(id, newest, at)
			default:
				t.Errorf("%s: cannot resolve the change ID of a GetVersion call", at)
			}
			return true
		})
	}
	if dynamicAt != "" {
		for name, id := range consts {
			if strings.HasPrefix(name, "Change") && out[id] == nil {
				add(id, dynamicNewest, dynamicAt)
			}
		}
	}
	return out
}

// corpusChanges reads the Version markers of every recorded run: change ID → versions recorded.
func corpusChanges(t *testing.T) map[string]map[int]bool {
	t.Helper()
	out := map[string]map[int]bool{}
	for _, f := range corpusFiles(t) {
		for id, version := range fileChanges(t, f) {
			if out[id] == nil {
				out[id] = map[int]bool{}
			}
			out[id][version] = true
		}
	}
	return out
}

// fileChanges reads the Version markers of the recorded run in file f: change ID → version.
func fileChanges(t *testing.T, f string) map[string]int {
	t.Helper()
	dc := converter.GetDefaultDataConverter()
	r, err := os.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	h, err := client.HistoryFromJSON(r, client.HistoryJSONOptions{})
	r.Close()
	if err != nil {
		t.Fatalf("read %s: %v", f, err)
	}
	out := map[string]int{}
	for _, ev := range h.Events {
		m := ev.GetMarkerRecordedEventAttributes()
		if m.GetMarkerName() != "Version" {
			continue
		}
		var id string
		var version int
		if err := dc.FromPayloads(m.GetDetails()["change-id"], &id); err != nil {
			t.Fatalf("%s: event %d: change ID: %v", f, ev.GetEventId(), err)
		}
		if err := dc.FromPayloads(m.GetDetails()["version"], &version); err != nil {
			t.Fatalf("%s: event %d: version: %v", f, ev.GetEventId(), err)
		}
		out[id] = version
	}
	return out
}
