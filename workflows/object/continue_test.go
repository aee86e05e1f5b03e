package object_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/api/lifecycle"
	. "github.com/stackflow/stackflow/workflows/object"
	"github.com/stackflow/stackflow/workflows/object/objecttest"
)

// itemReconciler has a signal of its own, "item": a reconcile takes the items delivered so far into its
// record, then works for a while, so items sent meanwhile are still unread when the run continues as
// new. Drain takes them.
type itemReconciler struct {
	work   time.Duration
	items  []string
	passes int
}

type itemRecord struct {
	Items []string `json:"items,omitempty"`
}

const signalItem = "item"

func (r *itemReconciler) take(ctx workflow.Context, lc *Lifecycle) error {
	var rec itemRecord
	if err := lc.Load(&rec); err != nil {
		return err
	}
	var it string
	for workflow.GetSignalChannel(ctx, signalItem).ReceiveAsync(&it) {
		rec.Items = append(rec.Items, it)
	}
	r.items = rec.Items
	return lc.Save(rec)
}

func (r *itemReconciler) Reconcile(ctx workflow.Context, lc *Lifecycle, _ *kube.Object) error {
	r.passes++
	if err := r.take(ctx, lc); err != nil {
		return err
	}
	return workflow.Sleep(ctx, r.work)
}

func (r *itemReconciler) Teardown(workflow.Context, *Lifecycle) error { return nil }

func (r *itemReconciler) Drain(ctx workflow.Context, lc *Lifecycle) error { return r.take(ctx, lc) }

// chainEnv is a test environment running one object workflow (kind "Test") with r as a chain of runs,
// with a fake Kubernetes API whose object is at *gen.
type chainEnv struct {
	env        *testsuite.TestWorkflowEnvironment
	chain      *objecttest.Chain
	gen        int64
	patches    []kube.StatusPatch
	activities []string
	timers     int
	removed    int
}

func newChainEnv(t *testing.T, r Reconciler) *chainEnv { return newChainEnvWrites(t, r, 0) }

// newChainEnvWrites is newChainEnv with status writes that take write.
func newChainEnvWrites(t *testing.T, r Reconciler, write time.Duration) *chainEnv {
	var ts testsuite.WorkflowTestSuite
	c := &chainEnv{env: ts.NewTestWorkflowEnvironment(), gen: 1}
	c.chain = objecttest.New(c.env)
	c.env.RegisterActivity(&kube.Kube{})
	c.env.OnActivity(kubeActs.GetObject, mock.Anything, mock.Anything).Return(
		func(context.Context, lifecycle.ObjectRef) (*kube.Object, error) {
			return &kube.Object{Exists: true, Generation: c.gen}, nil
		})
	c.env.OnActivity(kubeActs.PatchStatus, mock.Anything, mock.Anything).After(write).Return(
		func(_ context.Context, p kube.StatusPatch) error { c.patches = append(c.patches, p); return nil })
	c.env.OnActivity(kubeActs.RemoveFinalizer, mock.Anything, mock.Anything).Return(
		func(context.Context, lifecycle.ObjectRef) error { c.removed++; return nil })
	c.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		c.activities = append(c.activities, info.ActivityType.Name)
	})
	c.env.SetOnTimerScheduledListener(func(string, time.Duration) { c.timers++ })
	c.env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in Input) error {
		return Run(ctx, in, r, Options{})
	}, workflow.RegisterOptions{Name: "Test"})
	return c
}

func (c *chainEnv) at(d time.Duration, fn func()) { c.env.RegisterDelayedCallback(fn, d) }

func (c *chainEnv) send(t *testing.T, name string, arg any) {
	require.NoError(t, c.chain.Signal(name, arg))
}

func (c *chainEnv) run(t *testing.T) {
	c.chain.Execute("Test", Input{ObjectRef: testRef})
	require.True(t, c.env.IsWorkflowCompleted())
	require.NoError(t, c.env.GetWorkflowError())
}

