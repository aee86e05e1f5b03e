package ansible

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// testdata/check-mode.json is the stackflow_json output of a real ansible-playbook --check --diff run:
// a loop creating one existing and one new directory, a loop installing a changed file that holds a
// URL-encoded password, a read-only probe (skipped) and a task that reports a restart in check mode.
func TestCheckChanges(t *testing.T) {
	out, err := os.ReadFile("testdata/check-mode.json")
	require.NoError(t, err)
	tests := []struct {
		name      string
		secrets   []string
		max       int
		wantTasks []string
		wantIn    []string
		wantOut   []string
		truncated bool
	}{
		{name: "diffs with the secret redacted in its URL-encoded form", secrets: []string{"S3cr3t/pw"}, max: MaxCheckBytes,
			wantTasks: []string{"Create dirs", "Install files", "Would restart"},
			wantIn:    []string{"/tmp/chk/newdir: state absent -> directory", "-old line", "+new line", "rabbit://nova:" + Redacted + "@h/", "/tmp/chk/d/app.conf (on the host)"},
			wantOut:   []string{"S3cr3t", "/tmp/chk/src.conf", "/tmp/chk/d: "}},
		{name: "no secrets given: the value shows", max: MaxCheckBytes,
			wantTasks: []string{"Create dirs", "Install files", "Would restart"}, wantIn: []string{"S3cr3t%2Fpw"}},
		{name: "bounded", secrets: []string{"S3cr3t/pw"}, max: 40, truncated: true,
			wantTasks: []string{"Create dirs", "Install files", "Would restart"}, wantIn: []string{"diff left out"}, wantOut: []string{"S3cr3t"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			changes, truncated, err := CheckChanges("localhost", out, tc.secrets, tc.max)
			require.NoError(t, err)
			var names []string
			var all strings.Builder
			for _, c := range changes {
				names = append(names, c.Task)
				all.WriteString(strings.Join(c.Items, " ") + "\n" + c.Diff)
			}
			require.Equal(t, tc.wantTasks, names, "only tasks that would change, the probe left out")
			require.Equal(t, tc.truncated, truncated)
			for _, s := range tc.wantIn {
				require.Contains(t, all.String(), s)
			}
			for _, s := range tc.wantOut {
				require.NotContains(t, all.String(), s)
			}
		})
	}
	require.Equal(t, []string{"/tmp/chk/newdir"}, must(CheckChanges("localhost", out, nil, MaxCheckBytes))[0].Items, "only the loop items that would change")
	_, _, err = CheckChanges("localhost", []byte("not json"), nil, MaxCheckBytes)
	require.Error(t, err)
}

func must(c []TaskChange, _ bool, err error) []TaskChange {
	if err != nil {
		panic(err)
	}
	return c
}
