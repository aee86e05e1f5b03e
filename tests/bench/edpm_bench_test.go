package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/stackflow/stackflow/activities/ansible"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/tests/e2e"
	sim "github.com/stackflow/stackflow/tests/makespan"
	"github.com/stackflow/stackflow/workflows/dataplane"
)

// edpmBenchNamespace holds the benchmark's workflows.
const edpmBenchNamespace = "stackflow-bench-edpm"

// edpmBenchDC decodes the payloads of the benchmark's histories (the stack's codec, when it has one).
var edpmBenchDC = converter.GetDefaultDataConverter()

var edpmBenchSteps = []string{"bootstrap", "configure-network", "configure-os"}

// edpmBenchDelay is the uneven extra duration of step s on node i, in seconds: every node has one slow
// step (a minute or two, like a package mirror sync or a firmware update would take), at a different
// place for different nodes, and slow steps differ in length, so a barrier per service waits for some
// slow node at every step while a per-node pipeline pays each node's slow step once. The slow steps are
// long enough to stand out of the noise of 20 ansible-playbook runs sharing two cores.
func edpmBenchDelay(i, s int) int {
	if s == i%3 {
		return 60 + 20*(i%4)
	}
	return 1
}

// BenchmarkEDPMPipelining deploys a data plane of STACKFLOW_HOSTS (default 20) test hosts through
// stackflow (bridge, workflows, worker running ansible-playbook over SSH; phase 0's three playbooks per
// node, each with an uneven extra duration) and reports:
//   - makespan: from the data plane's workflow start to its last node's success report;
//   - critical path: the longest node's sum of playbook activity times (start to completion), which is
//     what a zero-overhead per-node pipeline would take with every node admitted at once;
//   - barrier: the makespan a barrier per service across all nodes (the usual operator approach) needs
//     with exactly the same measured activity times and zero orchestration overhead;
//   - the headline: overhead (makespan-critical path)/critical path (goal ≤ 5%), what orchestration
//     costs over the work itself;
//   - ratio makespan/barrier, which the staggered slow steps shape by construction (≈0.34 with no
//     overhead): what pipelining buys on such work, not a measure of stackflow.
//
// The barrier figure is computed from this run's own measured step durations (sim.Simulate),
// so both schedules are compared on identical work; it is a lower bound for any real barrier rollout.
func BenchmarkEDPMPipelining(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	hosts := 20
	fmt.Sscanf(os.Getenv("STACKFLOW_HOSTS"), "%d", &hosts)
	st, err := local.Up(ctx, local.Options{Components: []string{local.Kubernetes, local.Temporal, local.OpenStack, local.Hosts}, HostCount: hosts})
	if err != nil {
		b.Fatal(err)
	}
	if len(st.TestHosts) < hosts {
		b.Fatalf("the stack has %d test hosts, %d wanted", len(st.TestHosts), hosts)
	}
	dir := b.TempDir()
	for _, pkg := range []string{"./bridge/cmd/stackflow-bridge", "./worker/cmd/stackflow-worker"} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+string(filepath.Separator), pkg)
		cmd.Dir, cmd.Stdout, cmd.Stderr = st.RepoRoot, os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			b.Fatalf("build %s: %v", pkg, err)
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", st.Kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	kc, dyn := kubernetes.NewForConfigOrDie(cfg), dynamic.NewForConfigOrDie(cfg)
	if err := e2e.EnsureTemporalNamespace(ctx, st, edpmBenchNamespace); err != nil {
		b.Fatal(err)
	}
	tc, err := e2e.Dial(ctx, st, edpmBenchNamespace)
	if err != nil {
		b.Fatal(err)
	}
	defer tc.Close()
	copts, err := st.TemporalOptions(edpmBenchNamespace).ClientOptions()
	if err != nil {
		b.Fatal(err)
	}
	if copts.DataConverter != nil {
		edpmBenchDC = copts.DataConverter
	}
	run := fmt.Sprintf("eb%05x", time.Now().UnixNano()&0xfffff)
	ns := "edpm-" + run
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	key, err := kc.CoreV1().Secrets(local.SystemNamespace).Get(ctx, "edpm-ssh-key", metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := kc.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "edpm-ssh-key"}, Data: key.Data}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}

	stopWorker, err := edpmBenchStart(st, filepath.Join(dir, "stackflow-worker"), filepath.Join(dir, "worker.log"),
		"--namespace", edpmBenchNamespace, "--identity", run+"-worker", "--stop-timeout", "5s")
	if err != nil {
		b.Fatal(err)
	}
	defer stopWorker()
	stopBridge, err := edpmBenchStart(st, filepath.Join(dir, "stackflow-bridge"), filepath.Join(dir, "bridge.log"),
		"--namespace", edpmBenchNamespace, "--identity", run+"-bridge",
		"--kinds", "OpenStackDataPlane,OpenStackDataPlaneRole,OpenStackDataPlaneNode,NovaExternalCompute,OVNMetadataAgent",
		"--leader-election-name", run+"-bridge")
	if err != nil {
		b.Fatal(err)
	}
	defer stopBridge()

	gvrRole := schema.GroupVersionResource{Group: "dataplane.openstack.org", Version: "v1beta1", Resource: "openstackdataplaneroles"}
	gvrNode := schema.GroupVersionResource{Group: "dataplane.openstack.org", Version: "v1beta1", Resource: "openstackdataplanenodes"}
	gvrDP := schema.GroupVersionResource{Group: "dataplane.openstack.org", Version: "v1beta1", Resource: "openstackdataplanes"}
	var created []func()
	defer func() {
		for i := len(created) - 1; i >= 0; i-- {
			created[i]()
		}
		_ = kc.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	}()
	mk := func(gvr schema.GroupVersionResource, obj map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: obj}
		u.SetNamespace(ns)
		out, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
		if err != nil {
			b.Fatalf("create %s: %v", u.GetName(), err)
		}
		created = append(created, func() { edpmBenchDelete(dyn, gvr, ns, out.GetName()) })
		return out
	}

	for i := 0; i < b.N; i++ {
		for _, h := range st.TestHosts[:hosts] {
			_ = os.Remove(filepath.Join(h.Root, "var", "log", "stackflow", "edpm-steps.log"))
		}
		prefix := fmt.Sprintf("r%d", i)
		mk(gvrRole, map[string]any{"apiVersion": "dataplane.openstack.org/v1beta1", "kind": "OpenStackDataPlaneRole",
			"metadata": map[string]any{"name": prefix},
			"spec": map[string]any{"dataPlane": prefix, "preProvisioned": true,
				"nodeTemplate": map[string]any{"ansibleUser": "root", "ansibleSSHPrivateKeySecret": "edpm-ssh-key"}}})
		nodes := make([]*unstructured.Unstructured, hosts)
		for n := 0; n < hosts; n++ {
			h := st.TestHosts[n]
			vars := map[string]any{}
			for s, v := range []string{"edpm_bootstrap_command", "edpm_network_config_command", "edpm_os_command"} {
				vars[v] = fmt.Sprintf("sleep %d", edpmBenchDelay(n, s))
			}
			nodes[n] = mk(gvrNode, map[string]any{"apiVersion": "dataplane.openstack.org/v1beta1", "kind": "OpenStackDataPlaneNode",
				"metadata": map[string]any{"name": fmt.Sprintf("%s-%02d", prefix, n)},
				"spec": map[string]any{"role": prefix, "hostName": h.Name, "ansibleHost": h.Address, "deploy": true,
					"node": map[string]any{"ansibleVars": vars}}})
		}
		dp := mk(gvrDP, map[string]any{"apiVersion": "dataplane.openstack.org/v1beta1", "kind": "OpenStackDataPlane",
			"metadata": map[string]any{"name": prefix},
			"spec":     map[string]any{"roles": []any{prefix}, "deploy": true, "maxConcurrency": int64(hosts), "maxFailedPercentage": int64(100)}})
		if err := edpmBenchWaitReady(ctx, dyn, gvrDP, ns, prefix, 30*time.Minute); err != nil {
			b.Fatalf("%v\n--- worker log ---\n%s", err, edpmBenchTail(filepath.Join(dir, "worker.log"), 40))
		}

		// Measured: per node and step, the playbook's activity time; the data plane's makespan.
		durations := make([][]float64, hosts)
		for n, node := range nodes {
			steps, err := edpmBenchPlaybookTimes(ctx, tc, edpmBenchWorkflowID("OpenStackDataPlaneNode", gvrNode, node))
			if err != nil {
				b.Fatal(err)
			}
			for _, s := range edpmBenchSteps {
				durations[n] = append(durations[n], steps[s].Seconds())
			}
		}
		startT, endT, err := edpmBenchMakespan(ctx, tc, edpmBenchWorkflowID("OpenStackDataPlane", gvrDP, dp), hosts)
		if err != nil {
			b.Fatal(err)
		}
		makespan := endT.Sub(startT).Seconds()
		critical := sim.Simulate(durations, hosts, sim.StrategyPerNode)
		barrier := sim.Simulate(durations, hosts, sim.StrategyBarrier)
		ratio := makespan / barrier
		overhead := (makespan - critical) / critical
		b.ReportMetric(makespan, "makespan-s")
		b.ReportMetric(critical, "critical-path-s")
		b.ReportMetric(barrier, "barrier-s")
		b.ReportMetric(ratio, "pipeline/barrier")
		b.ReportMetric(overhead*100, "overhead-%")
		fmt.Printf("EDPM data plane of %d nodes, 3 playbooks each with uneven extra durations:\n", hosts)
		fmt.Printf("  orchestration overhead over the critical path  %7.1f %% (goal <= 5%%): makespan %.1f s, critical path %.1f s\n", overhead*100, makespan, critical)
		fmt.Printf("  makespan (per-node pipelines, measured)        %7.1f s\n", makespan)
		fmt.Printf("  critical path of activity times                %7.1f s\n", critical)
		// The staggered slow steps make a barrier wait for a slow node at every step by construction
		// (about 0.34 with zero overhead): the ratio says what pipelining buys on such work, not how well
		// stackflow orchestrates; the overhead does.
		fmt.Printf("  barrier per service, same activity times       %7.1f s (ratio pipelined/barrier %.2f, shaped by the staggered delays)\n", barrier, ratio)
		for n := range durations {
			fmt.Printf("  node %02d: %v\n", n, edpmBenchRound(durations[n]))
		}
		for j := len(created) - 1; j >= 0; j-- {
			created[j]()
		}
		created = nil
	}
}

