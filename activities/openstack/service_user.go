package openstack

import (
	"context"
	"fmt"
	"strings"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/projects"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/roles"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/users"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/stackflow/stackflow/activities/kube"
)

// A deployed service's Keystone user, made by stackflow as Keystone's administrator (as OpenStack-Helm's
// ks-user Job does), so that a service can join a Keystone that stackflow deployed and nobody
// prepared.

// ServiceUserInput is a service user to create (or adopt) in project "service" of domain Default, as the
// administrator of a clouds.yaml Secret.
type ServiceUserInput struct {
	Admin    CloudSecret       `json:"admin"`
	User     string            `json:"user"`
	Password kube.SecretKeyRef `json:"password"`
	// Roles are the user's roles in project service, created when Keystone has none of the name (admin
	// and service when empty: services that require a service token, as the computes' and Neutron's
	// keystonemiddleware does with service_token_roles_required, want the service role in it).
	Roles []string `json:"roles,omitempty"`
	// Owner is written into the description of a user this creates: the teardown deletes only such a
	// user, and never one that was there before.
	Owner *kube.Owner `json:"owner"`
}

// ServiceUserResult is where the user lives.
type ServiceUserResult struct {
	// AuthURL is Keystone's endpoint, as the administrator's clouds.yaml names it.
	AuthURL string `json:"authURL"`
	// Owned says the user is the owner's (created by it, now or before), not adopted.
	Owned bool `json:"owned"`
}

// Same reports whether two inputs name the same user of the same Keystone with the same password.
func (in ServiceUserInput) Same(o ServiceUserInput) bool {
	return in.Admin == o.Admin && in.User == o.User && in.Password == o.Password
}

// serviceDomain is the domain of service users and of project service.
const serviceDomain = "default"

func (in ServiceUserInput) description() string {
	if in.Owner == nil {
		return "stackflow"
	}
	return "stackflow " + in.Owner.Kind + "/" + in.Owner.Name + " " + in.Owner.UID
}

// adminIdentity logs in as the administrator of the Secret and returns a Keystone client and Keystone's
// endpoint. A Keystone with no other service in its catalog is enough.
func (o *OpenStack) adminIdentity(ctx context.Context, admin CloudSecret) (*gophercloud.ServiceClient, string, error) {
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
	return c, strings.TrimSuffix(provider.IdentityEndpoint, "/"), nil
}

// EnsureServiceUser creates the user with the role in project service (creating the project when the
// Keystone has none), or sets the password of the user that exists, so that the Secret's password is
// the one Keystone knows. Idempotent: a user this owner created before is found by its description.
func (o *OpenStack) EnsureServiceUser(ctx context.Context, in ServiceUserInput) (*ServiceUserResult, error) {
	c, authURL, err := o.adminIdentity(ctx, in.Admin)
	if err != nil {
		return nil, err
	}
	pw, err := kube.ReadSecretKey(ctx, o.Core, in.Password)
	if err != nil {
		return nil, err
	}
	project, err := ensureServiceProject(ctx, c)
	if err != nil {
		return nil, err
	}
	u, err := findUser(ctx, c, in.User)
	if err != nil {
		return nil, err
	}
	if u == nil {
		u, err = users.Create(ctx, c, users.CreateOpts{Name: in.User, DomainID: serviceDomain, DefaultProjectID: project,
			Password: pw, Description: in.description()}).Extract()
		if isConflict(err) {
			u, err = findUser(ctx, c, in.User)
		}
		if err != nil {
			return nil, classifyOS("create user "+in.User, err)
		}
	} else if !passwordWorks(ctx, authURL, in.User, pw) {
		// Only when it differs: Keystone revokes a user's tokens when its password is set.
		if _, err := users.Update(ctx, c, u.ID, users.UpdateOpts{Password: pw}).Extract(); err != nil {
			return nil, classifyOS("set the password of user "+in.User, err)
		}
	}
	names := in.Roles
	if len(names) == 0 {
		names = []string{"admin", "service"}
	}
	for _, name := range names {
		role, err := ensureRole(ctx, c, name)
		if err != nil {
			return nil, err
		}
		if err := roles.Assign(ctx, c, role, roles.AssignOpts{UserID: u.ID, ProjectID: project}).ExtractErr(); err != nil {
			return nil, classifyOS(fmt.Sprintf("grant %s role %s in project service", in.User, name), err)
		}
	}
	return &ServiceUserResult{AuthURL: authURL, Owned: u.Description == in.description()}, nil
}

