package openstack

import (
	"context"
	"net/http"
	"net/http/httptest"
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

// ListAgents asks Neutron once, with the host and binary filters, and reads OVN's agents.
func TestListAgentsAsksWithTheFilters(t *testing.T) {
	var query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/v2.0/agents", r.URL.Path)
		query = r.URL.RawQuery
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"agents": [{"id": "4464c498", "agent_type": "OVN Metadata agent", "binary": "neutron-ovn-metadata-agent",
			"host": "edpm-compute-0", "alive": true, "heartbeat_timestamp": "2026-11-27 12:35:49.366000+00:00"}]}`))
	}))
	defer srv.Close()
	c := &gophercloud.ServiceClient{ProviderClient: &gophercloud.ProviderClient{HTTPClient: *srv.Client()}, Endpoint: srv.URL + "/v2.0/"}
	got, err := ListAgents(context.Background(), c, agents.ListOpts{Host: "edpm-compute-0", Binary: AgentBinaryOVNMetadata})
	require.NoError(t, err)
	require.Equal(t, []NetworkAgent{{ID: "4464c498", Type: "OVN Metadata agent", Binary: AgentBinaryOVNMetadata, Host: "edpm-compute-0", Alive: true}}, got)
	require.Contains(t, query, "host=edpm-compute-0")
	require.Contains(t, query, "binary=neutron-ovn-metadata-agent")
}
