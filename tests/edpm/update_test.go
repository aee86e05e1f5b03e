package edpm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/services"
	"github.com/gophercloud/gophercloud/v2/openstack/placement/v1/resourceproviders"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/tests/e2e"
)

var gvrUpdate = schema.GroupVersionResource{Group: "dataplane.openstack.org", Version: "v1beta1", Resource: "openstackdataplaneupdates"}

// siteLogging is the logging configuration a site keeps on its hosts (Python's fileConfig format, to
// stderr, which nova-compute's log collects). The second update points nova-compute at it
// (log_config_append); a host without it cannot start nova-compute with that update's configuration.
const siteLogging = `[loggers]
keys = root
[handlers]
keys = stderr
[formatters]
keys = plain
[logger_root]
level = INFO
handlers = stderr
[handler_stderr]
class = StreamHandler
args = (sys.stderr,)
formatter = plain
[formatter_plain]
format = %(asctime)s %(process)d %(levelname)s %(name)s %(message)s
`

// TestRollingUpdateOfComputes runs two updates of a data plane of two computes (fake driver, in cell1 of
// the package's Nova, which stackflow deployed in a region of its own) carrying three servers. The first: the canary is disabled in Nova and drained while it updates (the worker is
// killed with SIGKILL during its drain, which is held open by freezing the destination's nova-compute
// until the kill has landed), its servers wait on the other compute and come back, the gate
// holds the second node until approved, and the second node's update playbook survives a SIGKILL too;
// both end enabled, reporting the new version, every server where it was. The second update breaks
// nova-compute's configuration on one host (its configuration layer names a logging configuration the
// site put on the first host only): that node is rolled back to its checkpoint (the previous layer, old
// version running, enabled), the update fails naming it and why, and a retry once the file is there
// updates that node only. Then both computes are removed (scaleIn).
func TestRollingUpdateOfComputes(t *testing.T) {
	start := time.Now()
	ctx := context.Background()
	h0, h1 := env.Host(t, host0), env.Host(t, host1)
	e2e.CleanHost(t, h0)
	e2e.CleanHost(t, h1)
	startBridge(t)
	w := startWorker(t)
	hostA, hostB := env.Run+"-up-0", env.Run+"-up-1"

	// The computes join cell1 of the package's Nova: the update's every call about them (disable, drain,
	// version, enable) goes to that Nova's region.
	// They join the cloud's OVN too (the ovn step): Neutron binds the servers' ports, and moves them on
	// live migration, only between chassis.
	create(t, gvrRole, fmt.Sprintf(`
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneRole
metadata:
  name: upd
  annotations: {nova.openstack.org/cell: cell1}
spec:
  dataPlane: upd
  preProvisioned: true
  nodeTemplate:
    ansibleUser: root
    ansibleSSHPrivateKeySecret: edpm-ssh-key
    managementNetwork: ctlplane
    ansibleVars: {edpm_ovn_sb_connection: %q}
`, local.OVNSouthbound))
	create(t, gvrDP, `
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlane
metadata: {name: upd}
spec: {roles: [upd], deploy: true, maxConcurrency: 2}
`)
	for i, h := range []local.TestHost{h0, h1} {
		create(t, gvrNode, fmt.Sprintf(`
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneNode
metadata: {name: upd-%d}
spec: {role: upd, hostName: %s, ansibleHost: %s, deploy: true}
`, i, []string{hostA, hostB}[i], h.Address))
	}
	for _, node := range []string{"upd-0", "upd-1"} {
		e2e.WaitFor(t, "NovaExternalCompute "+node, 3*time.Minute, func() (bool, string) {
			return get(t, gvrNEC, node) != nil, e2e.Summary(get(t, gvrNEC, node))
		})
		patch := fmt.Sprintf(`{"spec":{"customServiceConfig":%q}}`, customConfig)
		_, err := env.Dyn.Resource(gvrNEC).Namespace(ns).Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		require.NoError(t, err)
	}
	e2e.WaitFor(t, "data plane upd deployed", 15*time.Minute, func() (bool, string) {
		d := get(t, gvrDP, "upd")
		c := e2e.Condition(d, "Deployed")
		return c != nil && c.Status == metav1.ConditionTrue, e2e.Summary(d)
	})
	t.Logf("two computes deployed in %.0fs", time.Since(start).Seconds())

	nova.WaitReady(t)
	cc, err := env.CloudIn(ctx, NovaRegion)
	require.NoError(t, err)
	s1, s2 := bootServer(t, cc, env.Run+"-s1", hostA), bootServer(t, cc, env.Run+"-s2", hostA)
	s3 := bootServer(t, cc, env.Run+"-s3", hostB)
	home := map[string]string{s1: hostA, s2: hostA, s3: hostB}

	// First update: canary, gate, kill -9 during the canary's drain and during the second's playbook.
	u1 := create(t, gvrUpdate, `
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneUpdate
metadata: {name: to-2}
spec:
  dataPlane: upd
  novaCompute:
    version: "2"
    customServiceConfig: |
      [DEFAULT]
      reserved_host_memory_mb = 128
  strategy: {canary: 1, maxUnavailable: 1, approveAfterCanary: true}
  drain: {timeout: 4m}
`)
	u1ID := workflowID("OpenStackDataPlaneUpdate", gvrUpdate, u1)
	// What Nova shows while the canary updates, sampled from the compute API until the gate.
	watch := watchCanary(cc, hostA, []string{s1, s2})
	// The drain is held open for the kill: the canary's instances go to hostB, whose nova-compute is
	// frozen, so their live migrations wait on it until it is thawed after the kill.
	thaw := e2e.Freeze(t, h1, e2e.NovaCompute())
	e2e.WaitFor(t, "the canary's instances migrating", 45*time.Second, func() (bool, string) {
		on, err := cc.ServersOn(ctx, hostA)
		require.NoError(t, err)
		for _, s := range on {
			if s.TaskState == "migrating" {
				return true, ""
			}
		}
		return false, fmt.Sprint(nodeState(t, "to-2", "upd-0"))
	})
	svcA := computeService(t, cc, hostA)
	require.Equal(t, "disabled", svcA.Status, "the canary takes no new instance while it is drained")
	require.Contains(t, svcA.DisabledReason, "stackflow update "+ns+"/to-2")
	require.Equal(t, "enabled", computeService(t, cc, hostB).Status)
	w.Kill9()
	thaw()
	time.Sleep(2 * time.Second)
	w.Start()

	e2e.WaitFor(t, "the gate holding the second node", 5*time.Minute, func() (bool, string) {
		u := get(t, gvrUpdate, "to-2")
		return e2e.Str(u, "status", "gate") == "canary", e2e.Summary(u)
	})
	samples := watch()
	require.NotEmpty(t, samples, "the canary was seen updating")
	for _, smp := range samples {
		require.Equal(t, "disabled", smp.service, "disabled in Nova while it updates (%s)", smp.state)
		require.Equal(t, []string{hostB, hostB}, smp.hosts, "its instances wait on the other compute (%s)", smp.state)
	}
	u := get(t, gvrUpdate, "to-2")
	require.Equal(t, "AwaitingApproval", e2e.Str(u, "status", "phase"))
	require.Equal(t, "Succeeded", nodeState(t, "to-2", "upd-0")["state"])
	require.Equal(t, "Pending", nodeState(t, "to-2", "upd-1")["state"])
	require.Equal(t, "enabled", computeService(t, cc, hostA).Status)
	require.Equal(t, "enabled", computeService(t, cc, hostB).Status)
	require.Equal(t, hostA, serverHost(t, cc, s1), "the canary's instances came back")
	require.Equal(t, hostA, serverHost(t, cc, s2))
	require.Equal(t, []string{"CUSTOM_STACKFLOW_NOVA_COMPUTE_2"}, versionClasses(t, cc, hostA), "nova-compute reports the new version")
	require.Empty(t, versionClasses(t, cc, hostB), "the second node is untouched")
	require.Greater(t, activityAttempts(t, u1ID, "MigrateServers"), 1, "the drain went on in a new attempt after the crash")
	require.Contains(t, kubectlGet(t, "osdpupdate", "to-2"), "canary", "kubectl shows the gate")
	meta, err := env.Temporal.QueryWorkflow(ctx, u1ID, "", "__temporal_workflow_metadata")
	require.NoError(t, err)
	// The metadata query answers a protobuf message (the SDK's own), which the data converter decodes
	// only into that type.
	var md sdkpb.WorkflowMetadata
	require.NoError(t, meta.Get(&md))
	require.Contains(t, md.GetCurrentDetails(), "waiting for approval of gate", "the Temporal UI shows where the update is")

	// A person approves from the shell with the recipe of docs/operations/steering.md: the temporal CLI, since tctl v1.18 has no
	// workflow updates (docs/operations/steering.md says so; tctl refuses the command).
	for _, c := range clis(t) {
		if c.update == nil {
			out, err := c.try(c.name, "workflow", "update", "--workflow_id", u1ID, "--name", lifecycle.UpdateApprove)
			require.Error(t, err, "%s has no workflow update command:\n%s", c.name, out)
			require.Contains(t, out, "No help topic for 'update'")
			continue
		}
		c.run(t, c.update(u1ID, lifecycle.UpdateApprove, `{"gate":"canary"}`))
	}

	e2e.WaitFor(t, "the second node's update playbook running", 5*time.Minute, func() (bool, string) {
		out, _ := exec.Command("pgrep", "-f", "nova-compute-update.yml").Output()
		return len(strings.TrimSpace(string(out))) > 0, fmt.Sprint(nodeState(t, "to-2", "upd-1"))
	})
	w.Kill9()
	time.Sleep(2 * time.Second)
	w.Start()

	e2e.WaitFor(t, "update to-2 Ready", 10*time.Minute, func() (bool, string) {
		u := get(t, gvrUpdate, "to-2")
		c := e2e.Condition(u, lifecycle.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue, e2e.Summary(u)
	})
	for _, node := range []string{"upd-0", "upd-1"} {
		st := nodeState(t, "to-2", node)
		require.Equal(t, "Succeeded", st["state"], node)
		require.Equal(t, "2", st["versionAfter"], node)
	}
	require.Equal(t, "2", fmt.Sprint(nodeState(t, "to-2", "upd-0")["instancesMoved"]))
	require.Equal(t, "2", fmt.Sprint(nodeState(t, "to-2", "upd-0")["instancesReturned"]))
	requireAllEnabledAndHome(t, cc, home, hostA, hostB)
	for _, h := range []string{hostA, hostB} {
		require.Equal(t, []string{"CUSTOM_STACKFLOW_NOVA_COMPUTE_2"}, versionClasses(t, cc, h), h)
	}
	for _, h := range []local.TestHost{h0, h1} {
		require.Equal(t, "2\n", e2e.HostFile(h, "etc/stackflow/nova-compute.version"), h.Name)
		require.Contains(t, e2e.HostFile(h, "etc/nova/nova.conf.d/50-stackflow-update.conf"), "reserved_host_memory_mb = 128")
	}
	t.Logf("first update done at %.0fs", time.Since(start).Seconds())
	runs, err := e2e.Runs(ctx, env.Temporal, u1ID)
	require.NoError(t, err)
	longest := 0
	for _, r := range runs {
		longest = max(longest, len(r))
	}
	t.Logf("update to-2: %d runs, longest %d events", len(runs), longest)

	// Second update: nova-compute cannot start with its configuration on the second host.
	logging := filepath.Join("etc", "nova", "site-logging.conf")
	require.NoError(t, os.WriteFile(filepath.Join(h0.Root, logging), []byte(siteLogging), 0o644))
	u2 := create(t, gvrUpdate, `
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneUpdate
metadata: {name: to-3}
spec:
  dataPlane: upd
  novaCompute:
    version: "3"
    customServiceConfig: |
      [DEFAULT]
      log_config_append = /etc/nova/site-logging.conf
  strategy: {canary: 0, maxUnavailable: 1}
`)
	e2e.WaitFor(t, "update to-3 Failed", 10*time.Minute, func() (bool, string) {
		u := get(t, gvrUpdate, "to-3")
		return e2e.Str(u, "status", "phase") == lifecycle.PhaseFailed, e2e.Summary(u)
	})
	ready := e2e.Condition(get(t, gvrUpdate, "to-3"), lifecycle.ConditionReady)
	require.Equal(t, "VerificationFailed", ready.Reason)
	require.Contains(t, ready.Message, "upd-1 (VerificationFailed at apply")
	require.Contains(t, ready.Message, "nova-compute exited at start", "the reason")
	require.Contains(t, ready.Message, "Error loading logging config", "nova-compute's own last words")
	require.Contains(t, ready.Message, "rolled back to its checkpoint")
	require.Equal(t, "Succeeded", nodeState(t, "to-3", "upd-0")["state"])
	failed := nodeState(t, "to-3", "upd-1")
	require.Equal(t, "Failed", failed["state"])
	require.Equal(t, "2", failed["versionAfter"], "rolled back to its checkpoint")
	require.Contains(t, failed["message"], "rolled back to its checkpoint")
	require.Equal(t, "up", computeService(t, cc, hostB).State)
	require.Equal(t, []string{"CUSTOM_STACKFLOW_NOVA_COMPUTE_2"}, versionClasses(t, cc, hostB), "nova-compute runs the old version again")
	require.Equal(t, "2\n", e2e.HostFile(h1, "etc/stackflow/nova-compute.version"))
	require.Contains(t, e2e.HostFile(h1, "etc/nova/nova.conf.d/50-stackflow-update.conf"), "reserved_host_memory_mb = 128", "the previous update's layer is back")
	require.NotContains(t, e2e.HostFile(h1, "etc/nova/nova.conf.d/50-stackflow-update.conf"), "log_config_append")
	require.Equal(t, []string{"CUSTOM_STACKFLOW_NOVA_COMPUTE_3"}, versionClasses(t, cc, hostA))
	requireAllEnabledAndHome(t, cc, home, hostA, hostB)

	// The site puts its file on the second host too; the retry updates the failed node only.
	require.NoError(t, os.WriteFile(filepath.Join(h1.Root, logging), []byte(siteLogging), 0o644))
	u2ID := workflowID("OpenStackDataPlaneUpdate", gvrUpdate, u2)
	require.NoError(t, env.Temporal.SignalWorkflow(ctx, u2ID, "", lifecycle.SignalRetry, lifecycle.RetrySignal{}))
	e2e.WaitFor(t, "update to-3 Ready after the retry", 10*time.Minute, func() (bool, string) {
		u := get(t, gvrUpdate, "to-3")
		c := e2e.Condition(u, lifecycle.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue, e2e.Summary(u)
	})
	require.Equal(t, "1", fmt.Sprint(nodeState(t, "to-3", "upd-0")["attempts"]), "the node that succeeded is not run again")
	require.Equal(t, "2", fmt.Sprint(nodeState(t, "to-3", "upd-1")["attempts"]))
	require.Equal(t, 2, e2e.StepLog(h0)["update-apply"], "one update playbook per update on the first host")
	require.Equal(t, 2, e2e.StepLog(h1)["update-apply"], "the failed run never finished; the first update's and the retry's did")
	require.Equal(t, 1, e2e.StepLog(h1)["update-rollback"])
	require.Zero(t, e2e.StepLog(h0)["update-rollback"])
	for _, h := range []string{hostA, hostB} {
		require.Equal(t, []string{"CUSTOM_STACKFLOW_NOVA_COMPUTE_3"}, versionClasses(t, cc, h), h)
	}
	requireAllEnabledAndHome(t, cc, home, hostA, hostB)
	t.Logf("updates done at %.0fs", time.Since(start).Seconds())

	limitedRuns(t, h0, h1)
	scaleIn(t, cc, w, hostA, hostB, h0, h1, s1, s2, s3)
	t.Logf("scenario done in %.0fs", time.Since(start).Seconds())
}

// scaleIn removes the two computes of the rolling update as an operator scales in. upd-1 goes first
// with s3 on it: disabled in Nova, s3 live-migrated to upd-0 (the worker killed with SIGKILL during the
// drain, held open as the canary's is), then nova-compute stopped and its files removed from the host, and its service, hypervisor and
// resource provider gone from Nova and Placement. upd-0 goes next with every server on it and nowhere to
// move them: under onDrainFailure Stop it stays, running them, with a condition naming them, until a
// person approves the gate "remove" with the temporal CLI; then they are deleted with it. Each node's
// deletion also takes its host out of the cloud's OVN: ovn-controller and Open vSwitch stopped, and no
// Neutron agent left on it.
func scaleIn(t *testing.T, cc *e2e.Cloud, w *e2e.Proc, hostA, hostB string, h0, h1 local.TestHost, s1, s2, s3 string) {
	ctx := context.Background()
	// Both hosts are chassis of the cloud's OVN (their ovn step); removing a node takes its chassis away.
	controller := "OVN Controller agent ovn-controller alive=true"
	cc.WaitNetworkAgents(t, hostA, 2*time.Minute, controller)
	cc.WaitNetworkAgents(t, hostB, 2*time.Minute, controller)
	patch := []byte(`{"spec":{"removal":{"drainTimeout":"3m","onDrainFailure":"Stop"}}}`)
	_, err := env.Dyn.Resource(gvrNEC).Namespace(ns).Patch(ctx, "upd-1", types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
	necB := workflowID("NovaExternalCompute", gvrNEC, get(t, gvrNEC, "upd-1"))
	// The replay corpus keeps a node's teardown that took its host out of OVN.
	env.RecordPath(workflowID("OpenStackDataPlaneNode", gvrNode, get(t, gvrNode, "upd-1")), "ovn-removed", e2e.Scheduled("DeleteNetworkAgents"))
	// The drain is held open for the kill: s3 goes to hostA, whose nova-compute is frozen until after it.
	thaw := e2e.Freeze(t, h0, e2e.NovaCompute())
	require.NoError(t, env.Dyn.Resource(gvrNode).Namespace(ns).Delete(ctx, "upd-1", metav1.DeleteOptions{}))
	e2e.WaitFor(t, "s3 migrating off upd-1's compute", 45*time.Second, func() (bool, string) {
		s, err := servers.Get(ctx, cc.Compute, s3).Extract()
		require.NoError(t, err)
		return s.TaskState == "migrating", e2e.Summary(get(t, gvrNEC, "upd-1"))
	})
	svcB := computeService(t, cc, hostB)
	require.Equal(t, "disabled", svcB.Status, "a compute being removed takes no new instance")
	require.Equal(t, "stackflow: removing NovaExternalCompute/"+ns+"/upd-1", svcB.DisabledReason)
	w.Kill9()
	thaw()
	time.Sleep(2 * time.Second)
	w.Start()
	e2e.WaitFor(t, "node upd-1 and its compute gone", 5*time.Minute, func() (bool, string) {
		return get(t, gvrNode, "upd-1") == nil && get(t, gvrNEC, "upd-1") == nil, e2e.Summary(get(t, gvrNEC, "upd-1"))
	})
	s, err := servers.Get(ctx, cc.Compute, s3).Extract()
	require.NoError(t, err, "s3 survives its compute's removal")
	require.Equal(t, "ACTIVE", s.Status)
	require.Equal(t, hostA, s.Host, "s3 was live-migrated to the compute that stays")
	require.Greater(t, activityAttempts(t, necB, "MigrateServers"), 1, "the drain went on in a new attempt after the crash")
	requireComputeGone(t, cc, hostB)
	e2e.RequireRemoved(t, h1, "nova-compute", e2e.OVNChassis.Name)
	cc.WaitNetworkAgents(t, hostB, time.Minute)

	// upd-0 with every server and nowhere to go: held until a person approves.
	necA := workflowID("NovaExternalCompute", gvrNEC, get(t, gvrNEC, "upd-0"))
	require.NoError(t, env.Dyn.Resource(gvrNode).Namespace(ns).Delete(ctx, "upd-0", metav1.DeleteOptions{}))
	var held string
	e2e.WaitFor(t, "upd-0's removal held on its instances", 5*time.Minute, func() (bool, string) {
		nec := get(t, gvrNEC, "upd-0")
		c := e2e.Condition(nec, "ComputeDeployed")
		if c != nil {
			held = c.Message
		}
		return c != nil && c.Reason == "DrainFailed", e2e.Summary(nec)
	})
	for _, id := range []string{s1, s2, s3} {
		require.Contains(t, held, id, "the condition names every instance that could not move")
		require.Equal(t, hostA, serverHost(t, cc, id), "held: the instances stay where they run")
	}
	require.Contains(t, held, `gate "remove"`)
	require.Equal(t, "disabled", computeService(t, cc, hostA).Status)
	for _, c := range clis(t) {
		if c.update != nil {
			c.run(t, c.update(necA, lifecycle.UpdateApprove, `{"gate":"remove"}`))
		}
	}
	e2e.WaitFor(t, "node upd-0 and its compute gone", 5*time.Minute, func() (bool, string) {
		return get(t, gvrNode, "upd-0") == nil && get(t, gvrNEC, "upd-0") == nil, e2e.Summary(get(t, gvrNEC, "upd-0"))
	})
	for _, id := range []string{s1, s2, s3} {
		_, err := servers.Get(ctx, cc.Compute, id).Extract()
		require.True(t, gophercloud.ResponseCodeIs(err, 404), "%s was deleted with its compute once approved (%v)", id, err)
	}
	requireComputeGone(t, cc, hostA)
	cc.WaitNetworkAgents(t, hostA, time.Minute)
}

// requireComputeGone checks that Nova lists no compute service or hypervisor on host and Placement no
// resource provider of that name.
func requireComputeGone(t *testing.T, cc *e2e.Cloud, host string) {
	t.Helper()
	ctx := context.Background()
	pages, err := services.List(cc.Compute, services.ListOpts{Binary: "nova-compute", Host: host}).AllPages(ctx)
	require.NoError(t, err)
	svcs, err := services.ExtractServices(pages)
	require.NoError(t, err)
	require.Empty(t, svcs, "no compute service left on %s", host)
	_, err = cc.VersionClasses(ctx, host)
	require.Error(t, err, "no hypervisor left for %s", host)
	require.True(t, strings.Contains(err.Error(), "no hypervisor "+host) || gophercloud.ResponseCodeIs(err, 404), "no hypervisor left for %s: %v", host, err)
	rpages, err := resourceproviders.List(cc.Placement, resourceproviders.ListOpts{Name: host}).AllPages(ctx)
	require.NoError(t, err)
	rps, err := resourceproviders.ExtractResourceProviders(rpages)
	require.NoError(t, err)
	require.Empty(t, rps, "no resource provider left for %s", host)
}

// canarySample is what Nova showed once while the canary was updating.
type canarySample struct {
	state   string
	service string
	hosts   []string
}

// watchCanary samples, while the canary (node upd-0 of update to-2) is Updating or Verifying, its
// compute service's status and where the servers ids are; the returned function stops and returns them.
func watchCanary(c *e2e.Cloud, canary string, ids []string) func() []canarySample {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan []canarySample)
	go func() {
		var out []canarySample
		defer func() { done <- out }()
		for ctx.Err() == nil {
			time.Sleep(500 * time.Millisecond)
			u, err := env.Dyn.Resource(gvrUpdate).Namespace(ns).Get(ctx, "to-2", metav1.GetOptions{})
			if err != nil {
				continue
			}
			state := ""
			raw, _, _ := unstructured.NestedSlice(u.Object, "status", "nodeStates")
			for _, e := range raw {
				if m, ok := e.(map[string]any); ok && m["name"] == "upd-0" {
					state = fmt.Sprint(m["state"])
				}
			}
			if state != "Updating" && state != "Verifying" {
				continue
			}
			svc, err := c.ComputeService(ctx, canary)
			if err != nil {
				continue
			}
			smp := canarySample{state: state, service: svc.Status}
			for _, id := range ids {
				if s, err := serversGet(ctx, c, id); err == nil {
					smp.hosts = append(smp.hosts, s)
				}
			}
			out = append(out, smp)
		}
	}()
	return func() []canarySample {
		cancel()
		return <-done
	}
}

func serversGet(ctx context.Context, c *e2e.Cloud, id string) (string, error) {
	s, err := servers.Get(ctx, c.Compute, id).Extract()
	if err != nil {
		return "", err
	}
	return s.Host, nil
}

// nodeState is one node's entry in an update's status.nodeStates.
func nodeState(t *testing.T, update, node string) map[string]any {
	t.Helper()
	raw, _, _ := unstructured.NestedSlice(get(t, gvrUpdate, update).Object, "status", "nodeStates")
	for _, e := range raw {
		if m, ok := e.(map[string]any); ok && m["name"] == node {
			return m
		}
	}
	return map[string]any{}
}

// requireAllEnabledAndHome checks that no compute is left disabled and no server was lost: each exists,
// ACTIVE, on its own host.
func requireAllEnabledAndHome(t *testing.T, c *e2e.Cloud, home map[string]string, hosts ...string) {
	t.Helper()
	for _, h := range hosts {
		svc := computeService(t, c, h)
		require.Equal(t, "enabled", svc.Status, "%s left disabled (%s)", h, svc.DisabledReason)
	}
	for id, h := range home {
		s, err := servers.Get(context.Background(), c.Compute, id).Extract()
		require.NoError(t, err, "server %s lost", id)
		require.Equal(t, "ACTIVE", s.Status, id)
		require.Equal(t, h, s.Host, id)
	}
}

func computeService(t *testing.T, c *e2e.Cloud, host string) services.Service {
	t.Helper()
	svc, err := c.ComputeService(context.Background(), host)
	require.NoError(t, err)
	return svc
}

func serverHost(t *testing.T, c *e2e.Cloud, id string) string {
	t.Helper()
	s, err := servers.Get(context.Background(), c.Compute, id).Extract()
	require.NoError(t, err)
	return s.Host
}

// bootServer boots a server on host; it is deleted when the test ends.
func bootServer(t *testing.T, c *e2e.Cloud, name, host string) string {
	t.Helper()
	id, err := c.BootServer(context.Background(), name, host, env.Stack.OpenStack.Image, env.Stack.OpenStack.TenantNetwork)
	if id != "" {
		t.Cleanup(func() { _ = servers.Delete(context.Background(), c.Compute, id).ExtractErr() })
	}
	require.NoError(t, err)
	return id
}

func versionClasses(t *testing.T, c *e2e.Cloud, host string) []string {
	t.Helper()
	out, err := c.VersionClasses(context.Background(), host)
	require.NoError(t, err)
	return out
}

// activityAttempts is the highest attempt of an activity type that started in any run of a workflow
// (event IDs restart with each run, so each run is read on its own).
func activityAttempts(t *testing.T, wfID, activityType string) int {
	t.Helper()
	runs, err := e2e.Runs(context.Background(), env.Temporal, wfID)
	require.NoError(t, err)
	highest := 0
	for _, events := range runs {
		scheduled := map[int64]bool{}
		for _, ev := range events {
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == activityType {
				scheduled[ev.GetEventId()] = true
			}
			if ev.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED {
				a := ev.GetActivityTaskStartedEventAttributes()
				if scheduled[a.GetScheduledEventId()] {
					highest = max(highest, int(a.GetAttempt()))
				}
			}
		}
	}
	return highest
}

// kubectlGet is `kubectl get RESOURCE NAME` in the run's namespace, as a person sees it.
func kubectlGet(t *testing.T, resource, name string) string {
	t.Helper()
	cmd := exec.Command(env.Stack.Path("bin", "kubectl"), "get", resource, name, "-n", ns)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Stack.Kubeconfig)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "kubectl: %s", out)
	t.Logf("kubectl get %s %s:\n%s", resource, name, out)
	return string(out)
}
