package bridge

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/tests/e2e"
)

// A new kwok Node gets its OpenstackNode through the Node workflow; the OpenstackNode's own workflow
// reports it in `kubectl get osknodes`; deleting the Node removes the OpenstackNode through teardown.
func TestKwokNodeGetsOpenstackNodeAndTeardownRemovesIt(t *testing.T) {
	startWorker(t, env.Run+"-w-node")
	startBridge(t, env.Run+"-b-node", "e2e-"+env.Run+"-node")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	name := env.Run + "-node-0"
	t.Cleanup(func() { env.ForceDelete(osknodes, "", name); env.ForceDelete(nodes, "", name) })
	node, err := env.Kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        name,
		Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
		Labels:      map[string]string{"openstack-compute-node": "enabled", "type": "kwok"},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)

	// The Node's workflow creates the OpenstackNode; the OpenstackNode's workflow writes its status.
	var osk *unstructured.Unstructured
	require.Eventually(t, func() bool {
		osk, err = env.Dyn.Resource(osknodes).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		status, _, _ := unstructured.NestedString(osk.Object, "status", "status")
		roles, _, _ := unstructured.NestedStringSlice(osk.Object, "status", "roles")
		roleNames, _, _ := unstructured.NestedString(osk.Object, "status", "roleNames")
		observed, _, _ := unstructured.NestedInt64(osk.Object, "status", "observedGeneration")
		return status == "Ready" && slices.Equal(roles, []string{"compute"}) && roleNames == "compute" && observed == osk.GetGeneration()
	}, 90*time.Second, 250*time.Millisecond, "OpenstackNode %s never became Ready with role compute: %v", name, osk)
	wfID, _, _ := unstructured.NestedString(osk.Object, "status", "workflowID")
	assert.Equal(t, lifecycle.WorkflowID(e2e.Ref("OpenstackNode", osknodes, osk)), wfID)
	assert.Contains(t, osk.GetFinalizers(), lifecycle.Finalizer, "the bridge adds its finalizer to the OpenstackNode")

	node, err = env.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Contains(t, node.Finalizers, lifecycle.Finalizer, "the bridge adds its finalizer to the Node")
	nodeWF := lifecycle.WorkflowID(lifecycle.ObjectRef{Version: "v1", Kind: "Node", Resource: "nodes", Name: name, UID: string(node.UID)})
	status, err := env.WorkflowStatus(ctx, nodeWF)
	require.NoError(t, err)
	assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, status, "the Node workflow lives as long as the Node")

	// The bridge tells the object which workflow it started (Events of cluster-scoped objects land in default).
	require.Eventually(t, func() bool {
		evs, err := env.Kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=WorkflowStarted"})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Source.Component == "stackflow-bridge" && strings.Contains(e.Message, nodeWF) {
				return true
			}
		}
		return false
	}, 30*time.Second, 250*time.Millisecond, "no WorkflowStarted event naming %s", nodeWF)

	// kubectl shows the printer columns the design promises.
	kubectl, err := env.Stack.Kubectl()
	require.NoError(t, err)
	out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", env.Stack.Kubeconfig, "get", "osknodes", name).CombinedOutput()
	require.NoError(t, err, "%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Len(t, lines, 2, "%s", out)
	assert.Equal(t, []string{"NAME", "STATUS", "ROLES", "PROFILE", "AGE"}, strings.Fields(lines[0]))
	row := strings.Fields(lines[1])
	require.GreaterOrEqual(t, len(row), 3, "%s", out)
	assert.Equal(t, name, row[0])
	assert.Equal(t, "Ready", row[1])
	assert.Contains(t, row[2], "compute")

	// Deleting the Node tears down its OpenstackNode first, then releases the Node.
	require.NoError(t, env.Kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, errN := env.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		_, errO := env.Dyn.Resource(osknodes).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(errN) && apierrors.IsNotFound(errO)
	}, 90*time.Second, 250*time.Millisecond, "Node and OpenstackNode %s not both gone", name)
	for _, id := range []string{nodeWF, wfID} {
		require.Eventually(t, func() bool {
			s, err := env.WorkflowStatus(ctx, id)
			return err == nil && s == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
		}, 30*time.Second, 250*time.Millisecond, "workflow %s did not complete after teardown", id)
	}
}

