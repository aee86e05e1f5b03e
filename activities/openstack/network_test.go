package openstack

import (
	"context"
	"github.com/stretchr/testify/require"
	"testing"

	"github.com/stackflow/stackflow/activities/internal/outcome"
	"go.uber.org/mock/gomock"

	"github.com/stackflow/stackflow/activities/openstack/mock"
	infrav1 "github.com/stackflow/stackflow/api/infrastructure/v1beta1"
)

// withNeutron is the activities on a mock Neutron, for the identity id only.
func withNeutron(t *testing.T, id Identity, neutron NetworkClient) *OpenStack {
	return &OpenStack{network: func(_ context.Context, got Identity) (NetworkClient, error) {
		require.Equal(t, id, got, "the activity asks for the identity of its input")
		return neutron, nil
	}}
}

// requireOutcome is outcome.Require.
var requireOutcome = outcome.Require

var (
	testID     = Identity{Namespace: "ns", SecretName: "cloud", CloudName: "openstack"}
	testMarker = Marker{Owner: "0a1b2c3d4e5f", Instance: "9f8e7d6c5b4a"}
)

func TestEnsurePort(t *testing.T) {
	want := ResolvedPort{Name: "web-0", Description: testMarker.Description(), NetworkID: "net-1", Tags: []string{"role=web"},
		SecurityGroups: []string{"sg-1"}}
	tags := append(testMarker.Tags(), "role=web")
	list := PortListOpts{Name: "web-0", Description: testMarker.Description(), NetworkID: "net-1"}
	for _, tc := range []struct {
		name    string
		expect  func(n *mock.MockNetworkClientMockRecorder)
		outcome string
		errType string
		adopted bool
	}{
		{"created and tagged", func(n *mock.MockNetworkClientMockRecorder) {
			n.ListPorts(gomock.Any(), list).Return(nil, nil)
			n.CreatePort(gomock.Any(), gomock.Cond(func(o PortCreateOptsBuilder) bool {
				m, err := o.ToPortCreateMap()
				p := m["port"].(map[string]any)
				return err == nil && p["name"] == "web-0" && p["network_id"] == "net-1" && p["description"] == testMarker.Description()
			})).Return(&Port{ID: "p-1", Name: "web-0", MACAddress: "fa:16:3e:00:00:01",
				FixedIPs: []FixedIP{{IPAddress: "10.0.0.5"}}}, nil)
			n.ReplaceTags(gomock.Any(), "ports", "p-1", tags).Return(nil)
		}, "ok", "", false},
		{"adopted as a retry left it, tags complete", func(n *mock.MockNetworkClientMockRecorder) {
			n.ListPorts(gomock.Any(), list).Return([]Port{{ID: "p-1", Name: "web-0", Tags: tags,
				FixedIPs: []FixedIP{{IPAddress: "10.0.0.5"}}}}, nil)
		}, "ok", "", true},
		{"adopted after a crash between create and tag", func(n *mock.MockNetworkClientMockRecorder) {
			n.ListPorts(gomock.Any(), list).Return([]Port{{ID: "p-1", Name: "web-0", Tags: []string{"other"}}}, nil)
			n.ReplaceTags(gomock.Any(), "ports", "p-1", append([]string{"other"}, tags...)).Return(nil)
		}, "ok", "", true},
		{"Neutron down: retried", func(n *mock.MockNetworkClientMockRecorder) {
			n.ListPorts(gomock.Any(), list).Return(nil, httpErr(503, "Service Unavailable"))
		}, "retryable", "", false},
		{"address in use: retried", func(n *mock.MockNetworkClientMockRecorder) {
			n.ListPorts(gomock.Any(), list).Return(nil, nil)
			n.CreatePort(gomock.Any(), gomock.Any()).Return(nil,
				httpErr(409, `{"NeutronError": {"type": "IpAddressInUse", "message": "IP address 10.0.0.5 already allocated"}}`))
		}, "retryable", "", false},
		{"quota: permanent", func(n *mock.MockNetworkClientMockRecorder) {
			n.ListPorts(gomock.Any(), list).Return(nil, nil)
			n.CreatePort(gomock.Any(), gomock.Any()).Return(nil,
				httpErr(409, `{"NeutronError": {"type": "OverQuota", "message": "Quota exceeded for resources: ['port']."}}`))
		}, "permanent", ErrOSQuota, false},
		{"network gone: permanent", func(n *mock.MockNetworkClientMockRecorder) {
			n.ListPorts(gomock.Any(), list).Return(nil, nil)
			n.CreatePort(gomock.Any(), gomock.Any()).Return(nil, httpErr(404, `{"NeutronError": {"message": "Network net-1 could not be found."}}`))
		}, "permanent", ErrOSNotFound, false},
		{"tagging fails: retried (the retry adopts the port)", func(n *mock.MockNetworkClientMockRecorder) {
			n.ListPorts(gomock.Any(), list).Return(nil, nil)
			n.CreatePort(gomock.Any(), gomock.Any()).Return(&Port{ID: "p-1"}, nil)
			n.ReplaceTags(gomock.Any(), "ports", "p-1", tags).Return(httpErr(500, "Internal Server Error"))
		}, "retryable", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := mock.NewMockNetworkClient(gomock.NewController(t))
			tc.expect(n.EXPECT())
			info, err := withNeutron(t, testID, n).EnsurePort(context.Background(), PortInput{Identity: testID, Marker: testMarker, Port: want})
			requireOutcome(t, err, tc.outcome, tc.errType)
			if tc.outcome == "ok" {
				require.Equal(t, "p-1", info.ID)
				require.Equal(t, tc.adopted, info.Adopted)
			}
		})
	}
}

