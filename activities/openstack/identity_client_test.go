package openstack

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/endpoints"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/projects"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/regions"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/roles"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/services"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/users"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/stackflow/stackflow/activities/kube"
)

func TestGopherIdentityCatalog(t *testing.T) {
	ctx := context.Background()
	api, c := serve(t, map[string]apiAnswer{
		"GET /regions/r2":       {404, `{"error": {"code": 404, "message": "Could not find region: r2."}}`},
		"POST /regions":         {201, `{"region": {"id": "r2"}}`},
		"GET /services":         {200, `{"services": [{"id": "svc-1", "type": "compute", "name": "nova", "enabled": true}]}`},
		"POST /services":        {201, `{"service": {"id": "svc-2", "type": "compute", "name": "nova"}}`},
		"GET /endpoints":        {200, `{"endpoints": [{"id": "e-1", "interface": "internal", "region_id": "r2", "service_id": "svc-1", "url": "http://old/v2.1"}]}`},
		"POST /endpoints":       {201, `{"endpoint": {"id": "e-2", "interface": "public", "region_id": "r2", "service_id": "svc-1", "url": "http://nova/v2.1"}}`},
		"PATCH /endpoints/e-1":  {200, `{"endpoint": {"id": "e-1", "url": "http://nova-int/v2.1"}}`},
		"DELETE /endpoints/e-1": {204, ""},
	})
	k := gopherIdentity{c: c}
	err := k.GetRegion(ctx, "r2")
	require.True(t, isNotFound(err), "%v", err)
	require.NoError(t, k.CreateRegion(ctx, regions.CreateOpts{ID: "r2", Description: "created by stackflow"}))
	svcs, err := k.CatalogServices(ctx, "compute")
	require.NoError(t, err)
	require.Equal(t, "svc-1", svcs[0].ID)
	svc, err := k.CreateCatalogService(ctx, services.CreateOpts{Type: "compute", Extra: map[string]any{"name": "nova"}})
	require.NoError(t, err)
	require.Equal(t, "svc-2", svc.ID)
	eps, err := k.ListEndpoints(ctx, endpoints.ListOpts{ServiceID: "svc-1", RegionID: "r2"})
	require.NoError(t, err)
	require.Equal(t, "http://old/v2.1", eps[0].URL)
	ep, err := k.CreateEndpoint(ctx, endpoints.CreateOpts{Availability: gophercloud.AvailabilityPublic, Region: "r2", ServiceID: "svc-1", URL: "http://nova/v2.1"})
	require.NoError(t, err)
	require.Equal(t, "e-2", ep.ID)
	require.NoError(t, k.MoveEndpoint(ctx, "e-1", "http://nova-int/v2.1"))
	require.NoError(t, k.DeleteEndpoint(ctx, "e-1"))

	got := api.requests()
	require.Equal(t, map[string]any{"region": map[string]any{"id": "r2", "description": "created by stackflow"}}, got[1].Body)
	require.Equal(t, "type=compute", got[2].Query)
	require.Equal(t, map[string]any{"service": map[string]any{"type": "compute", "name": "nova"}}, got[3].Body)
	require.Contains(t, got[4].Query, "region_id=r2")
	require.Contains(t, got[4].Query, "service_id=svc-1")
	// gophercloud names the region with Keystone's older "region" field, which Keystone still reads as the
	// region's ID.
	require.Equal(t, map[string]any{"endpoint": map[string]any{"interface": "public", "region": "r2", "service_id": "svc-1", "url": "http://nova/v2.1"}}, got[5].Body)
	require.Equal(t, map[string]any{"endpoint": map[string]any{"url": "http://nova-int/v2.1"}}, got[6].Body, "only the URL moves")
}

