package servers

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"helm.sh/helm/v3/pkg/action"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/deploy/chart"
	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/tests/e2e"
	"github.com/stackflow/stackflow/workflows/dataplane"
)

// release is stackflow installed by its chart into the run's namespace: the bridge and one worker
// Deployment per task queue as pods on the real node, from the images `make images` built of this
// checkout, over mutual TLS with the payload codec, in a Temporal namespace of their own.
type release struct {
	name, namespace, temporalNS string
	cfg                         *action.Configuration
}

// installRelease installs the chart as a user would (helm install with values) and waits until every
// Deployment is available. The test's cleanup uninstalls it.
func installRelease(ctx context.Context, t *testing.T) *release {
	t.Helper()
	s := env.Stack
	// A Temporal namespace of its own per run, as a new installation has: a worker deployment whose
	// current version is an earlier run's build B would route the new workflows to B.
	r := &release{name: "rel-" + env.Run, namespace: env.Namespace, temporalNS: "stackflow-e2e-release-" + env.Run}
	require.NoError(t, e2e.EnsureTemporalNamespace(ctx, s, r.temporalNS))
	t.Cleanup(func() { deleteTemporalNamespace(t, r.temporalNS) })
	// What a user creates before installing: Temporal's client certificate and API key, the codec keys.
	require.NoError(t, s.ReleaseSecrets(ctx, r.namespace))
	values, err := s.ReleaseValues(r.temporalNS)
	require.NoError(t, err, "make images builds the images; make up imports them")
	// This release serves the run's namespace only, beside the stack's release, which holds the
	// cluster-wide admission policies and serves the cluster-scoped kinds.
	values["watchNamespaces"] = []any{r.namespace}
	values["helmReleases"] = map[string]any{"namespaces": []any{r.namespace}}
	values["admission"] = map[string]any{"enabled": false}
	values["bridge"].(map[string]any)["kinds"] = []any{"OpenStackServer", "OpenStackMachine", "OpenStackCluster", "OpenStackDataPlaneRole", "OpenStackDataPlaneNode"}
	ch, err := chart.Load(s.RepoRoot)
	require.NoError(t, err)
	kubeconfig, ns := s.Kubeconfig, r.namespace
	r.cfg = new(action.Configuration)
	require.NoError(t, r.cfg.Init(&genericclioptions.ConfigFlags{KubeConfig: &kubeconfig, Namespace: &ns}, ns, "secret", t.Logf))
	inst := action.NewInstall(r.cfg)
	// As a user runs it: with the chart's crds/ (Helm leaves CRDs that exist, here the stack's, alone).
	inst.ReleaseName, inst.Namespace = r.name, r.namespace
	inst.Wait, inst.Timeout = true, 4*time.Minute
	t0 := time.Now()
	t.Cleanup(func() { r.uninstall(t) })
	t.Cleanup(func() {
		if t.Failed() {
			e2e.DumpPods(t, env.Kube, r.namespace, "app.kubernetes.io/instance="+r.name)
		}
	})
	_, err = inst.RunWithContext(ctx, ch, values)
	require.NoError(t, err, "helm install")
	t.Logf("release %s installed, every Deployment available in %s", r.name, time.Since(t0).Round(100*time.Millisecond))
	return r
}

// deleteTemporalNamespace deletes the run's Temporal namespace and its workflows.
func deleteTemporalNamespace(t *testing.T, ns string) {
	c, err := e2e.Dial(context.Background(), env.Stack, env.Stack.TemporalNamespace)
	if err != nil {
		t.Errorf("delete Temporal namespace %s: %v", ns, err)
		return
	}
	defer c.Close()
	if _, err := c.OperatorService().DeleteNamespace(context.Background(), &operatorservice.DeleteNamespaceRequest{Namespace: ns}); err != nil {
		t.Errorf("delete Temporal namespace %s: %v", ns, err)
	}
}

