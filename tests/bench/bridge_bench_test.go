// Package bench measures stackflow against the real local stack. Figures are printed, never asserted:
// they depend on the machine.
package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/tests/e2e"
)

// benchNamespace holds the benchmark's workflows. No worker polls it: a workflow that has started is all
// the benchmark waits for, and nothing else on the shared stack runs them.
const benchNamespace = "stackflow-bench"

// concurrency is how many requests the benchmark (objects created, raw starts) and the bridge (workers)
// have in flight at once.
const concurrency = 16

var osknodes = schema.GroupVersionResource{Group: "kupenstack.io", Version: "v1alpha1", Resource: "openstacknodes"}

// env is the benchmarks' shared environment: the stack, its clients and the stackflow-bridge binary.
type env struct{ *e2e.Env }

var (
	setupOnce sync.Once
	shared    env
	setupErr  error
)

func setup(b *testing.B) env {
	b.Helper()
	setupOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		shared.Env, setupErr = e2e.Setup(ctx, e2e.Config{TemporalNamespace: benchNamespace, RunPrefix: "bb",
			Binaries: []string{e2e.Bridge}, QPS: 1000, Burst: 2000})
	})
	if setupErr != nil {
		b.Fatal(setupErr)
	}
	return shared
}

// bridgeProc is a running stackflow-bridge.
type bridgeProc struct{ *e2e.Proc }

// startBridge runs a bridge for OpenstackNodes with as many workers as the benchmark has requests in
// flight, and waits until it leads and watches the kind.
func (e env) startBridge(b *testing.B, lease string) bridgeProc {
	b.Helper()
	p := bridgeProc{e.StartBridge(b, e2e.BridgeOptions{Identity: lease, Kinds: "OpenstackNode", Workers: concurrency,
		DefaultLeases: true, ExtraArgs: []string{"--log-level", "warn"}})}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if v, _ := p.Metric("stackflow_bridge_served_kinds"); v == 1 {
			return p
		}
		if time.Now().After(deadline) {
			b.Fatalf("bridge not serving after a minute:\n%s", p.Tail(30))
		}
	}
}

// waitSignals waits until the bridge has sent at least n signals in all.
func (p bridgeProc) waitSignals(ctx context.Context, n int) error {
	for {
		v, err := p.Metric("stackflow_bridge_signals_total")
		if err != nil {
			return err
		}
		if v >= float64(n) {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("only %.0f of %d objects signalled: %w", v, n, ctx.Err())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rssMB is the resident memory of the bridge process.
func (p bridgeProc) rssMB() float64 { return p.status("VmRSS") }

// status reads one memory figure (in MB) from /proc/<pid>/status: VmRSS, RssAnon (heap, stacks) or
// RssFile (the binary's pages, shared and reclaimable).
func (p bridgeProc) status(field string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.PID()))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, field+":") {
			kb, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
			return kb / 1024
		}
	}
	return -1
}

// parallel runs fn for 0..n-1 on concurrency goroutines and returns the first error.
func parallel(n, workers int, fn func(i int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// createObjects creates OpenstackNodes prefix-00000… and returns when each create was sent and the objects.
func (e env) createObjects(ctx context.Context, prefix string, from, to int) ([]time.Time, []*unstructured.Unstructured, error) {
	sent := make([]time.Time, to-from)
	objs := make([]*unstructured.Unstructured, to-from)
	err := parallel(to-from, concurrency, func(i int) error {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kupenstack.io/v1alpha1", "kind": "OpenstackNode",
			"metadata": map[string]any{"name": fmt.Sprintf("%s%05d", prefix, from+i), "labels": map[string]any{"stackflow.io/bench": strings.TrimSuffix(prefix, "-")}},
			"spec":     map[string]any{},
		}}
		sent[i] = time.Now()
		out, err := e.Dyn.Resource(osknodes).Create(ctx, u, metav1.CreateOptions{})
		objs[i] = out
		return err
	})
	return sent, objs, err
}

