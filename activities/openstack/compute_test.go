package openstack

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/mock/gomock"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/stackflow/stackflow/activities/openstack/mock"
	infrav1 "github.com/stackflow/stackflow/api/infrastructure/v1beta1"
)

// withNova is the activities on a mock Nova, for the identity id only, polling and adopting quickly.
func withNova(t *testing.T, id Identity, nova ComputeClient) *OpenStack {
	return &OpenStack{PollInterval: time.Millisecond, AdoptWindow: 20 * time.Millisecond,
		compute: func(_ context.Context, got Identity) (ComputeClient, error) {
			require.Equal(t, id, got, "the activity asks for the identity of its input")
			return nova, nil
		}}
}

func TestEnsureServer(t *testing.T) {
	in := ServerInput{Identity: testID, Marker: testMarker, Name: "web", ImageID: "img-1", FlavorID: "fl-1",
		PortIDs: []string{"p-1"}, Tags: []string{"role=web"}, KeyName: "ops", ServerGroupID: "sg-1",
		Metadata: map[string]string{"team": "a"}}
	list := ServerListOpts{Name: "^web$", Tags: strings.Join(testMarker.Tags(), ",")}
	mine := Server{ID: "s-1", Name: "web", Status: "BUILD"}
	// created checks what a boot asks of Nova: name, flavor, image, port, marker tags and metadata, key
	// and group.
	created := gomock.Cond(func(o ServerCreateOptsBuilder) bool {
		var b struct {
			Server struct {
				Name      string
				FlavorRef string
				ImageRef  string
				KeyName   string `json:"key_name"`
				Networks  []struct{ Port string }
				Metadata  map[string]string
				Tags      []string
			}
		}
		m, err := o.ToServerCreateMap()
		if err != nil || roundTrip(m, &b) != nil {
			return false
		}
		s := b.Server
		return s.Name == "web" && s.FlavorRef == "fl-1" && s.ImageRef == "img-1" && s.KeyName == "ops" &&
			len(s.Networks) == 1 && s.Networks[0].Port == "p-1" && s.Metadata["team"] == "a" &&
			s.Metadata["stackflow-owner"] == testMarker.Owner && len(s.Tags) == len(testMarker.Tags())+1
	})
	group := gomock.Eq(SchedulerHintOpts{Group: "sg-1"})
	for _, tc := range []struct {
		name    string
		expect  func(n *mock.MockComputeClientMockRecorder)
		outcome string
		errType string
		adopted bool
	}{
		{"booted", func(n *mock.MockComputeClientMockRecorder) {
			n.ListServers(gomock.Any(), list).Return(nil, nil)
			n.CreateServer(gomock.Any(), created, group).Return(&Server{ID: "s-1"}, nil)
		}, "ok", "", false},
		{"adopted: an earlier attempt booted it", func(n *mock.MockComputeClientMockRecorder) {
			n.ListServers(gomock.Any(), list).Return([]Server{mine}, nil)
		}, "ok", "", true},
		{"a deleted server of the name is not adopted", func(n *mock.MockComputeClientMockRecorder) {
			n.ListServers(gomock.Any(), list).Return([]Server{{ID: "s-0", Name: "web", Status: "DELETED"}}, nil)
			n.CreateServer(gomock.Any(), created, group).Return(&Server{ID: "s-1"}, nil)
		}, "ok", "", false},
		{"port taken by the earlier attempt's boot: adopted", func(n *mock.MockComputeClientMockRecorder) {
			gomock.InOrder(
				n.ListServers(gomock.Any(), list).Return(nil, nil),
				n.CreateServer(gomock.Any(), created, group).Return(nil, httpErr(409, `{"conflictingRequest": {"message": "Port p-1 is still in use."}}`)),
				n.ListServers(gomock.Any(), list).Return([]Server{mine}, nil),
			)
		}, "ok", "", true},
		{"port taken by another: permanent once the window passes", func(n *mock.MockComputeClientMockRecorder) {
			n.ListServers(gomock.Any(), list).Return(nil, nil).MinTimes(2)
			n.CreateServer(gomock.Any(), created, group).Return(nil, httpErr(400, `{"badRequest": {"message": "Port p-1 is still in use."}}`))
		}, "permanent", ErrOSInvalid, false},
		{"quota: permanent", func(n *mock.MockComputeClientMockRecorder) {
			n.ListServers(gomock.Any(), list).Return(nil, nil).MinTimes(1)
			n.CreateServer(gomock.Any(), created, group).Return(nil, httpErr(403, `{"forbidden": {"message": "Quota exceeded for instances: Requested 1, but already used 10 of 10 instances"}}`))
		}, "permanent", ErrOSQuota, false},
		{"Nova down: retried", func(n *mock.MockComputeClientMockRecorder) {
			n.ListServers(gomock.Any(), list).Return(nil, httpErr(503, "Service Unavailable"))
		}, "retryable", "", false},
		{"boot fails with a server error: retried", func(n *mock.MockComputeClientMockRecorder) {
			n.ListServers(gomock.Any(), list).Return(nil, nil)
			n.CreateServer(gomock.Any(), created, group).Return(nil, httpErr(500, `{"computeFault": {"message": "Unexpected API Error."}}`))
		}, "retryable", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := mock.NewMockComputeClient(gomock.NewController(t))
			tc.expect(n.EXPECT())
			info, err := withNova(t, testID, n).EnsureServer(context.Background(), in)
			requireOutcome(t, err, tc.outcome, tc.errType)
			if tc.outcome == "ok" {
				require.Equal(t, "s-1", info.ID)
				require.Equal(t, tc.adopted, info.Adopted)
			}
		})
	}
}

