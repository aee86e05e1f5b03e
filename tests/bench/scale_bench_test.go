package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/tests/e2e"
	sim "github.com/stackflow/stackflow/tests/makespan"
	"github.com/stackflow/stackflow/workflows/dataplane"
)

// BenchmarkEDPMScale deploys a data plane of STACKFLOW_SCALE_NODES (default 500) nodes through the real
// bridge, workflows, Temporal and API server, with the Ansible task queue served by a benchmark-only
// worker (tests/bench/simansible) whose playbooks take, per host and step, the time that step took on a
// real test host in this run ±20 % (first, one node is deployed for real with ansible-playbook over SSH
// and its phase-0 steps timed), times STACKFLOW_SCALE_STRETCH (default 1). Every node is admitted at once (maxConcurrency = nodes). It prints:
//   - makespan (the data plane's workflow start → its last node's success report) against the critical
//     path (the longest node's sum of playbook activity times), and the overhead between them (goal
//     ≤ 5 %);
//   - per node: workflow tasks, history events and Temporal actions (runs started, activities and timers
//     scheduled, signals sent and received, search-attribute upserts, updates) of its workflow, and the
//     data plane's own divided by the node count;
//   - status writes per node, beside the real node's (they must not grow with the node count), and the
//     data plane's per node;
//   - the largest status object and the largest history (events and bytes);
//   - the peak resident memory of the bridge, the worker and the simulated Ansible worker.
func BenchmarkEDPMScale(b *testing.B) {
	nodes := 500
	fmt.Sscanf(os.Getenv("STACKFLOW_SCALE_NODES"), "%d", &nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 80*time.Minute)
	defer cancel()
	r := edpmRigUp(ctx, b, 2, "es")
	defer r.close()
	bridge, err := r.startBridge()
	if err != nil {
		b.Fatal(err)
	}
	real, err := r.start("stackflow-worker", "--namespace", edpmBenchNamespace, "--identity", r.run+"-worker-real", "--stop-timeout", "5s")
	if err != nil {
		b.Fatal(err)
	}
	role := func(name string) {
		r.mk(gvrRole, map[string]any{"apiVersion": "dataplane.openstack.org/v1beta1", "kind": "OpenStackDataPlaneRole",
			"metadata": map[string]any{"name": name},
			"spec": map[string]any{"dataPlane": name, "preProvisioned": true,
				"nodeTemplate": map[string]any{"ansibleUser": "root", "ansibleSSHPrivateKeySecret": "edpm-ssh-key"}}})
	}
	node := func(name, roleName, host, addr string) *unstructured.Unstructured {
		return r.mk(gvrNode, map[string]any{"apiVersion": "dataplane.openstack.org/v1beta1", "kind": "OpenStackDataPlaneNode",
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"role": roleName, "hostName": host, "ansibleHost": addr, "deploy": true}})
	}
	dataPlane := func(name string, n int) *unstructured.Unstructured {
		return r.mk(gvrDP, map[string]any{"apiVersion": "dataplane.openstack.org/v1beta1", "kind": "OpenStackDataPlane",
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"roles": []any{name}, "deploy": true, "maxConcurrency": int64(n), "maxFailedPercentage": int64(0)}})
	}

	// Calibration: one node deployed for real.
	h := r.st.TestHosts[0]
	_ = os.Remove(filepath.Join(h.Root, "var", "log", "stackflow", "edpm-steps.log"))
	role("cal")
	calNode := node("cal-0", "cal", h.Name, h.Address)
	dataPlane("cal", 1)
	if err := edpmBenchWaitReady(ctx, r.dyn, gvrDP, r.ns, "cal", 10*time.Minute); err != nil {
		b.Fatalf("%v\n--- worker log ---\n%s", err, edpmBenchTail(real.log, 40))
	}
	measured, err := edpmBenchPlaybookTimes(ctx, r.tc, edpmBenchWorkflowID("OpenStackDataPlaneNode", gvrNode, calNode))
	if err != nil {
		b.Fatal(err)
	}
	calStats, err := scaleHistoryStats(ctx, r.tc, edpmBenchWorkflowID("OpenStackDataPlaneNode", gvrNode, calNode))
	if err != nil {
		b.Fatal(err)
	}
	r.deleteCreated()
	real.stop()
	// STACKFLOW_SCALE_STRETCH multiplies the measured times: the test hosts' steps take seconds, a real
	// host's minutes; the overhead's meaning depends on it.
	stretch := 1.0
	fmt.Sscanf(os.Getenv("STACKFLOW_SCALE_STRETCH"), "%g", &stretch)
	var durs []string
	for _, s := range edpmBenchSteps {
		durs = append(durs, fmt.Sprintf("%s=%.2f", s, stretch*measured[s].Seconds()))
	}

	// The scale run: the real worker without the Ansible queue, the simulated one serving it.
	worker, err := r.start("stackflow-worker", "--namespace", edpmBenchNamespace, "--identity", r.run+"-worker",
		"--queues", strings.Join([]string{lifecycle.WorkflowQueue, lifecycle.KubeQueue, lifecycle.OpenStackQueue}, ","), "--stop-timeout", "5s")
	if err != nil {
		b.Fatal(err)
	}
	simw, err := r.start("simansible", "--namespace", edpmBenchNamespace, "--identity", r.run+"-simansible", "--durations", strings.Join(durs, ","))
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("s%d", i)
		role(name)
		objs := make([]*unstructured.Unstructured, nodes)
		speedBefore := machineSpeed(r.st.RepoRoot)
		cpu := startCPUSampler()
		created := time.Now()
		for n := range objs {
			objs[n] = node(fmt.Sprintf("%s-%03d", name, n), name, fmt.Sprintf("sim-%03d", n), fmt.Sprintf("192.0.2.%d", 1+n%250))
		}
		dp := dataPlane(name, nodes)
		fmt.Printf("created %d nodes in %.1f s\n", nodes, time.Since(created).Seconds())
		if err := edpmBenchWaitReady(ctx, r.dyn, gvrDP, r.ns, name, 60*time.Minute); err != nil {
			b.Fatalf("%v\n--- worker log ---\n%s", err, edpmBenchTail(worker.log, 40))
		}
		ready := time.Since(created)
		cpu.close()
		speedAfter := machineSpeed(r.st.RepoRoot)
		dpID := edpmBenchWorkflowID("OpenStackDataPlane", gvrDP, dp)
		startT, endT, err := edpmBenchMakespan(ctx, r.tc, dpID, nodes)
		if err != nil {
			b.Fatal(err)
		}
		reports, err := edpmBenchSuccessReports(ctx, r.tc, dpID)
		if err != nil {
			b.Fatal(err)
		}
		durations := make([][]float64, nodes)
		var total scaleStats
		var mean, lastNode scaleTimeline
		lastName, lastID := "", ""
		for n, o := range objs {
			id := edpmBenchWorkflowID("OpenStackDataPlaneNode", gvrNode, o)
			tl, err := scaleNodeTimeline(ctx, r.tc, id, startT, reports[o.GetName()], nil)
			if err != nil {
				b.Fatal(err)
			}
			mean.add(tl)
			if reports[o.GetName()].Equal(endT) {
				lastNode, lastName, lastID = tl, o.GetName(), id
			}
			steps, err := edpmBenchPlaybookTimes(ctx, r.tc, id)
			if err != nil {
				b.Fatal(err)
			}
			for _, s := range edpmBenchSteps {
				durations[n] = append(durations[n], steps[s].Seconds())
			}
			st, err := scaleHistoryStats(ctx, r.tc, id)
			if err != nil {
				b.Fatal(err)
			}
			total.add(st)
		}
		if path := os.Getenv("STACKFLOW_SCALE_TRACE"); path != "" && lastID != "" {
			// The last node's events up to its first playbook, for reading where its start-up went.
			f, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			_, err = scaleNodeTimeline(ctx, r.tc, lastID, startT, reports[lastName], f)
			f.Close()
			if err != nil {
				b.Fatal(err)
			}
			// The data plane's events until that node's first playbook: when it saw the requests and sent
			// the grants.
			if err := scaleTraceUntil(ctx, r.tc, dpID, startT, startT.Add(lastNode.startup), path+".dataplane"); err != nil {
				b.Fatal(err)
			}
		}
		dpStats, err := scaleHistoryStats(ctx, r.tc, dpID)
		if err != nil {
			b.Fatal(err)
		}
		largestStatus, largestName := 0, ""
		for _, gvrName := range []struct {
			what string
			list func() (*unstructured.UnstructuredList, error)
		}{
			{"node", func() (*unstructured.UnstructuredList, error) {
				return r.dyn.Resource(gvrNode).Namespace(r.ns).List(ctx, metav1.ListOptions{})
			}},
			{"data plane", func() (*unstructured.UnstructuredList, error) {
				return r.dyn.Resource(gvrDP).Namespace(r.ns).List(ctx, metav1.ListOptions{})
			}},
		} {
			l, err := gvrName.list()
			if err != nil {
				b.Fatal(err)
			}
			for _, u := range l.Items {
				raw, _ := json.Marshal(u.Object["status"])
				if len(raw) > largestStatus {
					largestStatus, largestName = len(raw), gvrName.what+" "+u.GetName()
				}
			}
		}
		makespan := endT.Sub(startT).Seconds()
		critical := sim.Simulate(durations, nodes, sim.StrategyPerNode)
		overhead := (makespan - critical) / critical
		per := func(x int) float64 { return float64(x) / float64(nodes) }
		b.ReportMetric(makespan, "makespan-s")
		b.ReportMetric(critical, "critical-path-s")
		b.ReportMetric(overhead*100, "overhead-%")
		b.ReportMetric(per(total.events), "events/node")
		b.ReportMetric(per(total.statusWrites), "status-writes/node")
		fmt.Printf("EDPM data plane of %d nodes, phase 0 (%s s: measured on a real host × %g, ±20 %% per node), all admitted at once:\n", nodes, strings.Join(durs, ", "), stretch)
		fmt.Printf("  orchestration overhead over the critical path  %8.1f %% (goal <= 5%%): makespan %.1f s, critical path %.1f s\n", overhead*100, makespan, critical)
		fmt.Printf("  the last node (%s)                       %s\n", lastName, lastNode)
		fmt.Printf("  mean node                                      %s\n", scaleTimeline{
			startup: mean.startup / time.Duration(nodes), queued: mean.queued / time.Duration(nodes), between: mean.between / time.Duration(nodes),
			running: mean.running / time.Duration(nodes), tail: mean.tail / time.Duration(nodes)})
		fmt.Printf("  start-up work per node (before its first playbook) %4.1f events, %.1f workflow tasks after the data plane's start; %.1f events, %.1f tasks before it\n",
			per(mean.eventsStartup), per(mean.tasksStartup), per(mean.eventsBefore), per(mean.tasksBefore))
		fmt.Printf("  CPU in the start-up (data plane start → mean node's first playbook) %s\n",
			cpu.window(startT, startT.Add(mean.startup/time.Duration(nodes)), 6))
		fmt.Printf("  CPU over the makespan                          %s\n", cpu.window(startT, endT, 6))
		fmt.Printf("  the machine's speed (speed.sh, a fixed one-core workload) %.2f s before, %.2f s after (CPU figures compare at equal speed)\n",
			speedBefore, speedAfter)
		fmt.Printf("  objects created → data plane Ready             %8.1f s\n", ready.Seconds())
		fmt.Printf("  per node (its workflow)                        %8.1f workflow tasks (%.2f timed out), %.1f history events, %.1f actions, %.1f runs\n",
			per(total.tasks), per(total.taskTimeouts), per(total.events), per(total.actions), per(total.runs))
		fmt.Printf("  per node (the data plane's workflow / nodes)   %8.2f workflow tasks, %.2f history events, %.2f actions (%d runs)\n",
			per(dpStats.tasks), per(dpStats.events), per(dpStats.actions), dpStats.runs)
		fmt.Printf("  status writes per node                         %8.1f (one real node alone: %d); data plane's per node %.2f\n",
			per(total.statusWrites), calStats.statusWrites, per(dpStats.statusWrites))
		fmt.Printf("  largest status object                          %8d bytes (%s)\n", largestStatus, largestName)
		fmt.Printf("  largest history (one run)                      %8d events, %d bytes (node max; data plane %d events, %d bytes)\n",
			total.maxRunEvents, total.maxRunBytes, dpStats.maxRunEvents, dpStats.maxRunBytes)
		fmt.Printf("  peak resident memory                           %8.0f MB bridge, %.0f MB worker, %.0f MB simulated Ansible worker\n",
			bridge.memMB("VmHWM"), worker.memMB("VmHWM"), simw.memMB("VmHWM"))
		deleted := time.Now()
		r.deleteCreated()
		fmt.Printf("  deleted (all %d nodes' teardowns)               %8.1f s\n", nodes, time.Since(deleted).Seconds())
	}
}

