package servers

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stackflow/stackflow/activities/helm"
	kupenstackv1alpha1 "github.com/stackflow/stackflow/api/kupenstack/v1alpha1"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/tests/e2e"
	"github.com/stackflow/stackflow/worker"
	"github.com/stackflow/stackflow/workflows/controlplane"
)

// The upgrade test proves that upgrading stackflow never breaks a running deployment, end to end:
// objects of several kinds run on the worker build A (this tree), A stops with them mid-flight, and
// build B takes over: the same tree built with the tag upgradeprobe, whose reconcile path has one more
// step guarded by GetVersion (workflows/object/upgrade_probe.go), with a build ID of its own that it
// makes current in the worker deployment as docs/operations/upgrade.md says. Its workflows and its
// worker deployment live in a Temporal namespace of their own (upgradeTemporalNamespace); its servers
// boot in a project of its own on the run's cloud (SetupOnSamples), and its objects carry a watch
// filter of its own, so that the samples' release, which serves that cloud, leaves its cluster-scoped
// objects alone.
const upgradeTemporalNamespace = "stackflow-e2e-upgrade"

// workerB is the file name of build B's worker binary in the upgrade run's bin directory.
const workerB = "stackflow-worker-upgraded"

var (
	// upg is the upgrade test's run: its own namespace and project with the cloud's identity Secret,
	// clients and binaries.
	upg *Env
	// charts serves the project's charts for the upgrade test's rollout.
	charts *local.ChartServer
)

// setUpUpgrade makes upg and charts for the test, and at its end checks upg's histories (when the test
// passed) and releases both.
func setUpUpgrade(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var err error
	upg, err = SetupOnSamples(ctx, upgradeTemporalNamespace, "upg")
	require.NoError(t, err)
	// Build B's histories hold its extra step, which the tree without its tag does not replay: they are
	// never part of the replay corpus.
	upg.SkipRecording()
	t.Cleanup(func() {
		if !t.Failed() {
			if upg.CheckHistories() != 0 {
				t.Error("the upgrade run's histories (above)")
			}
			left, err := upg.Leftovers(context.Background())
			require.NoError(t, err)
			require.Empty(t, left, "the upgrade run's project after its objects were deleted")
		}
		// Close removes the run's project, with what a failed run left in it.
		upg.Close()
	})
	// retireall: B is also the release without any old branch (workflows/object/retire_all.go).
	require.NoError(t, upg.BuildTagged(ctx, e2e.Worker, workerB, "upgradeprobe", "retireall"))
	charts, err = upg.ServeCharts("0.1.1")
	require.NoError(t, err)
	t.Cleanup(func() { _ = charts.Close() })
}

// What build B adds (workflows/object/upgrade_probe.go, compiled only with its tag): the change ID of its
// GetVersion guard and the value its extra step records.
const (
	probeChangeID = "upgrade-probe"
	probeMarker   = "reconciled on the upgraded build"
)

var (
	gvrConfig  = schema.GroupVersionResource{Group: "kupenstack.io", Version: "v1alpha1", Resource: "kupenstackconfigurations"}
	gvrProfile = schema.GroupVersionResource{Group: "kupenstack.io", Version: "v1alpha1", Resource: "openstackcloudconfigurationprofiles"}
	gvrRole    = schema.GroupVersionResource{Group: "dataplane.openstack.org", Version: "v1beta1", Resource: "openstackdataplaneroles"}
	gvrNode    = schema.GroupVersionResource{Group: "dataplane.openstack.org", Version: "v1beta1", Resource: "openstackdataplanenodes"}
	gvrDP      = schema.GroupVersionResource{Group: "dataplane.openstack.org", Version: "v1beta1", Resource: "openstackdataplanes"}
)

// sshKeySecret is the stack's Secret with the EDPM test hosts' SSH key, copied into the run's namespace.
const sshKeySecret = "edpm-ssh-key"

