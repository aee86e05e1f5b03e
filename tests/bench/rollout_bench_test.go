package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/tests/e2e"
	sim "github.com/stackflow/stackflow/tests/makespan"
	"github.com/stackflow/stackflow/workflows/controlplane"
)

// rolloutBenchNamespace holds the rollout benchmark's workflows.
const rolloutBenchNamespace = "stackflow-bench-rollout"

var rolloutComponents = []string{"mariadb", "rabbitmq", "memcached", "keystone", "glance", "placement", "nova", "neutron", "horizon"}

// BenchmarkFullRollout rolls out the nine control-plane components of the test charts through stackflow
// (bridge, workflows, worker, Helm) from an empty namespace, and compares the makespan with the sum of
// the per-component rollout times (what a script rolling one release after the other would take). The
// critical path of the graph, with the measured times, is the best any schedule could do.
func BenchmarkFullRollout(b *testing.B) {
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
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("%s-%d", run, i)
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		comps := map[string]any{}
		for _, c := range rolloutComponents {
			comps[c] = map[string]any{"chart": map[string]any{"repository": repo.URL, "name": c, "version": "0.1.0"}}
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
		per, first, last, err := rolloutBenchChildTimes(ctx, tc, parentID)
		if err != nil {
			b.Fatal(err)
		}
		var sum time.Duration
		cost := map[string]float64{}
		var parts []string
		for _, c := range rolloutComponents {
			sum += per[c]
			cost[c] = per[c].Seconds()
			parts = append(parts, fmt.Sprintf("%s %.1fs", c, per[c].Seconds()))
		}
		path, critical := sim.CriticalPath(controlplane.ControlPlane, cost)
		rolloutSpan := last.Sub(first)
		fmt.Printf("full rollout of %d components: makespan %.1fs (create → ComponentsReady; first child start → last child close %.1fs)\n",
			len(rolloutComponents), makespan.Seconds(), rolloutSpan.Seconds())
		fmt.Printf("  sum of per-component rollouts (sequential script) %.1fs; ratio sum/makespan %.2f\n", sum.Seconds(), sum.Seconds()/makespan.Seconds())
		fmt.Printf("  critical path %s = %.1fs (lower bound of any schedule); makespan/critical %.2f\n", strings.Join(path, " → "), critical, makespan.Seconds()/critical)
		fmt.Printf("  per component: %s\n", strings.Join(parts, ", "))
		b.ReportMetric(makespan.Seconds(), "makespan-s")
		b.ReportMetric(sum.Seconds(), "sum-s")
		b.ReportMetric(sum.Seconds()/makespan.Seconds(), "sum/makespan")
		b.ReportMetric(critical, "critical-path-s")

		// Teardown uninstalls the releases; then the namespace goes.
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
	}
}

// rolloutBenchWaitReady waits for ComponentsReady=True and returns the configuration's workflow ID.
func rolloutBenchWaitReady(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, name string) (string, error) {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		u, err := dyn.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			var s struct {
				WorkflowID string             `json:"workflowID"`
				Conditions []metav1.Condition `json:"conditions"`
			}
			raw, _ := json.Marshal(u.Object["status"])
			_ = json.Unmarshal(raw, &s)
			for _, c := range s.Conditions {
				if c.Type == controlplane.ConditionComponentsReady && c.Status == metav1.ConditionTrue {
					return s.WorkflowID, nil
				}
				if c.Type == controlplane.ConditionComponentsReady && c.Status == metav1.ConditionFalse && c.Reason != "RollingOut" {
					return "", fmt.Errorf("rollout of %s failed: %s: %s", name, c.Reason, c.Message)
				}
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("rollout of %s not Ready in time", name)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// rolloutBenchChildTimes reads each component rollout's start and close time from visibility.
func rolloutBenchChildTimes(ctx context.Context, tc client.Client, parentID string) (map[string]time.Duration, time.Time, time.Time, error) {
	per := map[string]time.Duration{}
	var first, last time.Time
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: rolloutBenchNamespace, PageSize: 100,
			Query: fmt.Sprintf("WorkflowId STARTS_WITH %q AND WorkflowType = %q AND ExecutionStatus = 'Completed'", parentID+"/", controlplane.RolloutComponentWorkflowName)})
		if err != nil {
			return nil, first, last, err
		}
		if len(resp.Executions) >= len(rolloutComponents) {
			for _, e := range resp.Executions {
				s, c := e.StartTime.AsTime(), e.CloseTime.AsTime()
				per[strings.TrimPrefix(e.Execution.WorkflowId, parentID+"/")] = c.Sub(s)
				if first.IsZero() || s.Before(first) {
					first = s
				}
				if c.After(last) {
					last = c
				}
			}
			return per, first, last, nil
		}
		if time.Now().After(deadline) {
			return nil, first, last, fmt.Errorf("visibility shows %d of %d component rollouts", len(resp.Executions), len(rolloutComponents))
		}
		time.Sleep(time.Second)
	}
}
