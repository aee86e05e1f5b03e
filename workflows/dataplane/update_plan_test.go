package dataplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stackflow/stackflow/activities/kube"
	dp "github.com/stackflow/stackflow/api/dataplane/v1beta1"
	"github.com/stackflow/stackflow/api/lifecycle"
)

// nodesIn builds update nodes named a, b, c, … from their states ("R" stands for in flight, at drain),
// the first canaries of them marked.
func nodesIn(canary int, states ...string) []UpdateNode {
	var out []UpdateNode
	for i, s := range states {
		n := UpdateNode{Name: string(rune('a' + i)), Canary: i < canary, State: s}
		if s == "R" {
			n.State, n.Next = dp.UpdateNodeDraining, UpdateStepDrain
		}
		out = append(out, n)
	}
	return out
}

func TestPlanUpdate(t *testing.T) {
	const (
		P = dp.UpdateNodePending
		S = dp.UpdateNodeSucceeded
		F = dp.UpdateNodeFailed
		K = dp.UpdateNodeSkipped
		R = "R"
	)
	cases := []struct {
		name                      string
		nodes                     []UpdateNode
		policy                    UpdatePolicy
		approved, paused, stopped bool
		start                     []string
		canary, gate, done        bool
		budget                    bool
	}{
		{name: "the canary goes alone first", nodes: nodesIn(1, P, P, P),
			policy: UpdatePolicy{MaxUnavailable: 2}, start: []string{"a"}, canary: true},
		{name: "canaries are batched by maxUnavailable too", nodes: nodesIn(3, P, P, P, P),
			policy: UpdatePolicy{MaxUnavailable: 2}, start: []string{"a", "b"}, canary: true},
		{name: "canaries never mix with the others", nodes: nodesIn(3, S, S, P, P, P),
			policy: UpdatePolicy{MaxUnavailable: 2}, start: []string{"c"}, canary: true},
		{name: "a batch waits for the previous one", nodes: nodesIn(1, S, R, P, P),
			policy: UpdatePolicy{MaxUnavailable: 2}},
		{name: "after the canary, batches of maxUnavailable", nodes: nodesIn(1, S, P, P, P),
			policy: UpdatePolicy{MaxUnavailable: 2}, start: []string{"b", "c"}},
		{name: "the gate holds the first batch after the canary", nodes: nodesIn(1, S, P, P),
			policy: UpdatePolicy{MaxUnavailable: 1, ApproveAfterCanary: true}, gate: true},
		{name: "approved, the batch starts", nodes: nodesIn(1, S, P, P),
			policy: UpdatePolicy{MaxUnavailable: 1, ApproveAfterCanary: true}, approved: true, start: []string{"b"}},
		{name: "no gate without canaries", nodes: nodesIn(0, P, P),
			policy: UpdatePolicy{MaxUnavailable: 1, ApproveAfterCanary: true}, start: []string{"a"}},
		{name: "a failure within budget goes on", nodes: nodesIn(1, F, P),
			policy: UpdatePolicy{MaxUnavailable: 1, MaxFailed: 1}, start: []string{"b"}},
		{name: "over budget: nothing starts, done", nodes: nodesIn(1, F, P),
			policy: UpdatePolicy{MaxUnavailable: 1}, budget: true, done: true},
		{name: "over budget waits for the batch in flight", nodes: nodesIn(0, F, R, P),
			policy: UpdatePolicy{MaxUnavailable: 2}, budget: true},
		{name: "paused: nothing starts, done once the batch finished", nodes: nodesIn(1, S, P),
			policy: UpdatePolicy{MaxUnavailable: 1}, paused: true, done: true},
		{name: "stopped by a drain failure", nodes: nodesIn(1, F, P),
			policy: UpdatePolicy{MaxUnavailable: 1, MaxFailed: 5}, stopped: true, done: true},
		{name: "skipped nodes do not count as failed", nodes: nodesIn(1, K, K, P),
			policy: UpdatePolicy{MaxUnavailable: 1}, start: []string{"c"}},
		{name: "everything finished", nodes: nodesIn(1, S, K, F),
			policy: UpdatePolicy{MaxUnavailable: 1, MaxFailed: 1}, done: true},
		{name: "a retried canary runs again before the others", nodes: nodesIn(1, P, S, P),
			policy: UpdatePolicy{MaxUnavailable: 2, ApproveAfterCanary: true}, approved: true, start: []string{"a"}, canary: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan := PlanUpdate(tc.nodes, tc.policy, tc.approved, tc.paused, tc.stopped)
			assert.Equal(t, tc.start, plan.Start, "start")
			assert.Equal(t, tc.canary, plan.Canary, "canary batch")
			assert.Equal(t, tc.gate, plan.WaitGate, "gate")
			assert.Equal(t, tc.done, plan.Done, "done")
			assert.Equal(t, tc.budget, plan.BudgetExceeded, "budget exceeded")
		})
	}
}