// scaleStats counts what a workflow (all its runs) cost Temporal.
type scaleStats struct {
	runs, tasks, events, actions, statusWrites int
	taskTimeouts                               int // workflow tasks that timed out (a busy worker's sticky queue)
	maxRunEvents, maxRunBytes                  int
}

func (s *scaleStats) add(o scaleStats) {
	s.runs += o.runs
	s.tasks += o.tasks
	s.events += o.events
	s.actions += o.actions
	s.statusWrites += o.statusWrites
	s.taskTimeouts += o.taskTimeouts
	s.maxRunEvents = max(s.maxRunEvents, o.maxRunEvents)
	s.maxRunBytes = max(s.maxRunBytes, o.maxRunBytes)
}

// scaleHistoryStats reads every run of a workflow. Actions are counted as Temporal Cloud bills them,
// approximately: each run started, activity and timer scheduled, signal received or sent, search
// attribute upsert and update accepted.
func scaleHistoryStats(ctx context.Context, tc client.Client, wfID string) (scaleStats, error) {
	var s scaleStats
	runs, err := e2e.Runs(ctx, tc, wfID)
	if err != nil {
		return s, err
	}
	for _, events := range runs {
		s.runs++
		bytes := 0
		for _, ev := range events {
			bytes += proto.Size(ev)
			s.events++
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, enumspb.EVENT_TYPE_TIMER_STARTED,
				enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED,
				enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
				s.actions++
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
				s.actions++
				if ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == "PatchStatus" {
					s.statusWrites++
				}
			case enumspb.EVENT_TYPE_MARKER_RECORDED:
				// A local activity (status writes since local-status-writes): counted as an action each,
				// though Temporal Cloud bills those of one workflow task as one.
				if name, ok := localActivityType(ev.GetMarkerRecordedEventAttributes()); ok {
					s.actions++
					if name == "PatchStatus" {
						s.statusWrites++
					}
				}
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
				s.tasks++
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
				s.taskTimeouts++
			}
		}
		s.maxRunEvents = max(s.maxRunEvents, len(events))
		s.maxRunBytes = max(s.maxRunBytes, bytes)
	}
	return s, nil
}

