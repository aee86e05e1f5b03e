package e2e

import (
	"strings"
	"testing"
)

func TestSumMetric(t *testing.T) {
	const exposition = `# HELP stackflow_bridge_signals_total Signals sent.
# TYPE stackflow_bridge_signals_total counter
stackflow_bridge_signals_total{kind="OpenstackNode",result="ok"} 7
stackflow_bridge_signals_total{kind="OpenstackNode",result="error"} 2
stackflow_bridge_signals_total{kind="Node",result="ok"} 5
stackflow_bridge_signals_total_extra 100
stackflow_bridge_leader 1
`
	for _, tc := range []struct {
		name   string
		metric string
		labels []string
		want   float64
	}{
		{"all samples", "stackflow_bridge_signals_total", nil, 14},
		{"one label", "stackflow_bridge_signals_total", []string{"kind", "OpenstackNode"}, 9},
		{"two labels", "stackflow_bridge_signals_total", []string{"kind", "OpenstackNode", "result", "ok"}, 7},
		{"no labels on the line", "stackflow_bridge_leader", nil, 1},
		{"absent", "stackflow_bridge_missing", nil, 0},
		{"label that matches nothing", "stackflow_bridge_signals_total", []string{"kind", "Pod"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := sumMetric(strings.NewReader(exposition), tc.metric, tc.labels...)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("sumMetric(%s, %v) = %v, want %v", tc.metric, tc.labels, got, tc.want)
			}
		})
	}
}

func TestSumMetricBadValue(t *testing.T) {
	if _, err := sumMetric(strings.NewReader("m{a=\"b\"} notanumber\n"), "m"); err == nil {
		t.Error("want an error for a sample that is not a number")
	}
}