// startTimes returns each object's workflow start time, waiting until every workflow exists.
func (e env) startTimes(ctx context.Context, objs []*unstructured.Unstructured) ([]time.Time, error) {
	out := make([]time.Time, len(objs))
	err := parallel(len(objs), concurrency, func(i int) error {
		u := objs[i]
		id := lifecycle.WorkflowID(e2e.Ref("OpenstackNode", osknodes, u))
		for {
			d, err := e.Temporal.DescribeWorkflowExecution(ctx, id, "")
			if err == nil {
				out[i] = d.WorkflowExecutionInfo.StartTime.AsTime()
				return nil
			}
			var nf *serviceerror.NotFound
			if !errors.As(err, &nf) || ctx.Err() != nil {
				return fmt.Errorf("describe %s: %w", id, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	return out, err
}

// cleanup releases and deletes the benchmark's objects (the bridge must be stopped: no workflow will run
// their teardown) and terminates their workflows.
func (e env) cleanup(prefix string, objs []*unstructured.Unstructured) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r := e.Dyn.Resource(osknodes)
	_ = parallel(len(objs), 4*concurrency, func(i int) error {
		if objs[i] == nil {
			return nil
		}
		_, _ = r.Patch(ctx, objs[i].GetName(), types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		return nil
	})
	_ = r.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "stackflow.io/bench=" + strings.TrimSuffix(prefix, "-")})
	_ = parallel(len(objs), 4*concurrency, func(i int) error {
		if objs[i] == nil {
			return nil
		}
		id := lifecycle.WorkflowID(lifecycle.ObjectRef{Kind: "OpenstackNode", Name: objs[i].GetName(), UID: string(objs[i].GetUID())})
		_ = e.Temporal.TerminateWorkflow(ctx, id, "", "benchmark cleanup")
		return nil
	})
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(p * float64(len(s)-1))
	return s[i]
}

// BenchmarkBridgeBurst: 1000 OpenstackNodes created in a burst while the bridge runs; how long until every
// workflow has started, against 1000 raw SDK starts on the same server, and each object's create→start
// latency.
func BenchmarkBridgeBurst(b *testing.B) {
	const n = 1000
	e := setup(b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	tag := fmt.Sprintf("bb%06x-", time.Now().UnixNano()&0xffffff)

	// Baselines: the same number of workflows started straight through the SDK, as many in flight as the
	// bridge has workers and the same search attributes; once with StartWorkflow, once with SignalWithStart
	// (what the bridge sends).
	var rawIDs []string
	defer func() {
		_ = parallel(len(rawIDs), 4*concurrency, func(i int) error {
			return e.Temporal.TerminateWorkflow(context.Background(), rawIDs[i], "", "benchmark cleanup")
		})
	}()
	rawRun := func(kind string, start func(id string) error) time.Duration {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("bench-%s/%s%05d", kind, tag, i)
		}
		rawIDs = append(rawIDs, ids...)
		t0 := time.Now()
		if err := parallel(n, concurrency, func(i int) error { return start(ids[i]) }); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	raw := rawRun("start", func(id string) error {
		_, err := e.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: lifecycle.WorkflowQueue, TypedSearchAttributes: temporal.NewSearchAttributes(
			lifecycle.SAKind.ValueSet("OpenstackNode"), lifecycle.SAObject.ValueSet(id))}, "OpenstackNode", lifecycle.ObjectRef{Name: id})
		return err
	})
	rawSWS := rawRun("sws", func(id string) error {
		_, err := e.Temporal.SignalWithStartWorkflow(ctx, id, lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1},
			client.StartWorkflowOptions{ID: id, TaskQueue: lifecycle.WorkflowQueue, TypedSearchAttributes: temporal.NewSearchAttributes(
				lifecycle.SAKind.ValueSet("OpenstackNode"), lifecycle.SAObject.ValueSet(id))}, "OpenstackNode", lifecycle.ObjectRef{Name: id})
		return err
	})

	p := e.startBridge(b, "bench-"+tag+"burst")
	var objs []*unstructured.Unstructured
	defer func() { p.Stop(); e.cleanup(tag, objs) }()
	b.ResetTimer()
	sent, objs, err := e.createObjects(ctx, tag, 0, n)
	created := time.Since(sent[0])
	if err != nil {
		b.Fatal(err)
	}
	// Wait on the bridge's own count (cheap) rather than polling Temporal, which would compete with it.
	if err := p.waitSignals(ctx, n); err != nil {
		b.Fatal(err)
	}
	starts, err := e.startTimes(ctx, objs)
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	first, last := slices.MinFunc(sent, time.Time.Compare), slices.MaxFunc(starts, time.Time.Compare)
	total := last.Sub(first)
	lat := make([]time.Duration, n)
	for i := range lat {
		lat[i] = starts[i].Sub(sent[i])
	}
	p50, p99 := percentile(lat, 0.50), percentile(lat, 0.99)
	ratio := total.Seconds() / raw.Seconds()
	fmt.Printf("bridge burst: %d objects created in %s; all workflows started %s after the first create\n", n, created.Round(time.Millisecond), total.Round(time.Millisecond))
	fmt.Printf("raw SDK:      %d workflows started in %s with StartWorkflow, %s with SignalWithStart (%d in flight)\n",
		n, raw.Round(time.Millisecond), rawSWS.Round(time.Millisecond), concurrency)
	fmt.Printf("ratio bridge/raw: %.2f (goal <= 1.2), bridge/raw SignalWithStart %.2f; create->start p50 %s, p99 %s (goal p99 <= 500ms); bridge RSS %.0f MB\n",
		ratio, total.Seconds()/rawSWS.Seconds(), p50.Round(time.Millisecond), p99.Round(time.Millisecond), p.rssMB())
	rpc, _ := p.Metric("stackflow_bridge_signal_rpc_seconds_sum")
	patch, _ := p.Metric("stackflow_bridge_finalizer_patch_seconds_sum")
	fmt.Printf("bridge means per object: SignalWithStart %s, finalizer patch %s\n",
		time.Duration(rpc/n*float64(time.Second)).Round(time.Millisecond), time.Duration(patch/n*float64(time.Second)).Round(time.Millisecond))
	b.ReportMetric(ratio, "bridge/raw")
	b.ReportMetric(float64(p50.Milliseconds()), "p50-ms")
	b.ReportMetric(float64(p99.Milliseconds()), "p99-ms")
	b.ReportMetric(total.Seconds(), "burst-s")
	b.ReportMetric(raw.Seconds(), "raw-s")
}

// BenchmarkBridgeMemory: the bridge's resident memory while it serves 10,000 objects.
func BenchmarkBridgeMemory(b *testing.B) {
	const n = 10000
	e := setup(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	tag := fmt.Sprintf("bm%06x-", time.Now().UnixNano()&0xffffff)
	p := e.startBridge(b, "bench-"+tag+"memory")
	idle := p.rssMB()
	base, _ := p.Metric("stackflow_bridge_signals_total")

	var objs []*unstructured.Unstructured
	defer func() { p.Stop(); e.cleanup(tag, objs) }()
	t0 := time.Now()
	_, objs, err := e.createObjects(ctx, tag, 0, n)
	if err != nil {
		b.Fatal(err)
	}
	created := time.Since(t0)
	peak := 0.0
	for {
		v, err := p.Metric("stackflow_bridge_signals_total")
		if err != nil {
			b.Fatal(err)
		}
		peak = max(peak, p.rssMB())
		if v-base >= n {
			break
		}
		if ctx.Err() != nil {
			b.Fatalf("only %.0f of %d objects signalled", v-base, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	served := time.Since(t0)
	time.Sleep(2 * time.Second)
	settled := p.rssMB()
	heap, _ := p.Metric("go_memstats_heap_inuse_bytes")
	fmt.Printf("bridge memory: idle %.0f MB; %d objects created in %s, all signalled after %s; RSS peak %.0f MB, settled %.0f MB (goal <= 100 MB)\n",
		idle, n, created.Round(time.Millisecond), served.Round(time.Millisecond), peak, settled)
	fmt.Printf("bridge memory with %d objects: anonymous %.0f MB (Go heap in use %.0f MB), binary pages %.0f MB\n",
		n, p.status("RssAnon"), heap/(1<<20), p.status("RssFile"))
	b.ReportMetric(peak, "peak-rss-MB")
	b.ReportMetric(settled, "rss-MB")
	b.ReportMetric(float64(n)/served.Seconds(), "objects/s")
}
