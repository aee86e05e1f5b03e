package bridge

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/api/lifecycle"
)

// signalTimeout bounds one SignalWithStart, retries inside the SDK included.
const signalTimeout = 15 * time.Second

func newTemporalClient(cfg Config) (client.Client, error) {
	opts, err := cfg.Temporal.ClientOptions()
	if err != nil {
		return nil, err
	}
	opts.Identity = "stackflow-bridge/" + cfg.Identity
	opts.Logger = sdklog.NewStructuredLogger(cfg.Log.With("component", "temporal"))
	opts.ConnectionOptions.DialOptions = append(opts.ConnectionOptions.DialOptions, grpc.WithChainUnaryInterceptor(captureStarted))
	// Lazy: an unreachable Temporal delays the work (keys are retried) instead of failing start-up.
	c, err := client.NewLazyClient(opts)
	if err != nil {
		return nil, fmt.Errorf("temporal client for %s: %w", cfg.Temporal.Address, err)
	}
	return c, nil
}

// startedKey carries a *bool that captureStarted fills from the SignalWithStart response.
type startedKey struct{}

// captureStarted records whether a SignalWithStart started a new run; the SDK's WorkflowRun does not say.
func captureStarted(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if r, ok := reply.(*workflowservice.SignalWithStartWorkflowExecutionResponse); ok && err == nil {
		if p, ok := ctx.Value(startedKey{}).(*bool); ok {
			*p = r.GetStarted()
		}
	}
	return err
}

// signalResult describes a successful signal.
type signalResult struct {
	WorkflowID string
	RunID      string
	Started    bool
}

// workflowClosedError means the object's workflow has completed (or was terminated or cancelled) and the
// reuse policy refuses a new run for the same object lifetime.
type workflowClosedError struct {
	id  string
	err error
}

func (e *workflowClosedError) Error() string {
	return fmt.Sprintf("workflow %s is closed and cannot start again for this object: %v", e.id, e.err)
}

func (e *workflowClosedError) Unwrap() error { return e.err }

// coordinators are the kinds whose workflows admit or wait for many others' (a data plane's nodes, an
// update's): their tasks go first in a backlogged queue, or 500 nodes' start-up tasks held a data
// plane's first workflow task, and so every node's admission, for half a minute.
var coordinators = map[string]bool{"OpenStackDataPlane": true, "OpenStackDataPlaneUpdate": true}

// PriorityOf is the task priority of a kind's workflows (activities inherit it): 2 for coordinators,
// Temporal's default (3) for the rest.
func PriorityOf(kind string) temporal.Priority {
	if coordinators[kind] {
		return temporal.Priority{PriorityKey: 2}
	}
	return temporal.Priority{}
}

// signal sends the plan's signal to the object's workflow, starting it if it does not run. A failed run
// may be replaced (the object's intent still holds); a run that ended otherwise may not.
func (b *Bridge) signal(ctx context.Context, ref lifecycle.ObjectRef, p Plan) (signalResult, error) {
	id := lifecycle.WorkflowID(ref)
	var arg any = lifecycle.DeleteSignal{}
	if p.Signal == lifecycle.SignalSpec {
		arg = lifecycle.SpecSignal{Generation: p.Generation}
	}
	opts := client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                lifecycle.WorkflowQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		// Set at start, so a workflow is found by its object from its first moment.
		TypedSearchAttributes: temporal.NewSearchAttributes(lifecycle.SAKind.ValueSet(ref.Kind), lifecycle.SAObject.ValueSet(ref.Key())),
		Priority:              PriorityOf(ref.Kind),
	}
	var started bool
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, startedKey{}, &started), signalTimeout)
	defer cancel()
	t0 := time.Now()
	run, err := b.temporal.SignalWithStartWorkflow(ctx, id, p.Signal, arg, opts, ref.Kind, ref)
	b.metrics.rpc.WithLabelValues(ref.Kind).Observe(time.Since(t0).Seconds())
	if err != nil {
		var already *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &already) {
			return signalResult{}, &workflowClosedError{id: id, err: err}
		}
		return signalResult{}, err
	}
	outcome := "signalled"
	if started {
		outcome = "started"
	}
	b.metrics.signals.WithLabelValues(ref.Kind, p.Signal, outcome).Inc()
	return signalResult{WorkflowID: id, RunID: run.GetRunID(), Started: started}, nil
}

// gone tells the workflow of an object that left the API server that it is gone, if that workflow still
// runs (lifecycle.DeleteSignal.Gone: it stops and ends). A workflow that already ended, as every workflow
// whose teardown dropped the finalizer has, is left alone: nothing is started for a gone object.
func (b *Bridge) gone(ctx context.Context, sk servedKind, k key) error {
	ref := sk.Ref(k.namespace, k.name, string(k.uid))
	id := lifecycle.WorkflowID(ref)
	// An object that left the watch filter (its label changed where admission does not refuse it) leaves
	// the informer as if deleted: it is not gone, its workflow goes on.
	if still, err := b.stillThere(ctx, sk, k); err != nil {
		return fmt.Errorf("look for %s: %w", ref, err)
	} else if still {
		b.log.Info("object left the watch filter; its workflow is not told it is gone", "object", ref.String(), "workflowID", id)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, signalTimeout)
	defer cancel()
	err := b.temporal.SignalWorkflow(ctx, id, "", lifecycle.SignalDelete, lifecycle.DeleteSignal{Gone: true})
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("tell the workflow of %s that its object is gone: %w", ref, err)
	}
	b.metrics.signals.WithLabelValues(ref.Kind, lifecycle.SignalDelete, "gone").Inc()
	b.log.Info("object gone while its workflow ran: told it to let go", "object", ref.String(), "workflowID", id)
	return nil
}

// stillThere says whether the object of k, with the same UID, still exists in the API server.
func (b *Bridge) stillThere(ctx context.Context, sk servedKind, k key) (bool, error) {
	var m *metav1.PartialObjectMetadata
	var err error
	if sk.ClusterScoped {
		m, err = b.meta.Resource(sk.GVR).Get(ctx, k.name, metav1.GetOptions{})
	} else {
		m, err = b.meta.Resource(sk.GVR).Namespace(k.namespace).Get(ctx, k.name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return m.UID == k.uid, nil
}