// A settled reconcile continues as new; the run that follows holds the state and, while there is
// nothing to do, does nothing at all: no activity, no timer, no status write.
func TestSettledReconcileContinuesAsNewAndAnIdleRunDoesNothing(t *testing.T) {
	c := newChainEnv(t, &itemReconciler{work: time.Minute})
	c.at(time.Second, func() { c.send(t, lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1}) })
	var acts, timers, patches int
	c.at(5*time.Minute, func() {
		require.Equal(t, 2, c.chain.Runs(), "the settled reconcile continued as new")
		st, err := c.chain.Status()
		require.NoError(t, err)
		require.Equal(t, lifecycle.PhaseReady, st.Phase)
		require.EqualValues(t, 1, st.ObservedGeneration, "the state is carried")
		acts, timers, patches = len(c.activities), c.timers, len(c.patches)
	})
	c.at(48*time.Hour, func() {
		require.Equal(t, acts, len(c.activities), "activities while idle: %v", c.activities[acts:])
		require.Equal(t, timers, c.timers, "timers while idle")
		require.Equal(t, patches, len(c.patches), "status writes while idle")
		require.Equal(t, 2, c.chain.Runs())
		c.send(t, lifecycle.SignalDelete, nil)
	})
	c.run(t)
}

// Every status write sends what changed since the last one, and a new run writes nothing it carried.
func TestStatusWritesSendOnlyWhatChanged(t *testing.T) {
	c := newChainEnv(t, &itemReconciler{work: time.Minute})
	c.at(time.Second, func() { c.send(t, lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1}) })
	c.at(time.Hour, func() {
		c.gen = 2
		c.send(t, lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 2})
	})
	c.at(2*time.Hour, func() { c.send(t, lifecycle.SignalDelete, nil) })
	c.run(t)

	require.NotEmpty(t, c.patches)
	require.NotEmpty(t, c.patches[0].WorkflowID, "the first write names the workflow")
	require.Empty(t, c.patches[0].RunID, "the link names the workflow, not a run: it survives continue-as-new")
	phase, observed := "", int64(0)
	conds := map[string]string{}
	for i, p := range c.patches {
		if i > 0 {
			require.Empty(t, p.WorkflowID, "patch %d repeats the workflow ID", i)
		}
		require.NotEqual(t, phase, p.Phase, "patch %d repeats phase %q", i, phase)
		if p.Phase != "" {
			phase = p.Phase
		}
		if p.ObservedGeneration != nil {
			require.NotEqual(t, observed, *p.ObservedGeneration, "patch %d repeats observedGeneration", i)
			observed = *p.ObservedGeneration
		}
		for _, cond := range p.Conditions {
			key := string(cond.Status) + "/" + cond.Reason + "/" + cond.Message
			require.NotEqual(t, conds[cond.Type], key, "patch %d repeats condition %s", i, cond.Type)
			conds[cond.Type] = key
		}
		require.False(t, p.Phase == "" && p.CurrentStep == nil && p.ObservedGeneration == nil && len(p.Conditions) == 0 && len(p.Fields) == 0 && p.WorkflowID == "",
			"patch %d writes nothing", i)
	}
	require.EqualValues(t, 2, observed)
	require.Equal(t, lifecycle.PhaseDeleting, phase)
}

// Signals of the reconciler's own that arrive while it works, unread when the run continues as new,
// are taken by Drain into the carried record; the next run starts from them.
func TestOwnSignalsSurviveContinueAsNew(t *testing.T) {
	r := &itemReconciler{work: time.Minute}
	c := newChainEnv(t, r)
	c.at(time.Second, func() { c.send(t, lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1}) })
	c.at(30*time.Second, func() {
		c.send(t, signalItem, "a")
		c.send(t, signalItem, "b")
	})
	c.at(10*time.Minute, func() {
		require.Equal(t, 2, c.chain.Runs())
		require.Equal(t, 1, r.passes)
		require.Equal(t, []string{"a", "b"}, r.items, "drained into the record at continue-as-new")
		c.send(t, signalItem, "c")
		c.send(t, lifecycle.SignalRefresh, nil)
	})
	c.at(20*time.Minute, func() {
		require.Equal(t, 2, r.passes)
		require.Equal(t, []string{"a", "b", "c"}, r.items, "the next reconcile starts from the carried items")
		require.Equal(t, 3, c.chain.Runs())
		c.send(t, lifecycle.SignalDelete, nil)
	})
	c.run(t)
}

