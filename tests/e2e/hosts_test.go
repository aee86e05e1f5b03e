package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stackflow/stackflow/deploy/local"
)

// TestLeftoversFindsWhatATeardownLeft: the host check flags each file a service's teardown must remove
// and passes the empty directories phase 0 makes and phase 0's own records. (Processes are found by the
// host's network namespace, which only the stack has.)
func TestLeftoversFindsWhatATeardownLeft(t *testing.T) {
	tests := []struct {
		name  string
		dirs  []string
		files []string
		want  []string
	}{
		{name: "a clean host"},
		{name: "phase 0's empty service directories", dirs: []string{"etc/nova", "var/lib/nova", "var/lib/neutron"}},
		{name: "phase 0's records", files: []string{"etc/edpm/network/ifcfg", "var/log/nova/nova-compute.log"}},
		{name: "nova-compute's configuration", files: []string{"etc/nova/nova.conf.d/01-nova.conf"},
			want: []string{"nova-compute's /etc/nova holds nova.conf.d/01-nova.conf"}},
		{name: "its version record and a checkpoint", files: []string{"etc/stackflow/nova-compute.version", "var/lib/stackflow/checkpoints/upd-0"},
			want: []string{"nova-compute's /etc/stackflow/nova-compute.version remains", "nova-compute's /var/lib/stackflow/checkpoints holds upd-0"}},
		{name: "the metadata agent's pid file", files: []string{"run/stackflow/ovn-metadata-agent.pid"},
			want: []string{"ovn-metadata-agent's /run/stackflow/ovn-metadata-agent.pid remains"}},
	}
	noProcesses(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for _, d := range tt.dirs {
				require.NoError(t, os.MkdirAll(filepath.Join(root, d), 0o755))
			}
			for _, f := range tt.files {
				require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(root, f), []byte("x\n"), 0o644))
			}
			require.Equal(t, tt.want, Leftovers(local.TestHost{Name: "h", Namespace: "stackflow-no-such-netns", Root: root}))
		})
	}
}

// noProcesses makes the host check see no process on any host for the rest of the test.
func noProcesses(t *testing.T) {
	t.Helper()
	orig := listNetnsPIDs
	t.Cleanup(func() { listNetnsPIDs = orig })
	listNetnsPIDs = func(string) ([]int, error) { return nil, nil }
}

// The host check fails closed: a host whose processes cannot be listed is reported, never taken as
// clean, and a process running a service's command is reported with its PID.
func TestLeftoversReportsProcessesAndFailsClosed(t *testing.T) {
	// A process whose command line is nova-compute's, as the check matches it.
	proc := exec.Command("bash", "-c", "exec -a 'python3 -m nova.cmd.compute' sleep 60")
	require.NoError(t, proc.Start())
	t.Cleanup(func() { _ = proc.Process.Kill(); _ = proc.Wait() })
	// Until bash has exec'd, the command line is bash's: wait for the one the check is to see.
	cmdline := fmt.Sprintf("/proc/%d/cmdline", proc.Process.Pid)
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(cmdline)
		return err == nil && strings.HasPrefix(string(b), "python3 -m nova.cmd.compute\x00")
	}, 10*time.Second, 10*time.Millisecond, "the stand-in's command line")
	host := local.TestHost{Name: "h", Namespace: "stackflow-test-netns", Root: t.TempDir()}
	orig := listNetnsPIDs
	t.Cleanup(func() { listNetnsPIDs = orig })

	tests := []struct {
		name string
		list func(string) ([]int, error)
		want []string
	}{
		{name: "a running nova-compute", list: func(string) ([]int, error) { return []int{proc.Process.Pid}, nil },
			want: []string{fmt.Sprintf("nova-compute runs (pid %d)", proc.Process.Pid)}},
		{name: "a process that ended since the listing", list: func(string) ([]int, error) { return []int{1 << 30}, nil }},
		{name: "a listing that fails", list: func(string) ([]int, error) { return nil, errors.New("no such namespace") },
			want: []string{"the processes of host h cannot be read: no such namespace"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			listNetnsPIDs = tt.list
			require.Equal(t, tt.want, Leftovers(host))
		})
	}
	// The real listing of a namespace that does not exist is an error, not an empty list.
	_, err := netnsPIDs("stackflow-no-such-netns")
	require.Error(t, err)
}