// pods lists the release's pods of a component (bridge, worker, worker-openstack, …).
func (r *release) pods(ctx context.Context, t *testing.T, component string) []corev1.Pod {
	t.Helper()
	sel := "app.kubernetes.io/instance=" + r.name
	if component != "" {
		sel += ",app.kubernetes.io/component=" + component
	}
	l, err := env.Kube.CoreV1().Pods(r.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	require.NoError(t, err)
	return l.Items
}

// uninstall runs helm uninstall (a no-op when it is gone).
func (r *release) uninstall(t *testing.T) {
	un := action.NewUninstall(r.cfg)
	un.Wait, un.Timeout, un.IgnoreNotFound = true, 2*time.Minute, true
	if _, err := un.Run(r.name); err != nil {
		t.Errorf("helm uninstall %s: %v", r.name, err)
	}
}

// killContainer sends SIGKILL to the main process of a pod's container through the node's containerd,
// as the kernel's OOM killer or a crash would end it; the kubelet restarts it.
func killContainer(t *testing.T, p corev1.Pod) {
	t.Helper()
	require.NotEmpty(t, p.Status.ContainerStatuses, "pod %s has no container", p.Name)
	id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
	require.NotEmpty(t, id, "pod %s: no container ID", p.Name)
	out, err := exec.Command("ctr", "-a", env.Stack.ContainerdSocket(), "-n", "k8s.io", "tasks", "kill", "--signal", "SIGKILL", id).CombinedOutput()
	require.NoError(t, err, "kill %s: %s", p.Name, out)
}

// upgradedTag is the image tag of build B: this tree built with the upgradeprobe tag, whose reconcile
// has one more step behind GetVersion (workflows/object/upgrade_probe.go) and whose build ID differs.
const upgradedTag = "upgraded"

// buildUpgradedImages builds the bridge and worker images of build B (make images with -tags
// upgradeprobe) and imports them onto the real node as stackflow.local/<name>:upgraded.
func buildUpgradedImages(ctx context.Context, t *testing.T) {
	t.Helper()
	out := filepath.Join(env.Dir, "images-"+upgradedTag)
	t0 := time.Now()
	cmd := exec.CommandContext(ctx, "go", "run", ".", "-repo", env.Stack.RepoRoot, "-out", out, "-version", upgradedTag,
		"-tags", "upgradeprobe", "stackflow-bridge", "stackflow-worker")
	cmd.Dir = filepath.Join(env.Stack.RepoRoot, "deploy", "images")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)
	for _, name := range []string{"stackflow-bridge", "stackflow-worker"} {
		require.NoError(t, env.Stack.ImportImage(ctx, filepath.Join(out, name), name))
		// Removed when the test ends (after the uninstall, which stops the pods that run them).
		t.Cleanup(func() {
			ref := local.ImageRepository + "/" + name + ":" + upgradedTag
			if out, err := exec.Command("ctr", "-a", env.Stack.ContainerdSocket(), "-n", "k8s.io", "images", "rm", ref).CombinedOutput(); err != nil {
				t.Errorf("remove image %s: %v: %s", ref, err, out)
			}
		})
	}
	t.Logf("build B's images built and imported in %s:\n%s", time.Since(t0).Round(100*time.Millisecond), b)
}

// upgrade runs helm upgrade --reuse-values --set image.tag=tag and waits until the rollout is done.
func (r *release) upgrade(ctx context.Context, t *testing.T, tag string) {
	t.Helper()
	ch, err := chart.Load(env.Stack.RepoRoot)
	require.NoError(t, err)
	up := action.NewUpgrade(r.cfg)
	up.Namespace, up.ReuseValues = r.namespace, true
	up.Wait, up.Timeout = true, 4*time.Minute
	t0 := time.Now()
	_, err = up.RunWithContext(ctx, r.name, ch, map[string]any{"image": map[string]any{"tag": tag}})
	require.NoError(t, err, "helm upgrade")
	t.Logf("helm upgrade to %s rolled out in %s", tag, time.Since(t0).Round(100*time.Millisecond))
}

