package openstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// fakeKeystone answers Keystone v3 password authentication with a catalog holding a compute API in
// RegionOne and RegionTwo (a Nova of its own there) and the network and image APIs in RegionOne; it
// counts the logins.
func fakeKeystone(t *testing.T) (*httptest.Server, *atomic.Int32) {
	logins := &atomic.Int32{}
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			// The version documents of Neutron and Glance, which gophercloud reads to find each API's base.
			versions := map[string]string{"/one/network/": "v2.0", "/one/image/": "v2.16"}
			if v, ok := versions[r.URL.Path]; ok {
				w.Header().Set("Content-Type", "application/json")
				_, _ = fmt.Fprintf(w, `{"versions":[{"id":%q,"status":"CURRENT","links":[{"href":%q,"rel":"self"}]}]}`, v, srv.URL+r.URL.Path+"v2/")
				return
			}
		}
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/v3/auth/tokens") {
			http.NotFound(w, r)
			return
		}
		logins.Add(1)
		ep := func(region, path string) map[string]any {
			return map[string]any{"interface": "public", "region": region, "region_id": region, "url": srv.URL + path}
		}
		body := map[string]any{"token": map[string]any{
			"expires_at": "2099-01-01T00:00:00.000000Z", "methods": []string{"password"},
			"project": map[string]any{"id": "p1", "name": "admin", "domain": map[string]any{"id": "default", "name": "Default"}},
			"user":    map[string]any{"id": "u1", "name": "admin", "domain": map[string]any{"id": "default", "name": "Default"}},
			"catalog": []map[string]any{
				{"type": "compute", "name": "nova", "endpoints": []map[string]any{ep("RegionOne", "/one/compute/v2.1"), ep("RegionTwo", "/two/compute/v2.1")}},
				{"type": "network", "name": "neutron", "endpoints": []map[string]any{ep("RegionOne", "/one/network")}},
				{"type": "image", "name": "glance", "endpoints": []map[string]any{ep("RegionOne", "/one/image")}},
			},
		}}
		w.Header().Set("X-Subject-Token", fmt.Sprintf("token-%d", logins.Load()))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(srv.Close)
	return srv, logins
}

func identitySecret(keystone string) *corev1.Secret {
	yml := fmt.Sprintf(`clouds:
  site:
    auth: {auth_url: %s/v3, username: admin, password: pw, project_name: admin, user_domain_name: Default, project_domain_name: Default}
    region_name: RegionOne
`, keystone)
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cloud", Namespace: "ns", ResourceVersion: "1", UID: "s1"},
		Data: map[string][]byte{CloudsYAMLKey: []byte(yml)}}
}

