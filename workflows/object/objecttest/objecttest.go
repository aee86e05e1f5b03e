// Package objecttest runs object workflows under Temporal's test suite the way a server runs them: when a
// run continues as new, the next run starts with the same workflow ID and the carried input, so a test
// scripts signals, queries and updates across runs and sees how many runs there were.
package objecttest

import (
	"errors"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/workflows/object"
)

// ID is the workflow ID of the object workflow under test.
const ID = "object-under-test"

// chain is the parent that starts the object workflow as a child: the test suite starts a child again
// when it continues as new (a top-level run would just end).
const chain = "objecttest.chain"

// Chain follows one object workflow's runs in a test environment.
type Chain struct {
	env  *testsuite.TestWorkflowEnvironment
	runs int
}

// New registers the chain's parent workflow in env; register the object workflow under its kind too.
func New(env *testsuite.TestWorkflowEnvironment) *Chain {
	c := &Chain{env: env}
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context, kind string, in object.Input) error {
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: ID, TaskQueue: lifecycle.WorkflowQueue, WaitForCancellation: true})
		return workflow.ExecuteChildWorkflow(cctx, kind, in).Get(ctx, nil)
	}, workflow.RegisterOptions{Name: chain})
	env.SetOnChildWorkflowStartedListener(func(*workflow.Info, workflow.Context, converter.EncodedValues) { c.runs++ })
	return c
}

// Execute runs the object workflow of kind from in until its last run ends; env.GetWorkflowError is
// then its outcome.
func (c *Chain) Execute(kind string, in object.Input) { c.env.ExecuteWorkflow(chain, kind, in) }

// Runs is how many runs the object workflow had so far (1 + its continues-as-new).
func (c *Chain) Runs() int { return c.runs }

// Signal signals the object workflow's current run.
func (c *Chain) Signal(name string, arg any) error { return c.env.SignalWorkflowByID(ID, name, arg) }

// Status queries the current run's status.
func (c *Chain) Status() (lifecycle.Status, error) {
	var st lifecycle.Status
	v, err := c.env.QueryWorkflowByID(ID, lifecycle.QueryStatus)
	if err != nil {
		return st, err
	}
	return st, v.Get(&st)
}

// Update sends an update to the current run.
func (c *Chain) Update(name, id string, cb *testsuite.TestUpdateCallback, args ...any) error {
	return c.env.UpdateWorkflowByID(ID, name, id, cb, args...)
}

// Carried is the input a run that ended with err continues as new with, when it did.
func Carried(err error) (object.Input, bool) {
	var can *workflow.ContinueAsNewError
	if !errors.As(err, &can) {
		return object.Input{}, false
	}
	var in object.Input
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &in); err != nil {
		return object.Input{}, false
	}
	return in, true
}