// 100 OpenstackNodes created in a burst while the bridge crashes (kill -9) and starts again: every object
// gets exactly one workflow, named in its status, which acted on its generation.
func TestBurstAcrossBridgeCrashOneWorkflowPerObject(t *testing.T) {
	const total = 100
	startWorker(t, env.Run+"-w-burst")
	b := startBridge(t, env.Run+"-b-burst", "e2e-"+env.Run+"-burst")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	prefix := env.Run + "-burst-"
	names := make([]string, total)
	for i := range names {
		names[i] = fmt.Sprintf("%s%03d", prefix, i)
	}
	t.Cleanup(func() {
		if t.Failed() {
			env.ForceDelete(osknodes, "", names...)
		}
	})

	var created atomic.Int32
	errs := make(chan error, total)
	var wg sync.WaitGroup
	next := make(chan string)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range next {
				if _, err := env.Dyn.Resource(osknodes).Create(ctx, newOpenstackNode(n, map[string]any{}), metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("create %s: %w", n, err)
				}
				created.Add(1)
				time.Sleep(20 * time.Millisecond) // a burst that lasts long enough to crash inside it
			}
		}()
	}
	go func() {
		for _, n := range names {
			next <- n
		}
		close(next)
	}()
	require.Eventually(t, func() bool { return created.Load() >= total/2 }, time.Minute, 10*time.Millisecond)
	b.Kill9()
	b.Start()
	t.Logf("bridge restarted after %d of %d objects were created", created.Load(), total)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	// Every object: status names its workflow and the generation it acted on.
	want := map[string]string{}
	require.Eventually(t, func() bool {
		list, err := env.Dyn.Resource(osknodes).List(ctx, metav1.ListOptions{LabelSelector: "stackflow.io/test-run=" + env.Run})
		if err != nil {
			return false
		}
		done := 0
		for i := range list.Items {
			u := &list.Items[i]
			if !strings.HasPrefix(u.GetName(), prefix) {
				continue
			}
			want[u.GetName()] = lifecycle.WorkflowID(e2e.Ref("OpenstackNode", osknodes, u))
			id, _, _ := unstructured.NestedString(u.Object, "status", "workflowID")
			observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
			if id == want[u.GetName()] && observed == u.GetGeneration() && slices.Contains(u.GetFinalizers(), lifecycle.Finalizer) {
				done++
			}
		}
		return done == total
	}, 5*time.Minute, time.Second, "not every OpenstackNode reports its workflow and observed generation")

	// Visibility: exactly one workflow, and one run of it, per object.
	var runs map[string][]string
	require.Eventually(t, func() bool {
		var err error
		runs, err = env.Executions(ctx, "OpenstackNode/"+prefix)
		return err == nil && len(runs) == total
	}, time.Minute, time.Second, "visibility lists %d workflows for %d objects", len(runs), total)
	for name, id := range want {
		assert.Len(t, runs[id], 1, "runs of %s's workflow %s", name, id)
	}
	signals, err := b.Metric("stackflow_bridge_signals_total", "kind", "OpenstackNode")
	require.NoError(t, err)
	assert.GreaterOrEqual(t, signals, float64(total/2), "the restarted bridge signalled the objects created after the crash")

	// Deleting them all goes through their workflows, which remove the finalizers.
	deleteAndWait(t, osknodes, names, 3*time.Minute)
}

// A spec edit reaches the same workflow (its chain of runs) as generation N+1; observedGeneration follows.
func TestSpecEditSignalsSameWorkflow(t *testing.T) {
	startWorker(t, env.Run+"-w-edit")
	startBridge(t, env.Run+"-b-edit", "e2e-"+env.Run+"-edit")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	name := env.Run + "-edit-0"
	t.Cleanup(func() { env.ForceDelete(osknodes, "", name) })

	u, err := env.Dyn.Resource(osknodes).Create(ctx, newOpenstackNode(name, map[string]any{"type": "control"}), metav1.CreateOptions{})
	require.NoError(t, err)
	id := lifecycle.WorkflowID(e2e.Ref("OpenstackNode", osknodes, u))
	waitObserved(t, ctx, name, 1, "control")
	d, err := env.Temporal.DescribeWorkflowExecution(ctx, id, "")
	require.NoError(t, err)
	// A settled run continues as new, so runs change; the chain (its first run) must not.
	chain := d.WorkflowExecutionInfo.GetFirstRunId()
	require.NotEmpty(t, chain)

	u, err = env.Dyn.Resource(osknodes).Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"type":"compute"}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	require.Equal(t, int64(2), u.GetGeneration())
	waitObserved(t, ctx, name, 2, "compute")

	d, err = env.Temporal.DescribeWorkflowExecution(ctx, id, "")
	require.NoError(t, err)
	assert.Equal(t, chain, d.WorkflowExecutionInfo.GetFirstRunId(), "the edit went to the running workflow, not a new chain of runs")
	assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, d.WorkflowExecutionInfo.Status)
	var st lifecycle.Status
	v, err := env.Temporal.QueryWorkflow(ctx, id, "", lifecycle.QueryStatus)
	require.NoError(t, err)
	require.NoError(t, v.Get(&st))
	assert.Equal(t, int64(2), st.DesiredGeneration)
	assert.Equal(t, int64(2), st.ObservedGeneration)

	deleteAndWait(t, osknodes, []string{name}, time.Minute)
}

