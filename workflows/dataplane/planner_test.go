package dataplane

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	dataplanev1beta1 "github.com/stackflow/stackflow/api/dataplane/v1beta1"
	"github.com/stackflow/stackflow/api/lifecycle"
)

func nodes(states ...string) []EDPMNode {
	out := make([]EDPMNode, len(states))
	for i, s := range states {
		out[i] = EDPMNode{Name: string(rune('a' + i)), Host: "host-" + string(rune('a'+i)), State: s}
	}
	return out
}

func TestPlanEDPMRollout(t *testing.T) {
	P, R, S, F, H := EDPMPending, EDPMRunning, EDPMSucceeded, EDPMFailed, EDPMHeld
	tests := []struct {
		name           string
		nodes          []EDPMNode
		policy         EDPMPolicy
		paused         bool
		deploy         bool
		wantStart      []string
		wantDone       bool
		wantBudgetOver bool
	}{
		{name: "fills free slots in name order", nodes: nodes(P, P, P, P), policy: EDPMPolicy{MaxConcurrency: 2},
			deploy: true, wantStart: []string{"a", "b"}},
		{name: "running nodes hold their slots", nodes: nodes(R, P, P), policy: EDPMPolicy{MaxConcurrency: 2},
			deploy: true, wantStart: []string{"b"}},
		{name: "no free slot", nodes: nodes(R, R, P), policy: EDPMPolicy{MaxConcurrency: 2}, deploy: true},
		{name: "a finished node frees its slot at once (no barrier)", nodes: nodes(S, R, P, P), policy: EDPMPolicy{MaxConcurrency: 2},
			deploy: true, wantStart: []string{"c"}},
		{name: "zero concurrency still deploys one at a time", nodes: nodes(P, P), policy: EDPMPolicy{MaxConcurrency: 0},
			deploy: true, wantStart: []string{"a"}},
		{name: "a failure within budget lets the others go on", nodes: nodes(F, R, P), policy: EDPMPolicy{MaxConcurrency: 2, MaxFailed: 1},
			deploy: true, wantStart: []string{"c"}},
		{name: "over budget: nothing new starts, running ones finish", nodes: nodes(F, F, R, P), policy: EDPMPolicy{MaxConcurrency: 3, MaxFailed: 1},
			deploy: true, wantBudgetOver: true},
		{name: "over budget and nothing running: done", nodes: nodes(F, P, P), policy: EDPMPolicy{MaxConcurrency: 3},
			deploy: true, wantBudgetOver: true, wantDone: true},
		{name: "paused starts nothing", nodes: nodes(P, P), policy: EDPMPolicy{MaxConcurrency: 2}, paused: true, deploy: true},
		{name: "deploy false starts nothing and is done when idle", nodes: nodes(P, P), policy: EDPMPolicy{MaxConcurrency: 2}, wantDone: true},
		{name: "all finished: done", nodes: nodes(S, F, H), policy: EDPMPolicy{MaxConcurrency: 2, MaxFailed: 1}, deploy: true, wantDone: true},
		{name: "held nodes take no slot", nodes: nodes(H, P), policy: EDPMPolicy{MaxConcurrency: 1}, deploy: true, wantStart: []string{"b"}},
		{name: "no nodes: done", nodes: nil, policy: EDPMPolicy{MaxConcurrency: 1}, deploy: true, wantDone: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PlanEDPMRollout(tt.nodes, tt.policy, tt.paused, tt.deploy)
			if !slices.Equal(got.Start, tt.wantStart) {
				t.Errorf("Start = %v, want %v", got.Start, tt.wantStart)
			}
			if got.Done != tt.wantDone {
				t.Errorf("Done = %v, want %v", got.Done, tt.wantDone)
			}
			if got.BudgetExceeded != tt.wantBudgetOver {
				t.Errorf("BudgetExceeded = %v, want %v", got.BudgetExceeded, tt.wantBudgetOver)
			}
		})
	}
}

