package kube

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"go.temporal.io/sdk/temporal"
)

// Kubernetes activities of the control-plane rollouts: node labels for OpenStack-Helm scheduling and specs
// of the OpenstackNodes a KupenstackConfiguration owns.

// NodeLabelsInput sets and removes labels of a Kubernetes Node.
type NodeLabelsInput struct {
	Node   string            `json:"node"`
	Set    map[string]string `json:"set,omitempty"`
	Remove []string          `json:"remove,omitempty"`
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
	patch := map[string]any{}
	for key, v := range in.Set {
		if cur, ok := n.Labels[key]; !ok || cur != v {
			patch[key] = v
		}
	}
	for _, key := range in.Remove {
		if _, ok := n.Labels[key]; ok && in.Set[key] == "" {
			patch[key] = nil
		}
	}
	if len(patch) == 0 {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": patch}})
	_, err = k.Core.CoreV1().Nodes().Patch(ctx, in.Node, types.MergePatchType, b, metav1.PatchOptions{FieldManager: "stackflow"})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return Classify("label node "+in.Node, err)
}

// ApplySpec creates the object with the given spec when it is missing and otherwise merge-patches its
// spec to the given one (fields given are set; a JSON null removes one). It returns the object's UID.
func (k *Kube) ApplySpec(ctx context.Context, in EnsureInput) (string, error) {
	r := k.resource(in.Ref)
	cur, err := r.Get(ctx, in.Ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
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
