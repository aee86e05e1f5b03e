package object_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"github.com/stretchr/testify/suite"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/api/lifecycle"
	. "github.com/stackflow/stackflow/workflows/object"
	"github.com/stackflow/stackflow/workflows/object/objecttest"
)

// scriptedReconciler is a reconciler for testing the lifecycle loop: it records what it was asked to do
// and fails the generations listed in failOnce, once each.
type scriptedReconciler struct {
	reconciled []int64
	failOnce   map[int64]bool
	// missing is how many reconciles in a row fail with a RetryLater error first (what they need is
	// not there yet).
	missing  int
	tornDown int
	steps    int
	// teardown, when set, is what Teardown does after counting.
	teardown func(workflow.Context) error
	// failWhenCancelled: the reconcile waits until the workflow is cancelled and then fails with an error
	// of its own, as one whose child rolled back on the cancellation and failed.
	failWhenCancelled bool
}

func (r *scriptedReconciler) Reconcile(ctx workflow.Context, lc *Lifecycle, obj *kube.Object) error {
	if r.failWhenCancelled {
		_ = workflow.Await(ctx, func() bool { return false })
		return temporal.NewNonRetryableApplicationError("component nova: cancelled while waiting for readiness; rolled back", "Cancelled", nil)
	}
	for i := 0; i < r.steps; i++ {
		if err := lc.Step(ctx, "step"); err != nil {
			return err
		}
		if err := workflow.Sleep(ctx, time.Minute); err != nil {
			return err
		}
	}
	r.reconciled = append(r.reconciled, obj.Generation)
	if r.missing > 0 {
		r.missing--
		return RetryLater(fmt.Errorf("resolve: %w", temporal.NewNonRetryableApplicationError("flavor m1.tiny not found", "OpenStackNotFound", nil)))
	}
	if r.failOnce[obj.Generation] {
		delete(r.failOnce, obj.Generation)
		return temporal.NewNonRetryableApplicationError("host unreachable", "HostUnreachable", nil)
	}
	return nil
}

func (r *scriptedReconciler) Teardown(ctx workflow.Context, _ *Lifecycle) error {
	r.tornDown++
	if r.teardown != nil {
		return r.teardown(ctx)
	}
	return nil
}

// kube names the Kubernetes activities the lifecycle calls.
var kubeActs *kube.Kube

type lifecycleSuite struct {
	suite.Suite
	testsuite.WorkflowTestSuite
	env     *testsuite.TestWorkflowEnvironment
	chain   *objecttest.Chain
	rec     *scriptedReconciler
	gen     int64
	patches []kube.StatusPatch
	// patchErr, when set, is asked first by each status write: its error fails the write.
	patchErr func(context.Context) error
	// getErr, when set, is asked first by each read of the object: its error fails the read.
	getErr  func(context.Context) error
	removed int
}

func TestLifecycle(t *testing.T) { suite.Run(t, new(lifecycleSuite)) }

var testRef = lifecycle.ObjectRef{Group: "kupenstack.io", Version: "v1alpha1", Kind: "Test", Resource: "tests", Name: "a", UID: "1234"}

func (s *lifecycleSuite) SetupTest() {
	s.env = s.NewTestWorkflowEnvironment()
	s.chain = objecttest.New(s.env)
	s.rec = &scriptedReconciler{failOnce: map[int64]bool{}}
	s.gen = 1
	s.patches = nil
	s.patchErr, s.getErr = nil, nil
	s.removed = 0
	s.env.RegisterActivity(&kube.Kube{})
	s.env.OnActivity(kubeActs.GetObject, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, _ lifecycle.ObjectRef) (*kube.Object, error) {
			if s.getErr != nil {
				if err := s.getErr(ctx); err != nil {
					return nil, err
				}
			}
			return &kube.Object{Exists: true, Generation: s.gen}, nil
		})
	s.env.OnActivity(kubeActs.PatchStatus, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, p kube.StatusPatch) error {
			if s.patchErr != nil {
				if err := s.patchErr(ctx); err != nil {
					return err
				}
			}
			s.patches = append(s.patches, p)
			return nil
		})
	s.env.OnActivity(kubeActs.RemoveFinalizer, mock.Anything, mock.Anything).Return(
		func(context.Context, lifecycle.ObjectRef) error { s.removed++; return nil })
	rec := s.rec
	s.env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in Input) error {
		return Run(ctx, in, rec, Options{})
	}, workflow.RegisterOptions{Name: "Test"})
}

