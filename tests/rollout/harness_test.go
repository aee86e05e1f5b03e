package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stackflow/stackflow/activities/helm"
	"github.com/stackflow/stackflow/activities/kube"
	kupenstackv1alpha1 "github.com/stackflow/stackflow/api/kupenstack/v1alpha1"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/tests/e2e"
	"github.com/stackflow/stackflow/workflows/controlplane"
)

// servedKinds are the kinds the rollout tests' bridge serves. Nodes are left out: their workflows would
// put finalizers on the shared kwok Nodes; the KupenstackConfiguration creates OpenstackNodes itself.
const servedKinds = "OpenstackNode,KupenstackConfiguration,OpenStackCloudConfigurationProfile"

// startBridge runs a bridge for kinds on a lease of the run's own, with short leases.
func startBridge(t *testing.T, identity, kinds string) *e2e.Proc {
	return env.StartBridge(t, e2e.BridgeOptions{Identity: identity, Kinds: kinds, Lease: env.Run + "-" + identity})
}

// startWorker runs a worker whose Helm activities cache charts in helmCache.
func startWorker(t *testing.T, identity, helmCache string) *e2e.Proc {
	return env.StartWorker(t, e2e.WorkerOptions{Identity: identity, Env: []string{"STACKFLOW_HELM_CACHE=" + helmCache}})
}

var (
	gvrConfig  = schema.GroupVersionResource{Group: "kupenstack.io", Version: "v1alpha1", Resource: "kupenstackconfigurations"}
	gvrProfile = schema.GroupVersionResource{Group: "kupenstack.io", Version: "v1alpha1", Resource: "openstackcloudconfigurationprofiles"}
	gvrOSKNode = schema.GroupVersionResource{Group: "kupenstack.io", Version: "v1alpha1", Resource: "openstacknodes"}
	gvrServer  = schema.GroupVersionResource{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Resource: "openstackservers"}
)

// components are the control-plane components the test profiles enable, with their charts.
var components = []string{"mariadb", "rabbitmq", "memcached", "keystone", "glance", "placement", "nova", "neutron", "horizon"}

// baseProfileSpec enables every component at chart version 0.1.0 from the test repository.
func baseProfileSpec(readiness string) map[string]any {
	comps := map[string]any{}
	for _, c := range components {
		comps[c] = map[string]any{
			"chart":            map[string]any{"repository": charts.URL, "name": c, "version": "0.1.0"},
			"readinessTimeout": readiness,
		}
	}
	return map[string]any{"components": comps}
}

func createObject(t *testing.T, gvr schema.GroupVersionResource, kind, name string, spec map[string]any) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kupenstack.io/v1alpha1", "kind": kind,
		"metadata": map[string]any{"name": name, "labels": map[string]any{"stackflow.io/test-run": env.Run}},
		"spec":     spec,
	}}
	out, err := env.Dyn.Resource(gvr).Create(context.Background(), u, metav1.CreateOptions{})
	require.NoError(t, err, "create %s %s", kind, name)
	return out
}

// deleteAndWait deletes an object and fails the test unless its workflow removed the finalizer within
// timeout.
func deleteAndWait(t *testing.T, gvr schema.GroupVersionResource, name string, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	require.NoError(t, env.DeleteAndWait(ctx, gvr, "", name))
}

func mergePatch(t *testing.T, gvr schema.GroupVersionResource, name string, patch map[string]any) {
	t.Helper()
	b, _ := json.Marshal(patch)
	_, err := env.Dyn.Resource(gvr).Patch(context.Background(), name, types.MergePatchType, b, metav1.PatchOptions{})
	require.NoError(t, err, "patch %s %s", gvr.Resource, name)
}

func getObject(t *testing.T, gvr schema.GroupVersionResource, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := env.Dyn.Resource(gvr).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return u
}

// configStatus is the part of a KupenstackConfiguration's status the tests read.
type configStatus struct {
	ObservedGeneration int64                                `json:"observedGeneration"`
	Phase              string                               `json:"phase"`
	WorkflowID         string                               `json:"workflowID"`
	Conditions         []metav1.Condition                   `json:"conditions"`
	Components         []kupenstackv1alpha1.ComponentStatus `json:"components"`
}

