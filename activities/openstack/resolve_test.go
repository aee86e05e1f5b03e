package openstack

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/mock/gomock"

	"github.com/stackflow/stackflow/activities/openstack/mock"
	infrav1alpha1 "github.com/stackflow/stackflow/api/infrastructure/v1alpha1"
	infrav1 "github.com/stackflow/stackflow/api/infrastructure/v1beta1"
)

// mockClouds are the mock clients of one identity.
type mockClouds struct {
	nova    *mock.MockComputeClient
	neutron *mock.MockNetworkClient
	glance  *mock.MockImageClient
}

func withClouds(t *testing.T, id Identity) (*OpenStack, mockClouds) {
	ctl := gomock.NewController(t)
	c := mockClouds{mock.NewMockComputeClient(ctl), mock.NewMockNetworkClient(ctl), mock.NewMockImageClient(ctl)}
	check := func(got Identity) { require.Equal(t, id, got, "the activity asks for the identity of its input") }
	return &OpenStack{
		compute: func(_ context.Context, got Identity) (ComputeClient, error) { check(got); return c.nova, nil },
		network: func(_ context.Context, got Identity) (NetworkClient, error) { check(got); return c.neutron, nil },
		image:   func(_ context.Context, got Identity) (ImageClient, error) { check(got); return c.glance, nil },
	}, c
}

// TestResolveServer: every reference of a spec becomes an ID, each network asked once however many ports
// use it, the spec's security groups on every port beside the port's own, names and descriptions
// deterministic.
func TestResolveServer(t *testing.T) {
	s := func(v string) *string { return &v }
	private := &infrav1.NetworkParam{Filter: &infrav1.NetworkFilter{Name: "private"}}
	spec := infrav1alpha1.OpenStackServerSpec{
		Flavor:         s("m1.small"),
		Image:          infrav1.ImageParam{Filter: &infrav1.ImageFilter{Name: s("debian")}},
		SecurityGroups: []infrav1.SecurityGroupParam{{Filter: &infrav1.SecurityGroupFilter{Name: "default"}}},
		Tags:           []string{"env=test"},
		Ports: []infrav1.PortOpts{
			{Network: private, FixedIPs: []infrav1.FixedIP{{Subnet: &infrav1.SubnetParam{Filter: &infrav1.SubnetFilter{Name: "private-v4"}}, IPAddress: s("10.0.0.9")}}},
			{Network: private, NameSuffix: s("mgmt"), Description: s("management"),
				SecurityGroups: []infrav1.SecurityGroupParam{{ID: s("sg-ssh")}}, Tags: []infrav1.NeutronTag{"role=mgmt"}},
		},
	}
	in := ResolveServerInput{Identity: testID, Name: "web", Marker: testMarker, Spec: spec}

	o, c := withClouds(t, testID)
	c.nova.EXPECT().ListFlavors(gomock.Any()).Return([]NovaFlavor{{ID: "fl-2", Name: "m1.small"}}, nil)
	c.glance.EXPECT().ListImages(gomock.Any(), ImageListOpts{Name: "debian"}).Return([]Image{{ID: "img-1"}}, nil)
	c.neutron.EXPECT().ListSecurityGroups(gomock.Any(), gomock.Any()).Return([]SecGroup{{ID: "sg-default"}}, nil)
	c.neutron.EXPECT().ListNetworks(gomock.Any(), gomock.Any()).Return([]Network{{ID: "net-1"}}, nil).Times(1)
	c.neutron.EXPECT().ListSubnets(gomock.Any(), gomock.Cond(func(o SubnetListOpts) bool { return o.NetworkID == "net-1" && o.Name == "private-v4" })).
		Return([]Subnet{{ID: "sub-1"}}, nil)
	c.neutron.EXPECT().GetSecurityGroup(gomock.Any(), "sg-ssh").Return(&SecGroup{ID: "sg-ssh"}, nil)

	got, err := o.ResolveServer(context.Background(), in)
	require.NoError(t, err)
	require.Equal(t, &ResolvedServer{ImageID: "img-1", FlavorID: "fl-2", Ports: []ResolvedPort{
		{Name: "web-0", Description: testMarker.Description(), NetworkID: "net-1", Tags: []string{"env=test"},
			FixedIPs: []ResolvedFixedIP{{SubnetID: s("sub-1"), IPAddress: s("10.0.0.9")}}, SecurityGroups: []string{"sg-default"}},
		{Name: "web-mgmt", Description: testMarker.Description() + " management", NetworkID: "net-1", Tags: []string{"env=test", "role=mgmt"},
			SecurityGroups: []string{"sg-default", "sg-ssh"}},
	}}, got)
}

