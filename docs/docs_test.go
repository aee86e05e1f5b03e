// Package docs holds the documentation set; its test keeps the README a front door and the docs true to
// the code: sizes, links, no run diaries, and every condition reason explained.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

const root = ".."

// pages are the README and every Markdown file under docs/, relative to the repository root.
func pages(t *testing.T) []string {
	t.Helper()
	out := []string{"README.md"}
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			out = append(out, filepath.Join("docs", p))
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, len(out), 10, "the documentation set: %v", out)
	return out
}

func read(t *testing.T, page string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, page))
	require.NoError(t, err)
	return string(b)
}

func TestReadmeIsAFrontDoor(t *testing.T) {
	s := read(t, "README.md")
	require.LessOrEqual(t, len(s), 20*1024, "README.md bytes")
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	require.LessOrEqual(t, len(lines), 220, "README.md lines")
	for i, l := range lines {
		require.LessOrEqual(t, utf8.RuneCountInString(l), 120, "README.md:%d is over 120 columns", i+1)
	}
	// The two commands come first.
	first := strings.Index(s, "```console\nmake run")
	require.True(t, first >= 0 && first < 1024, "make run in the README's first screen")
	require.Contains(t, s[first:first+600], "make test")
}

func TestTheSetIsComplete(t *testing.T) {
	for _, p := range []string{"docs/README.md", "docs/architecture.md", "docs/reference/kinds.md",
		"docs/local-stack.md", "docs/development.md", "docs/benchmarks.md", "docs/operations/README.md",
		"docs/operations/install.md", "docs/operations/upgrade.md", "docs/operations/day2-update.md",
		"docs/operations/scale-in.md", "docs/operations/limited-runs.md", "docs/operations/preview.md",
		"docs/operations/steering.md", "docs/operations/troubleshooting.md"} {
		_, err := os.Stat(filepath.Join(root, p))
		require.NoError(t, err, "the documentation set has %s", p)
	}
}

// Docs state what is true now; history lives in git.
func TestNoDiaries(t *testing.T) {
	diary := regexp.MustCompile(`\b20\d\d-[01]\d-[0-3]\d\b|(?i)\bsession\b|\b(forty|thirty|twenty)-?\w*th\b`)
	for _, p := range pages(t) {
		if p == "docs/reference/kinds.md" {
			continue // generated from the Go types
		}
		for i, l := range strings.Split(read(t, p), "\n") {
			if m := diary.FindString(l); m != "" {
				t.Errorf("%s:%d: %q: docs say what is true now, without dates or run diaries", p, i+1, m)
			}
		}
	}
}

// Every relative link points at a file of the tree.
func TestLinksResolve(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, p := range pages(t) {
		if p == "docs/reference/kinds.md" {
			continue // generated; its validation patterns read like links
		}
		for _, m := range link.FindAllStringSubmatch(read(t, p), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			_, err := os.Stat(filepath.Join(root, filepath.Dir(p), target))
			require.NoError(t, err, "%s links to %s", p, m[1])
		}
	}
}

// Every reason a condition can carry (the Reason… and Err… constants of api/, workflows/ and
// activities/) is explained in the troubleshooting guide.
func TestEveryReasonIsExplained(t *testing.T) {
	constant := regexp.MustCompile(`\b(?:Reason|Err)[A-Za-z0-9]*\s*=\s*"([A-Za-z]+)"`)
	reasons := map[string]string{}
	for _, dir := range []string{"api", "workflows", "activities"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range constant.FindAllStringSubmatch(string(b), -1) {
				reasons[m[1]] = p
			}
			return nil
		})
		require.NoError(t, err)
	}
	require.Greater(t, len(reasons), 50, "the code's reasons")
	guide := read(t, "docs/operations/troubleshooting.md")
	var missing []string
	for r, p := range reasons {
		if !strings.Contains(guide, "| `"+r+"` |") {
			missing = append(missing, r+" ("+p+")")
		}
	}
	sort.Strings(missing)
	require.Empty(t, missing, "reasons not explained in docs/operations/troubleshooting.md")
}
