package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/tests/e2e"
)

// idleWindow is how long the idle system is watched (figure P5).
const idleWindow = 5 * time.Minute

// idleKind is one served kind of the idle population: how many objects, and how each is made.
type idleKind struct {
	kind  string
	gvr   schema.GroupVersionResource
	count int
	// cluster is true for cluster-scoped kinds.
	cluster bool
	spec    func(run string, i int) map[string]any
}

// idlePopulation is about 1,000 objects across every served kind, each of which settles without
// external work (deploy: false, no components, no bastion), plus a few real servers. The Kubernetes
// Nodes are kwok nodes: their heartbeats keep flowing all through the window, and each brings its own
// OpenstackNode.
func idlePopulation() []idleKind {
	dp := "dataplane.openstack.org"
	gv := func(g, v, r string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: g, Version: v, Resource: r}
	}
	osRef := map[string]any{"name": "openstack-clouds", "cloudName": local.CloudName}
	server := map[string]any{"flavor": "m1.tiny", "image": map[string]any{"filter": map[string]any{"name": local.ImageName}},
		"ports": []any{map[string]any{"network": map[string]any{"filter": map[string]any{"name": local.TenantNetwork}}}}, "identityRef": osRef}
	return []idleKind{
		{kind: "Node", gvr: gv("", "v1", "nodes"), count: 100, cluster: true},
		{kind: "OpenStackCloudConfigurationProfile", gvr: gv("kupenstack.io", "v1alpha1", "openstackcloudconfigurationprofiles"), count: 109, cluster: true,
			spec: func(string, int) map[string]any { return map[string]any{} }},
		{kind: "KupenstackConfiguration", gvr: gv("kupenstack.io", "v1alpha1", "kupenstackconfigurations"), count: 1, cluster: true,
			spec: func(run string, _ int) map[string]any {
				return map[string]any{"defaultProfile": run + "-openstackcloudconfigurationprofile-0", "releaseNamespace": run}
			}},
		{kind: "OpenStackDataPlaneRole", gvr: gv(dp, "v1beta1", "openstackdataplaneroles"), count: 100,
			spec: func(string, int) map[string]any {
				return map[string]any{"preProvisioned": true, "nodeTemplate": map[string]any{"ansibleUser": "root", "ansibleSSHPrivateKeySecret": "edpm-ssh-key"}}
			}},
		{kind: "OpenStackDataPlaneNode", gvr: gv(dp, "v1beta1", "openstackdataplanenodes"), count: 330,
			spec: func(run string, i int) map[string]any {
				return map[string]any{"role": fmt.Sprintf("%s-openstackdataplanerole-%d", run, i%100), "hostName": fmt.Sprintf("idle-%d", i),
					"ansibleHost": "198.51.100.250", "deploy": false}
			}},
		{kind: "OpenStackDataPlane", gvr: gv(dp, "v1beta1", "openstackdataplanes"), count: 50,
			spec: func(run string, i int) map[string]any {
				return map[string]any{"roles": []any{fmt.Sprintf("%s-openstackdataplanerole-%d", run, i)}, "deploy": false}
			}},
		{kind: "NovaExternalCompute", gvr: gv("nova.openstack.org", "v1beta1", "novaexternalcomputes"), count: 100,
			spec: func(run string, i int) map[string]any {
				return map[string]any{"dataplaneNodeName": fmt.Sprintf("idle-nec-%d", i), "cellName": "cell1", "sshKeySecretName": "edpm-ssh-key",
					"inventoryConfigMapName": fmt.Sprintf("idle-nec-%d-inventory", i), "deploy": false}
			}},
		{kind: "OVNMetadataAgent", gvr: gv("neutron.openstack.org", "v1beta1", "ovnmetadataagents"), count: 100,
			spec: func(run string, i int) map[string]any {
				return map[string]any{"dataplaneNodeName": fmt.Sprintf("idle-ovn-%d", i), "sshKeySecretName": "edpm-ssh-key",
					"inventoryConfigMapName": fmt.Sprintf("idle-ovn-%d-inventory", i), "deploy": false}
			}},
		{kind: "OpenStackServer", gvr: gv("infrastructure.cluster.x-k8s.io", "v1alpha1", "openstackservers"), count: 6,
			spec: func(string, int) map[string]any { return server }},
		{kind: "OpenStackMachine", gvr: gv("infrastructure.cluster.x-k8s.io", "v1beta1", "openstackmachines"), count: 2,
			spec: func(string, int) map[string]any { return server }},
		{kind: "OpenStackCluster", gvr: gv("infrastructure.cluster.x-k8s.io", "v1beta1", "openstackclusters"), count: 2,
			spec: func(string, int) map[string]any {
				return map[string]any{"identityRef": osRef, "externalNetwork": map[string]any{"filter": map[string]any{"name": local.ExternalNetwork}}}
			}},
	}
}