// TestUpdateNodePaths walks a node through its steps with the given outcomes (true = the step
// succeeded) and checks the steps it ran and how it ended.
func TestUpdateNodePaths(t *testing.T) {
	fail := StepOutcome{Err: errors.New("boom"), Reason: "Boom", Message: "boom"}
	cases := []struct {
		name     string
		policy   UpdateNodePolicy
		moved    int
		outcomes map[string]bool // steps that fail; others succeed
		steps    []string
		result   string
		reason   string
		stop     bool
	}{
		{name: "happy path with instances", policy: UpdateNodePolicy{MigrateBack: true}, moved: 2,
			steps:  []string{"checkpoint", "disable", "drain", "apply", "verify", "enable", "migrate back"},
			result: dp.UpdateNodeSucceeded},
		{name: "nothing to migrate back", policy: UpdateNodePolicy{MigrateBack: true},
			steps:  []string{"checkpoint", "disable", "drain", "apply", "verify", "enable"},
			result: dp.UpdateNodeSucceeded},
		{name: "instances stay where they went", policy: UpdateNodePolicy{MigrateBack: false}, moved: 2,
			steps:  []string{"checkpoint", "disable", "drain", "apply", "verify", "enable"},
			result: dp.UpdateNodeSucceeded},
		{name: "verification fails: rolled back, enabled, instances back", policy: UpdateNodePolicy{MigrateBack: true}, moved: 1,
			outcomes: map[string]bool{"verify": false},
			steps:    []string{"checkpoint", "disable", "drain", "apply", "verify", "rollback", "enable", "migrate back"},
			result:   dp.UpdateNodeFailed, reason: "Boom"},
		{name: "apply fails: rolled back", policy: UpdateNodePolicy{},
			outcomes: map[string]bool{"apply": false},
			steps:    []string{"checkpoint", "disable", "drain", "apply", "rollback", "enable"},
			result:   dp.UpdateNodeFailed, reason: "Boom"},
		{name: "rollback fails too: still enabled", policy: UpdateNodePolicy{},
			outcomes: map[string]bool{"verify": false, "rollback": false},
			steps:    []string{"checkpoint", "disable", "drain", "apply", "verify", "rollback", "enable"},
			result:   dp.UpdateNodeFailed, reason: dp.ReasonRollbackFailed},
		{name: "drain fails, policy Stop", policy: UpdateNodePolicy{DrainOnFailure: dp.DrainStop, MigrateBack: true}, moved: 1,
			outcomes: map[string]bool{"drain": false},
			steps:    []string{"checkpoint", "disable", "drain", "enable", "migrate back"},
			result:   dp.UpdateNodeFailed, reason: dp.ReasonDrainFailed, stop: true},
		{name: "drain fails, policy Skip", policy: UpdateNodePolicy{DrainOnFailure: dp.DrainSkip},
			outcomes: map[string]bool{"drain": false},
			steps:    []string{"checkpoint", "disable", "drain", "enable"},
			result:   dp.UpdateNodeSkipped, reason: dp.ReasonDrainFailed},
		{name: "drain fails, policy Fail", policy: UpdateNodePolicy{DrainOnFailure: dp.DrainFail},
			outcomes: map[string]bool{"drain": false},
			steps:    []string{"checkpoint", "disable", "drain", "enable"},
			result:   dp.UpdateNodeFailed, reason: dp.ReasonDrainFailed},
		{name: "checkpoint fails: nothing changed, nothing to undo", policy: UpdateNodePolicy{MigrateBack: true},
			outcomes: map[string]bool{"checkpoint": false},
			steps:    []string{"checkpoint"},
			result:   dp.UpdateNodeFailed, reason: "Boom"},
		{name: "disable fails: enabled again", policy: UpdateNodePolicy{},
			outcomes: map[string]bool{"disable": false},
			steps:    []string{"checkpoint", "disable", "enable"},
			result:   dp.UpdateNodeFailed, reason: "Boom"},
		{name: "migrate back fails: the update of the node still succeeded", policy: UpdateNodePolicy{MigrateBack: true}, moved: 1,
			outcomes: map[string]bool{"migrate back": false},
			steps:    []string{"checkpoint", "disable", "drain", "apply", "verify", "enable", "migrate back"},
			result:   dp.UpdateNodeSucceeded},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := UpdateNode{Name: "a", State: dp.UpdateNodePending}
			n.Start()
			var ran []string
			stop := false
			for i := 0; n.InFlight(); i++ {
				require.Less(t, i, 20, "the node never finishes")
				step := n.Next
				ran = append(ran, step)
				if step == UpdateStepDisable {
					for i := 0; i < tc.moved; i++ {
						n.Servers = append(n.Servers, fmt.Sprint("server-", i))
					}
				}
				out := StepOutcome{}
				if ok, listed := tc.outcomes[step]; listed && !ok {
					out = fail
				}
				if n.Advance(step, out, tc.policy) {
					stop = true
				}
				if n.InFlight() {
					assert.NotEqual(t, dp.UpdateNodePending, n.State, "an in-flight node shows what it does")
				}
			}
			assert.Equal(t, tc.steps, ran)
			assert.Equal(t, tc.result, n.State)
			assert.Equal(t, tc.reason, n.Reason)
			assert.Equal(t, tc.stop, stop)
			if i := indexOf(ran, "disable"); i >= 0 {
				assert.Contains(t, ran[i:], "enable", "a node that was disabled is always enabled again")
			}
		})
	}
}

