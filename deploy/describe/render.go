package describe

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// RenderOptions say what Render shows besides the tree.
type RenderOptions struct {
	// Workflows adds each object's workflow ID and Temporal UI link under its line.
	Workflows bool
}

// row is one printed line: the columns of an object, or (detail set) a line of text under one.
type row struct {
	cols   [5]string
	detail string
}

// Render writes the trees as aligned lines: OBJECT (the tree, KIND/NAME), READY, PHASE, AGE, and the
// current step or, while not Ready, the reason. Namespaced objects are grouped under their namespace. A
// failing line is marked ✗ and its message follows in full; detail lines do not widen the columns.
func Render(w io.Writer, roots []*Node, opts RenderOptions) error {
	rows := []row{{cols: [5]string{"OBJECT", "READY", "PHASE", "AGE", "STEP / REASON"}}}
	ns := "\x00"
	for _, r := range roots {
		if r.Namespace != ns {
			ns = r.Namespace
			if ns == "" {
				rows = append(rows, row{detail: "(cluster-scoped)"})
			} else {
				rows = append(rows, row{detail: "namespace " + ns})
			}
		}
		rows = appendRows(rows, r, "", "", opts)
	}
	var width [4]int
	for _, r := range rows {
		if r.detail != "" {
			continue
		}
		for i := range width {
			width[i] = max(width[i], utf8.RuneCountInString(r.cols[i]))
		}
	}
	for _, r := range rows {
		var line string
		if r.detail != "" {
			line = r.detail
		} else {
			var b strings.Builder
			for i := range width {
				b.WriteString(r.cols[i])
				b.WriteString(strings.Repeat(" ", width[i]-utf8.RuneCountInString(r.cols[i])+2))
			}
			b.WriteString(r.cols[4])
			line = b.String()
		}
		if _, err := fmt.Fprintln(w, strings.TrimRight(line, " ")); err != nil {
			return err
		}
	}
	return nil
}

// appendRows adds n's rows, first before its own line and rest before its children's and its detail
// lines.
func appendRows(rows []row, n *Node, first, rest string, opts RenderOptions) []row {
	mark := ""
	if n.Failing {
		mark = "✗ "
	}
	what := n.Kind + "/" + n.Name
	if n.Ref {
		what = "→ " + what
	}
	rows = append(rows, row{cols: [5]string{first + mark + what, dash(n.Ready), dash(n.Phase), n.Age, summary(n)}})
	detail := rest
	if len(n.Children) > 0 {
		detail += "│ "
	} else {
		detail += "  "
	}
	if n.Failing && n.Message != "" {
		for _, line := range strings.Split(strings.TrimSpace(n.Message), "\n") {
			rows = append(rows, row{detail: detail + "    " + line})
		}
	}
	if opts.Workflows && n.WorkflowID != "" && !n.Ref {
		rows = append(rows, row{detail: detail + "    workflow " + n.WorkflowID})
		if n.WorkflowURL != "" {
			rows = append(rows, row{detail: detail + "    " + n.WorkflowURL})
		}
	}
	for i, c := range n.Children {
		if i == len(n.Children)-1 {
			rows = appendRows(rows, c, rest+"└─ ", rest+"   ", opts)
		} else {
			rows = appendRows(rows, c, rest+"├─ ", rest+"│  ", opts)
		}
	}
	return rows
}

// summary is the last column: the note, then the current step, or while not Ready its reason (with a
// message that is not shown in full elsewhere, cut short).
func summary(n *Node) string {
	var parts []string
	if n.Note != "" {
		parts = append(parts, n.Note)
	}
	switch {
	case n.Failing:
		// Why first, then where it stopped; the message follows in full.
		for _, p := range []string{n.Reason, n.Step} {
			if p != "" {
				parts = append(parts, p)
			}
		}
	case n.Step != "":
		parts = append(parts, n.Step)
	case n.Ready != "True" && n.Reason != "":
		r := n.Reason
		if !n.Failing && n.Message != "" {
			r += ": " + cut(n.Message, 100)
		}
		parts = append(parts, r)
	case n.Ready != "True" && n.Message != "" && !n.Failing:
		parts = append(parts, cut(n.Message, 100))
	}
	return strings.Join(parts, " · ")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func cut(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