// components the rollout deploys: three tiers of the graph (infrastructure, keystone, glance), so it is
// still rolling out when build A stops.
var components = []string{"mariadb", "rabbitmq", "memcached", "keystone", "glance"}

// object is one object of the test.
type object struct {
	kind, apiVersion string
	gvr              schema.GroupVersionResource
	name, namespace  string // namespace "" for cluster-scoped kinds
	spec             map[string]any
	// ports is the number of OpenStack ports of the object's server (0: the object has no server).
	ports int
	// whileDown objects are created while no worker runs: they reconcile on build B first.
	whileDown bool

	ref lifecycle.ObjectRef
}

func (o *object) String() string { return o.kind + "/" + o.name }

func (o *object) get(ctx context.Context) (*unstructured.Unstructured, error) {
	if o.namespace == "" {
		return upg.Dyn.Resource(o.gvr).Get(ctx, o.name, metav1.GetOptions{})
	}
	return upg.Dyn.Resource(o.gvr).Namespace(o.namespace).Get(ctx, o.name, metav1.GetOptions{})
}

func (o *object) create(t *testing.T, ctx context.Context) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": o.apiVersion, "kind": o.kind,
		"metadata": map[string]any{"name": o.name, "labels": map[string]any{"stackflow.io/test-run": upg.Run, lifecycle.WatchFilterLabel: upg.Run}},
		"spec":     o.spec}}
	var err error
	if o.namespace == "" {
		u, err = upg.Dyn.Resource(o.gvr).Create(ctx, u, metav1.CreateOptions{})
	} else {
		u.SetNamespace(o.namespace)
		u, err = upg.Dyn.Resource(o.gvr).Namespace(o.namespace).Create(ctx, u, metav1.CreateOptions{})
	}
	require.NoError(t, err, "create %s", o)
	o.ref = e2e.Ref(o.kind, o.gvr, u)
	t.Cleanup(func() { upg.Env.ForceDelete(o.gvr, o.namespace, o.name) })
}

