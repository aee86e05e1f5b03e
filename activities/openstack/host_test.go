package openstack

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/mock/gomock"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/activities/openstack/mock"
)

// The activities of a compute host's life beyond Nova's registration: its agents in Neutron, its
// instances, its state, and the Keystone objects a Nova leaves.

var hostCloud = CloudSecret{Namespace: "ns", Name: "cloud"}

func TestWaitNetworkAgentAlive(t *testing.T) {
	in := NetworkAgentInput{Cloud: hostCloud, Host: "c0", Binary: AgentBinaryOVNMetadata}
	meta := func(id, host string, alive bool) Agent {
		return Agent{ID: id, AgentType: "OVN Metadata agent", Binary: AgentBinaryOVNMetadata, Host: host, Alive: alive}
	}
	for _, tc := range []struct {
		name  string
		list  []Agent
		err   error
		want  string
		says  string
		retry bool
	}{
		{"alive", []Agent{meta("a-2", "c0", false), meta("a-1", "c0", true)}, nil, "a-1", "", false},
		{"none yet", nil, nil, "", "lists no neutron-ovn-metadata-agent on host c0 yet", true},
		{"dead", []Agent{meta("a-1", "c0", false)}, nil, "", "OVN Metadata agent a-1 (dead)", true},
		{"another host's agent a server's filter let through does not count", []Agent{meta("a-9", "c01", true)}, nil, "", "lists no", true},
		{"Neutron down: retried", nil, httpErr(503, "Service Unavailable"), "", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := mock.NewMockNetworkClient(gomock.NewController(t))
			n.EXPECT().ListAgents(gomock.Any(), AgentListOpts{Host: "c0", Binary: AgentBinaryOVNMetadata}).Return(tc.list, tc.err)
			got, err := withNeutron(t, hostCloud.Identity(), n).WaitNetworkAgentAlive(context.Background(), in)
			if tc.want != "" {
				require.NoError(t, err)
				require.Equal(t, tc.want, got.ID)
				return
			}
			requireOutcome(t, err, "retryable", "")
			if tc.says != "" {
				requireType(t, err, ErrNetworkAgentNotAlive)
				require.ErrorContains(t, err, tc.says)
			}
		})
	}
}

func TestDeleteNetworkAgents(t *testing.T) {
	in := NetworkAgentInput{Cloud: hostCloud, Host: "c0"}
	list := AgentListOpts{Host: "c0"}
	ctl := func(id string) Agent {
		return Agent{ID: id, AgentType: "OVN Controller agent", Binary: AgentBinaryOVNController, Host: "c0", Alive: true}
	}
	for _, tc := range []struct {
		name    string
		expect  func(n *mock.MockNetworkClientMockRecorder)
		outcome string
		deleted []string
	}{
		{"deleted, and stay gone", func(n *mock.MockNetworkClientMockRecorder) {
			gomock.InOrder(
				n.ListAgents(gomock.Any(), list).Return([]Agent{ctl("a-2"), ctl("a-1")}, nil),
				n.DeleteAgent(gomock.Any(), "a-1").Return(nil),
				n.DeleteAgent(gomock.Any(), "a-2").Return(httpErr(404, `{"NeutronError": {"message": "Agent a-2 could not be found."}}`)),
				n.ListAgents(gomock.Any(), list).Return(nil, nil),
			)
		}, "ok", []string{"a-1", "a-2"}},
		{"none: nothing to do", func(n *mock.MockNetworkClientMockRecorder) {
			n.ListAgents(gomock.Any(), list).Return(nil, nil).Times(2)
		}, "ok", nil},
		{"back at once (its process still runs): retried, naming it", func(n *mock.MockNetworkClientMockRecorder) {
			gomock.InOrder(
				n.ListAgents(gomock.Any(), list).Return([]Agent{ctl("a-1")}, nil),
				n.DeleteAgent(gomock.Any(), "a-1").Return(nil),
				n.ListAgents(gomock.Any(), list).Return([]Agent{ctl("a-3")}, nil),
			)
		}, "retryable", nil},
		{"refused: permanent", func(n *mock.MockNetworkClientMockRecorder) {
			n.ListAgents(gomock.Any(), list).Return([]Agent{ctl("a-1")}, nil)
			n.DeleteAgent(gomock.Any(), "a-1").Return(httpErr(403, `{"NeutronError": {"message": "rule:delete_agent is disallowed by policy"}}`))
		}, "permanent", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := mock.NewMockNetworkClient(gomock.NewController(t))
			tc.expect(n.EXPECT())
			got, err := withNeutron(t, hostCloud.Identity(), n).DeleteNetworkAgents(context.Background(), in)
			requireOutcome(t, err, tc.outcome, ErrOSForbidden)
			if tc.outcome == "retryable" {
				requireType(t, err, ErrNetworkAgentNotAlive)
				require.ErrorContains(t, err, "a-3")
			}
			if tc.outcome == "ok" {
				var ids []string
				for _, a := range got {
					ids = append(ids, a.ID)
				}
				require.Equal(t, tc.deleted, ids)
			}
		})
	}
}