// TestEnsureServerUserData: the user data is read from its Secret when the activity runs (it never
// enters history); a Secret that does not exist is a permanent error.
func TestEnsureServerUserData(t *testing.T) {
	in := ServerInput{Identity: testID, Marker: testMarker, Name: "web", ImageID: "img-1", FlavorID: "fl-1", UserDataSecret: "boot"}
	t.Run("sent", func(t *testing.T) {
		n := mock.NewMockComputeClient(gomock.NewController(t))
		n.EXPECT().ListServers(gomock.Any(), gomock.Any()).Return(nil, nil)
		n.EXPECT().CreateServer(gomock.Any(), gomock.Cond(func(o ServerCreateOptsBuilder) bool {
			m, err := o.ToServerCreateMap()
			return err == nil && m["server"].(map[string]any)["user_data"] != nil
		}), nil).Return(&Server{ID: "s-1"}, nil)
		o := withNova(t, testID, n)
		o.Core = fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "boot"},
			Data: map[string][]byte{UserDataKey: []byte("#cloud-config\n")}})
		_, err := o.EnsureServer(context.Background(), in)
		require.NoError(t, err)
	})
	t.Run("Secret missing: permanent", func(t *testing.T) {
		n := mock.NewMockComputeClient(gomock.NewController(t))
		n.EXPECT().ListServers(gomock.Any(), gomock.Any()).Return(nil, nil)
		o := withNova(t, testID, n)
		o.Core = fake.NewClientset()
		_, err := o.EnsureServer(context.Background(), in)
		requireOutcome(t, err, "permanent", ErrOSInvalid)
		require.ErrorContains(t, err, "ns/boot")
	})
}

func TestWaitServer(t *testing.T) {
	ref := ResourceRef{Identity: testID, ID: "s-1"}
	fault := Server{ID: "s-1", Status: "ERROR"}
	fault.Fault.Message, fault.Fault.Code = "No valid host was found.", 500
	for _, tc := range []struct {
		name    string
		expect  func(n *mock.MockComputeClientMockRecorder)
		outcome string
		status  string
		fault   string
	}{
		{"building, then active", func(n *mock.MockComputeClientMockRecorder) {
			gomock.InOrder(
				n.GetServer(gomock.Any(), "s-1").Return(&Server{ID: "s-1", Status: "BUILD"}, nil),
				n.GetServer(gomock.Any(), "s-1").Return(&Server{ID: "s-1", Status: "ACTIVE"}, nil),
			)
		}, "ok", ServerActive, ""},
		{"error is the workflow's to judge, with its fault", func(n *mock.MockComputeClientMockRecorder) {
			n.GetServer(gomock.Any(), "s-1").Return(&fault, nil)
		}, "ok", ServerError, "No valid host was found. (code 500)"},
		{"gone: reported deleted", func(n *mock.MockComputeClientMockRecorder) {
			n.GetServer(gomock.Any(), "s-1").Return(nil, httpErr(404, `{"itemNotFound": {"message": "Instance s-1 could not be found."}}`))
		}, "ok", ServerDeleted, ""},
		{"Nova down: retried", func(n *mock.MockComputeClientMockRecorder) {
			n.GetServer(gomock.Any(), "s-1").Return(nil, httpErr(502, "Bad Gateway"))
		}, "retryable", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := mock.NewMockComputeClient(gomock.NewController(t))
			tc.expect(n.EXPECT())
			info, err := withNova(t, testID, n).WaitServer(context.Background(), ref)
			requireOutcome(t, err, tc.outcome, "")
			if tc.outcome == "ok" {
				require.Equal(t, tc.status, info.Status)
				require.Equal(t, tc.fault, info.Fault)
			}
		})
	}
}

