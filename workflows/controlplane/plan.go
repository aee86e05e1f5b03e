package controlplane

import (
	"fmt"
	"slices"

	"github.com/stackflow/stackflow/activities/helm"
)

// RolloutPlan is what a rollout will do: which components roll (in waves, graph order), which are left
// alone because their deployed release already matches, and which releases are removed because their
// component was disabled.
//
// A component rolls when its release is missing, not in the deployed state, or deployed with another
// values hash. Its dependents roll only when their own rendered values changed; a dependent that declares
// the changed component in RestartWith carries that component's hash in its values, so it changes too.
type RolloutPlan struct {
	Waves     [][]string        `json:"waves,omitempty"`
	Reasons   map[string]string `json:"reasons,omitempty"`
	Unchanged []string          `json:"unchanged,omitempty"`
	Remove    []string          `json:"remove,omitempty"`
	// Needs lists, per rolling component, the rolling components it transitively depends on: it starts
	// as soon as they are Ready, not when a whole wave is.
	Needs map[string][]string `json:"needs,omitempty"`
	// Beside lists, per rolling component, the needs an applied release satisfies (the rolling
	// dependencies it installs beside, see Component.InstallsBeside).
	Beside map[string][]string `json:"beside,omitempty"`
}

// Components lists the rolling components in wave order.
func (p RolloutPlan) Components() []string {
	var out []string
	for _, w := range p.Waves {
		out = append(out, w...)
	}
	return out
}

// Empty is true when nothing would change.
func (p RolloutPlan) Empty() bool { return len(p.Waves) == 0 && len(p.Remove) == 0 }

// PlanRollout compares the rendered components with the releases Helm reports.
func PlanRollout(g Graph, rendered map[string]RenderedComponent, deployed map[string]helm.ReleaseInfo) (RolloutPlan, error) {
	plan := RolloutPlan{Reasons: map[string]string{}, Needs: map[string][]string{}}
	var rolling []string
	for _, name := range g.Names() {
		r, rel := rendered[name], deployed[name]
		switch {
		case !r.Enabled && rel.Exists:
			plan.Remove = append(plan.Remove, name)
			plan.Reasons[name] = "disabled in the profile"
			if r.External {
				plan.Reasons[name] = "external in the profile (the site provides it)"
			}
		case !r.Enabled:
		case !rel.Exists:
			rolling = append(rolling, name)
			plan.Reasons[name] = "not installed"
		case rel.Status != helm.ReleaseDeployed:
			rolling = append(rolling, name)
			plan.Reasons[name] = fmt.Sprintf("release is %s", rel.Status)
		case rel.ValuesHash != r.ValuesHash:
			rolling = append(rolling, name)
			plan.Reasons[name] = fmt.Sprintf("values changed (%s → %s)", orNone(rel.ValuesHash), r.ValuesHash)
		default:
			plan.Unchanged = append(plan.Unchanged, name)
		}
	}
	waves, err := g.Waves(rolling)
	if err != nil {
		return RolloutPlan{}, err
	}
	if len(rolling) > 0 {
		plan.Waves = waves
	}
	for _, name := range rolling {
		anc := g.Ancestors(name)
		needs := []string{}
		for _, other := range rolling {
			if anc[other] {
				needs = append(needs, other)
			}
		}
		slices.Sort(needs)
		plan.Needs[name] = needs
		c, _ := g.Get(name)
		for _, b := range c.InstallsBeside {
			if slices.Contains(needs, b) {
				if plan.Beside == nil {
					plan.Beside = map[string][]string{}
				}
				plan.Beside[name] = append(plan.Beside[name], b)
			}
		}
	}
	return plan, nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
