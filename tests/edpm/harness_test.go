package edpm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/config"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/stackflow/stackflow/activities"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/tests/e2e"
)

func yamlUnmarshal(b []byte, v any) error { return yaml.Unmarshal(b, v) }

// startBridge runs a bridge for the data-plane kinds with short leases.
func startBridge(t *testing.T) *e2e.Proc {
	return env.StartBridge(t, e2e.BridgeOptions{Identity: env.Run + "-bridge", Kinds: servedKinds})
}

func startWorker(t *testing.T) *e2e.Proc {
	return env.StartWorker(t, e2e.WorkerOptions{Identity: env.Run + "-worker"})
}

// Resources of the kinds the tests create.
var (
	gvrRole  = schema.GroupVersionResource{Group: "dataplane.openstack.org", Version: "v1beta1", Resource: "openstackdataplaneroles"}
	gvrNode  = schema.GroupVersionResource{Group: "dataplane.openstack.org", Version: "v1beta1", Resource: "openstackdataplanenodes"}
	gvrDP    = schema.GroupVersionResource{Group: "dataplane.openstack.org", Version: "v1beta1", Resource: "openstackdataplanes"}
	gvrNEC   = schema.GroupVersionResource{Group: "nova.openstack.org", Version: "v1beta1", Resource: "novaexternalcomputes"}
	gvrCell  = schema.GroupVersionResource{Group: "nova.openstack.org", Version: "v1beta1", Resource: "novacells"}
	gvrAgent = schema.GroupVersionResource{Group: "neutron.openstack.org", Version: "v1beta1", Resource: "ovnmetadataagents"}
)

// create creates an object from YAML in the run's namespace and deletes it (waiting until it is gone)
// when the test ends.
func create(t *testing.T, gvr schema.GroupVersionResource, manifest string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(manifest), &u.Object))
	u.SetNamespace(ns)
	out, err := env.Dyn.Resource(gvr).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
	require.NoError(t, err, "create %s %s", gvr.Resource, u.GetName())
	t.Cleanup(func() { deleteAndWait(t, gvr, out.GetName()) })
	return out
}

// deleteAndWait deletes an object of the run's namespace and reports an error unless its workflow
// removed the finalizer within 5 minutes.
func deleteAndWait(t *testing.T, gvr schema.GroupVersionResource, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := env.DeleteAndWait(ctx, gvr, ns, name); err != nil {
		t.Error(err)
	}
}

func get(t *testing.T, gvr schema.GroupVersionResource, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := env.Dyn.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return u
}