func TestDeleteServer(t *testing.T) {
	ref := ResourceRef{Identity: testID, ID: "s-1"}
	gone := httpErr(404, `{"itemNotFound": {"message": "Instance s-1 could not be found."}}`)
	for _, tc := range []struct {
		name    string
		expect  func(n *mock.MockComputeClientMockRecorder)
		outcome string
		errType string
	}{
		{"deleted, waited until gone", func(n *mock.MockComputeClientMockRecorder) {
			n.DeleteServer(gomock.Any(), "s-1").Return(nil)
			gomock.InOrder(
				n.GetServer(gomock.Any(), "s-1").Return(&Server{ID: "s-1", Status: "ACTIVE"}, nil),
				n.GetServer(gomock.Any(), "s-1").Return(nil, gone),
			)
		}, "ok", ""},
		{"already gone", func(n *mock.MockComputeClientMockRecorder) {
			n.DeleteServer(gomock.Any(), "s-1").Return(gone)
		}, "ok", ""},
		{"busy building (409): waited for, not failed", func(n *mock.MockComputeClientMockRecorder) {
			n.DeleteServer(gomock.Any(), "s-1").Return(httpErr(409, `{"conflictingRequest": {"message": "Cannot 'delete' instance while it is in task_state spawning"}}`))
			n.GetServer(gomock.Any(), "s-1").Return(&Server{ID: "s-1", Status: "DELETED"}, nil)
		}, "ok", ""},
		{"refused: permanent", func(n *mock.MockComputeClientMockRecorder) {
			n.DeleteServer(gomock.Any(), "s-1").Return(httpErr(403, `{"forbidden": {"message": "Policy doesn't allow os_compute_api:servers:delete"}}`))
		}, "permanent", ErrOSForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := mock.NewMockComputeClient(gomock.NewController(t))
			tc.expect(n.EXPECT())
			err := withNova(t, testID, n).DeleteServer(context.Background(), ref)
			requireOutcome(t, err, tc.outcome, tc.errType)
		})
	}
}

