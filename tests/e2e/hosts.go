package e2e

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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

// HostService is a service stackflow runs on an EDPM host, and what its teardown must leave behind:
// no process and none of its files.
type HostService struct {
	Name string
	// Match is a part of the process's command line.
	Match string
	// Files are paths of the host's own filesystem (relative to its root) that must be gone or empty.
	Files []string
}

// HostServices are the services of phase 1 that deleting their object removes from the host.
var HostServices = []HostService{
	{Name: "nova-compute", Match: "nova.cmd.compute",
		Files: []string{"etc/nova", "var/lib/nova", "etc/stackflow/nova-compute.version", "var/lib/stackflow/checkpoints", "run/stackflow/nova-compute.pid"}},
	{Name: "ovn-metadata-agent", Match: "agents.ovn_metadata",
		Files: []string{"etc/neutron/neutron_ovn_metadata_agent.conf.d", "var/lib/neutron", "run/stackflow/ovn-metadata-agent.pid"}},
}

// OVNChassis is what a node's ovn step runs on its host and the node's deletion removes: Open vSwitch and
// ovn-controller (deleting a node undoes its ovn step, unlike the rest of phase 0: the host leaves the
// cloud's network).
var OVNChassis = HostService{Name: "ovn-chassis", Match: "/run/openvswitch",
	Files: []string{"etc/openvswitch/conf.db", "run/ovn/ovn-controller.pid", "run/openvswitch/ovsdb-server.pid", "run/openvswitch/ovs-vswitchd.pid", "var/lib/ovn", "var/lib/openvswitch"}}

// hostRecords are what a test host keeps of phase 0 (which deleting a node leaves on the host, as on a
// real one) and its own step log, the test's record of which playbooks ran: a host is re-imaged between
// tests by clearing them.
var hostRecords = []string{"etc/edpm", "var/lib/edpm", "var/log/stackflow", "var/log/nova", "var/log/neutron", "var/log/openvswitch", "var/log/ovn"}

// Leftovers lists what of its services still runs or remains on the host: each a process (with its
// PID) or a file that a teardown should have removed.
func Leftovers(h local.TestHost, services ...HostService) []string {
	if len(services) == 0 {
		services = append(slices.Clone(HostServices), OVNChassis)
	}
	var out []string
	// Fail closed: a host whose processes cannot be listed is not a clean host.
	pids, err := listNetnsPIDs(h.Namespace)
	if err != nil {
		out = append(out, fmt.Sprintf("the processes of host %s cannot be read: %v", h.Name, err))
	}
	for _, pid := range pids {
		cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if errors.Is(err, fs.ErrNotExist) {
			continue // it ended since the listing
		}
		if err != nil {
			out = append(out, fmt.Sprintf("the command line of pid %d on host %s cannot be read: %v", pid, h.Name, err))
			continue
		}
		for _, s := range services {
			if strings.Contains(string(cmd), s.Match) {
				out = append(out, fmt.Sprintf("%s runs (pid %d)", s.Name, pid))
			}
		}
	}
	for _, s := range services {
		for _, f := range s.Files {
			p := filepath.Join(h.Root, f)
			st, err := os.Stat(p)
			switch {
			case err != nil:
			case !st.IsDir():
				out = append(out, fmt.Sprintf("%s's /%s remains", s.Name, f))
			default:
				// Empty directories are phase 0's (configure-os makes the services' directories).
				if files := filesUnder(p); len(files) > 0 {
					out = append(out, fmt.Sprintf("%s's /%s holds %s", s.Name, f, strings.Join(files, ", ")))
				}
			}
		}
	}
	return out
}

// Freeze stops a service's processes on the host (SIGSTOP) and returns what resumes them (SIGCONT, also
// run when the test ends). A test holds a step open with it until its kill has landed: a live migration
// waits on its destination's nova-compute, so with that one frozen the drain stays in flight (Nova's call
// to the destination gives up after rpc_response_timeout, 60 s by default: thaw well before).
func Freeze(t testing.TB, h local.TestHost, s HostService) (thaw func()) {
	t.Helper()
	pids, err := servicePIDs(h, s)
	require.NoError(t, err)
	require.NotEmpty(t, pids, "no %s runs on host %s to freeze", s.Name, h.Name)
	for _, pid := range pids {
		require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP), "freeze %s (pid %d) on %s", s.Name, pid, h.Name)
	}
	var once sync.Once
	thaw = func() {
		once.Do(func() {
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGCONT)
			}
		})
	}
	t.Cleanup(thaw)
	return thaw
}

// servicePIDs are the PIDs of the service's processes on the host.
func servicePIDs(h local.TestHost, s HostService) ([]int, error) {
	pids, err := listNetnsPIDs(h.Namespace)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, pid := range pids {
		cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && strings.Contains(string(cmd), s.Match) {
			out = append(out, pid)
		}
	}
	return out, nil
}

