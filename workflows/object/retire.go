package object

import (
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"
)

// Retiring a change (docs/development.md, "Retiring a change"): once no running history can need the
// old branch of a workflow.GetVersion change, the branch goes and the change's minimum supported version
// is raised to its newest. A history that still needs the old branch then fails its workflow task
// ("removed support of version") instead of taking a path the code no longer has.
//
// Retired holds the change IDs retired so far; the worker (and the replay tests) apply it through
// Interceptors, which raises the minimum of every GetVersion call of a retired change, so the call sites
// keep their shape. The upgrade test's build B (tags upgradeprobe and retireall, retire_all.go) retires
// every change but its own probe: the release after A without any old branch, which must serve the
// objects A left running.
var Retired = map[string]bool{}

// retireAll retires every change but the upgrade probe's (build B of the upgrade test only: tag
// retireall).
var retireAll bool

// retiredChange reports whether id is retired in this build.
func retiredChange(id string) bool {
	if retireAll {
		return EveryChangeButTheProbe(id)
	}
	return Retired[id]
}

// EveryChangeButTheProbe retires every change but the upgrade probe's: what build B retires.
func EveryChangeButTheProbe(id string) bool { return id != probeChange }

// probeChange is the change ID of the upgrade test's probe step (upgrade_probe.go), which build B adds:
// A's histories lack it, so it can never be retired there.
const probeChange = "upgrade-probe"

// Interceptors are the worker interceptors every stackflow workflow worker (and replayer) runs with:
// the retirement of Retired's changes.
func Interceptors() []interceptor.WorkerInterceptor {
	return []interceptor.WorkerInterceptor{Retirement(retiredChange)}
}

// Retirement is a worker interceptor that raises the minimum supported version of every GetVersion call
// of a change retired says is retired to the call's newest version.
func Retirement(retired func(changeID string) bool) interceptor.WorkerInterceptor {
	return &retirement{retired: retired}
}

type retirement struct {
	interceptor.WorkerInterceptorBase
	retired func(string) bool
}

func (r *retirement) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	in := &retirementInbound{retired: r.retired}
	in.Next = next
	return in
}

type retirementInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	retired func(string) bool
}

func (i *retirementInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	out := &retirementOutbound{retired: i.retired}
	out.Next = outbound
	return i.Next.Init(out)
}

type retirementOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	retired func(string) bool
}

func (o *retirementOutbound) GetVersion(ctx workflow.Context, changeID string, minSupported, maxSupported workflow.Version) workflow.Version {
	if o.retired(changeID) {
		minSupported = maxSupported
	}
	return o.Next.GetVersion(ctx, changeID, minSupported, maxSupported)
}