func (s *lifecycleSuite) signal(after time.Duration, name string, arg any) {
	s.env.RegisterDelayedCallback(func() { s.send(name, arg) }, after)
}

func (s *lifecycleSuite) send(name string, arg any) { s.Require().NoError(s.chain.Signal(name, arg)) }

func (s *lifecycleSuite) status() lifecycle.Status {
	st, err := s.chain.Status()
	s.Require().NoError(err)
	return st
}

func (s *lifecycleSuite) lastPatch() kube.StatusPatch {
	s.Require().NotEmpty(s.patches)
	return s.patches[len(s.patches)-1]
}

func (s *lifecycleSuite) TestGenerationsAreReconciledAndObservedThenDeleteTearsDown() {
	s.signal(time.Second, lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})
	s.env.RegisterDelayedCallback(func() {
		st := s.status()
		s.Equal(lifecycle.PhaseReady, st.Phase)
		s.EqualValues(1, st.ObservedGeneration)
		s.gen = 2
		s.send(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 2})
	}, time.Minute)
	// A resync repeats a generation already acted on: nothing happens.
	s.signal(2*time.Minute, lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 2})
	s.env.RegisterDelayedCallback(func() {
		s.EqualValues(2, s.status().ObservedGeneration)
		s.EqualValues(2, *s.lastPatch().ObservedGeneration)
		s.send(lifecycle.SignalDelete, lifecycle.DeleteSignal{})
	}, 3*time.Minute)
	s.chain.Execute("Test", Input{ObjectRef: testRef})

	s.True(s.env.IsWorkflowCompleted())
	s.NoError(s.env.GetWorkflowError())
	s.Equal([]int64{1, 2}, s.rec.reconciled)
	s.Equal(1, s.rec.tornDown)
	s.Equal(1, s.removed, "the finalizer is removed once, after teardown")
	s.Equal(lifecycle.PhaseDeleting, s.lastPatch().Phase)
}

// Status writes and the reads of the object run on the workflow worker, as local activities (one marker
// each in the history), never as activity tasks on the Kubernetes queue; the object's last write still
// lands before teardown.
func (s *lifecycleSuite) TestStatusIsWrittenAndTheObjectReadByLocalActivities() {
	var local, remote []string
	s.env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) {
		local = append(local, info.ActivityType.Name)
	})
	s.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		remote = append(remote, info.ActivityType.Name)
	})
	s.signal(time.Second, lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})
	s.signal(time.Minute, lifecycle.SignalDelete, lifecycle.DeleteSignal{})
	s.chain.Execute("Test", Input{ObjectRef: testRef})
	s.Require().NoError(s.env.GetWorkflowError())
	writes := 0
	for _, name := range local {
		s.Contains([]string{"PatchStatus", "GetObject"}, name)
		if name == "PatchStatus" {
			writes++
		}
	}
	s.Contains(local, "GetObject", "the reconcile read its object locally")
	s.Len(s.patches, writes, "every local write reached the object")
	s.NotContains(remote, "PatchStatus")
	s.NotContains(remote, "GetObject")
	s.Contains(remote, "RemoveFinalizer")
}

// A local read that keeps failing (the workflow worker cannot reach the API server, or may not read)
// goes to the Kubernetes queue: the reconcile still gets its object.
func (s *lifecycleSuite) TestReadFallsBackToTheKubernetesQueue() {
	local, remote := 0, 0
	s.getErr = func(ctx context.Context) error {
		if activity.GetInfo(ctx).IsLocalActivity {
			local++
			return errors.New("connection refused")
		}
		remote++
		return nil
	}
	s.signal(time.Second, lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})
	s.env.RegisterDelayedCallback(func() {
		s.Equal(lifecycle.PhaseReady, s.status().Phase)
		s.send(lifecycle.SignalDelete, lifecycle.DeleteSignal{})
	}, time.Hour)
	s.chain.Execute("Test", Input{ObjectRef: testRef})
	s.Require().NoError(s.env.GetWorkflowError())
	s.Equal([]int64{1}, s.rec.reconciled)
	s.Positive(remote)
	s.Greater(local, remote, "each read was tried locally first, with local retries")
}