// waitObserved waits until the OpenstackNode reports generation gen acted on, with role as its only role.
func waitObserved(t *testing.T, ctx context.Context, name string, gen int64, role string) {
	t.Helper()
	var last map[string]any
	require.Eventually(t, func() bool {
		u, err := env.Dyn.Resource(osknodes).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		last, _, _ = unstructured.NestedMap(u.Object, "status")
		observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		roles, _, _ := unstructured.NestedStringSlice(u.Object, "status", "roles")
		return observed == gen && slices.Equal(roles, []string{role})
	}, time.Minute, 200*time.Millisecond, "%s never observed generation %d with role %s; status %v", name, gen, role, last)
}

// The worker is killed with -9 while a workflow waits inside its teardown; once a worker runs again the
// same run completes.
func TestWorkerCrashMidWorkflowCompletesAfterRestart(t *testing.T) {
	w := startWorker(t, env.Run+"-w-crash")
	startBridge(t, env.Run+"-b-crash", "e2e-"+env.Run+"-crash")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	name := env.Run + "-crash-0"
	// The Node's teardown waits for its held OpenstackNode: the workflow is certainly in the middle of
	// its run when the worker dies.
	nodeWF := deleteNodeHeld(t, ctx, name)
	d, err := env.Temporal.DescribeWorkflowExecution(ctx, nodeWF, "")
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, d.WorkflowExecutionInfo.Status)
	runID := d.WorkflowExecutionInfo.Execution.RunId

	w.Kill9()
	_, err = env.Dyn.Resource(osknodes).Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	// With no worker nothing finishes the teardown: the Node stays.
	time.Sleep(3 * time.Second)
	_, err = env.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err, "the Node went away without a worker")

	w.Start()
	require.Eventually(t, func() bool {
		_, err := env.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 2*time.Minute, 250*time.Millisecond, "the Node was not released after the worker restarted")
	require.Eventually(t, func() bool {
		d, err := env.Temporal.DescribeWorkflowExecution(ctx, nodeWF, "")
		return err == nil && d.WorkflowExecutionInfo.Status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED &&
			d.WorkflowExecutionInfo.Execution.RunId == runID
	}, 30*time.Second, 250*time.Millisecond, "the run that was interrupted did not complete")
}

// Someone takes stackflow's finalizer off a Node by hand while the Node's teardown waits, with no
// deadline, for its OpenstackNode to go (held here by a finalizer of the test's). The Node leaves the API
// server; the bridge tells its workflow, which lets go at once instead of waiting for ever: the run
// completes and the OpenstackNode it was waiting for stays as it is.
func TestObjectRemovedByHandLetsItsWorkflowGo(t *testing.T) {
	startWorker(t, env.Run+"-w-gone")
	startBridge(t, env.Run+"-b-gone", "e2e-"+env.Run+"-gone")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	name := env.Run + "-gone-0"
	nodeWF := deleteNodeHeld(t, ctx, name)
	// Its teardown waits: the run is still open a few seconds on.
	time.Sleep(3 * time.Second)
	d, err := env.Temporal.DescribeWorkflowExecution(ctx, nodeWF, "")
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, d.WorkflowExecutionInfo.Status, "the Node's teardown waits for its OpenstackNode")

	_, err = env.Kube.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := env.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 30*time.Second, 200*time.Millisecond, "the Node did not leave the API server")
	var status enumspb.WorkflowExecutionStatus
	require.Eventually(t, func() bool {
		d, err := env.Temporal.DescribeWorkflowExecution(ctx, nodeWF, "")
		if err == nil {
			status = d.WorkflowExecutionInfo.Status
		}
		return status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
	}, 30*time.Second, 250*time.Millisecond, "the Node's workflow still waits for an object that is gone (status %s)", &status)

	osk, err := env.Dyn.Resource(osknodes).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err, "what the workflow was waiting on stays as it is")
	assert.Equal(t, []string{heldBy}, osk.GetFinalizers())
	_, err = env.Dyn.Resource(osknodes).Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	require.NoError(t, err)
}

