package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/cli"
	helmkube "helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/tests/e2e"
	sim "github.com/stackflow/stackflow/tests/makespan"
	"github.com/stackflow/stackflow/workflows/controlplane"
)

// rolloutBenchNamespace holds the rollout benchmark's workflows.
const rolloutBenchNamespace = "stackflow-bench-rollout"

var rolloutComponents = []string{"mariadb", "rabbitmq", "memcached", "keystone", "glance", "placement", "nova", "neutron", "horizon"}

// BenchmarkFullRollout rolls out the nine control-plane components of the test charts through stackflow
// (bridge, workflows, worker, Helm) from an empty namespace, and compares the makespan with the critical
// path of the graph with the measured times (the best any schedule could do) and with a plain script run
// in the same benchmark: `helm upgrade --install --wait` per component, one after the other, in a fixed
// topological order, through Helm's own library. The script runs before and after stackflow's rollout,
// so neither side has the warmer stack, and both ratios are printed.
func BenchmarkFullRollout(b *testing.B) {
	runRolloutBench(b, rolloutBench{components: rolloutComponents})
}

// realRolloutComponents are the charts that run their services for real.
var realRolloutComponents = []string{"ovn", "keystone", "glance", "placement", "neutron"}

// BenchmarkRealRollout is FullRollout on real services: Keystone, with Glance and Placement installed
// beside it and Neutron (ML2/OVN) beside Keystone and Placement, and OVN's central services from the
// start, each on the stack's real node with its database on the stack's MariaDB and Neutron's vhost on
// its RabbitMQ (the infrastructure external, as in make run's sample profile), so a component is Ready
// when its API answers. The plain script installs the same charts with the same values (`--wait --wait-for-jobs`),
// and uninstalls them after, as stackflow's teardown does, so the databases and vhosts their hooks
// created are dropped on both sides.
func BenchmarkRealRollout(b *testing.B) {
	real := map[string]any{"node_selector_key": local.RealNodeLabel, "node_selector_value": "true"}
	runRolloutBench(b, rolloutBench{
		components: realRolloutComponents,
		external:   []string{"mariadb", "rabbitmq", "memcached"},
		waitJobs:   true,
		values: func(ns, c string) map[string]any {
			v := map[string]any{
				"pod": map[string]any{"tolerations": map[string]any{c: map[string]any{"enabled": true, "tolerations": []any{
					map[string]any{"key": local.RealNodeTaint.Key, "operator": "Equal", "value": local.RealNodeTaint.Value, "effect": string(local.RealNodeTaint.Effect)},
				}}}},
			}
			if c == "ovn" {
				v["labels"] = map[string]any{"ovn_ovsdb_nb": real, "ovn_ovsdb_sb": real, "ovn_northd": real}
				return v
			}
			db := strings.ReplaceAll(ns, "-", "_") + "_" + c
			endpoints := map[string]any{"oslo_db": map[string]any{
				"hosts": map[string]any{"default": local.HostGateway},
				"port":  map[string]any{"mysql": map[string]any{"default": local.MariaDBPort}},
				"path":  "/" + db,
				"auth":  map[string]any{c: map[string]any{"username": db}},
			}}
			v["labels"] = map[string]any{"api": real, "job": real}
			if c == "neutron" {
				v["labels"] = map[string]any{"server": real, "job": real}
				endpoints["oslo_messaging"] = map[string]any{
					"hosts": map[string]any{"default": local.HostGateway},
					"path":  "/" + db,
					"auth":  map[string]any{c: map[string]any{"username": db}},
				}
			}
			v["endpoints"] = endpoints
			v["manifests"] = map[string]any{"job_db_drop": true}
			return v
		},
		prepare: func(env *e2e.Env, ns string) error {
			for _, name := range []string{local.DatabaseAdminSecretName, local.MessageBusAdminSecretName} {
				admin, err := env.Kube.CoreV1().Secrets(local.SystemNamespace).Get(context.Background(), name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				if err := env.CreateSecret(context.Background(), ns, name, admin.Data); err != nil {
					return err
				}
			}
			return nil
		},
	})
}

// rolloutBench is one rollout benchmark: the components rolled out (by stackflow and by the plain
// script alike, with the same values), the components the profile marks external, and what a release
// namespace needs first.
type rolloutBench struct {
	components []string
	external   []string
	// values are a component's Helm values in namespace ns (nil: the chart's own).
	values func(ns, component string) map[string]any
	// prepare readies a release namespace (nil: nothing to do).
	prepare func(env *e2e.Env, ns string) error
	// waitJobs makes the plain script wait for the charts' Jobs too (--wait-for-jobs).
	waitJobs bool
}

func (r rolloutBench) valuesIn(ns, c string) map[string]any {
	if r.values == nil {
		return map[string]any{}
	}
	return r.values(ns, c)
}

func runRolloutBench(b *testing.B, rb rolloutBench) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	env, err := e2e.Setup(ctx, e2e.Config{TemporalNamespace: rolloutBenchNamespace, RunPrefix: "rb"})
	if err != nil {
		b.Fatal(err)
	}
	defer env.Close()
	repoDir := filepath.Join(env.Dir, "charts")
	if err := os.MkdirAll(repoDir, 0o755); err != nil {
		b.Fatal(err)
	}
	repo, err := local.ServeCharts(filepath.Join(env.Stack.RepoRoot, "deploy", "charts"), repoDir)
	if err != nil {
		b.Fatal(err)
	}
	defer repo.Close()
	dyn, kube, tc, run := env.Dyn, env.Kube, env.Temporal, env.Run

	// Both stop when the benchmark ends.
	env.StartWorker(b, e2e.WorkerOptions{Identity: run + "-worker", Env: []string{"STACKFLOW_HELM_CACHE=" + filepath.Join(b.TempDir(), "helm")}})
	env.StartBridge(b, e2e.BridgeOptions{Identity: run + "-bridge", Kinds: "KupenstackConfiguration,OpenStackCloudConfigurationProfile",
		DefaultLeases: true})

	gvrProfile := schema.GroupVersionResource{Group: "kupenstack.io", Version: "v1alpha1", Resource: "openstackcloudconfigurationprofiles"}
	gvrConfig := schema.GroupVersionResource{Group: "kupenstack.io", Version: "v1alpha1", Resource: "kupenstackconfigurations"}
	order, err := controlplane.ControlPlane.Waves(rb.components)
	if err != nil {
		b.Fatal(err)
	}
	var sequence []string
	for _, w := range order {
		sequence = append(sequence, w...)
	}
	namespace := func(name string) {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		if rb.prepare != nil {
			if err := rb.prepare(env, name); err != nil {
				b.Fatal(err)
			}
		}
	}
	plain := func(name string) (time.Duration, string) {
		namespace(name)
		defer func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) }()
		d, each, err := plainHelmRollout(ctx, env.Stack.Kubeconfig, name, repo.URL, sequence, func(c string) map[string]any { return rb.valuesIn(name, c) },
			rb.waitJobs, b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		var parts []string
		for i, c := range sequence {
			parts = append(parts, fmt.Sprintf("%s %.1fs", c, each[i].Seconds()))
		}
		return d, strings.Join(parts, ", ")
	}
	for i := 0; i < b.N; i++ {
		before, beforeEach := plain(fmt.Sprintf("%s-%d-plain-a", run, i))
		name := fmt.Sprintf("%s-%d", run, i)
		namespace(name)
		comps := map[string]any{}
		for _, c := range rb.external {
			comps[c] = map[string]any{"external": true}
		}
		for _, c := range rb.components {
			comps[c] = map[string]any{"chart": map[string]any{"repository": repo.URL, "name": c, "version": "0.1.0"}, "values": rb.valuesIn(name, c)}
		}
		obj := func(kind string, spec map[string]any) *unstructured.Unstructured {
			return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kupenstack.io/v1alpha1", "kind": kind,
				"metadata": map[string]any{"name": name}, "spec": spec}}
		}
		if _, err := dyn.Resource(gvrProfile).Create(ctx, obj("OpenStackCloudConfigurationProfile", map[string]any{"components": comps}), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := dyn.Resource(gvrConfig).Create(ctx, obj("KupenstackConfiguration", map[string]any{"defaultProfile": name, "releaseNamespace": name}), metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		parentID, err := rolloutBenchWaitReady(ctx, dyn, gvrConfig, name)
		if err != nil {
			b.Fatal(err)
		}
		makespan := time.Since(start)
		spans, err := rolloutBenchChildSpans(ctx, tc, parentID, start, len(rb.components))
		if err != nil {
			b.Fatal(err)
		}
		var sum float64
		cost := map[string]float64{}
		var parts, beside []string
		first, last := math.Inf(1), 0.0
		for _, c := range rb.components {
			first, last = math.Min(first, spans[c].Start), math.Max(last, spans[c].End)
		}
		for _, c := range rb.components {
			// A component installed beside a dependency waits for it inside its chart: for the critical
			// path, its time counts from that dependency's Ready (what the graph's order would give it).
			sp := spans[c]
			comp, _ := controlplane.ControlPlane.Get(c)
			for _, d := range comp.InstallsBeside {
				if ds, ok := spans[d]; ok && ds.End > sp.Start {
					beside = append(beside, fmt.Sprintf("%s %.1fs before %s was Ready", c, ds.End-sp.Start, d))
					sp.Start = ds.End
				}
			}
			spans[c] = sp
			cost[c] = sp.End - sp.Start
			sum += cost[c]
			parts = append(parts, fmt.Sprintf("%s %.1fs", c, cost[c]))
		}
		path, critical := sim.CriticalPath(controlplane.ControlPlane, cost)
		hand := sim.Handovers(controlplane.ControlPlane, spans)
		var onPath float64
		var handParts []string
		for _, c := range path {
			onPath += hand[c]
			handParts = append(handParts, fmt.Sprintf("%s %.2fs", c, hand[c]))
		}
		ms := makespan.Seconds()
		fmt.Printf("full rollout of %d components: makespan %.1fs (create → ComponentsReady; first child start → last child close %.1fs)\n",
			len(rb.components), ms, last-first)
		fmt.Printf("  sum of per-component rollouts (sequential script) %.1fs; ratio sum/makespan %.2f\n", sum, sum/ms)
		fmt.Printf("  critical path %s = %.1fs (lower bound of any schedule); makespan/critical path %.2f (goal ≤ 1.15)\n", strings.Join(path, " → "), critical, ms/critical)
		fmt.Printf("  where the rest goes: %.1fs before the first component (read, render, plan), %.1fs handed over on the critical path (%s), %.1fs after the last (status)\n",
			first, onPath, strings.Join(handParts, ", "), ms-last)
		fmt.Printf("  per component: %s\n", strings.Join(parts, ", "))
		if len(beside) > 0 {
			fmt.Printf("  installed beside a dependency (their time above counts from its Ready): %s\n", strings.Join(beside, ", "))
		}
		b.ReportMetric(ms, "makespan-s")
		b.ReportMetric(sum, "sum-s")
		b.ReportMetric(sum/ms, "sum/makespan")
		b.ReportMetric(critical, "critical-path-s")
		b.ReportMetric(ms/critical, "makespan/critical")

		// Teardown uninstalls the releases (their hooks drop what they created); then the namespace goes.
		// Before the second script run, so it does not share the machine with the teardown.
		_ = dyn.Resource(gvrConfig).Delete(ctx, name, metav1.DeleteOptions{})
		deadline := time.Now().Add(3 * time.Minute)
		for time.Now().Before(deadline) {
			if _, err := dyn.Resource(gvrConfig).Get(ctx, name, metav1.GetOptions{}); err != nil {
				break
			}
			time.Sleep(time.Second)
		}
		// The profile's workflow removes its finalizer: wait, while the worker still runs.
		_ = dyn.Resource(gvrProfile).Delete(ctx, name, metav1.DeleteOptions{})
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
			if _, err := dyn.Resource(gvrProfile).Get(ctx, name, metav1.GetOptions{}); err != nil {
				break
			}
		}
		_ = kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})

		after, afterEach := plain(fmt.Sprintf("%s-%d-plain-b", run, i))
		fmt.Printf("  plain script (helm upgrade --install per component and its wait as stackflow waits: ready checker every 1 s, in the order %s): %.1fs before, %.1fs after stackflow's rollout\n",
			strings.Join(sequence, ", "), before.Seconds(), after.Seconds())
		fmt.Printf("  plain script per component: %s before; %s after\n", beforeEach, afterEach)
		fmt.Printf("  makespan/plain script %.2f (script first) and %.2f (script after); goal ≤ 0.8\n", ms/before.Seconds(), ms/after.Seconds())
		b.ReportMetric(before.Seconds(), "plain-before-s")
		b.ReportMetric(after.Seconds(), "plain-after-s")
		b.ReportMetric(ms/((before.Seconds()+after.Seconds())/2), "makespan/plain")
	}
}

