package openstack

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/mock/gomock"

	"github.com/stackflow/stackflow/activities/internal/outcome"
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

// The port a spec asks for reaches Neutron whole: fixed IPs by subnet or address, its MAC, allowed
// address pairs, the VNIC type, and port security either on with the security groups or off without them.
func TestEnsurePortCreateOptions(t *testing.T) {
	sub, addr, mac, direct, pairMAC := "s-1", "10.0.0.9", "fa:16:3e:00:00:01", "direct", "fa:16:3e:00:00:02"
	yes, no := true, false
	base := ResolvedPort{Name: "web-0", Description: testMarker.Description(), NetworkID: "net-1", SecurityGroups: []string{"sg-1", "sg-2"}}
	for _, tc := range []struct {
		name string
		port func(p *ResolvedPort)
		want map[string]any
	}{
		{"the defaults: the security groups given", func(*ResolvedPort) {}, map[string]any{
			"network_id": "net-1", "name": "web-0", "description": testMarker.Description(), "security_groups": []any{"sg-1", "sg-2"}}},
		{"everything a spec can say", func(p *ResolvedPort) {
			p.FixedIPs = []ResolvedFixedIP{{SubnetID: &sub}, {IPAddress: &addr}}
			p.MACAddress, p.VNICType, p.AdminStateUp, p.PropagateUplinkStatus = &mac, &direct, &no, &yes
			p.AllowedAddressPairs = []infrav1.AddressPair{{IPAddress: "10.0.0.100"}, {IPAddress: "10.0.0.101", MACAddress: &pairMAC}}
			p.DisablePortSecurity = &no
		}, map[string]any{
			"network_id": "net-1", "name": "web-0", "description": testMarker.Description(), "security_groups": []any{"sg-1", "sg-2"},
			"fixed_ips": []any{map[string]any{"subnet_id": "s-1"}, map[string]any{"ip_address": "10.0.0.9"}}, "mac_address": mac,
			"admin_state_up": false, "propagate_uplink_status": true, "binding:vnic_type": "direct", "port_security_enabled": true,
			"allowed_address_pairs": []any{map[string]any{"ip_address": "10.0.0.100"}, map[string]any{"ip_address": "10.0.0.101", "mac_address": pairMAC}}}},
		{"port security off: no security groups", func(p *ResolvedPort) { p.DisablePortSecurity = &yes }, map[string]any{
			"network_id": "net-1", "name": "web-0", "description": testMarker.Description(), "port_security_enabled": false}},
		{"no security groups: Neutron's default group", func(p *ResolvedPort) { p.SecurityGroups = nil }, map[string]any{
			"network_id": "net-1", "name": "web-0", "description": testMarker.Description()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := base
			p.SecurityGroups = slices.Clone(base.SecurityGroups)
			tc.port(&p)
			n := mock.NewMockNetworkClient(gomock.NewController(t))
			n.EXPECT().ListPorts(gomock.Any(), gomock.Any()).Return(nil, nil)
			var sent map[string]any
			n.EXPECT().CreatePort(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, o PortCreateOptsBuilder) (*Port, error) {
				m, err := o.ToPortCreateMap()
				require.NoError(t, err)
				b, _ := json.Marshal(m["port"])
				require.NoError(t, json.Unmarshal(b, &sent))
				return &Port{ID: "p-1", Name: "web-0", MACAddress: mac, FixedIPs: []FixedIP{{IPAddress: "10.0.0.9"}}}, nil
			})
			n.EXPECT().ReplaceTags(gomock.Any(), "ports", "p-1", gomock.Any()).Return(nil)
			info, err := withNeutron(t, testID, n).EnsurePort(context.Background(), PortInput{Identity: testID, Marker: testMarker, Port: p})
			require.NoError(t, err)
			require.Equal(t, tc.want, sent)
			require.Equal(t, PortInfo{ID: "p-1", Name: "web-0", MAC: mac, FixedIPs: []string{"10.0.0.9"}}, *info)
		})
	}
}

