package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stackflow/stackflow/deploy/local"
)

// The stack's EDPM test hosts as tests see them: by name, reset to a clean filesystem, and their files.

// Host returns the stack's test host by name; an unknown name fails the test.
func (e *Env) Host(t testing.TB, name string) local.TestHost {
	t.Helper()
	for _, h := range e.Stack.TestHosts {
		if h.Name == name {
			return h
		}
	}
	t.Fatalf("no test host %s", name)
	return local.TestHost{}
}

// ResetHost stops the services an earlier run left on the host and clears what the playbooks write, so
// every check of the host's filesystem sees only this run.
func ResetHost(t testing.TB, h local.TestHost) {
	t.Helper()
	for _, pidf := range []string{"run/stackflow/nova-compute.pid", "run/stackflow/ovn-metadata-agent.pid"} {
		if b, err := os.ReadFile(filepath.Join(h.Root, pidf)); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	// etc/stackflow and var/lib/stackflow hold the installed nova-compute version and the update's
	// checkpoints: a reused host showed an earlier run's version as its starting one.
	for _, d := range []string{"etc/edpm", "var/lib/edpm", "etc/nova", "var/lib/nova", "var/log/nova", "var/log/stackflow", "run/stackflow", "etc/neutron", "etc/stackflow", "var/lib/stackflow"} {
		entries, _ := os.ReadDir(filepath.Join(h.Root, d))
		for _, en := range entries {
			if err := os.RemoveAll(filepath.Join(h.Root, d, en.Name())); err != nil {
				t.Fatalf("reset host %s: %v", h.Name, err)
			}
		}
	}
}

// HostFile is a file of the host's own filesystem ("" when missing).
func HostFile(h local.TestHost, path string) string {
	b, err := os.ReadFile(filepath.Join(h.Root, path))
	if err != nil {
		return ""
	}
	return string(b)
}

// ReadFile reads a file of this machine; a failure fails the test.
func ReadFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
