package e2e

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ChartKeystoneAPI is the identity URL of the keystone chart's release in ns: its Service's address, as
// the bootstrap Job registers it.
func (e *Env) ChartKeystoneAPI(t testing.TB, ns string) string {
	t.Helper()
	svc, err := e.Kube.CoreV1().Services(ns).Get(context.Background(), "keystone-api", metav1.GetOptions{})
	require.NoError(t, err)
	return "http://" + net.JoinHostPort(svc.Spec.ClusterIP, "5000") + "/v3"
}

// ChartKeystoneLogin logs in to api as the keystone chart's bootstrap administrator, whose password is in
// the release's Secret keystone-admin in ns.
func (e *Env) ChartKeystoneLogin(t testing.TB, ns, api string) *gophercloud.ProviderClient {
	t.Helper()
	p, err := KeystoneLogin(api, e.SecretValue(t, ns, "keystone-admin", "OS_PASSWORD"))
	require.NoError(t, err, "log in to %s", api)
	return p
}

// KeystoneLogin logs in to api as admin of the admin project in the Default domain.
func KeystoneLogin(api, password string) (*gophercloud.ProviderClient, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return openstack.AuthenticatedClient(ctx, gophercloud.AuthOptions{
		IdentityEndpoint: api, Username: "admin", Password: password, DomainName: "Default",
		Scope: &gophercloud.AuthScope{ProjectName: "admin", DomainName: "Default"},
	})
}

// CatalogEndpoint is one endpoint of a token's catalog.
type CatalogEndpoint struct {
	Region, Interface, URL string
}

// Catalog is the service catalog of the provider's token by service type.
func Catalog(t testing.TB, p *gophercloud.ProviderClient) map[string][]CatalogEndpoint {
	t.Helper()
	catalog, err := p.GetAuthResult().(tokens.CreateResult).ExtractServiceCatalog()
	require.NoError(t, err)
	out := map[string][]CatalogEndpoint{}
	for _, e := range catalog.Entries {
		for _, ep := range e.Endpoints {
			out[e.Type] = append(out[e.Type], CatalogEndpoint{Region: ep.RegionID, Interface: ep.Interface, URL: ep.URL})
		}
	}
	return out
}
