package object

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/api/lifecycle"
)

// Definition is one workflow the worker registers; Name is its workflow type, which for object workflows
// is the Kind it serves (the bridge starts "OpenstackNode" for an OpenstackNode). Names never change:
// running histories and the bridge refer to them.
//
// Versioning is what a running workflow does when a worker of a newer build becomes current (Temporal
// worker deployments): workflow.VersioningBehaviorAutoUpgrade moves it to the new build on its next
// task, so every change to its code must replay its old histories (workflow.GetVersion, checked by the
// replay test); workflow.VersioningBehaviorPinned keeps it on the build that started it, which must then
// keep running until it finishes. Every definition says which, and why, beside it.
type Definition struct {
	Name       string
	Fn         any
	Versioning workflow.VersioningBehavior
}

// kube is a nil receiver used only to name the Kubernetes activities; the worker registers the real one.
var kubeActs *kube.Kube

// GetObject reads the workflow's object through the Kubernetes activity.
func (lc *Lifecycle) GetObject(ctx workflow.Context) (*kube.Object, error) {
	var obj kube.Object
	if err := workflow.ExecuteActivity(KubeActivity(ctx), kubeActs.GetObject, lc.Ref).Get(ctx, &obj); err != nil {
		return nil, fmt.Errorf("read %s: %w", lc.Ref, err)
	}
	return &obj, nil
}

// KubeActivity routes an activity to the Kubernetes queue with the retry policy for API calls: quick first
// retries, then backoff, for as long as the API server needs to come back.
func KubeActivity(ctx workflow.Context) workflow.Context {
	return OnKube(ctx, workflow.ActivityOptions{

		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: 30 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    500 * time.Millisecond,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
		},
	})
}

// FailureReason is the condition reason for a failure: the application error type when there is one.
func FailureReason(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.Type() != "" {
		return app.Type()
	}
	return lifecycle.ReasonFailed
}

// FailureMessage is the innermost useful message of a failure, without Temporal's wrapping.
func FailureMessage(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	return err.Error()
}

// Interrupted reports whether err ends a reconcile without being its failure: the workflow was cancelled,
// the object is being deleted, or the run continues as new. Reconcilers pass such errors up unreported.
func Interrupted(err error) bool {
	return temporal.IsCanceledError(err) || errors.Is(err, ErrDeleted) || errors.Is(err, ErrContinueAsNew)
}

// IsPermanent reports whether err is a failure retrying cannot fix (a non-retryable application error
// from an activity, or one the workflow raised).
func IsPermanent(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.NonRetryable()
}

// The task queue of each capability is named here once: a call site gives the timeouts and retry policy
// of its call and takes the queue from its capability.

// OnKube runs the context's activities on the Kubernetes (and Helm) queue with options o.
func OnKube(ctx workflow.Context, o workflow.ActivityOptions) workflow.Context {
	o.TaskQueue = lifecycle.KubeQueue
	return workflow.WithActivityOptions(ctx, o)
}

// OnAnsible runs the context's activities on the Ansible queue (workers that reach the hosts) with o.
func OnAnsible(ctx workflow.Context, o workflow.ActivityOptions) workflow.Context {
	o.TaskQueue = lifecycle.AnsibleQueue
	return workflow.WithActivityOptions(ctx, o)
}

// OnOpenStack runs the context's activities on the OpenStack queue (OpenStack's APIs, databases, message
// buses) with o.
func OnOpenStack(ctx workflow.Context, o workflow.ActivityOptions) workflow.Context {
	o.TaskQueue = lifecycle.OpenStackQueue
	return workflow.WithActivityOptions(ctx, o)
}