func TestWaitHostEmpty(t *testing.T) {
	in := ComputeHostInput{Cloud: hostCloud, Host: "c0"}
	for _, tc := range []struct {
		name   string
		list   []Server
		err    error
		says   string
		retype string
	}{
		{"empty", nil, nil, "", ""},
		{"instances left: named", []Server{{ID: "i-2", Name: "web", Status: "DELETING"}, {ID: "i-1", Name: "db", Status: "ACTIVE"}}, nil,
			"2 instance(s) still on c0, waiting for them to be deleted or moved: db (i-1, ACTIVE), web (i-2, DELETING)", ErrInstancesOnHost},
		{"Nova down: retried", nil, httpErr(503, "Service Unavailable"), "list instances on c0", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := mock.NewMockComputeClient(gomock.NewController(t))
			n.EXPECT().ListServers(gomock.Any(), ServerListOpts{AllTenants: true, Host: "c0"}).Return(tc.list, tc.err)
			err := withNova(t, hostCloud.Identity(), n).WaitHostEmpty(context.Background(), in)
			if tc.says == "" {
				require.NoError(t, err)
				return
			}
			requireOutcome(t, err, "retryable", "")
			require.ErrorContains(t, err, tc.says)
			if tc.retype != "" {
				requireType(t, err, tc.retype)
			}
		})
	}
}

// A region with no compute API (its Nova gone) has no instance and no service to disable.
func TestNoComputeAPI(t *testing.T) {
	o := &OpenStack{compute: func(context.Context, Identity) (ComputeClient, error) {
		return nil, fmt.Errorf("region r2: %w", errNoComputeAPI)
	}}
	require.NoError(t, o.WaitHostEmpty(context.Background(), ComputeHostInput{Cloud: hostCloud, Host: "c0"}))
	gone, err := o.DeleteServersOnHost(context.Background(), ComputeHostInput{Cloud: hostCloud, Host: "c0"})
	require.NoError(t, err)
	require.Empty(t, gone)
	left, err := o.SetComputeService(context.Background(), ServiceStateInput{Cloud: hostCloud, Host: "c0", IfRegistered: true})
	require.NoError(t, err)
	require.Empty(t, left)
	_, err = o.SetComputeService(context.Background(), ServiceStateInput{Cloud: hostCloud, Host: "c0"})
	require.ErrorIs(t, err, errNoComputeAPI, "disabling a registered host needs its Nova")
}

func TestComputeNodeState(t *testing.T) {
	o, n, p := withNovaPlacement(t, hostCloud.Identity())
	n.EXPECT().ComputeServices(gomock.Any(), "c0").Return([]NovaService{{ID: "svc-1", State: "up", Status: "disabled", DisabledReason: "drain"}}, nil)
	n.EXPECT().Hypervisors(gomock.Any(), "c0").Return([]Hypervisor{hypervisor("hv-1", "c0")}, nil)
	p.EXPECT().ResourceClasses(gomock.Any(), "hv-1").Return([]string{VersionClassPrefix + "A", "VCPU"}, nil)
	n.EXPECT().ListServers(gomock.Any(), ServerListOpts{AllTenants: true, Host: "c0"}).Return([]Server{{ID: "i-2"}, {ID: "i-1"}}, nil)
	st, err := o.ComputeNodeState(context.Background(), ComputeHostInput{Cloud: hostCloud, Host: "c0"})
	require.NoError(t, err)
	require.Equal(t, &ComputeNodeState{ServiceID: "svc-1", Status: "disabled", DisabledReason: "drain", State: "up", HypervisorID: "hv-1",
		VersionClasses: []string{VersionClassPrefix + "A"}, Servers: []string{"i-1", "i-2"}}, st)
}

