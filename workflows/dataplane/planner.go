package dataplane

import (
	"slices"
	"strings"
	"time"

	dataplanev1beta1 "github.com/stackflow/stackflow/api/dataplane/v1beta1"
	"github.com/stackflow/stackflow/api/lifecycle"
)

// States of one node in a data-plane rollout.
const (
	// EDPMPending waits for a deployment slot.
	EDPMPending = "Pending"
	// EDPMRunning holds a slot: its pipeline (phases -1, 0, then its services) is under way.
	EDPMRunning = "Running"
	// EDPMSucceeded finished every phase.
	EDPMSucceeded = "Succeeded"
	// EDPMFailed stopped at a failed step; a retry re-runs that step only.
	EDPMFailed = "Failed"
	// EDPMHeld is not deployed: its own deploy is false.
	EDPMHeld = "Held"
	// EDPMStopped was stopped cleanly (the rollout was cancelled) at a step boundary.
	EDPMStopped = "Stopped"
)

// EDPMNode is what the data plane knows of one node's pipeline.
type EDPMNode struct {
	// Name is the OpenStackDataPlaneNode's name; Host its hostName.
	Name string `json:"name"`
	Host string `json:"host,omitempty"`
	// State is one of the Node* states.
	State string `json:"state"`
	// Phase and Step are where the node is (or failed): -1, 0 or 1, and the step's name.
	Phase int32  `json:"phase"`
	Step  string `json:"step,omitempty"`
	// Message is the last thing the node reported (the failure message when failed).
	Message string `json:"message,omitempty"`
	// Attempts counts the grants the node got in this rollout (1 + retries).
	Attempts int `json:"attempts,omitempty"`
	// Generation is the node's generation the pipeline deploys.
	Generation int64 `json:"generation,omitempty"`
	// Granted is when the node got its current slot.
	Granted time.Time `json:"granted,omitempty"`
	// Paused is set when the node's workflow may be paused (this data plane paused it, or its status said
	// so): its next grant resumes it. Since ChangeGrantResumesPaused; before, every grant resumed.
	Paused bool `json:"paused,omitempty"`
}

// EDPMPolicy bounds a rollout: how many nodes at once, and how many may fail before no new node
// starts.
type EDPMPolicy struct {
	MaxConcurrency int `json:"maxConcurrency"`
	// MaxFailed is how many failed nodes are tolerated; one more stops the rollout.
	MaxFailed int `json:"maxFailed"`
}

// EDPMPlan is the planner's decision for this instant.
type EDPMPlan struct {
	// Start lists the nodes to grant a slot now, in order.
	Start []string
	// BudgetExceeded is true once more nodes failed than the policy tolerates: nothing new starts,
	// running nodes finish.
	BudgetExceeded bool
	// Done is true when nothing runs and nothing will start.
	Done bool
	// Counts by state.
	Pending, Running, Succeeded, Failed, Held, Stopped int
}

// MaxFailedNodes resolves the failure budget of a data plane of total nodes: maxFailedNodes when set,
// else maxFailedPercentage of the nodes (rounded down), else 0 (the first failure stops the rollout).
func MaxFailedNodes(maxNodes, maxPercentage *int32, total int) int {
	switch {
	case maxNodes != nil:
		return int(*maxNodes)
	case maxPercentage != nil:
		return total * int(*maxPercentage) / 100
	}
	return 0
}

// PlanEDPMRollout decides which pending nodes start now. Nodes are taken in name order (the slice is sorted
// by the caller, see SortEDPMNodes) so the same inputs always give the same plan. A node enters its
// pipeline as soon as a slot is free; there is no barrier between nodes or phases. Paused or held
// (deploy false) rollouts start nothing.
func PlanEDPMRollout(nodes []EDPMNode, p EDPMPolicy, paused, deploy bool) EDPMPlan {
	var plan EDPMPlan
	for _, n := range nodes {
		switch n.State {
		case EDPMPending:
			plan.Pending++
		case EDPMRunning:
			plan.Running++
		case EDPMSucceeded:
			plan.Succeeded++
		case EDPMFailed:
			plan.Failed++
		case EDPMHeld:
			plan.Held++
		case EDPMStopped:
			plan.Stopped++
		}
	}
	plan.BudgetExceeded = plan.Failed > p.MaxFailed
	limit := max(p.MaxConcurrency, 1)
	if !paused && deploy && !plan.BudgetExceeded {
		free := limit - plan.Running
		for _, n := range nodes {
			if free <= 0 {
				break
			}
			if n.State == EDPMPending {
				plan.Start = append(plan.Start, n.Name)
				free--
			}
		}
	}
	waiting := plan.Pending - len(plan.Start)
	plan.Done = plan.Running == 0 && len(plan.Start) == 0 && (waiting == 0 || plan.BudgetExceeded || !deploy)
	return plan
}

// SortEDPMNodes orders nodes by name, the order the planner admits them in.
func SortEDPMNodes(nodes []EDPMNode) {
	slices.SortFunc(nodes, func(a, b EDPMNode) int { return strings.Compare(a.Name, b.Name) })
}

// MaxNodeStates bounds a data plane's status.nodeStates: every write of a change sends the whole list,
// so unbounded it made a 500-node rollout's status writes (and the data plane's history) grow with the
// square of the node count.
const MaxNodeStates = 50

// BoundNodeStates keeps at most max states, the ones a person looks for first: failed, then stopped,
// running, pending, held, and succeeded last, each group by name; it returns how many it left out.
func BoundNodeStates(states []dataplanev1beta1.DataPlaneNodeState, max int) ([]dataplanev1beta1.DataPlaneNodeState, int) {
	if len(states) <= max {
		return states, 0
	}
	rank := map[string]int{EDPMFailed: 0, EDPMStopped: 1, EDPMRunning: 2, EDPMPending: 3, EDPMHeld: 4, EDPMSucceeded: 5}
	out := slices.Clone(states)
	slices.SortStableFunc(out, func(a, b dataplanev1beta1.DataPlaneNodeState) int {
		if ra, rb := rank[a.State], rank[b.State]; ra != rb {
			return ra - rb
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out[:max], len(states) - max
}

// SelectEDPMRetry returns the failed (or stopped) nodes a retry request covers: all of them when the
// request names no host and no step; otherwise those whose name or host is in Hosts (when given) and
// whose failed step is in Steps (when given). Succeeded nodes are never selected: a retry re-runs only
// what failed.
func SelectEDPMRetry(nodes []EDPMNode, r lifecycle.RetrySignal) []string {
	var out []string
	for _, n := range nodes {
		if n.State != EDPMFailed && n.State != EDPMStopped {
			continue
		}
		if len(r.Hosts) > 0 && !slices.Contains(r.Hosts, n.Name) && !slices.Contains(r.Hosts, n.Host) {
			continue
		}
		if len(r.Steps) > 0 && !slices.Contains(r.Steps, n.Step) {
			continue
		}
		out = append(out, n.Name)
	}
	return out
}
