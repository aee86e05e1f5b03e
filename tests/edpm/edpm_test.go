package edpm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/hypervisors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/services"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stackflow/stackflow/activities/ansible"
	"github.com/stackflow/stackflow/activities/baremetal"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/deploy/describe"
	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/tests/e2e"
	"github.com/stackflow/stackflow/workflows/dataplane"
)

// customConfig is what the tests put in customServiceConfig: debug on (the generated file says off),
// and what the test hosts lack (a hypervisor, network agents): the fake driver, no VIF plugging wait.
// The cloud's APIs come from the catalog's internal endpoints, which the hosts reach.
const customConfig = `[DEFAULT]
debug = True
compute_driver = fake.FakeDriver
vif_plugging_is_fatal = false
vif_plugging_timeout = 0
`

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestRetryRerunsOnlyTheFailedStep deploys two nodes of a data plane that tolerates one failure. One
// host is made to fail configure-network once (a file where the playbook wants its directory): the
// other node goes on and succeeds, the data plane reports the failure with the host and Ansible's
// message, and a retry naming that host re-runs its failed step only, in the same run.
func TestRetryRerunsOnlyTheFailedStep(t *testing.T) {
	h0, h1 := env.Host(t, host0), env.Host(t, host1)
	e2e.CleanHost(t, h0)
	e2e.CleanHost(t, h1)
	blocker := filepath.Join(h1.Root, "etc", "edpm", "network")
	require.NoError(t, os.WriteFile(blocker, []byte("not a directory\n"), 0o644))
	startBridge(t)
	startWorker(t)

	create(t, gvrRole, `
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneRole
metadata: {name: infra}
spec:
  dataPlane: rollout
  preProvisioned: true
  nodeTemplate: {ansibleUser: root, ansibleSSHPrivateKeySecret: edpm-ssh-key, managementNetwork: ctlplane}
`)
	var nodes []*unstructured.Unstructured
	for i, h := range []string{h0.Address, h1.Address} {
		nodes = append(nodes, create(t, gvrNode, fmt.Sprintf(`
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneNode
metadata: {name: infra-%d}
spec: {role: infra, hostName: edpm-compute-%d, ansibleHost: %s, deploy: true}
`, i, i, h)))
	}
	dp := create(t, gvrDP, `
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlane
metadata: {name: rollout}
spec: {roles: [infra], deploy: true, maxConcurrency: 2, maxFailedNodes: 1}
`)

	e2e.WaitFor(t, "data plane rollout failed with one node", 15*time.Minute, func() (bool, string) {
		d := get(t, gvrDP, "rollout")
		return e2e.Str(d, "status", "phase") == lifecycle.PhaseFailed, e2e.Summary(d) + " failed=" + e2e.Str(d, "status", "failedNodes")
	})
	d := get(t, gvrDP, "rollout")
	require.JSONEq(t, `["infra-1"]`, e2e.Str(d, "status", "failedNodes"))
	require.Equal(t, "NodesFailed", e2e.Condition(d, lifecycle.ConditionReady).Reason)
	require.Equal(t, "true", e2e.Str(get(t, gvrNode, "infra-0"), "status", "deployed"), "the other node went on")
	failedCond := e2e.Condition(get(t, gvrNode, "infra-1"), "InfrastructureReady")
	require.NotNil(t, failedCond)
	require.Equal(t, "PlaybookFailed", failedCond.Reason)
	require.Contains(t, failedCond.Message, "edpm-compute-1")
	require.Contains(t, failedCond.Message, "configure-network")
	require.Contains(t, failedCond.Message, "/etc/edpm/network", "Ansible's own message")

	// Fix the host, then retry that host only.
	require.NoError(t, os.Remove(blocker))
	dpID := workflowID("OpenStackDataPlane", gvrDP, dp)
	require.NoError(t, env.Temporal.SignalWorkflow(context.Background(), dpID, "", lifecycle.SignalRetry, lifecycle.RetrySignal{Hosts: []string{"edpm-compute-1"}}))
	e2e.WaitFor(t, "data plane rollout Ready after the retry", 10*time.Minute, func() (bool, string) {
		d := get(t, gvrDP, "rollout")
		c := e2e.Condition(d, lifecycle.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue, e2e.Summary(d)
	})

	// Only infra-1's failed step ran again: per workflow history and per the hosts' own records.
	n0 := playbookRuns(t, workflowID("OpenStackDataPlaneNode", gvrNode, nodes[0]))
	n1 := playbookRuns(t, workflowID("OpenStackDataPlaneNode", gvrNode, nodes[1]))
	require.Equal(t, map[string]int{"bootstrap": 1, "configure-network": 1, "configure-os": 1}, n0)
	require.Equal(t, map[string]int{"bootstrap": 1, "configure-network": 2, "configure-os": 1}, n1)
	require.Equal(t, map[string]int{"bootstrap": 1, "configure-network": 1, "configure-os": 1}, e2e.StepLog(h0))
	require.Equal(t, map[string]int{"bootstrap": 1, "configure-network": 1, "configure-os": 1}, e2e.StepLog(h1),
		"the failed run stopped before recording; the retry recorded configure-network once")
	require.Contains(t, e2e.Str(get(t, gvrDP, "rollout"), "status", "nodeStates"), `"attempts":2`)
	require.Equal(t, "1", fmt.Sprint(runs(t, dpID)), "the retry ran in the same workflow (one chain of runs)")
}

// runs counts the runs of a workflow ID (continue-as-new or a new start would add runs).
// runs counts the executions of a workflow: chains of runs, each continuing as new into the next, count
// once.
func runs(t *testing.T, wfID string) int {
	return len(workflowsWith(t, fmt.Sprintf("WorkflowId = %q AND ExecutionStatus != 'ContinuedAsNew'", wfID)))
}

// TestBadInput: a missing SSH key Secret is waited for, visibly, and the node goes on when it appears;
// an unreachable host is retried with backoff, then fails naming the host and Ansible's message; a
// customServiceConfig that is not INI is refused by the API server, and one that slips past it is
// refused by the workflow before anything is deployed; a cell change is refused at admission.
func TestBadInput(t *testing.T) {
	h0 := env.Host(t, host0)
	e2e.CleanHost(t, h0)
	startBridge(t)
	startWorker(t)
	ctx := context.Background()

	create(t, gvrRole, `
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneRole
metadata: {name: late}
spec:
  preProvisioned: true
  nodeTemplate: {ansibleUser: root, ansibleSSHPrivateKeySecret: late-key}
`)
	create(t, gvrNode, fmt.Sprintf(`
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneNode
metadata: {name: late-0}
spec: {role: late, hostName: edpm-compute-0, ansibleHost: %s, deploy: true}
`, h0.Address))
	// An unreachable host (an address of the project's host network nobody holds): it starts with
	// late-0, once the key exists, and its retries run out (≈ 1.5 min of backoff) while the rest of the
	// test runs; checked at the end.
	unreachable := create(t, gvrNode, `
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneNode
metadata: {name: unreachable}
spec: {role: late, hostName: edpm-unreachable, ansibleHost: 198.51.100.250, deploy: true}
`)
	e2e.WaitFor(t, "late-0 waiting for its SSH key Secret", 3*time.Minute, func() (bool, string) {
		c := e2e.Condition(get(t, gvrNode, "late-0"), "SSHKeyReady")
		return c != nil && c.Reason == "WaitingForSecret" && strings.Contains(c.Message, ns+"/late-key"), e2e.CondString(c)
	})
	key, err := env.Kube.CoreV1().Secrets(ns).Get(ctx, "edpm-ssh-key", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, createSecret(ctx, "late-key", key.Data))
	e2e.WaitFor(t, "late-0 deployed once the Secret exists", 10*time.Minute, func() (bool, string) {
		n := get(t, gvrNode, "late-0")
		return e2e.Str(n, "status", "deployed") == "true", e2e.Summary(n)
	})

	// customServiceConfig that is not INI: the API server refuses it.
	nec := func(name, cell, custom string) string {
		return fmt.Sprintf(`
apiVersion: nova.openstack.org/v1beta1
kind: NovaExternalCompute
metadata: {name: %s}
spec:
  dataplaneNodeName: late-0
  cellName: %s
  sshKeySecretName: edpm-ssh-key
  inventoryConfigMapName: late-0-inventory
  deploy: true
  customServiceConfig: %q
`, name, cell, custom)
	}
	u := &unstructured.Unstructured{}
	require.NoError(t, yamlInto(nec("refused", "cell1", "debug = True\n"), u))
	_, err = env.Dyn.Resource(gvrNEC).Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
	require.ErrorContains(t, err, "customServiceConfig must be an oslo.config INI snippet")
	// One that passes the API's check but not the parser: refused by the workflow, nothing deployed.
	create(t, gvrNEC, nec("badcfg", "cell1", "[DEFAULT]\n    a continuation without an option\n"))
	e2e.WaitFor(t, "badcfg refused by its workflow", 3*time.Minute, func() (bool, string) {
		c := e2e.Condition(get(t, gvrNEC, "badcfg"), "ComputeDeployed")
		return c != nil && c.Reason == "InvalidCustomServiceConfig", e2e.CondString(c)
	})
	require.Contains(t, e2e.Condition(get(t, gvrNEC, "badcfg"), "ComputeDeployed").Message, "continuation without an option")
	entries, _ := os.ReadDir(filepath.Join(h0.Root, "etc", "nova", "nova.conf.d"))
	require.Empty(t, entries, "nothing deployed with an invalid customServiceConfig")
	require.Equal(t, 0, len(playbookRuns(t, workflowID("NovaExternalCompute", gvrNEC, get(t, gvrNEC, "badcfg")))))

	// A compute whose nova-compute cannot start (the libvirt driver, which the host lacks): its playbook
	// writes the configuration, then fails with nova-compute's own log; deleting the compute removes what
	// that playbook wrote (checked by RequireRemoved, and by CleanHost at the end).
	create(t, gvrNEC, nec("nolibvirt", "cell1", "[DEFAULT]\ndebug = True\n"))
	e2e.WaitFor(t, "nolibvirt failed with nova-compute's message", 5*time.Minute, func() (bool, string) {
		c := e2e.Condition(get(t, gvrNEC, "nolibvirt"), "ComputeDeployed")
		return c != nil && c.Reason == ansible.ErrPlaybookFailed, e2e.CondString(c)
	})
	require.Contains(t, e2e.Condition(get(t, gvrNEC, "nolibvirt"), "ComputeDeployed").Message, "No module named 'libvirt'")
	require.NotEmpty(t, e2e.HostFile(h0, "etc/nova/nova.conf.d/01-nova.conf"), "the failed playbook wrote the configuration")
	env.DeleteAndWaitT(t, gvrNEC, ns, "nolibvirt")
	e2e.RequireRemoved(t, h0, "nova-compute")

	// An Ironic section without a driver: the driver has no default (Ironic's fake-hardware, a test
	// driver, provisions nothing); the node is refused before anything is enrolled.
	create(t, gvrNode, fmt.Sprintf(`
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneNode
metadata: {name: nodriver}
spec:
  role: late
  hostName: edpm-nodriver
  ansibleHost: %s
  preProvisioned: false
  bareMetal: {ironicNodeName: %s-nodriver, image: %s}
  deploy: true
`, h0.Address, env.Run, env.Stack.OpenStack.Image))
	e2e.WaitFor(t, "nodriver refused: no Ironic driver", 3*time.Minute, func() (bool, string) {
		n := get(t, gvrNode, "nodriver")
		c := e2e.Condition(n, lifecycle.ConditionReady)
		return c != nil && c.Reason == lifecycle.ReasonInvalidSpec && strings.Contains(c.Message, "no Ironic driver"), e2e.Summary(n)
	})
	require.Zero(t, activityCount(t, workflowID("OpenStackDataPlaneNode", gvrNode, get(t, gvrNode, "nodriver")), "ProvisionBaremetal"), "nothing enrolled in Ironic")

	// A cell cannot change: not on a role, not on a NovaExternalCompute.
	create(t, gvrRole, `
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneRole
metadata:
  name: incell1
  annotations: {nova.openstack.org/cell: cell1}
spec: {preProvisioned: true}
`)
	_, err = env.Dyn.Resource(gvrRole).Namespace(ns).Patch(ctx, "incell1", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"nova.openstack.org/cell":"cell2"}}}`), metav1.PatchOptions{})
	require.ErrorContains(t, err, "cannot change from cell1 to cell2")
	_, err = env.Dyn.Resource(gvrNEC).Namespace(ns).Patch(ctx, "badcfg", types.MergePatchType, []byte(`{"spec":{"cellName":"cell2"}}`), metav1.PatchOptions{})
	require.ErrorContains(t, err, "cellName is immutable")
	require.True(t, slices.Contains([]string{lifecycle.PhaseFailed}, e2e.Str(get(t, gvrNEC, "badcfg"), "status", "phase")))

	// Two Novas in one namespace each have a cell3: a compute whose cellName is cell3 waits, naming both
	// NovaCells, instead of joining whichever comes first by name; once one goes, it takes the other.
	for _, name := range []string{"left-cell3", "right-cell3"} {
		create(t, gvrCell, fmt.Sprintf(`