// TestUpdateNodeKeepsItsFirstFailure: the failure that sent a node down its failure path stays its
// failed step, reason and message; what fails after it is appended.
func TestUpdateNodeKeepsItsFirstFailure(t *testing.T) {
	cases := []struct {
		name            string
		fails           []string
		failed, reason  string
		message         []string
		result          string
		migrateBackFail bool
	}{
		{name: "verify fails, the rest works", fails: []string{"verify"},
			failed: "verify", reason: dp.ReasonVerificationFailed, message: []string{"verify said no", "rolled back to its checkpoint"}, result: dp.UpdateNodeFailed},
		{name: "apply fails, rollback fails too", fails: []string{"apply", "rollback"},
			failed: "apply", reason: dp.ReasonRollbackFailed, message: []string{"apply said no", "rollback said no"}, result: dp.UpdateNodeFailed},
		{name: "verify fails, migrate back fails", fails: []string{"verify", "migrate back"},
			failed: "verify", reason: dp.ReasonVerificationFailed, message: []string{"verify said no", "rolled back", "migrate back said no"}, result: dp.UpdateNodeFailed},
		{name: "updated, migrate back fails", fails: []string{"migrate back"},
			failed: "", reason: "", message: []string{"migrate back said no"}, result: dp.UpdateNodeSucceeded},
	}
	p := UpdateNodePolicy{MigrateBack: true, KeepFirstFailure: true}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := UpdateNode{Name: "a", State: dp.UpdateNodePending, Servers: []string{"s"}}
			n.Start()
			for i := 0; n.InFlight(); i++ {
				require.Less(t, i, 20, "the node never finishes")
				step := n.Next
				out := StepOutcome{}
				if slices.Contains(tc.fails, step) {
					reason := ""
					if step == UpdateStepVerify || step == UpdateStepApply {
						reason = dp.ReasonVerificationFailed
					}
					out = StepOutcome{Err: errors.New("no"), Reason: reason, Message: step + " said no"}
				}
				n.Advance(step, out, p)
			}
			assert.Equal(t, tc.result, n.State)
			assert.Equal(t, tc.failed, n.Failed)
			assert.Equal(t, tc.reason, n.Reason)
			for _, m := range tc.message {
				assert.Contains(t, n.Message, m)
			}
		})
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func TestSelectUpdateRetry(t *testing.T) {
	nodes := nodesIn(1, dp.UpdateNodeSucceeded, dp.UpdateNodeFailed, dp.UpdateNodeSkipped, dp.UpdateNodeFailed)
	nodes[3].Host = "host-d"
	assert.Equal(t, []string{"d"}, SelectUpdateRetry(nodes, lifecycle.RetrySignal{Hosts: []string{"host-d"}}))
	assert.Equal(t, dp.UpdateNodePending, nodes[3].State)
	assert.Equal(t, []string{"b"}, SelectUpdateRetry(nodes, lifecycle.RetrySignal{}), "only failed nodes, not succeeded or skipped ones")
	assert.Equal(t, dp.UpdateNodeSucceeded, nodes[0].State)
	assert.Equal(t, dp.UpdateNodeSkipped, nodes[2].State)
}