// A loop of reconciles that never settles (a refresh arrives during every one) still continues as new
// after each; past the burst it backs off, longer each time, and says so in the Throttled condition;
// once the refreshes stop, the condition clears.
func TestReconcileLoopBacksOffAndSaysWhy(t *testing.T) {
	SetLimits(Limits{Burst: 2, MaxBackoff: 4 * time.Second})
	defer SetLimits(DefaultLimits)
	r := &itemReconciler{work: 10 * time.Second}
	c := newChainEnv(t, r)
	c.at(time.Second, func() { c.send(t, lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1}) })
	refreshing := true
	for s := 5 * time.Second; s < 3*time.Minute; s += 5 * time.Second {
		c.at(s, func() {
			if refreshing {
				c.send(t, lifecycle.SignalRefresh, nil)
			}
		})
	}
	c.at(3*time.Minute, func() {
		refreshing = false
		st, err := c.chain.Status()
		require.NoError(t, err)
		var throttled *struct{ Status, Reason string }
		for _, x := range st.Conditions {
			if x.Type == ConditionThrottled {
				throttled = &struct{ Status, Reason string }{string(x.Status), x.Reason}
			}
		}
		require.NotNil(t, throttled, "the loop is reported")
		require.Equal(t, "True", throttled.Status)
		require.Equal(t, ReasonReconcileLoop, throttled.Reason)
		// 10 s per reconcile, and waits of 2 s then 4 s (bounded) once past the burst: fewer passes than
		// an unbounded loop would make, and a run per pass.
		require.Less(t, r.passes, 18)
		require.Greater(t, r.passes, 8)
		require.GreaterOrEqual(t, c.chain.Runs(), r.passes, "a run per pass")
	})
	c.at(10*time.Minute, func() {
		st, err := c.chain.Status()
		require.NoError(t, err)
		for _, x := range st.Conditions {
			if x.Type == ConditionThrottled {
				require.Equal(t, "False", string(x.Status), "settled again")
			}
		}
		c.send(t, lifecycle.SignalDelete, nil)
	})
	c.run(t)
}

// waiter waits inside its reconcile, a minute at a time, for polls minutes, recording how far it got; a
// due history cuts the wait short (ErrContinueAsNew) and the next run resumes where it was.
type waiter struct {
	polls int
}

type waitRecord struct {
	Waited int `json:"waited"`
}

func (w *waiter) Reconcile(ctx workflow.Context, lc *Lifecycle, _ *kube.Object) error {
	var rec waitRecord
	if err := lc.Load(&rec); err != nil {
		return err
	}
	defer func() { _ = lc.Save(rec) }()
	for rec.Waited < w.polls {
		if lc.ContinueAsNewDue(ctx) {
			return ErrContinueAsNew
		}
		if err := workflow.Sleep(ctx, time.Minute); err != nil {
			return err
		}
		rec.Waited++
	}
	return nil
}

func (w *waiter) Teardown(workflow.Context, *Lifecycle) error { return nil }

func runOnce(t *testing.T, r Reconciler, in Input, setup func(env *testsuite.TestWorkflowEnvironment)) (Input, []string) {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	var acts []string
	env.RegisterActivity(&kube.Kube{})
	env.OnActivity(kubeActs.GetObject, mock.Anything, mock.Anything).Return(&kube.Object{Exists: true, Generation: 1}, nil)
	env.OnActivity(kubeActs.PatchStatus, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p kube.StatusPatch) error {
			acts = append(acts, "PatchStatus")
			return nil
		})
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in Input) error { return Run(ctx, in, r, Options{}) }, workflow.RegisterOptions{Name: "Test"})
	setup(env)
	env.ExecuteWorkflow("Test", in)
	require.True(t, env.IsWorkflowCompleted())
	next, ok := objecttest.Carried(env.GetWorkflowError())
	require.True(t, ok, "the run continues as new: %v", env.GetWorkflowError())
	return next, acts
}