// localActivityType is the activity type a local activity's marker records; ok is false for other markers.
func localActivityType(m *historypb.MarkerRecordedEventAttributes) (string, bool) {
	if m.GetMarkerName() != "LocalActivity" {
		return "", false
	}
	var data struct {
		ActivityType string
	}
	if p := m.GetDetails()["data"].GetPayloads(); len(p) > 0 {
		_ = edpmBenchDC.FromPayload(p[0], &data)
	}
	return data.ActivityType, true
}

// scaleTimeline is where one node's time between the data plane's start and its success report went.
type scaleTimeline struct {
	startup time.Duration // data plane start → the node's first playbook scheduled
	queued  time.Duration // playbooks scheduled → started, summed
	between time.Duration // a playbook completed → the next scheduled, summed
	running time.Duration // playbooks started → completed, summed (the simulated work)
	tail    time.Duration // last playbook completed → its success report recorded by the data plane
	// Events and workflow tasks (completed) of the node's workflow before its first playbook was
	// scheduled, split at the data plane's start: the start-up's work.
	eventsBefore, eventsStartup, tasksBefore, tasksStartup int
}

func (t *scaleTimeline) add(o scaleTimeline) {
	t.startup += o.startup
	t.queued += o.queued
	t.between += o.between
	t.running += o.running
	t.tail += o.tail
	t.eventsBefore += o.eventsBefore
	t.eventsStartup += o.eventsStartup
	t.tasksBefore += o.tasksBefore
	t.tasksStartup += o.tasksStartup
}

