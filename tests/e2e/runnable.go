package e2e

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The documentation's runnable blocks: every fenced block whose info string is exactly "sh", in the
// README and the operations guides, works as pasted into a new shell in the checkout with make run's
// cloud up. tests/samples runs them; blocks that must not run on a shared cloud (they delete, cancel
// or need a site's registry) are fenced as "console" instead.

// Block is one runnable block of a page.
type Block struct {
	// Page is the file, relative to the repository root; Line the block's first line in it (1-based).
	Page string
	Line int
	// Script is the block's text, its lines as written.
	Script string
}

func (b Block) String() string { return fmt.Sprintf("%s:%d", b.Page, b.Line) }

// RunnablePages are the pages whose "sh" blocks are runnable, relative to the repository root: the
// README's tour and every operations guide.
func RunnablePages(root string) ([]string, error) {
	guides, err := filepath.Glob(filepath.Join(root, "docs", "operations", "*.md"))
	if err != nil {
		return nil, fmt.Errorf("operations guides: %w", err)
	}
	pages := []string{"README.md"}
	for _, g := range guides {
		rel, err := filepath.Rel(root, g)
		if err != nil {
			return nil, fmt.Errorf("page %s: %w", g, err)
		}
		pages = append(pages, rel)
	}
	return pages, nil
}

// RunnableBlocks returns the runnable blocks of the pages, in page order and then file order. An
// unterminated fence is an error: the rest of the page would be read as code.
func RunnableBlocks(root string, pages ...string) ([]Block, error) {
	var out []Block
	for _, page := range pages {
		f, err := os.Open(filepath.Join(root, page))
		if err != nil {
			return nil, fmt.Errorf("page %s: %w", page, err)
		}
		blocks, err := parseBlocks(page, bufio.NewScanner(f))
		f.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, blocks...)
	}
	return out, nil
}

func parseBlocks(page string, sc *bufio.Scanner) ([]Block, error) {
	var out []Block
	var cur *Block
	var lines []string
	fence, n := "", 0
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case fence == "" && strings.HasPrefix(trimmed, "```"):
			fence = "```"
			if strings.TrimSpace(strings.TrimPrefix(trimmed, "```")) == "sh" {
				cur, lines = &Block{Page: page, Line: n}, nil
			}
		case fence != "" && trimmed == fence:
			if cur != nil {
				cur.Script = strings.Join(lines, "\n") + "\n"
				out = append(out, *cur)
			}
			fence, cur = "", nil
		case cur != nil:
			lines = append(lines, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("page %s: %w", page, err)
	}
	if fence != "" {
		return nil, fmt.Errorf("page %s: a code block is not closed", page)
	}
	return out, nil
}

// EvalLine is the first line of every runnable block: it puts the pinned tools on the PATH and points
// them at the stack.
const EvalLine = `eval "$(bin/stackflow-local env)"`
