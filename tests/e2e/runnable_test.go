package e2e

import (
	"bufio"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseBlocks(t *testing.T) {
	tests := []struct {
		name    string
		page    string
		want    []Block
		wantErr string
	}{
		{
			name: "only sh blocks run",
			page: "intro\n```sh\necho one\necho two\n```\n```console\nrm -rf /\n```\n```\nplain\n```\n```sh\nls\n```\n",
			want: []Block{{Page: "p.md", Line: 2, Script: "echo one\necho two\n"}, {Page: "p.md", Line: 12, Script: "ls\n"}},
		},
		{
			name: "an sh fence inside another block is text",
			page: "```markdown\n```sh\n```\n",
			want: nil,
		},
		{
			name: "indented blocks, as in a list",
			page: "1. step\n   ```sh\n   kubectl get pods\n   ```\n",
			want: []Block{{Page: "p.md", Line: 2, Script: "   kubectl get pods\n"}},
		},
		{name: "unterminated", page: "```sh\necho\n", wantErr: "not closed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseBlocks("p.md", bufio.NewScanner(strings.NewReader(tc.page)))
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// The pages the suite runs hold runnable blocks, each starting with the eval line that points the tools
// at the stack (tests/samples redirects only the Temporal namespace after it).
func TestRunnablePagesHaveBlocks(t *testing.T) {
	pages, err := RunnablePages("../..")
	require.NoError(t, err)
	require.Contains(t, pages, "README.md")
	require.Greater(t, len(pages), 5, "the operations guides: %v", pages)
	blocks, err := RunnableBlocks("../..", pages...)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(blocks), 4, "runnable blocks")
	for _, b := range blocks {
		first := strings.TrimSpace(strings.SplitN(b.Script, "\n", 2)[0])
		require.Equal(t, EvalLine, first, "%s starts with the eval line", b)
	}
}
