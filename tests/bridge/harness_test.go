package bridge

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/tests/e2e"
)

// startBridge runs a bridge replica for Nodes and OpenstackNodes on lease, with short leases so a
// takeover is quick.
func startBridge(t *testing.T, identity, lease string) *e2e.Proc {
	return env.StartBridge(t, e2e.BridgeOptions{Identity: identity, Kinds: "Node,OpenstackNode", Lease: lease, Workers: 8})
}

func startWorker(t *testing.T, identity string) *e2e.Proc {
	return env.StartWorker(t, e2e.WorkerOptions{Identity: identity})
}

var (
	osknodes = schema.GroupVersionResource{Group: "kupenstack.io", Version: "v1alpha1", Resource: "openstacknodes"}
	nodes    = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
)

func newOpenstackNode(name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kupenstack.io/v1alpha1",
		"kind":       "OpenstackNode",
		"metadata":   map[string]any{"name": name, "labels": map[string]any{"stackflow.io/test-run": env.Run}},
		"spec":       spec,
	}}
	return u
}

// deleteAndWait deletes objects and fails the test unless their workflows removed the finalizer within
// timeout.
func deleteAndWait(t *testing.T, gvr schema.GroupVersionResource, names []string, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	require.NoError(t, env.DeleteAndWait(ctx, gvr, "", names...))
}

// heldBy is a finalizer of the tests' own that holds an OpenstackNode once its workflow let it go.
const heldBy = "stackflow.io/e2e-hold"

// deleteNodeHeld creates kwok Node name, waits for its OpenstackNode to be served, holds that with
// heldBy and deletes the Node: the Node's teardown deletes the OpenstackNode and waits for it to go, with
// no deadline. It returns once only the hold is left on the OpenstackNode, with the Node's workflow ID.
func deleteNodeHeld(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	t.Cleanup(func() { env.ForceDelete(osknodes, "", name); env.ForceDelete(nodes, "", name) })
	node, err := env.Kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: name, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		osk, err := env.Dyn.Resource(osknodes).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		observed, _, _ := unstructured.NestedInt64(osk.Object, "status", "observedGeneration")
		return observed == 1
	}, 90*time.Second, 250*time.Millisecond, "OpenstackNode %s not served", name)
	// Its workflow may still be writing status: the hold is added on the latest version.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		osk, err := env.Dyn.Resource(osknodes).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
			"finalizers": append(osk.GetFinalizers(), heldBy), "resourceVersion": osk.GetResourceVersion()}})
		_, err = env.Dyn.Resource(osknodes).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}))
	require.NoError(t, env.Kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		osk, err := env.Dyn.Resource(osknodes).Get(ctx, name, metav1.GetOptions{})
		// Deleted by the Node's teardown and released by its own workflow: only the hold is left.
		return err == nil && osk.GetDeletionTimestamp() != nil && slices.Equal(osk.GetFinalizers(), []string{heldBy})
	}, time.Minute, 200*time.Millisecond, "the Node's teardown did not delete the OpenstackNode")
	return lifecycle.WorkflowID(lifecycle.ObjectRef{Version: "v1", Kind: "Node", Resource: "nodes", Name: name, UID: string(node.UID)})
}
