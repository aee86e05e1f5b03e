package openstack

import (
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/agents"
	"github.com/gophercloud/gophercloud/v2/pagination"
	"github.com/stretchr/testify/require"
)

// decodeAgents reads agents as ML2/OVN lists them, whose timestamps gophercloud's own extraction
// refuses, and agents of other drivers alike.
func TestDecodeAgents(t *testing.T) {
	tests := []struct {
		name string
		body map[string]any
		want []NetworkAgent
	}{
		{
			name: "ML2/OVN: timestamps with microseconds and a zone",
			body: map[string]any{"agents": []any{
				map[string]any{"id": "edpm-compute-0", "agent_type": "OVN Controller agent", "binary": "ovn-controller", "host": "edpm-compute-0",
					"alive": true, "heartbeat_timestamp": "2026-11-27 12:35:49.366000+00:00", "created_at": nil},
				map[string]any{"id": "4464c498-f4d9-5cf2-aeae-e1406991e8d1", "agent_type": "OVN Metadata agent", "binary": "neutron-ovn-metadata-agent",
					"host": "edpm-compute-0", "alive": false, "heartbeat_timestamp": "2026-11-27 12:35:49.366000+00:00"},
			}},
			want: []NetworkAgent{
				{ID: "edpm-compute-0", Type: "OVN Controller agent", Binary: "ovn-controller", Host: "edpm-compute-0", Alive: true},
				{ID: "4464c498-f4d9-5cf2-aeae-e1406991e8d1", Type: "OVN Metadata agent", Binary: "neutron-ovn-metadata-agent", Host: "edpm-compute-0"},
			},
		},
		{
			name: "an agent-based driver's timestamps",
			body: map[string]any{"agents": []any{
				map[string]any{"id": "a1", "agent_type": "Open vSwitch agent", "binary": "neutron-openvswitch-agent", "host": "c1", "alive": true,
					"heartbeat_timestamp": "2026-11-27 12:35:49"},
			}},
			want: []NetworkAgent{{ID: "a1", Type: "Open vSwitch agent", Binary: "neutron-openvswitch-agent", Host: "c1", Alive: true}},
		},
		{name: "none", body: map[string]any{"agents": []any{}}, want: []NetworkAgent{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeAgents(tt.body)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
	// What gophercloud's extraction (which its pager calls on every page) does with the first case: the
	// reason ListAgents does not use agents.List's pager.
	_, err := agents.ExtractAgents(agents.AgentPage{LinkedPageBase: pagination.LinkedPageBase{PageResult: pagination.PageResult{Result: gophercloud.Result{Body: tests[0].body}}}})
	require.Error(t, err)
}