// A local status write that keeps failing (the workflow worker cannot reach the API server, or may not
// write) goes to the Kubernetes queue, whose retries add nothing to the history: the status still lands.
func (s *lifecycleSuite) TestStatusWriteFallsBackToTheKubernetesQueue() {
	local, remote := 0, 0
	s.patchErr = func(ctx context.Context) error {
		if activity.GetInfo(ctx).IsLocalActivity {
			local++
			return errors.New("connection refused")
		}
		remote++
		return nil
	}
	s.signal(time.Second, lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})
	s.env.RegisterDelayedCallback(func() {
		s.Equal(lifecycle.PhaseReady, s.status().Phase)
		s.send(lifecycle.SignalDelete, lifecycle.DeleteSignal{})
	}, time.Hour)
	s.chain.Execute("Test", Input{ObjectRef: testRef})
	s.Require().NoError(s.env.GetWorkflowError())
	s.Positive(remote)
	s.GreaterOrEqual(local, remote, "each write was tried locally first")
	var phases []string
	for _, p := range s.patches {
		phases = append(phases, p.Phase)
	}
	s.Contains(phases, lifecycle.PhaseReady, "the Ready phase reached the object")
	s.Len(s.patches, remote, "every write that landed went through the Kubernetes queue")
}

func (s *lifecycleSuite) TestFailureWaitsForRetryThenSucceeds() {
	s.rec.failOnce[1] = true
	s.signal(time.Second, lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})
	s.env.RegisterDelayedCallback(func() {
		st := s.status()
		s.Equal(lifecycle.PhaseFailed, st.Phase)
		s.EqualValues(0, st.ObservedGeneration)
		ready := findCondition(st, lifecycle.ConditionReady)
		s.Equal("HostUnreachable", ready.Reason)
		s.Equal("host unreachable", ready.Message)
		s.Equal([]int64{1}, s.rec.reconciled, "a failed generation is not retried by itself")
		s.send(lifecycle.SignalRetry, lifecycle.RetrySignal{Hosts: []string{"edpm-compute-0"}})
	}, time.Hour)
	s.env.RegisterDelayedCallback(func() {
		st := s.status()
		s.Equal(lifecycle.PhaseReady, st.Phase)
		s.EqualValues(1, st.ObservedGeneration)
		s.send(lifecycle.SignalDelete, nil)
	}, 2*time.Hour)
	s.chain.Execute("Test", Input{ObjectRef: testRef})
	s.NoError(s.env.GetWorkflowError())
	s.Equal([]int64{1, 1}, s.rec.reconciled)
}

// A failure marked RetryLater shows as phase Waiting with its reason and message, then is tried again by
// itself after a back-off that doubles, and the object becomes Ready once what it needed appears; once Ready, no timer is left.
func (s *lifecycleSuite) TestRetryLaterFailureIsRetriedByItselfWithBackoff() {
	s.rec.missing = 3
	var timers []time.Duration
	s.env.SetOnTimerScheduledListener(func(_ string, d time.Duration) { timers = append(timers, d) })
	s.signal(time.Second, lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})
	s.env.RegisterDelayedCallback(func() {
		st := s.status()
		s.Equal(lifecycle.PhaseWaiting, st.Phase, "it may still appear: waiting, not failed")
		ready := findCondition(st, lifecycle.ConditionReady)
		s.Equal("OpenStackNotFound", ready.Reason)
		s.Contains(ready.Message, "flavor m1.tiny not found (failed 1 time(s) in a row; tried again by itself at ")
		s.Equal([]int64{1}, s.rec.reconciled)
	}, 5*time.Second)
	s.env.RegisterDelayedCallback(func() {
		st := s.status()
		s.Equal(lifecycle.PhaseReady, st.Phase, "Ready without a retry signal")
		s.Equal([]int64{1, 1, 1, 1}, s.rec.reconciled)
		s.Equal([]time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second}, timers, "10 s doubling")
		s.send(lifecycle.SignalDelete, nil)
	}, time.Hour)
	s.chain.Execute("Test", Input{ObjectRef: testRef})
	s.NoError(s.env.GetWorkflowError())
	s.Equal([]int64{1, 1, 1, 1}, s.rec.reconciled)
}

