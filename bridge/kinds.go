package bridge

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stackflow/stackflow/api"
	"github.com/stackflow/stackflow/api/lifecycle"
)

// Kind is one kind of object the bridge serves: every object of it gets the finalizer and a workflow whose
// type is Kind, on lifecycle.WorkflowQueue.
type Kind struct {
	// Kind is the object's kind; it is also the workflow type.
	Kind string
	// GVR is the resource the bridge watches.
	GVR schema.GroupVersionResource
	// ClusterScoped is true for kinds without a namespace.
	ClusterScoped bool
	// Fingerprint is set for kinds whose API server keeps no metadata.generation: it digests what the
	// kind's workflows read of an object, and the bridge derives a generation from it (see
	// lifecycle.AnnotationGeneration). Such kinds are watched in full, not by metadata.
	Fingerprint func(*unstructured.Unstructured) string
}

// Served is every kind stackflow serves (api.Served, the one table of kinds), with how the bridge
// watches each. A kind whose resource the API server does not offer (its CRD is not installed) is skipped
// until discovery finds it.
var Served = func() []Kind {
	out := make([]Kind, 0, len(api.Served))
	for _, k := range api.Served {
		sk := Kind{Kind: k.GVK.Kind, GVR: k.GVR(), ClusterScoped: k.ClusterScoped}
		// A Kubernetes Node has no metadata.generation: the bridge derives one from what the workflows read.
		if k.GVK == api.Node.GVK {
			sk.Fingerprint = NodeFingerprint
		}
		out = append(out, sk)
	}
	return out
}()

// Ref names one object of this kind as its workflow's input.
func (k Kind) Ref(namespace, name, uid string) lifecycle.ObjectRef {
	if k.ClusterScoped {
		namespace = ""
	}
	return lifecycle.ObjectRef{
		Group:     k.GVR.Group,
		Version:   k.GVR.Version,
		Kind:      k.Kind,
		Resource:  k.GVR.Resource,
		Namespace: namespace,
		Name:      name,
		UID:       uid,
	}
}

// IsServed reports whether kind is in Served (served by default, without naming it).
func IsServed(kind string) bool {
	for _, k := range Served {
		if k.Kind == kind {
			return true
		}
	}
	return false
}

// Select returns the served kinds named in names (all of Served when names is empty) and the names that
// match no kind.
func Select(names []string) (kinds []Kind, unknown []string) {
	if len(names) == 0 {
		return append([]Kind(nil), Served...), nil
	}
	for _, n := range names {
		found := false
		for _, k := range Served {
			if k.Kind == n {
				kinds = append(kinds, k)
				found = true
				break
			}
		}
		if !found {
			unknown = append(unknown, n)
		}
	}
	return kinds, unknown
}

// NodeFingerprint digests what the Node and OpenstackNode workflows read of a Kubernetes Node: its labels,
// taints, schedulability and whether it is Ready. Heartbeats (condition times, resource versions, the
// Lease) are left out, so an idle cluster derives no new generation.
func NodeFingerprint(u *unstructured.Unstructured) string {
	taints, _, _ := unstructured.NestedSlice(u.Object, "spec", "taints")
	unschedulable, _, _ := unstructured.NestedBool(u.Object, "spec", "unschedulable")
	ready := "Unknown"
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
			ready, _ = m["status"].(string)
		}
	}
	// Taint timeAdded moves without meaning anything new to a workflow.
	var ts []map[string]any
	for _, t := range taints {
		if m, ok := t.(map[string]any); ok {
			ts = append(ts, map[string]any{"key": m["key"], "value": m["value"], "effect": m["effect"]})
		}
	}
	// json.Marshal sorts map keys, so the digest is stable.
	b, _ := json.Marshal(map[string]any{"labels": u.GetLabels(), "taints": ts, "unschedulable": unschedulable, "ready": ready})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}