func (t scaleTimeline) total() time.Duration {
	return t.startup + t.queued + t.between + t.running + t.tail
}

func (t scaleTimeline) String() string {
	return fmt.Sprintf("%.1f s = start-up %.1f + queued %.1f + between steps %.1f + playbooks %.1f + report %.1f",
		t.total().Seconds(), t.startup.Seconds(), t.queued.Seconds(), t.between.Seconds(), t.running.Seconds(), t.tail.Seconds())
}

// scaleNodeTimeline splits a node's path from the data plane's start (dpStart) to its success report
// (done) along its playbook activities.
// When trace is not nil, the events before the first playbook are written to it, one per line, with
// their time since dpStart.
func scaleNodeTimeline(ctx context.Context, tc client.Client, wfID string, dpStart, done time.Time, trace io.Writer) (scaleTimeline, error) {
	var t scaleTimeline
	runs, err := e2e.Runs(ctx, tc, wfID)
	if err != nil {
		return t, err
	}
	var first, last time.Time
	for _, events := range runs {
		playbook := map[int64]time.Time{}
		started := map[int64]time.Time{}
		for _, ev := range events {
			at := ev.GetEventTime().AsTime()
			if first.IsZero() {
				task := ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
				if at.Before(dpStart) {
					t.eventsBefore++
					if task {
						t.tasksBefore++
					}
				} else {
					t.eventsStartup++
					if task {
						t.tasksStartup++
					}
				}
				if trace != nil {
					traceEvent(trace, ev, dpStart)
				}
			}
			switch {
			case ev.GetActivityTaskScheduledEventAttributes() != nil:
				if ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() != "RunPlaybook" {
					continue
				}
				playbook[ev.GetEventId()] = at
				if first.IsZero() {
					first = at
				} else {
					t.between += at.Sub(last)
				}
			case ev.GetActivityTaskStartedEventAttributes() != nil:
				id := ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()
				if s, ok := playbook[id]; ok {
					started[id] = at
					t.queued += at.Sub(s)
				}
			case ev.GetActivityTaskCompletedEventAttributes() != nil:
				id := ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()
				if s, ok := started[id]; ok {
					t.running += at.Sub(s)
					last = at
				}
			}
		}
	}
	if first.IsZero() || last.IsZero() {
		return t, fmt.Errorf("%s: no completed playbook", wfID)
	}
	t.startup, t.tail = first.Sub(dpStart), done.Sub(last)
	return t, nil
}

