package stack

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apenella/go-ansible/v2/pkg/execute"
	"github.com/apenella/go-ansible/v2/pkg/playbook"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/tests/e2e"
)

// markerPlaybook writes a file named after the host into /etc/stackflow, holding the host's name and two
// gathered facts, and checks the host reaches a service on the gateway address.
const markerPlaybook = `- hosts: all
  gather_facts: true
  gather_subset: [network]
  tasks:
    - name: reach the machine's service on the gateway
      ansible.builtin.wait_for:
        host: "{{ gateway }}"
        port: "{{ gateway_port | int }}"
        timeout: 20
    - name: write this host's marker
      ansible.builtin.copy:
        dest: "/etc/stackflow/{{ marker_prefix }}{{ inventory_hostname }}"
        content: "{{ inventory_hostname }} {{ ansible_hostname }} {{ ansible_default_ipv4.address }}\n"
        mode: "0644"
`

func TestHostsPlaybookWritesOnlyItsOwnHost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	hosts := st.TestHosts
	require.GreaterOrEqual(t, len(hosts), 2, "isolation needs at least two test hosts")

	// A service on the gateway address, as RabbitMQ or Keystone will be: every host must reach it.
	ln, err := net.Listen("tcp", net.JoinHostPort(local.HostGateway, "0"))
	require.NoError(t, err)
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()

	prefix := fmt.Sprintf("stack-test-%d-", time.Now().UnixNano())
	marker := func(h local.TestHost) string { return prefix + h.Name }
	t.Cleanup(func() {
		for _, h := range hosts {
			_ = os.Remove(filepath.Join(h.Root, "etc", "stackflow", marker(h)))
		}
	})

	dir := t.TempDir()
	book := filepath.Join(dir, "marker.yaml")
	require.NoError(t, os.WriteFile(book, []byte(markerPlaybook), 0o644))
	var out bytes.Buffer
	run := execute.NewDefaultExecute(
		execute.WithCmd(playbook.NewAnsiblePlaybookCmd(
			playbook.WithPlaybooks(book),
			playbook.WithPlaybookOptions(&playbook.AnsiblePlaybookOptions{
				Inventory: st.Path(local.HostsInventory),
				Forks:     "20",
				ExtraVars: map[string]any{
					"marker_prefix": prefix,
					"gateway":       local.HostGateway,
					"gateway_port":  ln.Addr().(*net.TCPAddr).Port,
				},
			}),
		)),
		execute.WithEnvVars(map[string]string{
			"ANSIBLE_LOCAL_TEMP":           filepath.Join(dir, "local"),
			"ANSIBLE_SSH_CONTROL_PATH_DIR": filepath.Join(dir, "cp"),
			// On the host's private /run/stackflow, so no host sees another's modules either.
			"ANSIBLE_REMOTE_TEMP": "/run/stackflow/ansible-tmp",
			"ANSIBLE_NOCOLOR":     "1",
			// Fewer SSH round trips per task: 20 hosts on two shared cores.
			"ANSIBLE_PIPELINING": "True",
		}),
		execute.WithWrite(&out),
		execute.WithWriteError(&out),
	)
	start := time.Now()
	require.NoError(t, run.Execute(ctx), "ansible-playbook:\n%s", out.String())
	t.Logf("playbook on %d hosts in %s", len(hosts), time.Since(start).Round(time.Millisecond))
	require.GreaterOrEqual(t, int(accepted.Load()), len(hosts), "hosts reached the gateway service")

	// Through SSH, one session per host: the host holds its own marker, written with facts gathered on
	// it, and none of the others'.
	seen := make([]string, len(hosts))
	var wg sync.WaitGroup
	slots := make(chan struct{}, 8)
	for i, h := range hosts {
		var others []string
		for _, o := range hosts {
			if o.Name != h.Name {
				others = append(others, "/etc/stackflow/"+marker(o))
			}
		}
		script := fmt.Sprintf("cat /etc/stackflow/%s; echo %s; ls -1A /etc/stackflow; echo %s; for f in %s; do if [ -e \"$f\" ]; then echo \"$f\"; fi; done",
			marker(h), sshSeparator, sshSeparator, strings.Join(others, " "))
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			seen[i] = sshHost(ctx, h, script)
		}()
	}
	wg.Wait()
	for i, h := range hosts {
		parts := strings.Split(seen[i], sshSeparator+"\n")
		require.Len(t, parts, 3, "ssh %s: %s", h.Name, seen[i])
		require.Equal(t, fmt.Sprintf("%s %s %s\n", h.Name, h.Name, h.Address), parts[0], "marker on %s", h.Name)
		require.Equal(t, []string{marker(h)}, withPrefix(strings.Fields(parts[1]), prefix), "markers listed on %s", h.Name)
		require.Empty(t, parts[2], "other hosts' markers visible on %s", h.Name)

		// On the machine: the host's private root holds exactly its own marker.
		entries, err := os.ReadDir(filepath.Join(h.Root, "etc", "stackflow"))
		require.NoError(t, err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		require.Equal(t, []string{marker(h)}, withPrefix(names, prefix), "markers in %s's root", h.Name)
	}

	// The machine's own /etc/stackflow (possibly absent) holds none of them.
	entries, err := os.ReadDir("/etc/stackflow")
	if !os.IsNotExist(err) {
		require.NoError(t, err)
	}
	for _, e := range entries {
		require.False(t, strings.HasPrefix(e.Name(), prefix), "host marker %s leaked into the machine's /etc/stackflow", e.Name())
	}

	// The hosts' key is published for the product's Ansible activities when Kubernetes is part of the stack.
	if st.Kubeconfig != "" {
		require.Equal(t, local.SystemNamespace+"/edpm-ssh-key", st.SSHKeySecret)
		cs, err := st.KubeClient()
		require.NoError(t, err)
		sec, err := cs.CoreV1().Secrets(local.SystemNamespace).Get(ctx, "edpm-ssh-key", metav1.GetOptions{})
		require.NoError(t, err)
		pub, err := os.ReadFile(filepath.Join(hosts[0].Root, "..", "authorized_keys"))
		require.NoError(t, err)
		require.Equal(t, string(pub), string(sec.Data["ssh-publickey"]), "published key is the one the hosts authorize")
		require.Contains(t, string(sec.Data["ssh-privatekey"]), "PRIVATE KEY")
	}
}