func TestGopherIdentityUsers(t *testing.T) {
	ctx := context.Background()
	api, c := serve(t, map[string]apiAnswer{
		"GET /projects":                         {200, `{"projects": [{"id": "p-1", "name": "service", "domain_id": "default"}]}`},
		"POST /projects":                        {201, `{"project": {"id": "p-2", "name": "service"}}`},
		"GET /roles":                            {200, `{"roles": [{"id": "r-1", "name": "admin"}]}`},
		"POST /roles":                           {201, `{"role": {"id": "r-2", "name": "service"}}`},
		"PUT /projects/p-1/users/u-1/roles/r-1": {204, ""},
		"GET /users":                            {200, `{"users": [{"id": "u-1", "name": "nova", "domain_id": "default", "enabled": true}]}`},
		"POST /users":                           {201, `{"user": {"id": "u-2", "name": "nova"}}`},
		"PATCH /users/u-1":                      {200, `{"user": {"id": "u-1"}}`},
		"DELETE /users/u-1":                     {204, ""},
		"DELETE /users/u-gone":                  {404, `{"error": {"code": 404, "message": "Could not find user: u-gone."}}`},
	})
	k := gopherIdentity{c: c}
	ps, err := k.ListProjects(ctx, projects.ListOpts{Name: "service", DomainID: "default"})
	require.NoError(t, err)
	require.Equal(t, "p-1", ps[0].ID)
	p, err := k.CreateProject(ctx, projects.CreateOpts{Name: "service", DomainID: "default"})
	require.NoError(t, err)
	require.Equal(t, "p-2", p.ID)
	rs, err := k.ListRoles(ctx, roles.ListOpts{Name: "admin"})
	require.NoError(t, err)
	require.Equal(t, "r-1", rs[0].ID)
	r, err := k.CreateRole(ctx, roles.CreateOpts{Name: "service"})
	require.NoError(t, err)
	require.Equal(t, "r-2", r.ID)
	require.NoError(t, k.AssignRole(ctx, "r-1", "u-1", "p-1"))
	us, err := k.ListUsers(ctx, users.ListOpts{Name: "nova", DomainID: "default"})
	require.NoError(t, err)
	require.Equal(t, "u-1", us[0].ID)
	u, err := k.CreateUser(ctx, users.CreateOpts{Name: "nova", DomainID: "default", Password: "s3cret", DefaultProjectID: "p-1"})
	require.NoError(t, err)
	require.Equal(t, "u-2", u.ID)
	require.NoError(t, k.SetPassword(ctx, "u-1", "n3w"))
	require.NoError(t, k.DeleteUser(ctx, "u-1"))
	require.True(t, isNotFound(k.DeleteUser(ctx, "u-gone")))

	got := api.requests()
	require.Contains(t, got[0].Query, "name=service")
	require.Equal(t, "PUT", got[4].Method, "a grant is a PUT of the role on the user in the project")
	require.Equal(t, map[string]any{"user": map[string]any{"name": "nova", "domain_id": "default", "password": "s3cret",
		"default_project_id": "p-1"}}, got[6].Body)
	require.Equal(t, map[string]any{"user": map[string]any{"password": "n3w"}}, got[7].Body, "only the password changes")
}

// PasswordWorks asks Keystone for a token with the password, in the service users' domain.
func TestGopherIdentityPasswordWorks(t *testing.T) {
	var asked []any
	srv := keystoneAuth(t, func(body any) int {
		asked = append(asked, body)
		pw := body.(map[string]any)["auth"].(map[string]any)["identity"].(map[string]any)["password"].(map[string]any)["user"].(map[string]any)["password"]
		if pw == "right" {
			return http.StatusCreated
		}
		return http.StatusUnauthorized
	})
	k := gopherIdentity{authURL: srv + "/v3"}
	require.True(t, k.PasswordWorks(context.Background(), "nova", "right"))
	require.False(t, k.PasswordWorks(context.Background(), "nova", "wrong"))
	require.Len(t, asked, 2, "one login each, nothing else")
	user := asked[0].(map[string]any)["auth"].(map[string]any)["identity"].(map[string]any)["password"].(map[string]any)["user"].(map[string]any)
	require.Equal(t, "nova", user["name"])
	require.Equal(t, map[string]any{"id": serviceDomain}, user["domain"])
}

// keystoneAuth is a Keystone that answers password logins with the status answer gives (a token with
// an empty catalog when 201), and nothing else.
func keystoneAuth(t *testing.T, answer func(body any) int) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/v3/auth/tokens", r.URL.Path)
		var body any
		require.NoError(t, json.NewDecoder(r.Body).Decode(&body))
		status := answer(body)
		w.Header().Set("Content-Type", "application/json")
		if status != http.StatusCreated {
			w.WriteHeader(status)
			_, _ = io.WriteString(w, `{"error": {"code": 401, "message": "The request you have made requires authentication."}}`)
			return
		}
		w.Header().Set("X-Subject-Token", "token")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"token": {"expires_at": "2099-01-01T00:00:00.000000Z", "methods": ["password"], "catalog": [],
			"user": {"id": "u-1", "name": "nova", "domain": {"id": "default", "name": "Default"}}}}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// serviceKeystone is a Keystone whose catalog has its own identity endpoint and a compute API in region
