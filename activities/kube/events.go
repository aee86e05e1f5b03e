package kube

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/stackflow/stackflow/api/lifecycle"
)

// Events tell an object's story in `kubectl describe`: the status writes of its workflow are compared,
// before and after, and what changed (a step started, a phase reached, a failure and its reason, a retry,
// a pause, a resume, an approval, a cancel, a condition) becomes an Event on the object. They come from the
// status the workflow wrote, so they add nothing to its history, and a write retried after a crash (the
// same status again) tells nothing twice.

// Reasons of the Events that are not a condition's own reason.
const (
	EventStep      = "Step"
	EventPhase     = "Phase"
	EventReady     = "Ready"
	EventFailed    = "Failed"
	EventWaiting   = "Waiting"
	EventRetrying  = "Retrying"
	EventPaused    = "Paused"
	EventResumed   = "Resumed"
	EventApproved  = "Approved"
	EventCancelled = "Cancelled"
	EventDeleting  = "Deleting"
)

// StatusEvent is one Event a status change tells.
type StatusEvent struct {
	Type    string // corev1.EventTypeNormal or corev1.EventTypeWarning
	Reason  string
	Message string
}

// StatusEvents are the Events that tell what changed from status before to status after, in the order a
// reader follows them: what ended (a condition, the phase), then the step that started.
func StatusEvents(before, after map[string]any) []StatusEvent {
	var out []StatusEvent
	ready := conditionOf(after, lifecycle.ConditionReady)
	beforeConds := conditionsOf(before)
	for _, c := range conditionsOf(after) {
		if c.Type == lifecycle.ConditionReady || c.Type == "Paused" {
			continue // told by the phase
		}
		old, ok := findCondition(beforeConds, c.Type)
		if ok && old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message {
			continue
		}
		out = append(out, StatusEvent{Type: corev1.EventTypeNormal, Reason: nonEmpty(c.Reason, c.Type),
			Message: fmt.Sprintf("%s=%s: %s", c.Type, c.Status, c.Message)})
	}
	if old, now := str(before, "gate"), str(after, "gate"); old != "" && now == "" && str(after, "phase") != lifecycle.PhaseFailed {
		out = append(out, StatusEvent{Type: corev1.EventTypeNormal, Reason: EventApproved, Message: fmt.Sprintf("gate %q approved", old)})
	}
	oldPhase, phase := str(before, "phase"), str(after, "phase")
	// Pending is where every workflow starts: nothing to tell.
	if phase != oldPhase && phase != "" && phase != lifecycle.PhasePending {
		switch {
		case phase == lifecycle.PhaseFailed:
			reason, msg := EventFailed, "failed"
			if ready != nil {
				reason, msg = nonEmpty(ready.Reason, EventFailed), ready.Message
			}
			out = append(out, StatusEvent{Type: corev1.EventTypeWarning, Reason: reason, Message: msg})
		case phase == lifecycle.PhaseWaiting:
			// Something it needs may still appear: told, not warned of.
			reason, msg := EventWaiting, "waiting"
			if ready != nil {
				reason, msg = nonEmpty(ready.Reason, EventWaiting), ready.Message
			}
			out = append(out, StatusEvent{Type: corev1.EventTypeNormal, Reason: reason, Message: msg})
		case phase == "Cancelled":
			msg := "workflow cancelled"
			if ready != nil {
				msg = ready.Message
			}
			out = append(out, StatusEvent{Type: corev1.EventTypeWarning, Reason: EventCancelled, Message: msg})
		case phase == lifecycle.PhasePaused:
			msg := "paused"
			if p := conditionOf(after, "Paused"); p != nil {
				msg = p.Message
			}
			out = append(out, StatusEvent{Type: corev1.EventTypeNormal, Reason: EventPaused, Message: msg})
		case oldPhase == lifecycle.PhasePaused:
			out = append(out, StatusEvent{Type: corev1.EventTypeNormal, Reason: EventResumed, Message: "resumed: " + phase})
		case oldPhase == lifecycle.PhaseFailed && phase != lifecycle.PhaseDeleting:
			out = append(out, StatusEvent{Type: corev1.EventTypeNormal, Reason: EventRetrying, Message: "acting again after the failure: " + phase})
		case oldPhase == lifecycle.PhaseWaiting && phase != lifecycle.PhaseDeleting:
			out = append(out, StatusEvent{Type: corev1.EventTypeNormal, Reason: EventRetrying, Message: "acting again after the wait: " + phase})
		case phase == lifecycle.PhaseReady:
			msg := "ready"
			if ready != nil {
				msg = ready.Message
			}
			out = append(out, StatusEvent{Type: corev1.EventTypeNormal, Reason: EventReady, Message: msg})
		case phase == lifecycle.PhaseDeleting:
			out = append(out, StatusEvent{Type: corev1.EventTypeNormal, Reason: EventDeleting, Message: "deleting what the workflow created"})
		default:
			out = append(out, StatusEvent{Type: corev1.EventTypeNormal, Reason: EventPhase, Message: "phase " + phase})
		}
	}
	if step := str(after, "currentStep"); step != "" && step != str(before, "currentStep") {
		out = append(out, StatusEvent{Type: corev1.EventTypeNormal, Reason: EventStep, Message: step})
	}
	return out
}

