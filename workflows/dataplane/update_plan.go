package dataplane

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stackflow/stackflow/activities/openstack"
	dataplanev1beta1 "github.com/stackflow/stackflow/api/dataplane/v1beta1"
	"github.com/stackflow/stackflow/api/lifecycle"
)

// The pure half of an OpenStackDataPlaneUpdate: which nodes start now (PlanUpdate) and where one node
// goes after each of its steps (UpdateNode.Advance). The workflow only runs the steps these name.

// Steps of one node's update, in the order of the happy path. A node's Next is the step it runs next;
// "" means the node is finished (its State says how).
const (
	// UpdateStepCheckpoint records, before anything changes, what the node runs (configuration files
	// and version on the host; version, service state and instances in Nova).
	UpdateStepCheckpoint = "checkpoint"
	// UpdateStepDisable disables the node's nova-compute service in Nova: no new instances land there.
	UpdateStepDisable = "disable"
	// UpdateStepDrain live-migrates the node's instances to other nodes, within the drain timeout.
	UpdateStepDrain = "drain"
	// UpdateStepApply installs the new version and configuration and restarts nova-compute.
	UpdateStepApply = "apply"
	// UpdateStepVerify checks that nova-compute is up, its hypervisor listed and the new version reported.
	UpdateStepVerify = "verify"
	// UpdateStepRollback restores the checkpoint (files, version) and restarts nova-compute.
	UpdateStepRollback = "rollback"
	// UpdateStepEnable re-enables the node's nova-compute service.
	UpdateStepEnable = "enable"
	// UpdateStepMigrateBack live-migrates the drained instances back to the node.
	UpdateStepMigrateBack = "migrate back"
)

// UpdateNode is what an update knows of one node.
type UpdateNode struct {
	// Name is the OpenStackDataPlaneNode; Host its hostName, the host of its compute service.
	Name string `json:"name"`
	Host string `json:"host,omitempty"`
	// Region is the region of the compute API of the node's cell (its Nova), which every call about
	// the node goes to; "" for the cloud's own region.
	Region string `json:"region,omitempty"`
	// CloudSecret is the Secret of the node's cell's services, whose clouds.yaml reaches its Nova
	// (openstack.ServiceCloud); empty for the namespace's clouds Secret.
	CloudSecret string `json:"cloudSecret,omitempty"`
	// Canary nodes run first, before the approval gate.
	Canary bool `json:"canary,omitempty"`
	// State is one of dataplanev1beta1.UpdateNode*.
	State string `json:"state"`
	// Next is the step the node runs next ("" when it is finished or has not started).
	Next string `json:"next,omitempty"`
	// Result is the state the node ends in once its remaining steps ran (set when a step decides it).
	Result string `json:"result,omitempty"`
	// Reason is the condition reason of a failure or skip.
	Reason string `json:"reason,omitempty"`
	// Failed is the step that failed, if one did.
	Failed string `json:"failed,omitempty"`
	// Message is the last thing that happened, in words.
	Message string `json:"message,omitempty"`
	// VersionBefore is what nova-compute reported at the checkpoint; VersionAfter what it reports at the end.
	VersionBefore string `json:"versionBefore,omitempty"`
	VersionAfter  string `json:"versionAfter,omitempty"`
	// Checkpoint names the node's checkpoint on its host, once taken.
	Checkpoint string `json:"checkpoint,omitempty"`
	// Servers are the instances on the node when it was disabled: the ones migrate-back returns.
	Servers []string `json:"servers,omitempty"`
	// WasDisabled is true when someone else had disabled the node's service before the update: it is
	// left disabled.
	WasDisabled bool `json:"wasDisabled,omitempty"`
	// Restarted is when the update restarted nova-compute (verification wants a report after it).
	Restarted time.Time `json:"restarted,omitempty"`
	// Moved and Returned count the instances live-migrated away and back.
	Moved    int `json:"moved,omitempty"`
	Returned int `json:"returned,omitempty"`
	// Attempts counts the node's runs (1 plus retries).
	Attempts int `json:"attempts,omitempty"`
}

// cloud is how the node's Nova is reached: its cell's clouds.yaml (else the namespace's clouds
// Secret), in the node's region.
func (n UpdateNode) cloud(namespace string) openstack.CloudSecret {
	return openstack.ServiceCloud(namespace, n.CloudSecret, n.Region)
}