func TestDeletePort(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		outcome string
	}{
		{"deleted", nil, "ok"},
		{"gone already", httpErr(404, `{"NeutronError": {"message": "Port p-1 could not be found."}}`), "ok"},
		{"Neutron down", httpErr(503, "Service Unavailable"), "retryable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := mock.NewMockNetworkClient(gomock.NewController(t))
			n.EXPECT().DeletePort(gomock.Any(), "p-1").Return(tc.err)
			err := withNeutron(t, testID, n).DeletePort(context.Background(), ResourceRef{Identity: testID, ID: "p-1"})
			requireOutcome(t, err, tc.outcome, "")
		})
	}
}

func TestEnsureFloatingIP(t *testing.T) {
	ours := FloatingIPListOpts{FloatingNetworkID: "ext", Description: testMarker.Description()}
	byAddress := FloatingIPListOpts{FloatingNetworkID: "ext", FloatingIP: "203.0.113.7"}
	mine := FloatingIP{ID: "f-1", FloatingIP: "203.0.113.7", Description: testMarker.Description(), Tags: testMarker.Tags()}
	for _, tc := range []struct {
		name    string
		address string
		expect  func(n *mock.MockNetworkClientMockRecorder)
		outcome string
		errType string
		owned   bool
	}{
		{"allocated on the port", "", func(n *mock.MockNetworkClientMockRecorder) {
			n.ListFloatingIPs(gomock.Any(), ours).Return(nil, nil)
			n.CreateFloatingIP(gomock.Any(), FloatingIPCreateOpts{FloatingNetworkID: "ext", Description: testMarker.Description(), PortID: "p-1"}).
				Return(&FloatingIP{ID: "f-1", FloatingIP: "203.0.113.7", Description: testMarker.Description(), PortID: "p-1"}, nil)
			n.ReplaceTags(gomock.Any(), "floatingips", "f-1", testMarker.Tags()).Return(nil)
		}, "ok", "", true},
		{"ours from a killed attempt, not associated yet", "", func(n *mock.MockNetworkClientMockRecorder) {
			n.ListFloatingIPs(gomock.Any(), ours).Return([]FloatingIP{mine}, nil)
			n.AssociateFloatingIP(gomock.Any(), "f-1", "p-1").Return(nil)
		}, "ok", "", true},
		{"ours and on the port already: nothing to do", "", func(n *mock.MockNetworkClientMockRecorder) {
			fip := mine
			fip.PortID = "p-1"
			n.ListFloatingIPs(gomock.Any(), ours).Return([]FloatingIP{fip}, nil)
		}, "ok", "", true},
		{"taken over from the previous bastion of the same object", "", func(n *mock.MockNetworkClientMockRecorder) {
			fip := mine
			fip.PortID = "p-old"
			n.ListFloatingIPs(gomock.Any(), ours).Return([]FloatingIP{fip}, nil)
			n.GetPort(gomock.Any(), "p-old").Return(&Port{ID: "p-old", Description: Marker{Owner: testMarker.Owner, Instance: "000000000000"}.Description()}, nil)
			n.AssociateFloatingIP(gomock.Any(), "f-1", "p-1").Return(nil)
		}, "ok", "", true},
		{"a given address on someone else's port: refused", "203.0.113.7", func(n *mock.MockNetworkClientMockRecorder) {
			n.ListFloatingIPs(gomock.Any(), byAddress).Return([]FloatingIP{{ID: "f-9", FloatingIP: "203.0.113.7", PortID: "p-x"}}, nil)
			n.GetPort(gomock.Any(), "p-x").Return(&Port{ID: "p-x", Description: "a port of another tool"}, nil)
		}, "permanent", ErrOSInvalid, false},
		{"a given address, free: adopted, not owned", "203.0.113.7", func(n *mock.MockNetworkClientMockRecorder) {
			n.ListFloatingIPs(gomock.Any(), byAddress).Return([]FloatingIP{{ID: "f-9", FloatingIP: "203.0.113.7"}}, nil)
			n.AssociateFloatingIP(gomock.Any(), "f-9", "p-1").Return(nil)
		}, "ok", "", false},
		{"a given address whose port is gone: associated", "203.0.113.7", func(n *mock.MockNetworkClientMockRecorder) {
			n.ListFloatingIPs(gomock.Any(), byAddress).Return([]FloatingIP{{ID: "f-9", FloatingIP: "203.0.113.7", PortID: "p-gone"}}, nil)
			n.GetPort(gomock.Any(), "p-gone").Return(nil, httpErr(404, `{"NeutronError": {"message": "Port p-gone could not be found."}}`))
			n.AssociateFloatingIP(gomock.Any(), "f-9", "p-1").Return(nil)
		}, "ok", "", false},
		{"no address left: permanent", "", func(n *mock.MockNetworkClientMockRecorder) {
			n.ListFloatingIPs(gomock.Any(), ours).Return(nil, nil)
			n.CreateFloatingIP(gomock.Any(), gomock.Any()).Return(nil,
				httpErr(409, `{"NeutronError": {"type": "OverQuota", "message": "Quota exceeded for resources: ['floatingip']."}}`))
		}, "permanent", ErrOSQuota, false},
		{"association races another: retried", "", func(n *mock.MockNetworkClientMockRecorder) {
			n.ListFloatingIPs(gomock.Any(), ours).Return([]FloatingIP{mine}, nil)
			n.AssociateFloatingIP(gomock.Any(), "f-1", "p-1").Return(httpErr(409, `{"NeutronError": {"type": "FloatingIPPortAlreadyAssociated", "message": "in use"}}`))
		}, "retryable", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := mock.NewMockNetworkClient(gomock.NewController(t))
			tc.expect(n.EXPECT())
			info, err := withNeutron(t, testID, n).EnsureFloatingIP(context.Background(),
				FloatingIPInput{Identity: testID, Marker: testMarker, NetworkID: "ext", Address: tc.address, PortID: "p-1"})
			requireOutcome(t, err, tc.outcome, tc.errType)
			if tc.outcome == "ok" {
				require.Equal(t, "203.0.113.7", info.Address)
				require.Equal(t, tc.owned, info.Owned)
			}
		})
	}
}

