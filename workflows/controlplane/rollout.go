package controlplane

import (
	"fmt"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/activities/helm"
	kupenstackv1alpha1 "github.com/stackflow/stackflow/api/kupenstack/v1alpha1"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/workflows/object"
)

// RolloutComponentWorkflowName is the workflow type of one component's rollout.
const RolloutComponentWorkflowName = "RolloutComponent"

// ComponentRolloutInput is one component's rollout: the release, its chart and rendered values.
type ComponentRolloutInput struct {
	// Kind and Object name the object whose rollout this is (for search attributes).
	Kind      string   `json:"kind"`
	Object    string   `json:"object"`
	Component string   `json:"component"`
	Namespace string   `json:"namespace"`
	Chart     ChartRef `json:"chart"`
	// Values are the rendered values, stored by the parent (by reference: they stay out of history).
	Values           helm.ValuesRef `json:"values"`
	ValuesHash       string         `json:"valuesHash"`
	ReadinessTimeout time.Duration  `json:"readinessTimeout"`
}

// ComponentRolloutResult is what a component's rollout did.
type ComponentRolloutResult struct {
	Component    string `json:"component"`
	Action       string `json:"action"`
	Revision     int    `json:"revision"`
	ChartVersion string `json:"chartVersion"`
	ValuesHash   string `json:"valuesHash"`
	// Recovered says how a release stuck in a pending state was recovered first, if it was.
	Recovered string `json:"recovered,omitempty"`
}

// Step names of a component rollout, as its current details show them.
const (
	StepRecover = "recover stuck release"
	StepUpgrade = "helm upgrade-or-install"
	StepWait    = "wait for readiness"
	StepRevert  = "roll back"
)

// SignalComponentApplied is the signal a component's rollout sends its parent once its release is
// applied (installed or upgraded, not yet Ready); the payload is the component's name. Components that
// install beside it start then.
const SignalComponentApplied = "component-applied"

// Version changes of the component rollout and its parent.
const (
	// ChangeSignalApplied: a component's rollout signals SignalComponentApplied to its parent.
	ChangeSignalApplied = "component-signal-applied"
	// ChangeRollBackOnCancel: a component's rollout cancelled while it waits for readiness rolls its
	// release back, as a failure does, instead of leaving the revision it applied.
	ChangeRollBackOnCancel = "component-roll-back-on-cancel"
	// ChangeInstallBeside: a rollout starts a component once the dependencies it installs beside are
	// applied (RolloutPlan.Beside), and cancels it when one of them fails.
	ChangeInstallBeside = "rollout-install-beside"
	// ChangeNeutronBeside: neutron installs beside keystone and placement (Component.BesideSince).
	ChangeNeutronBeside = "rollout-neutron-beside"
)