// BenchmarkIdle is figure P5: with about 1,000 settled objects across every served kind, how much
// work does the system do while nothing changes? Workflow tasks and history events per minute (goal:
// 0, the documented resync of an idle object workflow being none) and the Temporal server's and the
// worker's CPU over the window.
func BenchmarkIdle(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	env, err := e2e.Setup(ctx, e2e.Config{TemporalNamespace: "stackflow-bench-idle", RunPrefix: "idle",
		Components: []string{local.Kubernetes, local.Temporal, local.OpenStack}, QPS: 500, Burst: 1000})
	if err != nil {
		b.Fatal(err)
	}
	defer env.Close()
	run := env.Run
	_, err = env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: run}}, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"edpm-ssh-key", local.CloudsSecretName} {
		s, err := env.Kube.CoreV1().Secrets(local.SystemNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := env.Kube.CoreV1().Secrets(run).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: s.Data}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	worker := env.StartWorker(b, e2e.WorkerOptions{Identity: run + "-worker", ExtraArgs: []string{"--log-level", "warn"}})
	env.StartBridge(b, e2e.BridgeOptions{Identity: run + "-bridge", Workers: concurrency, DefaultLeases: true, ExtraArgs: []string{"--log-level", "warn"}})

	pop := idlePopulation()
	total := 0
	start := time.Now()
	for _, k := range pop {
		if err := createIdle(ctx, env, run, k); err != nil {
			b.Fatal(err)
		}
		total += k.count
		if k.kind == "Node" {
			total += k.count // each Node brings its OpenstackNode
		}
	}
	defer cleanupIdle(env, run, pop)
	if err := waitIdleReady(ctx, env, run, pop); err != nil {
		b.Fatal(err)
	}
	settled := time.Since(start)

	before := idleHistories(ctx, b, env)
	tempCPU0, workerCPU0 := cpuSeconds(temporalPID(env)), cpuSeconds(worker.PID())
	time.Sleep(idleWindow)
	after := idleHistories(ctx, b, env)
	tempCPU1, workerCPU1 := cpuSeconds(temporalPID(env)), cpuSeconds(worker.PID())

	var events, tasks int64
	var grew []string
	for id, a := range after {
		bf := before[id]
		if a.length == bf.length && a.run == bf.run {
			continue
		}
		grew = append(grew, id)
		added, completed := addedEvents(ctx, env, id, a.run, bf)
		events += added
		tasks += completed
	}
	minutes := idleWindow.Minutes()
	b.ReportMetric(float64(tasks)/minutes, "wftasks/min")
	b.ReportMetric(float64(events)/minutes, "events/min")
	b.ReportMetric(100*(tempCPU1-tempCPU0)/idleWindow.Seconds(), "temporal-cpu-%")
	b.ReportMetric(100*(workerCPU1-workerCPU0)/idleWindow.Seconds(), "worker-cpu-%")
	fmt.Printf("P5 idle: %d objects (%d open workflows) settled in %s; over %s: %.1f workflow tasks/min, %.1f history events/min, "+
		"Temporal server CPU %.1f%%, worker CPU %.1f%% of one core; %d workflows made progress %v\n",
		total, len(before), settled.Round(time.Second), idleWindow, float64(tasks)/minutes, float64(events)/minutes,
		100*(tempCPU1-tempCPU0)/idleWindow.Seconds(), 100*(workerCPU1-workerCPU0)/idleWindow.Seconds(), len(grew), firstN(grew, 5))
}

func createIdle(ctx context.Context, env *e2e.Env, run string, k idleKind) error {
	return parallel(k.count, concurrency, func(i int) error {
		name := fmt.Sprintf("%s-%s-%d", run, strings.ToLower(k.kind), i)
		if k.kind == "Node" {
			_, err := env.Kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
				Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}, Labels: map[string]string{"type": "kwok", "stackflow.io/bench": run}}}, metav1.CreateOptions{})
			return err
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": k.gvr.GroupVersion().String(), "kind": k.kind,
			"metadata": map[string]any{"name": name, "labels": map[string]any{"stackflow.io/bench": run}},
			"spec":     k.spec(run, i),
		}}
		var err error
		if k.cluster {
			_, err = env.Dyn.Resource(k.gvr).Create(ctx, u, metav1.CreateOptions{})
		} else {
			_, err = env.Dyn.Resource(k.gvr).Namespace(run).Create(ctx, u, metav1.CreateOptions{})
		}
		if err != nil {
			return fmt.Errorf("create %s %s: %w", k.kind, name, err)
		}
		return nil
	})
}

// waitIdleReady waits until every object of the population (OpenstackNodes of the bench's Nodes
// included) is Ready for its generation; Nodes have no status of stackflow's and count once their
// OpenstackNode is Ready.
func waitIdleReady(ctx context.Context, env *e2e.Env, run string, pop []idleKind) error {
	sel := metav1.ListOptions{LabelSelector: "stackflow.io/bench=" + run}
	for _, k := range pop {
		gvr, opts, ns := k.gvr, sel, run
		if k.kind == "Node" {
			gvr, opts = osknodes, metav1.ListOptions{}
		}
		if k.cluster {
			ns = ""
		}
		for {
			var list *unstructured.UnstructuredList
			var err error
			if ns == "" {
				list, err = env.Dyn.Resource(gvr).List(ctx, opts)
			} else {
				list, err = env.Dyn.Resource(gvr).Namespace(ns).List(ctx, opts)
			}
			if err != nil {
				return err
			}
			ready := 0
			for _, u := range list.Items {
				if k.kind == "Node" && !strings.HasPrefix(u.GetName(), run+"-") {
					continue
				}
				if isReady(&u) {
					ready++
				}
			}
			if ready >= k.count {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("%s: %d of %d Ready: %w", k.kind, ready, k.count, ctx.Err())
			}
			time.Sleep(2 * time.Second)
		}
	}
	return nil
}

