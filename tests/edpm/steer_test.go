package edpm

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/tests/e2e"
)

// cli is how a person steers a workflow from a shell: the recipes of docs/operations/steering.md for one command-line tool,
// through the stack's TLS front (mutual TLS and the API key) with the codec endpoint decoding payloads.
type cli struct {
	name string
	// env is what `eval "$(bin/stackflow-local env)"` exports for the tool, for the test's namespace.
	env []string
	// signal, query, cancel and show are docs/operations/steering.md's commands for the tool.
	signal func(id, name, input string) []string
	query  func(id string) []string
	cancel func(id string) []string
	show   func(id string) []string
	// update runs a workflow update (approve) and waits for its result; nil where the tool has none.
	update func(id, name, input string) []string
}

func (c cli) run(t *testing.T, args []string) string {
	t.Helper()
	out, err := c.try(args...)
	require.NoError(t, err, "%s %s:\n%s", c.name, strings.Join(args[1:], " "), out)
	return out
}

// try runs the tool of the stack's bin (args[0]) with the tool's environment and returns its output.
func (c cli) try(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(env.Stack.Path("bin"), args[0]), args[1:]...)
	cmd.Env = append(os.Environ(), c.env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func clis(t *testing.T) []cli {
	t.Helper()
	tctlEnv, err := env.Stack.TctlEnv(env.TemporalNamespace)
	require.NoError(t, err)
	key, err := os.ReadFile(env.TemporalOptions().APIKeyFile)
	require.NoError(t, err)
	temporalEnv := append(env.Stack.TemporalEnv(env.TemporalNamespace),
		"TEMPORAL_API_KEY="+strings.TrimSpace(string(key)), "TEMPORAL_CODEC_ENDPOINT="+env.Stack.CodecEndpoint)
	return []cli{
		{
			name: "tctl", env: tctlEnv,
			signal: func(id, name, input string) []string {
				args := []string{"tctl", "workflow", "signal", "--workflow_id", id, "--name", name}
				if input != "" {
					args = append(args, "--input", input)
				}
				return args
			},
			query: func(id string) []string {
				return []string{"tctl", "workflow", "query", "--workflow_id", id, "--query_type", "status"}
			},
			cancel: func(id string) []string { return []string{"tctl", "workflow", "cancel", "--workflow_id", id} },
			show:   func(id string) []string { return []string{"tctl", "workflow", "show", "--workflow_id", id} },
		},
		{
			name: "temporal", env: temporalEnv,
			signal: func(id, name, input string) []string {
				args := []string{"temporal", "workflow", "signal", "--workflow-id", id, "--name", name}
				if input != "" {
					args = append(args, "--input", input)
				}
				return args
			},
			query: func(id string) []string {
				return []string{"temporal", "workflow", "query", "--workflow-id", id, "--name", "status"}
			},
			cancel: func(id string) []string { return []string{"temporal", "workflow", "cancel", "--workflow-id", id} },
			show: func(id string) []string {
				return []string{"temporal", "workflow", "show", "--workflow-id", id, "--detailed"}
			},
			update: func(id, name, input string) []string {
				return []string{"temporal", "workflow", "update", "execute", "--workflow-id", id, "--name", name, "--input", input}
			},
		},
	}
}

// TestSteerWithTctlAndTheTemporalCLI steers a real deployment (a data-plane node running its phase-0
// playbooks over SSH) from the shell, once with tctl and once with the temporal CLI, with docs/operations/steering.md's
// commands and the environment `bin/stackflow-local env` exports, through the TLS front with the codec on:
// pause holds it, the status query answers (decoded), resume lets it go on until a step fails on the host,
// retry after the host is fixed re-runs the failed step and it deploys, the history shows decoded, and
// cancel ends the workflow with its compensation reported in the object.
func TestSteerWithTctlAndTheTemporalCLI(t *testing.T) {
	h0 := env.Host(t, host0)
	e2e.CleanHost(t, h0)
	startBridge(t)
	startWorker(t)
	create(t, gvrRole, `
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneRole
metadata: {name: steered}
spec:
  preProvisioned: true
  nodeTemplate: {ansibleUser: root, ansibleSSHPrivateKeySecret: edpm-ssh-key, managementNetwork: ctlplane}
`)
	for _, c := range clis(t) {
		t.Run(c.name, func(t *testing.T) {
			e2e.CleanHost(t, h0)
			// configure-network fails while a file holds the place of its directory.
			blocker := filepath.Join(h0.Root, "etc", "edpm", "network")
			require.NoError(t, os.WriteFile(blocker, []byte("not a directory\n"), 0o644))
			name := "steer-" + c.name
			node := create(t, gvrNode, fmt.Sprintf(`
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneNode
metadata: {name: %s}
spec: {role: steered, hostName: edpm-compute-0, ansibleHost: %s, deploy: true}
`, name, h0.Address))
			id := workflowID("OpenStackDataPlaneNode", gvrNode, node)
			e2e.WaitFor(t, name+"'s workflow started", time.Minute, func() (bool, string) {
				return e2e.Str(get(t, gvrNode, name), "status", "workflowID") == id, e2e.Summary(get(t, gvrNode, name))
			})

			c.run(t, c.signal(id, lifecycle.SignalPause, ""))
			e2e.WaitFor(t, name+" paused", 3*time.Minute, func() (bool, string) {
				n := get(t, gvrNode, name)
				return e2e.Str(n, "status", "phase") == lifecycle.PhasePaused, e2e.Summary(n)
			})
			held := e2e.StepLog(h0)
			status := c.run(t, c.query(id))
			require.Regexp(t, `"paused":\s*true`, status, "the status query, decoded by the codec endpoint")
			require.Regexp(t, `"phase":\s*"Paused"`, status)
			time.Sleep(3 * time.Second)
			require.Equal(t, held, e2e.StepLog(h0), "no playbook ran on the host while paused")

			c.run(t, c.signal(id, lifecycle.SignalResume, ""))
			e2e.WaitFor(t, name+" failed at configure-network", 5*time.Minute, func() (bool, string) {
				n := get(t, gvrNode, name)
				return e2e.Str(n, "status", "phase") == lifecycle.PhaseFailed, e2e.Summary(n)
			})
			require.Contains(t, e2e.Condition(get(t, gvrNode, name), "InfrastructureReady").Message, "configure-network")

			// A person reads the failure (kubectl describe), fixes the host, then retries: a second
			// apart at least, which is all kubectl's Event timestamps tell apart.
			e2e.WaitFor(t, name+"'s failure told as an Event", time.Minute, func() (bool, string) {
				got := eventReasons(t, name)
				return slices.Contains(got, "PlaybookFailed"), fmt.Sprint(got)
			})
			time.Sleep(1100 * time.Millisecond)
			require.NoError(t, os.Remove(blocker))
			c.run(t, c.signal(id, lifecycle.SignalRetry, `{}`))
			e2e.WaitFor(t, name+" deployed after the retry", 5*time.Minute, func() (bool, string) {
				n := get(t, gvrNode, name)
				return e2e.Str(n, "status", "deployed") == "true", e2e.Summary(n)
			})
			require.Equal(t, map[string]int{"bootstrap": 1, "configure-network": 2, "configure-os": 1}, playbookRuns(t, id), "the retry re-ran the failed step only")

			// The current run's history, its payloads decoded by the codec endpoint (encrypted, the
			// workflow's input would not name the object's resource).
			history := c.run(t, c.show(id))
			require.Contains(t, history, "carry", "the history shows the workflow's input (the state it carries) decoded")
			require.NotContains(t, history, "binary/encrypted")

			c.run(t, c.cancel(id))
			e2e.WaitFor(t, name+" cancelled, with its compensation reported", 2*time.Minute, func() (bool, string) {
				ready := e2e.Condition(get(t, gvrNode, name), lifecycle.ConditionReady)
				return ready != nil && ready.Reason == "Cancelled" && ready.Status == metav1.ConditionFalse, e2e.CondString(ready)
			})
			// The workflow writes that condition as its compensation, before its run closes: wait for
			// the close, which must be a cancellation (another close never turns into one).
			e2e.WaitFor(t, id+" closed as cancelled", time.Minute, func() (bool, string) {
				st, err := env.WorkflowStatus(context.Background(), id)
				require.NoError(t, err)
				if st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
					require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, st, "how the cancelled run closed")
				}
				return st == enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED, st.String()
			})

			// kubectl describe tells the story as Events, in order: paused, resumed, the failure with its
			// reason, the retry, Ready, cancelled.
			want := []string{"Paused", "Resumed", "PlaybookFailed", "Retrying", "Ready", "Cancelled"}
			e2e.WaitFor(t, name+"'s Events tell the story", time.Minute, func() (bool, string) {
				got := eventReasons(t, name)
				return isSubsequence(want, got), fmt.Sprint(got)
			})
			kubectl, err := env.Stack.Kubectl()
			require.NoError(t, err)
			out, err := exec.Command(kubectl, "--kubeconfig", env.Stack.Kubeconfig, "describe", "openstackdataplanenode", "-n", ns, name).CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.Regexp(t, `(?s)Events:.*Warning\s+PlaybookFailed.*Normal\s+Retrying`, string(out))
		})
	}
}

// eventReasons are the reasons of the object's Events from stackflow's worker, oldest first.
func eventReasons(t *testing.T, name string) []string {
	t.Helper()
	evs, err := env.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	require.NoError(t, err)
	items := evs.Items
	// Event names end in the creation time in nanoseconds (hex, fixed width): the order within a second.
	slices.SortStableFunc(items, func(a, b corev1.Event) int {
		return cmp.Or(a.FirstTimestamp.Compare(b.FirstTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	var out []string
	for _, e := range items {
		if e.Source.Component == "stackflow-worker" {
			out = append(out, e.Reason)
		}
	}
	return out
}

// isSubsequence reports whether want appears in got in order (not necessarily adjacent).
func isSubsequence(want, got []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}
