package openstack

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
)

// The drain's decisions (MigrateServers): which instance moves where, what counts as moved or skipped,
// and when a drain fails and why.
func TestMigrateDecisions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(*fakeCloud)
		in    MigrateInput
		// moved and skipped are the result; failure, when set, is the ErrDrainFailed message's part.
		moved   map[string]string
		skipped []string
		failure string
		calls   []string
	}{
		{
			name: "drain: every instance on the host moves, round robin over the targets",
			setup: func(f *fakeCloud) {
				f.server("s1", "ha", "ACTIVE")
				f.server("s2", "ha", "ACTIVE")
				f.server("s3", "hb", "ACTIVE")
			},
			in:    MigrateInput{From: "ha", Targets: []string{"hb", "hc"}},
			moved: map[string]string{"s1": "hb", "s2": "hc"},
			calls: []string{`migrate s1 to "hb"`, `migrate s2 to "hc"`},
		},
		{
			name:  "drain without targets: Nova's scheduler chooses",
			setup: func(f *fakeCloud) { f.server("s1", "ha", "ACTIVE"); f.schedulerPick = "hz" },
			in:    MigrateInput{From: "ha"},
			moved: map[string]string{"s1": "hz"},
			calls: []string{`migrate s1 to ""`},
		},
		{
			name:    "an instance that is not ACTIVE cannot live-migrate: the drain fails naming it",
			setup:   func(f *fakeCloud) { f.server("s1", "ha", "SHUTOFF") },
			in:      MigrateInput{From: "ha", Targets: []string{"hb"}},
			failure: "drain of host ha: s1 is SHUTOFF (only ACTIVE instances live-migrate)",
		},
		{
			name:    "a migration that fails twice fails the drain with Nova's last migration",
			setup:   func(f *fakeCloud) { f.server("s1", "ha", "ACTIVE"); f.failMigrations["s1"] = true },
			in:      MigrateInput{From: "ha", Targets: []string{"hb"}},
			failure: "s1: live migration failed twice (last migration ha → hb: error)",
			calls:   []string{`migrate s1 to "hb"`, `migrate s1 to "hb"`},
		},
		{
			name: "a failure waits for the instances still moving, and names every one that could not move",
			setup: func(f *fakeCloud) {
				f.server("s1", "ha", "ACTIVE")
				f.server("s2", "ha", "ACTIVE")
				f.failMigrations["s1"], f.failMigrations["s2"] = true, true
				// s2's migration (a crashed attempt's) is under way for longer than s1's two take.
				f.servers["s2"].TaskState = "migrating"
				f.moving["s2"], f.movingTo["s2"] = 12, "hb"
			},
			in:      MigrateInput{From: "ha", Targets: []string{"hb"}},
			failure: "drain of host ha: s1: live migration failed twice (last migration ha → hb: error); s2: live migration failed twice (last migration ha → hb: error)",
			calls:   []string{`migrate s1 to "hb"`, `migrate s1 to "hb"`, `migrate s2 to "hb"`, `migrate s2 to "hb"`},
		},
		{
			name: "an instance being deleted leaves by itself: skipped, not moved, not a failure",
			setup: func(f *fakeCloud) {
				f.server("s1", "ha", "DELETED")
				f.server("s2", "ha", "ACTIVE")
				f.servers["s2"].TaskState = "deleting"
				f.server("s3", "ha", "ACTIVE")
			},
			in:      MigrateInput{From: "ha", Targets: []string{"hb"}},
			moved:   map[string]string{"s3": "hb"},
			skipped: []string{"s1", "s2"},
			calls:   []string{`migrate s3 to "hb"`},
		},
		{
			name: "back: instances elsewhere return; one already home is skipped, one deleted meanwhile too",
			setup: func(f *fakeCloud) {
				f.server("s1", "hb", "ACTIVE")
				f.server("s2", "ha", "ACTIVE")
			},
			in:      MigrateInput{Servers: []string{"s1", "s2", "gone"}, Targets: []string{"ha"}},
			moved:   map[string]string{"s1": "ha"},
			skipped: []string{"gone", "s2"},
			calls:   []string{`migrate s1 to "ha"`},
		},
		{
			name: "a migration under way (a crashed attempt's) is waited for, not started again",
			setup: func(f *fakeCloud) {
				f.server("s1", "ha", "ACTIVE")
				f.servers["s1"].TaskState = "migrating"
				f.moving["s1"], f.movingTo["s1"] = 2, "hb"
			},
			in:    MigrateInput{From: "ha", Targets: []string{"hb"}},
			moved: map[string]string{"s1": "hb"},
		},
		{
			name:    "the deadline passes with instances still moving",
			setup:   func(f *fakeCloud) { f.server("s1", "ha", "ACTIVE") },
			in:      MigrateInput{From: "ha", Targets: []string{"hb"}, Deadline: time.Now().Add(-time.Second)},
			failure: "1 instance(s) not moved by the deadline: s1",
			calls:   []string{`migrate s1 to "hb"`},
		},
		{
			name:    "migrating back needs a target",
			in:      MigrateInput{Servers: []string{"s1"}},
			failure: "migrate back needs a target host",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeCloud()
			if tc.setup != nil {
				tc.setup(f)
			}
			o := &OpenStack{PollInterval: time.Millisecond, compute: func(_ context.Context, id Identity) (ComputeClient, error) {
				require.Equal(t, tc.in.Cloud.Identity(), id, "the cloud of the input")
				return f, nil
			}}
			res, err := o.MigrateServers(context.Background(), tc.in)
			if tc.failure != "" {
				var app *temporal.ApplicationError
				require.True(t, errors.As(err, &app) && app.NonRetryable(), "a permanent failure: %v", err)
				require.Contains(t, err.Error(), tc.failure)
			} else {
				require.NoError(t, err)
				require.Equal(t, tc.moved, res.Moved)
				require.ElementsMatch(t, tc.skipped, res.Skipped)
			}
			require.Equal(t, tc.calls, f.calls)
		})
	}
}