func TestReleaseFloatingIP(t *testing.T) {
	gone := httpErr(404, `{"NeutronError": {"message": "Floating IP f-1 could not be found."}}`)
	for _, tc := range []struct {
		name    string
		delete  bool
		expect  func(n *mock.MockNetworkClientMockRecorder)
		outcome string
	}{
		{"ours: deleted", true, func(n *mock.MockNetworkClientMockRecorder) { n.DeleteFloatingIP(gomock.Any(), "f-1").Return(nil) }, "ok"},
		{"not ours: disassociated only", false, func(n *mock.MockNetworkClientMockRecorder) {
			n.AssociateFloatingIP(gomock.Any(), "f-1", "").Return(nil)
		}, "ok"},
		{"gone already", true, func(n *mock.MockNetworkClientMockRecorder) { n.DeleteFloatingIP(gomock.Any(), "f-1").Return(gone) }, "ok"},
		{"Neutron down", false, func(n *mock.MockNetworkClientMockRecorder) {
			n.AssociateFloatingIP(gomock.Any(), "f-1", "").Return(httpErr(502, "Bad Gateway"))
		}, "retryable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := mock.NewMockNetworkClient(gomock.NewController(t))
			tc.expect(n.EXPECT())
			err := withNeutron(t, testID, n).ReleaseFloatingIP(context.Background(), FloatingIPRelease{Identity: testID, ID: "f-1", Delete: tc.delete})
			requireOutcome(t, err, tc.outcome, "")
		})
	}
}