func isReady(u *unstructured.Unstructured) bool {
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	if observed < lifecycle.EffectiveGeneration(u.GetGeneration(), u.GetAnnotations()) {
		return false
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == lifecycle.ConditionReady {
			return m["status"] == "True"
		}
	}
	return false
}

// cleanupIdle deletes the population and waits, while this benchmark's worker and bridge still run,
// until the workflows have torn every object down (servers included): objects left with their
// finalizers would load the next benchmark's bridge (it lets them go one by one) and skew its figures.
func cleanupIdle(env *e2e.Env, run string, pop []idleKind) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	start := time.Now()
	defer func() {
		left := idleRemaining(ctx, env, run, pop)
		for ; left > 0 && ctx.Err() == nil; left = idleRemaining(ctx, env, run, pop) {
			time.Sleep(2 * time.Second)
		}
		fmt.Printf("idle teardown: the population deleted in %s (%d objects left)\n", time.Since(start).Round(time.Second), left)
	}()
	sel := metav1.ListOptions{LabelSelector: "stackflow.io/bench=" + run}
	for i := len(pop) - 1; i >= 0; i-- {
		k := pop[i]
		if k.kind == "Node" {
			_ = env.Kube.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, sel)
			continue
		}
		if k.cluster {
			_ = env.Dyn.Resource(k.gvr).DeleteCollection(ctx, metav1.DeleteOptions{}, sel)
		} else {
			_ = env.Dyn.Resource(k.gvr).Namespace(run).DeleteCollection(ctx, metav1.DeleteOptions{}, sel)
		}
	}
	_ = env.Kube.CoreV1().Namespaces().Delete(ctx, run, metav1.DeleteOptions{})
}

// idleRemaining counts the population's objects still present (a failed list counts as one).
func idleRemaining(ctx context.Context, env *e2e.Env, run string, pop []idleKind) int {
	sel := metav1.ListOptions{LabelSelector: "stackflow.io/bench=" + run}
	n := 0
	for _, k := range pop {
		var items int
		var err error
		switch {
		case k.kind == "Node":
			var l *corev1.NodeList
			if l, err = env.Kube.CoreV1().Nodes().List(ctx, sel); err == nil {
				items = len(l.Items)
			}
		case k.cluster:
			var l *unstructured.UnstructuredList
			if l, err = env.Dyn.Resource(k.gvr).List(ctx, sel); err == nil {
				items = len(l.Items)
			}
		default:
			var l *unstructured.UnstructuredList
			if l, err = env.Dyn.Resource(k.gvr).Namespace(run).List(ctx, sel); err == nil {
				items = len(l.Items)
			}
		}
		if err != nil {
			items = 1
		}
		n += items
	}
	return n
}

type idleHistory struct {
	run    string
	length int64
}

func idleHistories(ctx context.Context, b *testing.B, env *e2e.Env) map[string]idleHistory {
	out := map[string]idleHistory{}
	var token []byte
	for {
		resp, err := env.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: env.TemporalNamespace, Query: "ExecutionStatus = 'Running'", PageSize: 1000, NextPageToken: token})
		if err != nil {
			b.Fatal(err)
		}
		for _, x := range resp.Executions {
			d, err := env.Temporal.DescribeWorkflowExecution(ctx, x.Execution.WorkflowId, "")
			if err != nil {
				b.Fatal(err)
			}
			out[x.Execution.WorkflowId] = idleHistory{run: d.WorkflowExecutionInfo.Execution.RunId, length: d.WorkflowExecutionInfo.HistoryLength}
		}
		token = resp.NextPageToken
		if len(token) == 0 {
			return out
		}
	}
}

// addedEvents counts the events (and completed workflow tasks among them) a workflow added since
// before; a new run counts whole.
func addedEvents(ctx context.Context, env *e2e.Env, id, run string, before idleHistory) (events, tasks int64) {
	from := before.length
	if run != before.run {
		from = 0
	}
	it := env.Temporal.GetWorkflowHistory(ctx, id, run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return events, tasks
		}
		if ev.EventId <= from {
			continue
		}
		events++
		if ev.EventType == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			tasks++
		}
	}
	return events, tasks
}

func temporalPID(env *e2e.Env) int {
	pid, _ := env.Stack.Running("temporal")
	return pid
}

// cpuSeconds is a process's user plus system CPU time, from /proc/<pid>/stat.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100 // clock ticks; 100 per second on Linux
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], "…")
	}
	return s
}