func TestResolveFlavorAndGroup(t *testing.T) {
	name := func(s string) *string { return &s }
	for _, tc := range []struct {
		name    string
		flavor  *string // a name; nil resolves the group instead
		group   infrav1.ServerGroupParam
		expect  func(n *mock.MockComputeClientMockRecorder)
		want    string
		errType string
	}{
		{"flavor by name", name("m1.small"), infrav1.ServerGroupParam{}, func(n *mock.MockComputeClientMockRecorder) {
			n.ListFlavors(gomock.Any()).Return([]NovaFlavor{{ID: "1", Name: "m1.tiny"}, {ID: "2", Name: "m1.small"}}, nil)
		}, "2", ""},
		{"flavor named by its ID", name("2"), infrav1.ServerGroupParam{}, func(n *mock.MockComputeClientMockRecorder) {
			n.ListFlavors(gomock.Any()).Return([]NovaFlavor{{ID: "2", Name: "m1.small"}}, nil)
			n.GetFlavor(gomock.Any(), "2").Return(&NovaFlavor{ID: "2"}, nil)
		}, "2", ""},
		{"unknown flavor: Nova's message, permanent", name("m1.huge"), infrav1.ServerGroupParam{}, func(n *mock.MockComputeClientMockRecorder) {
			n.ListFlavors(gomock.Any()).Return(nil, nil)
			n.GetFlavor(gomock.Any(), "m1.huge").Return(nil, httpErr(404, `{"itemNotFound": {"message": "Flavor m1.huge could not be found."}}`))
		}, "", ErrOSNotFound},
		{"two flavors of the name: permanent", name("m1.small"), infrav1.ServerGroupParam{}, func(n *mock.MockComputeClientMockRecorder) {
			n.ListFlavors(gomock.Any()).Return([]NovaFlavor{{ID: "2", Name: "m1.small"}, {ID: "3", Name: "m1.small"}}, nil)
		}, "", ErrOSAmbiguous},
		{"group by ID", nil, infrav1.ServerGroupParam{ID: name("g-1")}, func(n *mock.MockComputeClientMockRecorder) {
			n.GetServerGroup(gomock.Any(), "g-1").Return(&ServerGroup{ID: "g-1"}, nil)
		}, "g-1", ""},
		{"group by name", nil, infrav1.ServerGroupParam{Filter: &infrav1.ServerGroupFilter{Name: name("spread")}}, func(n *mock.MockComputeClientMockRecorder) {
			n.ListServerGroups(gomock.Any()).Return([]ServerGroup{{ID: "g-1", Name: "pack"}, {ID: "g-2", Name: "spread"}}, nil)
		}, "g-2", ""},
		{"no group of the name: permanent", nil, infrav1.ServerGroupParam{Filter: &infrav1.ServerGroupFilter{Name: name("spread")}}, func(n *mock.MockComputeClientMockRecorder) {
			n.ListServerGroups(gomock.Any()).Return(nil, nil)
		}, "", ErrOSNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := mock.NewMockComputeClient(gomock.NewController(t))
			tc.expect(n.EXPECT())
			var got string
			var err error
			if tc.flavor != nil {
				got, err = resolveFlavor(context.Background(), n, tc.flavor, nil)
			} else {
				got, err = resolveServerGroup(context.Background(), n, tc.group)
			}
			if tc.errType != "" {
				requireOutcome(t, err, "permanent", tc.errType)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestEnsureFlavors(t *testing.T) {
	small := Flavor{Name: "m1.small", VCPUs: 1, RAM: 512, Disk: 1}
	for _, tc := range []struct {
		name    string
		expect  func(n *mock.MockComputeClientMockRecorder)
		outcome string
		errType string
		result  FlavorsResult
	}{
		{"created, public, named by its name", func(n *mock.MockComputeClientMockRecorder) {
			n.ListFlavors(gomock.Any()).Return(nil, nil)
			n.CreateFlavor(gomock.Any(), gomock.Cond(func(o FlavorCreateOpts) bool {
				return o.Name == "m1.small" && o.ID == "m1.small" && o.VCPUs == 1 && o.RAM == 512 && *o.Disk == 1 && *o.IsPublic
			})).Return(&NovaFlavor{ID: "m1.small"}, nil)
		}, "ok", "", FlavorsResult{Created: []string{"m1.small"}}},
		{"the same flavor there: adopted", func(n *mock.MockComputeClientMockRecorder) {
			n.ListFlavors(gomock.Any()).Return([]NovaFlavor{{ID: "m1.small", Name: "m1.small", VCPUs: 1, RAM: 512, Disk: 1}}, nil)
		}, "ok", "", FlavorsResult{Adopted: []string{"m1.small"}}},
		{"another size there: permanent (flavors cannot change)", func(n *mock.MockComputeClientMockRecorder) {
			n.ListFlavors(gomock.Any()).Return([]NovaFlavor{{ID: "m1.small", Name: "m1.small", VCPUs: 2, RAM: 512, Disk: 1}}, nil)
		}, "permanent", ErrFlavorMismatch, FlavorsResult{}},
		{"conflict (a lost reply's create): retried, to compare", func(n *mock.MockComputeClientMockRecorder) {
			n.ListFlavors(gomock.Any()).Return(nil, nil)
			n.CreateFlavor(gomock.Any(), gomock.Any()).Return(nil, httpErr(409, `{"conflictingRequest": {"message": "Flavor with name m1.small already exists."}}`))
		}, "retryable", "", FlavorsResult{}},
		{"refused: permanent", func(n *mock.MockComputeClientMockRecorder) {
			n.ListFlavors(gomock.Any()).Return(nil, nil)
			n.CreateFlavor(gomock.Any(), gomock.Any()).Return(nil, httpErr(403, `{"forbidden": {"message": "Policy doesn't allow os_compute_api:os-flavor-manage:create"}}`))
		}, "permanent", ErrOSForbidden, FlavorsResult{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := mock.NewMockComputeClient(gomock.NewController(t))
			tc.expect(n.EXPECT())
			got, err := ensureFlavors(context.Background(), n, FlavorsInput{Region: "r1", Flavors: []Flavor{small}})
			requireOutcome(t, err, tc.outcome, tc.errType)
			if tc.outcome == "ok" {
				require.Equal(t, tc.result, *got)
			}
		})
	}
}

func TestSetComputeService(t *testing.T) {
	cloud := CloudSecret{Namespace: "ns", Name: "cloud"}
	on := []Server{{ID: "i-2"}, {ID: "i-1"}}
	for _, tc := range []struct {
		name    string
		in      ServiceStateInput
		expect  func(n *mock.MockComputeClientMockRecorder)
		outcome string
		want    []string
	}{
		{"disabled with its reason; the instances to move, sorted", ServiceStateInput{Host: "c0", Reason: "drain"}, func(n *mock.MockComputeClientMockRecorder) {
			n.ComputeServices(gomock.Any(), "c0").Return([]NovaService{{ID: "svc-1", Status: "enabled"}}, nil)
			n.UpdateService(gomock.Any(), "svc-1", NovaServiceUpdateOpts{Status: ServiceDisabled, DisabledReason: "drain"}).Return(nil)
			n.ListServers(gomock.Any(), ServerListOpts{AllTenants: true, Host: "c0"}).Return(on, nil)
		}, "ok", []string{"i-1", "i-2"}},
		{"already disabled: left alone", ServiceStateInput{Host: "c0", Reason: "drain"}, func(n *mock.MockComputeClientMockRecorder) {
			n.ComputeServices(gomock.Any(), "c0").Return([]NovaService{{ID: "svc-1", Status: "disabled"}}, nil)
			n.ListServers(gomock.Any(), gomock.Any()).Return(nil, nil)
		}, "ok", []string{}},
		{"enabled again", ServiceStateInput{Host: "c0", Enabled: true}, func(n *mock.MockComputeClientMockRecorder) {
			n.ComputeServices(gomock.Any(), "c0").Return([]NovaService{{ID: "svc-1", Status: "disabled"}}, nil)
			n.UpdateService(gomock.Any(), "svc-1", NovaServiceUpdateOpts{Status: ServiceEnabled}).Return(nil)
			n.ListServers(gomock.Any(), gomock.Any()).Return(nil, nil)
		}, "ok", []string{}},
		{"a host Nova does not know, disabling if registered: nothing to do", ServiceStateInput{Host: "c0", IfRegistered: true}, func(n *mock.MockComputeClientMockRecorder) {
			n.ComputeServices(gomock.Any(), "c0").Return(nil, nil)
		}, "ok", nil},
		{"a host Nova does not know, disabling: permanent", ServiceStateInput{Host: "c0"}, func(n *mock.MockComputeClientMockRecorder) {
			n.ComputeServices(gomock.Any(), "c0").Return(nil, nil)
		}, "permanent", nil},
		{"update fails: retried", ServiceStateInput{Host: "c0"}, func(n *mock.MockComputeClientMockRecorder) {
			n.ComputeServices(gomock.Any(), "c0").Return([]NovaService{{ID: "svc-1", Status: "enabled"}}, nil)
			n.UpdateService(gomock.Any(), "svc-1", gomock.Any()).Return(httpErr(503, "Service Unavailable"))
		}, "retryable", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := mock.NewMockComputeClient(gomock.NewController(t))
			tc.expect(n.EXPECT())
			tc.in.Cloud = cloud
			got, err := withNova(t, cloud.Identity(), n).SetComputeService(context.Background(), tc.in)
			requireOutcome(t, err, tc.outcome, ErrOSNotFound)
			if tc.outcome == "ok" {
				require.Equal(t, tc.want, got)
			}
		})
	}
}

// roundTrip decodes what a gophercloud options builder made (maps of any) into a typed body.
func roundTrip(m map[string]any, into any) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}

// What a status read reports of a server: its addresses by network name (floating ones external), its
// fault with Nova's code, and DELETED for one that is gone.
func TestGetServer(t *testing.T) {
	ref := ResourceRef{Identity: testID, ID: "vm-1"}
	server := &Server{ID: "vm-1", Name: "web-0", Status: "ERROR", Fault: ServerFault{Message: "No valid host was found.", Code: 500},
		Addresses: map[string]any{
			"public":  []any{map[string]any{"addr": "203.0.113.7", "OS-EXT-IPS:type": "floating"}},
			"private": []any{map[string]any{"addr": "10.0.0.5", "OS-EXT-IPS:type": "fixed"}, map[string]any{"addr": "fd00::5"}, map[string]any{"version": 4}},
		}}
	for _, tc := range []struct {
		name    string
		answer  func(n *mock.MockComputeClientMockRecorder)
		want    *ServerInfo
		outcome string
	}{
		{"in error, with addresses", func(n *mock.MockComputeClientMockRecorder) { n.GetServer(gomock.Any(), "vm-1").Return(server, nil) },
			&ServerInfo{ID: "vm-1", Name: "web-0", Status: "ERROR", Fault: "No valid host was found. (code 500)", Addresses: []Address{
				{Type: "InternalIP", Address: "10.0.0.5"}, {Type: "InternalIP", Address: "fd00::5"}, {Type: "ExternalIP", Address: "203.0.113.7"}}}, "ok"},
		{"gone", func(n *mock.MockComputeClientMockRecorder) {
			n.GetServer(gomock.Any(), "vm-1").Return(nil, httpErr(404, `{"itemNotFound": {"message": "Instance vm-1 could not be found."}}`))
		}, &ServerInfo{ID: "vm-1", Status: ServerDeleted}, "ok"},
		{"Nova down: retried", func(n *mock.MockComputeClientMockRecorder) {
			n.GetServer(gomock.Any(), "vm-1").Return(nil, httpErr(503, "unavailable"))
		}, nil, "retryable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := mock.NewMockComputeClient(gomock.NewController(t))
			tc.answer(n.EXPECT())
			got, err := withNova(t, testID, n).GetServer(context.Background(), ref)
			requireOutcome(t, err, tc.outcome, "")
			require.Equal(t, tc.want, got)
		})
	}
}

// DeleteServersOnHost through Nova's answers: an instance already gone is deleted as far as it goes, one
// Nova will not delete now (a task under way) has the activity retried.
func TestDeleteServersOnHostOutcomes(t *testing.T) {
	in := ComputeHostInput{Cloud: hostCloud, Host: "c0"}
	n := mock.NewMockComputeClient(gomock.NewController(t))
	n.EXPECT().ListServers(gomock.Any(), ServerListOpts{AllTenants: true, Host: "c0"}).Return([]Server{{ID: "vm-2"}, {ID: "vm-1"}}, nil)
	n.EXPECT().DeleteServer(gomock.Any(), "vm-2").Return(nil)
	n.EXPECT().DeleteServer(gomock.Any(), "vm-1").Return(httpErr(404, `{"itemNotFound": {"message": "gone"}}`))
	gone, err := withNova(t, hostCloud.Identity(), n).DeleteServersOnHost(context.Background(), in)
	require.NoError(t, err)
	require.Equal(t, []string{"vm-1", "vm-2"}, gone)

	n = mock.NewMockComputeClient(gomock.NewController(t))
	n.EXPECT().ListServers(gomock.Any(), gomock.Any()).Return([]Server{{ID: "vm-1"}}, nil)
	n.EXPECT().DeleteServer(gomock.Any(), "vm-1").Return(httpErr(409, `{"conflictingRequest": {"message": "Cannot 'delete' instance vm-1 while it is in task_state migrating"}}`))
	_, err = withNova(t, hostCloud.Identity(), n).DeleteServersOnHost(context.Background(), in)
	requireOutcome(t, err, "retryable", "")
}