func TestResolveServerRefused(t *testing.T) {
	s := func(v string) *string { return &v }
	base := infrav1alpha1.OpenStackServerSpec{Flavor: s("m1.small"), Image: infrav1.ImageParam{ID: s("img-1")}}
	for _, tc := range []struct {
		name    string
		spec    func(*infrav1alpha1.OpenStackServerSpec)
		expect  func(c mockClouds)
		errType string
	}{
		{"a port with no network and no default", func(*infrav1alpha1.OpenStackServerSpec) {}, func(c mockClouds) {
			c.glance.EXPECT().GetImage(gomock.Any(), "img-1").Return(&Image{ID: "img-1"}, nil)
		}, ErrOSInvalid},
		{"the image is gone", func(*infrav1alpha1.OpenStackServerSpec) {}, func(c mockClouds) {
			c.glance.EXPECT().GetImage(gomock.Any(), "img-1").Return(nil, httpErr(404, "404 Not Found: No image found with ID img-1"))
		}, ErrOSNotFound},
		{"two images match the filter", func(sp *infrav1alpha1.OpenStackServerSpec) {
			sp.Image = infrav1.ImageParam{Filter: &infrav1.ImageFilter{Tags: []string{"golden"}}}
		}, func(c mockClouds) {
			c.glance.EXPECT().ListImages(gomock.Any(), ImageListOpts{Tags: []string{"golden"}}).Return([]Image{{ID: "a"}, {ID: "b"}}, nil)
		}, ErrOSAmbiguous},
		{"no flavor named", func(sp *infrav1alpha1.OpenStackServerSpec) { sp.Flavor = nil }, func(mockClouds) {}, ErrOSInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, c := withClouds(t, testID)
			c.nova.EXPECT().ListFlavors(gomock.Any()).Return([]NovaFlavor{{ID: "fl-2", Name: "m1.small"}}, nil).AnyTimes()
			tc.expect(c)
			spec := base
			tc.spec(&spec)
			_, err := o.ResolveServer(context.Background(), ResolveServerInput{Identity: testID, Name: "web", Marker: testMarker, Spec: spec})
			requireOutcome(t, err, "permanent", tc.errType)
		})
	}
}

// TestResolveImageID: a bare-metal node's image is named by ID or by its unique name.
func TestResolveImageID(t *testing.T) {
	gone := httpErr(404, "404 Not Found")
	for _, tc := range []struct {
		name    string
		ref     string
		expect  func(g *mock.MockImageClientMockRecorder)
		want    string
		errType string
	}{
		{"by ID", "img-1", func(g *mock.MockImageClientMockRecorder) {
			g.GetImage(gomock.Any(), "img-1").Return(&Image{ID: "img-1"}, nil)
		}, "img-1", ""},
		{"by name", "debian", func(g *mock.MockImageClientMockRecorder) {
			g.GetImage(gomock.Any(), "debian").Return(nil, gone)
			g.ListImages(gomock.Any(), ImageListOpts{Name: "debian"}).Return([]Image{{ID: "img-2"}}, nil)
		}, "img-2", ""},
		{"none", "debian", func(g *mock.MockImageClientMockRecorder) {
			g.GetImage(gomock.Any(), "debian").Return(nil, gone)
			g.ListImages(gomock.Any(), gomock.Any()).Return(nil, nil)
		}, "", ErrOSNotFound},
		{"two of the name", "debian", func(g *mock.MockImageClientMockRecorder) {
			g.GetImage(gomock.Any(), "debian").Return(nil, gone)
			g.ListImages(gomock.Any(), gomock.Any()).Return([]Image{{ID: "a"}, {ID: "b"}}, nil)
		}, "", ErrOSAmbiguous},
		{"no image set", "", func(*mock.MockImageClientMockRecorder) {}, "", ErrOSInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := mock.NewMockImageClient(gomock.NewController(t))
			tc.expect(g.EXPECT())
			got, err := ResolveImageID(context.Background(), g, tc.ref)
			if tc.errType != "" {
				requireOutcome(t, err, "permanent", tc.errType)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}
