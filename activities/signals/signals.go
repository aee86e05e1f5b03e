// Package signals sends one signal to many workflows as a local activity of the workflow worker.
//
// A workflow that signals hundreds of others through Temporal's own external signals (a data plane
// granting its nodes at a rollout's start) has every delivery recorded in its history and each takes
// its workflow's lock on the server while the target is signalled: at 200 nodes the grants took 90 s
// to arrive, one after another, retried behind the data plane's own busy lock. Sent from the workflow
// worker instead, the deliveries touch only their targets, and the sender's history holds one marker.
// Every delivery names a request ID, which the server remembers per workflow run, so a retried batch
// delivers nothing twice.
package signals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"golang.org/x/sync/errgroup"
)

// Batch is one signal for many workflows.
type Batch struct {
	Signal string `json:"signal"`
	// Arg is the signal's argument as JSON, the same for every target (null: none).
	Arg     json.RawMessage `json:"arg,omitempty"`
	Targets []Target        `json:"targets"`
}

// Target is one workflow to signal.
type Target struct {
	WorkflowID string `json:"workflowID"`
	// RequestID identifies this delivery: the server takes a signal whose request ID the running workflow
	// already had once as delivered, so a retry repeats nothing.
	RequestID string `json:"requestID"`
}

// Result says which targets were not signalled.
type Result struct {
	// NotFound lists the workflow IDs with no running workflow (not started yet, or closed).
	NotFound []string `json:"notFound,omitempty"`
}

// Sender signals workflows of one namespace.
type Sender struct {
	svc       workflowservice.WorkflowServiceClient
	dc        converter.DataConverter
	namespace string
	identity  string
	// parallel bounds the deliveries in flight.
	parallel int
}

// NewSender signals through svc in namespace, encoding arguments with dc (nil: the default converter,
// no codec), as identity.
func NewSender(svc workflowservice.WorkflowServiceClient, dc converter.DataConverter, namespace, identity string) *Sender {
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	return &Sender{svc: svc, dc: dc, namespace: namespace, identity: identity, parallel: 16}
}

// SignalWorkflows signals every target of b, a few at a time. A target with no running workflow is
// reported in the result, not as an error; any other failure fails the batch (retried whole: the
// request IDs make the deliveries that succeeded no-ops).
func (s *Sender) SignalWorkflows(ctx context.Context, b Batch) (Result, error) {
	var input *commonpb.Payloads
	if len(b.Arg) > 0 && string(b.Arg) != "null" {
		p, err := s.dc.ToPayloads(b.Arg)
		if err != nil {
			return Result{}, fmt.Errorf("encode the argument of signal %s: %w", b.Signal, err)
		}
		input = p
	}
	// Each delivery writes its own slot: no lock, and the result keeps the targets' order.
	missing := make([]bool, len(b.Targets))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.parallel)
	for i, t := range b.Targets {
		g.Go(func() error {
			_, err := s.svc.SignalWorkflowExecution(gctx, &workflowservice.SignalWorkflowExecutionRequest{
				Namespace:         s.namespace,
				WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: t.WorkflowID},
				SignalName:        b.Signal,
				Input:             input,
				Identity:          s.identity,
				RequestId:         t.RequestID,
			})
			var nf *serviceerror.NotFound
			switch {
			case errors.As(err, &nf):
				missing[i] = true
			case err != nil:
				return fmt.Errorf("signal %s to %s: %w", b.Signal, t.WorkflowID, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return Result{}, err
	}
	var res Result
	for i, t := range b.Targets {
		if missing[i] {
			res.NotFound = append(res.NotFound, t.WorkflowID)
		}
	}
	return res, nil
}