// buildsOf reads an object's workflow: the workflow tasks each build ID completed (all runs) and how
// many times build B's probe step ran.
func buildsOf(ctx context.Context, t *testing.T, c client.Client, wfID string) (tasks map[string]int, probes int) {
	t.Helper()
	dc, err := env.DataConverter()
	require.NoError(t, err)
	runs, err := e2e.Runs(ctx, c, wfID)
	require.NoError(t, err)
	tasks = map[string]int{}
	for _, run := range runs {
		for _, ev := range run {
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
				a := ev.GetWorkflowTaskCompletedEventAttributes()
				build := a.GetDeploymentVersion().GetBuildId()
				if v := a.GetWorkerDeploymentVersion(); build == "" && v != "" {
					build = v[strings.Index(v, ".")+1:]
				}
				tasks[build]++
			case enumspb.EVENT_TYPE_MARKER_RECORDED:
				m := ev.GetMarkerRecordedEventAttributes()
				var v string
				if m.GetMarkerName() == "SideEffect" && dc.FromPayloads(m.GetDetails()["data"], &v) == nil && v == "reconciled on the upgraded build" {
					probes++
				}
			}
		}
	}
	return tasks, probes
}

// The chart, installed as docs/operations/install.md tells users, runs stackflow as pods on the real node:
//   - its bridge and workers boot a server on the Nova stackflow deployed, and a SIGKILL of the worker
//     processes while the server is being built loses nothing and repeats nothing (one server, one port);
//   - its ansible worker deploys a data-plane node over SSH from its pod, and a SIGKILL of that worker in
//     the middle of a playbook repeats only the interrupted playbook (each step once on the host);
//   - helm upgrade to build B (a changed workflow behind GetVersion) with a server in flight: the running
//     workflows go on on B's pods without non-determinism, and a new server reconciles with B's step;
//   - deleting the servers removes them from OpenStack, and helm uninstall leaves no pod, account or
//     cluster-wide rule behind.
func TestInstalledReleaseServesServersThroughKillNineAndUpgrade(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	r := installRelease(ctx, t)
	for _, p := range r.pods(ctx, t, "") {
		require.Equal(t, local.RealNode, p.Spec.NodeName, "pod %s", p.Name)
		require.Equal(t, imageOf(p, "dev"), p.Spec.Containers[0].Image, "pod %s", p.Name)
		require.True(t, p.Status.ContainerStatuses[0].Ready, "pod %s", p.Name)
	}
	require.Len(t, r.pods(ctx, t, "bridge"), 2)

	// The user's identity Secret is the run's (SetupOnSamples): the cloud's clouds.yaml scoped to the run's
	// project, which reaches the cloud from pods as from this machine.

	// The data-plane node first: its ansible worker is SIGKILLed in its second playbook, whose retry
	// runs while the first server boots.
	c, err := e2e.Dial(ctx, env.Stack, r.temporalNS)
	require.NoError(t, err)
	defer c.Close()
	dp := startDataPlaneNode(ctx, t, r)
	dp.killMidPlaybook(ctx, t, r, c)

	// create creates a server and returns once its workers have made it in Nova (in flight: the object
	// is not Ready before the server is ACTIVE and its status complete).
	var names []string
	refs := map[string]lifecycle.ObjectRef{}
	t.Cleanup(func() { env.ForceDelete(ServersGVR, names...) })
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range names {
				if u, err := env.Get(context.Background(), ServersGVR, n); err == nil {
					t.Logf("%s status: %s", n, mustJSON(u.Object["status"]))
				}
			}
		}
	})
	create := func(name string) {
		t.Helper()
		spec := env.ServerSpec(env.Flavor(), 1)
		names = append(names, name)
		srv, err := env.Create(ctx, ServersGVR, env.Object("infrastructure.cluster.x-k8s.io/v1alpha1", "OpenStackServer", name, spec))
		require.NoError(t, err)
		refs[name] = e2e.Ref("OpenStackServer", ServersGVR, srv)
		require.Eventually(t, func() bool {
			o, err := env.ListOwned(ctx, refs[name])
			return err == nil && len(o.Servers) > 0
		}, 5*time.Minute, 100*time.Millisecond, "the release's workers created no server for %s", name)
	}
	workflowOf := func(name string) string {
		u, err := env.WaitFor(ctx, ServersGVR, name, ready)
		require.NoError(t, err)
		require.Equal(t, "ACTIVE", u.Object["status"].(map[string]any)["instanceState"])
		id, _, _ := unstructured.NestedString(u.Object, "status", "workflowID")
		require.NotEmpty(t, id)
		return id
	}

	// 1. SIGKILL of the workflow worker and the OpenStack worker with the server in Nova.
	first := "rel1-" + env.Run
	create(first)
	killed := map[string]int32{}
	for _, component := range []string{"worker", "worker-openstack"} {
		for _, p := range r.pods(ctx, t, component) {
			killContainer(t, p)
			killed[p.Name] = p.Status.ContainerStatuses[0].RestartCount
		}
	}
	t.Logf("SIGKILLed %d worker processes with %s in Nova", len(killed), first)
	firstWF := workflowOf(first)
	requireOwned(t, refs[first], 1, 1, 0)
	// The kubelet restarted each killed container, and it serves again.
	require.Eventually(t, func() bool {
		for pod, before := range killed {
			p, err := env.Kube.CoreV1().Pods(r.namespace).Get(ctx, pod, metav1.GetOptions{})
			if err != nil || len(p.Status.ContainerStatuses) == 0 {
				return false
			}
			if cs := p.Status.ContainerStatuses[0]; cs.RestartCount <= before || !cs.Ready {
				return false
			}
		}
		return true
	}, 2*time.Minute, 500*time.Millisecond, "the killed workers were not restarted")

	dpWF := dp.deployed(ctx, t, c)

	// 2. helm upgrade to build B with a second server in flight.
	tasksA, _ := buildsOf(ctx, t, c, firstWF)
	var buildA string
	for b, n := range tasksA {
		if n > tasksA[buildA] {
			buildA = b
		}
	}
	require.NotEmpty(t, buildA, "the release's workflow worker is versioned by its binary: %v", tasksA)
	buildUpgradedImages(ctx, t)
	second := "rel2-" + env.Run
	create(second)
	r.upgrade(ctx, t, upgradedTag)
	for _, p := range r.pods(ctx, t, "") {
		if p.DeletionTimestamp == nil {
			require.Equal(t, imageOf(p, upgradedTag), p.Spec.Containers[0].Image, "pod %s", p.Name)
		}
	}
	secondWF := workflowOf(second)
	third := "rel3-" + env.Run
	create(third)
	thirdWF := workflowOf(third)

	// 3. Deleted through the release's workers (on B): nothing of them is left in OpenStack.
	require.NoError(t, env.DeleteAndWait(ctx, ServersGVR, first, second, third))
	for name, ref := range refs {
		o, err := env.ListOwned(ctx, ref)
		require.NoError(t, err)
		require.Zero(t, o.Count(), "%s left %s", name, o)
	}
	// The node's teardown runs on B too; the host's check (at the test's end) finds nothing left.
	env.Env.DeleteAndWaitT(t, e2e.GVRDataPlaneNode, r.namespace, dp.name)
	env.Env.DeleteAndWaitT(t, e2e.GVRDataPlaneRole, r.namespace, dp.role)
	tasks1, _ := buildsOf(ctx, t, c, firstWF)
	tasks2, probes2 := buildsOf(ctx, t, c, secondWF)
	tasks3, probes3 := buildsOf(ctx, t, c, thirdWF)
	t.Logf("workflow tasks by build: %s %v, %s %v (B's step %d), %s %v (B's step %d)", first, tasks1, second, tasks2, probes2, third, tasks3, probes3)
	// B is what the third server ran on, alone: a build of its own, with the probe's tag in its ID (the
	// images are built from the tree as it is then, so A's revision may be an earlier commit's).
	require.Len(t, tasks3, 1, "%s ran on one build: %v", third, tasks3)
	var buildB string
	for b := range tasks3 {
		buildB = b
	}
	require.NotEqual(t, buildA, buildB)
	require.True(t, strings.HasSuffix(buildB, "-upgradeprobe"), "build B %q names its build tag", buildB)
	require.Positive(t, tasks1[buildB], "%s, started on A, was torn down on B", first)
	require.Positive(t, tasks2[buildB], "%s, in flight during the upgrade, finished on B", second)
	require.Positive(t, probes3, "%s reconciled with B's new step", third)
	// No panic, no non-determinism, no oversized payload and no Secret's value in clear in any run of the
	// release's Temporal namespace (the test's own, gone with it, so the package's scan never reads it).
	for _, id := range []string{firstWF, secondWF, thirdWF, dpWF} {
		scan, err := e2e.ScanWorkflow(ctx, c, r.temporalNS, id)
		require.NoError(t, err)
		require.Positive(t, scan.Runs, "no run of %s to scan", id)
	}
	scan, err := e2e.ScanNamespace(ctx, c, r.temporalNS, time.Time{}, env.Forbidden())
	require.NoError(t, err)
	require.NoError(t, scan.Check(), "the runs of Temporal namespace %s", r.temporalNS)
	t.Logf("scanned every run of %s: %d runs, the longest %s", r.temporalNS, scan.Runs, scan.Longest)

	// 4. helm uninstall leaves nothing of the release: no pod, no ServiceAccount, no cluster-wide rule.
	r.uninstall(t)
	require.Eventually(t, func() bool { return len(r.pods(ctx, t, "")) == 0 }, 2*time.Minute, time.Second, "pods of the release left")
	sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + r.name}
	sas, err := env.Kube.CoreV1().ServiceAccounts(r.namespace).List(ctx, sel)
	require.NoError(t, err)
	require.Empty(t, sas.Items)
	crs, err := env.Kube.RbacV1().ClusterRoles().List(ctx, sel)
	require.NoError(t, err)
	require.Empty(t, crs.Items)
	crbs, err := env.Kube.RbacV1().ClusterRoleBindings().List(ctx, sel)
	require.NoError(t, err)
	require.Empty(t, crbs.Items)
	deps, err := env.Kube.AppsV1().Deployments(r.namespace).List(ctx, sel)
	require.NoError(t, err)
	require.Empty(t, deps.Items)
}

