package object

import (
	"errors"
	"fmt"
	"time"
	"unicode"

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

// GetObject reads the workflow's object (see onKubeLocally).
func (lc *Lifecycle) GetObject(ctx workflow.Context) (*kube.Object, error) {
	obj, err := GetObject(ctx, lc.Ref)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", lc.Ref, err)
	}
	return obj, nil
}

// ListObjects lists objects of a kind (see onKubeLocally): a workflow that reads many objects at its
// start (a data plane its nodes) is not queued behind their own start-up.
func ListObjects(ctx workflow.Context, in kube.ListInput) ([]kube.ListedObject, error) {
	var out []kube.ListedObject
	if err := onKubeLocally(ctx, localReads(ctx), localActs.ListObjects, kubeActs.ListObjects, in, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// StartListObjects starts ListObjects; the future's value is its result. Runs recorded before
// ChangeLocalReads start the Kubernetes queue's activity here, as they did.
func StartListObjects(ctx workflow.Context, in kube.ListInput) workflow.Future {
	if !localReads(ctx) {
		return workflow.ExecuteActivity(KubeActivity(ctx), kubeActs.ListObjects, in)
	}
	f, set := workflow.NewFuture(ctx)
	workflow.Go(ctx, func(ctx workflow.Context) {
		out, err := ListObjects(ctx, in)
		set.Set(out, err)
	})
	return f
}

// GetObject reads the object ref (see onKubeLocally).
func GetObject(ctx workflow.Context, ref lifecycle.ObjectRef) (*kube.Object, error) {
	var obj kube.Object
	if err := onKubeLocally(ctx, localReads(ctx), localActs.GetObject, kubeActs.GetObject, ref, &obj); err != nil {
		return nil, err
	}
	return &obj, nil
}

// ChangeLocalReads is the GetVersion change after which a run reads its object, and a data plane its
// nodes, as local activities of the workflow worker (kube.LocalKube) instead of on the Kubernetes queue:
// with 500 nodes starting at once, a data plane's first read waited there 110 s behind the nodes' own.
// Runs recorded before it read through the Kubernetes queue.
const ChangeLocalReads = "local-object-reads"

func localReads(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, ChangeLocalReads, workflow.DefaultVersion, 1) == 1
}

// onKubeLocally runs a Kubernetes call as the workflow worker's local activity local when asked to
// (runs recorded before the change that made it local do not), falling back to remote, the same activity
// on the Kubernetes queue, when the local one fails: an API server down for longer than a workflow task,
// or a workflow worker not allowed to make the call. The queue's retries are the server's, for as long as
// the API server needs, and add nothing to the history.
func onKubeLocally(ctx workflow.Context, asLocal bool, local, remote, in, out any) error {
	if asLocal {
		err := workflow.ExecuteLocalActivity(localKubeActivity(ctx), local, in).Get(ctx, out)
		if err == nil || ctx.Err() != nil {
			return err
		}
		workflow.GetLogger(ctx).Warn("local Kubernetes activity failed; running it on the Kubernetes queue", "error", err)
	}
	return workflow.ExecuteActivity(KubeActivity(ctx), remote, in).Get(ctx, out)
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

// FailureReason is the condition reason for a failure: the type of the outermost application error an
// activity or the workflow classified. An error an activity returned unclassified reaches the workflow
// with the name of its Go type as its type (fmt.Errorf's "wrapError", errors.New's "errorString"), and
// one it wrapped around a classified error carries that one as its cause: such names are lower-case,
// unlike every reason stackflow gives, and nothing a user could look up, so the cause's type is taken,
// or Failed when none was classified.
func FailureReason(err error) string {
	for err != nil {
		var app *temporal.ApplicationError
		if !errors.As(err, &app) {
			break
		}
		if t := app.Type(); t != "" && !unicode.IsLower([]rune(t)[0]) {
			return t
		}
		err = app.Unwrap()
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