func TestAutoRetryDelay(t *testing.T) {
	for attempt, want := range map[int]time.Duration{1: 10 * time.Second, 2: 20 * time.Second, 4: 80 * time.Second, 5: 2 * time.Minute, 50: 2 * time.Minute} {
		require.Equal(t, want, AutoRetryDelay(attempt), "attempt %d", attempt)
	}
}

func (s *lifecycleSuite) TestPauseHoldsBeforeTheNextStepAndResumeGoesOn() {
	s.rec.steps = 3
	s.signal(time.Second, lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})
	s.signal(90*time.Second, lifecycle.SignalPause, nil)
	s.env.RegisterDelayedCallback(func() {
		st := s.status()
		s.True(st.Paused)
		s.Equal(lifecycle.PhasePaused, st.Phase)
		s.Empty(s.rec.reconciled, "paused before finishing")
		s.send(lifecycle.SignalResume, nil)
	}, 5*time.Hour)
	s.env.RegisterDelayedCallback(func() {
		s.Equal([]int64{1}, s.rec.reconciled)
		s.Equal(lifecycle.PhaseReady, s.status().Phase)
		s.send(lifecycle.SignalDelete, nil)
	}, 6*time.Hour)
	s.chain.Execute("Test", Input{ObjectRef: testRef})
	s.NoError(s.env.GetWorkflowError())
}

func (s *lifecycleSuite) TestDeleteDuringReconcileCancelsItAndTearsDown() {
	s.rec.steps = 10
	s.signal(time.Second, lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})
	s.signal(150*time.Second, lifecycle.SignalDelete, nil)
	s.chain.Execute("Test", Input{ObjectRef: testRef})
	s.NoError(s.env.GetWorkflowError())
	s.Empty(s.rec.reconciled)
	s.Equal(1, s.rec.tornDown)
	s.Equal(1, s.removed)
}

// An object whose finalizer someone took off by hand leaves the API server; the bridge tells its workflow
// (a delete signal with Gone), which stops wherever it is and ends instead of waiting or polling forever.
func (s *lifecycleSuite) TestObjectGoneLetsGo() {
	forever := func(ctx workflow.Context) error { return workflow.Await(ctx, func() bool { return false }) }
	fails := func(workflow.Context) error {
		return temporal.NewNonRetryableApplicationError("cell1 still has computes", "CellRemovalBlocked", nil)
	}
	for _, tt := range []struct {
		name         string
		steps        int
		teardown     func(workflow.Context) error
		deleteFirst  bool
		wantTornDown int
		wantDone     []int64
	}{
		{name: "during a teardown that waits with no deadline", teardown: forever, deleteFirst: true, wantTornDown: 1, wantDone: []int64{1}},
		{name: "during a teardown that failed and waits for retry", teardown: fails, deleteFirst: true, wantTornDown: 1, wantDone: []int64{1}},
		{name: "during a reconcile, before any delete signal", steps: 10, wantTornDown: 0, wantDone: nil},
	} {
		s.Run(tt.name, func() {
			s.SetupTest()
			s.rec.steps, s.rec.teardown = tt.steps, tt.teardown
			s.signal(time.Second, lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})
			at := 150 * time.Second
			if tt.deleteFirst {
				s.signal(at, lifecycle.SignalDelete, lifecycle.DeleteSignal{})
				at += time.Hour
			}
			s.signal(at, lifecycle.SignalDelete, lifecycle.DeleteSignal{Gone: true})
			s.chain.Execute("Test", Input{ObjectRef: testRef})
			s.True(s.env.IsWorkflowCompleted())
			s.NoError(s.env.GetWorkflowError())
			s.Equal(tt.wantTornDown, s.rec.tornDown)
			s.Equal(tt.wantDone, s.rec.reconciled)
			s.Equal(0, s.removed, "nothing to remove a finalizer from")
		})
	}
}

