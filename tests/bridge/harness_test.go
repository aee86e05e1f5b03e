package bridge

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

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
