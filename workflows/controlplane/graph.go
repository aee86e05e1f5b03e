package controlplane

import (
	"fmt"
	"slices"
	"strings"
)

// Component is one OpenStack component of the control plane: one Helm release, rolled out after the
// components it depends on.
type Component struct {
	// Name is the component and its Helm release name.
	Name string
	// DependsOn lists the components that must be deployed and Ready before this one rolls out.
	DependsOn []string
	// InstallsBeside lists dependencies (among DependsOn) whose release need only be applied, not Ready,
	// before this one installs: its chart waits for them itself, as OpenStack-Helm's dependency init
	// containers do (the registration retries until Keystone issues a token). The Service and Secrets
	// the chart reads exist once the dependency's release is applied. The component is Deployed when its
	// own workloads are Ready: before the dependency's when its chart needs nothing of it at run time
	// (neutron of placement).
	InstallsBeside []string
	// BesideSince names, per dependency in InstallsBeside, the version change that made the pair install
	// beside after install-beside itself existed: a rollout recorded before that change keeps starting
	// the component at that dependency's Ready.
	BesideSince map[string]string
	// RestartWith lists dependencies whose change must restart this component even when its own values
	// did not change (it caches something of theirs). Their values hash becomes part of this component's
	// rendered values, so "restart" is simply "rendered values changed".
	RestartWith []string
	// Schedule maps the chart's OpenStack-Helm label groups (labels.<group>.node_selector_key/value) to
	// the node role whose label they select.
	Schedule map[string]string
}

// Graph is a set of components and their dependencies.
type Graph []Component

// ControlPlane is the dependency graph of the control plane, declared once: infrastructure first, then
// identity, then the services that register with it, then the dashboard. Only horizon restarts with
// another component (keystone), because it caches keystone's endpoints. Node agents (openvswitch,
// libvirt) and ingress have no dependencies here: they roll out alongside the infrastructure.
var ControlPlane = Graph{
	{Name: "mariadb", Schedule: map[string]string{"server": RoleControl}},
	{Name: "rabbitmq", Schedule: map[string]string{"server": RoleControl}},
	{Name: "memcached", Schedule: map[string]string{"server": RoleControl}},
	{Name: "ingress", Schedule: map[string]string{"server": RoleControl}},
	{Name: "openvswitch", Schedule: map[string]string{"ovs": RoleCompute}},
	{Name: "libvirt", Schedule: map[string]string{"agent": RoleCompute}},
	// OVN's central services (databases, northd); neutron-server connects to them when it starts, and the
	// computes' ovn-controller to the southbound database.
	{Name: "ovn", Schedule: map[string]string{"ovn_ovsdb_nb": RoleControl, "ovn_ovsdb_sb": RoleControl, "ovn_northd": RoleControl}},
	{Name: "keystone", DependsOn: []string{"mariadb", "rabbitmq", "memcached"}, Schedule: map[string]string{"api": RoleControl, "job": RoleControl}},
	{Name: "glance", DependsOn: []string{"keystone"}, InstallsBeside: []string{"keystone"}, Schedule: map[string]string{"api": RoleControl, "job": RoleControl}},
	{Name: "placement", DependsOn: []string{"keystone"}, InstallsBeside: []string{"keystone"}, Schedule: map[string]string{"api": RoleControl, "job": RoleControl}},
	{Name: "nova", DependsOn: []string{"glance", "placement"}, Schedule: map[string]string{"api": RoleControl, "conductor": RoleControl, "scheduler": RoleControl, "job": RoleControl, "compute": RoleCompute}},
	// neutron's chart waits for Keystone and OVN itself and uses nothing of placement's: it installs once
	// keystone's and placement's releases are applied (keystone, which placement depends on, is named so
	// that neutron can install beside it too).
	{Name: "neutron", DependsOn: []string{"keystone", "placement"}, InstallsBeside: []string{"keystone", "placement"},
		BesideSince: map[string]string{"keystone": ChangeNeutronBeside, "placement": ChangeNeutronBeside},
		Schedule:    map[string]string{"server": RoleControl, "job": RoleControl, "agent": RoleCompute}},
	{Name: "cinder", DependsOn: []string{"keystone"}, Schedule: map[string]string{"api": RoleControl, "job": RoleControl, "volume": RoleControl}},
	{Name: "heat", DependsOn: []string{"keystone"}, Schedule: map[string]string{"api": RoleControl, "job": RoleControl, "engine": RoleControl}},
	{Name: "barbican", DependsOn: []string{"keystone"}, Schedule: map[string]string{"api": RoleControl, "job": RoleControl}},
	{Name: "ironic", DependsOn: []string{"glance", "neutron"}, Schedule: map[string]string{"api": RoleControl, "conductor": RoleControl, "job": RoleControl}},
	{Name: "octavia", DependsOn: []string{"nova", "neutron"}, Schedule: map[string]string{"api": RoleControl, "worker": RoleControl, "job": RoleControl}},
	{Name: "horizon", DependsOn: []string{"nova", "neutron"}, RestartWith: []string{"keystone"}, Schedule: map[string]string{"dashboard": RoleControl}},
}

