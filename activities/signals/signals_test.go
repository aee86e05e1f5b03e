package signals

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/grpc"
)

// fakeService records the signals it is sent and answers each workflow ID with errs' error.
type fakeService struct {
	workflowservice.WorkflowServiceClient
	mu   sync.Mutex
	got  map[string]*workflowservice.SignalWorkflowExecutionRequest
	errs map[string]error
}

func (f *fakeService) SignalWorkflowExecution(_ context.Context, r *workflowservice.SignalWorkflowExecutionRequest, _ ...grpc.CallOption) (*workflowservice.SignalWorkflowExecutionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.errs[r.GetWorkflowExecution().GetWorkflowId()]; err != nil {
		return nil, err
	}
	f.got[r.GetWorkflowExecution().GetWorkflowId()] = r
	return &workflowservice.SignalWorkflowExecutionResponse{}, nil
}

func TestSignalWorkflows(t *testing.T) {
	type grant struct {
		DataPlane string `json:"dataPlane"`
	}
	arg, err := json.Marshal(grant{DataPlane: "dp"})
	require.NoError(t, err)
	targets := []Target{{WorkflowID: "a", RequestID: "r-a"}, {WorkflowID: "b", RequestID: "r-b"}, {WorkflowID: "c", RequestID: "r-c"}}
	for _, tc := range []struct {
		name         string
		errs         map[string]error
		wantNotFound []string
		wantErr      bool
	}{
		{name: "every target signalled"},
		{name: "a workflow not running is reported, the others signalled", errs: map[string]error{"b": serviceerror.NewNotFound("no such workflow")}, wantNotFound: []string{"b"}},
		{name: "any other failure fails the batch", errs: map[string]error{"c": serviceerror.NewUnavailable("down")}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := &fakeService{got: map[string]*workflowservice.SignalWorkflowExecutionRequest{}, errs: tc.errs}
			s := NewSender(svc, nil, "ns", "me")
			res, err := s.SignalWorkflows(context.Background(), Batch{Signal: "edpm-grant", Arg: arg, Targets: targets})
			if tc.wantErr {
				require.Error(t, err)
				require.True(t, errors.As(err, new(*serviceerror.Unavailable)), "the cause is kept: %v", err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantNotFound, res.NotFound)
			for _, tg := range targets {
				r, ok := svc.got[tg.WorkflowID]
				if tc.errs[tg.WorkflowID] != nil {
					require.False(t, ok)
					continue
				}
				require.True(t, ok, "%s signalled", tg.WorkflowID)
				require.Equal(t, "ns", r.GetNamespace())
				require.Equal(t, "edpm-grant", r.GetSignalName())
				require.Equal(t, "me", r.GetIdentity())
				require.Equal(t, tg.RequestID, r.GetRequestId(), "the request ID makes a retry deliver nothing twice")
				// The workflow reads the argument as it reads any signal's.
				var g grant
				require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(r.GetInput(), &g))
				require.Equal(t, "dp", g.DataPlane)
			}
		})
	}
}
