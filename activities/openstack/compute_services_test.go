package openstack

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/mock/gomock"

	"github.com/stackflow/stackflow/activities/openstack/mock"
)

// withNovaPlacement is the activities on a mock Nova and Placement, for the identity id only.
func withNovaPlacement(t *testing.T, id Identity) (*OpenStack, *mock.MockComputeClient, *mock.MockPlacementClient) {
	ctl := gomock.NewController(t)
	nova, placement := mock.NewMockComputeClient(ctl), mock.NewMockPlacementClient(ctl)
	check := func(got Identity) { require.Equal(t, id, got, "the activity asks for the identity of its input") }
	return &OpenStack{
		compute:   func(_ context.Context, got Identity) (ComputeClient, error) { check(got); return nova, nil },
		placement: func(_ context.Context, got Identity) (PlacementClient, error) { check(got); return placement, nil },
	}, nova, placement
}

func hypervisor(id, name string) Hypervisor {
	h := Hypervisor{ID: id, HypervisorHostname: name}
	h.Service.Host = name
	return h
}

// TestWaitComputeRegistered: registered means an up service, its hypervisor, the host mapped to a
// cell and its resource provider in Placement; each missing part is a retryable error saying which.
func TestWaitComputeRegistered(t *testing.T) {
	cloud := CloudSecret{Namespace: "ns", Name: "cloud"}
	up := []NovaService{{ID: "svc-1", State: "up", Status: "enabled"}}
	notMapped := httpErr(404, `{"itemNotFound": {"message": "Host c0 could not be found."}}`)
	for _, tc := range []struct {
		name    string
		expect  func(n *mock.MockComputeClientMockRecorder, p *mock.MockPlacementClientMockRecorder)
		outcome string
		errType string
		says    string
	}{
		{"registered", func(n *mock.MockComputeClientMockRecorder, p *mock.MockPlacementClientMockRecorder) {
			n.ComputeServices(gomock.Any(), "c0").Return(up, nil)
			n.Hypervisors(gomock.Any(), "c0").Return([]Hypervisor{hypervisor("hv-1", "c0")}, nil)
			n.ShowHypervisorServers(gomock.Any(), "hv-1").Return(nil)
			p.Providers(gomock.Any(), "c0").Return([]string{"hv-1"}, nil)
		}, "ok", "", ""},
		{"no service yet", func(n *mock.MockComputeClientMockRecorder, _ *mock.MockPlacementClientMockRecorder) {
			n.ComputeServices(gomock.Any(), "c0").Return(nil, nil)
		}, "retryable", ErrComputeNotRegistered, "no nova-compute service on host c0"},
		{"service down", func(n *mock.MockComputeClientMockRecorder, _ *mock.MockPlacementClientMockRecorder) {
			n.ComputeServices(gomock.Any(), "c0").Return([]NovaService{{ID: "svc-1", State: "down"}}, nil)
		}, "retryable", ErrComputeNotRegistered, "is down"},
		{"no hypervisor yet (Nova answers 404)", func(n *mock.MockComputeClientMockRecorder, _ *mock.MockPlacementClientMockRecorder) {
			n.ComputeServices(gomock.Any(), "c0").Return(up, nil)
			n.Hypervisors(gomock.Any(), "c0").Return(nil, httpErr(404, `{"itemNotFound": {"message": "No hypervisor matching 'c0' could be found."}}`))
		}, "retryable", ErrComputeNotRegistered, "lists no hypervisor"},
		{"only another host's hypervisor matches the pattern", func(n *mock.MockComputeClientMockRecorder, _ *mock.MockPlacementClientMockRecorder) {
			n.ComputeServices(gomock.Any(), "c0").Return(up, nil)
			n.Hypervisors(gomock.Any(), "c0").Return([]Hypervisor{hypervisor("hv-9", "c01")}, nil)
		}, "retryable", ErrComputeNotRegistered, "lists no hypervisor"},
		{"not mapped to a cell yet", func(n *mock.MockComputeClientMockRecorder, _ *mock.MockPlacementClientMockRecorder) {
			n.ComputeServices(gomock.Any(), "c0").Return(up, nil)
			n.Hypervisors(gomock.Any(), "c0").Return([]Hypervisor{hypervisor("hv-1", "c0")}, nil)
			n.ShowHypervisorServers(gomock.Any(), "hv-1").Return(notMapped)
		}, "retryable", ErrComputeNotRegistered, "not mapped to a cell yet"},
		{"no resource provider yet", func(n *mock.MockComputeClientMockRecorder, p *mock.MockPlacementClientMockRecorder) {
			n.ComputeServices(gomock.Any(), "c0").Return(up, nil)
			n.Hypervisors(gomock.Any(), "c0").Return([]Hypervisor{hypervisor("hv-1", "c0")}, nil)
			n.ShowHypervisorServers(gomock.Any(), "hv-1").Return(nil)
			p.Providers(gomock.Any(), "c0").Return(nil, nil)
		}, "retryable", ErrComputeNotRegistered, "no resource provider in placement yet"},
		{"a stale provider of an earlier compute of the name blocks it", func(n *mock.MockComputeClientMockRecorder, p *mock.MockPlacementClientMockRecorder) {
			n.ComputeServices(gomock.Any(), "c0").Return(up, nil)
			n.Hypervisors(gomock.Any(), "c0").Return([]Hypervisor{hypervisor("hv-1", "c0")}, nil)
			n.ShowHypervisorServers(gomock.Any(), "hv-1").Return(nil)
			p.Providers(gomock.Any(), "c0").Return([]string{"hv-old"}, nil)
		}, "retryable", ErrComputeNotRegistered, "UUID hv-old, not the compute node's hv-1"},
		{"Nova refuses the credentials: permanent", func(n *mock.MockComputeClientMockRecorder, _ *mock.MockPlacementClientMockRecorder) {
			n.ComputeServices(gomock.Any(), "c0").Return(nil, httpErr(401, `{"error": {"message": "The request you have made requires authentication."}}`))
		}, "permanent", ErrOSCredentials, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, n, p := withNovaPlacement(t, cloud.Identity())
			tc.expect(n.EXPECT(), p.EXPECT())
			reg, err := o.WaitComputeRegistered(context.Background(), ComputeHostInput{Cloud: cloud, Host: "c0"})
			requireOutcome(t, err, tc.outcome, tc.errType)
			if tc.outcome == "retryable" {
				requireType(t, err, tc.errType)
				require.ErrorContains(t, err, tc.says)
			}
			if tc.outcome == "ok" {
				require.Equal(t, &ComputeRegistration{ServiceID: "svc-1", State: "up", Status: "enabled", HypervisorID: "hv-1", HypervisorHostname: "c0"}, reg)
			}
		})
	}
}

