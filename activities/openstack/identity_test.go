package openstack

import (
	"context"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/stretchr/testify/require"
	"go.uber.org/mock/gomock"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/activities/openstack/mock"
)

func TestEnsureEndpoints(t *testing.T) {
	in := EndpointsInput{ServiceType: "compute", ServiceName: "nova", Region: "r2",
		URLs: map[string]string{"internal": "http://nova-int/v2.1", "public": "http://nova/v2.1"}, Owned: []string{"e-old"}}
	list := EndpointListOpts{ServiceID: "svc-1", RegionID: "r2"}
	ep := func(id, iface, url string) Endpoint {
		return Endpoint{ID: id, Availability: gophercloud.Availability(iface), URL: url}
	}
	catalog := func(k *mock.MockIdentityClientMockRecorder) {
		k.CatalogServices(gomock.Any(), "compute").Return([]CatalogService{{ID: "svc-1", Name: "nova"}}, nil)
		k.GetRegion(gomock.Any(), "r2").Return(nil)
	}
	for _, tc := range []struct {
		name    string
		expect  func(k *mock.MockIdentityClientMockRecorder)
		outcome string
		errType string
		want    map[string]string
	}{
		{"created, with the service and region", func(k *mock.MockIdentityClientMockRecorder) {
			k.CatalogServices(gomock.Any(), "compute").Return(nil, nil)
			k.CreateCatalogService(gomock.Any(), CatalogServiceCreateOpts{Type: "compute", Name: "nova", Description: "created by stackflow"}).Return(&CatalogService{ID: "svc-1"}, nil)
			k.GetRegion(gomock.Any(), "r2").Return(httpErr(404, `{"error": {"message": "Could not find region: r2."}}`))
			k.CreateRegion(gomock.Any(), gomock.Any()).Return(nil)
			k.ListEndpoints(gomock.Any(), list).Return(nil, nil)
			k.CreateEndpoint(gomock.Any(), EndpointCreateOpts{Availability: "internal", Region: "r2", ServiceID: "svc-1", URL: "http://nova-int/v2.1"}).Return(&Endpoint{ID: "e-1"}, nil)
			k.CreateEndpoint(gomock.Any(), EndpointCreateOpts{Availability: "public", Region: "r2", ServiceID: "svc-1", URL: "http://nova/v2.1"}).Return(&Endpoint{ID: "e-2"}, nil)
		}, "ok", "", map[string]string{"internal": "e-1", "public": "e-2"}},
		{"there already: adopted, nothing written", func(k *mock.MockIdentityClientMockRecorder) {
			catalog(k)
			k.ListEndpoints(gomock.Any(), list).Return([]Endpoint{ep("e-1", "internal", "http://nova-int/v2.1"), ep("e-2", "public", "http://nova/v2.1")}, nil)
		}, "ok", "", map[string]string{"internal": "e-1", "public": "e-2"}},
		{"one of ours at an old URL: moved", func(k *mock.MockIdentityClientMockRecorder) {
			catalog(k)
			k.ListEndpoints(gomock.Any(), list).Return([]Endpoint{ep("e-old", "internal", "http://old/v2.1"), ep("e-2", "public", "http://nova/v2.1")}, nil)
			k.MoveEndpoint(gomock.Any(), "e-old", "http://nova-int/v2.1").Return(nil)
		}, "ok", "", map[string]string{"internal": "e-old", "public": "e-2"}},
		{"another deployment's endpoint in the region: permanent", func(k *mock.MockIdentityClientMockRecorder) {
			catalog(k)
			k.ListEndpoints(gomock.Any(), list).Return([]Endpoint{ep("e-9", "internal", "http://other/v2.1")}, nil)
		}, "permanent", ErrEndpointConflict, nil},
		{"Keystone down: retried", func(k *mock.MockIdentityClientMockRecorder) {
			k.CatalogServices(gomock.Any(), "compute").Return(nil, httpErr(503, "Service Unavailable"))
		}, "retryable", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := mock.NewMockIdentityClient(gomock.NewController(t))
			tc.expect(k.EXPECT())
			o := &OpenStack{identity: func(context.Context) (IdentityClient, string, error) { return k, "", nil }}
			got, err := o.EnsureEndpoints(context.Background(), in)
			requireOutcome(t, err, tc.outcome, tc.errType)
			if tc.outcome == "ok" {
				require.Equal(t, tc.want, got.IDs)
			}
		})
	}
}

