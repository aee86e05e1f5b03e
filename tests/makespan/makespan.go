// Package makespan models the makespan of rollouts, for benchmarks to compare measured runs with: the
// critical path of the control-plane graph and the makespan of data-plane pipelines under a strategy.
// Nothing in the product uses it.
package makespan

import "github.com/stackflow/stackflow/workflows/controlplane"

// Rollout strategies the makespan simulation compares.
const (
	// StrategyPerNode runs each node's steps back to back; a node holds a slot for its whole pipeline.
	StrategyPerNode = "PerNode"
	// StrategyBarrier runs one step (service) on every node, waits for all, then the next step: the
	// usual operator approach.
	StrategyBarrier = "BarrierPerService"
)

// Simulate is the makespan of running the steps of every node (durations[node][step], in any
// unit) on at most concurrency nodes at once, under strategy, with zero orchestration cost. Nodes are
// taken in slice order; a free slot goes to the next node at once. Benchmarks compare it with measured
// runs: with unbounded concurrency the PerNode makespan is the critical path of activity times.
func Simulate(durations [][]float64, concurrency int, strategy string) float64 {
	if concurrency < 1 {
		concurrency = 1
	}
	if strategy == StrategyBarrier {
		steps := 0
		for _, d := range durations {
			steps = max(steps, len(d))
		}
		total := 0.0
		for s := 0; s < steps; s++ {
			var jobs []float64
			for _, d := range durations {
				if s < len(d) {
					jobs = append(jobs, d[s])
				}
			}
			total += listSchedule(jobs, concurrency)
		}
		return total
	}
	jobs := make([]float64, len(durations))
	for i, d := range durations {
		for _, x := range d {
			jobs[i] += x
		}
	}
	return listSchedule(jobs, concurrency)
}

// listSchedule is the makespan of jobs taken in order, each on the slot that frees first.
func listSchedule(jobs []float64, slots int) float64 {
	free := make([]float64, min(slots, max(len(jobs), 1)))
	end := 0.0
	for _, j := range jobs {
		i := 0
		for k := range free {
			if free[k] < free[i] {
				i = k
			}
		}
		free[i] += j
		end = max(end, free[i])
	}
	return end
}

// CriticalPath returns the longest chain of dependencies of g by the given per-component durations (any
// unit), and its length: the shortest possible makespan of a full rollout with unlimited parallelism.
func CriticalPath(g controlplane.Graph, cost map[string]float64) ([]string, float64) {
	best := map[string]float64{}
	prev := map[string]string{}
	waves, err := g.Waves(nil)
	if err != nil {
		return nil, 0
	}
	var last string
	for _, w := range waves {
		for _, n := range w {
			c, _ := g.Get(n)
			start := 0.0
			for _, d := range c.DependsOn {
				if best[d] > start {
					start, prev[n] = best[d], d
				}
			}
			best[n] = start + cost[n]
			if last == "" || best[n] > best[last] {
				last = n
			}
		}
	}
	var path []string
	for n := last; n != ""; n = prev[n] {
		path = append([]string{n}, path...)
	}
	return path, best[last]
}

// Span is when one component's rollout ran (any clock, in seconds).
type Span struct{ Start, End float64 }

// Handovers is, per rolled component, the time between the last of its rolled dependencies ending and
// its own start: what the orchestration adds on a dependency edge (a root's is its start after the
// earliest start). The critical path of the measured spans plus the handovers on it is the makespan of
// the children; a scheduler at graph speed keeps every handover near zero.
func Handovers(g controlplane.Graph, spans map[string]Span) map[string]float64 {
	first := 0.0
	seen := false
	for _, s := range spans {
		if !seen || s.Start < first {
			first, seen = s.Start, true
		}
	}
	out := map[string]float64{}
	for name, s := range spans {
		ready := first
		for d := range g.Ancestors(name) {
			if ds, ok := spans[d]; ok && ds.End > ready {
				ready = ds.End
			}
		}
		out[name] = s.Start - ready
	}
	return out
}