// RolloutComponentWorkflow rolls out one component's Helm release: it recovers a release stuck in a
// pending state, upgrades or installs it (nothing when the deployed release already has this chart
// version and values hash), and waits until its workloads are Ready. When the upgrade fails or never
// becomes Ready it rolls back to the last good revision and fails with Helm's message.
func RolloutComponentWorkflow(ctx workflow.Context, in ComponentRolloutInput) (*ComponentRolloutResult, error) {
	if err := workflow.UpsertTypedSearchAttributes(ctx, lifecycle.SAKind.ValueSet(in.Kind), lifecycle.SAObject.ValueSet(in.Object),
		lifecycle.SAComponent.ValueSet(in.Component), lifecycle.SAPhase.ValueSet(lifecycle.PhaseRunning)); err != nil {
		return nil, fmt.Errorf("search attributes of component %s: %w", in.Component, err)
	}
	res := &ComponentRolloutResult{Component: in.Component, ChartVersion: in.Chart.Version, ValuesHash: in.ValuesHash}
	details := func(step, note string) {
		s := fmt.Sprintf("**%s** · chart `%s-%s` · values `%s` · step **%s**", in.Component, in.Chart.Name, in.Chart.Version, in.ValuesHash, step)
		if note != "" {
			s += "\n\n" + note
		}
		workflow.SetCurrentDetails(ctx, s)
	}
	release := helm.ReleaseInput{Component: in.Component, Release: in.Component, Namespace: in.Namespace,
		Chart: in.Chart, Values: in.Values, ValuesHash: in.ValuesHash}

	var up helm.UpgradeResult
	var rec helm.RecoverResult
	for attempt := 0; ; attempt++ {
		details(StepRecover, "")
		if err := workflow.ExecuteActivity(helmActivity(ctx, 5*time.Minute), helmActs.Recover,
			helm.RecoverInput{Release: in.Component, Namespace: in.Namespace}).Get(ctx, &rec); err != nil {
			return nil, fail(ctx, in, fmt.Errorf("component %s: recover release: %w", in.Component, err))
		}
		if rec.Action != "none" {
			res.Recovered = rec.Message
		}
		details(StepUpgrade, res.Recovered)
		err := workflow.ExecuteActivity(helmActivity(ctx, 6*time.Minute), helmActs.UpgradeOrInstall, release).Get(ctx, &up)
		if err == nil {
			break
		}
		// A retried attempt of a killed worker can leave the release pending: recover, then try again.
		if object.FailureReason(err) == helm.ErrPending && attempt < 2 {
			continue
		}
		if object.FailureReason(err) == helm.ErrUpgradeFailed {
			return nil, rollBack(ctx, in, rec.LastGood, rec.Revision+1, err)
		}
		return nil, fail(ctx, in, fmt.Errorf("component %s: %w", in.Component, err))
	}
	res.Action, res.Revision = up.Action, up.Revision
	if p := workflow.GetInfo(ctx).ParentWorkflowExecution; p != nil &&
		workflow.GetVersion(ctx, ChangeSignalApplied, workflow.DefaultVersion, 1) == 1 {
		// Not waited on: the parent is running (it waits for this child), and a lost signal only means
		// what installs beside this component starts when it is Ready.
		workflow.SignalExternalWorkflow(ctx, p.ID, "", SignalComponentApplied, in.Component)
	}

	details(StepWait, fmt.Sprintf("%s → revision %d", up.Action, up.Revision))
	err := workflow.ExecuteActivity(helmActivity(ctx, in.ReadinessTimeout+2*time.Minute), helmActs.WaitReady,
		helm.WaitInput{Release: in.Component, Namespace: in.Namespace, Revision: up.Revision, Timeout: in.ReadinessTimeout}).Get(ctx, nil)
	if err != nil {
		if up.Action == "none" {
			return nil, fail(ctx, in, fmt.Errorf("component %s: %w", in.Component, err))
		}
		if temporal.IsCanceledError(err) && workflow.GetVersion(ctx, ChangeRollBackOnCancel, workflow.DefaultVersion, 1) == 1 {
			// Cancelled (a dependency it installed beside failed, or the rollout was stopped): put the
			// release back as a failure would, in a context the cancellation does not reach.
			dctx, _ := workflow.NewDisconnectedContext(ctx)
			return nil, rollBack(dctx, in, up.Previous, up.Revision,
				temporal.NewNonRetryableApplicationError("cancelled while waiting for readiness", "Cancelled", nil))
		}
		return nil, rollBack(ctx, in, up.Previous, up.Revision, err)
	}
	// The values of earlier rollouts of this component are no longer needed (Helm keeps its own).
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), helmActs.PruneValues, in.Values).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("prune stored values", "component", in.Component, "error", err)
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, lifecycle.SAPhase.ValueSet(lifecycle.PhaseReady))
	details("done", fmt.Sprintf("%s → revision %d Ready", up.Action, up.Revision))
	return res, nil
}

// rollBack returns the release to its last good revision (uninstalls a first install), waits for it,
// and fails the rollout with the original failure and what the rollback did.
func rollBack(ctx workflow.Context, in ComponentRolloutInput, to, failed int, cause error) error {
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("**%s** · step **%s** to revision %d\n\n%s", in.Component, StepRevert, to, object.FailureMessage(cause)))
	var rb helm.RollbackResult
	if err := workflow.ExecuteActivity(helmActivity(ctx, 6*time.Minute), helmActs.Rollback,
		helm.RollbackInput{Release: in.Component, Namespace: in.Namespace, To: to, Failed: failed}).Get(ctx, &rb); err != nil {
		return fail(ctx, in, fmt.Errorf("component %s: %s; rollback failed too: %w", in.Component, object.FailureMessage(cause), err))
	}
	what := "uninstalled the release (it was never deployed)"
	if to > 0 {
		what = fmt.Sprintf("rolled back to revision %d as revision %d (Helm: %s)", to, rb.Revision, rb.Description)
		// The good revision was Ready before; wait until it is again, briefly.
		_ = workflow.ExecuteActivity(helmActivity(ctx, 4*time.Minute), helmActs.WaitReady,
			helm.WaitInput{Release: in.Component, Namespace: in.Namespace, Revision: rb.Revision, Timeout: 2 * time.Minute}).Get(ctx, nil)
	}
	return fail(ctx, in, temporal.NewNonRetryableApplicationError(fmt.Sprintf("component %s: %s; %s", in.Component, object.FailureMessage(cause), what), object.FailureReason(cause), nil))
}