func TestDeleteEndpoints(t *testing.T) {
	k := mock.NewMockIdentityClient(gomock.NewController(t))
	k.EXPECT().DeleteEndpoint(gomock.Any(), "e-1").Return(nil)
	k.EXPECT().DeleteEndpoint(gomock.Any(), "e-2").Return(httpErr(404, `{"error": {"message": "Could not find endpoint: e-2."}}`))
	o := &OpenStack{identity: func(context.Context) (IdentityClient, string, error) { return k, "", nil }}
	require.NoError(t, o.DeleteEndpoints(context.Background(), DeleteEndpointsInput{IDs: []string{"e-1", "e-2"}}), "one already gone is no error")
	require.NoError(t, o.DeleteEndpoints(context.Background(), DeleteEndpointsInput{}), "nothing to delete asks nothing")
}

// TestDeleteServiceUser: only a user this owner created goes; another's, or none, stays without error.
func TestDeleteServiceUser(t *testing.T) {
	owner := &kube.Owner{Kind: "Nova", Name: "nova", UID: "u-1"}
	in := ServiceUserInput{Admin: CloudSecret{Namespace: "ns", Name: "admin"}, User: "nova", Owner: owner}
	find := UserListOpts{Name: "nova", DomainID: serviceDomain}
	for _, tc := range []struct {
		name   string
		expect func(k *mock.MockIdentityClientMockRecorder)
	}{
		{"ours: deleted", func(k *mock.MockIdentityClientMockRecorder) {
			k.ListUsers(gomock.Any(), find).Return([]User{{ID: "user-1", Description: in.description()}}, nil)
			k.DeleteUser(gomock.Any(), "user-1").Return(nil)
		}},
		{"someone else's: kept", func(k *mock.MockIdentityClientMockRecorder) {
			k.ListUsers(gomock.Any(), find).Return([]User{{ID: "user-1", Description: "made by hand"}}, nil)
		}},
		{"gone already", func(k *mock.MockIdentityClientMockRecorder) {
			k.ListUsers(gomock.Any(), find).Return(nil, nil)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := mock.NewMockIdentityClient(gomock.NewController(t))
			tc.expect(k.EXPECT())
			o := &OpenStack{Core: fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "admin"}}),
				identity: func(context.Context) (IdentityClient, string, error) { return k, "", nil }}
			require.NoError(t, o.DeleteServiceUser(context.Background(), in))
		})
	}
	t.Run("the administrator's Secret gone (its namespace being deleted): left, Keystone not asked", func(t *testing.T) {
		o := &OpenStack{Core: fake.NewClientset(), identity: func(context.Context) (IdentityClient, string, error) {
			t.Fatal("Keystone asked without credentials")
			return nil, "", nil
		}}
		require.NoError(t, o.DeleteServiceUser(context.Background(), in))
	})
	t.Run("Keystone refuses the delete: permanent", func(t *testing.T) {
		k := mock.NewMockIdentityClient(gomock.NewController(t))
		k.EXPECT().ListUsers(gomock.Any(), find).Return([]User{{ID: "user-1", Description: in.description()}}, nil)
		k.EXPECT().DeleteUser(gomock.Any(), "user-1").Return(httpErr(403, `{"error": {"code": 403, "message": "You are not authorized to perform the requested action: identity:delete_user."}}`))
		o := &OpenStack{Core: fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "admin"}}),
			identity: func(context.Context) (IdentityClient, string, error) { return k, "", nil }}
		requireOutcome(t, o.DeleteServiceUser(context.Background(), in), "permanent", ErrOSForbidden)
	})
}

// A role is global: a domain's role of the same name is not it, and is not taken for it.
func TestEnsureRoleIsGlobal(t *testing.T) {
	k := mock.NewMockIdentityClient(gomock.NewController(t))
	k.EXPECT().ListRoles(gomock.Any(), RoleListOpts{Name: "service"}).Return([]Role{{ID: "r-dom", Name: "service", DomainID: "d-1"}}, nil)
	k.EXPECT().CreateRole(gomock.Any(), RoleCreateOpts{Name: "service"}).Return(&Role{ID: "r-1", Name: "service"}, nil)
	id, err := ensureRole(context.Background(), k, "service")
	require.NoError(t, err)
	require.Equal(t, "r-1", id)

	k.EXPECT().ListRoles(gomock.Any(), RoleListOpts{Name: "admin"}).Return([]Role{{ID: "r-dom", DomainID: "d-1"}, {ID: "r-admin"}}, nil)
	id, err = ensureRole(context.Background(), k, "admin")
	require.NoError(t, err)
	require.Equal(t, "r-admin", id)
}