func str(status map[string]any, key string) string {
	s, _ := status[key].(string)
	return s
}

func nonEmpty(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

func conditionsOf(status map[string]any) []metav1.Condition {
	var out []metav1.Condition
	if raw, ok := status["conditions"]; ok {
		b, _ := json.Marshal(raw)
		_ = json.Unmarshal(b, &out)
	}
	return out
}

func findCondition(cs []metav1.Condition, t string) (metav1.Condition, bool) {
	i := slices.IndexFunc(cs, func(c metav1.Condition) bool { return c.Type == t })
	if i < 0 {
		return metav1.Condition{}, false
	}
	return cs[i], true
}

func conditionOf(status map[string]any, t string) *metav1.Condition {
	if c, ok := findCondition(conditionsOf(status), t); ok {
		return &c
	}
	return nil
}

// EventRecorder records the Events of status changes on objects, deduplicated (a repeated Event is
// counted, not written again) and rate-limited per object and overall, like the bridge's: beyond the
// limits Events are dropped, the workflow's history and status still tell the story. It starts sending
// with its first Event.
type EventRecorder struct {
	core                kubernetes.Interface
	component, identity string

	once        sync.Once
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
	limit       flowcontrol.RateLimiter
}

// NewEventRecorder records Events as component (with identity as the source host).
func NewEventRecorder(core kubernetes.Interface, component, identity string) *EventRecorder {
	return &EventRecorder{core: core, component: component, identity: identity}
}

func (r *EventRecorder) start() {
	// Per object: a burst of 60 (a data-plane node's deployment tells about 30 steps and phases), then one
	// every 10 s; overall 20 per second.
	r.broadcaster = record.NewBroadcasterWithCorrelatorOptions(record.CorrelatorOptions{BurstSize: 60, QPS: 0.1})
	r.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: r.core.CoreV1().Events("")})
	r.recorder = r.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: r.component, Host: r.identity})
	r.limit = flowcontrol.NewTokenBucketRateLimiter(20, 100)
}

// Record records the events on the object ref names.
func (r *EventRecorder) Record(ref lifecycle.ObjectRef, events []StatusEvent) {
	if r == nil || len(events) == 0 {
		return
	}
	r.once.Do(r.start)
	obj := &corev1.ObjectReference{APIVersion: ref.APIVersion(), Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name, UID: types.UID(ref.UID)}
	for _, e := range events {
		if !r.limit.TryAccept() {
			return
		}
		r.recorder.Event(obj, e.Type, e.Reason, e.Message)
	}
}