func TestResolveNetworks(t *testing.T) {
	id := "net-1"
	filter := &infrav1.NetworkFilter{Name: "private"}
	for _, tc := range []struct {
		name    string
		param   *infrav1.NetworkParam
		expect  func(n *mock.MockNetworkClientMockRecorder)
		want    string
		outcome string
		errType string
	}{
		{"by ID", &infrav1.NetworkParam{ID: &id}, func(n *mock.MockNetworkClientMockRecorder) {
			n.GetNetwork(gomock.Any(), "net-1").Return(&Network{ID: "net-1"}, nil)
		}, "net-1", "ok", ""},
		{"by ID, gone", &infrav1.NetworkParam{ID: &id}, func(n *mock.MockNetworkClientMockRecorder) {
			n.GetNetwork(gomock.Any(), "net-1").Return(nil, httpErr(404, `{"NeutronError": {"message": "Network net-1 could not be found."}}`))
		}, "", "permanent", ErrOSNotFound},
		{"by filter, one", &infrav1.NetworkParam{Filter: filter}, func(n *mock.MockNetworkClientMockRecorder) {
			n.ListNetworks(gomock.Any(), NetworkListOpts{Name: "private"}).Return([]Network{{ID: "net-2"}}, nil)
		}, "net-2", "ok", ""},
		{"by filter, none", &infrav1.NetworkParam{Filter: filter}, func(n *mock.MockNetworkClientMockRecorder) {
			n.ListNetworks(gomock.Any(), NetworkListOpts{Name: "private"}).Return(nil, nil)
		}, "", "permanent", ErrOSNotFound},
		{"by filter, two", &infrav1.NetworkParam{Filter: filter}, func(n *mock.MockNetworkClientMockRecorder) {
			n.ListNetworks(gomock.Any(), NetworkListOpts{Name: "private"}).Return([]Network{{ID: "a"}, {ID: "b"}}, nil)
		}, "", "permanent", ErrOSAmbiguous},
		{"the only external network", nil, func(n *mock.MockNetworkClientMockRecorder) {
			n.ListNetworks(gomock.Any(), gomock.Any()).Return([]Network{{ID: "ext"}}, nil)
		}, "ext", "ok", ""},
		{"two external networks: name one", nil, func(n *mock.MockNetworkClientMockRecorder) {
			n.ListNetworks(gomock.Any(), gomock.Any()).Return([]Network{{ID: "a"}, {ID: "b"}}, nil)
		}, "", "permanent", ErrOSAmbiguous},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := mock.NewMockNetworkClient(gomock.NewController(t))
			tc.expect(n.EXPECT())
			got, err := resolveExternalNetwork(context.Background(), n, tc.param)
			requireOutcome(t, err, tc.outcome, tc.errType)
			require.Equal(t, tc.want, got)
		})
	}
}
