package baremetal

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/stretchr/testify/require"

	"github.com/stackflow/stackflow/activities/openstack"
)

// gopherClient against an Ironic that records each request (its body and the microversion asked for)
// and answers what the case gives.
func TestGopherClient(t *testing.T) {
	type request struct {
		Method, Path string
		Body         any
		Version      string
	}
	var mu sync.Mutex
	var seen []request
	answers := map[string]struct {
		status int
		body   string
	}{
		"GET /nodes/bm-0":                 {200, `{"uuid": "n-1", "name": "bm-0", "provision_state": "available", "driver": "fake-hardware"}`},
		"GET /nodes/bm-9":                 {404, `{"error_message": "{\"faultstring\": \"Node bm-9 could not be found.\"}"}`},
		"POST /nodes":                     {201, `{"uuid": "n-2", "name": "bm-1", "provision_state": "enroll"}`},
		"PATCH /nodes/n-2":                {200, `{"uuid": "n-2"}`},
		"PUT /nodes/n-2/states/provision": {202, ""},
		"PUT /nodes/n-1/states/provision": {409, `{"error_message": "{\"faultstring\": \"Node n-1 is locked by host conductor-0.\"}"}`},
		"DELETE /nodes/n-2":               {204, ""},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body any
		if len(raw) > 0 {
			require.NoError(t, json.Unmarshal(raw, &body))
		}
		mu.Lock()
		seen = append(seen, request{r.Method, r.URL.Path, body, r.Header.Get("X-OpenStack-Ironic-API-Version")})
		mu.Unlock()
		a, ok := answers[r.Method+" "+r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, a.body)
	}))
	defer srv.Close()
	c := &gophercloud.ServiceClient{ProviderClient: &gophercloud.ProviderClient{HTTPClient: *srv.Client()}, Endpoint: srv.URL + "/",
		Type: "baremetal", Microversion: openstack.BaremetalMicroversion}
	ironic := gopherClient{c}
	ctx := context.Background()

	n, err := ironic.GetNode(ctx, "bm-0")
	require.NoError(t, err)
	require.Equal(t, "available", n.ProvisionState)
	_, err = ironic.GetNode(ctx, "bm-9")
	require.True(t, gophercloud.ResponseCodeIs(err, http.StatusNotFound), "%v", err)
	created, err := ironic.CreateNode(ctx, nodes.CreateOpts{Name: "bm-1", Driver: "fake-hardware"})
	require.NoError(t, err)
	require.Equal(t, "n-2", created.UUID)
	require.NoError(t, ironic.UpdateNode(ctx, "n-2", nodes.UpdateOpts{nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_source", Value: "img-1"}}))
	require.NoError(t, ironic.ChangeProvisionState(ctx, "n-2", nodes.TargetManage))
	err = ironic.ChangeProvisionState(ctx, "n-1", nodes.TargetProvide)
	require.True(t, isConflict(err), "a locked node answers 409, which the caller retries: %v", err)
	require.Contains(t, openstack.Classify("provide n-1", err).Error(), "is locked by host conductor-0")
	require.NoError(t, ironic.DeleteNode(ctx, "n-2"))

	mu.Lock()
	defer mu.Unlock()
	for _, r := range seen {
		require.Equal(t, openstack.BaremetalMicroversion, r.Version, "%s %s at the pinned microversion", r.Method, r.Path)
	}
	require.Equal(t, map[string]any{"name": "bm-1", "driver": "fake-hardware"}, seen[2].Body)
	require.Equal(t, []any{map[string]any{"op": "add", "path": "/instance_info/image_source", "value": "img-1"}}, seen[3].Body)
	require.Equal(t, map[string]any{"target": "manage"}, seen[4].Body)
}