func readConfigStatus(t *testing.T, name string) (configStatus, int64) {
	t.Helper()
	u := getObject(t, gvrConfig, name)
	var s configStatus
	raw, _ := json.Marshal(u.Object["status"])
	require.NoError(t, json.Unmarshal(raw, &s))
	return s, u.GetGeneration()
}

func (s configStatus) condition(typ string) metav1.Condition {
	for _, c := range s.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}

func (s configStatus) component(name string) kupenstackv1alpha1.ComponentStatus {
	for _, c := range s.Components {
		if c.Name == name {
			return c
		}
	}
	return kupenstackv1alpha1.ComponentStatus{}
}

// waitConfig polls the configuration's status until ok says so, and fails with the last status.
func waitConfig(t *testing.T, name string, timeout time.Duration, what string, ok func(configStatus, int64) bool) configStatus {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s, gen := readConfigStatus(t, name)
		if ok(s, gen) {
			return s
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(s, "", "  ")
			require.FailNow(t, "timed out waiting: "+what, "status of %s:\n%s", name, b)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// allDeployed is true once every component is Deployed and ComponentsReady is True for the current
// generation.
func allDeployed(s configStatus, gen int64) bool {
	if s.ObservedGeneration != gen || s.condition(controlplane.ConditionComponentsReady).Status != metav1.ConditionTrue ||
		s.condition(lifecycle.ConditionReady).Status != metav1.ConditionTrue {
		return false
	}
	for _, c := range components {
		if s.component(c).State != controlplane.ComponentDeployed {
			return false
		}
	}
	return true
}

// releases reads the components' releases through the Helm activities (read-only).
func releases(t *testing.T, ns string) map[string]helm.ReleaseInfo {
	t.Helper()
	h, err := helm.NewHelm(env.REST, t.TempDir())
	require.NoError(t, err)
	out, err := h.Releases(context.Background(), helm.ReleasesInput{Namespace: ns, Names: components})
	require.NoError(t, err)
	return out
}

// childEvents returns, per component, the positions in the parent's whole history (every run of it) of
// its child's start and completion (the latest rollout of each).
func childEvents(t *testing.T, parentID string) (started, closed, applied map[string]int64) {
	t.Helper()
	started, closed, applied = map[string]int64{}, map[string]int64{}, map[string]int64{}
	events, err := env.History(context.Background(), parentID)
	require.NoError(t, err)
	dc, err := env.DataConverter()
	require.NoError(t, err)
	prefix := parentID + "/"
	for i, ev := range events {
		pos := int64(i)
		if a := ev.GetChildWorkflowExecutionStartedEventAttributes(); a != nil {
			started[strings.TrimPrefix(a.WorkflowExecution.WorkflowId, prefix)] = pos
		}
		if a := ev.GetChildWorkflowExecutionCompletedEventAttributes(); a != nil {
			closed[strings.TrimPrefix(a.WorkflowExecution.WorkflowId, prefix)] = pos
		}
		if a := ev.GetChildWorkflowExecutionFailedEventAttributes(); a != nil {
			closed[strings.TrimPrefix(a.WorkflowExecution.WorkflowId, prefix)] = pos
		}
		if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.SignalName == controlplane.SignalComponentApplied {
			var name string
			require.NoError(t, dc.FromPayloads(a.Input, &name))
			applied[name] = pos
		}
	}
	return started, closed, applied
}

// childRuns counts the runs of each component's rollout workflow under a parent, through visibility.
func childRuns(t *testing.T, parentID string) map[string]int {
	t.Helper()
	out := map[string]int{}
	resp, err := env.Temporal.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: env.TemporalNamespace, PageSize: 1000,
		Query: fmt.Sprintf("WorkflowId STARTS_WITH %q AND WorkflowType = %q", parentID+"/", controlplane.RolloutComponentWorkflowName),
	})
	require.NoError(t, err)
	for _, e := range resp.Executions {
		out[strings.TrimPrefix(e.Execution.WorkflowId, parentID+"/")]++
	}
	return out
}

// componentRun describes the latest run of a component's rollout under the parent workflow.
func componentRun(t *testing.T, parentID, component string) *workflowpb.WorkflowExecutionInfo {
	t.Helper()
	d, err := env.Temporal.DescribeWorkflowExecution(context.Background(), controlplane.ComponentWorkflowID(parentID, component), "")
	require.NoError(t, err)
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, d.WorkflowExecutionInfo.Status, "%s's rollout", component)
	return d.WorkflowExecutionInfo
}