func (s *lifecycleSuite) TestApproveUpdateIsRefusedWhenNoGateWaits() {
	s.signal(time.Second, lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})
	s.env.RegisterDelayedCallback(func() {
		s.NoError(s.chain.Update(lifecycle.UpdateApprove, "u1", &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { s.ErrorContains(err, `no gate "deploy" is waiting`) },
			OnAccept:   func() { s.Fail("accepted an approval for a gate that does not wait") },
			OnComplete: func(any, error) {},
		}, lifecycle.ApproveRequest{Gate: "deploy"}))
		s.send(lifecycle.SignalDelete, nil)
	}, time.Minute)
	s.chain.Execute("Test", Input{ObjectRef: testRef})
	s.NoError(s.env.GetWorkflowError())
}

func (s *lifecycleSuite) TestCancelReportsCancelledState() {
	s.rec.steps = 10
	s.signal(time.Second, lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})
	s.env.RegisterDelayedCallback(s.env.CancelWorkflow, 150*time.Second)
	s.chain.Execute("Test", Input{ObjectRef: testRef})
	err := s.env.GetWorkflowError()
	s.Require().Error(err)
	var canceled *temporal.CanceledError
	s.True(errors.As(err, &canceled), "ends as cancelled: %v", err)
	s.Equal("Cancelled", s.lastPatch().Phase)
	s.Equal(0, s.removed, "cancel keeps the finalizer: the object still exists")
}

// A cancel that makes the running reconcile fail (a child compensated and failed) still ends the run as
// cancelled: before, the failure was recorded and the run continued as new, dropping the cancellation.
func (s *lifecycleSuite) TestCancelThatFailsTheReconcileEndsCancelled() {
	s.rec.failWhenCancelled = true
	s.signal(time.Second, lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})
	s.env.RegisterDelayedCallback(s.env.CancelWorkflow, time.Minute)
	s.chain.Execute("Test", Input{ObjectRef: testRef})
	err := s.env.GetWorkflowError()
	s.Require().Error(err)
	var canceled *temporal.CanceledError
	s.True(errors.As(err, &canceled), "ends as cancelled: %v", err)
	s.Equal(1, s.chain.Runs(), "no run after the cancelled one")
	last := s.lastPatch()
	s.Equal("Cancelled", last.Phase)
	i := slices.IndexFunc(last.Conditions, func(c metav1.Condition) bool { return c.Type == lifecycle.ConditionReady })
	s.Require().GreaterOrEqual(i, 0, "the last status write holds Ready")
	s.Equal("Cancelled", last.Conditions[i].Reason)
}

func findCondition(st lifecycle.Status, t string) (c struct{ Reason, Message string }) {
	for _, x := range st.Conditions {
		if x.Type == t {
			c.Reason, c.Message = x.Reason, x.Message
		}
	}
	return c
}

func TestWorkflowIDIsReadableAndPerLifetime(t *testing.T) {
	for _, tc := range []struct {
		ref  lifecycle.ObjectRef
		want string
	}{
		{lifecycle.ObjectRef{Kind: "OpenStackDataPlaneNode", Namespace: "openstack", Name: "edpm-compute-0", UID: "0a1b2c3d-4e5f-6789-abcd-ef0123456789"}, "OpenStackDataPlaneNode/openstack/edpm-compute-0/0a1b2c3d"},
		{lifecycle.ObjectRef{Kind: "OpenstackNode", Name: "control-0", UID: "ffff"}, "OpenstackNode/control-0/ffff"},
	} {
		require.Equal(t, tc.want, lifecycle.WorkflowID(tc.ref))
	}
}