// NovaCompute is the host's nova-compute among HostServices.
func NovaCompute() HostService { return HostServices[0] }

// filesUnder lists the files (not directories) under dir, relative to it, the first few.
func filesUnder(dir string) []string {
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if len(out) == 5 {
			out = append(out, "…")
			return filepath.SkipAll
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, rel)
		return nil
	})
	return out
}

// listNetnsPIDs lists a host's processes; unit tests replace it, having no network namespaces.
var listNetnsPIDs = netnsPIDs

// netnsPIDs are the processes in a network namespace. A namespace that cannot be read (gone, no rights)
// or output that is not a list of PIDs is an error, never an empty list.
func netnsPIDs(netns string) ([]int, error) {
	var stderr strings.Builder
	c := exec.Command("ip", "netns", "pids", netns)
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return nil, fmt.Errorf("ip netns pids %s: %w: %s", netns, err, strings.TrimSpace(stderr.String()))
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("ip netns pids %s printed %q: %w", netns, f, err)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// RequireRemoved fails the test unless the named services' teardown left nothing on the host (see
// HostServices), waiting up to a few seconds for a process on its way out.
func RequireRemoved(t testing.TB, h local.TestHost, service ...string) {
	t.Helper()
	var want []HostService
	for _, s := range append(slices.Clone(HostServices), OVNChassis) {
		if slices.Contains(service, s.Name) {
			want = append(want, s)
		}
	}
	var left []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if left = Leftovers(h, want...); len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Fatalf("host %s after teardown of %v: %s", h.Name, service, strings.Join(left, "; "))
	}
}

// CleanHost starts a test on host h. What a service teardown must remove (HostServices) is never
// removed here: found at the start, it fails the test (an earlier test or run leaked it), and the test
// checks at its end, after its own objects were deleted, that their teardown left none. Phase 0's records
// and the step log are cleared (the host is re-imaged: deleting a node leaves phase 0's configuration, as
// on a real host).
func CleanHost(t testing.TB, h local.TestHost) {
	t.Helper()
	if err := prepareHost(h); err != nil {
		t.Fatal(err)
	}
	// Registered before the test creates its objects, so it runs after their deletion (cleanups run last
	// first).
	t.Cleanup(func() {
		if left := Leftovers(h); len(left) > 0 && !t.Failed() {
			t.Errorf("host %s after the test's objects were deleted (a teardown that leaked): %s", h.Name, strings.Join(left, "; "))
		}
	})
}

// PrepareHost starts a test that leaves its services on host h when it passes (tests/samples leaves
// make run's cloud up for the packages that compose on it): leftovers of an earlier run fail it as in
// CleanHost, but the end check is left to the test that tears the services down.
func PrepareHost(t testing.TB, h local.TestHost) {
	t.Helper()
	if err := prepareHost(h); err != nil {
		t.Fatal(err)
	}
}

// prepareHost is CleanHost's start: leftovers are an error, phase 0's records and the step log go.
func prepareHost(h local.TestHost) error {
	if left := Leftovers(h); len(left) > 0 {
		return fmt.Errorf("host %s holds leftovers of an earlier test or run (a teardown that leaked): %s", h.Name, strings.Join(left, "; "))
	}
	for _, d := range hostRecords {
		entries, _ := os.ReadDir(filepath.Join(h.Root, d))
		for _, en := range entries {
			if err := os.RemoveAll(filepath.Join(h.Root, d, en.Name())); err != nil {
				return fmt.Errorf("re-image host %s: %w", h.Name, err)
			}
		}
	}
	return nil
}

// HostFile is a file of the host's own filesystem ("" when missing).
func HostFile(h local.TestHost, path string) string {
	b, err := os.ReadFile(filepath.Join(h.Root, path))
	if err != nil {
		return ""
	}
	return string(b)
}

// StepLog is the host's own record of the playbook steps that ran on it to the end: step → runs (each
// playbook appends its step as its last task).
func StepLog(h local.TestHost) map[string]int {
	out := map[string]int{}
	for _, line := range strings.Split(HostFile(h, "var/log/stackflow/edpm-steps.log"), "\n") {
		if f := strings.Fields(line); len(f) >= 2 {
			out[f[1]]++
		}
	}
	return out
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

// HostSnapshot is every file under the host's dirs (relative to its root) with its mode and the SHA-256
// of its content: two equal snapshots mean those trees are byte-for-byte the same.
func HostSnapshot(t testing.TB, h local.TestHost, dirs ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, d := range dirs {
		root := filepath.Join(h.Root, d)
		err := filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := e.Info()
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(h.Root, p)
			if e.IsDir() {
				out[rel+"/"] = info.Mode().String()
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = fmt.Sprintf("%s %x", info.Mode(), sha256.Sum256(b))
			return nil
		})
		if err != nil && !os.IsNotExist(err) {
			t.Fatalf("snapshot of %s on %s: %v", d, h.Name, err)
		}
	}
	return out
}
