package ansible

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
)

// A check-mode run (PlaybookInput.Check) is ansible-playbook --check --diff: modules that support check
// mode report what they would change without changing it, and the others (command, shell) are skipped,
// so the host is left as it was. The playbooks mark their read-only probes check_mode: false and say in a
// task of their own what a real run would restart.

// TaskChange is one task that would change the host.
type TaskChange struct {
	Task string `json:"task"`
	// Items are the labels of the loop items that would change, when the task loops.
	Items []string `json:"items,omitempty"`
	// Diff is what would change, as a unified diff for file contents and "path: field before -> after"
	// for a path's state; values read from Secrets are replaced by Redacted.
	Diff string `json:"diff,omitempty"`
}

// Redacted stands for a Secret's value in a check-mode diff.
const Redacted = "<redacted>"

// MaxCheckBytes bounds the diffs of one check-mode result (it travels in workflow history).
const MaxCheckBytes = 64 << 10

// checkResults is the part of the stackflow_json callback's document a check-mode run reads.
type checkResults struct {
	Plays []struct {
		Tasks []struct {
			Task struct {
				Name string `json:"name"`
			} `json:"task"`
			Hosts map[string]checkHostResult `json:"hosts"`
		} `json:"tasks"`
	} `json:"plays"`
}

type checkHostResult struct {
	Changed bool            `json:"changed"`
	Skipped bool            `json:"skipped"`
	Diff    json.RawMessage `json:"diff"`
	Results []struct {
		Changed bool            `json:"changed"`
		Diff    json.RawMessage `json:"diff"`
		Item    any             `json:"item"`
		Label   any             `json:"_ansible_item_label"`
	} `json:"results"`
}

// diffEntry is one entry of a module's diff.
type diffEntry struct {
	Before       any    `json:"before"`
	After        any    `json:"after"`
	BeforeHeader string `json:"before_header"`
	AfterHeader  string `json:"after_header"`
	Prepared     string `json:"prepared"`
}

// CheckChanges lists the tasks of a check-mode run that would change host, with their diffs, every
// value of secrets (and its URL-encoded form) replaced by Redacted. The diffs together are bounded to
// maxBytes; truncated says some were left out.
func CheckChanges(host string, stdout []byte, secrets []string, maxBytes int) (changes []TaskChange, truncated bool, err error) {
	var r checkResults
	if err := json.Unmarshal(stdout, &r); err != nil {
		return nil, false, fmt.Errorf("check-mode results: %w", err)
	}
	red := newRedactor(secrets)
	size := 0
	for _, p := range r.Plays {
		for _, t := range p.Tasks {
			h, ok := t.Hosts[host]
			if !ok || !h.Changed {
				continue
			}
			c := TaskChange{Task: t.Task.Name}
			var diffs []string
			if len(h.Results) > 0 {
				for _, it := range h.Results {
					if !it.Changed {
						continue
					}
					label := it.Label
					if label == nil {
						label = it.Item
					}
					c.Items = append(c.Items, red(fmt.Sprint(valueOr(label, ""))))
					diffs = append(diffs, renderDiff(it.Diff, red)...)
				}
			} else {
				diffs = renderDiff(h.Diff, red)
			}
			c.Diff = strings.Join(diffs, "")
			if size+len(c.Diff) > maxBytes {
				c.Diff = fmt.Sprintf("(diff left out: a check-mode result's diffs are bounded to %d KiB)\n", maxBytes>>10)
				truncated = true
			}
			size += len(c.Diff)
			changes = append(changes, c)
		}
	}
	return changes, truncated, nil
}

// newRedactor returns a function that replaces every secret value (longest first, so a value holding
// another is replaced whole) and its URL-encoded forms.
func newRedactor(secrets []string) func(string) string {
	seen := map[string]bool{}
	var vals []string
	for _, s := range secrets {
		for _, v := range []string{s, strings.TrimSpace(s), url.QueryEscape(s), url.PathEscape(s)} {
			if v != "" && !seen[v] {
				seen[v] = true
				vals = append(vals, v)
			}
		}
	}
	sort.Slice(vals, func(i, j int) bool { return len(vals[i]) > len(vals[j]) })
	return func(s string) string {
		for _, v := range vals {
			s = strings.ReplaceAll(s, v, Redacted)
		}
		return s
	}
}

// renderDiff renders a module's diff (one entry or a list of them).
func renderDiff(raw json.RawMessage, red func(string) string) []string {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var entries []diffEntry
	if raw[0] == '[' {
		if err := json.Unmarshal(raw, &entries); err != nil {
			return []string{red(string(raw)) + "\n"}
		}
	} else {
		var e diffEntry
		if err := json.Unmarshal(raw, &e); err != nil {
			return []string{red(string(raw)) + "\n"}
		}
		entries = []diffEntry{e}
	}
	var out []string
	for _, e := range entries {
		if e.Prepared != "" {
			out = append(out, red(e.Prepared))
			continue
		}
		bs, bok := e.Before.(string)
		as, aok := e.After.(string)
		if bok || aok {
			text, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
				A: difflib.SplitLines(red(bs)), B: difflib.SplitLines(red(as)),
				// The "after" header of a copy is the worker's temporary file: both sides name the host's path.
				FromFile: valueOrString(e.BeforeHeader, "before") + " (on the host)", ToFile: valueOrString(e.BeforeHeader, "after") + " (after a run)", Context: 2,
			})
			out = append(out, text)
			continue
		}
		out = append(out, red(stateDiff(e.Before, e.After)))
	}
	return out
}

// stateDiff renders the fields of a path's state that differ ("/etc/x: state absent -> directory").
func stateDiff(before, after any) string {
	b, _ := before.(map[string]any)
	a, _ := after.(map[string]any)
	p := a["path"]
	if p == nil {
		p = b["path"]
	}
	path := fmt.Sprint(valueOr(p, ""))
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var sb strings.Builder
	for _, k := range keys {
		if k == "path" {
			continue
		}
		bv, av := fmt.Sprint(valueOr(b[k], "-")), fmt.Sprint(valueOr(a[k], "-"))
		if bv != av {
			fmt.Fprintf(&sb, "%s: %s %s -> %s\n", path, k, bv, av)
		}
	}
	return sb.String()
}

func valueOrString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
