// Package rbac derives stackflow's least-privilege Kubernetes RBAC from its code, so the chart's
// ClusterRoles and Roles never drift from what the bridge and the workers really do.
//
// Derive type-checks the module and follows, from each identity's entry points, every function of the
// module they reach. There it finds every call to a client-go client — typed clients give the verb and
// the resource exactly; dynamic and metadata clients give the verb, and the resource comes from the
// code's own tables (bridge.Served, api.Kinds) — and every use of a library that calls the API server
// itself (leader election, the event recorder, metadata informers, Helm), whose calls are described once
// in libraries. The identities are the chart's ServiceAccounts: the bridge, and one worker per task queue
// with the activities worker.register puts on it.
//
// `go generate ./deploy/rbac` writes the result into the chart (RulesFile); the test in this package
// fails when the code and that file differ, or when the chart renders any rule the file does not hold or
// misses one it does.
package rbac

//go:generate go run ./gen

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Scope says where a rule applies; the chart binds each scope its own way.
type Scope string

// Scopes of rules.
const (
	// Cluster rules are on cluster-scoped resources (Nodes, Namespaces, cluster-scoped kinds).
	Cluster Scope = "cluster"
	// Watched rules are on namespaced resources in the namespaces stackflow serves: every namespace, or
	// the chart's watchNamespaces (events of cluster-scoped objects land in "default", which is added).
	Watched Scope = "watched"
	// Release rules are in the chart's own namespace (the leader-election Lease).
	Release Scope = "release"
	// HelmReleases rules are in the namespaces the OpenStack Helm releases go to (every namespace, or
	// the chart's helmReleaseNamespaces).
	HelmReleases Scope = "helmReleases"
)

// Scopes in the order the rules file lists them.
var Scopes = []Scope{Cluster, Watched, Release, HelmReleases}

// Rule is a set of verbs on one resource of one API group, in one scope.
type Rule struct {
	Scope    Scope    `json:"-"`
	Group    string   `json:"apiGroup"`
	Resource string   `json:"resource"`
	Verbs    []string `json:"verbs"`
}

func (r Rule) String() string {
	g := r.Group
	if g == "" {
		g = "core"
	}
	return fmt.Sprintf("%s %s/%s [%s]", r.Scope, g, r.Resource, strings.Join(r.Verbs, " "))
}

// Account is one ServiceAccount of the chart and its rules.
type Account struct {
	Name  string
	Rules []Rule
}

// rules accumulates verbs by (scope, group, resource).
type rules map[[3]string]map[string]bool

func (rs rules) add(scope Scope, group, resource string, verbs ...string) {
	k := [3]string{string(scope), group, resource}
	if rs[k] == nil {
		rs[k] = map[string]bool{}
	}
	for _, v := range verbs {
		rs[k][v] = true
	}
}

// list returns the rules sorted by scope, group and resource, verbs sorted.
func (rs rules) list() []Rule {
	var out []Rule
	for k, vs := range rs {
		r := Rule{Scope: Scope(k[0]), Group: k[1], Resource: k[2]}
		for v := range vs {
			r.Verbs = append(r.Verbs, v)
		}
		slices.Sort(r.Verbs)
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Rule) int {
		return cmp.Or(cmp.Compare(slices.Index(Scopes, a.Scope), slices.Index(Scopes, b.Scope)),
			cmp.Compare(a.Group, b.Group), cmp.Compare(a.Resource, b.Resource))
	})
	return out
}
