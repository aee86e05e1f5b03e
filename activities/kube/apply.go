package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"go.temporal.io/sdk/temporal"

	"github.com/stackflow/stackflow/api/lifecycle"
)

// Kubernetes activities of the EDPM data plane: service CRs and inventories derived from nodes, reads of
// other objects' status, Secret presence. Methods of Kube, so they run on lifecycle.KubeQueue.

// Field managers of derived objects: the fields a node propagates are applied (and taken back when a
// person changes them); defaults are written once at creation and belong to whoever changes them next.
const (
	ApplyFieldManager    = "stackflow-edpm"
	DefaultsFieldManager = "stackflow-defaults"
)

// ApplyInput is a derived object: Owned are the top-level fields (spec, data) stackflow keeps equal to
// its source; Defaults are merged in only when the object is created.
type ApplyInput struct {
	Ref      lifecycle.ObjectRef        `json:"ref"`
	Labels   map[string]string          `json:"labels,omitempty"`
	Owned    map[string]json.RawMessage `json:"owned,omitempty"`
	Defaults map[string]json.RawMessage `json:"defaults,omitempty"`
	// SpecEnvDefaults are spec fields defaulted at creation from the worker's environment: field →
	// environment variable (DefaultImages holds the value when the variable is unset).
	SpecEnvDefaults map[string]string `json:"specEnvDefaults,omitempty"`
}

// DefaultImages are the images service CRs get when the worker's environment names none.
var DefaultImages = map[string]string{
	"STACKFLOW_NOVA_COMPUTE_IMAGE":       "quay.io/podified-antelope-centos9/openstack-nova-compute:current-podified",
	"STACKFLOW_NOVA_LIBVIRT_IMAGE":       "quay.io/podified-antelope-centos9/openstack-nova-libvirt:current-podified",
	"STACKFLOW_OVN_METADATA_AGENT_IMAGE": "quay.io/podified-antelope-centos9/openstack-neutron-metadata-agent-ovn:current-podified",
}

// ApplyObject creates the object (owned fields plus defaults) when it is missing, then server-side
// applies the owned fields with force, so changes of the source propagate and defaults stay the user's.
// It returns the object's UID.
func (k *Kube) ApplyObject(ctx context.Context, in ApplyInput) (string, error) {
	r := k.resource(in.Ref)
	owned := map[string]any{}
	for key, raw := range in.Owned {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: field %s: %v", in.Ref, key, err), ErrInvalid, err)
		}
		owned[key] = v
	}
	if _, err := r.Get(ctx, in.Ref.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		content := map[string]any{}
		for key, raw := range in.Defaults {
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: default %s: %v", in.Ref, key, err), ErrInvalid, err)
			}
			content[key] = v
		}
		if len(in.SpecEnvDefaults) > 0 {
			spec, _ := content["spec"].(map[string]any)
			if spec == nil {
				spec = map[string]any{}
			}
			for field, env := range in.SpecEnvDefaults {
				v := os.Getenv(env)
				if v == "" {
					v = DefaultImages[env]
				}
				if v != "" {
					spec[field] = v
				}
			}
			content["spec"] = spec
		}
		content = deepMerge(content, owned)
		u := &unstructured.Unstructured{Object: content}
		u.SetAPIVersion(in.Ref.APIVersion())
		u.SetKind(in.Ref.Kind)
		u.SetName(in.Ref.Name)
		u.SetNamespace(in.Ref.Namespace)
		// The watch filter is set at creation only, by the defaults' manager: the apply below does not
		// own it, so it never takes it off.
		u.SetLabels(k.labels(in.Labels))
		if _, err := r.Create(ctx, u, metav1.CreateOptions{FieldManager: DefaultsFieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", Classify("create "+in.Ref.String(), err)
		}
	} else if err != nil {
		return "", Classify("get "+in.Ref.String(), err)
	}
	obj := map[string]any{
		"apiVersion": in.Ref.APIVersion(),
		"kind":       in.Ref.Kind,
		"metadata":   map[string]any{"name": in.Ref.Name, "namespace": in.Ref.Namespace, "labels": in.Labels},
	}
	for key, v := range owned {
		obj[key] = v
	}
	body, _ := json.Marshal(obj)
	force := true
	out, err := r.Patch(ctx, in.Ref.Name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: ApplyFieldManager, Force: &force})
	if err != nil {
		return "", Classify("apply "+in.Ref.String(), err)
	}
	return string(out.GetUID()), nil
}

