package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/stackflow/stackflow/activities/ansible"
	"github.com/stackflow/stackflow/activities/openstack"
)

// simNova is the in-memory Nova of the benchmark's computes: per host, its compute service (registered
// once its nova-compute playbook ran, enabled or disabled with a reason) and the version class its
// update playbook installed. No host holds an instance, so drains move nothing.
type simNova struct {
	mu    sync.Mutex
	hosts map[string]*simCompute
}

type simCompute struct {
	disabled bool
	reason   string
	class    string
	reported time.Time
}

func newSimNova() *simNova { return &simNova{hosts: map[string]*simCompute{}} }

// played records what a playbook run changed in Nova's view of its host.
func (n *simNova) played(in ansible.PlaybookInput) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch in.Step {
	case "nova-compute":
		if n.hosts[in.Host] == nil {
			n.hosts[in.Host] = &simCompute{}
		}
		n.hosts[in.Host].reported = time.Now()
	case "update-apply", "update-rollback":
		if c := n.hosts[in.Host]; c != nil {
			var class string
			_ = json.Unmarshal(in.ExtraVars["stackflow_nova_version_class"], &class)
			c.class, c.reported = class, time.Now()
		}
	}
}

func (n *simNova) register(w worker.Worker) {
	for name, fn := range map[string]any{
		"WaitComputeAPI": n.WaitComputeAPI, "WaitComputeRegistered": n.WaitComputeRegistered, "ComputeNodeState": n.ComputeNodeState,
		"SetComputeService": n.SetComputeService, "MigrateServers": n.MigrateServers, "WaitComputeVersion": n.WaitComputeVersion,
		"WaitHostEmpty": n.WaitHostEmpty, "DeleteServersOnHost": n.DeleteServersOnHost, "DeleteComputeService": n.DeleteComputeService,
	} {
		w.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
}

func (n *simNova) state(host string) (*openstack.ComputeNodeState, error) {
	c := n.hosts[host]
	if c == nil {
		return nil, temporal.NewApplicationError(fmt.Sprintf("simnova: no nova-compute service on host %s", host), openstack.ErrComputeNotRegistered)
	}
	st := &openstack.ComputeNodeState{ServiceID: "svc-" + host, Status: "enabled", DisabledReason: c.reason, State: "up",
		UpdatedAt: c.reported, HypervisorID: "hv-" + host}
	if c.disabled {
		st.Status = "disabled"
	}
	if c.class != "" {
		st.VersionClasses = []string{c.class}
	}
	return st, nil
}

// WaitComputeAPI stands in for openstack.OpenStack.WaitComputeAPI: the API is always there.
func (n *simNova) WaitComputeAPI(context.Context, openstack.CloudSecret) error { return nil }

// WaitComputeRegistered stands in for openstack.OpenStack.WaitComputeRegistered.
func (n *simNova) WaitComputeRegistered(_ context.Context, in openstack.ComputeHostInput) (*openstack.ComputeRegistration, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	st, err := n.state(in.Host)
	if err != nil {
		return nil, err
	}
	return &openstack.ComputeRegistration{ServiceID: st.ServiceID, State: st.State, Status: st.Status, HypervisorID: st.HypervisorID, HypervisorHostname: in.Host}, nil
}

// ComputeNodeState stands in for openstack.OpenStack.ComputeNodeState.
func (n *simNova) ComputeNodeState(_ context.Context, in openstack.ComputeHostInput) (*openstack.ComputeNodeState, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.state(in.Host)
}

// SetComputeService stands in for openstack.OpenStack.SetComputeService: no instance is on any host.
func (n *simNova) SetComputeService(_ context.Context, in openstack.ServiceStateInput) ([]string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.hosts[in.Host]
	if c == nil {
		if in.IfRegistered {
			return nil, nil
		}
		return nil, temporal.NewApplicationError(fmt.Sprintf("simnova: no nova-compute service on host %s", in.Host), openstack.ErrComputeNotRegistered)
	}
	c.disabled, c.reason = !in.Enabled, in.Reason
	if in.Enabled {
		c.reason = ""
	}
	return []string{}, nil
}

// MigrateServers stands in for openstack.OpenStack.MigrateServers: there is nothing to move.
func (n *simNova) MigrateServers(context.Context, openstack.MigrateInput) (*openstack.MigrateResult, error) {
	return &openstack.MigrateResult{}, nil
}

// WaitComputeVersion stands in for openstack.OpenStack.WaitComputeVersion: the host reports the class
// its update playbook installed, at once.
func (n *simNova) WaitComputeVersion(_ context.Context, in openstack.VersionCheckInput) (*openstack.ComputeNodeState, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	st, err := n.state(in.Host)
	if err != nil {
		return nil, err
	}
	got := ""
	if len(st.VersionClasses) > 0 {
		got = st.VersionClasses[0]
	}
	if got != in.Class {
		return nil, temporal.NewApplicationError(fmt.Sprintf("simnova: %s reports %q, not %q", in.Host, got, in.Class), openstack.ErrVersionNotReported)
	}
	return st, nil
}

// WaitHostEmpty stands in for openstack.OpenStack.WaitHostEmpty: every host is empty.
func (n *simNova) WaitHostEmpty(context.Context, openstack.ComputeHostInput) error { return nil }

// DeleteServersOnHost stands in for openstack.OpenStack.DeleteServersOnHost: there is none.
func (n *simNova) DeleteServersOnHost(context.Context, openstack.ComputeHostInput) ([]string, error) {
	return []string{}, nil
}

// DeleteComputeService stands in for openstack.OpenStack.DeleteComputeService.
func (n *simNova) DeleteComputeService(_ context.Context, in openstack.ComputeHostInput) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.hosts, in.Host)
	return nil
}