func edpmBenchRound(d []float64) []string {
	out := make([]string, len(d))
	for i, x := range d {
		out[i] = fmt.Sprintf("%.1fs", x)
	}
	return out
}

func edpmBenchWorkflowID(kind string, gvr schema.GroupVersionResource, u *unstructured.Unstructured) string {
	return lifecycle.WorkflowID(lifecycle.ObjectRef{Group: gvr.Group, Version: gvr.Version, Kind: kind, Resource: gvr.Resource,
		Namespace: u.GetNamespace(), Name: u.GetName(), UID: string(u.GetUID())})
}

// edpmBenchPlaybookTimes returns, per step, the activity time (start to completion) of the node
// workflow's successful RunPlaybook.
func edpmBenchPlaybookTimes(ctx context.Context, tc client.Client, wfID string) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	runs, err := e2e.Runs(ctx, tc, wfID)
	if err != nil {
		return nil, err
	}
	// Event IDs are per run; an activity starts and completes in the run that scheduled it.
	for _, events := range runs {
		step := map[int64]string{}
		started := map[int64]time.Time{}
		for _, ev := range events {
			switch {
			case ev.GetActivityTaskScheduledEventAttributes() != nil:
				a := ev.GetActivityTaskScheduledEventAttributes()
				if a.GetActivityType().GetName() == "RunPlaybook" {
					var in ansible.PlaybookInput
					if p := a.GetInput().GetPayloads(); len(p) > 0 {
						_ = edpmBenchDC.FromPayload(p[0], &in)
					}
					step[ev.GetEventId()] = in.Step
				}
			case ev.GetActivityTaskStartedEventAttributes() != nil:
				started[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()] = ev.GetEventTime().AsTime()
			case ev.GetActivityTaskCompletedEventAttributes() != nil:
				id := ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()
				if s, ok := step[id]; ok {
					out[s] = ev.GetEventTime().AsTime().Sub(started[id])
				}
			}
		}
	}
	if len(out) != len(edpmBenchSteps) {
		return nil, fmt.Errorf("%s: playbook times for %v only", wfID, out)
	}
	return out, nil
}

