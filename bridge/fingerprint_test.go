package bridge

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func node(labels map[string]any, ready, heartbeat string, taints ...map[string]any) *unstructured.Unstructured {
	var ts []any
	for _, t := range taints {
		ts = append(ts, t)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{"name": "n", "labels": labels, "resourceVersion": heartbeat},
		"spec":     map[string]any{"taints": ts},
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Ready", "status": ready, "lastHeartbeatTime": heartbeat},
			map[string]any{"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": heartbeat},
		}},
	}}
}

// A Node's fingerprint moves with what its workflows read, and only with that: heartbeats wake nothing.
func TestNodeFingerprint(t *testing.T) {
	base := NodeFingerprint(node(map[string]any{"a": "1"}, "True", "t1"))
	taint := map[string]any{"key": "k", "effect": "NoSchedule", "timeAdded": "t1"}
	for _, tc := range []struct {
		name string
		node *unstructured.Unstructured
		same bool
	}{
		{"a heartbeat", node(map[string]any{"a": "1"}, "True", "t2"), true},
		{"a label", node(map[string]any{"a": "2"}, "True", "t1"), false},
		{"a new label", node(map[string]any{"a": "1", "b": "1"}, "True", "t1"), false},
		{"readiness", node(map[string]any{"a": "1"}, "False", "t1"), false},
		{"a taint", node(map[string]any{"a": "1"}, "True", "t1", taint), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.same, NodeFingerprint(tc.node) == base)
		})
	}
	// A taint whose only change is when it was added is the same taint.
	moved := map[string]any{"key": "k", "effect": "NoSchedule", "timeAdded": "t9"}
	assert.Equal(t, NodeFingerprint(node(nil, "True", "t1", taint)), NodeFingerprint(node(nil, "True", "t1", moved)))
}