// RoleLabels are the Kubernetes Node labels OpenStack-Helm schedules each role by.
var RoleLabels = map[string]string{RoleControl: LabelControlPlane, RoleCompute: LabelCompute}

// Get returns the named component.
func (g Graph) Get(name string) (Component, bool) {
	for _, c := range g {
		if c.Name == name {
			return c, true
		}
	}
	return Component{}, false
}

// Names lists the components in declaration order.
func (g Graph) Names() []string {
	out := make([]string, len(g))
	for i, c := range g {
		out[i] = c.Name
	}
	return out
}

// Validate checks that every dependency names a component of the graph, that there is no cycle, and
// that a component installs beside its direct dependencies only.
func (g Graph) Validate() error {
	if _, err := g.Waves(nil); err != nil {
		return err
	}
	for _, c := range g {
		for _, b := range c.InstallsBeside {
			if !slices.Contains(c.DependsOn, b) {
				return fmt.Errorf("component %s installs beside %s, which it does not depend on", c.Name, b)
			}
		}
		for b := range c.BesideSince {
			if !slices.Contains(c.InstallsBeside, b) {
				return fmt.Errorf("component %s names a version change for installing beside %s, which it does not install beside", c.Name, b)
			}
		}
	}
	return nil
}

// Waves orders the components named in only (every component when only is nil) into waves: each wave
// depends only on earlier waves, counting dependencies through components left out. Components within a
// wave are sorted by name. A dependency cycle or an unknown component is an error naming them.
func (g Graph) Waves(only []string) ([][]string, error) {
	level := map[string]int{}
	const visiting = -1
	var visit func(name string, path []string) (int, error)
	visit = func(name string, path []string) (int, error) {
		switch l, ok := level[name]; {
		case ok && l == visiting:
			return 0, fmt.Errorf("component dependency cycle: %s", strings.Join(append(path, name), " → "))
		case ok:
			return l, nil
		}
		c, ok := g.Get(name)
		if !ok {
			if len(path) > 0 {
				return 0, fmt.Errorf("component %s depends on unknown component %s", path[len(path)-1], name)
			}
			return 0, fmt.Errorf("unknown component %s", name)
		}
		level[name] = visiting
		l := 0
		for _, d := range c.DependsOn {
			dl, err := visit(d, append(path, name))
			if err != nil {
				return 0, err
			}
			l = max(l, dl+1)
		}
		level[name] = l
		return l, nil
	}
	for _, c := range g {
		if _, err := visit(c.Name, nil); err != nil {
			return nil, err
		}
	}
	names := only
	if names == nil {
		names = g.Names()
	}
	var waves [][]string
	for _, n := range names {
		l, err := visit(n, nil)
		if err != nil {
			return nil, err
		}
		for len(waves) <= l {
			waves = append(waves, nil)
		}
		waves[l] = append(waves[l], n)
	}
	// Drop the levels only held by components left out.
	out := waves[:0]
	for _, w := range waves {
		if len(w) > 0 {
			slices.Sort(w)
			out = append(out, w)
		}
	}
	return out, nil
}

// Ancestors returns every component name transitively depends on.
func (g Graph) Ancestors(name string) map[string]bool {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(n string) {
		c, _ := g.Get(n)
		for _, d := range c.DependsOn {
			if !seen[d] {
				seen[d] = true
				walk(d)
			}
		}
	}
	walk(name)
	return seen
}