// dataPlaneHost is the test host of the release's data-plane node (the first two hosts are the samples'
// computes).
const dataPlaneHost = "edpm-compute-3"

// dataPlaneNode is the data-plane node the release deploys: a role without a cell (phase 0 only).
type dataPlaneNode struct {
	name, role string
	host       local.TestHost
}

// startDataPlaneNode creates, in the release's namespace, the hosts' SSH key Secret, a role and a node on
// dataPlaneHost, as a user does; the test's cleanup deletes them through the release before uninstalling
// it, and then checks that their teardown left nothing on the host.
func startDataPlaneNode(ctx context.Context, t *testing.T, r *release) *dataPlaneNode {
	t.Helper()
	dp := &dataPlaneNode{name: "rel-" + dataPlaneHost, role: "rel-infra", host: env.Host(t, dataPlaneHost)}
	e2e.CleanHost(t, dp.host)
	key, err := env.Kube.CoreV1().Secrets(local.SystemNamespace).Get(ctx, local.HostsSSHKeySecretName, metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, env.CreateSecret(ctx, r.namespace, local.HostsSSHKeySecretName, key.Data))
	env.Env.Create(t, e2e.GVRDataPlaneRole, r.namespace, fmt.Sprintf(`
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneRole
metadata: {name: %s}
spec:
  preProvisioned: true
  nodeTemplate:
    ansibleUser: root
    ansibleSSHPrivateKeySecret: %s
    managementNetwork: ctlplane
    # configure-network lasts long enough for the SIGKILL to find it running.
    ansibleVars: {edpm_network_config_command: "sleep 5"}
`, dp.role, local.HostsSSHKeySecretName))
	env.Env.Create(t, e2e.GVRDataPlaneNode, r.namespace, fmt.Sprintf(`
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneNode
metadata: {name: %s}
spec: {role: %s, hostName: %s, ansibleHost: %s, deploy: true}
`, dp.name, dp.role, env.Run+"-rel-"+dataPlaneHost, dp.host.Address))
	return dp
}