// TestUpgradeMidFlight starts 11 objects of eight kinds on build A and stops A while an EDPM node is
// in phase 0, a rollout is in progress and servers are being created, creates 2 more while no worker
// runs, and starts build B. Every object finishes on B: no workflow task fails on non-determinism,
// OpenStack holds exactly one server per object, Helm one revision per release and the EDPM host ran
// each phase-0 step once; the runs that were in flight finish on B without its new step (their
// histories passed it), and the reconciles that start on B take it. B also retires every other change
// (workflows/object/retire.go): it is the release without any old branch, and A's runs replay on it.
func TestUpgradeMidFlight(t *testing.T) {
	setUpUpgrade(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	buildA, buildB := "a-"+upg.Run, "b-"+upg.Run
	// Namespaced kinds only in the run's namespace, and only the objects of the run's watch filter: the
	// samples' release serves the cloud's own, cluster-scoped ones included, beside this test.
	upg.Env.StartBridge(t, e2e.BridgeOptions{Identity: upg.Run + "-bridge", Lease: upg.Run, Workers: 16,
		Kinds:      "OpenStackServer,OpenStackMachine,OpenStackCluster,KupenstackConfiguration,OpenStackCloudConfigurationProfile,OpenStackDataPlane,OpenStackDataPlaneRole,OpenStackDataPlaneNode",
		Namespaces: []string{upg.Namespace}, WatchFilter: upg.Run})
	helmCache := []string{"STACKFLOW_HELM_CACHE=" + t.TempDir()}
	// A drains for up to 30 s when stopped, so the playbook it runs finishes and is recorded done: the
	// host's step log then tells a step run twice from a step retried after a kill.
	workerA := upg.Env.StartWorker(t, e2e.WorkerOptions{Identity: upg.Run + "-worker-a", Env: helmCache, WatchFilter: upg.Run,
		ExtraArgs: []string{"--build-id", buildA, "--stop-timeout", "30s"}})
	waitCurrent(t, ctx, buildA)

	releaseNS := upg.Run + "-cp"
	_, err := upg.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: releaseNS}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = upg.Kube.CoreV1().Namespaces().Delete(context.Background(), releaseNS, metav1.DeleteOptions{})
	})
	profileSpec := map[string]any{}
	for _, c := range components {
		profileSpec[c] = map[string]any{"chart": map[string]any{"repository": charts.URL, "name": c, "version": "0.1.0"}, "readinessTimeout": "2m"}
	}
	srv := func(name string, kind string, ports int, whileDown bool) *object {
		o := &object{kind: kind, name: upg.Run + "-" + name, namespace: upg.Namespace, spec: upg.ServerSpec(upg.Flavor(), ports), ports: ports, whileDown: whileDown}
		o.apiVersion, o.gvr = "infrastructure.cluster.x-k8s.io/v1alpha1", ServersGVR
		if kind == "OpenStackMachine" {
			o.apiVersion, o.gvr = "infrastructure.cluster.x-k8s.io/v1beta1", MachinesGVR
		}
		return o
	}
	profile := &object{kind: "OpenStackCloudConfigurationProfile", apiVersion: "kupenstack.io/v1alpha1", gvr: gvrProfile, name: upg.Run + "-profile",
		spec: map[string]any{"components": profileSpec}}
	config := &object{kind: "KupenstackConfiguration", apiVersion: "kupenstack.io/v1alpha1", gvr: gvrConfig, name: upg.Run + "-cloud",
		spec: map[string]any{"defaultProfile": profile.name, "releaseNamespace": releaseNS}}
	bastion := &object{kind: "OpenStackCluster", apiVersion: "infrastructure.cluster.x-k8s.io/v1beta1", gvr: ClustersGVR, name: upg.Run + "-cluster",
		namespace: upg.Namespace, ports: 1, spec: map[string]any{
			"identityRef":     upg.Identity(),
			"externalNetwork": map[string]any{"filter": map[string]any{"name": local.ExternalNetwork}},
			"bastion":         map[string]any{"enabled": true, "spec": upg.ServerSpec(upg.Flavor(), 1)},
		}}
	// EDPM: a pre-provisioned node on a test host, with no services (phase 0 only); its bootstrap
	// sleeps so the node is still in phase 0 when A stops.
	host := upg.Host(t, dataPlaneHost)
	e2e.CleanHost(t, host)
	key, err := upg.Kube.CoreV1().Secrets(local.SystemNamespace).Get(ctx, sshKeySecret, metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, upg.CreateSecret(ctx, upg.Namespace, sshKeySecret, key.Data))
	dpName := upg.Run + "-dp"
	role := &object{kind: "OpenStackDataPlaneRole", apiVersion: "dataplane.openstack.org/v1beta1", gvr: gvrRole, name: upg.Run + "-role", namespace: upg.Namespace,
		spec: map[string]any{"dataPlane": dpName, "preProvisioned": true, "nodeTemplate": map[string]any{
			"ansibleUser": "root", "ansibleSSHPrivateKeySecret": sshKeySecret, "ansibleVars": map[string]any{"edpm_bootstrap_command": "sleep 12"}}}}
	node := &object{kind: "OpenStackDataPlaneNode", apiVersion: "dataplane.openstack.org/v1beta1", gvr: gvrNode, name: upg.Run + "-node", namespace: upg.Namespace,
		spec: map[string]any{"role": role.name, "hostName": host.Name, "ansibleHost": host.Address, "deploy": true}}
	dataPlane := &object{kind: "OpenStackDataPlane", apiVersion: "dataplane.openstack.org/v1beta1", gvr: gvrDP, name: dpName, namespace: upg.Namespace,
		spec: map[string]any{"roles": []any{role.name}, "deploy": true}}
	edpm := []*object{role, dataPlane, node}

	onA := []*object{srv("srv-0", "OpenStackServer", 1, false), srv("srv-1", "OpenStackServer", 2, false), srv("srv-2", "OpenStackServer", 1, false),
		srv("srv-3", "OpenStackServer", 1, false), srv("machine-0", "OpenStackMachine", 1, false), bastion}
	downs := []*object{srv("srv-4", "OpenStackServer", 1, true), srv("machine-1", "OpenStackMachine", 1, true)}
	startedOnA := slices.Concat(edpm, []*object{profile, config}, onA)
	all := append(slices.Clone(startedOnA), downs...)

	// Build A: the EDPM node first, until its phase 0 runs (admission and the SSH key take seconds the
	// other objects do not wait); then every other object at once. A stops once the node is in phase 0,
	// the rollout is under way (a component deploying or deployed, not all) and at least three servers
	// are being created (their reconcile running).
	start := time.Now()
	for _, o := range edpm {
		o.create(t, ctx)
	}
	inPhase0 := func() error {
		u, err := node.get(ctx)
		if err != nil {
			return err
		}
		if s := phaseState(u, 0); s != "Running" {
			return fmt.Errorf("node's phase 0 %q", s)
		}
		return nil
	}
	waitUntil(t, ctx, 2*time.Minute, "the EDPM node in phase 0 on build A", inPhase0)
	for _, o := range startedOnA[len(edpm):] {
		o.create(t, ctx)
	}
	waitUntil(t, ctx, 2*time.Minute, "the node in phase 0, the rollout under way and servers being created on build A", func() error {
		if err := inPhase0(); err != nil {
			return err
		}
		s, err := configStatus(ctx, config)
		if err != nil {
			return err
		}
		if n := started(s); n == 0 || deployed(s) == len(components) {
			return fmt.Errorf("%d of %d components started, %d deployed", n, len(components), deployed(s))
		}
		running := 0
		for _, o := range onA {
			if u, err := o.get(ctx); err == nil && ready(u) != nil && phaseOf(u) == lifecycle.PhaseRunning {
				running++
			}
		}
		if running < 3 {
			return fmt.Errorf("%d of %d servers being created", running, len(onA))
		}
		// Every object created so far has been acted on by A (its status written), so "in flight" means
		// a reconcile A started, not a workflow whose first task no worker took yet (CI saw one).
		for _, o := range startedOnA {
			if u, err := o.get(ctx); err != nil || phaseOf(u) == "" {
				return fmt.Errorf("%s has no status from build A yet", o)
			}
		}
		return nil
	})
	workerA.Stop()
	var midFlight []*object
	for _, o := range startedOnA {
		u, err := o.get(ctx)
		require.NoError(t, err)
		if ready(u) != nil {
			midFlight = append(midFlight, o)
		}
	}
	s, err := configStatus(ctx, config)
	require.NoError(t, err)
	t.Logf("build A stopped %s after the first object: %d of %d components deployed; %d objects mid-flight: %v",
		time.Since(start).Round(100*time.Millisecond), deployed(s), len(components), len(midFlight), midFlight)
	require.Contains(t, midFlight, config, "the rollout was under way when A stopped")
	require.Contains(t, midFlight, node, "the EDPM node was in phase 0 when A stopped")
	require.GreaterOrEqual(t, len(midFlight), 5, "the node, the rollout and at least three servers were in flight when A stopped")

	// No worker runs: two more objects; the bridge starts their workflows, which wait for a worker.
	for _, o := range downs {
		o.create(t, ctx)
	}
	for _, o := range downs {
		waitUntil(t, ctx, time.Minute, "the workflow of "+o.String()+" started", func() error {
			_, err := upg.Temporal.DescribeWorkflowExecution(ctx, lifecycle.WorkflowID(o.ref), "")
			return err
		})
	}

	// Build B takes over: a different binary with a build ID of its own, made current as it starts.
	upgradeAt := time.Now()
	upg.Env.StartWorker(t, e2e.WorkerOptions{Identity: upg.Run + "-worker-b", Binary: workerB, Env: helmCache, WatchFilter: upg.Run,
		ExtraArgs: []string{"--build-id", buildB}})
	waitCurrent(t, ctx, buildB)
	for _, o := range all {
		waitUntil(t, ctx, 4*time.Minute, o.String()+" Ready on build B", func() error {
			u, err := o.get(ctx)
			if err != nil {
				return err
			}
			return ready(u)
		})
	}
	t.Logf("all %d objects Ready %s after build B started", len(all), time.Since(upgradeAt).Round(100*time.Millisecond))

	// 0 non-determinism errors in any run of the namespace, and every payload under 256 KiB.
	scan, err := upg.ScanRuns(ctx)
	require.NoError(t, err)
	require.NoError(t, scan.Check())
	t.Logf("%d runs: largest %s; longest %s; largest payload %s", scan.Runs, scan.Largest, scan.Longest, scan.LargestPayload)

	dc, err := upg.DataConverter()
	require.NoError(t, err)
	for _, o := range all {
		runs, err := e2e.Runs(ctx, upg.Temporal, lifecycle.WorkflowID(o.ref))
		require.NoError(t, err, "%s", o)
		h := readHistory(t, dc, runs)
		inFlight := slices.Contains(midFlight, o)
		t.Logf("%s: %d runs, workflow tasks by build per run %v, B's steps per run %v, mid-flight %v", o, len(runs), h.tasksBy, h.probes, inFlight)
		switch {
		case o.whileDown:
			// Its first reconcile started on B: it took B's step, and A never ran the object.
			require.Zero(t, h.total(buildA), "%s was created while no worker ran", o)
			require.Equal(t, 1, h.probes[0], "%s reconciled on B with its new step", o)
		case inFlight:
			// The reconcile in flight started on A and finished on B: it had passed B's step on A, so B
			// replayed A's run without the step (the guard's old path). B goes on in that run, or in
			// the next one when the reconcile had just settled on A and continued as new with its
			// status still to write (the object was not Ready yet when A stopped).
			r := h.lastRunOf(buildA)
			require.NotEqual(t, -1, r, "%s ran on A", o)
			require.NotZero(t, h.tasksFrom(r, buildB), "the object %s in flight when A stopped went on on B", o)
			require.Zero(t, h.probes[r], "%s replayed on B without the new step", o)
		default:
			require.NotZero(t, h.total(buildA), "%s ran on A", o)
		}
		require.Zero(t, h.total(""), "%s: every workflow task by a versioned build", o)
		// 0 duplicate side effects: the server and each port created once, in the histories and in OpenStack.
		if o.ports > 0 {
			require.Equal(t, []int{1, o.ports}, []int{h.scheduled["EnsureServer"], h.scheduled["EnsurePort"]},
				"%s: EnsureServer and EnsurePort scheduled (activities %v)", o, h.scheduled)
			owned, err := upg.ListOwned(ctx, o.ref)
			require.NoError(t, err)
			require.Equal(t, []int{1, o.ports}, []int{len(owned.Servers), len(owned.Ports)}, "servers and ports OpenStack holds for %s: %s", o, owned)
		}
	}
	// The EDPM host ran each phase-0 step once: the playbook A ran when it stopped finished on A and
	// was not run again on B, and B ran the rest.
	steps := stepLog(host)
	t.Logf("EDPM host %s ran %v", host.Name, steps)
	require.Equal(t, map[string]int{"bootstrap": 1, "configure-network": 1, "configure-os": 1}, steps, "phase-0 steps the host ran")
	runs, err := e2e.Runs(ctx, upg.Temporal, lifecycle.WorkflowID(node.ref))
	require.NoError(t, err)
	require.Equal(t, 3, readHistory(t, dc, runs).scheduled["RunPlaybook"], "playbooks the node's workflow scheduled")

	rels, err := releases(t, releaseNS)
	require.NoError(t, err)
	s, err = configStatus(ctx, config)
	require.NoError(t, err)
	for _, c := range components {
		require.Equal(t, helm.ReleaseDeployed, rels[c].Status, c)
		require.Equal(t, 1, rels[c].Revision, "release %s installed once, never upgraded again", c)
		require.Equal(t, int32(1), componentOf(s, c).Revision, c)
		// Its rollout installed it once (an install retried after A stopped is one scheduled activity)
		// and never had to recover or roll it back.
		runs, err := e2e.Runs(ctx, upg.Temporal, controlplane.ComponentWorkflowID(lifecycle.WorkflowID(config.ref), c))
		require.NoError(t, err, c)
		h := readHistory(t, dc, runs)
		require.Equal(t, 1, h.scheduled["UpgradeOrInstall"], "rollout of %s: activities %v", c, h.scheduled)
		require.Zero(t, h.scheduled["Rollback"], "rollout of %s: activities %v", c, h.scheduled)
	}

	// Teardown on B leaves nothing in OpenStack.
	for _, o := range all {
		if o.ports > 0 {
			require.NoError(t, upg.Env.DeleteAndWait(ctx, o.gvr, o.namespace, o.name), "delete %s", o)
		}
	}
	require.NoError(t, upg.Env.DeleteAndWait(ctx, gvrConfig, "", config.name))
	require.NoError(t, upg.Env.DeleteAndWait(ctx, gvrProfile, "", profile.name))
	for _, o := range all {
		if o.ports > 0 {
			owned, err := upg.ListOwned(ctx, o.ref)
			require.NoError(t, err)
			require.Zero(t, owned.Count(), "%s left %s", o, owned)
		}
	}
}