func fail(ctx workflow.Context, in ComponentRolloutInput, err error) error {
	_ = workflow.UpsertTypedSearchAttributes(ctx, lifecycle.SAPhase.ValueSet(lifecycle.PhaseFailed))
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("**%s** · **Failed**\n\n%s", in.Component, object.FailureMessage(err)))
	// Fail the child for good with the cause's type and message: the parent decides about retries.
	return temporal.NewNonRetryableApplicationError(object.FailureMessage(err), object.FailureReason(err), nil)
}

// helmActivity routes a Helm activity to the Kubernetes queue. Heartbeats let a killed worker's attempt
// be retried within seconds; a few attempts cover an unreachable repository or API server before the
// component fails with the cause.
func helmActivity(ctx workflow.Context, timeout time.Duration) workflow.Context {
	return object.OnKube(ctx, workflow.ActivityOptions{

		StartToCloseTimeout: timeout,
		HeartbeatTimeout:    20 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    20 * time.Second,
			MaximumAttempts:    6,
		},
	})
}

// ComponentWorkflowID is the ID of a component's rollout: the parent's workflow ID and the component,
// e.g. KupenstackConfiguration/cloud/1a2b3c4d/nova.
func ComponentWorkflowID(parentID, component string) string {
	return parentID + "/" + component
}

// States of a component in status.components.
const (
	ComponentPending   = "Pending"
	ComponentDeploying = "Deploying"
	ComponentDeployed  = "Deployed"
	ComponentFailed    = "Failed"
	ComponentDisabled  = "Disabled"
	ComponentBlocked   = "Blocked"
)

// valuesRef is where a rendered component's values are stored in namespace.
func valuesRef(namespace string, r RenderedComponent) helm.ValuesRef {
	return helm.ValuesRef{Namespace: namespace, Component: r.Name, Hash: r.ValuesHash}
}

// storeValues stores the rendered values of the named components (side by side), so children and
// activities get them by reference.
func storeValues(ctx workflow.Context, namespace string, names []string, rendered map[string]RenderedComponent) error {
	futures := make([]workflow.Future, len(names))
	for i, name := range names {
		r := rendered[name]
		futures[i] = workflow.ExecuteActivity(object.KubeActivity(ctx), helmActs.StoreValues,
			helm.StoreValuesInput{Ref: valuesRef(namespace, r), Values: r.Values})
	}
	for i, f := range futures {
		if err := f.Get(ctx, nil); err != nil {
			return fmt.Errorf("store values of %s: %w", names[i], err)
		}
	}
	return nil
}

// storeAllValues stores the rendered values of the named components in one activity (see
// helm.Helm.StoreAllValues); the future settles once all are stored.
func storeAllValues(ctx workflow.Context, namespace string, names []string, rendered map[string]RenderedComponent) workflow.Future {
	in := helm.StoreAllValuesInput{Items: make([]helm.StoreValuesInput, len(names))}
	for i, name := range names {
		r := rendered[name]
		in.Items[i] = helm.StoreValuesInput{Ref: valuesRef(namespace, r), Values: r.Values}
	}
	return workflow.ExecuteActivity(object.KubeActivity(ctx), helmActs.StoreAllValues, in)
}

// rolloutOutcome is what executing a plan gave: per component status and the first failure.
type rolloutOutcome struct {
	failed []string
	err    error
}