apiVersion: nova.openstack.org/v1beta1
kind: NovaCell
metadata: {name: %[1]s}
spec: {cellName: cell3, secret: %[1]s-secret, keystoneAuthURL: http://198.51.100.1:5000/v3, cellDatabaseHostname: 127.0.0.1, transportURLSecret: %[1]s-transport}
`, name))
	}
	create(t, gvrNEC, nec("ambiguous", "cell3", "[DEFAULT]\ndebug = True\n"))
	e2e.WaitFor(t, "ambiguous waits, naming both NovaCells of cell3", 3*time.Minute, func() (bool, string) {
		c := e2e.Condition(get(t, gvrNEC, "ambiguous"), "ComputeDeployed")
		return c != nil && c.Reason == "CellAmbiguous" && strings.Contains(c.Message, "left-cell3, right-cell3"), e2e.CondString(c)
	})
	require.NoError(t, env.Dyn.Resource(gvrCell).Namespace(ns).Delete(ctx, "right-cell3", metav1.DeleteOptions{}))
	e2e.WaitFor(t, "ambiguous takes left-cell3 once right-cell3 is gone", 3*time.Minute, func() (bool, string) {
		c := e2e.Condition(get(t, gvrNEC, "ambiguous"), "ComputeDeployed")
		return c != nil && c.Reason == "WaitingForCell" && strings.Contains(c.Message, "left-cell3-transport"), e2e.CondString(c)
	})

	// The unreachable host, created at the start.
	e2e.WaitFor(t, "unreachable node failed", 10*time.Minute, func() (bool, string) {
		n := get(t, gvrNode, "unreachable")
		return e2e.Str(n, "status", "phase") == lifecycle.PhaseFailed, e2e.Summary(n)
	})
	c := e2e.Condition(get(t, gvrNode, "unreachable"), "InfrastructureReady")
	require.Equal(t, "HostUnreachable", c.Reason)
	require.Contains(t, c.Message, "edpm-unreachable")
	require.Contains(t, c.Message, "198.51.100.250")
	attempts := 0
	for _, ev := range historyEvents(t, workflowID("OpenStackDataPlaneNode", gvrNode, unreachable)) {
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			attempts = max(attempts, int(a.GetAttempt()))
		}
	}
	require.Equal(t, 5, attempts, "retried with backoff up to the policy's attempts")
	// The cloud's tree (kubectl stackflow describe) marks the failing leaf with its reason and message.
	roots, err := describe.Read(ctx, env.Dyn, describe.Scope{Namespace: ns, Object: "osdpnode/unreachable"}, time.Now())
	require.NoError(t, err)
	var tree strings.Builder
	require.NoError(t, describe.Render(&tree, roots, describe.RenderOptions{}))
	require.Regexp(t, `✗ OpenStackDataPlaneNode/unreachable\s+False\s+Failed\s+\S+\s+HostUnreachable`, tree.String())
	require.Contains(t, tree.String(), "198.51.100.250", "the message in full")
}

func yamlInto(manifest string, u *unstructured.Unstructured) error {
	if err := yamlUnmarshal([]byte(manifest), &u.Object); err != nil {
		return err
	}
	u.SetNamespace(ns)
	return nil
}

// TestPauseResumeAndCancel steers a data plane of two nodes deployed one at a time: pause holds the
// running node at its next step and admits no other; resume lets both go on; cancelling the workflow
// stops the rollout at a step boundary and reports the state every node reached.
func TestPauseResumeAndCancel(t *testing.T) {
	h0, h1 := env.Host(t, host0), env.Host(t, host1)
	e2e.CleanHost(t, h0)
	e2e.CleanHost(t, h1)
	startBridge(t)
	startWorker(t)
	ctx := context.Background()

	create(t, gvrRole, `
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneRole
metadata: {name: steer}
spec:
  dataPlane: steer
  preProvisioned: true
  nodeTemplate:
    ansibleUser: root
    ansibleSSHPrivateKeySecret: edpm-ssh-key
    ansibleVars: {edpm_bootstrap_command: "sleep 15", edpm_network_config_command: "sleep 15"}
`)
	var nodeWF []string
	for i, h := range []local.TestHost{h0, h1} {
		n := create(t, gvrNode, fmt.Sprintf(`
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneNode
metadata: {name: steer-%d}
spec: {role: steer, hostName: %s, ansibleHost: %s, deploy: true}
`, i, h.Name, h.Address))
		nodeWF = append(nodeWF, workflowID("OpenStackDataPlaneNode", gvrNode, n))
	}
	dp := create(t, gvrDP, `
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlane
metadata: {name: steer}
spec: {roles: [steer], deploy: true, maxConcurrency: 1}
`)
	dpID := workflowID("OpenStackDataPlane", gvrDP, dp)
	nodeState := func(name string) string {
		var states []map[string]any
		_ = json.Unmarshal([]byte(e2e.Str(get(t, gvrDP, "steer"), "status", "nodeStates")), &states)
		for _, s := range states {
			if s["name"] == name {
				return fmt.Sprintf("%v@%v", s["state"], s["step"])
			}
		}
		return "?"
	}

	e2e.WaitFor(t, "steer-0 admitted and bootstrapping", 5*time.Minute, func() (bool, string) {
		return strings.HasPrefix(nodeState("steer-0"), "Running@bootstrap"), nodeState("steer-0") + " " + nodeState("steer-1")
	})
	require.NoError(t, env.Temporal.SignalWorkflow(ctx, dpID, "", lifecycle.SignalPause, nil))
	e2e.WaitFor(t, "steer-0 held at its next step", 5*time.Minute, func() (bool, string) {
		c := e2e.Condition(get(t, gvrNode, "steer-0"), "Paused")
		return c != nil && c.Status == metav1.ConditionTrue, e2e.CondString(c)
	})
	require.Equal(t, map[string]int{"bootstrap": 1}, e2e.StepLog(h0), "bootstrap finished, nothing after it started")
	// Held, the node schedules no playbook: its history, where a next step would show within a second
	// (the host's log would show it only when that step's 15 s playbook ended).
	time.Sleep(3 * time.Second)
	require.Equal(t, map[string]int{"bootstrap": 1}, playbookRuns(t, nodeWF[0]), "a paused node does not go on")
	require.Equal(t, map[string]int{"bootstrap": 1}, e2e.StepLog(h0))
	require.Equal(t, "Pending@<nil>", nodeState("steer-1"), "a paused data plane admits no node")
	require.Equal(t, "True", string(e2e.Condition(get(t, gvrDP, "steer"), "Paused").Status))

	require.NoError(t, env.Temporal.SignalWorkflow(ctx, dpID, "", lifecycle.SignalResume, nil))
	// Running with its step reported: cancelled before the node's first report, the rollout knows only
	// that it was admitted, and the cancel would not land during its bootstrap.
	e2e.WaitFor(t, "steer-1 admitted after steer-0 finished and bootstrapping", 10*time.Minute, func() (bool, string) {
		return strings.HasPrefix(nodeState("steer-1"), "Running@bootstrap"), nodeState("steer-0") + " " + nodeState("steer-1")
	})
	require.True(t, strings.HasPrefix(nodeState("steer-0"), "Succeeded"), nodeState("steer-0"))

	// Cancel while steer-1 runs: it stops at its next step boundary, and the data plane says where
	// every node is.
	require.NoError(t, env.Temporal.CancelWorkflow(ctx, dpID, ""))
	e2e.WaitFor(t, "the cancelled rollout reports each node", 3*time.Minute, func() (bool, string) {
		c := e2e.Condition(get(t, gvrDP, "steer"), "RolloutStopped")
		return c != nil && c.Status == metav1.ConditionTrue, e2e.CondString(c)
	})
	msg := e2e.Condition(get(t, gvrDP, "steer"), "RolloutStopped").Message
	require.Contains(t, msg, "steer-0: Succeeded")
	require.Contains(t, msg, "steer-1: Stopped at ")
	require.Equal(t, "Cancelled", e2e.Str(get(t, gvrDP, "steer"), "status", "phase"))
	e2e.WaitFor(t, "steer-1 held at a step boundary", 5*time.Minute, func() (bool, string) {
		c := e2e.Condition(get(t, gvrNode, "steer-1"), "Paused")
		return c != nil && c.Status == metav1.ConditionTrue, e2e.CondString(c)
	})
	before, scheduled := e2e.StepLog(h1), playbookRuns(t, nodeWF[1])
	time.Sleep(3 * time.Second)
	require.Equal(t, scheduled, playbookRuns(t, nodeWF[1]), "a stopped node runs nothing more")
	require.Equal(t, before, e2e.StepLog(h1))
	require.Less(t, before["configure-os"], 1, "steer-1 stopped before its pipeline ended")
}

// TestNodeDeletedMidRolloutLeavesIt: a node deleted while its data plane's rollout waits on it (its
// bootstrap playbook held running) leaves the rollout, which ends Ready without it instead of waiting
// for a report that never comes.
func TestNodeDeletedMidRolloutLeavesIt(t *testing.T) {
	h1 := env.Host(t, host1)
	e2e.CleanHost(t, h1)
	startBridge(t)
	startWorker(t)

	create(t, gvrRole, `
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneRole
metadata: {name: leave}
spec:
  dataPlane: leave
  preProvisioned: true
  nodeTemplate:
    ansibleUser: root
    ansibleSSHPrivateKeySecret: edpm-ssh-key
    ansibleVars: {edpm_bootstrap_command: "sleep 120"}
`)
	create(t, gvrNode, fmt.Sprintf(`
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneNode
metadata: {name: leave-0}
spec: {role: leave, hostName: %s, ansibleHost: %s, deploy: true}
`, h1.Name, h1.Address))
	create(t, gvrDP, `
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlane
metadata: {name: leave}
spec: {roles: [leave], deploy: true}
`)
	nodeStates := func() string { return e2e.Str(get(t, gvrDP, "leave"), "status", "nodeStates") }
	// Held there: the bootstrap playbook runs for two minutes.
	e2e.WaitFor(t, "leave-0 admitted and bootstrapping", 5*time.Minute, func() (bool, string) {
		s := nodeStates()
		return strings.Contains(s, `"state":"Running"`) && strings.Contains(s, `"step":"bootstrap"`), s
	})
	env.DeleteAndWaitT(t, gvrNode, ns, "leave-0")
	e2e.WaitFor(t, "the data plane Ready without leave-0", 3*time.Minute, func() (bool, string) {
		u := get(t, gvrDP, "leave")
		c := e2e.Condition(u, lifecycle.ConditionReady)
		og, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		return c != nil && c.Status == metav1.ConditionTrue && og == u.GetGeneration() && !strings.Contains(nodeStates(), "leave-0"),
			e2e.CondString(c) + " " + nodeStates()
	})
	require.Less(t, e2e.StepLog(h1)["bootstrap"], 1, "the node left before its bootstrap ended")
}

// TestComputeNodesJoinTheirCells deploys two nodes of one role whose annotation puts its nodes in cell1:
// edpm-compute-0 keeps it and is provisioned through Ironic first (stackflow enrolls its machine);
// edpm-compute-1, provisioned on a machine an administrator enrolled, has its own annotation put it in
// cell2, which no NovaCell serves here, so its compute waits for it, saying so (tests/nova deploys
// a real cell2 from a Nova CR and boots a server on it). The worker is killed with SIGKILL during phase 0
// and during phase 1. The first node's nova-compute ends up registered in the package's Nova (deployed
// by stackflow), in cell1, running with the customServiceConfig that overrides the generated
// debug = False.
func TestComputeNodesJoinTheirCells(t *testing.T) {
	// The Nova first: with cell1 served, edpm-compute-0's phase 1 follows its phase 0 at once, and the
	// kill -9 below must find it running. In the package's order the Nova is Ready by now (it deployed
	// during the tests before this one, which need none).
	nova.WaitReady(t)
	start := time.Now()
	h0, h1 := env.Host(t, host0), env.Host(t, host1)
	e2e.CleanHost(t, h0)
	e2e.CleanHost(t, h1)
	startBridge(t)
	w := startWorker(t)

	create(t, gvrRole, `
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneRole
metadata:
  name: compute
  annotations: {nova.openstack.org/cell: cell1}
spec:
  preProvisioned: true
  nodeTemplate:
    ansibleUser: root
    ansibleSSHPrivateKeySecret: edpm-ssh-key
    managementNetwork: ctlplane
    networkAttachments: [ctlplane, internalapi]
    ansibleVars: {edpm_sysctl: {net.ipv4.ip_forward: 1}}
`)
	// The data plane first: it lists edpm-compute-0, which then waits for its admission; edpm-compute-1
	// belongs to no data plane and deploys on its own.
	dp := create(t, gvrDP, `
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlane
metadata: {name: computes}
spec:
  nodes: [edpm-compute-0]
  deploy: true
  maxConcurrency: 2
`)
	// Nova host names are per run: a compute record of an earlier run (or its resource provider, which
	// placement keeps while it has allocations) must not be mistaken for this run's.
	hostA, hostB := env.Run+"-compute-0", env.Run+"-compute-1"
	ironicName := env.Run + "-edpm-compute-0"
	// edpm-compute-1's machine is one an administrator enrolled and made available beforehand: the node
	// adopts it by name, and its scale-in must hand it back available, not delete it.
	ironic := env.BaremetalClient(t)
	props := map[string]any{"cpus": 1, "memory_mb": 512, "local_gb": 1, "cpu_arch": "x86_64"}
	adminNode := env.EnrollAvailable(t, ironic, env.Run+"-admin-machine", props)
	// Both nodes are provisioned through Ironic (phase -1) on the machine named; metadata may add
	// annotations.
	bareMetalNode := func(metadata, hostName, address, ironicNodeName string) *unstructured.Unstructured {
		return create(t, gvrNode, fmt.Sprintf(`
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneNode
metadata: %s
spec:
  role: compute
  hostName: %s
  ansibleHost: %s
  preProvisioned: false
  bareMetal:
    ironicNodeName: %s
    driver: fake-hardware
    image: %s
    properties: {cpus: "1", memory_mb: "512", local_gb: "1", cpu_arch: x86_64}
  deploy: true
`, metadata, hostName, address, ironicNodeName, env.Stack.OpenStack.Image))
	}
	nodeA := bareMetalNode("{name: edpm-compute-0}", hostA, h0.Address, ironicName)
	bareMetalNode("{name: edpm-compute-1, annotations: {nova.openstack.org/cell: cell2}}", hostB, h1.Address, adminNode.Name)

	// The nodes create their NovaExternalComputes, copying what the node and role say.
	for node, cell := range map[string]string{"edpm-compute-0": "cell1", "edpm-compute-1": "cell2"} {
		e2e.WaitFor(t, "NovaExternalCompute "+node+" created by its node", 3*time.Minute, func() (bool, string) {
			return get(t, gvrNEC, node) != nil, e2e.Summary(get(t, gvrNEC, node))
		})
		nec := get(t, gvrNEC, node)
		require.Equal(t, cell, e2e.Str(nec, "spec", "cellName"), "the effective cell annotation (node over role)")
		require.Equal(t, node, e2e.Str(nec, "spec", "dataplaneNodeName"))
		require.Equal(t, "edpm-ssh-key", e2e.Str(nec, "spec", "sshKeySecretName"))
		require.Equal(t, node+"-inventory", e2e.Str(nec, "spec", "inventoryConfigMapName"))
		require.JSONEq(t, `["ctlplane","internalapi"]`, e2e.Str(nec, "spec", "networkAttachments"))
		require.Equal(t, "true", e2e.Str(nec, "spec", "deploy"))
		require.NotEmpty(t, e2e.Str(nec, "spec", "novaComputeImage"), "image defaulted from the worker's environment")
		// customServiceConfig belongs to the CR: set it now, the node never touches it.
		patch := fmt.Sprintf(`{"spec":{"customServiceConfig":%q}}`, customConfig)
		_, err := env.Dyn.Resource(gvrNEC).Namespace(ns).Patch(context.Background(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		require.NoError(t, err)
	}

	// kill -9 during phase 0 (after phase -1 went through Ironic).
	e2e.WaitFor(t, "edpm-compute-0 running a phase 0 playbook", 10*time.Minute, func() (bool, string) {
		n := get(t, gvrNode, "edpm-compute-0")
		return strings.Contains(e2e.Str(n, "status", "currentStep"), "phase 0 ·") && strings.Contains(e2e.Str(n, "status", "currentStep"), ".yml on host"), e2e.Summary(n)
	})
	require.Equal(t, "True", string(e2e.Condition(get(t, gvrNode, "edpm-compute-0"), "BareMetalProvisioned").Status))
	w.Kill9()
	time.Sleep(2 * time.Second)
	w.Start()

	// kill -9 during phase 1.
	e2e.WaitFor(t, "edpm-compute-0's nova-compute playbook running", 10*time.Minute, func() (bool, string) {
		nec := get(t, gvrNEC, "edpm-compute-0")
		return strings.Contains(e2e.Str(nec, "status", "currentStep"), "nova-compute.yml on host"), e2e.Summary(nec)
	})
	w.Kill9()
	time.Sleep(2 * time.Second)
	w.Start()

	// Checked after the phase-1 kill: compute-0's playbook may run and end before compute-1 is done
	// with phase 0, while compute-1's wait for its cell lasts.
	// cell1 is the package's Nova's (NovaCell nova-cell1); no NovaCell serves cell2: that compute waits,
	// visibly, for its cell.
	e2e.WaitFor(t, "edpm-compute-1's compute waiting for its NovaCell", 15*time.Minute, func() (bool, string) {
		c := e2e.Condition(get(t, gvrNEC, "edpm-compute-1"), "ComputeDeployed")
		return c != nil && c.Reason == "WaitingForCell", e2e.CondString(c)
	})

	e2e.WaitFor(t, "data plane computes Ready", 15*time.Minute, func() (bool, string) {
		d := get(t, gvrDP, "computes")
		c := e2e.Condition(d, lifecycle.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue, e2e.Summary(d) + " nodes=" + e2e.Str(d, "status", "nodeStates")
	})
	t.Logf("data plane Ready %.0fs after the objects were created", time.Since(start).Seconds())

	// Phase -1 went through Ironic to active.
	n0 := get(t, gvrNode, "edpm-compute-0")
	require.Equal(t, "active", e2e.Str(n0, "status", "provisionState"))
	require.NotEmpty(t, e2e.Str(n0, "status", "ironicNodeUUID"))
	inIronic := e2e.IronicNode(t, ironic, e2e.Str(n0, "status", "ironicNodeUUID"))
	require.NotNil(t, inIronic, "the node's Ironic node")
	require.Equal(t, "active", inIronic.ProvisionState)
	require.Equal(t, ironicName, inIronic.Name)
	require.Equal(t, true, inIronic.Extra[baremetal.EnrolledMark], "stackflow marked the node it enrolled: %v", inIronic.Extra)
	require.Equal(t, "true", e2e.Str(n0, "status", "deployed"))
	phases := map[string]string{}
	raw, _, _ := unstructured.NestedSlice(n0.Object, "status", "phases")
	for _, p := range raw {
		m, _ := p.(map[string]any)
		phases[fmt.Sprint(m["name"])] = fmt.Sprint(m["state"])
	}
	require.Equal(t, map[string]string{"BareMetal": "Succeeded", "Infrastructure": "Succeeded", "Services": "Succeeded"}, phases)

	// Phase 0 is on each host's own filesystem, and nowhere else.
	require.Contains(t, e2e.HostFile(h0, "etc/edpm/node.json"), `"node": "`+hostA+`"`)
	require.Contains(t, e2e.HostFile(h1, "etc/edpm/node.json"), `"node": "`+hostB+`"`)
	require.Contains(t, e2e.HostFile(h0, "etc/edpm/node.json"), `"kernelHostname": "`+host0+`"`, "the playbook ran on the host itself")
	require.Contains(t, e2e.HostFile(h0, "etc/edpm/network/config.json"), "internalapi")
	require.Contains(t, e2e.HostFile(h0, "etc/edpm/os/99-edpm-sysctl.conf"), "net.ipv4.ip_forward = 1")
	_, err := os.Stat("/etc/edpm/node.json")
	require.True(t, os.IsNotExist(err), "phase 0 wrote to the machine's own /etc/edpm")

	// customServiceConfig (a later file) beats the generated debug = False in what nova-compute loaded.
	require.Contains(t, e2e.HostFile(h0, "etc/nova/nova.conf.d/01-nova.conf"), "debug = False")
	require.Contains(t, e2e.HostFile(h0, "etc/nova/nova.conf.d/99-nova-custom.conf"), "debug = True")
	logText := e2e.HostFile(h0, "var/log/nova/nova-compute.log")
	require.Contains(t, logText, " DEBUG ", "nova-compute logs at debug level")
	require.Regexp(t, `\] debug\s+= True `, logText, "nova-compute's own dump of its options")

	// The node's nova-compute is a compute service and hypervisor of the Nova stackflow deployed, in
	// cell1: its compute API (in the Nova's region) lists it.
	nec0 := get(t, gvrNEC, "edpm-compute-0")
	require.Equal(t, hostA, e2e.Str(nec0, "status", "hypervisorHostname"))
	cc := env.ComputeClient(t, NovaRegion)
	pages, err := services.List(cc, services.ListOpts{Binary: "nova-compute", Host: hostA}).AllPages(context.Background())
	require.NoError(t, err)
	svcs, err := services.ExtractServices(pages)
	require.NoError(t, err)
	require.Len(t, svcs, 1)
	require.Equal(t, "up", svcs[0].State)
	require.Equal(t, e2e.Str(nec0, "status", "computeServiceID"), svcs[0].ID)
	pattern := hostA
	hpages, err := hypervisors.List(cc, hypervisors.ListOpts{HypervisorHostnamePattern: &pattern}).AllPages(context.Background())
	require.NoError(t, err)
	hvs, err := hypervisors.ExtractHypervisors(hpages)
	require.NoError(t, err)
	require.Len(t, hvs, 1)
	e2e.WaitFor(t, hostA+" mapped in cell1", 2*time.Minute, func() (bool, string) {
		out := e2e.NovaManage(t, nova.SuperconductorConfig(t), "cell_v2", "list_hosts")
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, " cell1 ") && strings.Contains(line, " "+hostA+" ") {
				return true, line
			}
		}
		return false, lastLine(out)
	})

	// The override node still waits for its cell, and nothing of nova-compute reached its host.
	c1 := e2e.Condition(get(t, gvrNEC, "edpm-compute-1"), "ComputeDeployed")
	require.Equal(t, "WaitingForCell", c1.Reason, e2e.CondString(c1))
	require.Contains(t, c1.Message, "cell2")
	require.Empty(t, e2e.HostFile(h1, "etc/nova/nova.conf.d/01-nova.conf"))

	// Its phase -1 adopted the administrator's machine (same UUID, no mark of stackflow's) and deployed it.
	n1 := get(t, gvrNode, "edpm-compute-1")
	require.Equal(t, adminNode.UUID, e2e.Str(n1, "status", "ironicNodeUUID"), "the node adopted the machine by name")
	adopted := e2e.IronicNode(t, ironic, adminNode.UUID)
	require.NotNil(t, adopted)
	require.Equal(t, "active", adopted.ProvisionState)
	require.NotContains(t, adopted.Extra, baremetal.EnrolledMark, "stackflow did not enroll it")

	requirePreviewChangesNothing(t, h0, hostA, nec0)

	// Progress is searchable in Temporal by host and cell.
	ids := workflowsWith(t, fmt.Sprintf(`StackflowHost = %q AND StackflowCell = "cell1"`, hostA))
	require.Contains(t, ids, workflowID("NovaExternalCompute", gvrNEC, nec0))
	require.Contains(t, ids, workflowID("OpenStackDataPlaneNode", gvrNode, nodeA))
	require.Contains(t, e2e.Str(get(t, gvrDP, dp.GetName()), "status", "nodeStates"), `"state":"Succeeded"`)

	// Deleting the node tears its compute down: nova-compute stopped on the host and its files removed
	// (its log aside), and its compute service gone from Nova.
	env.DeleteAndWaitT(t, gvrNode, ns, nodeA.GetName())
	require.Nil(t, get(t, gvrNEC, "edpm-compute-0"), "the node's NovaExternalCompute went with it")
	require.Nil(t, e2e.IronicNode(t, ironic, inIronic.UUID), "the Ironic node stackflow enrolled is undeployed and deleted")
	e2e.RequireRemoved(t, h0, "nova-compute")
	require.NotEmpty(t, e2e.HostFile(h0, "var/log/nova/nova-compute.log"), "its log stays")
	pages, err = services.List(cc, services.ListOpts{Binary: "nova-compute", Host: hostA}).AllPages(context.Background())
	require.NoError(t, err)
	svcs, err = services.ExtractServices(pages)
	require.NoError(t, err)
	require.Empty(t, svcs, "the compute service of %s is gone from Nova", hostA)

	// Scaling in the adopted machine's node hands the machine back: undeployed, available, nothing of the
	// deployment left on it, and still in Ironic.
	env.DeleteAndWaitT(t, gvrNode, ns, "edpm-compute-1")
	back := e2e.IronicNode(t, ironic, adminNode.UUID)
	require.NotNil(t, back, "the administrator's machine is kept in Ironic")
	require.Equal(t, "available", back.ProvisionState)
	require.Empty(t, back.TargetProvisionState)
	require.Empty(t, back.LastError)
	require.Empty(t, back.InstanceUUID)
	require.NotContains(t, back.InstanceInfo, "image_source", "the deployment's image is cleared: %v", back.InstanceInfo)
	t.Logf("scenario done in %.0fs", time.Since(start).Seconds())
}

// requirePreviewChangesNothing is the preview flow on a deployed compute: pause its workflow, edit
// customServiceConfig, ask for a preview — a check-mode run of the nova-compute playbook that names the
// custom file's new line and the restart a real run would do, with no Secret value in it — then revert the
// edit and resume. The host is byte-for-byte what it was throughout, and nova-compute never restarted.
func requirePreviewChangesNothing(t *testing.T, h local.TestHost, host string, nec *unstructured.Unstructured) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	id := workflowID("NovaExternalCompute", gvrNEC, nec)
	dirs := []string{"etc", "var/lib/edpm", "var/log/stackflow", "run/stackflow"}
	before := e2e.HostSnapshot(t, h, dirs...)
	require.NotEmpty(t, before["etc/nova/nova.conf.d/99-nova-custom.conf"])
	pid := e2e.HostFile(h, "run/stackflow/nova-compute.pid")
	require.NotEmpty(t, pid)

	patch := func(custom string) {
		b, _ := json.Marshal(map[string]any{"spec": map[string]any{"customServiceConfig": custom}})
		_, err := env.Dyn.Resource(gvrNEC).Namespace(ns).Patch(ctx, nec.GetName(), types.MergePatchType, b, metav1.PatchOptions{})
		require.NoError(t, err)
	}
	require.NoError(t, env.Temporal.SignalWorkflow(ctx, id, "", lifecycle.SignalPause, nil))
	patch(customConfig + "max_concurrent_builds = 3\n")
	t0 := time.Now()
	h2, err := env.Temporal.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: lifecycle.UpdatePreview,
		WaitForStage: client.WorkflowUpdateStageCompleted})
	require.NoError(t, err)
	var p dataplane.ServicePreview
	require.NoError(t, h2.Get(ctx, &p))
	t.Logf("preview of %s in %.1fs: %+v", nec.GetName(), time.Since(t0).Seconds(), p.Changes)
	require.False(t, p.UpToDate, "the edit is not what is installed")
	require.Equal(t, host, p.Host)
	var install, restart *ansible.TaskChange
	for i, c := range p.Changes {
		switch {
		case c.Task == "Install configuration files":
			install = &p.Changes[i]
		case strings.Contains(c.Task, "would be (re)started"):
			restart = &p.Changes[i]
		}
	}
	require.NotNil(t, install, "the custom file would change: %+v", p.Changes)
	require.Equal(t, []string{"/etc/nova/nova.conf.d/99-nova-custom.conf"}, install.Items, "only the custom file")
	require.Contains(t, install.Diff, "+max_concurrent_builds = 3")
	require.NotNil(t, restart, "nova-compute would restart: %+v", p.Changes)
	// Nothing of the generated file, which holds the cell's transport URL (a Secret's value).
	raw, _ := json.Marshal(p)
	require.NotContains(t, string(raw), "transport_url")
	require.Equal(t, before, e2e.HostSnapshot(t, h, dirs...), "a preview changes nothing on the host")

	patch(customConfig)
	gen := get(t, gvrNEC, nec.GetName()).GetGeneration()
	require.NoError(t, env.Temporal.SignalWorkflow(ctx, id, "", lifecycle.SignalResume, nil))
	e2e.WaitFor(t, nec.GetName()+" Ready at the reverted generation", 3*time.Minute, func() (bool, string) {
		n := get(t, gvrNEC, nec.GetName())
		c := e2e.Condition(n, lifecycle.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue && e2e.Str(n, "status", "observedGeneration") == fmt.Sprint(gen), e2e.Summary(n)
	})
	require.Equal(t, before, e2e.HostSnapshot(t, h, dirs...), "the reverted edit never reached the host")
	require.Equal(t, pid, e2e.HostFile(h, "run/stackflow/nova-compute.pid"), "nova-compute was not restarted")
}
