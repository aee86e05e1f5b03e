package openstack

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/services"
	"github.com/stretchr/testify/require"
)

// The gophercloud implementations of the narrow clients against an HTTP API that records each request
// and answers what the case gives: the requests are the ones the OpenStack API reference states, and
// the answers come back as the activities read them.

// apiRequest is one request the fake API saw.
type apiRequest struct {
	Method, Path, Query string
	// Body is the request's JSON body, decoded (nil when none).
	Body any
	// Microversion is the compute microversion asked for.
	Microversion string
}

// fakeAPI answers requests by method and path with a status and a JSON body, recording them.
type fakeAPI struct {
	mu      sync.Mutex
	seen    []apiRequest
	answers map[string]apiAnswer
}

type apiAnswer struct {
	status int
	body   string
}

// serve starts the API; answers are keyed "METHOD /path" (query left out). A request without an answer
// gets 404.
func serve(t *testing.T, answers map[string]apiAnswer) (*fakeAPI, *gophercloud.ServiceClient) {
	api := &fakeAPI{answers: answers}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body any
		if len(raw) > 0 {
			require.NoError(t, json.Unmarshal(raw, &body), "a JSON body: %s", raw)
		}
		api.mu.Lock()
		api.seen = append(api.seen, apiRequest{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Body: body,
			Microversion: r.Header.Get("X-OpenStack-Nova-API-Version")})
		a, ok := api.answers[r.Method+" "+r.URL.Path]
		api.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, a.body)
	}))
	t.Cleanup(srv.Close)
	c := &gophercloud.ServiceClient{ProviderClient: &gophercloud.ProviderClient{HTTPClient: *srv.Client()}, Endpoint: srv.URL + "/"}
	c.ProviderClient.SetToken("token")
	return api, c
}

// requests are the requests seen, in order.
func (a *fakeAPI) requests() []apiRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]apiRequest(nil), a.seen...)
}

