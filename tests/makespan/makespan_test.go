package makespan

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stackflow/stackflow/workflows/controlplane"
)

func TestSimulate(t *testing.T) {
	// Two nodes, two steps, uneven: a barrier waits for the slowest node at every step.
	uneven := [][]float64{{1, 4}, {4, 1}}
	tests := []struct {
		name        string
		durations   [][]float64
		concurrency int
		strategy    string
		want        float64
	}{
		{"per node, unbounded: the longest pipeline", uneven, 2, StrategyPerNode, 5},
		{"barrier: the slowest node per step, summed", uneven, 2, StrategyBarrier, 8},
		{"per node, one slot: everything in a row", uneven, 1, StrategyPerNode, 10},
		{"barrier, one slot: everything in a row", uneven, 1, StrategyBarrier, 10},
		{"per node fills a free slot at once", [][]float64{{5}, {1}, {1}, {1}}, 2, StrategyPerNode, 5},
		{"no nodes", nil, 3, StrategyPerNode, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Simulate(tt.durations, tt.concurrency, tt.strategy); math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("Simulate = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCriticalPath(t *testing.T) {
	path, length := CriticalPath(controlplane.ControlPlane, map[string]float64{
		"mariadb": 5, "rabbitmq": 3, "memcached": 1, "keystone": 4, "glance": 2, "placement": 3, "nova": 6, "neutron": 2, "horizon": 1,
	})
	require.Equal(t, []string{"mariadb", "keystone", "placement", "nova", "horizon"}, path)
	require.Equal(t, 19.0, length)
}

func TestHandovers(t *testing.T) {
	// mariadb and rabbitmq end at 5 and 3; keystone (needs both) starts at 5.5: 0.5 s handed over.
	// glance (needs keystone) starts 2 s after keystone ends; memcached starts 1 s after the first start.
	got := Handovers(controlplane.ControlPlane, map[string]Span{
		"mariadb": {0, 5}, "rabbitmq": {0, 3}, "memcached": {1, 2}, "keystone": {5.5, 8}, "glance": {10, 12},
	})
	require.Equal(t, map[string]float64{"mariadb": 0, "rabbitmq": 0, "memcached": 1, "keystone": 0.5, "glance": 2}, got)
}
