package controlplane

import (
	"fmt"
	"slices"
)

// RolloutSchedule is what a rollout does at one instant: the components to start now, and the ones that
// will never start because a component they need failed.
type RolloutSchedule struct {
	// Start lists the components whose every needed component is deployed, in plan order.
	Start []string
	// Blocked maps a component to the needed component that failed (or is blocked itself).
	Blocked map[string]string
}

// ScheduleRollout decides, from each component's state, which rolling components start now: every
// Pending component whose needs (plan.Needs, the rolling components it depends on, directly or not) are
// all Deployed, independently of the others. There are no levels: a component waits for its own
// dependencies only, so the rollout's makespan is its critical path plus the handovers on that path.
// A component whose need Failed or is Blocked is Blocked. A need the component installs beside
// (plan.Beside) counts once applied names it, while it is still Deploying.
func ScheduleRollout(plan RolloutPlan, state map[string]string, applied map[string]bool) RolloutSchedule {
	var s RolloutSchedule
	for _, name := range plan.Components() {
		if state[name] != ComponentPending && state[name] != "" {
			continue
		}
		ready, blocked := true, ""
		for _, need := range plan.Needs[name] {
			switch state[need] {
			case ComponentFailed, ComponentBlocked:
				blocked = need
			case ComponentDeployed:
			case ComponentDeploying:
				if !applied[need] || !slices.Contains(plan.Beside[name], need) {
					ready = false
				}
			default:
				ready = false
			}
		}
		switch {
		case blocked != "":
			if s.Blocked == nil {
				s.Blocked = map[string]string{}
			}
			s.Blocked[name] = blocked
		case ready:
			s.Start = append(s.Start, name)
		}
	}
	return s
}

// blockedMessage says why a component is not rolled out.
func blockedMessage(need string) string {
	return fmt.Sprintf("not rolled out: %s did not become Ready", need)
}