// TestWaitComputeVersion: a restarted compute counts once it reported after its restart, is up, has its
// hypervisor and reports exactly the version class expected.
func TestWaitComputeVersion(t *testing.T) {
	cloud := CloudSecret{Namespace: "ns", Name: "cloud"}
	restart := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	class := VersionClassPrefix + "B"
	service := func(state string, at time.Time) []NovaService {
		return []NovaService{{ID: "svc-1", State: state, Status: "enabled", UpdatedAt: at}}
	}
	hv := []Hypervisor{hypervisor("hv-1", "c0")}
	for _, tc := range []struct {
		name   string
		expect func(n *mock.MockComputeClientMockRecorder, p *mock.MockPlacementClientMockRecorder)
		says   string
	}{
		{"reported the new version", func(n *mock.MockComputeClientMockRecorder, p *mock.MockPlacementClientMockRecorder) {
			n.ComputeServices(gomock.Any(), "c0").Return(service("up", restart.Add(time.Second)), nil)
			n.Hypervisors(gomock.Any(), "c0").Return(hv, nil)
			p.ResourceClasses(gomock.Any(), "hv-1").Return([]string{"DISK_GB", "MEMORY_MB", class, "VCPU"}, nil)
		}, ""},
		{"not reported since the restart", func(n *mock.MockComputeClientMockRecorder, p *mock.MockPlacementClientMockRecorder) {
			n.ComputeServices(gomock.Any(), "c0").Return(service("up", restart.Add(-time.Second)), nil)
			n.Hypervisors(gomock.Any(), "c0").Return(hv, nil)
			p.ResourceClasses(gomock.Any(), "hv-1").Return([]string{class}, nil)
		}, "has not reported since its restart"},
		{"down", func(n *mock.MockComputeClientMockRecorder, p *mock.MockPlacementClientMockRecorder) {
			n.ComputeServices(gomock.Any(), "c0").Return(service("down", restart.Add(time.Second)), nil)
			n.Hypervisors(gomock.Any(), "c0").Return(hv, nil)
			p.ResourceClasses(gomock.Any(), "hv-1").Return([]string{class}, nil)
		}, "is down"},
		{"the old version still", func(n *mock.MockComputeClientMockRecorder, p *mock.MockPlacementClientMockRecorder) {
			n.ComputeServices(gomock.Any(), "c0").Return(service("up", restart.Add(time.Second)), nil)
			n.Hypervisors(gomock.Any(), "c0").Return(hv, nil)
			p.ResourceClasses(gomock.Any(), "hv-1").Return([]string{VersionClassPrefix + "A"}, nil)
		}, "reports version " + VersionClassPrefix + "A, not " + class},
		{"no hypervisor", func(n *mock.MockComputeClientMockRecorder, _ *mock.MockPlacementClientMockRecorder) {
			n.ComputeServices(gomock.Any(), "c0").Return(service("up", restart.Add(time.Second)), nil)
			n.Hypervisors(gomock.Any(), "c0").Return(nil, nil)
		}, "lists no hypervisor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, n, p := withNovaPlacement(t, cloud.Identity())
			tc.expect(n.EXPECT(), p.EXPECT())
			st, err := o.WaitComputeVersion(context.Background(), VersionCheckInput{Cloud: cloud, Host: "c0", Class: class, Since: restart})
			if tc.says == "" {
				require.NoError(t, err)
				require.Equal(t, []string{class}, st.VersionClasses)
				return
			}
			requireOutcome(t, err, "retryable", "")
			requireType(t, err, ErrVersionNotReported)
			require.ErrorContains(t, err, tc.says)
		})
	}
}