// history is what the test reads from the runs of an object's workflow, first run first.
type history struct {
	// tasksBy counts, per run, the workflow tasks completed by each build ID.
	tasksBy []map[string]int
	// probes counts, per run, build B's steps: a version marker of its change at version 1 followed by
	// the side effect it records.
	probes []int
	// scheduled counts activities scheduled in all runs, by type.
	scheduled map[string]int
}

// total is the number of workflow tasks build completed in all runs.
func (h history) total(build string) int {
	n := 0
	for _, r := range h.tasksBy {
		n += r[build]
	}
	return n
}

// tasksFrom is the number of workflow tasks build completed in run r and the runs after it.
func (h history) tasksFrom(r int, build string) int {
	n := 0
	for _, m := range h.tasksBy[r:] {
		n += m[build]
	}
	return n
}

// lastRunOf is the index of the last run in which build completed a workflow task, or -1.
func (h history) lastRunOf(build string) int {
	for i := len(h.tasksBy) - 1; i >= 0; i-- {
		if h.tasksBy[i][build] > 0 {
			return i
		}
	}
	return -1
}

func readHistory(t *testing.T, dc converter.DataConverter, runs [][]*historypb.HistoryEvent) history {
	t.Helper()
	h := history{scheduled: map[string]int{}}
	for _, run := range runs {
		tasks, versions, steps := map[string]int{}, 0, 0
		for _, ev := range run {
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
				tasks[buildOf(ev.GetWorkflowTaskCompletedEventAttributes())]++
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
				h.scheduled[ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()]++
			case enumspb.EVENT_TYPE_MARKER_RECORDED:
				m := ev.GetMarkerRecordedEventAttributes()
				switch m.GetMarkerName() {
				case "Version":
					var id string
					var v int
					require.NoError(t, dc.FromPayloads(m.GetDetails()["change-id"], &id))
					require.NoError(t, dc.FromPayloads(m.GetDetails()["version"], &v))
					if id == probeChangeID && v == 1 {
						versions++
					}
				case "SideEffect":
					var s string
					if dc.FromPayloads(m.GetDetails()["data"], &s) == nil && s == probeMarker {
						steps++
					}
				}
			}
		}
		require.Equal(t, versions, steps, "every version marker of B's change is followed by B's step")
		h.tasksBy, h.probes = append(h.tasksBy, tasks), append(h.probes, steps)
	}
	return h
}

