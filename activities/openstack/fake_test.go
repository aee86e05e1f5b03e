package openstack

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/gophercloud/gophercloud/v2"
)

// fakeCloud is Nova, Neutron and Cinder in memory, behind the narrow clients, with the behaviours the
// activities' decisions depend on: a live migration takes a few polls (its task state shows meanwhile)
// and lands where it was asked (or on the scheduler's choice), fails when told to, and Nova answers 409
// while a task runs; deletes take a poll before the resource is gone.
type fakeCloud struct {
	// The calls of NetworkClient, ComputeClient and VolumeClient the drain and the sweep do not make are not faked:
	// calling one panics.
	NetworkClient
	ComputeClient
	VolumeClient
	mu      sync.Mutex
	servers map[string]*Server
	// failMigrations names servers whose live migrations end back on their host (task state cleared).
	failMigrations map[string]bool
	// schedulerPick is where a migration without a host goes.
	schedulerPick string
	// moving counts the polls left of each migration under way, and where it goes.
	moving   map[string]int
	movingTo map[string]string
	deleting map[string]bool
	fips     []FloatingIP
	ports    []Port
	volumes  map[string]*Volume
	calls    []string
}

func newFakeCloud() *fakeCloud {
	return &fakeCloud{servers: map[string]*Server{}, failMigrations: map[string]bool{}, moving: map[string]int{},
		movingTo: map[string]string{}, deleting: map[string]bool{}, volumes: map[string]*Volume{}}
}

func notFoundErr() error {
	return gophercloud.ErrUnexpectedResponseCode{Actual: 404, Body: []byte(`{"itemNotFound":{"message":"not found"}}`)}
}

func (f *fakeCloud) server(id, host, status string, tags ...string) {
	f.servers[id] = &Server{ID: id, Host: host, Status: status, Tags: &tags}
}

func (f *fakeCloud) log(format string, args ...any) {
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

// tick advances the migrations and deletions under way by one poll.
func (f *fakeCloud) tick() {
	for id, left := range f.moving {
		if left > 1 {
			f.moving[id] = left - 1
			continue
		}
		s := f.servers[id]
		s.TaskState = ""
		if !f.failMigrations[id] {
			s.Host = f.movingTo[id]
		}
		delete(f.moving, id)
	}
	for id := range f.deleting {
		delete(f.servers, id)
		delete(f.deleting, id)
	}
}

func (f *fakeCloud) ListServers(_ context.Context, opts ServerListOpts) ([]Server, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Server
	for _, id := range keysOf(f.servers) {
		s := f.servers[id]
		if opts.Host != "" && s.Host != opts.Host {
			continue
		}
		if opts.Tags != "" && (s.Tags == nil || !containsAll(*s.Tags, strings.Split(opts.Tags, ","))) {
			continue
		}
		out = append(out, *s)
	}
	return out, nil
}

func (f *fakeCloud) GetServer(_ context.Context, id string) (*Server, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tick()
	s, ok := f.servers[id]
	if !ok {
		return nil, notFoundErr()
	}
	c := *s
	return &c, nil
}

func (f *fakeCloud) DeleteServer(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.servers[id]; !ok {
		return notFoundErr()
	}
	f.log("delete server %s", id)
	f.deleting[id] = true
	return nil
}

func (f *fakeCloud) LiveMigrate(_ context.Context, id, host string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.servers[id]
	if !ok {
		return notFoundErr()
	}
	if s.TaskState != "" {
		return gophercloud.ErrUnexpectedResponseCode{Actual: 409, Body: []byte(`{"conflictingRequest":{"message":"task_state migrating"}}`)}
	}
	f.log("migrate %s to %q", id, host)
	if host == "" {
		host = f.schedulerPick
	}
	s.TaskState = "migrating"
	f.moving[id], f.movingTo[id] = 2, host
	return nil
}

func (f *fakeCloud) LastMigration(_ context.Context, id string) (*Migration, error) {
	return &Migration{SourceCompute: f.servers[id].Host, DestCompute: f.movingTo[id], Status: "error"}, nil
}

func (f *fakeCloud) ListFloatingIPs(context.Context, FloatingIPListOpts) ([]FloatingIP, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.fips), nil
}

func (f *fakeCloud) DeleteFloatingIP(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log("delete floating IP %s", id)
	f.fips = slices.DeleteFunc(f.fips, func(x FloatingIP) bool { return x.ID == id })
	return nil
}

func (f *fakeCloud) ListPorts(_ context.Context, opts PortListOpts) ([]Port, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Port
	for _, p := range f.ports {
		if opts.Tags != "" && !containsAll(p.Tags, strings.Split(opts.Tags, ",")) ||
			opts.Name != "" && p.Name != opts.Name || opts.Description != "" && p.Description != opts.Description {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

func (f *fakeCloud) DeletePort(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log("delete port %s", id)
	f.ports = slices.DeleteFunc(f.ports, func(x Port) bool { return x.ID == id })
	return nil
}

func (f *fakeCloud) ListVolumes(_ context.Context, opts VolumeListOpts) ([]Volume, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Volume
	for _, id := range keysOf(f.volumes) {
		v := f.volumes[id]
		match := true
		for k, val := range opts.Metadata {
			match = match && v.Metadata[k] == val
		}
		if match {
			out = append(out, *v)
		}
	}
	return out, nil
}

func (f *fakeCloud) GetVolume(_ context.Context, id string) (*Volume, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.volumes[id]
	if !ok {
		return nil, notFoundErr()
	}
	if v.Status == "deleting" {
		delete(f.volumes, id)
	}
	c := *v
	return &c, nil
}

func (f *fakeCloud) DeleteVolume(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log("delete volume %s", id)
	f.volumes[id].Status = "deleting"
	return nil
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
