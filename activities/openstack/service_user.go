package openstack

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
		u, err = c.CreateUser(ctx, UserCreateOpts{Name: in.User, DomainID: serviceDomain, DefaultProjectID: project,
			Password: pw, Description: in.description()})
		if isConflict(err) {
			u, err = findUser(ctx, c, in.User)
		}
		if err != nil {
			return nil, classifyOS("create user "+in.User, err)
		}
	} else if !c.PasswordWorks(ctx, in.User, pw) {
		// Only when it differs: Keystone revokes a user's tokens when its password is set.
		if err := c.SetPassword(ctx, u.ID, pw); err != nil {
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
		if err := c.AssignRole(ctx, role, u.ID, project); err != nil {
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
		logWarn(ctx, "Keystone administrator's Secret is gone: the service user, if it exists, is left", "secret", in.Admin.String(), "user", in.User)
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
	if err := c.DeleteUser(ctx, u.ID); err != nil && !isNotFound(err) {
		return classifyOS("delete user "+in.User, err)
	}
	return nil
}

// findUser returns the user of domain Default with the name, or nil.
func findUser(ctx context.Context, c IdentityClient, name string) (*User, error) {
	all, err := c.ListUsers(ctx, UserListOpts{Name: name, DomainID: serviceDomain})
	if err != nil {
		return nil, classifyOS("find user "+name, err)
	}
	if len(all) == 0 {
		return nil, nil
	}
	return &all[0], nil
}

// ensureServiceProject returns the ID of project service of domain Default, creating it when missing.
func ensureServiceProject(ctx context.Context, c IdentityClient) (string, error) {
	return findOrCreate("project service", func() (string, error) {
		all, err := c.ListProjects(ctx, ProjectListOpts{Name: "service", DomainID: serviceDomain})
		if err != nil {
			return "", classifyOS("find project service", err)
		}
		if len(all) == 0 {
			return "", nil
		}
		return all[0].ID, nil
	}, func() (string, error) {
		p, err := c.CreateProject(ctx, ProjectCreateOpts{Name: "service", DomainID: serviceDomain, Description: "created by stackflow"})
		if err != nil {
			return "", err
		}
		return p.ID, nil
	})
}

// ensureRole returns the ID of the global role with the name, creating it when missing.
func ensureRole(ctx context.Context, c IdentityClient, name string) (string, error) {
	return findOrCreate("role "+name, func() (string, error) {
		all, err := c.ListRoles(ctx, RoleListOpts{Name: name})
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
		r, err := c.CreateRole(ctx, RoleCreateOpts{Name: name})
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
