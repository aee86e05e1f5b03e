package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stackflow/stackflow/activities/ansible"
	dataplanev1beta1 "github.com/stackflow/stackflow/api/dataplane/v1beta1"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/tests/e2e"
	"github.com/stackflow/stackflow/workflows/dataplane"
)

// updateScaleSteps are the simulated playbook times of BenchmarkEDPMUpdateScale, in seconds: the update's
// two playbooks as tests/edpm's rolling update shows them on a test host (checkpoint ≈ 1 s; apply ≈ 11 s,
// nova-compute's restart included), and the deployment's steps, short (the deployment is not measured).
const updateScaleSteps = "update-checkpoint=1.0,update-apply=11.0,update-rollback=5.0,bootstrap=0.5,configure-network=0.5,configure-os=0.5,nova-compute=1.0,nova-compute-remove=0.5"

var gvrUpdateBench = schema.GroupVersionResource{Group: "dataplane.openstack.org", Version: "v1beta1", Resource: "openstackdataplaneupdates"}

// The Nova BenchmarkEDPMUpdateScale's computes join: its bridge and worker's Temporal namespace (with
// "-nova" appended), its compute API's region and port.
const (
	updateScaleNamespace = "stackflow-bench-update-scale"
	updateScaleRegion    = "UPDSCALE"
	updateScaleAPIPort   = 19074
)

