package bridge

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/stackflow/stackflow/api/lifecycle"
)

// Reasons of the Events the bridge records on objects.
const (
	// ReasonWorkflowStarted: the object's workflow was started (by a spec or delete signal).
	ReasonWorkflowStarted = "WorkflowStarted"
	// ReasonWorkflowSignalled: the running workflow was told of a new generation or of the deletion.
	ReasonWorkflowSignalled = "WorkflowSignalled"
	// ReasonWorkflowClosed: the workflow ended and may not run again for this object; a person must look.
	ReasonWorkflowClosed = "WorkflowClosed"
)

// events records Kubernetes Events under a global rate limit: beyond it Events are dropped (the workflow
// and the metrics still tell the story), so a burst of many objects cannot flood the API server.
type events struct {
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
	limit       flowcontrol.RateLimiter
}

func newEvents(core kubernetes.Interface, identity string, qps float32, burst int) *events {
	bc := record.NewBroadcaster()
	bc.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: core.CoreV1().Events("")})
	return &events{
		broadcaster: bc,
		recorder:    bc.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "stackflow-bridge", Host: identity}),
		limit:       flowcontrol.NewTokenBucketRateLimiter(qps, burst),
	}
}

func (e *events) shutdown() { e.broadcaster.Shutdown() }

func objectReference(ref lifecycle.ObjectRef) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		APIVersion: ref.APIVersion(),
		Kind:       ref.Kind,
		Namespace:  ref.Namespace,
		Name:       ref.Name,
		UID:        types.UID(ref.UID),
	}
}

func (e *events) signalled(ref lifecycle.ObjectRef, p Plan, r signalResult) {
	if !e.limit.TryAccept() {
		return
	}
	what := "deletion"
	if p.Signal == lifecycle.SignalSpec {
		what = "generation " + itoa(p.Generation)
	}
	if r.Started {
		e.recorder.Eventf(objectReference(ref), corev1.EventTypeNormal, ReasonWorkflowStarted, "started workflow %s (run %s) for %s", r.WorkflowID, r.RunID, what)
		return
	}
	e.recorder.Eventf(objectReference(ref), corev1.EventTypeNormal, ReasonWorkflowSignalled, "signalled workflow %s: %s", r.WorkflowID, what)
}

func (e *events) warn(ref lifecycle.ObjectRef, reason, msg string) {
	if !e.limit.TryAccept() {
		return
	}
	e.recorder.Event(objectReference(ref), corev1.EventTypeWarning, reason, msg)
}