func TestVersionClass(t *testing.T) {
	for v, want := range map[string]string{
		"":            "",
		"2":           "CUSTOM_STACKFLOW_NOVA_COMPUTE_2",
		"26.1.0-rc.2": "CUSTOM_STACKFLOW_NOVA_COMPUTE_26_1_0_RC_2",
		"zed_b":       "CUSTOM_STACKFLOW_NOVA_COMPUTE_ZED_B",
	} {
		assert.Equal(t, want, VersionClass(v), v)
	}
}

// TestUpdateMembersRegion: each compute is updated against the Nova of the cell it joined, found as the
// compute found it (by NovaCell name, else by cellName), so a data plane spread over two Novas updates
// each node in its own region, reached with the clouds.yaml of that cell's Secret.
func TestUpdateMembersRegion(t *testing.T) {
	listed := func(name, spec string) kube.ListedObject {
		return kube.ListedObject{Ref: lifecycle.ObjectRef{Name: name}, Object: kube.Object{Spec: json.RawMessage(spec)}}
	}
	nodes := []kube.ListedObject{
		listed("a", `{"role":"compute","hostName":"ha"}`),
		listed("b", `{"role":"compute","hostName":"hb"}`),
	}
	cells := []kube.ListedObject{
		listed("nova-cell1", `{"cellName":"cell1","secret":"osp-secret"}`),
		listed("two-cell1", `{"cellName":"cell1","region":"RegionTwo","secret":"two-secret"}`),
		listed("three-cell2", `{"cellName":"cell2","region":"RegionThree","secret":"three-secret"}`),
	}
	compute := func(node, cell string) kube.ListedObject {
		return listed(node, fmt.Sprintf(`{"dataplaneNodeName":%q,"cellName":%q,"sshKeySecretName":"key"}`, node, cell))
	}
	for _, tc := range []struct {
		name     string
		computes []kube.ListedObject
		cells    []kube.ListedObject
		want     map[string]string
	}{
		{"by NovaCell name: the cell's Nova region", []kube.ListedObject{compute("a", "two-cell1"), compute("b", "two-cell1")}, cells,
			map[string]string{"a": "RegionTwo two-secret", "b": "RegionTwo two-secret"}},
		{"two Novas: each node its own", []kube.ListedObject{compute("a", "two-cell1"), compute("b", "cell2")}, cells,
			map[string]string{"a": "RegionTwo two-secret", "b": "RegionThree three-secret"}},
		{"a Nova with no region: the cloud's", []kube.ListedObject{compute("a", "nova-cell1"), compute("b", "three-cell2")}, cells,
			map[string]string{"a": " osp-secret", "b": "RegionThree three-secret"}},
		{"no NovaCell found: the cloud's", []kube.ListedObject{compute("a", "gone"), compute("b", "two-cell1")}, cells,
			map[string]string{"a": " ", "b": "RegionTwo two-secret"}},
		{"runs recorded before regions (no cells listed): the cloud's", []kube.ListedObject{compute("a", "two-cell1"), compute("b", "two-cell1")}, nil,
			map[string]string{"a": " ", "b": " "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			members, err := UpdateMembers(dp.OpenStackDataPlaneSpec{Roles: []string{"compute"}}, nodes, tc.computes, tc.cells, nil)
			require.NoError(t, err)
			got := map[string]string{}
			for _, m := range members {
				got[m.Name] = m.Region + " " + m.CloudSecret
			}
			require.Equal(t, tc.want, got)
		})
	}
}