// sshSeparator separates the sections of a remote check's output.
const sshSeparator = "-----"

// sshHost runs a shell command on the host as its user with the hosts' key; a failure shows in the
// output, which the caller checks.
func sshHost(ctx context.Context, h local.TestHost, command string) string {
	out, err := exec.CommandContext(ctx, "ssh", append(st.SSHArgs(h), command)...).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("ssh failed: %v: %s", err, out)
	}
	return string(out)
}

func withPrefix(names []string, prefix string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// TestLeakCheckSeesAProcessOnAHost: the host check the end-to-end tests run after a teardown
// (e2e.Leftovers, behind CleanHost and RequireRemoved) reports a nova-compute left running on a test
// host, found through the host's network namespace, and stops reporting it once it is gone.
func TestLeakCheckSeesAProcessOnAHost(t *testing.T) {
	h := st.TestHosts[0]
	// A process with nova-compute's command line, in the host's namespace, as a teardown could leave it.
	proc := exec.Command("ip", "netns", "exec", h.Namespace, "bash", "-c", "exec -a 'python3 -m nova.cmd.compute' sleep 300")
	require.NoError(t, proc.Start())
	done := make(chan struct{})
	go func() { _ = proc.Wait(); close(done) }()
	t.Cleanup(func() { _ = proc.Process.Kill(); <-done })

	nova := e2e.HostServices[0]
	require.Equal(t, "nova-compute", nova.Name)
	want := fmt.Sprintf("nova-compute runs (pid %d)", proc.Process.Pid)
	var left []string
	require.Eventually(t, func() bool {
		left = e2e.Leftovers(h, nova)
		return slices.Contains(left, want)
	}, 10*time.Second, 100*time.Millisecond, "the check reports the process on %s: %v", h.Name, left)

	require.NoError(t, proc.Process.Kill())
	<-done
	require.Eventually(t, func() bool {
		left = e2e.Leftovers(h, nova)
		return !slices.Contains(left, want)
	}, 10*time.Second, 100*time.Millisecond, "the check still reports the killed process: %v", left)
}