// DeleteServiceUser deletes the user if EnsureServiceUser created it for the same owner; a user that is
// gone, or was never the owner's, is left and is not an error.
//
// Without the administrator's Secret nothing can be done, and waiting would hold the Nova's deletion (a
// namespace deleted deletes the Secret too): the user, if any, is left, and the log says so.
func (o *OpenStack) DeleteServiceUser(ctx context.Context, in ServiceUserInput) error {
	_, err := o.Core.CoreV1().Secrets(in.Admin.Namespace).Get(ctx, in.Admin.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		activity.GetLogger(ctx).Warn("Keystone administrator's Secret is gone: the service user, if it exists, is left", "secret", in.Admin.String(), "user", in.User)
		return nil
	}
	c, _, err := o.adminIdentity(ctx, in.Admin)
	if err != nil {
		return err
	}
	u, err := findUser(ctx, c, in.User)
	if err != nil || u == nil || u.Description != in.description() {
		return err
	}
	if err := users.Delete(ctx, c, u.ID).ExtractErr(); err != nil && !isNotFound(err) {
		return classifyOS("delete user "+in.User, err)
	}
	return nil
}

// findUser returns the user of domain Default with the name, or nil.
func findUser(ctx context.Context, c *gophercloud.ServiceClient, name string) (*users.User, error) {
	pages, err := users.List(c, users.ListOpts{Name: name, DomainID: serviceDomain}).AllPages(ctx)
	if err != nil {
		return nil, classifyOS("find user "+name, err)
	}
	all, err := users.ExtractUsers(pages)
	if err != nil {
		return nil, classifyOS("find user "+name, err)
	}
	if len(all) == 0 {
		return nil, nil
	}
	return &all[0], nil
}

// ensureServiceProject returns the ID of project service of domain Default, creating it when missing.
func ensureServiceProject(ctx context.Context, c *gophercloud.ServiceClient) (string, error) {
	return findOrCreate("project service", func() (string, error) {
		pages, err := projects.List(c, projects.ListOpts{Name: "service", DomainID: serviceDomain}).AllPages(ctx)
		if err != nil {
			return "", classifyOS("find project service", err)
		}
		all, err := projects.ExtractProjects(pages)
		if err != nil {
			return "", classifyOS("find project service", err)
		}
		if len(all) == 0 {
			return "", nil
		}
		return all[0].ID, nil
	}, func() (string, error) {
		p, err := projects.Create(ctx, c, projects.CreateOpts{Name: "service", DomainID: serviceDomain, Description: "created by stackflow"}).Extract()
		if err != nil {
			return "", err
		}
		return p.ID, nil
	})
}

// ensureRole returns the ID of the global role with the name, creating it when missing.
func ensureRole(ctx context.Context, c *gophercloud.ServiceClient, name string) (string, error) {
	return findOrCreate("role "+name, func() (string, error) {
		pages, err := roles.List(c, roles.ListOpts{Name: name}).AllPages(ctx)
		if err != nil {
			return "", classifyOS("find role "+name, err)
		}
		all, err := roles.ExtractRoles(pages)
		if err != nil {
			return "", classifyOS("find role "+name, err)
		}
		for _, r := range all {
			if r.DomainID == "" { // a global role, not a domain-specific one of the name
				return r.ID, nil
			}
		}
		return "", nil
	}, func() (string, error) {
		r, err := roles.Create(ctx, c, roles.CreateOpts{Name: name}).Extract()
		if err != nil {
			return "", err
		}
		return r.ID, nil
	})
}

// findOrCreate returns the ID find gives, or, when it gives none, the ID of what create makes. A conflict
// on create is another registration creating it at the same moment: find reads it back.
func findOrCreate(what string, find, create func() (string, error)) (string, error) {
	if id, err := find(); id != "" || err != nil {
		return id, err
	}
	id, err := create()
	if isConflict(err) {
		return find()
	}
	if err != nil {
		return "", classifyOS("create "+what, err)
	}
	return id, nil
}

// passwordWorks reports whether Keystone issues the user of domain Default an (unscoped) token for the
// password.
func passwordWorks(ctx context.Context, authURL, user, pw string) bool {
	_, err := openstack.AuthenticatedClient(ctx, gophercloud.AuthOptions{IdentityEndpoint: authURL, Username: user, Password: pw, DomainID: serviceDomain})
	return err == nil
}
