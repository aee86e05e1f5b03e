package bridge

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Coordinators' tasks go ahead of their members' in a backlogged queue; the rest keep the default.
func TestPriorityOf(t *testing.T) {
	for _, tc := range []struct {
		kind string
		key  int
	}{
		{"OpenStackDataPlane", 2},
		{"OpenStackDataPlaneUpdate", 2},
		{"OpenStackDataPlaneNode", 0},
		{"NovaExternalCompute", 0},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			require.Equal(t, tc.key, PriorityOf(tc.kind).PriorityKey)
		})
	}
}