// TestDrainTargetsStayInTheRegion: an instance cannot leave its Nova, so a node drains only to the
// update's other nodes of its own region.
func TestDrainTargetsStayInTheRegion(t *testing.T) {
	r := &updateReconciler{rec: updateRecord{Nodes: []UpdateNode{
		{Name: "a", Host: "ha", Region: "RegionTwo", Next: UpdateStepDrain},
		{Name: "b", Host: "hb", Region: "RegionTwo", State: dp.UpdateNodePending},
		{Name: "c", Host: "hc", Region: "RegionThree", State: dp.UpdateNodePending},
		{Name: "d", Host: "hd", Region: "RegionTwo", State: dp.UpdateNodeFailed},
	}}}
	require.Equal(t, []string{"hb"}, r.drainTargets(&r.rec.Nodes[0]))
	require.Empty(t, r.drainTargets(&r.rec.Nodes[2]), "no other node in RegionThree: Nova's scheduler chooses")
}

func TestBoundUpdateNodeStates(t *testing.T) {
	states := func(list ...string) []dp.UpdateNodeState {
		var out []dp.UpdateNodeState
		for i, st := range list {
			out = append(out, dp.UpdateNodeState{Name: fmt.Sprintf("n%d", i), State: st})
		}
		return out
	}
	ok, failed, pending, updating, skipped := dp.UpdateNodeSucceeded, dp.UpdateNodeFailed,
		dp.UpdateNodePending, dp.UpdateNodeUpdating, dp.UpdateNodeSkipped
	tests := []struct {
		name    string
		in      []dp.UpdateNodeState
		max     int
		want    []string
		omitted int
	}{
		{name: "within the bound: as they are", in: states(ok, failed, pending), max: 3, want: []string{"n0", "n1", "n2"}},
		{name: "failed, in flight and pending first, updated last", in: states(ok, ok, pending, updating, failed, skipped), max: 4,
			want: []string{"n4", "n3", "n2", "n5"}, omitted: 2},
		{name: "same state: the update's order", in: states(ok, pending, ok, pending, pending), max: 2, want: []string{"n1", "n3"}, omitted: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, omitted := BoundUpdateNodeStates(tc.in, tc.max)
			var names []string
			for _, s := range got {
				names = append(names, s.Name)
			}
			require.Equal(t, tc.want, names)
			require.Equal(t, tc.omitted, omitted)
		})
	}
}
