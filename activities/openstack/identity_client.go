package openstack

import (
	"context"
	"fmt"
	"strings"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/endpoints"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/projects"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/regions"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/roles"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/services"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/users"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"go.temporal.io/sdk/temporal"

	"github.com/stackflow/stackflow/activities/kube"
)

// IdentityClient is every call the activities make to Keystone: the catalog (regions, services,
// endpoints) as a service user, and service users (projects, roles, users) as the administrator. The
// activities decide against it, unit tests give them a generated mock, and gopherIdentity is the one
// implementation. Errors are gophercloud's.
type IdentityClient interface {
	// GetRegion reads the region (a 404 when Keystone has none of the ID).
	GetRegion(ctx context.Context, id string) error
	CreateRegion(ctx context.Context, opts regions.CreateOpts) error
	// CatalogServices lists the catalog's services of the type.
	CatalogServices(ctx context.Context, serviceType string) ([]services.Service, error)
	CreateCatalogService(ctx context.Context, opts services.CreateOpts) (*services.Service, error)
	ListEndpoints(ctx context.Context, opts endpoints.ListOpts) ([]endpoints.Endpoint, error)
	CreateEndpoint(ctx context.Context, opts endpoints.CreateOpts) (*endpoints.Endpoint, error)
	// MoveEndpoint sets the endpoint's URL.
	MoveEndpoint(ctx context.Context, id, url string) error
	DeleteEndpoint(ctx context.Context, id string) error

	ListProjects(ctx context.Context, opts projects.ListOpts) ([]projects.Project, error)
	CreateProject(ctx context.Context, opts projects.CreateOpts) (*projects.Project, error)
	ListRoles(ctx context.Context, opts roles.ListOpts) ([]roles.Role, error)
	CreateRole(ctx context.Context, opts roles.CreateOpts) (*roles.Role, error)
	// AssignRole grants the role to the user in the project.
	AssignRole(ctx context.Context, roleID, userID, projectID string) error
	ListUsers(ctx context.Context, opts users.ListOpts) ([]users.User, error)
	CreateUser(ctx context.Context, opts users.CreateOpts) (*users.User, error)
	SetPassword(ctx context.Context, userID, password string) error
	DeleteUser(ctx context.Context, id string) error
	// PasswordWorks reports whether Keystone issues the user of domain Default an (unscoped) token for
	// the password.
	PasswordWorks(ctx context.Context, user, password string) bool
}

// serviceIdentity logs in as the service user and returns its Keystone client, or what a unit test set
// in o.identity.
func (o *OpenStack) serviceIdentity(ctx context.Context, u ServiceUser) (IdentityClient, error) {
	if o.identity != nil {
		c, _, err := o.identity(ctx)
		return c, err
	}
	provider, err := o.serviceProvider(ctx, u)
	if err != nil {
		return nil, err
	}
	c, err := openstack.NewIdentityV3(provider, gophercloud.EndpointOpts{})
	if err != nil {
		return nil, classifyOS("identity endpoint of "+u.AuthURL, err)
	}
	return gopherIdentity{c, u.AuthURL}, nil
}

// adminIdentity logs in as the administrator of the Secret and returns a Keystone client and Keystone's
// endpoint (or what a unit test set in o.identity). A Keystone with no other service in its catalog is
// enough.
func (o *OpenStack) adminIdentity(ctx context.Context, admin CloudSecret) (IdentityClient, string, error) {
	if o.identity != nil {
		return o.identity(ctx)
	}
	sec, err := o.Core.CoreV1().Secrets(admin.Namespace).Get(ctx, admin.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("Keystone administrator's Secret %s not found", admin), ErrOSCredentials, err)
	}
	if err != nil {
		return nil, "", kube.Classify("get Secret "+admin.String(), err)
	}
	provider, eo, err := authenticate(ctx, admin.Identity(), sec.Data)
	if err != nil {
		return nil, "", err
	}
	c, err := openstack.NewIdentityV3(provider, eo)
	if err != nil {
		return nil, "", classifyOS("identity endpoint of "+admin.String(), err)
	}
	authURL := strings.TrimSuffix(provider.IdentityEndpoint, "/")
	return gopherIdentity{c, authURL}, authURL, nil
}

// serviceProvider logs in as the service user.
func (o *OpenStack) serviceProvider(ctx context.Context, u ServiceUser) (*gophercloud.ProviderClient, error) {
	pw, err := kube.ReadSecretKey(ctx, o.Core, u.Password)
	if err != nil {
		return nil, err
	}
	provider, err := openstack.AuthenticatedClient(ctx, gophercloud.AuthOptions{
		IdentityEndpoint: u.AuthURL, Username: u.User, Password: pw, DomainName: "Default",
		Scope: &gophercloud.AuthScope{ProjectName: "service", DomainName: "Default"},
	})
	if err != nil {
		return nil, classifyOS(fmt.Sprintf("log in to %s as %s", u.AuthURL, u.User), err)
	}
	return provider, nil
}

