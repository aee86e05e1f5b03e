package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"go.temporal.io/sdk/temporal"
)

// Kubernetes activities of the control-plane rollouts: node labels for OpenStack-Helm scheduling and specs
// of the OpenstackNodes a KupenstackConfiguration owns.

// AnnotationSiteRoleLabels, on a Node whose role labels stackflow manages, records the role labels the
// site had given it before stackflow first changed them (a JSON object; {} when none). Roles are derived
// from these, never from the labels stackflow set itself, and they are put back when stackflow lets go.
const AnnotationSiteRoleLabels = "stackflow.io/site-role-labels"

// NodeLabelsInput sets and removes labels of a Kubernetes Node, or gives the site back its own.
type NodeLabelsInput struct {
	Node   string            `json:"node"`
	Set    map[string]string `json:"set,omitempty"`
	Remove []string          `json:"remove,omitempty"`
	// Manage records the site's values of the labels in Set and Remove (AnnotationSiteRoleLabels) before
	// the first change, so that Restore can put them back.
	Manage bool `json:"manage,omitempty"`
	// Restore puts back the labels AnnotationSiteRoleLabels recorded, removes the others among Remove and
	// the annotation; a Node without the annotation is left as it is. Set is ignored.
	Restore bool `json:"restore,omitempty"`
}

// SetNodeLabels sets and removes the given labels of a Node with one merge patch, and only when
// something differs (so a repeated call writes nothing). A missing Node is not an error: there is
// nothing to schedule on.
func (k *Kube) SetNodeLabels(ctx context.Context, in NodeLabelsInput) error {
	n, err := k.Core.CoreV1().Nodes().Get(ctx, in.Node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return Classify("get node "+in.Node, err)
	}
	patch, err := NodeLabelPatch(n.Labels, n.Annotations, in)
	if err != nil || patch == nil {
		return err
	}
	b, _ := json.Marshal(patch)
	_, err = k.Core.CoreV1().Nodes().Patch(ctx, in.Node, types.MergePatchType, b, metav1.PatchOptions{FieldManager: "stackflow"})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return Classify("label node "+in.Node, err)
}

// NodeLabelPatch is the merge patch SetNodeLabels sends for a Node with these labels and annotations:
// nil when nothing differs.
func NodeLabelPatch(labels, annotations map[string]string, in NodeLabelsInput) (map[string]any, error) {
	site, managed, err := siteRoleLabels(annotations)
	if err != nil {
		return nil, err
	}
	set, remove := in.Set, in.Remove
	if in.Restore {
		if !managed {
			return nil, nil
		}
		set = site
	}
	lp := map[string]any{}
	for key, v := range set {
		if cur, ok := labels[key]; !ok || cur != v {
			lp[key] = v
		}
	}
	for _, key := range remove {
		if _, ok := labels[key]; ok && set[key] == "" {
			lp[key] = nil
		}
	}
	meta := map[string]any{}
	switch {
	case in.Restore:
		meta["annotations"] = map[string]any{AnnotationSiteRoleLabels: nil}
	case in.Manage && !managed && len(lp) > 0:
		// The first change: remember what the site had.
		had := map[string]string{}
		for _, key := range slices.Concat(slices.Collect(maps.Keys(in.Set)), in.Remove) {
			if v, ok := labels[key]; ok {
				had[key] = v
			}
		}
		b, _ := json.Marshal(had)
		meta["annotations"] = map[string]any{AnnotationSiteRoleLabels: string(b)}
	}
	if len(lp) > 0 {
		meta["labels"] = lp
	}
	if len(meta) == 0 {
		return nil, nil
	}
	return map[string]any{"metadata": meta}, nil
}

// siteRoleLabels reads AnnotationSiteRoleLabels: the site's role labels and whether stackflow manages
// the Node's role labels at all.
func siteRoleLabels(annotations map[string]string) (map[string]string, bool, error) {
	raw, ok := annotations[AnnotationSiteRoleLabels]
	if !ok {
		return nil, false, nil
	}
	site := map[string]string{}
	if err := json.Unmarshal([]byte(raw), &site); err != nil {
		return nil, true, temporal.NewNonRetryableApplicationError(fmt.Sprintf("annotation %s: %v", AnnotationSiteRoleLabels, err), ErrInvalid, err)
	}
	return site, true, nil
}

// ApplySpec creates the object with the given spec when it is missing and otherwise merge-patches its
// spec to the given one (fields given are set; a JSON null removes one). It returns the object's UID
// (empty for a missing object left missing: EnsureInput.ExistingOnly).
func (k *Kube) ApplySpec(ctx context.Context, in EnsureInput) (string, error) {
	r := k.resource(in.Ref)
	cur, err := r.Get(ctx, in.Ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if in.ExistingOnly {
			return "", nil
		}
		return k.EnsureObject(ctx, in)
	}
	if err != nil {
		return "", Classify("get "+in.Ref.String(), err)
	}
	var spec map[string]any
	if err := json.Unmarshal(in.Spec, &spec); err != nil {
		return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("spec of %s: %v", in.Ref, err), ErrInvalid, err)
	}
	have, _ := cur.Object["spec"].(map[string]any)
	same := true
	for key, v := range spec {
		a, _ := json.Marshal(v)
		b, _ := json.Marshal(have[key])
		if string(a) != string(b) && !(v == nil && have[key] == nil) {
			same = false
		}
	}
	if same {
		return string(cur.GetUID()), nil
	}
	b, _ := json.Marshal(map[string]any{"spec": spec})
	out, err := r.Patch(ctx, in.Ref.Name, types.MergePatchType, b, metav1.PatchOptions{FieldManager: "stackflow"})
	if err != nil {
		return "", Classify("patch spec of "+in.Ref.String(), err)
	}
	return string(out.GetUID()), nil
}