// condition returns the condition of type typ of an object (nil when absent).
func condition(u *unstructured.Unstructured, typ string) *metav1.Condition {
	if u == nil {
		return nil
	}
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	b, _ := json.Marshal(raw)
	var conds []metav1.Condition
	_ = json.Unmarshal(b, &conds)
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

func str(u *unstructured.Unstructured, fields ...string) string {
	if u == nil {
		return ""
	}
	v, _, _ := unstructured.NestedFieldNoCopy(u.Object, fields...)
	if v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// summary is a one-line view of an object's status for progress logs.
func summary(u *unstructured.Unstructured) string {
	if u == nil {
		return "<absent>"
	}
	return fmt.Sprintf("phase=%s step=%q ready=%s", str(u, "status", "phase"), str(u, "status", "currentStep"), condStr(condition(u, lifecycle.ConditionReady)))
}

func condStr(c *metav1.Condition) string {
	if c == nil {
		return "<none>"
	}
	return fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
}

// waitFor polls check until it holds, logging what it sees when it changes; it fails the test after
// timeout with the last observation.
func waitFor(t *testing.T, what string, timeout time.Duration, check func() (bool, string)) {
	t.Helper()
	start := time.Now()
	last := ""
	for {
		ok, seen := check()
		if seen != last {
			t.Logf("[%5.1fs] %s: %s", time.Since(start).Seconds(), what, seen)
			last = seen
		}
		if ok {
			return
		}
		if time.Since(start) > timeout {
			t.Fatalf("%s: not reached within %s; last seen: %s", what, timeout, seen)
		}
		time.Sleep(time.Second)
	}
}

// host returns the stack's test host by name.
func host(t *testing.T, name string) local.TestHost {
	t.Helper()
	for _, h := range env.Stack.TestHosts {
		if h.Name == name {
			return h
		}
	}
	t.Fatalf("no test host %s", name)
	return local.TestHost{}
}

// resetHost stops a nova-compute left on the host and clears what the playbooks write, so every check
// of the host's filesystem sees only this run.
func resetHost(t *testing.T, h local.TestHost) {
	t.Helper()
	for _, pidf := range []string{"run/stackflow/nova-compute.pid", "run/stackflow/ovn-metadata-agent.pid"} {
		if b, err := os.ReadFile(filepath.Join(h.Root, pidf)); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	for _, d := range []string{"etc/edpm", "var/lib/edpm", "etc/nova", "var/lib/nova", "var/log/nova", "var/log/stackflow", "run/stackflow", "etc/neutron"} {
		entries, _ := os.ReadDir(filepath.Join(h.Root, d))
		for _, e := range entries {
			require.NoError(t, os.RemoveAll(filepath.Join(h.Root, d, e.Name())))
		}
	}
}

func hostFile(h local.TestHost, path string) string {
	b, err := os.ReadFile(filepath.Join(h.Root, path))
	if err != nil {
		return ""
	}
	return string(b)
}

// stepLog is the host's own record of the steps that ran on it: step → runs.
func stepLog(h local.TestHost) map[string]int {
	out := map[string]int{}
	for _, line := range strings.Split(hostFile(h, "var/log/stackflow/edpm-steps.log"), "\n") {
		if f := strings.Fields(line); len(f) >= 2 {
			out[f[1]]++
		}
	}
	return out
}

// workflowID is the workflow ID the bridge derives for an object.
func workflowID(kind string, gvr schema.GroupVersionResource, u *unstructured.Unstructured) string {
	return lifecycle.WorkflowID(e2e.Ref(kind, gvr, u))
}

// playbookRuns counts the RunPlaybook activities a workflow scheduled (every attempt that reached a
// worker counts once per scheduling), by step.
func playbookRuns(t *testing.T, wfID string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, ev := range historyEvents(t, wfID) {
		a := ev.GetActivityTaskScheduledEventAttributes()
		if a == nil || a.GetActivityType().GetName() != "RunPlaybook" {
			continue
		}
		var in activities.PlaybookInput
		if p := a.GetInput().GetPayloads(); len(p) > 0 {
			dc, err := env.DataConverter()
			require.NoError(t, err)
			require.NoError(t, dc.FromPayload(p[0], &in))
		}
		out[in.Step]++
	}
	return out
}

// historyEvents is a workflow's whole history, every run of it.
func historyEvents(t *testing.T, wfID string) []*historypb.HistoryEvent {
	t.Helper()
	out, err := env.History(context.Background(), wfID)
	require.NoError(t, err)
	return out
}

// workflowsWith lists the workflow IDs a search-attribute query finds in the tests' namespace.
func workflowsWith(t *testing.T, query string) []string {
	t.Helper()
	resp, err := env.Temporal.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Namespace: env.TemporalNamespace, Query: query, PageSize: 100})
	require.NoError(t, err)
	var out []string
	for _, e := range resp.Executions {
		out = append(out, e.Execution.WorkflowId)
	}
	return out
}

// computeClient is a Nova client of the local cloud's admin.
func computeClient(t *testing.T) *gophercloud.ServiceClient {
	t.Helper()
	ctx := context.Background()
	ao, eo, tlsCfg, err := clouds.Parse(clouds.WithCloudsYAML(mustOpen(t, env.Stack.CloudsYAML)), clouds.WithCloudName(env.Stack.CloudName))
	require.NoError(t, err)
	_ = tlsCfg
	provider, err := config.NewProviderClient(ctx, ao)
	require.NoError(t, err)
	c, err := openstack.NewComputeV2(provider, eo)
	require.NoError(t, err)
	c.Microversion = "2.53"
	return c
}

func mustOpen(t *testing.T, path string) *bytes.Reader {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return bytes.NewReader(b)
}

// novaManage runs nova-manage of the local cloud (Debian's Nova under /usr/bin/python3).
func novaManage(t *testing.T, args ...string) string {
	t.Helper()
	argv := append([]string{"-c", "import sys; sys.argv[0] = 'nova-manage'; from nova.cmd.manage import main; sys.exit(main())",
		"--config-file", filepath.Join(env.Stack.StateDir, "openstack", "etc", "nova", "nova.conf")}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "/usr/bin/python3", argv...).CombinedOutput()
	require.NoError(t, err, "nova-manage %v: %s", args, out)
	return string(out)
}

// rabbitmqctl runs the local broker's rabbitmqctl (the escript itself: Debian's wrapper would switch
// to the rabbitmq user and lose the stack's Erlang cookie).
func rabbitmqctl(t *testing.T, args ...string) string {
	t.Helper()
	matches, _ := filepath.Glob("/usr/lib/rabbitmq/lib/rabbitmq_server-*/sbin/rabbitmqctl")
	require.NotEmpty(t, matches, "rabbitmqctl")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, matches[0], args...)
	cmd.Env = append(os.Environ(), "HOME="+filepath.Join(env.Stack.StateDir, "openstack", "data", "rabbitmq"),
		"RABBITMQ_NODENAME=rabbit@localhost", "ERL_EPMD_ADDRESS=127.0.0.1", "ERL_EPMD_PORT=4369")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "rabbitmqctl %v: %s", args, out)
	return string(out)
}