// deepMerge merges over into base (objects recursively, anything else replaced) and returns base.
func deepMerge(base, over map[string]any) map[string]any {
	for k, v := range over {
		bm, bok := base[k].(map[string]any)
		om, ook := v.(map[string]any)
		if bok && ook {
			base[k] = deepMerge(bm, om)
			continue
		}
		base[k] = v
	}
	return base
}

// ObjectStatus is what a workflow learns of another object's progress.
type ObjectStatus struct {
	Exists             bool               `json:"exists"`
	UID                string             `json:"uid,omitempty"`
	Generation         int64              `json:"generation,omitempty"`
	Deleting           bool               `json:"deleting,omitempty"`
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	Phase              string             `json:"phase,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
	// Fields are the status fields named in the request.
	Fields map[string]json.RawMessage `json:"fields,omitempty"`
}

// Ready is true when the object acted on its newest generation and says Ready=True.
func (st *ObjectStatus) Ready() bool {
	if st == nil || !st.Exists || st.ObservedGeneration < st.Generation {
		return false
	}
	for _, c := range st.Conditions {
		if c.Type == lifecycle.ConditionReady {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// StatusInput names an object (any UID when Ref.UID is empty) and extra status fields to return.
type StatusInput struct {
	Ref    lifecycle.ObjectRef `json:"ref"`
	Fields []string            `json:"fields,omitempty"`
}

// GetObjectStatus reads another object's status.
func (k *Kube) GetObjectStatus(ctx context.Context, in StatusInput) (*ObjectStatus, error) {
	u, err := k.resource(in.Ref).Get(ctx, in.Ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return &ObjectStatus{}, nil
	}
	if err != nil {
		return nil, Classify("get "+in.Ref.String(), err)
	}
	if in.Ref.UID != "" && string(u.GetUID()) != in.Ref.UID {
		return &ObjectStatus{}, nil
	}
	return statusOf(u, StatusFilter{Fields: in.Fields}), nil
}

// StatusFilter is what of an object's status a list returns: the common fields, the extra Fields named,
// and the conditions of the types in Conditions (all when empty).
type StatusFilter struct {
	Fields     []string `json:"fields,omitempty"`
	Conditions []string `json:"conditions,omitempty"`
}

// statusOf is what a status read returns of u.
func statusOf(u *unstructured.Unstructured, f StatusFilter) *ObjectStatus {
	st := &ObjectStatus{Exists: true, UID: string(u.GetUID()), Generation: u.GetGeneration(), Deleting: u.GetDeletionTimestamp() != nil}
	status, _, _ := unstructured.NestedMap(u.Object, "status")
	if og, ok := status["observedGeneration"]; ok {
		switch v := og.(type) {
		case int64:
			st.ObservedGeneration = v
		case float64:
			st.ObservedGeneration = int64(v)
		}
	}
	st.Phase, _ = status["phase"].(string)
	if raw, ok := status["conditions"]; ok {
		b, _ := json.Marshal(raw)
		_ = json.Unmarshal(b, &st.Conditions)
		if len(f.Conditions) > 0 {
			st.Conditions = slices.DeleteFunc(st.Conditions, func(c metav1.Condition) bool { return !slices.Contains(f.Conditions, c.Type) })
		}
	}
	for _, name := range f.Fields {
		if v, ok := status[name]; ok {
			if st.Fields == nil {
				st.Fields = map[string]json.RawMessage{}
			}
			st.Fields[name], _ = json.Marshal(v)
		}
	}
	return st
}

// SecretCheck names a Secret and the keys a workflow needs in it.
type SecretCheck struct {
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Keys      []string `json:"keys,omitempty"`
}

// SecretPresence says whether a Secret exists and which of the wanted keys it lacks; never a value.
type SecretPresence struct {
	Exists  bool     `json:"exists"`
	Missing []string `json:"missing,omitempty"`
}

// Ready is true when the Secret exists with every wanted key.
func (p SecretPresence) Ready() bool { return p.Exists && len(p.Missing) == 0 }

// CheckSecret reports whether a Secret exists and has the wanted keys.
func (k *Kube) CheckSecret(ctx context.Context, in SecretCheck) (*SecretPresence, error) {
	sec, err := k.Core.CoreV1().Secrets(in.Namespace).Get(ctx, in.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return &SecretPresence{Missing: in.Keys}, nil
	}
	if err != nil {
		return nil, Classify("get Secret "+in.Namespace+"/"+in.Name, err)
	}
	p := &SecretPresence{Exists: true}
	for _, key := range in.Keys {
		if len(sec.Data[key]) == 0 {
			p.Missing = append(p.Missing, key)
		}
	}
	return p, nil
}
