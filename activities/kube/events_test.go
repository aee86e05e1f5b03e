package kube

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

func TestStatusEvents(t *testing.T) {
	cond := func(typ, status, reason, msg string) map[string]any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg, "lastTransitionTime": "2026-11-26T08:00:00Z"}
	}
	st := func(phase, step string, conds ...map[string]any) map[string]any {
		out := map[string]any{}
		if phase != "" {
			out["phase"] = phase
		}
		if step != "" {
			out["currentStep"] = step
		}
		var cs []any
		for _, c := range conds {
			cs = append(cs, c)
		}
		if cs != nil {
			out["conditions"] = cs
		}
		return out
	}
	running := cond("Ready", "False", "Reconciling", "acting on generation 1")
	failedReady := cond("Ready", "False", "HostUnreachable", "ssh to edpm-x: connection refused")
	normal := func(reason, msg string) StatusEvent {
		return StatusEvent{Type: corev1.EventTypeNormal, Reason: reason, Message: msg}
	}
	for _, tc := range []struct {
		name          string
		before, after map[string]any
		want          []StatusEvent
	}{
		{"nothing changed", st("Running", "phase 0 · bootstrap", running), st("Running", "phase 0 · bootstrap", running), nil},
		{"first write: phase and step", map[string]any{}, st("Running", "phase 0 · bootstrap", running),
			[]StatusEvent{normal(EventPhase, "phase Running"), normal(EventStep, "phase 0 · bootstrap")}},
		{"a step started", st("Running", "phase 0 · bootstrap", running), st("Running", "phase 0 · configure-network", running),
			[]StatusEvent{normal(EventStep, "phase 0 · configure-network")}},
		{"a condition reached", st("Running", "a"), st("Running", "a", cond("InfrastructureReady", "True", "Configured", "phase 0 done")),
			[]StatusEvent{normal("Configured", "InfrastructureReady=True: phase 0 done")}},
		{"failed, with the reason", st("Running", "phase 0 · bootstrap", running), st("Failed", "phase 0 · bootstrap", failedReady),
			[]StatusEvent{{Type: corev1.EventTypeWarning, Reason: "HostUnreachable", Message: "ssh to edpm-x: connection refused"}}},
		{"retried after the failure", st("Failed", "phase 0 · bootstrap", failedReady), st("Running", "phase 0 · bootstrap", running),
			[]StatusEvent{normal(EventRetrying, "acting again after the failure: Running")}},
		{"waiting is told, not warned of", st("Running", "server", running), st("Waiting", "server", cond("Ready", "False", "FlavorNotFound", "no flavor m1.tiny yet")),
			[]StatusEvent{normal("FlavorNotFound", "no flavor m1.tiny yet")}},
		{"looked again after the wait", st("Waiting", "server", cond("Ready", "False", "FlavorNotFound", "no flavor m1.tiny yet")), st("Running", "server", running),
			[]StatusEvent{normal(EventRetrying, "acting again after the wait: Running")}},
		{"paused", st("Running", "a", running), st("Paused", "a", running, cond("Paused", "True", "Paused", "paused before step b; send the resume signal to go on")),
			[]StatusEvent{normal(EventPaused, "paused before step b; send the resume signal to go on")}},
		{"resumed", st("Paused", "a", running, cond("Paused", "True", "Paused", "p")), st("Running", "b", running, cond("Paused", "False", "Resumed", "resumed")),
			[]StatusEvent{normal(EventResumed, "resumed: Running"), normal(EventStep, "b")}},
		{"approved", map[string]any{"phase": "AwaitingApproval", "gate": "canary"}, map[string]any{"phase": "Updating"},
			[]StatusEvent{normal(EventApproved, `gate "canary" approved`), normal(EventPhase, "phase Updating")}},
		{"ready", st("Running", "a", running), st("Ready", "", cond("Ready", "True", "Reconciled", "generation 2 is in place")),
			[]StatusEvent{normal(EventReady, "generation 2 is in place")}},
		{"cancelled", st("Running", "a", running), st("Cancelled", "", cond("Ready", "False", "Cancelled", "workflow cancelled; the next spec change starts a new run")),
			[]StatusEvent{{Type: corev1.EventTypeWarning, Reason: EventCancelled, Message: "workflow cancelled; the next spec change starts a new run"}}},
		{"deleting", st("Ready", ""), st("Deleting", ""), []StatusEvent{normal(EventDeleting, "deleting what the workflow created")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, StatusEvents(tc.before, tc.after))
		})
	}
}