// rolloutBenchWaitReady waits for ComponentsReady=True and returns the configuration's workflow ID. It
// watches the object, so the makespan ends when the condition is written, not at the next poll.
func rolloutBenchWaitReady(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, name string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	// ready reports the workflow ID once the condition is True, an error once it failed.
	ready := func(u *unstructured.Unstructured) (string, bool, error) {
		var s struct {
			WorkflowID string             `json:"workflowID"`
			Conditions []metav1.Condition `json:"conditions"`
		}
		raw, _ := json.Marshal(u.Object["status"])
		_ = json.Unmarshal(raw, &s)
		for _, c := range s.Conditions {
			if c.Type == controlplane.ConditionComponentsReady && c.Status == metav1.ConditionTrue {
				return s.WorkflowID, true, nil
			}
			if c.Type == controlplane.ConditionComponentsReady && c.Status == metav1.ConditionFalse && c.Reason != "RollingOut" {
				return "", false, fmt.Errorf("rollout of %s failed: %s: %s", name, c.Reason, c.Message)
			}
		}
		return "", false, nil
	}
	for {
		// A read, then a watch from its version; a watch the server ends is started again the same way.
		u, err := dyn.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", fmt.Errorf("read %s: %w", name, err)
		}
		if id, ok, err := ready(u); ok || err != nil {
			return id, err
		}
		w, err := dyn.Resource(gvr).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: u.GetResourceVersion()})
		if err != nil {
			return "", fmt.Errorf("watch %s: %w", name, err)
		}
		for ev := range w.ResultChan() {
			if u, ok := ev.Object.(*unstructured.Unstructured); ok {
				if id, ok, err := ready(u); ok || err != nil {
					w.Stop()
					return id, err
				}
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return "", fmt.Errorf("rollout of %s not Ready in time", name)
		}
	}
}