// Two bridge replicas: one leads and acts, the other does nothing; still one workflow per object. When the
// leader dies, the other takes over.
func TestTwoReplicasOneLeaderActs(t *testing.T) {
	startWorker(t, env.Run+"-w-ha")
	lease := "e2e-" + env.Run + "-ha"
	replicas := []*e2e.Proc{startBridge(t, env.Run+"-b-ha-a", lease), startBridge(t, env.Run+"-b-ha-b", lease)}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	leader := func() (lead, standby *e2e.Proc) {
		var leaders []*e2e.Proc
		for _, p := range replicas {
			if !p.Running() {
				continue
			}
			if v, err := p.Metric("stackflow_bridge_leader"); err == nil && v == 1 {
				leaders = append(leaders, p)
			} else {
				standby = p
			}
		}
		if len(leaders) != 1 {
			return nil, nil
		}
		return leaders[0], standby
	}
	var lead, standby *e2e.Proc
	require.Eventually(t, func() bool { lead, standby = leader(); return lead != nil && standby != nil },
		30*time.Second, 200*time.Millisecond, "not exactly one leader among two replicas")
	t.Logf("leader %s, standby %s", lead.Name(), standby.Name())

	prefix := env.Run + "-ha-"
	var names []string
	create := func(from, to int) {
		for i := from; i < to; i++ {
			n := fmt.Sprintf("%s%03d", prefix, i)
			names = append(names, n)
			_, err := env.Dyn.Resource(osknodes).Create(ctx, newOpenstackNode(n, map[string]any{}), metav1.CreateOptions{})
			require.NoError(t, err)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			env.ForceDelete(osknodes, "", names...)
		}
	})
	served := func() bool {
		for _, n := range names {
			u, err := env.Dyn.Resource(osknodes).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false
			}
			id, _, _ := unstructured.NestedString(u.Object, "status", "workflowID")
			observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
			if id != lifecycle.WorkflowID(e2e.Ref("OpenstackNode", osknodes, u)) || observed != 1 {
				return false
			}
		}
		return true
	}

	create(0, 30)
	require.Eventually(t, served, 2*time.Minute, 500*time.Millisecond, "objects not served with two replicas")
	leadSignals, err := lead.Metric("stackflow_bridge_signals_total", "kind", "OpenstackNode")
	require.NoError(t, err)
	assert.GreaterOrEqual(t, leadSignals, 30.0, "the leader signalled every object")
	idle, err := standby.Metric("stackflow_bridge_signals_total")
	require.NoError(t, err)
	assert.Zero(t, idle, "the standby sent signals")
	seen, err := standby.Metric("stackflow_bridge_events_total")
	require.NoError(t, err)
	assert.Zero(t, seen, "the standby watched objects")

	// The leader dies without releasing its Lease; the standby takes over once the Lease expires.
	lead.Kill9()
	require.Eventually(t, func() bool { v, err := standby.Metric("stackflow_bridge_leader"); return err == nil && v == 1 },
		30*time.Second, 200*time.Millisecond, "the standby did not take over")
	create(30, 40)
	require.Eventually(t, served, 2*time.Minute, 500*time.Millisecond, "objects not served after the takeover")

	var runs map[string][]string
	require.Eventually(t, func() bool {
		runs, err = env.Executions(ctx, "OpenstackNode/"+prefix)
		return err == nil && len(runs) == len(names)
	}, time.Minute, time.Second, "visibility lists %d workflows for %d objects", len(runs), len(names))
	for id, r := range runs {
		assert.Len(t, r, 1, "runs of %s", id)
	}
	deleteAndWait(t, osknodes, names, 2*time.Minute)
}