// A subnet and a security group of the spec are found by ID or by filter; none or two are errors that
// say so.
func TestResolveSubnetAndSecurityGroup(t *testing.T) {
	id := "s-1"
	filter := &infrav1.SubnetFilter{Name: "private", CIDR: "10.0.0.0/24"}
	gone := httpErr(404, `{"NeutronError": {"message": "Subnet s-1 could not be found."}}`)
	for _, tc := range []struct {
		name    string
		param   infrav1.SubnetParam
		expect  func(n *mock.MockNetworkClientMockRecorder)
		want    string
		errType string
	}{
		{"by ID", infrav1.SubnetParam{ID: &id}, func(n *mock.MockNetworkClientMockRecorder) {
			n.GetSubnet(gomock.Any(), "s-1").Return(&Subnet{ID: "s-1"}, nil)
		}, "s-1", ""},
		{"by ID, gone", infrav1.SubnetParam{ID: &id}, func(n *mock.MockNetworkClientMockRecorder) {
			n.GetSubnet(gomock.Any(), "s-1").Return(nil, gone)
		}, "", ErrOSNotFound},
		{"by filter, on the port's network", infrav1.SubnetParam{Filter: filter}, func(n *mock.MockNetworkClientMockRecorder) {
			n.ListSubnets(gomock.Any(), SubnetListOpts{NetworkID: "net-1", Name: "private", CIDR: "10.0.0.0/24"}).Return([]Subnet{{ID: "s-2"}}, nil)
		}, "s-2", ""},
		{"by filter, none", infrav1.SubnetParam{Filter: filter}, func(n *mock.MockNetworkClientMockRecorder) {
			n.ListSubnets(gomock.Any(), gomock.Any()).Return(nil, nil)
		}, "", ErrOSNotFound},
		{"by filter, two", infrav1.SubnetParam{Filter: filter}, func(n *mock.MockNetworkClientMockRecorder) {
			n.ListSubnets(gomock.Any(), gomock.Any()).Return([]Subnet{{ID: "s-2"}, {ID: "s-3"}}, nil)
		}, "", ErrOSAmbiguous},
		{"neither", infrav1.SubnetParam{}, func(*mock.MockNetworkClientMockRecorder) {}, "", ErrOSNotFound},
	} {
		t.Run("subnet "+tc.name, func(t *testing.T) {
			n := mock.NewMockNetworkClient(gomock.NewController(t))
			tc.expect(n.EXPECT())
			got, err := resolveSubnet(context.Background(), n, "net-1", tc.param)
			if tc.errType != "" {
				requireOutcome(t, err, "permanent", tc.errType)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	sg := "sg-1"
	sgFilter := &infrav1.SecurityGroupFilter{Name: "web"}
	for _, tc := range []struct {
		name    string
		param   infrav1.SecurityGroupParam
		expect  func(n *mock.MockNetworkClientMockRecorder)
		want    string
		errType string
	}{
		{"by ID", infrav1.SecurityGroupParam{ID: &sg}, func(n *mock.MockNetworkClientMockRecorder) {
			n.GetSecurityGroup(gomock.Any(), "sg-1").Return(&SecGroup{ID: "sg-1"}, nil)
		}, "sg-1", ""},
		{"by filter", infrav1.SecurityGroupParam{Filter: sgFilter}, func(n *mock.MockNetworkClientMockRecorder) {
			n.ListSecurityGroups(gomock.Any(), SecGroupListOpts{Name: "web"}).Return([]SecGroup{{ID: "sg-2"}}, nil)
		}, "sg-2", ""},
		{"by filter, two", infrav1.SecurityGroupParam{Filter: sgFilter}, func(n *mock.MockNetworkClientMockRecorder) {
			n.ListSecurityGroups(gomock.Any(), gomock.Any()).Return([]SecGroup{{ID: "sg-2"}, {ID: "sg-3"}}, nil)
		}, "", ErrOSAmbiguous},
		{"Neutron down: retried", infrav1.SecurityGroupParam{Filter: sgFilter}, func(n *mock.MockNetworkClientMockRecorder) {
			n.ListSecurityGroups(gomock.Any(), gomock.Any()).Return(nil, httpErr(503, "unavailable"))
		}, "", "retry"},
		{"neither", infrav1.SecurityGroupParam{}, func(*mock.MockNetworkClientMockRecorder) {}, "", ErrOSNotFound},
	} {
		t.Run("security group "+tc.name, func(t *testing.T) {
			n := mock.NewMockNetworkClient(gomock.NewController(t))
			tc.expect(n.EXPECT())
			got, err := resolveSecurityGroup(context.Background(), n, tc.param)
			switch tc.errType {
			case "":
				require.NoError(t, err)
				require.Equal(t, tc.want, got)
			case "retry":
				requireOutcome(t, err, "retryable", "")
			default:
				requireOutcome(t, err, "permanent", tc.errType)
			}
		})
	}
}