// Clients per identity and region: the compute API of the identity's compute region (a Nova serving its
// own region), the other services in the cloud's region; kept while the Secret does not change, made
// anew when it does, and kept when it is gone (a namespace being deleted tears down with them).
func TestClientsForRegionsAndCaching(t *testing.T) {
	ks, logins := fakeKeystone(t)
	ctx := context.Background()
	core := fake.NewSimpleClientset(identitySecret(ks.URL))
	o := &OpenStack{Core: core}
	id := Identity{Namespace: "ns", SecretName: "cloud"}

	for _, tc := range []struct {
		name           string
		computeRegion  string
		compute, other string
		err            error
	}{
		{"the cloud's region", "", "/one/compute/v2.1/", "/one/network/", nil},
		{"a Nova of its own region", "RegionTwo", "/two/compute/v2.1/", "/one/network/", nil},
		{"a region with no compute API", "RegionThree", "", "", errNoComputeAPI},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := id
			id.ComputeRegion = tc.computeRegion
			c, err := o.clientsFor(ctx, id)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, ks.URL+tc.compute, c.compute.Endpoint)
			require.Equal(t, ks.URL+tc.other, c.network.Endpoint, "the network API of the cloud's region")
			require.Equal(t, ComputeMicroversion, c.compute.Microversion)
		})
	}

	// A region with no compute API serves the other services (bare-metal provisioning, what stays of a
	// compute in Placement and Neutron): those clients are kept too, and a call that needs Nova logs in
	// again before it says there is none, so a Nova registered later is found.
	none := id
	none.ComputeRegion = "RegionThree"
	c, err := o.regionClients(ctx, none)
	require.NoError(t, err)
	require.Nil(t, c.compute)
	require.ErrorIs(t, c.computeErr, errNoComputeAPI)
	require.Equal(t, ks.URL+"/one/network/", c.network.Endpoint)
	before := logins.Load()
	kept, err := o.regionClients(ctx, none)
	require.NoError(t, err)
	require.Same(t, c, kept, "clients without a compute API are kept")
	require.Equal(t, before, logins.Load(), "no new login")
	_, err = o.clientsFor(ctx, none)
	require.ErrorIs(t, err, errNoComputeAPI)
	require.Equal(t, before+1, logins.Load(), "asked for Nova, it logs in again first")

	first, err := o.clientsFor(ctx, id)
	require.NoError(t, err)
	n := logins.Load()
	again, err := o.clientsFor(ctx, id)
	require.NoError(t, err)
	require.Same(t, first, again, "kept while the Secret is unchanged")
	require.Equal(t, n, logins.Load(), "no new login")

	sec := identitySecret(ks.URL)
	sec.ResourceVersion = "2"
	_, err = core.CoreV1().Secrets("ns").Update(ctx, sec, metav1.UpdateOptions{})
	require.NoError(t, err)
	changed, err := o.clientsFor(ctx, id)
	require.NoError(t, err)
	require.NotSame(t, first, changed, "a changed Secret makes new clients")
	require.Equal(t, n+1, logins.Load())

	require.NoError(t, core.CoreV1().Secrets("ns").Delete(ctx, "cloud", metav1.DeleteOptions{}))
	kept, err = o.clientsFor(ctx, id)
	require.NoError(t, err)
	require.Same(t, changed, kept, "a deleted Secret keeps the clients already made")
	_, err = o.clientsFor(ctx, Identity{Namespace: "ns", SecretName: "cloud", CloudName: "other"})
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app) && app.Type() == ErrOSCredentials, "no Secret and no clients: %v", err)
}

// A data-plane service's cloud (ServiceCloud): the clouds.yaml of its Nova's services' Secret when that
// holds one, else the fallback's cloud, in the same compute region.
func TestClientsForFallback(t *testing.T) {
	site, _ := fakeKeystone(t)
	nova, _ := fakeKeystone(t)
	ctx := context.Background()
	withClouds := identitySecret(nova.URL)
	withClouds.Name = "nova-secret"
	withClouds.Data["NovaPassword"] = []byte("pw")
	passwordsOnly := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "osp-secret", Namespace: "ns", ResourceVersion: "1", UID: "s2"},
		Data: map[string][]byte{"NovaPassword": []byte("pw")}}
	// The namespace's cloud, under the name a data-plane service falls back to.
	siteClouds := identitySecret(site.URL)
	siteClouds.Name = DefaultCloudsSecret
	o := &OpenStack{Core: fake.NewSimpleClientset(siteClouds, withClouds, passwordsOnly)}
	for _, tc := range []struct {
		name, secret, want string
	}{
		{"the Nova's clouds.yaml", "nova-secret", nova.URL},
		{"a Secret of passwords only: the namespace's cloud", "osp-secret", site.URL},
		{"no such Secret: the namespace's cloud", "gone", site.URL},
		{"no Nova: the namespace's cloud", "", site.URL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := o.clientsFor(ctx, ServiceCloud("ns", tc.secret, "RegionTwo").Identity())
			require.NoError(t, err)
			require.Equal(t, tc.want+"/two/compute/v2.1/", c.compute.Endpoint, "the compute API of the region asked, in the cloud chosen")
		})
	}
	_, err := o.clientsFor(ctx, Identity{Namespace: "ns", SecretName: "osp-secret"})
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app) && app.Type() == ErrOSCredentials, "without a fallback, a Secret with no clouds.yaml is refused: %v", err)
}
