// Package describe shows a whole cloud as one tree, read from the API server alone: every stackflow
// object in the order things depend on each other (the control-plane configuration and its components;
// a Nova and its cells and services; a data plane, its roles, their nodes, the nodes' services and the
// cell each compute joined; a cluster and its bastion; servers and machines), each line with its Ready
// condition, phase, current step or reason and age, and what fails marked with its message in full. It
// is what `kubectl stackflow describe` prints and what `make run` shows live.
package describe

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Node is one line of the tree: an object, a reference to an object shown elsewhere, or a part an object
// reports in its status (a component's release, a bastion).
type Node struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Ready is the Ready condition's status ("" when the object has none yet); Reason and Message are
	// the condition's.
	Ready   string `json:"ready,omitempty"`
	Phase   string `json:"phase,omitempty"`
	Step    string `json:"step,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Age is how long ago the object was created ("" for parts).
	Age string `json:"age,omitempty"`
	// Failing marks what failed (phase Failed or Cancelled, a teardown that failed): its message is shown
	// in full.
	Failing bool `json:"failing,omitempty"`
	// Ref marks a line that refers to an object shown elsewhere in the tree (a compute's cell).
	Ref bool `json:"ref,omitempty"`
	// Note adds what the line is to its parent ("cell of Nova nova").
	Note        string  `json:"note,omitempty"`
	WorkflowID  string  `json:"workflowID,omitempty"`
	WorkflowURL string  `json:"workflowURL,omitempty"`
	Children    []*Node `json:"children,omitempty"`
}

// Failures counts the failing lines of the tree under roots.
func Failures(roots []*Node) int {
	n := 0
	for _, r := range roots {
		if r.Failing {
			n++
		}
		n += Failures(r.Children)
	}
	return n
}

// rootOrder is the order of the kinds at the top of a namespace: what others depend on first.
var rootOrder = []string{
	"KupenstackConfiguration", "OpenStackCloudConfigurationProfile", "OpenstackNode",
	"Nova", "NovaCell", "NovaAPI", "NovaScheduler", "NovaConductor", "NovaMetadata", "NovaNoVNCProxy",
	"OpenStackDataPlane", "OpenStackDataPlaneRole", "OpenStackDataPlaneNode", "NovaExternalCompute", "OVNMetadataAgent", "OpenStackDataPlaneUpdate",
	"OpenStackDataPlaneDeployment",
	"OpenStackCluster", "OpenStackServer", "OpenStackMachine",
}

// Build arranges objects (of any stackflow kind, any namespace) into trees, roots in dependency order:
// cluster-scoped objects first, then each namespace's. now dates the ages.
func Build(objs []*unstructured.Unstructured, now time.Time) []*Node {
	b := &builder{now: now, placed: map[*unstructured.Unstructured]bool{}}
	b.objs = append(b.objs, objs...)
	slices.SortStableFunc(b.objs, func(x, y *unstructured.Unstructured) int {
		return cmp.Or(cmp.Compare(x.GetNamespace(), y.GetNamespace()), cmp.Compare(kindRank(x.GetKind()), kindRank(y.GetKind())), cmp.Compare(x.GetName(), y.GetName()))
	})
	var roots []*Node
	// First the objects whose children are placed under them, then whatever is left.
	for _, kind := range []string{"KupenstackConfiguration", "Nova", "OpenStackDataPlane", "OpenStackDataPlaneRole", "OpenStackDataPlaneNode", "NovaCell"} {
		for _, o := range b.objs {
			if o.GetKind() == kind && !b.placed[o] {
				b.placed[o] = true
				roots = append(roots, b.node(o))
			}
		}
	}
	for _, o := range b.objs {
		if !b.placed[o] {
			b.placed[o] = true
			roots = append(roots, b.node(o))
		}
	}
	slices.SortStableFunc(roots, func(x, y *Node) int {
		return cmp.Or(cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(kindRank(x.Kind), kindRank(y.Kind)), cmp.Compare(x.Name, y.Name))
	})
	return roots
}

func kindRank(kind string) int {
	if i := slices.Index(rootOrder, kind); i >= 0 {
		return i
	}
	return len(rootOrder)
}

type builder struct {
	now    time.Time
	objs   []*unstructured.Unstructured
	placed map[*unstructured.Unstructured]bool
}

// find lists the objects of kind in namespace for which match holds, in name order.
func (b *builder) find(kind, ns string, match func(*unstructured.Unstructured) bool) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range b.objs {
		if o.GetKind() == kind && o.GetNamespace() == ns && match(o) {
			out = append(out, o)
		}
	}
	return out
}

// adopt adds the objects as children of n (each placed once), with their own subtrees.
func (b *builder) adopt(n *Node, objs []*unstructured.Unstructured) {
	for _, o := range objs {
		if b.placed[o] {
			continue
		}
		b.placed[o] = true
		n.Children = append(n.Children, b.node(o))
	}
}

// node is the line of o with its subtree.
func (b *builder) node(o *unstructured.Unstructured) *Node {
	n := b.line(o)
	ns, name := o.GetNamespace(), o.GetName()
	switch o.GetKind() {
	case "KupenstackConfiguration":
		profile := str(o, "spec", "defaultProfile")
		b.adopt(n, b.find("OpenStackCloudConfigurationProfile", "", func(p *unstructured.Unstructured) bool { return p.GetName() == profile }))
		comps, _, _ := unstructured.NestedSlice(o.Object, "status", "components")
		for _, c := range comps {
			m, _ := c.(map[string]any)
			state, _ := m["state"].(string)
			cn, _ := m["name"].(string)
			rel, _ := m["release"].(string)
			msg, _ := m["message"].(string)
			part := &Node{Kind: "Release", Namespace: str(o, "spec", "releaseNamespace"), Name: cmp.Or(rel, cn), Phase: state, Message: msg,
				Failing: state == "Failed"}
			part.Ready = map[bool]string{true: "True", false: "False"}[state == "Deployed" || state == "Disabled"]
			if rev, ok := m["revision"]; ok {
				part.Note = fmt.Sprintf("revision %v", rev)
			}
			n.Children = append(n.Children, part)
		}
		b.adopt(n, b.find("OpenstackNode", "", func(*unstructured.Unstructured) bool { return true }))
	case "Nova", "NovaCell":
		for _, kind := range []string{"NovaCell", "NovaConductor", "NovaAPI", "NovaScheduler", "NovaMetadata", "NovaNoVNCProxy"} {
			b.adopt(n, b.find(kind, ns, func(c *unstructured.Unstructured) bool { return c.GetLabels()["nova.openstack.org/owner"] == name }))
		}
	case "OpenStackDataPlane":
		roles, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "roles")
		nodes, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "nodes")
		b.adopt(n, b.find("OpenStackDataPlaneRole", ns, func(r *unstructured.Unstructured) bool {
			return slices.Contains(roles, r.GetName()) || str(r, "spec", "dataPlane") == name
		}))
		b.adopt(n, b.find("OpenStackDataPlaneNode", ns, func(x *unstructured.Unstructured) bool { return slices.Contains(nodes, x.GetName()) }))
		b.adopt(n, b.find("OpenStackDataPlaneUpdate", ns, func(u *unstructured.Unstructured) bool { return str(u, "spec", "dataPlane") == name }))
		b.adopt(n, b.find("OpenStackDataPlaneDeployment", ns, func(u *unstructured.Unstructured) bool { return str(u, "spec", "dataPlane") == name }))
	case "OpenStackDataPlaneRole":
		b.adopt(n, b.find("OpenStackDataPlaneNode", ns, func(x *unstructured.Unstructured) bool { return str(x, "spec", "role") == name }))
	case "OpenStackDataPlaneNode":
		for _, kind := range []string{"NovaExternalCompute", "OVNMetadataAgent"} {
			b.adopt(n, b.find(kind, ns, func(s *unstructured.Unstructured) bool {
				return cmp.Or(str(s, "spec", "dataplaneNodeName"), s.GetName()) == name
			}))
		}
	case "NovaExternalCompute":
		// The cell it joined, found as its workflow finds it (by NovaCell name, else by cellName): shown
		// where its Nova is, referred to here.
		cell := str(o, "spec", "cellName")
		cells := b.find("NovaCell", ns, func(c *unstructured.Unstructured) bool { return c.GetName() == cell })
		if len(cells) == 0 {
			cells = b.find("NovaCell", ns, func(c *unstructured.Unstructured) bool { return str(c, "spec", "cellName") == cell })
		}
		for _, c := range cells {
			ref := b.line(c)
			ref.Ref, ref.Children = true, nil
			ref.Note = "its cell"
			if nova := c.GetLabels()["nova.openstack.org/owner"]; nova != "" {
				ref.Note = "its cell, of Nova " + nova
			}
			if r := str(c, "spec", "region"); r != "" {
				ref.Note += ", region " + r
			}
			n.Children = append(n.Children, ref)
		}
		if len(cells) == 0 && cell != "" {
			n.Children = append(n.Children, &Node{Kind: "NovaCell", Namespace: ns, Name: cell, Ref: true, Note: "its cell: no NovaCell of that name or cellName"})
		}
	case "OpenStackCluster":
		if bastion, ok, _ := unstructured.NestedMap(o.Object, "status", "bastion"); ok {
			bn, _ := bastion["name"].(string)
			state, _ := bastion["state"].(string)
			part := &Node{Kind: "Bastion", Namespace: ns, Name: bn, Phase: state, Ready: map[bool]string{true: "True", false: "False"}[state == "ACTIVE"],
				Failing: state == "ERROR"}
			var addrs []string
			for _, k := range []string{"ip", "floatingIP"} {
				if v, _ := bastion[k].(string); v != "" {
					addrs = append(addrs, k+" "+v)
				}
			}
			part.Note = strings.Join(addrs, ", ")
			n.Children = append(n.Children, part)
		}
	}
	return n
}

// line is o's own line, without children.
func (b *builder) line(o *unstructured.Unstructured) *Node {
	n := &Node{Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName(),
		Phase: str(o, "status", "phase"), Step: str(o, "status", "currentStep"),
		WorkflowID: str(o, "status", "workflowID"), WorkflowURL: str(o, "status", "workflowURL")}
	if t := o.GetCreationTimestamp(); !t.IsZero() {
		n.Age = age(b.now.Sub(t.Time))
	}
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] != "Ready" {
			continue
		}
		n.Ready, _ = m["status"].(string)
		n.Reason, _ = m["reason"].(string)
		n.Message, _ = m["message"].(string)
	}
	if o.GetDeletionTimestamp() != nil && n.Phase == "" {
		n.Phase = "Deleting"
	}
	n.Failing = n.Phase == "Failed" || n.Phase == "Cancelled" || n.Reason == "TeardownFailed"
	return n
}

func str(o *unstructured.Unstructured, fields ...string) string {
	s, _, _ := unstructured.NestedString(o.Object, fields...)
	return s
}

// age is a duration as kubectl prints ages: 45s, 12m, 3h, 5d.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}