func TestGopherCompute(t *testing.T) {
	ctx := context.Background()
	t.Run("live migration: Nova picks the block migration, and the host when none is given", func(t *testing.T) {
		api, c := serve(t, map[string]apiAnswer{"POST /servers/vm-1/action": {202, ""}})
		c.Type, c.Microversion = "compute", ComputeMicroversion
		nova := gopherCompute{c}
		require.NoError(t, nova.LiveMigrate(ctx, "vm-1", ""))
		require.NoError(t, nova.LiveMigrate(ctx, "vm-1", "c1"))
		got := api.requests()
		require.Equal(t, map[string]any{"os-migrateLive": map[string]any{"block_migration": "auto", "host": nil}}, got[0].Body)
		require.Equal(t, map[string]any{"os-migrateLive": map[string]any{"block_migration": "auto", "host": "c1"}}, got[1].Body)
		require.Equal(t, ComputeMicroversion, got[0].Microversion)
	})
	t.Run("a migration refused: the error keeps Nova's status", func(t *testing.T) {
		_, c := serve(t, map[string]apiAnswer{"POST /servers/vm-1/action": {409, `{"conflictingRequest": {"message": "Cannot 'os-migrateLive' instance vm-1 while it is in task_state migrating"}}`}})
		err := gopherCompute{c}.LiveMigrate(ctx, "vm-1", "")
		require.True(t, gophercloud.ResponseCodeIs(err, http.StatusConflict), "%v", err)
		require.Contains(t, classifyOS("migrate vm-1", err).Error(), "task_state migrating")
	})
	t.Run("the latest migration of a server, by creation time", func(t *testing.T) {
		api, c := serve(t, map[string]apiAnswer{"GET /os-migrations": {200, `{"migrations": [
			{"id": 2, "instance_uuid": "vm-1", "status": "completed", "dest_compute": "c1", "created_at": "2026-12-01T10:00:00.000000"},
			{"id": 3, "instance_uuid": "vm-1", "status": "running", "dest_compute": "c2", "created_at": "2026-12-01T11:00:00.000000"},
			{"id": 1, "instance_uuid": "vm-1", "status": "error", "dest_compute": "c0", "created_at": "2026-12-01T09:00:00.000000"}]}`}})
		m, err := gopherCompute{c}.LastMigration(ctx, "vm-1")
		require.NoError(t, err)
		require.Equal(t, "running", m.Status)
		require.Equal(t, "c2", m.DestCompute)
		require.Equal(t, "instance_uuid=vm-1", api.requests()[0].Query)
	})
	t.Run("a server never migrated: no migration", func(t *testing.T) {
		_, c := serve(t, map[string]apiAnswer{"GET /os-migrations": {200, `{"migrations": []}`}})
		m, err := gopherCompute{c}.LastMigration(ctx, "vm-1")
		require.NoError(t, err)
		require.Nil(t, m)
	})
	t.Run("compute services of one host, nova-compute only", func(t *testing.T) {
		api, c := serve(t, map[string]apiAnswer{"GET /os-services": {200, `{"services": [
			{"id": "svc-1", "binary": "nova-compute", "host": "c0", "state": "up", "status": "enabled", "zone": "nova"}]}`}})
		svcs, err := gopherCompute{c}.ComputeServices(ctx, "c0")
		require.NoError(t, err)
		require.Equal(t, []services.Service{{ID: "svc-1", Binary: "nova-compute", Host: "c0", State: "up", Status: "enabled", Zone: "nova"}}, svcs)
		require.Equal(t, "binary=nova-compute&host=c0", api.requests()[0].Query)
	})
	t.Run("a service disabled with its reason", func(t *testing.T) {
		api, c := serve(t, map[string]apiAnswer{"PUT /os-services/svc-1": {200, `{"service": {"id": "svc-1", "status": "disabled"}}`}})
		require.NoError(t, gopherCompute{c}.UpdateService(ctx, "svc-1", services.UpdateOpts{Status: services.ServiceDisabled, DisabledReason: "drain"}))
		require.Equal(t, map[string]any{"status": "disabled", "disabled_reason": "drain"}, api.requests()[0].Body)
	})
	t.Run("hypervisors by host name pattern; a hypervisor's servers looked up through its cell", func(t *testing.T) {
		api, c := serve(t, map[string]apiAnswer{
			"GET /os-hypervisors/detail": {200, `{"hypervisors": [{"id": "hv-1", "hypervisor_hostname": "c0", "hypervisor_version": 1, "hypervisor_type": "fake",
				"state": "up", "status": "enabled",
				"service": {"host": "c0", "id": "svc-1"}}]}`},
			"GET /os-hypervisors/hv-1": {200, `{"hypervisor": {"id": "hv-1", "servers": []}}`},
		})
		nova := gopherCompute{c}
		hvs, err := nova.Hypervisors(ctx, "c0")
		require.NoError(t, err)
		require.Len(t, hvs, 1)
		require.Equal(t, "c0", hvs[0].Service.Host)
		require.NoError(t, nova.ShowHypervisorServers(ctx, "hv-1"))
		got := api.requests()
		require.Equal(t, "hypervisor_hostname_pattern=c0", got[0].Query)
		require.Equal(t, "with_servers=true", got[1].Query)
		// Not mapped to a cell yet: Nova's 404 reaches the caller as one.
		require.True(t, gophercloud.ResponseCodeIs(nova.ShowHypervisorServers(ctx, "hv-2"), http.StatusNotFound))
	})
	t.Run("flavors: every one listed, public and private", func(t *testing.T) {
		api, c := serve(t, map[string]apiAnswer{
			"GET /flavors/detail": {200, `{"flavors": [{"id": "f-1", "name": "m1.tiny", "vcpus": 1, "ram": 512, "disk": 1, "os-flavor-access:is_public": false}]}`},
			"POST /flavors":       {200, `{"flavor": {"id": "f-2", "name": "m1.small", "vcpus": 1, "ram": 2048, "disk": 20}}`},
		})
		nova := gopherCompute{c}
		fs, err := nova.ListFlavors(ctx)
		require.NoError(t, err)
		require.Equal(t, "m1.tiny", fs[0].Name)
		require.False(t, fs[0].IsPublic)
		require.Equal(t, "is_public=None", api.requests()[0].Query)
		disk := 20
		f, err := nova.CreateFlavor(ctx, flavors.CreateOpts{Name: "m1.small", VCPUs: 1, RAM: 2048, Disk: &disk})
		require.NoError(t, err)
		require.Equal(t, "f-2", f.ID)
		require.Equal(t, "m1.small", api.requests()[1].Body.(map[string]any)["flavor"].(map[string]any)["name"])
	})
	t.Run("servers listed with the filters given, created with their hints, deleted", func(t *testing.T) {
		api, c := serve(t, map[string]apiAnswer{
			"GET /servers/detail":  {200, `{"servers": [{"id": "vm-1", "name": "web-0", "status": "ACTIVE", "OS-EXT-SRV-ATTR:host": "c0"}]}`},
			"POST /servers":        {202, `{"server": {"id": "vm-2", "adminPass": "x"}}`},
			"DELETE /servers/vm-2": {204, ""},
			"GET /servers/vm-2":    {404, `{"itemNotFound": {"message": "Instance vm-2 could not be found."}}`},
		})
		nova := gopherCompute{c}
		list, err := nova.ListServers(ctx, servers.ListOpts{Name: "^web-0$", AllTenants: true})
		require.NoError(t, err)
		require.Equal(t, "c0", list[0].Host)
		require.Contains(t, api.requests()[0].Query, "all_tenants=true")
		created, err := nova.CreateServer(ctx, servers.CreateOpts{Name: "web-1", FlavorRef: "f-1", ImageRef: "img-1"},
			servers.SchedulerHintOpts{Group: "2b1e9e0a-7c5d-4a55-9d2b-6f0f2a3c1e11"})
		require.NoError(t, err)
		require.Equal(t, "vm-2", created.ID)
		body := api.requests()[1].Body.(map[string]any)
		require.Equal(t, map[string]any{"group": "2b1e9e0a-7c5d-4a55-9d2b-6f0f2a3c1e11"}, body["os:scheduler_hints"])
		require.NoError(t, nova.DeleteServer(ctx, "vm-2"))
		_, err = nova.GetServer(ctx, "vm-2")
		require.True(t, isNotFound(err), "%v", err)
	})
}
