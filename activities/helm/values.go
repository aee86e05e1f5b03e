package helm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/stackflow/stackflow/activities/kube"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"go.temporal.io/sdk/temporal"
)

// Helm values travel by reference, not through workflow history: a rollout stores each rolling
// component's rendered values once, in a ConfigMap named after the component and the values' hash (so
// the name says what it holds and never changes meaning), and the Helm activities and the component's
// own workflow get only the reference. A component's other stored values are pruned once a rollout of
// it is Ready, and all of them when its release is uninstalled.

// Keys and labels of stored values.
const (
	ValuesConfigMapKey = "values.json"
	LabelValuesOf      = "stackflow.io/values-of"
	LabelValuesHash    = "stackflow.io/values-hash"
	// ErrValuesMissing: the stored values a Helm activity was handed are gone (or hold other values).
	ErrValuesMissing = "ValuesMissing"
)

// ValuesRef names one component's stored values in the release namespace.
type ValuesRef struct {
	Namespace string `json:"namespace"`
	Component string `json:"component"`
	Hash      string `json:"hash"`
}

// Name is the ConfigMap holding the values.
func (r ValuesRef) Name() string {
	return "stackflow-values-" + r.Component + "-" + strings.ToLower(r.Hash)
}

func (r ValuesRef) String() string { return r.Namespace + "/" + r.Name() }

// StoreValuesInput is a component's rendered values to store under ref.
type StoreValuesInput struct {
	Ref    ValuesRef      `json:"ref"`
	Values map[string]any `json:"values,omitempty"`
}

// StoreValues stores the values under ref (creating the release namespace when needed). It is
// idempotent: the name carries the hash, so an existing ConfigMap of that name already holds them.
func (h *Helm) StoreValues(ctx context.Context, in StoreValuesInput) error {
	if err := h.ensureNamespace(ctx, in.Ref.Namespace); err != nil {
		return err
	}
	return h.storeValues(ctx, in)
}

// ensureNamespace creates the release namespace when it is missing.
func (h *Helm) ensureNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := h.core.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return kube.Classify("create namespace "+name, err)
	}
	return nil
}

// storeValues creates the ConfigMap holding in's values; one of that name already holds them.
func (h *Helm) storeValues(ctx context.Context, in StoreValuesInput) error {
	b, err := json.Marshal(in.Values)
	if err != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("values of %s: %v", in.Ref.Component, err), kube.ErrInvalid, err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: in.Ref.Name(), Namespace: in.Ref.Namespace, Labels: map[string]string{
			LabelValuesOf: in.Ref.Component, LabelValuesHash: in.Ref.Hash, "app.kubernetes.io/managed-by": "stackflow"}},
		Data: map[string]string{ValuesConfigMapKey: string(b)},
	}
	if _, err := h.core.CoreV1().ConfigMaps(in.Ref.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return kube.Classify("store values "+in.Ref.String(), err)
	}
	return nil
}

// StoreAllValuesInput is the rendered values of every component a rollout rolls, stored in one activity.
type StoreAllValuesInput struct {
	Items []StoreValuesInput `json:"items"`
}

// StoreAllValues stores each item's values as StoreValues does, side by side: a rollout waits for one
// activity, not one per component (each a round trip through Temporal). Idempotent like StoreValues.
func (h *Helm) StoreAllValues(ctx context.Context, in StoreAllValuesInput) error {
	namespaces := map[string]bool{}
	for _, item := range in.Items {
		if !namespaces[item.Ref.Namespace] {
			namespaces[item.Ref.Namespace] = true
			if err := h.ensureNamespace(ctx, item.Ref.Namespace); err != nil {
				return err
			}
		}
	}
	errs := make([]error, len(in.Items))
	var wg sync.WaitGroup
	for i, item := range in.Items {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = h.storeValues(ctx, item)
		}()
	}
	wg.Wait()
	return firstPermanent(errs)
}

// firstPermanent is the first non-retryable error of errs, else the first error: a batch fails for good
// when one of its items cannot succeed.
func firstPermanent(errs []error) error {
	var first error
	for _, err := range errs {
		var app *temporal.ApplicationError
		if errors.As(err, &app) && app.NonRetryable() {
			return err
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// PruneValues deletes the component's stored values other than keep's (every one when keep.Hash is
// empty).
func (h *Helm) PruneValues(ctx context.Context, keep ValuesRef) error {
	sel := LabelValuesOf + "=" + keep.Component
	if keep.Hash != "" {
		sel += "," + LabelValuesHash + "!=" + keep.Hash
	}
	err := h.core.CoreV1().ConfigMaps(keep.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: sel})
	if err != nil && !apierrors.IsNotFound(err) {
		return kube.Classify("prune stored values of "+keep.Component+" in "+keep.Namespace, err)
	}
	return nil
}

// values reads stored values; missing ones, or ones that are not what ref names, are a permanent error:
// the rollout that stored them must store them again.
func (h *Helm) values(ctx context.Context, ref ValuesRef) (map[string]any, error) {
	cm, err := h.core.CoreV1().ConfigMaps(ref.Namespace).Get(ctx, ref.Name(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("stored values %s are gone", ref), ErrValuesMissing, err)
	}
	if err != nil {
		return nil, kube.Classify("read stored values "+ref.String(), err)
	}
	if cm.Labels[LabelValuesHash] != ref.Hash {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("stored values %s hold hash %q, not %q", ref, cm.Labels[LabelValuesHash], ref.Hash), ErrValuesMissing, nil)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(cm.Data[ValuesConfigMapKey]), &v); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("stored values %s: %v", ref, err), ErrValuesMissing, err)
	}
	return v, nil
}