func TestMaxFailedNodes(t *testing.T) {
	i := func(v int32) *int32 { return &v }
	tests := []struct {
		name      string
		nodes     *int32
		pct       *int32
		total     int
		wantLimit int
	}{
		{"unset means the first failure stops", nil, nil, 10, 0},
		{"absolute", i(2), nil, 10, 2},
		{"percentage rounds down", nil, i(25), 10, 2},
		{"percentage of few nodes may be zero", nil, i(30), 3, 0},
		{"hundred percent tolerates all", nil, i(100), 7, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MaxFailedNodes(tt.nodes, tt.pct, tt.total); got != tt.wantLimit {
				t.Errorf("MaxFailedNodes = %d, want %d", got, tt.wantLimit)
			}
		})
	}
}

func TestSelectEDPMRetry(t *testing.T) {
	ns := []EDPMNode{
		{Name: "n0", Host: "edpm-compute-0", State: EDPMSucceeded, Step: "configure-os"},
		{Name: "n1", Host: "edpm-compute-1", State: EDPMFailed, Step: "configure-network"},
		{Name: "n2", Host: "edpm-compute-2", State: EDPMFailed, Step: "nova-compute"},
		{Name: "n3", Host: "edpm-compute-3", State: EDPMStopped, Step: "bootstrap"},
		{Name: "n4", Host: "edpm-compute-4", State: EDPMRunning, Step: "bootstrap"},
	}
	tests := []struct {
		name string
		sig  lifecycle.RetrySignal
		want []string
	}{
		{"everything that failed or stopped", lifecycle.RetrySignal{}, []string{"n1", "n2", "n3"}},
		{"by host name", lifecycle.RetrySignal{Hosts: []string{"edpm-compute-1"}}, []string{"n1"}},
		{"by node name", lifecycle.RetrySignal{Hosts: []string{"n2"}}, []string{"n2"}},
		{"by step", lifecycle.RetrySignal{Steps: []string{"nova-compute"}}, []string{"n2"}},
		{"host and step must both match", lifecycle.RetrySignal{Hosts: []string{"edpm-compute-1"}, Steps: []string{"nova-compute"}}, nil},
		{"succeeded and running nodes are never retried", lifecycle.RetrySignal{Hosts: []string{"n0", "n4"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SelectEDPMRetry(ns, tt.sig); !slices.Equal(got, tt.want) {
				t.Errorf("SelectEDPMRetry = %v, want %v", got, tt.want)
			}
		})
	}
}

// A large data plane's status lists the nodes a person looks for first, at most max of them, and counts
// the rest; a small one lists every node as it is.
func TestBoundNodeStates(t *testing.T) {
	st := func(name, state string) dataplanev1beta1.DataPlaneNodeState {
		return dataplanev1beta1.DataPlaneNodeState{Name: name, State: state}
	}
	all := []dataplanev1beta1.DataPlaneNodeState{st("a", EDPMSucceeded), st("b", EDPMRunning), st("c", EDPMFailed), st("d", EDPMPending), st("e", EDPMSucceeded), st("f", EDPMRunning)}
	for _, tc := range []struct {
		name    string
		max     int
		want    []string
		omitted int
	}{
		{name: "small: all, as they were", max: 10, want: []string{"a", "b", "c", "d", "e", "f"}},
		{name: "failed, running, pending first", max: 4, want: []string{"c", "b", "f", "d"}, omitted: 2},
		{name: "succeeded last, by name", max: 5, want: []string{"c", "b", "f", "d", "a"}, omitted: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, omitted := BoundNodeStates(all, tc.max)
			var names []string
			for _, s := range got {
				names = append(names, s.Name)
			}
			require.Equal(t, tc.want, names)
			require.Equal(t, tc.omitted, omitted)
			require.Equal(t, "a", all[0].Name, "the input is left as it was")
		})
	}
}