// requireType checks the type of an activity's application error.
func requireType(t *testing.T, err error, errType string) {
	t.Helper()
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	require.Equal(t, errType, app.Type(), "%v", err)
}

// TestDeleteComputeService: the host's service records go, then the provider Nova left with them; what
// is already gone is no error; an instance's allocations keep the provider.
func TestDeleteComputeService(t *testing.T) {
	in := ComputeHostInput{Cloud: hostCloud, Host: "c0"}
	gone := httpErr(404, `{"itemNotFound": {"message": "not found"}}`)
	for _, tc := range []struct {
		name    string
		expect  func(n *mock.MockComputeClientMockRecorder, p *mock.MockPlacementClientMockRecorder)
		outcome string
		errType string
	}{
		{"services deleted; Nova took the provider with them", func(n *mock.MockComputeClientMockRecorder, p *mock.MockPlacementClientMockRecorder) {
			n.ComputeServices(gomock.Any(), "c0").Return([]NovaService{{ID: "svc-1"}, {ID: "svc-2"}}, nil)
			n.DeleteService(gomock.Any(), "svc-1").Return(nil)
			n.DeleteService(gomock.Any(), "svc-2").Return(gone)
			p.Providers(gomock.Any(), "c0").Return(nil, nil)
		}, "ok", ""},
		{"a provider left with stale allocations: they go, then it does", func(n *mock.MockComputeClientMockRecorder, p *mock.MockPlacementClientMockRecorder) {
			n.ComputeServices(gomock.Any(), "c0").Return(nil, nil)
			p.Providers(gomock.Any(), "c0").Return([]string{"rp-1"}, nil)
			p.Consumers(gomock.Any(), "rp-1").Return([]string{"vm-gone"}, nil)
			n.GetServer(gomock.Any(), "vm-gone").Return(nil, gone)
			p.DeleteAllocations(gomock.Any(), "vm-gone").Return(nil)
			p.DeleteProvider(gomock.Any(), "rp-1").Return(nil)
		}, "ok", ""},
		{"an instance still allocated there: the provider stays, retried", func(n *mock.MockComputeClientMockRecorder, p *mock.MockPlacementClientMockRecorder) {
			n.ComputeServices(gomock.Any(), "c0").Return(nil, nil)
			p.Providers(gomock.Any(), "c0").Return([]string{"rp-1"}, nil)
			p.Consumers(gomock.Any(), "rp-1").Return([]string{"vm-1"}, nil)
			n.GetServer(gomock.Any(), "vm-1").Return(&Server{ID: "vm-1"}, nil)
		}, "retryable", ErrInstancesOnHost},
		{"Nova refuses the delete: permanent", func(n *mock.MockComputeClientMockRecorder, _ *mock.MockPlacementClientMockRecorder) {
			n.ComputeServices(gomock.Any(), "c0").Return([]NovaService{{ID: "svc-1"}}, nil)
			n.DeleteService(gomock.Any(), "svc-1").Return(httpErr(403, `{"forbidden": {"message": "Policy doesn't allow"}}`))
		}, "permanent", ErrOSForbidden},
		{"Nova unavailable: retried", func(n *mock.MockComputeClientMockRecorder, _ *mock.MockPlacementClientMockRecorder) {
			n.ComputeServices(gomock.Any(), "c0").Return(nil, httpErr(503, "unavailable"))
		}, "retryable", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, n, p := withNovaPlacement(t, hostCloud.Identity())
			tc.expect(n.EXPECT(), p.EXPECT())
			err := o.DeleteComputeService(context.Background(), in)
			requireOutcome(t, err, tc.outcome, tc.errType)
			if tc.outcome == "retryable" && tc.errType != "" {
				requireType(t, err, tc.errType)
			}
		})
	}
	t.Run("a region with no compute API: only its provider is removed", func(t *testing.T) {
		ctl := gomock.NewController(t)
		p := mock.NewMockPlacementClient(ctl)
		o := &OpenStack{
			compute: func(context.Context, Identity) (ComputeClient, error) {
				return nil, fmt.Errorf("region r2: %w", errNoComputeAPI)
			},
			placement: func(context.Context, Identity) (PlacementClient, error) { return p, nil },
		}
		p.EXPECT().Providers(gomock.Any(), "c0").Return([]string{"rp-1"}, nil)
		// No Nova to ask about a consumer: its allocations stay, and so does the provider.
		p.EXPECT().Consumers(gomock.Any(), "rp-1").Return([]string{"vm-1"}, nil)
		requireType(t, o.DeleteComputeService(context.Background(), in), ErrInstancesOnHost)

		p.EXPECT().Providers(gomock.Any(), "c0").Return([]string{"rp-1"}, nil)
		p.EXPECT().Consumers(gomock.Any(), "rp-1").Return(nil, nil)
		p.EXPECT().DeleteProvider(gomock.Any(), "rp-1").Return(nil)
		require.NoError(t, o.DeleteComputeService(context.Background(), in))
	})
}

func TestWaitComputeAPI(t *testing.T) {
	cloud := CloudSecret{Namespace: "ns", Name: "cloud", ComputeRegion: "r2"}
	missing := &OpenStack{compute: func(context.Context, Identity) (ComputeClient, error) {
		return nil, fmt.Errorf("region r2: %w", errNoComputeAPI)
	}}
	err := missing.WaitComputeAPI(context.Background(), cloud)
	requireOutcome(t, err, "retryable", "")
	requireType(t, err, ErrComputeAPIMissing)
	require.Contains(t, err.Error(), "region r2")

	there := &OpenStack{compute: func(context.Context, Identity) (ComputeClient, error) { return nil, nil }}
	require.NoError(t, there.WaitComputeAPI(context.Background(), cloud))

	noSecret := temporal.NewNonRetryableApplicationError("identity Secret ns/cloud not found", ErrOSCredentials, nil)
	broken := &OpenStack{compute: func(context.Context, Identity) (ComputeClient, error) { return nil, noSecret }}
	requireOutcome(t, broken.WaitComputeAPI(context.Background(), cloud), "permanent", ErrOSCredentials)
}