// BenchmarkEDPMUpdateScale updates a data plane of STACKFLOW_UPDATE_NODES (default 200) computes through
// the real bridge, workflows, Temporal and API server: one canary, then batches of a tenth of the nodes
// (maxUnavailable), each node checkpointed, disabled, drained, updated, verified, enabled and its instances
// migrated back. The Ansible queue and the compute activities of the OpenStack queue are served by the
// benchmark-only worker (tests/bench/simansible -openstack): its playbooks take the times of
// updateScaleSteps (×STACKFLOW_SCALE_STRETCH, ±20 % per host), and its Nova answers at once and holds no
// instances, so what is measured is the orchestration. It prints the makespan (the update workflow's start
// → its last node's last activity) against the critical path (per batch as the update's own planner forms
// them, the longest node's playbook time, summed), the overhead between them (goal ≤ 5 %), workflow tasks,
// events and actions per node of the update's history, its status writes, the largest status and history,
// and peak memory.
func BenchmarkEDPMUpdateScale(b *testing.B) {
	nodes := 200
	fmt.Sscanf(os.Getenv("STACKFLOW_UPDATE_NODES"), "%d", &nodes)
	stretch := 1.0
	fmt.Sscanf(os.Getenv("STACKFLOW_SCALE_STRETCH"), "%g", &stretch)
	var durs []string
	for _, kv := range strings.Split(updateScaleSteps, ",") {
		k, v, _ := strings.Cut(kv, "=")
		var f float64
		fmt.Sscanf(v, "%g", &f)
		durs = append(durs, fmt.Sprintf("%s=%.2f", k, f*stretch))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 80*time.Minute)
	defer cancel()
	r := edpmRigUp(ctx, b, 2, "eu")
	defer r.close()
	// The computes join cell1 of a Nova that stackflow deploys in the benchmark's namespace, as on
	// `make run`'s cloud, from the stack's Secrets a user starts from. Their compute activities are the
	// simulated Nova's (no real Nova holds 200 computes on this machine): the orchestration is measured.
	env, err := e2e.Setup(ctx, e2e.Config{TemporalNamespace: updateScaleNamespace, RunPrefix: "us",
		Components: []string{local.Kubernetes, local.Temporal, local.OpenStack}})
	if err != nil {
		b.Fatal(err)
	}
	defer env.Close()
	for _, name := range []string{local.CloudsSecretName, local.ServiceSecretName, local.DatabaseAdminSecretName, local.MessageBusAdminSecretName} {
		src, err := r.kc.CoreV1().Secrets(local.SystemNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.kc.CoreV1().Secrets(r.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: src.Data}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	nova, err := env.StartNova(ctx, e2e.NovaOptions{Namespace: r.ns, Region: updateScaleRegion, APIPort: updateScaleAPIPort})
	if err != nil {
		b.Fatal(err)
	}
	// The computes go first (their workflows still served), then the Nova.
	defer func() {
		r.deleteCreated()
		if nova.Close() != 0 {
			b.Error("the benchmark's Nova: teardown or histories failed (see above)")
		}
	}()
	bridge, err := r.start("stackflow-bridge", "--namespace", edpmBenchNamespace, "--identity", r.run+"-bridge",
		"--kinds", "OpenStackDataPlane,OpenStackDataPlaneRole,OpenStackDataPlaneNode,NovaExternalCompute,OpenStackDataPlaneUpdate",
		"--leader-election-name", r.run+"-bridge")
	if err != nil {
		b.Fatal(err)
	}
	worker, err := r.start("stackflow-worker", "--namespace", edpmBenchNamespace, "--identity", r.run+"-worker",
		"--queues", strings.Join([]string{lifecycle.WorkflowQueue, lifecycle.KubeQueue}, ","), "--stop-timeout", "5s")
	if err != nil {
		b.Fatal(err)
	}
	simw, err := r.start("simansible", "--namespace", edpmBenchNamespace, "--identity", r.run+"-simansible", "--openstack",
		"--durations", strings.Join(durs, ","))
	if err != nil {
		b.Fatal(err)
	}
	nova.WaitReady(b)
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("u%d", i)
		r.mk(gvrRole, map[string]any{"apiVersion": "dataplane.openstack.org/v1beta1", "kind": "OpenStackDataPlaneRole",
			"metadata": map[string]any{"name": name, "annotations": map[string]any{dataplanev1beta1.NovaCellAnnotation: "cell1"}},
			"spec": map[string]any{"dataPlane": name, "preProvisioned": true,
				"nodeTemplate": map[string]any{"ansibleUser": "root", "ansibleSSHPrivateKeySecret": "edpm-ssh-key"}}})
		names := make([]string, nodes)
		hosts := map[string]string{}
		for n := range names {
			names[n] = fmt.Sprintf("%s-%03d", name, n)
			hosts[names[n]] = fmt.Sprintf("%s-sim-%03d", name, n)
			r.mk(gvrNode, map[string]any{"apiVersion": "dataplane.openstack.org/v1beta1", "kind": "OpenStackDataPlaneNode",
				"metadata": map[string]any{"name": names[n]},
				"spec":     map[string]any{"role": name, "hostName": hosts[names[n]], "ansibleHost": fmt.Sprintf("192.0.2.%d", 1+n%250), "deploy": true}})
		}
		r.mk(gvrDP, map[string]any{"apiVersion": "dataplane.openstack.org/v1beta1", "kind": "OpenStackDataPlane",
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"roles": []any{name}, "deploy": true, "maxConcurrency": int64(nodes)}})
		deployed := time.Now()
		if err := edpmBenchWaitReady(ctx, r.dyn, gvrDP, r.ns, name, 40*time.Minute); err != nil {
			b.Fatalf("%v\n--- worker log ---\n%s", err, edpmBenchTail(worker.log, 40))
		}
		fmt.Printf("data plane of %d computes deployed (simulated) in %.1f s\n", nodes, time.Since(deployed).Seconds())

		maxUnavailable := max(1, nodes/10)
		created := time.Now()
		upd := r.mk(gvrUpdateBench, map[string]any{"apiVersion": "dataplane.openstack.org/v1beta1", "kind": "OpenStackDataPlaneUpdate",
			"metadata": map[string]any{"name": name + "-to-2"},
			"spec": map[string]any{"dataPlane": name, "novaCompute": map[string]any{"version": "2"},
				"strategy": map[string]any{"canary": int64(1), "maxUnavailable": int64(maxUnavailable), "maxFailedNodes": int64(0)},
				"drain":    map[string]any{"timeout": "1m", "onFailure": "Stop", "migrateBack": true}}})
		if err := edpmBenchWaitReady(ctx, r.dyn, gvrUpdateBench, r.ns, upd.GetName(), 40*time.Minute); err != nil {
			b.Fatalf("%v\n--- worker log ---\n%s", err, edpmBenchTail(worker.log, 40))
		}
		ready := time.Since(created)
		id := edpmBenchWorkflowID("OpenStackDataPlaneUpdate", gvrUpdateBench, upd)
		start, end, perNode, err := updateScaleTimes(ctx, r, id)
		if err != nil {
			b.Fatal(err)
		}
		if len(perNode) != nodes {
			b.Fatalf("playbook times for %d nodes, want %d", len(perNode), nodes)
		}
		critical := updateCriticalPath(names, hosts, perNode, maxUnavailable)
		st, err := scaleHistoryStats(ctx, r.tc, id)
		if err != nil {
			b.Fatal(err)
		}
		u, err := r.dyn.Resource(gvrUpdateBench).Namespace(r.ns).Get(ctx, upd.GetName(), metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		statusBytes := len(mustJSONBench(u.Object["status"]))
		makespan := end.Sub(start).Seconds()
		overhead := (makespan - critical) / critical
		per := func(x int) float64 { return float64(x) / float64(nodes) }
		b.ReportMetric(makespan, "makespan-s")
		b.ReportMetric(critical, "critical-path-s")
		b.ReportMetric(overhead*100, "overhead-%")
		fmt.Printf("EDPM update of %d computes (canary 1, then batches of %d; playbooks %s s ±20 %% per node; simulated Nova):\n", nodes, maxUnavailable, strings.Join(durs[:2], ", "))
		fmt.Printf("  orchestration overhead over the critical path  %8.1f %% (goal <= 5%%): makespan %.1f s, critical path %.1f s (%d batches)\n",
			overhead*100, makespan, critical, 1+(nodes-1+maxUnavailable-1)/maxUnavailable)
		fmt.Printf("  update created → Ready                         %8.1f s\n", ready.Seconds())
		fmt.Printf("  per node (the update's workflow / nodes)       %8.1f workflow tasks, %.1f history events, %.1f actions (%d runs)\n",
			per(st.tasks), per(st.events), per(st.actions), st.runs)
		fmt.Printf("  status writes                                  %8d (%.2f per node)\n", st.statusWrites, per(st.statusWrites))
		fmt.Printf("  largest history (one run)                      %8d events, %d bytes; status object %d bytes\n", st.maxRunEvents, st.maxRunBytes, statusBytes)
		fmt.Printf("  peak resident memory                           %8.0f MB bridge, %.0f MB worker, %.0f MB simulated worker\n",
			bridge.memMB("VmHWM"), worker.memMB("VmHWM"), simw.memMB("VmHWM"))
		deleted := time.Now()
		r.deleteCreated()
		fmt.Printf("  deleted (update, data plane, %d computes)       %8.1f s\n", nodes, time.Since(deleted).Seconds())
	}
}

// updateScaleTimes reads the update's history: its first run's start, its last non-status activity's
// completion, and each host's playbook time (the sum of its RunPlaybook activities, started → completed).
func updateScaleTimes(ctx context.Context, r *edpmRig, wfID string) (time.Time, time.Time, map[string]float64, error) {
	var start, end time.Time
	perHost := map[string]float64{}
	runs, err := e2e.Runs(ctx, r.tc, wfID)
	if err != nil {
		return start, end, nil, err
	}
	for i, events := range runs {
		if i == 0 && len(events) > 0 {
			start = events[0].GetEventTime().AsTime()
		}
		host, kind := map[int64]string{}, map[int64]string{}
		started := map[int64]time.Time{}
		for _, ev := range events {
			switch {
			case ev.GetActivityTaskScheduledEventAttributes() != nil:
				a := ev.GetActivityTaskScheduledEventAttributes()
				kind[ev.GetEventId()] = a.GetActivityType().GetName()
				if a.GetActivityType().GetName() == "RunPlaybook" {
					var in ansible.PlaybookInput
					if p := a.GetInput().GetPayloads(); len(p) > 0 {
						_ = edpmBenchDC.FromPayload(p[0], &in)
					}
					host[ev.GetEventId()] = in.Host
				}
			case ev.GetActivityTaskStartedEventAttributes() != nil:
				started[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()] = ev.GetEventTime().AsTime()
			case ev.GetActivityTaskCompletedEventAttributes() != nil:
				sid := ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()
				at := ev.GetEventTime().AsTime()
				if h, ok := host[sid]; ok {
					perHost[h] += at.Sub(started[sid]).Seconds()
				}
				if kind[sid] != "PatchStatus" && at.After(end) {
					end = at
				}
			}
		}
	}
	return start, end, perHost, nil
}

// updateCriticalPath is the update's makespan with no orchestration at all: the batches its planner
// (dataplane.PlanUpdate) forms, each as long as its longest node's playbooks.
func updateCriticalPath(names []string, hosts map[string]string, perHost map[string]float64, maxUnavailable int) float64 {
	nodes := dataplane.NewUpdateNodes(names, hosts, 1)
	policy := dataplane.UpdatePolicy{MaxUnavailable: maxUnavailable}
	total := 0.0
	for {
		plan := dataplane.PlanUpdate(nodes, policy, true, false, false)
		if len(plan.Start) == 0 {
			return total
		}
		longest := 0.0
		for i := range nodes {
			if slices.Contains(plan.Start, nodes[i].Name) {
				longest = max(longest, perHost[nodes[i].Host])
				nodes[i].State = dataplanev1beta1.UpdateNodeSucceeded
			}
		}
		total += longest
	}
}

func mustJSONBench(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