// scaleTraceUntil writes a workflow's events up to until, one per line with their time since dpStart,
// to path.
func scaleTraceUntil(ctx context.Context, tc client.Client, wfID string, dpStart, until time.Time, path string) error {
	runs, err := e2e.Runs(ctx, tc, wfID)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
write:
	for _, events := range runs {
		for _, ev := range events {
			if ev.GetEventTime().AsTime().After(until) {
				break write
			}
			traceEvent(f, ev, dpStart)
		}
	}
	return f.Close()
}

// traceEvent writes one trace line: the event's time since dpStart, its ID, type and detail.
func traceEvent(w io.Writer, ev *historypb.HistoryEvent, dpStart time.Time) {
	fmt.Fprintf(w, "%+8.3f %4d %s %s\n", ev.GetEventTime().AsTime().Sub(dpStart).Seconds(), ev.GetEventId(), ev.GetEventType(), eventDetail(ev))
}

// eventDetail names what an event is about: its activity type, signal or marker.
func eventDetail(ev *historypb.HistoryEvent) string {
	switch {
	case ev.GetActivityTaskScheduledEventAttributes() != nil:
		return ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
	case ev.GetWorkflowExecutionSignaledEventAttributes() != nil:
		return ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName()
	case ev.GetSignalExternalWorkflowExecutionInitiatedEventAttributes() != nil:
		return ev.GetSignalExternalWorkflowExecutionInitiatedEventAttributes().GetSignalName()
	case ev.GetMarkerRecordedEventAttributes() != nil:
		if name, ok := localActivityType(ev.GetMarkerRecordedEventAttributes()); ok {
			return "local " + name
		}
		return ev.GetMarkerRecordedEventAttributes().GetMarkerName()
	}
	return ""
}

// edpmBenchSuccessReports is when the data plane recorded each node's (last) success report.
func edpmBenchSuccessReports(ctx context.Context, tc client.Client, wfID string) (map[string]time.Time, error) {
	runs, err := e2e.Runs(ctx, tc, wfID)
	if err != nil {
		return nil, err
	}
	out := map[string]time.Time{}
	for _, events := range runs {
		for _, ev := range events {
			s := ev.GetWorkflowExecutionSignaledEventAttributes()
			if s == nil || s.GetSignalName() != dataplane.SignalEDPMReport {
				continue
			}
			var rep dataplane.EDPMReport
			if p := s.GetInput().GetPayloads(); len(p) > 0 {
				_ = edpmBenchDC.FromPayload(p[0], &rep)
			}
			if rep.State == dataplane.EDPMSucceeded {
				out[rep.Node] = ev.GetEventTime().AsTime()
			}
		}
	}
	return out, nil
}