// A long wait inside a reconcile continues as new when the server suggests it, carrying how far it got;
// the next run reconciles at once, without any signal, and resumes from there.
func TestLongWaitContinuesAsNewAndResumes(t *testing.T) {
	w := &waiter{polls: 5}
	next, _ := runOnce(t, w, Input{ObjectRef: testRef}, func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1}) }, time.Second)
		env.RegisterDelayedCallback(func() { env.SetContinueAsNewSuggested(true) }, 150*time.Second)
	})
	require.NotNil(t, next.Carry)
	require.True(t, next.Carry.Resume, "the cut-short reconcile resumes in the next run")
	require.EqualValues(t, 0, next.Carry.Observed)
	var rec waitRecord
	require.NoError(t, json.Unmarshal(next.Carry.Data, &rec))
	require.Equal(t, 3, rec.Waited)

	// However many runs a wait took, resuming it is no loop of reconciles: no back-off.
	next.Carry.Streak = 10
	last, _ := runOnce(t, w, next, func(*testsuite.TestWorkflowEnvironment) {})
	for _, c := range last.Carry.Conditions {
		require.NotEqual(t, ConditionThrottled, c.Type, "a resumed wait backed off")
	}
	require.False(t, last.Carry.Resume)
	require.EqualValues(t, 1, last.Carry.Observed, "the resumed reconcile finished the generation")
	require.NoError(t, json.Unmarshal(last.Carry.Data, &rec))
	require.Equal(t, 5, rec.Waited)
}

// A deletion that arrives while a settled run waits for its status write, about to continue as new,
// is torn down in that run: the finalizer goes, last, after the status says so.
func TestDeleteAsARunContinuesAsNewTearsDown(t *testing.T) {
	r := &itemReconciler{work: time.Second}
	c := newChainEnvWrites(t, r, time.Minute)
	c.at(time.Second, func() { c.send(t, lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1}) })
	c.at(30*time.Second, func() {
		require.Equal(t, 1, c.chain.Runs(), "the run waits for its first write")
		c.send(t, lifecycle.SignalDelete, nil)
	})
	c.run(t)
	require.Equal(t, 1, c.chain.Runs())
	require.Equal(t, 1, c.removed)
	require.Equal(t, lifecycle.PhaseDeleting, c.patches[len(c.patches)-1].Phase)
}

// looker waits with WaitUntil until its look number ready, noting when each look ran.
type looker struct {
	ready int
	at    []time.Time
}

func (l *looker) Reconcile(ctx workflow.Context, lc *Lifecycle, _ *kube.Object) error {
	_, err := WaitUntil(ctx, lc, 1, "Waiting", func(ctx workflow.Context) (bool, string, string, error) {
		l.at = append(l.at, workflow.Now(ctx))
		return len(l.at) >= l.ready, "NotYet", fmt.Sprintf("look %d", len(l.at)), nil
	}, nil)
	return err
}

func (l *looker) Teardown(workflow.Context, *Lifecycle) error { return nil }

// A wait looks again 2 s after its first look, then backs off to MaxWaitDelay, below the default poll
// interval: what it waits for is seen within 10 s of being done.
func TestWaitLooksAtMostMaxWaitDelayApart(t *testing.T) {
	require.Less(t, MaxWaitDelay, DefaultLimits.PollInterval)
	l := &looker{ready: 7}
	runOnce(t, l, Input{ObjectRef: testRef}, func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1}) }, time.Second)
	})
	var gaps []time.Duration
	for i := 1; i < len(l.at); i++ {
		gaps = append(gaps, l.at[i].Sub(l.at[i-1]).Round(time.Second))
	}
	require.Equal(t, []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, MaxWaitDelay, MaxWaitDelay, MaxWaitDelay}, gaps)
}
