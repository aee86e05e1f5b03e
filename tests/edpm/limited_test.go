package edpm

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stackflow/stackflow/activities/ansible"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/tests/e2e"
	"github.com/stackflow/stackflow/workflows/dataplane"
)

var gvrRun = schema.GroupVersionResource{Group: "dataplane.openstack.org", Version: "v1beta1", Resource: "openstackdataplanedeployments"}

// limitedRuns runs parts of the deployed data plane upd as an operator would with
// OpenStackDataPlaneDeployments, each checked on the hosts' own files, processes and step logs:
//   - a service's drift put back without a restart: upd-1's nova-compute custom file is deleted by
//     hand; nova-compute with the tag config on upd-1 restores it and does not restart nova-compute;
//   - drift put back with a tag: upd-0's sysctl file and OS marker are deleted by hand; a run of
//     configure-os on upd-0 with the tag sysctl restores the sysctl file only (the marker is outside the
//     tag), and no other step runs on either host;
//   - the rest of it: configure-os untagged on upd-0 restores the marker;
//   - bad input: a service that does not exist is refused by the API server; a node that is not a member
//     fails the run with InvalidSpec naming it, before anything runs.
func limitedRuns(t *testing.T, h0, h1 local.TestHost) {
	ctx := context.Background()
	before0, before1 := e2e.StepLog(h0), e2e.StepLog(h1)
	sysctl, marker := "etc/edpm/os/99-edpm-sysctl.conf", "var/lib/edpm/os.done"
	require.NotEmpty(t, e2e.HostFile(h0, sysctl))
	require.NotEmpty(t, e2e.HostFile(h0, marker))
	for _, f := range []string{sysctl, marker} {
		require.NoError(t, os.Remove(filepath.Join(h0.Root, f)), "drift by hand")
	}
	pid0, pid1 := e2e.HostFile(h0, "run/stackflow/nova-compute.pid"), e2e.HostFile(h1, "run/stackflow/nova-compute.pid")
	require.NotEmpty(t, pid0)
	require.NotEmpty(t, pid1)
	custom := "etc/nova/nova.conf.d/99-nova-custom.conf"
	want := e2e.HostFile(h1, custom)
	require.NotEmpty(t, want)
	require.NoError(t, os.Remove(filepath.Join(h1.Root, custom)), "drift by hand")
	requireDataPlanePreview(t, h0, h1, "/"+sysctl, "/"+marker, "/"+custom)
	require.Equal(t, before0, e2e.StepLog(h0), "a preview runs no step")
	require.Equal(t, before1, e2e.StepLog(h1))

	run := func(name, spec string) *unstructured.Unstructured {
		t.Helper()
		t0 := time.Now()
		obj := create(t, gvrRun, "apiVersion: dataplane.openstack.org/v1beta1\nkind: OpenStackDataPlaneDeployment\nmetadata: {name: "+name+"}\nspec: "+spec+"\n")
		// The replay corpus keeps a run that ran playbooks, not only the smallest (one refused early).
		env.RecordPath(workflowID("OpenStackDataPlaneDeployment", gvrRun, obj), "ran-playbooks", e2e.Scheduled("RunPlaybook"))
		var u *unstructured.Unstructured
		e2e.WaitFor(t, "limited run "+name+" done", 5*time.Minute, func() (bool, string) {
			u = get(t, gvrRun, name)
			c := e2e.Condition(u, "Ran")
			return c != nil && (c.Status == metav1.ConditionTrue || e2e.Str(u, "status", "phase") == lifecycle.PhaseFailed), e2e.Summary(u)
		})
		t.Logf("limited run %s done in %.1fs: %s", name, time.Since(t0).Seconds(), e2e.Str(u, "status", "nodeStates"))
		return u
	}
	requireRan := func(u *unstructured.Unstructured, nodes int64, services string) {
		t.Helper()
		c := e2e.Condition(u, "Ran")
		require.Equal(t, metav1.ConditionTrue, c.Status, e2e.CondString(c))
		require.Equal(t, lifecycle.PhaseReady, e2e.Str(u, "status", "phase"))
		n, _, _ := unstructured.NestedInt64(u.Object, "status", "nodes")
		ok, _, _ := unstructured.NestedInt64(u.Object, "status", "succeededNodes")
		require.Equal(t, nodes, n)
		require.Equal(t, nodes, ok)
		require.JSONEq(t, services, e2e.Str(u, "status", "services"), "status says which services the run covered")
	}

	// nova-compute's custom file deleted by hand on upd-1, put back with the tag config only: the file
	// returns, and nova-compute is not restarted although its configuration changed (the restart is
	// outside the tag). A restart would lose the fake driver's instances, which live in its memory.
	u := run("fix-compute-config", "{dataPlane: upd, nodes: [upd-1], services: [nova-compute], tags: [config]}")
	requireRan(u, 1, `["nova-compute"]`)
	require.NotZero(t, runStep(t, u, 0, 0)["changed"])
	require.Equal(t, want, e2e.HostFile(h1, custom), "the tagged tasks put the file back")
	require.Equal(t, pid1, e2e.HostFile(h1, "run/stackflow/nova-compute.pid"), "nova-compute was not restarted")
	require.Equal(t, pid0, e2e.HostFile(h0, "run/stackflow/nova-compute.pid"))
	require.Equal(t, before1["nova-compute"]+1, e2e.StepLog(h1)["nova-compute"])
	before1["nova-compute"]++
	require.Equal(t, "True", string(e2e.Condition(get(t, gvrNEC, "upd-1"), "Ready").Status), "the compute's own workflow is untouched")

	u = run("fix-sysctl", "{dataPlane: upd, nodes: [upd-0], services: [configure-os], tags: [sysctl]}")
	requireRan(u, 1, `["configure-os"]`)
	require.Equal(t, "upd-0", runNode(t, u, 0)["name"])
	step := runStep(t, u, 0, 0)
	require.Equal(t, "configure-os", step["name"])
	require.Equal(t, "Succeeded", step["state"])
	require.NotZero(t, step["changed"], "the sysctl file was written")
	require.Contains(t, e2e.HostFile(h0, sysctl), "net.ipv4.ip_forward", "the tagged task put the file back")
	require.Empty(t, e2e.HostFile(h0, marker), "a task outside the tag did not run")
	after0 := e2e.StepLog(h0)
	require.Equal(t, before0["configure-os"]+1, after0["configure-os"], "configure-os ran once on upd-0")
	after0["configure-os"] = before0["configure-os"]
	require.Equal(t, before0, after0, "no other step ran on upd-0")
	require.Equal(t, before1, e2e.StepLog(h1), "nothing ran on upd-1")
	require.Contains(t, kubectlGet(t, "osdpd", "fix-sysctl"), "upd")

	u = run("fix-os", "{dataPlane: upd, nodes: [upd-0], services: [configure-os]}")
	requireRan(u, 1, `["configure-os"]`)
	require.Equal(t, "configured\n", e2e.HostFile(h0, marker), "untagged, the whole step ran")

	_, err := env.Dyn.Resource(gvrRun).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "dataplane.openstack.org/v1beta1", "kind": "OpenStackDataPlaneDeployment",
		"metadata": map[string]any{"name": "bogus-service"},
		"spec":     map[string]any{"dataPlane": "upd", "services": []any{"nova-api"}},
	}}, metav1.CreateOptions{})
	require.Error(t, err, "an unknown service is refused at admission")
	require.Contains(t, err.Error(), "nova-api")

	u = run("not-a-member", "{dataPlane: upd, nodes: [upd-9]}")
	c := e2e.Condition(u, "Ready")
	require.Equal(t, lifecycle.ReasonInvalidSpec, c.Reason, e2e.CondString(c))
	require.Contains(t, c.Message, "node upd-9 is not a member")
	require.True(t, strings.Contains(e2e.Condition(u, "Ran").Message, "upd-9"))
}