// edpmBenchMakespan is the data plane workflow's (first run's) start and the time of its n-th (last) success report.
func edpmBenchMakespan(ctx context.Context, tc client.Client, wfID string, n int) (time.Time, time.Time, error) {
	var start time.Time
	var done []time.Time
	runs, err := e2e.Runs(ctx, tc, wfID)
	if err != nil {
		return start, start, err
	}
	var events []*historypb.HistoryEvent
	for _, r := range runs {
		events = append(events, r...)
	}
	for _, ev := range events {
		if ev.GetWorkflowExecutionStartedEventAttributes() != nil && start.IsZero() {
			// The first run's start: the data plane continues as new after every reconcile.
			start = ev.GetEventTime().AsTime()
		}
		if s := ev.GetWorkflowExecutionSignaledEventAttributes(); s != nil && s.GetSignalName() == dataplane.SignalEDPMReport {
			var rep dataplane.EDPMReport
			if p := s.GetInput().GetPayloads(); len(p) > 0 {
				_ = edpmBenchDC.FromPayload(p[0], &rep)
			}
			if rep.State == dataplane.EDPMSucceeded {
				done = append(done, ev.GetEventTime().AsTime())
			}
		}
	}
	if len(done) < n {
		return start, start, fmt.Errorf("%s: %d success reports, %d nodes", wfID, len(done), n)
	}
	sort.Slice(done, func(i, j int) bool { return done[i].Before(done[j]) })
	return start, done[len(done)-1], nil
}