// nodeSpecs are the kwok nodes and their types.
var nodeSpecs = []map[string]any{
	{"name": "control-0", "type": "control"}, {"name": "control-1", "type": "control"}, {"name": "control-2", "type": "control"},
	{"name": "compute-0", "type": "compute"}, {"name": "compute-1", "type": "compute"},
}

// nodesGivenBack registers the check that, once the test's configuration is deleted, its workflows gave
// the shared kwok nodes back as the stack made them: each with its site's role label alone, no record of
// stackflow's, and its OpenstackNode's spec cleared. Registered after the worker starts (cleanups run in
// reverse), it runs while the worker still does. A failed test (or check) still restores the nodes, so
// the next test does not start on what this one left.
func nodesGivenBack(t *testing.T) {
	// An OpenstackNode is the Node workflow's, which these tests' bridges do not run: on a stack where
	// no bridge served Nodes yet, a node has none before the test, and a configuration that does not name
	// it makes none.
	existed := map[string]bool{}
	for _, n := range nodeSpecs {
		name := n["name"].(string)
		_, err := env.Dyn.Resource(gvrOSKNode).Get(context.Background(), name, metav1.GetOptions{})
		existed[name] = err == nil
	}
	t.Cleanup(func() {
		if t.Failed() {
			return // restoreNodes below puts them back; the failure is already reported
		}
		ctx := context.Background()
		var last string
		ok := assert.Eventually(t, func() bool {
			for _, n := range nodeSpecs {
				name, typ := n["name"].(string), n["type"].(string)
				node, err := env.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					last = err.Error()
					return false
				}
				for role, label := range controlplane.RoleLabels {
					want := ""
					if role == typ {
						want = "enabled"
					}
					if node.Labels[label] != want {
						last = fmt.Sprintf("node %s: label %s=%q, the site's is %q", name, label, node.Labels[label], want)
						return false
					}
				}
				if a, ok := node.Annotations[kube.AnnotationSiteRoleLabels]; ok {
					last = fmt.Sprintf("node %s still records the site's labels (%s)", name, a)
					return false
				}
				osk, err := env.Dyn.Resource(gvrOSKNode).Get(ctx, name, metav1.GetOptions{})
				if apierrors.IsNotFound(err) && !existed[name] {
					continue
				}
				if err != nil {
					last = err.Error()
					return false
				}
				if spec, _ := osk.Object["spec"].(map[string]any); len(spec) > 0 {
					last = fmt.Sprintf("OpenstackNode %s keeps the spec %v", name, spec)
					return false
				}
			}
			return true
		}, time.Minute, 250*time.Millisecond)
		if !ok {
			t.Errorf("the configuration's deletion did not give the nodes back: %s", last)
		}
	})
}

// restoreNodes gives the shared kwok nodes back their role labels and empties their OpenstackNodes'
// specs when the test failed, whatever it did; a passing test proves the product did (nodesGivenBack).
func restoreNodes(t *testing.T) {
	if !t.Failed() {
		return
	}
	ctx := context.Background()
	for _, n := range nodeSpecs {
		name := n["name"].(string)
		labels := map[string]any{}
		for role, label := range controlplane.RoleLabels {
			labels[label] = nil
			if role == n["type"].(string) {
				labels[label] = "enabled"
			}
		}
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels,
			"annotations": map[string]any{kube.AnnotationSiteRoleLabels: nil}}})
		if _, err := env.Kube.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, b, metav1.PatchOptions{}); err != nil {
			t.Logf("restore labels of %s: %v", name, err)
		}
		b, _ = json.Marshal(map[string]any{"spec": nil})
		if _, err := env.Dyn.Resource(gvrOSKNode).Patch(ctx, name, types.MergePatchType, b, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Logf("restore OpenstackNode %s: %v", name, err)
		}
	}
}

// clientUpdate asks the configuration's workflow for a preview and waits for the answer.
func clientUpdate(workflowID string, req controlplane.PreviewRequest) client.UpdateWorkflowOptions {
	return client.UpdateWorkflowOptions{WorkflowID: workflowID, UpdateName: controlplane.UpdatePreview,
		Args: []any{req}, WaitForStage: client.WorkflowUpdateStageCompleted}
}