// buildOf is the build ID of the worker that completed a workflow task.
func buildOf(a *historypb.WorkflowTaskCompletedEventAttributes) string {
	if v := a.GetDeploymentVersion(); v.GetBuildId() != "" {
		return v.GetBuildId()
	}
	if v := a.GetWorkerDeploymentVersion(); v != "" {
		return v[strings.Index(v, ".")+1:]
	}
	return a.GetWorkerVersion().GetBuildId()
}

// waitCurrent waits until build is the current version of the worker deployment.
func waitCurrent(t *testing.T, ctx context.Context, build string) {
	t.Helper()
	h := upg.Temporal.WorkerDeploymentClient().GetHandle(worker.DefaultDeployment)
	waitUntil(t, ctx, time.Minute, "build "+build+" current", func() error {
		d, err := h.Describe(ctx, client.WorkerDeploymentDescribeOptions{})
		if err != nil {
			return err
		}
		if cur := d.Info.RoutingConfig.CurrentVersion; cur == nil || cur.BuildID != build {
			return fmt.Errorf("current version %v", cur)
		}
		return nil
	})
}

// waitUntil polls check until it returns nil, and fails the test with its last error after timeout.
func waitUntil(t *testing.T, ctx context.Context, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("timed out waiting for %s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// phaseState is the state of an EDPM node's phase (Pending, Running, …), "" when not shown.
func phaseState(u *unstructured.Unstructured, phase int64) string {
	phases, _, _ := unstructured.NestedSlice(u.Object, "status", "phases")
	for _, p := range phases {
		m, _ := p.(map[string]any)
		if n, ok := m["phase"].(int64); ok && n == phase {
			s, _ := m["state"].(string)
			return s
		}
	}
	return ""
}

// stepLog counts the steps an EDPM host's own log says ran there, by step.
func stepLog(h local.TestHost) map[string]int {
	out := map[string]int{}
	for _, line := range strings.Split(e2e.HostFile(h, "var/log/stackflow/edpm-steps.log"), "\n") {
		if f := strings.Fields(line); len(f) >= 2 {
			out[f[1]]++
		}
	}
	return out
}

func phaseOf(u *unstructured.Unstructured) string {
	p, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	return p
}

// configStatus is the configuration's status.
func configStatus(ctx context.Context, o *object) (kupenstackv1alpha1.KupenstackConfigurationStatus, error) {
	var s kupenstackv1alpha1.KupenstackConfigurationStatus
	u, err := o.get(ctx)
	if err != nil {
		return s, err
	}
	raw, err := json.Marshal(u.Object["status"])
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal(raw, &s)
}

// started counts the components the configuration shows deploying or deployed.
func started(s kupenstackv1alpha1.KupenstackConfigurationStatus) int {
	n := 0
	for _, c := range s.Components {
		if c.State == controlplane.ComponentDeploying || c.State == controlplane.ComponentDeployed {
			n++
		}
	}
	return n
}

// deployed counts the components the configuration shows deployed.
func deployed(s kupenstackv1alpha1.KupenstackConfigurationStatus) int {
	n := 0
	for _, c := range s.Components {
		if c.State == controlplane.ComponentDeployed {
			n++
		}
	}
	return n
}

func componentOf(s kupenstackv1alpha1.KupenstackConfigurationStatus, name string) kupenstackv1alpha1.ComponentStatus {
	for _, c := range s.Components {
		if c.Name == name {
			return c
		}
	}
	return kupenstackv1alpha1.ComponentStatus{}
}

// releases reads the components' releases through the Helm activities (read-only).
func releases(t *testing.T, ns string) (map[string]helm.ReleaseInfo, error) {
	h, err := helm.NewHelm(upg.REST, t.TempDir())
	if err != nil {
		return nil, err
	}
	return h.Releases(context.Background(), helm.ReleasesInput{Namespace: ns, Names: components})
}