// requireDataPlanePreview asks data plane upd for its preview (every member's steps in check mode) and
// finds the drift made by hand: on upd-0 configure-os would write the sysctl file and the OS marker, on
// upd-1 nova-compute would install the custom file and restart; neither host changes (byte for byte).
func requireDataPlanePreview(t *testing.T, h0, h1 local.TestHost, sysctl, marker, custom string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dirs := []string{"etc", "var/lib/edpm", "var/log/stackflow", "run/stackflow"}
	snap0, snap1 := e2e.HostSnapshot(t, h0, dirs...), e2e.HostSnapshot(t, h1, dirs...)
	id := workflowID("OpenStackDataPlane", gvrDP, get(t, gvrDP, "upd"))
	t0 := time.Now()
	h, err := env.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: lifecycle.UpdatePreview,
		WaitForStage: client.WorkflowUpdateStageCompleted})
	require.NoError(t, err)
	var p dataplane.DataPlanePreview
	require.NoError(t, h.Get(ctx, &p))
	raw, _ := json.Marshal(p)
	t.Logf("preview of data plane upd in %.1fs: %s", time.Since(t0).Seconds(), raw)
	changed := map[string]map[string][]ansible.TaskChange{}
	for _, n := range p.Nodes {
		require.False(t, n.Failed, "%s: %s %+v", n.Node, n.Error, n.Steps)
		changed[n.Node] = map[string][]ansible.TaskChange{}
		for _, st := range n.Steps {
			require.Empty(t, st.Error, "%s %s", n.Node, st.Step)
			changed[n.Node][st.Step] = st.Changes
		}
		require.Len(t, n.Steps, 5, "%s: phase 0, ovn and nova-compute", n.Node)
	}
	tasks := func(cs []ansible.TaskChange) (out []string) {
		for _, c := range cs {
			out = append(out, c.Task)
		}
		return out
	}
	os0 := changed["upd-0"]["configure-os"]
	require.Subset(t, tasks(os0), []string{"Write the sysctl settings", "Mark the OS configured"}, "upd-0's configure-os would put back %s and %s: %s", sysctl, marker, raw)
	nc1 := changed["upd-1"]["nova-compute"]
	require.Contains(t, string(mustJSON(nc1)), custom, "upd-1's nova-compute would install the custom file: %s", raw)
	require.True(t, slices.ContainsFunc(nc1, func(c ansible.TaskChange) bool { return strings.Contains(c.Task, "would be (re)started") }), "and restart: %s", raw)
	// Nothing else would change: playbooks that disagreed about a file (two modes for one directory)
	// would show here on every host after every run.
	for node, steps := range changed {
		for step, cs := range steps {
			if (node == "upd-0" && step == "configure-os") || (node == "upd-1" && step == "nova-compute") {
				continue
			}
			require.Empty(t, cs, "%s %s is as deployed", node, step)
		}
	}
	require.Len(t, changed, 2, "both nodes would change: %s", raw)
	require.NotContains(t, string(raw), "transport_url", "no Secret value")
	require.Equal(t, snap0, e2e.HostSnapshot(t, h0, dirs...), "a preview changes nothing on upd-0")
	require.Equal(t, snap1, e2e.HostSnapshot(t, h1, dirs...), "nor on upd-1")
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// runNode is the i-th entry of a limited run's status.nodeStates.
func runNode(t *testing.T, u *unstructured.Unstructured, i int) map[string]any {
	t.Helper()
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "nodeStates")
	require.Greater(t, len(raw), i, "nodeStates of %s", u.GetName())
	m, _ := raw[i].(map[string]any)
	return m
}

// runStep is step j of node i of a limited run's status.
func runStep(t *testing.T, u *unstructured.Unstructured, i, j int) map[string]any {
	t.Helper()
	steps, _ := runNode(t, u, i)["steps"].([]any)
	require.Greater(t, len(steps), j)
	m, _ := steps[j].(map[string]any)
	return m
}
