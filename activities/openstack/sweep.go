package openstack

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/stackflow/stackflow/activities/internal/heartbeat"
)

// SweepInput names what to sweep: every server, floating IP, port and volume carrying the marker (the
// owner's, or one instance's when Marker.Instance is set), plus the planned ports looked up by name and
// description, which catches a port created but not yet tagged.
type SweepInput struct {
	Identity Identity       `json:"identity"`
	Marker   Marker         `json:"marker"`
	Ports    []ResolvedPort `json:"ports,omitempty"`
	// KeepFloatingIPs are IDs of floating IPs to leave (a pinned address kept for the next server).
	KeepFloatingIPs []string `json:"keepFloatingIPs,omitempty"`
	// Volumes sweeps Cinder too; only asked when a spec wanted volumes, so a cloud whose block storage
	// is absent or broken never blocks the deletion of servers that had none.
	Volumes bool `json:"volumes,omitempty"`
}

// SweepResult lists the IDs the sweep deleted.
type SweepResult struct {
	Servers     []string `json:"servers,omitempty"`
	FloatingIPs []string `json:"floatingIPs,omitempty"`
	Ports       []string `json:"ports,omitempty"`
	Volumes     []string `json:"volumes,omitempty"`
}

// Found reports whether the sweep found anything: after a clean teardown it finds nothing.
func (r SweepResult) Found() int {
	return len(r.Servers) + len(r.FloatingIPs) + len(r.Ports) + len(r.Volumes)
}

// SweepOwned deletes every resource carrying the marker, servers first (and waits for them to go, so
// their ports and volumes are free), then floating IPs, ports and volumes. It is how teardown finds what
// was created but never recorded (a crash between the create and the record).
func (o *OpenStack) SweepOwned(ctx context.Context, in SweepInput) (*SweepResult, error) {
	return heartbeat.While(ctx, func(ctx context.Context) (*SweepResult, error) {
		// A region with no compute API holds no server, but may hold the ports and addresses made for one.
		nova, err := o.computeFor(ctx, in.Identity)
		if errors.Is(err, errNoComputeAPI) {
			nova = nil
		} else if err != nil {
			return nil, err
		}
		neutron, err := o.networkFor(ctx, in.Identity)
		if err != nil {
			return nil, err
		}
		cinder, err := o.regionVolumeFor(ctx, in.Identity)
		if err != nil {
			return nil, err
		}
		return sweep(ctx, nova, neutron, cinder, in, o.poll())
	})
}

// sweep is SweepOwned's decisions against the narrow clients: what carries the marker is deleted, what a
// person kept (KeepFloatingIPs) or another owner's stays; nova is nil when the region has no compute API
// (no server to sweep), cinder when the cloud has no block storage, and volumes are swept only when in
// asks for them.
func sweep(ctx context.Context, nova ComputeClient, neutron NetworkClient, cinder VolumeClient, in SweepInput, poll time.Duration) (*SweepResult, error) {
	res := &SweepResult{}
	tags := strings.Join(in.Marker.Tags(), ",")

	if nova != nil {
		srvs, err := nova.ListServers(ctx, ServerListOpts{Tags: tags})
		if err != nil {
			return nil, classifyOS("list servers tagged "+tags, err)
		}
		for _, s := range srvs {
			if err := deleteServerAndWait(ctx, nova, s.ID, poll); err != nil {
				return nil, err
			}
			res.Servers = append(res.Servers, s.ID)
		}
	}

	// Floating IPs get their tags after creation, so the description (set at creation) is checked too.
	fips, err := neutron.ListFloatingIPs(ctx, FloatingIPListOpts{})
	if err != nil {
		return nil, classifyOS("list floating IPs", err)
	}
	for _, f := range fips {
		if !in.Marker.Owns(f.Tags, f.Description) || slices.Contains(in.KeepFloatingIPs, f.ID) {
			continue
		}
		if err := neutron.DeleteFloatingIP(ctx, f.ID); err != nil && !isNotFound(err) {
			return nil, classifyOS("delete floating IP "+f.FloatingIP, err)
		}
		res.FloatingIPs = append(res.FloatingIPs, f.ID)
	}

	seen := map[string]bool{}
	found, err := neutron.ListPorts(ctx, PortListOpts{Tags: tags})
	if err != nil {
		return nil, classifyOS("list ports tagged "+tags, err)
	}
	for _, p := range in.Ports {
		if pt, err := findPort(ctx, neutron, p); err != nil {
			return nil, err
		} else if pt != nil {
			found = append(found, *pt)
		}
	}
	for _, p := range found {
		if seen[p.ID] || !in.Marker.Owns(p.Tags, p.Description) {
			continue
		}
		seen[p.ID] = true
		if err := neutron.DeletePort(ctx, p.ID); err != nil && !isNotFound(err) {
			return nil, classifyOS("delete port "+p.Name, err)
		}
		res.Ports = append(res.Ports, p.ID)
	}

	if cinder != nil && in.Volumes {
		vols, err := cinder.ListVolumes(ctx, VolumeListOpts{Metadata: in.Marker.Metadata()})
		if err != nil {
			return nil, classifyOS("list volumes of "+tags, err)
		}
		for _, v := range vols {
			if err := deleteVolumeAndWait(ctx, cinder, v.ID, poll); err != nil {
				return nil, err
			}
			res.Volumes = append(res.Volumes, v.ID)
		}
	}
	return res, nil
}