// TestEnsureServiceUser: the user is made with its roles in project service, or its password set when
// Keystone knows another; one created by this owner says so; a create that raced another is read back.
func TestEnsureServiceUser(t *testing.T) {
	owner := &kube.Owner{Kind: "Nova", Name: "nova", UID: "u-1"}
	in := ServiceUserInput{Admin: CloudSecret{Namespace: "ns", Name: "admin"}, User: "nova",
		Password: kube.SecretKeyRef{Namespace: "ns", Name: "nova-pw", Key: "password"}, Roles: []string{"admin"}, Owner: owner}
	mine := User{ID: "user-1", Name: "nova", Description: in.description()}
	findUser := UserListOpts{Name: "nova", DomainID: serviceDomain}
	project := func(k *mock.MockIdentityClientMockRecorder) {
		k.ListProjects(gomock.Any(), ProjectListOpts{Name: "service", DomainID: serviceDomain}).Return([]Project{{ID: "p-1"}}, nil)
	}
	role := func(k *mock.MockIdentityClientMockRecorder) {
		k.ListRoles(gomock.Any(), RoleListOpts{Name: "admin"}).Return([]Role{{ID: "r-d", DomainID: "d-1"}, {ID: "r-1"}}, nil)
		k.AssignRole(gomock.Any(), "r-1", "user-1", "p-1").Return(nil)
	}
	for _, tc := range []struct {
		name    string
		expect  func(k *mock.MockIdentityClientMockRecorder)
		outcome string
		owned   bool
	}{
		{"created, granted the global role", func(k *mock.MockIdentityClientMockRecorder) {
			project(k)
			k.ListUsers(gomock.Any(), findUser).Return(nil, nil)
			k.CreateUser(gomock.Any(), UserCreateOpts{Name: "nova", DomainID: serviceDomain, DefaultProjectID: "p-1", Password: "s3cret", Description: in.description()}).
				Return(&mine, nil)
			role(k)
		}, "ok", true},
		{"exists with the password: left alone", func(k *mock.MockIdentityClientMockRecorder) {
			project(k)
			k.ListUsers(gomock.Any(), findUser).Return([]User{mine}, nil)
			k.PasswordWorks(gomock.Any(), "nova", "s3cret").Return(true)
			role(k)
		}, "ok", true},
		{"someone else's user with another password: password set, not owned", func(k *mock.MockIdentityClientMockRecorder) {
			project(k)
			k.ListUsers(gomock.Any(), findUser).Return([]User{{ID: "user-1", Name: "nova"}}, nil)
			k.PasswordWorks(gomock.Any(), "nova", "s3cret").Return(false)
			k.SetPassword(gomock.Any(), "user-1", "s3cret").Return(nil)
			role(k)
		}, "ok", false},
		{"created meanwhile by another registration: read back", func(k *mock.MockIdentityClientMockRecorder) {
			project(k)
			gomock.InOrder(
				k.ListUsers(gomock.Any(), findUser).Return(nil, nil),
				k.CreateUser(gomock.Any(), gomock.Any()).Return(nil, httpErr(409, `{"error": {"message": "Conflict occurred attempting to store user - Duplicate entry."}}`)),
				k.ListUsers(gomock.Any(), findUser).Return([]User{mine}, nil),
			)
			role(k)
		}, "ok", true},
		{"no project service yet: created", func(k *mock.MockIdentityClientMockRecorder) {
			k.ListProjects(gomock.Any(), gomock.Any()).Return(nil, nil)
			k.CreateProject(gomock.Any(), ProjectCreateOpts{Name: "service", DomainID: serviceDomain, Description: "created by stackflow"}).Return(&Project{ID: "p-1"}, nil)
			k.ListUsers(gomock.Any(), findUser).Return([]User{mine}, nil)
			k.PasswordWorks(gomock.Any(), "nova", "s3cret").Return(true)
			role(k)
		}, "ok", true},
		{"grant refused: permanent", func(k *mock.MockIdentityClientMockRecorder) {
			project(k)
			k.ListUsers(gomock.Any(), findUser).Return([]User{mine}, nil)
			k.PasswordWorks(gomock.Any(), "nova", "s3cret").Return(true)
			k.ListRoles(gomock.Any(), gomock.Any()).Return([]Role{{ID: "r-1"}}, nil)
			k.AssignRole(gomock.Any(), "r-1", "user-1", "p-1").Return(httpErr(403, `{"error": {"message": "You are not authorized to perform the requested action."}}`))
		}, "permanent", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := mock.NewMockIdentityClient(gomock.NewController(t))
			tc.expect(k.EXPECT())
			o := &OpenStack{Core: fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nova-pw"},
				Data: map[string][]byte{"password": []byte("s3cret")}}),
				identity: func(context.Context) (IdentityClient, string, error) { return k, "http://keystone/v3", nil }}
			got, err := o.EnsureServiceUser(context.Background(), in)
			requireOutcome(t, err, tc.outcome, ErrOSForbidden)
			if tc.outcome == "ok" {
				require.Equal(t, &ServiceUserResult{AuthURL: "http://keystone/v3", Owned: tc.owned}, got)
			}
		})
	}
}