// killMidPlaybook waits until the host has recorded bootstrap and a worker has started
// configure-network's playbook (a RunPlaybook activity in the started state, the host's record without
// it), and SIGKILLs the ansible worker's process: ansible-playbook dies with its container.
func (dp *dataPlaneNode) killMidPlaybook(ctx context.Context, t *testing.T, r *release, c client.Client) {
	t.Helper()
	var wfID string
	e2e.WaitFor(t, dp.name+"'s workflow", time.Minute, func() (bool, string) {
		n := env.Env.Get(t, e2e.GVRDataPlaneNode, r.namespace, dp.name)
		wfID = e2e.Str(n, "status", "workflowID")
		return wfID != "", e2e.Summary(n)
	})
	running := func() (bool, string) {
		steps := e2e.StepLog(dp.host)
		if steps[dataplane.StepBootstrap] != 1 || steps[dataplane.StepConfigureNetwork] != 0 {
			return false, fmt.Sprintf("host's steps %v", steps)
		}
		n := env.Env.Get(t, e2e.GVRDataPlaneNode, r.namespace, dp.name)
		if !strings.Contains(e2e.Str(n, "status", "currentStep"), "configure-network.yml on host") {
			return false, e2e.Summary(n)
		}
		d, err := c.DescribeWorkflowExecution(ctx, wfID, "")
		if err != nil {
			return false, err.Error()
		}
		for _, a := range d.GetPendingActivities() {
			if a.GetActivityType().GetName() == "RunPlaybook" && a.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED {
				return true, "configure-network's playbook started"
			}
		}
		return false, "configure-network's activity not started yet"
	}
	// Polled closely: the playbook runs for a few seconds.
	deadline := time.Now().Add(5 * time.Minute)
	for ok, seen := running(); !ok; ok, seen = running() {
		if time.Now().After(deadline) {
			t.Fatalf("%s never ran configure-network after bootstrap; last seen: %s", dp.name, seen)
		}
		time.Sleep(50 * time.Millisecond)
	}
	pods := r.pods(ctx, t, "worker-ansible")
	require.Len(t, pods, 1)
	killContainer(t, pods[0])
	t.Logf("SIGKILLed the ansible worker with configure-network running on %s", dp.host.Name)
}