// InFlight reports whether the node is between its first and last step.
func (n UpdateNode) InFlight() bool { return n.Next != "" }

// Start puts a pending node on its first step.
func (n *UpdateNode) Start() {
	n.Attempts++
	n.Next, n.Result, n.Reason, n.Failed, n.Message = UpdateStepCheckpoint, "", "", "", ""
	n.State = dataplanev1beta1.UpdateNodeDraining
}

// StepOutcome is how one step of a node ended.
type StepOutcome struct {
	// Err is nil when the step succeeded.
	Err error
	// Reason classifies a failure (a condition reason); Message says it in words.
	Reason  string
	Message string
}

// UpdateNodePolicy is what a node's path depends on besides its own outcomes.
type UpdateNodePolicy struct {
	// DrainOnFailure is dataplanev1beta1.DrainStop, DrainSkip or DrainFail.
	DrainOnFailure string
	// MigrateBack returns drained instances to the node once it is enabled again.
	MigrateBack bool
	// KeepFirstFailure keeps the failure that decided a node's result as its failed step, reason and
	// message: a later step's failure (rollback, enable, migrate back) is appended to the message, and
	// a failed rollback only raises the reason to RollbackFailed. Off for runs recorded before it
	// (workflow.GetVersion "update-first-failure"), where the last failure replaced the first.
	KeepFirstFailure bool
}

// Advance records how the node's current step ended and moves it to its next step. It returns true
// when a drain failure under the Stop policy asks the whole update to stop.
//
// Every path that disabled the node goes through enable, so no path leaves a node disabled; every path
// that changed the node's files after its checkpoint goes through rollback when it fails.
func (n *UpdateNode) Advance(step string, out StepOutcome, p UpdateNodePolicy) (stop bool) {
	ok := out.Err == nil
	switch {
	case ok:
	case p.KeepFirstFailure && (n.Failed != "" || step == UpdateStepMigrateBack && n.Result == dataplanev1beta1.UpdateNodeSucceeded):
		// The node failed before (the step that sent it down this path), which stays its cause; or it
		// was updated, and instances that stay elsewhere do not make it fail.
		n.Message += "; " + out.Message
	default:
		n.Failed, n.Reason, n.Message = step, out.Reason, out.Message
	}
	next := ""
	switch step {
	case UpdateStepCheckpoint:
		if ok {
			next = UpdateStepDisable
		} else {
			// Nothing changed yet: the node simply failed.
			n.Result = dataplanev1beta1.UpdateNodeFailed
		}
	case UpdateStepDisable:
		if ok {
			next = UpdateStepDrain
		} else {
			n.Result, next = dataplanev1beta1.UpdateNodeFailed, UpdateStepEnable
		}
	case UpdateStepDrain:
		if ok {
			next = UpdateStepApply
			break
		}
		next = UpdateStepEnable
		n.Reason = dataplanev1beta1.ReasonDrainFailed
		switch p.DrainOnFailure {
		case dataplanev1beta1.DrainSkip:
			n.Result = dataplanev1beta1.UpdateNodeSkipped
			n.Message += "; skipped (drain policy Skip): the node keeps its version"
		case dataplanev1beta1.DrainFail:
			n.Result = dataplanev1beta1.UpdateNodeFailed
			n.Message += "; failed (drain policy Fail): the node keeps its version"
		default:
			n.Result, stop = dataplanev1beta1.UpdateNodeFailed, true
			n.Message += "; the update stops (drain policy Stop): the node keeps its version"
		}
	case UpdateStepApply:
		if ok {
			next = UpdateStepVerify
		} else {
			n.Result, next = dataplanev1beta1.UpdateNodeFailed, UpdateStepRollback
		}
	case UpdateStepVerify:
		if ok {
			n.Result, next = dataplanev1beta1.UpdateNodeSucceeded, UpdateStepEnable
		} else {
			n.Result, next = dataplanev1beta1.UpdateNodeFailed, UpdateStepRollback
			if n.Reason == "" {
				n.Reason = dataplanev1beta1.ReasonVerificationFailed
			}
		}
	case UpdateStepRollback:
		next = UpdateStepEnable
		if ok {
			n.Message += "; rolled back to its checkpoint"
		} else {
			// The node is not at its checkpoint: it needs a person, which the reason says; the failure
			// that caused the rollback stays its failed step and leads its message. It is still enabled:
			// a compute that is down is never scheduled to.
			n.Reason = dataplanev1beta1.ReasonRollbackFailed
			if !p.KeepFirstFailure {
				n.Failed = UpdateStepRollback
			}
		}
	case UpdateStepEnable:
		// Instances that were on the node come back, also after a drain that moved only some of them.
		if ok && p.MigrateBack && len(n.Servers) > 0 {
			next = UpdateStepMigrateBack
		}
		if !ok {
			n.Result = dataplanev1beta1.UpdateNodeFailed
		}
	case UpdateStepMigrateBack:
		// The node is done either way; instances that did not come back run elsewhere, which is named.
		if !ok && n.Result == dataplanev1beta1.UpdateNodeSucceeded {
			n.Failed, n.Reason = "", ""
		}
	}
	n.Next = next
	n.State = updateNodeState(n)
	return stop
}