// r2 (internal and public at different paths), logging in the service user nova with password s3cret;
// the compute API answers its flavor list and creates. It records the login requests and the compute
// paths asked.
func serviceKeystone(t *testing.T) (url string, logins *[]any, compute *[]string) {
	var mu sync.Mutex
	logins, compute = &[]any{}, &[]string{}
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v3/auth/tokens":
			var body any
			require.NoError(t, json.NewDecoder(r.Body).Decode(&body))
			mu.Lock()
			*logins = append(*logins, body)
			mu.Unlock()
			pw := body.(map[string]any)["auth"].(map[string]any)["identity"].(map[string]any)["password"].(map[string]any)["user"].(map[string]any)["password"]
			if pw != "s3cret" {
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, `{"error": {"code": 401, "title": "Unauthorized", "message": "The request you have made requires authentication."}}`)
				return
			}
			ep := func(iface, region, path string) map[string]any {
				return map[string]any{"interface": iface, "region": region, "region_id": region, "url": srv.URL + path}
			}
			w.Header().Set("X-Subject-Token", "token")
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(map[string]any{"token": map[string]any{"expires_at": "2099-01-01T00:00:00.000000Z", "methods": []string{"password"},
				"user":    map[string]any{"id": "u-1", "name": "nova", "domain": map[string]any{"id": "default", "name": "Default"}},
				"project": map[string]any{"id": "p-1", "name": "service", "domain": map[string]any{"id": "default", "name": "Default"}},
				"catalog": []map[string]any{
					{"type": "identity", "name": "keystone", "endpoints": []map[string]any{ep("public", "RegionOne", "/v3")}},
					{"type": "compute", "name": "nova", "endpoints": []map[string]any{ep("internal", "r2", "/r2/internal/v2.1"), ep("public", "r2", "/r2/public/v2.1")}},
				}}})
		case strings.HasPrefix(r.URL.Path, "/r2/"):
			mu.Lock()
			*compute = append(*compute, r.Method+" "+r.URL.Path)
			mu.Unlock()
			if r.Method == http.MethodPost {
				w.WriteHeader(http.StatusOK)
				_, _ = io.WriteString(w, `{"flavor": {"id": "f-2", "name": "m1.small", "vcpus": 1, "ram": 2048, "disk": 20}}`)
				return
			}
			_, _ = io.WriteString(w, `{"flavors": [{"id": "f-1", "name": "m1.tiny", "vcpus": 1, "ram": 512, "disk": 1}]}`)
		case r.URL.Path == "/v3/regions/r2":
			_, _ = io.WriteString(w, `{"region": {"id": "r2"}}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, logins, compute
}

// A service user logs in to the service project of domain Default with its password from the Secret,
// and reaches its region's compute API at the internal endpoint (EnsureFlavors through it).
func TestServiceUserClients(t *testing.T) {
	url, logins, compute := serviceKeystone(t)
	pw := func(v string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nova-pw"}, Data: map[string][]byte{"password": []byte(v)}}
	}
	user := ServiceUser{AuthURL: url + "/v3", User: "nova", Password: kube.SecretKeyRef{Namespace: "ns", Name: "nova-pw", Key: "password"}}
	o := &OpenStack{Core: fake.NewClientset(pw("s3cret"))}
	ctx := context.Background()

	res, err := o.EnsureFlavors(ctx, FlavorsInput{Auth: user, Region: "r2", Flavors: []Flavor{
		{Name: "m1.tiny", VCPUs: 1, RAM: 512, Disk: 1}, {Name: "m1.small", VCPUs: 1, RAM: 2048, Disk: 20}}})
	require.NoError(t, err)
	require.Equal(t, FlavorsResult{Created: []string{"m1.small"}, Adopted: []string{"m1.tiny"}}, *res)
	require.Equal(t, []string{"GET /r2/internal/v2.1/flavors/detail", "POST /r2/internal/v2.1/flavors"}, *compute, "the internal endpoint of the region")
	scope := (*logins)[0].(map[string]any)["auth"].(map[string]any)["scope"]
	require.Equal(t, map[string]any{"project": map[string]any{"name": "service", "domain": map[string]any{"name": "Default"}}}, scope)

	k, err := o.serviceIdentity(ctx, user)
	require.NoError(t, err)
	require.NoError(t, k.GetRegion(ctx, "r2"), "Keystone's own endpoint from the catalog")

	_, err = o.EnsureFlavors(ctx, FlavorsInput{Auth: user, Region: "r3"})
	requireOutcome(t, err, "retryable", "")
	require.Contains(t, err.Error(), "no compute API in region r3")

	wrong := &OpenStack{Core: fake.NewClientset(pw("old"))}
	_, err = wrong.EnsureFlavors(ctx, FlavorsInput{Auth: user, Region: "r2"})
	requireOutcome(t, err, "permanent", ErrOSCredentials)

	none := &OpenStack{Core: fake.NewClientset()}
	_, err = none.EnsureFlavors(ctx, FlavorsInput{Auth: user, Region: "r2"})
	requireOutcome(t, err, "permanent", kube.ErrSecretMissing)
}