// deployed waits until the node is Ready and checks that each phase-0 playbook ran to its end once on
// the host, the interrupted one included (its activity's second attempt), and returns its workflow ID.
func (dp *dataPlaneNode) deployed(ctx context.Context, t *testing.T, c client.Client) string {
	t.Helper()
	var n *unstructured.Unstructured
	e2e.WaitFor(t, dp.name+" Ready", 5*time.Minute, func() (bool, string) {
		n = env.Env.Get(t, e2e.GVRDataPlaneNode, env.Namespace, dp.name)
		return e2e.Ready(n), e2e.Summary(n)
	})
	require.Equal(t, map[string]int{dataplane.StepBootstrap: 1, dataplane.StepConfigureNetwork: 1, dataplane.StepConfigureOS: 1},
		e2e.StepLog(dp.host), "each phase-0 step ran to its end once on the host")
	require.Contains(t, e2e.HostFile(dp.host, "etc/edpm/node.json"), `"kernelHostname": "`+dp.host.Name+`"`,
		"the playbooks ran on the host itself, from the pod")
	wfID := e2e.Str(n, "status", "workflowID")
	require.NotEmpty(t, wfID)
	runs, err := e2e.Runs(ctx, c, wfID)
	require.NoError(t, err)
	attempts := map[string]int32{}
	scheduled := map[int64]string{}
	dc, err := env.DataConverter()
	require.NoError(t, err)
	for _, run := range runs {
		for _, ev := range run {
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == "RunPlaybook" {
				var in struct{ Step string }
				require.NoError(t, dc.FromPayload(a.GetInput().GetPayloads()[0], &in))
				scheduled[ev.GetEventId()] = in.Step
			}
			if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
				if step, ok := scheduled[a.GetScheduledEventId()]; ok {
					attempts[step] = max(attempts[step], a.GetAttempt())
				}
			}
		}
	}
	t.Logf("%s Ready; RunPlaybook attempts by step: %v", dp.name, attempts)
	require.GreaterOrEqual(t, attempts[dataplane.StepConfigureNetwork], int32(2), "the SIGKILL interrupted configure-network's run")
	return wfID
}

// imageOf is the image a pod of the release runs at tag.
func imageOf(p corev1.Pod, tag string) string {
	name := "stackflow-worker"
	if p.Labels["app.kubernetes.io/component"] == "bridge" {
		name = "stackflow-bridge"
	}
	return local.ImageRepository + "/" + name + ":" + tag
}