// updateNodeState is the state a node shows: what it does while in flight, its result once finished.
func updateNodeState(n *UpdateNode) string {
	switch n.Next {
	case "":
		return n.Result
	case UpdateStepCheckpoint, UpdateStepDisable, UpdateStepDrain:
		return dataplanev1beta1.UpdateNodeDraining
	case UpdateStepApply:
		return dataplanev1beta1.UpdateNodeUpdating
	case UpdateStepVerify:
		return dataplanev1beta1.UpdateNodeVerifying
	case UpdateStepRollback:
		return dataplanev1beta1.UpdateNodeRollingBack
	}
	return dataplanev1beta1.UpdateNodeReturning
}

// UpdatePolicy is an update's strategy, resolved.
type UpdatePolicy struct {
	MaxUnavailable int
	// MaxFailed nodes are tolerated; one more stops the update.
	MaxFailed          int
	ApproveAfterCanary bool
}

// UpdatePlan is the planner's decision for this instant.
type UpdatePlan struct {
	// Start lists the nodes of the next batch, to start now.
	Start []string
	// Canary is true when Start holds canary nodes.
	Canary bool
	// WaitGate is true when the canaries are done and the next batch waits for approval.
	WaitGate bool
	// BudgetExceeded is true once more nodes failed than the budget allows.
	BudgetExceeded bool
	// Done is true when nothing is in flight and nothing will start.
	Done bool
	// InFlight lists the nodes of the current batch.
	InFlight []string
	// Counts by state.
	Pending, Succeeded, Failed, Skipped int
}

// PlanUpdate decides the next batch. Batches are taken in the nodes' order, one at a time: a batch
// starts once the previous one finished, and holds at most MaxUnavailable nodes (so at most that many
// are ever disabled at once). Canary nodes come first, never mixed with others; with ApproveAfterCanary,
// the first batch after them waits until approved. Nothing starts while paused, after a Stop, or once
// more nodes failed than the budget.
func PlanUpdate(nodes []UpdateNode, p UpdatePolicy, approved, paused, stopped bool) UpdatePlan {
	var plan UpdatePlan
	canaries, pendingCanaries := 0, 0
	for _, n := range nodes {
		if n.Canary {
			canaries++
		}
		switch {
		case n.InFlight():
			plan.InFlight = append(plan.InFlight, n.Name)
		case n.State == dataplanev1beta1.UpdateNodePending:
			plan.Pending++
			if n.Canary {
				pendingCanaries++
			}
		case n.State == dataplanev1beta1.UpdateNodeSucceeded:
			plan.Succeeded++
		case n.State == dataplanev1beta1.UpdateNodeFailed:
			plan.Failed++
		case n.State == dataplanev1beta1.UpdateNodeSkipped:
			plan.Skipped++
		}
	}
	plan.BudgetExceeded = plan.Failed > p.MaxFailed
	blocked := paused || stopped || plan.BudgetExceeded
	if len(plan.InFlight) == 0 && !blocked && plan.Pending > 0 {
		size := max(p.MaxUnavailable, 1)
		plan.Canary = pendingCanaries > 0
		if !plan.Canary && canaries > 0 && p.ApproveAfterCanary && !approved {
			plan.WaitGate = true
		} else {
			for _, n := range nodes {
				if len(plan.Start) == size {
					break
				}
				if n.State == dataplanev1beta1.UpdateNodePending && !n.InFlight() && n.Canary == plan.Canary {
					plan.Start = append(plan.Start, n.Name)
				}
			}
		}
	}
	plan.Done = len(plan.InFlight) == 0 && len(plan.Start) == 0 && !plan.WaitGate && (plan.Pending == 0 || blocked)
	return plan
}

