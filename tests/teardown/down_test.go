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
	"syscall"
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
		err := syscall.Kill(pid, 0)
		require.ErrorIs(t, err, syscall.ESRCH, "process %s (pid %d) survived down", name, pid)
	}
	require.Empty(t, s.StartedPIDs(), "PID files of live processes remain")
	// Nothing else may still run from the state directory (children that escaped their group).
	require.Empty(t, processesUsing(s.StateDir), "processes still use the state directory")
	for _, h := range s.TestHosts {
		out, _ := exec.Command("ip", "netns", "list").Output()
		require.NotContains(t, string(out), h.Namespace, "namespace of %s remains", h.Name)
	}
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