// rolloutBenchChildSpans reads each component rollout's start and close time from visibility, in seconds
// since origin.
func rolloutBenchChildSpans(ctx context.Context, tc client.Client, parentID string, origin time.Time, n int) (map[string]sim.Span, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: rolloutBenchNamespace, PageSize: 100,
			Query: fmt.Sprintf("WorkflowId STARTS_WITH %q AND WorkflowType = %q AND ExecutionStatus = 'Completed'", parentID+"/", controlplane.RolloutComponentWorkflowName)})
		if err != nil {
			return nil, err
		}
		if len(resp.Executions) >= n {
			spans := map[string]sim.Span{}
			for _, e := range resp.Executions {
				spans[strings.TrimPrefix(e.Execution.WorkflowId, parentID+"/")] = sim.Span{
					Start: e.StartTime.AsTime().Sub(origin).Seconds(), End: e.CloseTime.AsTime().Sub(origin).Seconds()}
			}
			return spans, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("visibility shows %d of %d component rollouts", len(resp.Executions), n)
		}
		time.Sleep(time.Second)
	}
}

// plainHelmRollout is the script an operator would write without stackflow: for each component in a fixed
// topological order, `helm upgrade --install --wait` of its chart from the repository (a fresh namespace,
// so an install) with its values, one after the other, done through Helm's library as the helm command
// does it. Its wait is stackflow's (waitReleaseReady: Helm's ready checker every second), not Helm's
// waiter, which polls every 2 s: both sides wait alike, so the ratio measures the orchestration alone.
// It returns the time from the first install's start to the last one's Ready and each install's time,
// then uninstalls the releases in reverse order (`helm uninstall --wait`, their hooks included), untimed.
func plainHelmRollout(ctx context.Context, kubeconfig, namespace, repoURL string, sequence []string, values func(string) map[string]any,
	waitJobs bool, cacheDir string) (time.Duration, []time.Duration, error) {
	settings := cli.New()
	settings.KubeConfig = kubeconfig
	settings.SetNamespace(namespace)
	settings.RepositoryCache = filepath.Join(cacheDir, "repository")
	settings.RepositoryConfig = filepath.Join(cacheDir, "repositories.yaml")
	cfg := new(action.Configuration)
	if err := cfg.Init(settings.RESTClientGetter(), namespace, "secret", func(string, ...any) {}); err != nil {
		return 0, nil, fmt.Errorf("helm configuration: %w", err)
	}
	rc, err := settings.RESTClientGetter().ToRESTConfig()
	if err != nil {
		return 0, nil, err
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return 0, nil, err
	}
	var installed []string
	defer func() {
		for i := len(installed) - 1; i >= 0; i-- {
			un := action.NewUninstall(cfg)
			un.Wait, un.Timeout = true, 3*time.Minute
			_, _ = un.Run(installed[i])
		}
	}()
	start := time.Now()
	var each []time.Duration
	for _, c := range sequence {
		t0 := time.Now()
		inst := action.NewInstall(cfg)
		inst.ReleaseName, inst.Namespace, inst.Timeout = c, namespace, 5*time.Minute
		inst.RepoURL, inst.Version = repoURL, "0.1.0"
		path, err := inst.LocateChart(c, settings)
		if err != nil {
			return 0, nil, fmt.Errorf("chart %s: %w", c, err)
		}
		ch, err := loader.Load(path)
		if err != nil {
			return 0, nil, fmt.Errorf("load chart %s: %w", c, err)
		}
		installed = append(installed, c)
		rel, err := inst.RunWithContext(ctx, ch, values(c))
		if err != nil {
			return 0, nil, fmt.Errorf("helm upgrade --install %s: %w", c, err)
		}
		if err := waitReleaseReady(ctx, cfg, kube, rel, waitJobs, inst.Timeout); err != nil {
			return 0, nil, fmt.Errorf("helm upgrade --install --wait %s: %w", c, err)
		}
		each = append(each, time.Since(t0))
	}
	return time.Since(start), each, nil
}

// waitReleaseReady waits as stackflow's Helm activity does (WaitReady in activities/helm): Helm's ready
// checker over the release's objects (paused Deployments as ready, Jobs when checkJobs), every second,
// until all are ready or timeout.
func waitReleaseReady(ctx context.Context, cfg *action.Configuration, core kubernetes.Interface, rel *release.Release, checkJobs bool,
	timeout time.Duration) error {
	resources, err := cfg.KubeClient.Build(bytes.NewBufferString(rel.Manifest), false)
	if err != nil {
		return fmt.Errorf("objects of release %s: %w", rel.Name, err)
	}
	checker := helmkube.NewReadyChecker(core, func(string, ...any) {}, helmkube.PausedAsReady(true), helmkube.CheckJobs(checkJobs))
	deadline := time.Now().Add(timeout)
	for {
		waiting := ""
		for _, r := range resources {
			if ok, err := checker.IsReady(ctx, r); err != nil || !ok {
				waiting = r.ObjectName()
				break
			}
		}
		if waiting == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s: %s", timeout, waiting)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
