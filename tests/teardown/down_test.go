//go:build teardown

// Package teardown proves that `down` stops everything `up` started. It runs last in `make test`
// (build tag teardown), because it stops the shared stack.
package teardown

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stackflow/stackflow/deploy/local"
)

func TestDownLeavesNoProcessUpStarted(t *testing.T) {
	s, err := local.Load("")
	require.NoError(t, err)
	started := s.StartedPIDs()
	require.NotEmpty(t, started, "the stack must be running before down")
	t.Logf("up started %d processes: %v", len(started), started)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	require.NoError(t, local.Down(ctx, local.Options{}))

	for name, pid := range started {
		require.False(t, running(pid), "process %s (pid %d) survived down", name, pid)
	}
	require.Empty(t, s.StartedPIDs(), "PID files of live processes remain")
	// Nothing else may still run from the state directory (children that escaped their group).
	require.Empty(t, processesUsing(s.StateDir), "processes still use the state directory")
	for _, h := range s.TestHosts {
		out, _ := exec.Command("ip", "netns", "list").Output()
		require.NotContains(t, string(out), h.Namespace, "namespace of %s remains", h.Name)
	}
}

// running is true while pid exists and is not a zombie (a zombie has exited; only its parent's
// bookkeeping remains, and an init that does not reap leaves it there).
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	stat := string(b)
	fields := strings.Fields(stat[strings.LastIndexByte(stat, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

// processesUsing lists live processes whose command line mentions dir.
func processesUsing(dir string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	self := fmt.Sprint(os.Getpid())
	for _, e := range entries {
		if e.Name() == self {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(b) == 0 {
			continue
		}
		cmd := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cmd, dir) {
			out = append(out, e.Name()+": "+cmd)
		}
	}
	return out
}