// NewUpdateNodes lists the nodes an update covers, in order, the first canary of them marked.
func NewUpdateNodes(names []string, hosts map[string]string, canary int) []UpdateNode {
	out := make([]UpdateNode, 0, len(names))
	for i, name := range names {
		out = append(out, UpdateNode{Name: name, Host: hosts[name], Canary: i < canary, State: dataplanev1beta1.UpdateNodePending})
	}
	return out
}

// SelectUpdateRetry returns the failed nodes a retry request covers (all of them when it names no
// host) and makes them pending again. Succeeded and skipped nodes are never re-run.
func SelectUpdateRetry(nodes []UpdateNode, r lifecycle.RetrySignal) []string {
	var out []string
	for i := range nodes {
		n := &nodes[i]
		if n.State != dataplanev1beta1.UpdateNodeFailed || n.InFlight() {
			continue
		}
		if len(r.Hosts) > 0 && !slices.Contains(r.Hosts, n.Name) && !slices.Contains(r.Hosts, n.Host) {
			continue
		}
		n.State, n.Result = dataplanev1beta1.UpdateNodePending, ""
		n.Message = fmt.Sprintf("retry after %s failed: %s", n.Failed, n.Message)
		out = append(out, n.Name)
	}
	return out
}

// UpdateFailures describes the failed nodes: name, step, reason and message each.
func UpdateFailures(nodes []UpdateNode) (names []string, text string) {
	var parts []string
	for _, n := range nodes {
		if n.State == dataplanev1beta1.UpdateNodeFailed {
			names = append(names, n.Name)
			parts = append(parts, fmt.Sprintf("%s (%s at %s: %s)", n.Name, firstNonEmpty(n.Reason, lifecycle.ReasonFailed), firstNonEmpty(n.Failed, "?"), n.Message))
		}
	}
	return names, strings.Join(parts, "; ")
}

// VersionClass is the custom resource class through which nova-compute reports running version v
// (see openstack.VersionClassPrefix): the prefix and v in upper case, every character outside A-Z0-9
// as _. The empty version has no class.
func VersionClass(v string) string {
	if v == "" {
		return ""
	}
	var b strings.Builder
	b.WriteString(openstack.VersionClassPrefix)
	for _, r := range strings.ToUpper(v) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// BoundUpdateNodeStates keeps at most max of an update's node states, the ones a person looks for first:
// failed, then in flight (rolling back, draining, updating, verifying, returning), pending, skipped, and
// updated last, each group in the update's order; it returns how many it left out. Every status write
// sends the whole list, so unbounded a 200-node update wrote 29 KB per change (3.3 MB of one run's history).
func BoundUpdateNodeStates(states []dataplanev1beta1.UpdateNodeState, max int) ([]dataplanev1beta1.UpdateNodeState, int) {
	if len(states) <= max {
		return states, 0
	}
	rank := map[string]int{
		dataplanev1beta1.UpdateNodeFailed: 0, dataplanev1beta1.UpdateNodeRollingBack: 1, dataplanev1beta1.UpdateNodeDraining: 1,
		dataplanev1beta1.UpdateNodeUpdating: 1, dataplanev1beta1.UpdateNodeVerifying: 1, dataplanev1beta1.UpdateNodeReturning: 1,
		dataplanev1beta1.UpdateNodePending: 2, dataplanev1beta1.UpdateNodeSkipped: 3, dataplanev1beta1.UpdateNodeSucceeded: 4,
	}
	out := slices.Clone(states)
	slices.SortStableFunc(out, func(a, b dataplanev1beta1.UpdateNodeState) int { return rank[a.State] - rank[b.State] })
	return out[:max], len(states) - max
}