// gopherIdentity is IdentityClient on gophercloud; authURL is Keystone's endpoint, where PasswordWorks
// asks for a token.
type gopherIdentity struct {
	c       *gophercloud.ServiceClient
	authURL string
}

func (g gopherIdentity) GetRegion(ctx context.Context, id string) error {
	return regions.Get(ctx, g.c, id).Err
}

func (g gopherIdentity) CreateRegion(ctx context.Context, opts regions.CreateOpts) error {
	_, err := regions.Create(ctx, g.c, opts).Extract()
	return err
}

func (g gopherIdentity) CatalogServices(ctx context.Context, serviceType string) ([]services.Service, error) {
	pages, err := services.List(g.c, services.ListOpts{ServiceType: serviceType}).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	return services.ExtractServices(pages)
}

func (g gopherIdentity) CreateCatalogService(ctx context.Context, opts services.CreateOpts) (*services.Service, error) {
	return services.Create(ctx, g.c, opts).Extract()
}

func (g gopherIdentity) ListEndpoints(ctx context.Context, opts endpoints.ListOpts) ([]endpoints.Endpoint, error) {
	pages, err := endpoints.List(g.c, opts).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	return endpoints.ExtractEndpoints(pages)
}

func (g gopherIdentity) CreateEndpoint(ctx context.Context, opts endpoints.CreateOpts) (*endpoints.Endpoint, error) {
	return endpoints.Create(ctx, g.c, opts).Extract()
}

func (g gopherIdentity) MoveEndpoint(ctx context.Context, id, url string) error {
	_, err := endpoints.Update(ctx, g.c, id, endpoints.UpdateOpts{URL: url}).Extract()
	return err
}

func (g gopherIdentity) DeleteEndpoint(ctx context.Context, id string) error {
	return endpoints.Delete(ctx, g.c, id).ExtractErr()
}

func (g gopherIdentity) ListProjects(ctx context.Context, opts projects.ListOpts) ([]projects.Project, error) {
	pages, err := projects.List(g.c, opts).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	return projects.ExtractProjects(pages)
}

func (g gopherIdentity) CreateProject(ctx context.Context, opts projects.CreateOpts) (*projects.Project, error) {
	return projects.Create(ctx, g.c, opts).Extract()
}

func (g gopherIdentity) ListRoles(ctx context.Context, opts roles.ListOpts) ([]roles.Role, error) {
	pages, err := roles.List(g.c, opts).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	return roles.ExtractRoles(pages)
}

func (g gopherIdentity) CreateRole(ctx context.Context, opts roles.CreateOpts) (*roles.Role, error) {
	return roles.Create(ctx, g.c, opts).Extract()
}

func (g gopherIdentity) AssignRole(ctx context.Context, roleID, userID, projectID string) error {
	return roles.Assign(ctx, g.c, roleID, roles.AssignOpts{UserID: userID, ProjectID: projectID}).ExtractErr()
}

func (g gopherIdentity) ListUsers(ctx context.Context, opts users.ListOpts) ([]users.User, error) {
	pages, err := users.List(g.c, opts).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	return users.ExtractUsers(pages)
}

func (g gopherIdentity) CreateUser(ctx context.Context, opts users.CreateOpts) (*users.User, error) {
	return users.Create(ctx, g.c, opts).Extract()
}

func (g gopherIdentity) SetPassword(ctx context.Context, userID, password string) error {
	_, err := users.Update(ctx, g.c, userID, users.UpdateOpts{Password: password}).Extract()
	return err
}

func (g gopherIdentity) DeleteUser(ctx context.Context, id string) error {
	return users.Delete(ctx, g.c, id).ExtractErr()
}

func (g gopherIdentity) PasswordWorks(ctx context.Context, user, password string) bool {
	_, err := openstack.AuthenticatedClient(ctx, gophercloud.AuthOptions{IdentityEndpoint: g.authURL, Username: user, Password: password, DomainID: serviceDomain})
	return err == nil
}

// The gophercloud types the activities use, under stackflow's names: this file is the only one of the
// package that imports the service's gophercloud packages (TestServiceTypesBehindClients).
type (
	CatalogService           = services.Service
	CatalogServiceCreateOpts = services.CreateOpts
	Endpoint                 = endpoints.Endpoint
	EndpointCreateOpts       = endpoints.CreateOpts
	EndpointListOpts         = endpoints.ListOpts
	Project                  = projects.Project
	ProjectCreateOpts        = projects.CreateOpts
	ProjectListOpts          = projects.ListOpts
	RegionCreateOpts         = regions.CreateOpts
	Role                     = roles.Role
	RoleCreateOpts           = roles.CreateOpts
	RoleListOpts             = roles.ListOpts
	User                     = users.User
	UserCreateOpts           = users.CreateOpts
	UserListOpts             = users.ListOpts
)