// The sweep by owner marker (SweepOwned): what carries the marker goes, servers first; what another
// owner's or kept stays; volumes only when asked and when the cloud has block storage.
func TestSweepByMarker(t *testing.T) {
	mine := Marker{Owner: "o1"}
	other := Marker{Owner: "o2"}
	setup := func() *fakeCloud {
		f := newFakeCloud()
		f.server("srv-mine", "h", "ACTIVE", mine.Tags()...)
		f.server("srv-other", "h", "ACTIVE", other.Tags()...)
		f.fips = []FloatingIP{
			{ID: "fip-tagged", Tags: mine.Tags()},
			{ID: "fip-described", Description: mine.Description() + " bastion"},
			{ID: "fip-kept", Tags: mine.Tags()},
			{ID: "fip-other", Tags: other.Tags()},
		}
		f.ports = []Port{
			{ID: "port-tagged", Tags: mine.Tags()},
			{ID: "port-untagged", Name: "web-0", Description: mine.Description()},
			{ID: "port-other", Name: "web-0", Description: other.Description(), Tags: other.Tags()},
		}
		f.volumes = map[string]*Volume{
			"vol-mine":  {ID: "vol-mine", Status: "available", Metadata: mine.Metadata()},
			"vol-other": {ID: "vol-other", Status: "available", Metadata: other.Metadata()},
		}
		return f
	}
	for _, tc := range []struct {
		name       string
		in         SweepInput
		noCinder   bool
		noNova     bool
		want       SweepResult
		wantRemain []string
	}{
		{
			name: "everything the owner marked, the planned port found by name and description, a pinned address kept",
			in:   SweepInput{Marker: mine, Ports: []ResolvedPort{{Name: "web-0", Description: mine.Description()}}, KeepFloatingIPs: []string{"fip-kept"}, Volumes: true},
			want: SweepResult{Servers: []string{"srv-mine"}, FloatingIPs: []string{"fip-tagged", "fip-described"},
				Ports: []string{"port-tagged", "port-untagged"}, Volumes: []string{"vol-mine"}},
		},
		{
			name: "volumes are left unless the spec had volumes",
			in:   SweepInput{Marker: mine},
			want: SweepResult{Servers: []string{"srv-mine"}, FloatingIPs: []string{"fip-tagged", "fip-described", "fip-kept"}, Ports: []string{"port-tagged"}},
		},
		{
			name:     "a cloud without block storage sweeps the rest",
			in:       SweepInput{Marker: mine, Volumes: true},
			noCinder: true,
			want:     SweepResult{Servers: []string{"srv-mine"}, FloatingIPs: []string{"fip-tagged", "fip-described", "fip-kept"}, Ports: []string{"port-tagged"}},
		},
		{
			name:   "a region with no compute API sweeps its addresses, ports and volumes",
			in:     SweepInput{Marker: mine, Volumes: true},
			noNova: true,
			want:   SweepResult{FloatingIPs: []string{"fip-tagged", "fip-described", "fip-kept"}, Ports: []string{"port-tagged"}, Volumes: []string{"vol-mine"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := setup()
			var cinder VolumeClient = f
			if tc.noCinder {
				cinder = nil // regionVolumeFor's answer for a cloud without block storage
			}
			var nova ComputeClient = f
			if tc.noNova {
				nova = nil
			}
			o := &OpenStack{PollInterval: time.Millisecond,
				compute: func(context.Context, Identity) (ComputeClient, error) {
					if tc.noNova {
						return nil, fmt.Errorf("region r2: %w", errNoComputeAPI)
					}
					return f, nil
				},
				network: func(context.Context, Identity) (NetworkClient, error) { return f, nil },
				volume:  func(context.Context, Identity) (VolumeClient, error) { return cinder, nil }}
			res, err := o.SweepOwned(context.Background(), tc.in)
			require.NoError(t, err)
			require.Equal(t, tc.want, *res)
			require.Contains(t, f.servers, "srv-other", "another owner's server stays")
			if !tc.noNova {
				require.Equal(t, "delete server srv-mine", f.calls[0], "servers go first: their ports and volumes are free after")
			}
			again, err := sweep(context.Background(), nova, f, cinder, tc.in, time.Millisecond)
			require.NoError(t, err)
			require.Zero(t, again.Found(), "a second sweep finds nothing")
		})
	}
}

// A compute removed under an approved drain failure deletes what is on its host, and only that; asked
// again (a retried activity) while they are being deleted, or after, it deletes nothing twice and fails
// on nothing.
func TestDeleteServersOnHost(t *testing.T) {
	f := newFakeCloud()
	f.server("vm-b", "h1", "SHUTOFF")
	f.server("vm-a", "h1", "ACTIVE")
	f.server("vm-c", "h2", "ACTIVE")
	ctx := context.Background()
	gone, err := deleteServersOn(ctx, f, "h1")
	require.NoError(t, err)
	require.Equal(t, []string{"vm-a", "vm-b"}, gone)
	require.Equal(t, []string{"delete server vm-a", "delete server vm-b"}, f.calls)
	f.tick()
	again, err := deleteServersOn(ctx, f, "h1")
	require.NoError(t, err)
	require.Empty(t, again)
	require.Len(t, f.calls, 2, "nothing deleted twice")
	require.Contains(t, f.servers, "vm-c", "another host's instance stays")
}

// fakePlacement is PlacementClient in memory: providers by name with their consumers, and (as a
// ComputeClient answering GetServer only) the instances Nova has.
type fakePlacement struct {
	ComputeClient
	providers map[string][]string // name → UUIDs
	consumers map[string][]string // provider UUID → consumers
	servers   map[string]bool
	calls     []string
}

func (f *fakePlacement) Providers(_ context.Context, name string) ([]string, error) {
	return f.providers[name], nil
}

func (f *fakePlacement) Consumers(_ context.Context, rp string) ([]string, error) {
	return slices.Clone(f.consumers[rp]), nil
}

func (f *fakePlacement) DeleteProvider(_ context.Context, rp string) error {
	if len(f.consumers[rp]) > 0 {
		return gophercloud.ErrUnexpectedResponseCode{Actual: 409, Body: []byte(`{"errors":[{"detail":"has allocations"}]}`)}
	}
	f.calls = append(f.calls, "delete provider "+rp)
	for name, ids := range f.providers {
		f.providers[name] = slices.DeleteFunc(ids, func(id string) bool { return id == rp })
	}
	return nil
}

func (f *fakePlacement) DeleteAllocations(_ context.Context, c string) error {
	f.calls = append(f.calls, "delete allocations "+c)
	for rp, cs := range f.consumers {
		f.consumers[rp] = slices.DeleteFunc(cs, func(x string) bool { return x == c })
	}
	return nil
}

func (f *fakePlacement) ResourceClasses(context.Context, string) ([]string, error) { return nil, nil }

func (f *fakePlacement) GetServer(_ context.Context, id string) (*Server, error) {
	if !f.servers[id] {
		return nil, notFoundErr()
	}
	return &Server{ID: id}, nil
}

// A removed compute's resource provider goes, with the allocations of consumers Nova knows no instance
// of (stale); an existing instance's allocations keep it, and the error names the instance.
func TestRemoveProvider(t *testing.T) {
	for _, tc := range []struct {
		name      string
		consumers []string
		servers   map[string]bool
		wantErr   string
		wantCalls []string
	}{
		{name: "Nova deleted it already", wantCalls: nil},
		{name: "left without allocations", consumers: []string{}, wantCalls: []string{"delete provider rp-1"}},
		{name: "stale allocations of a deleted instance and an ended migration", consumers: []string{"mig-1", "vm-gone"},
			wantCalls: []string{"delete allocations mig-1", "delete allocations vm-gone", "delete provider rp-1"}},
		{name: "an existing instance's allocations keep it", consumers: []string{"vm-live", "vm-gone"}, servers: map[string]bool{"vm-live": true},
			wantErr: "still holds allocations of instances vm-live", wantCalls: []string{"delete allocations vm-gone"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakePlacement{providers: map[string][]string{}, consumers: map[string][]string{}, servers: tc.servers}
			if tc.consumers != nil {
				f.providers["h1"] = []string{"rp-1"}
				f.consumers["rp-1"] = tc.consumers
			}
			f.providers["h2"] = []string{"rp-2"}
			err := removeProvider(context.Background(), f, f, "h1")
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
				require.Empty(t, f.providers["h1"])
				require.NoError(t, removeProvider(context.Background(), f, f, "h1"), "a second removal finds nothing")
			}
			require.Equal(t, tc.wantCalls, f.calls)
			require.Equal(t, []string{"rp-2"}, f.providers["h2"], "another host's provider stays")
		})
	}
}