func edpmBenchWaitReady(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns, name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		u, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == lifecycle.ConditionReady {
					last = fmt.Sprintf("%v: %v", m["status"], m["message"])
					if m["status"] == "True" {
						return nil
					}
				}
			}
			if phase, _, _ := unstructured.NestedString(u.Object, "status", "phase"); phase == lifecycle.PhaseFailed {
				return fmt.Errorf("data plane %s failed: %s", name, last)
			}
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("data plane %s not Ready within %s: %s", name, timeout, last)
}

func edpmBenchDelete(dyn dynamic.Interface, gvr schema.GroupVersionResource, ns, name string) {
	ctx := context.Background()
	if err := dyn.Resource(gvr).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}); apierrors.IsNotFound(err) {
		return
	}
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		if _, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return
		}
	}
}

// edpmBenchStart starts a stackflow binary with a free metrics port and waits until it is healthy.
func edpmBenchStart(st *local.Stack, path, log string, args ...string) (func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	metrics := ln.Addr().String()
	ln.Close()
	f, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, append([]string{"--metrics-address", metrics}, args...)...)
	cmd.Env = append(append(os.Environ(), "KUBECONFIG="+st.Kubeconfig, "STACKFLOW_KNOWN_HOSTS="+st.Path(local.HostsKnownHosts)),
		st.TemporalEnv(edpmBenchNamespace)...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done); f.Close() }()
	stop := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if resp, err := http.Get("http://" + metrics + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return stop, nil
			}
		}
	}
	stop()
	return nil, fmt.Errorf("%s not healthy: %s", path, edpmBenchTail(log, 20))
}

func edpmBenchTail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
