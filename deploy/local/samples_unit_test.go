package local

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A sample Failed read after read ends the wait once LastingFailure has passed; a sample that leaves
// Failed in between (an automatic retry running) starts its count again.
func TestLastingFailure(t *testing.T) {
	nova := Applied{Kind: "Nova", Namespace: "openstack", Name: "nova"}
	edpm := Applied{Kind: "OpenStackDataPlane", Namespace: "openstack", Name: "edpm"}
	t0 := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	state := func(a Applied, phase string) SampleState {
		return SampleState{Applied: a, Phase: phase, Message: phase}
	}
	since := map[Applied]time.Time{}
	for _, step := range []struct {
		at     time.Duration
		states []SampleState
		want   string // the lasting failure's name, "" for none
	}{
		{0, []SampleState{state(nova, "Failed"), state(edpm, "Running")}, ""},
		{time.Minute, []SampleState{state(nova, "Failed"), state(edpm, "Failed")}, ""},
		{2 * time.Minute, []SampleState{state(nova, "Running"), state(edpm, "Failed")}, ""},
		{3 * time.Minute, []SampleState{state(nova, "Failed"), state(edpm, "Failed")}, ""},
		{4 * time.Minute, []SampleState{state(nova, "Failed"), state(edpm, "Failed")}, "edpm"},
		{5 * time.Minute, []SampleState{state(nova, "Ready"), state(edpm, "Ready")}, ""},
	} {
		st, ok := lastingFailure(step.states, since, t0.Add(step.at))
		require.Equal(t, step.want != "", ok, "at %s", step.at)
		require.Equal(t, step.want, st.Name, "at %s", step.at)
	}
	require.Empty(t, since, "Ready samples are forgotten")
}