// executeRollout runs the plan's components as child workflows, each as soon as the rolling components
// it depends on are Ready, so independent components run in parallel. A failed component blocks its
// dependents but not the others. report is called whenever a component's status changes.
func executeRollout(ctx workflow.Context, lc *object.Lifecycle, kind, namespace string, plan RolloutPlan,
	rendered map[string]RenderedComponent, status map[string]kupenstackv1alpha1.ComponentStatus, report func()) rolloutOutcome {
	parentID := workflow.GetInfo(ctx).WorkflowExecution.ID
	var out rolloutOutcome
	running := 0
	stopped := false // paused-then-deleted: start nothing more
	sel := workflow.NewSelector(ctx)
	// Installing beside a dependency: applied names the Deploying components whose release is applied;
	// besideOf, per running component, the needs it started beside (still Deploying then); cancels stop
	// it when one of them fails, and blockedBy remembers which.
	applied := map[string]bool{}
	besideOf := map[string][]string{}
	cancels := map[string]workflow.CancelFunc{}
	blockedBy := map[string]string{}
	if workflow.GetVersion(ctx, ChangeInstallBeside, workflow.DefaultVersion, 1) == 1 {
		ch := workflow.GetSignalChannel(ctx, SignalComponentApplied)
		// A signal left from an earlier rollout of this run is stale: nothing runs yet.
		for ch.ReceiveAsync(nil) {
		}
		sel.AddReceive(ch, func(c workflow.ReceiveChannel, _ bool) {
			var name string
			c.Receive(ctx, &name)
			if st, ok := status[name]; ok && st.State == ComponentDeploying && !applied[name] {
				applied[name] = true
				st.Message = "release applied; waiting until Ready"
				status[name] = st
				report()
			}
		})
		plan.Beside = besideAsRecorded(ctx, ControlPlane, plan.Beside)
	} else {
		plan.Beside = nil
	}
	for {
		state := make(map[string]string, len(status))
		//workflowcheck:ignore -- reviewed: the result does not depend on the map's order
		for name, st := range status {
			state[name] = st.State
		}
		sched := ScheduleRollout(plan, state, applied)
		// A component started beside a dependency that failed since cannot become Ready: stop it.
		for _, name := range workflow.DeterministicKeys(besideOf) {
			for _, need := range besideOf[name] {
				if s := state[need]; (s == ComponentFailed || s == ComponentBlocked) && blockedBy[name] == "" {
					blockedBy[name] = need
					cancels[name]()
				}
			}
		}
		for _, name := range workflow.DeterministicKeys(sched.Blocked) {
			st := status[name]
			st.State, st.Message = ComponentBlocked, blockedMessage(sched.Blocked[name])
			status[name] = st
			report()
		}
		next := sched.Start
		for _, name := range next {
			if stopped {
				break
			}
			if err := lc.Step(ctx, "roll out "+name); err != nil {
				out.err, stopped = err, true
				break
			}
			r := rendered[name]
			st := status[name]
			st.State, st.Message = ComponentDeploying, "helm upgrade-or-install of chart "+r.Chart.Name+"-"+r.Chart.Version
			status[name] = st
			report()
			cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
				WorkflowID:            ComponentWorkflowID(parentID, name),
				TaskQueue:             lifecycle.WorkflowQueue,
				WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
				ParentClosePolicy:     enums.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
				TypedSearchAttributes: temporal.NewSearchAttributes(lifecycle.SAKind.ValueSet(kind), lifecycle.SAObject.ValueSet(lc.Ref.Key()), lifecycle.SAComponent.ValueSet(name)),
			})
			for _, need := range plan.Beside[name] {
				if state[need] == ComponentDeploying {
					besideOf[name] = append(besideOf[name], need)
				}
			}
			if len(besideOf[name]) > 0 {
				cctx, cancels[name] = workflow.WithCancel(cctx)
			}
			f := workflow.ExecuteChildWorkflow(cctx, RolloutComponentWorkflowName, ComponentRolloutInput{
				Kind: kind, Object: lc.Ref.Key(), Component: name, Namespace: namespace, Chart: r.Chart,
				Values: valuesRef(namespace, r), ValuesHash: r.ValuesHash, ReadinessTimeout: r.ReadinessTimeout,
			})
			running++
			sel.AddFuture(f, func(f workflow.Future) {
				running--
				delete(besideOf, name)
				var res ComponentRolloutResult
				err := f.Get(ctx, &res)
				st := status[name]
				if need := blockedBy[name]; need != "" && err != nil {
					st.State, st.Message = ComponentBlocked, blockedMessage(need)+"; "+object.FailureMessage(err)
				} else if err != nil {
					st.State, st.Message = ComponentFailed, object.FailureMessage(err)
					out.failed = append(out.failed, name)
					if out.err == nil {
						out.err = temporal.NewNonRetryableApplicationError(object.FailureMessage(err), object.FailureReason(err), nil)
					}
				} else {
					st.State, st.Revision, st.ChartVersion, st.ValuesHash = ComponentDeployed, int32(res.Revision), res.ChartVersion, res.ValuesHash
					st.Message = fmt.Sprintf("%s → revision %d Ready", res.Action, res.Revision)
					if res.Recovered != "" {
						st.Message += "; " + res.Recovered
					}
				}
				status[name] = st
				report()
			})
		}
		if running == 0 {
			return out
		}
		sel.Select(ctx)
		if ctx.Err() != nil && out.err == nil {
			out.err = ctx.Err()
		}
	}
}

// besideAsRecorded drops from beside the pairs whose version change (Component.BesideSince) a run
// recorded before: such a run started the component at that dependency's Ready. The changes are asked
// in the graph's order, so every replay asks the same ones.
func besideAsRecorded(ctx workflow.Context, g Graph, beside map[string][]string) map[string][]string {
	var out map[string][]string
	for _, c := range g {
		for _, need := range beside[c.Name] {
			if change, ok := c.BesideSince[need]; ok && workflow.GetVersion(ctx, change, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
				continue
			}
			if out == nil {
				out = map[string][]string{}
			}
			out[c.Name] = append(out[c.Name], need)
		}
	}
	return out
}
