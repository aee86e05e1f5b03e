package kube

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A read goes into workflow history: kubectl's second copy of the spec and the managed fields stay out.
func TestObjectOfLeavesOutLastAppliedAndManagedFields(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{
			"name":       "n1",
			"generation": int64(3),
			"labels":     map[string]any{"a": "b"},
			"annotations": map[string]any{
				LastAppliedAnnotation:     `{"spec":{"big":"copy"}}`,
				"nova.openstack.org/cell": "cell1",
			},
			"managedFields": []any{map[string]any{"manager": "kubectl"}},
		},
		"spec":   map[string]any{"hostName": "edpm-compute-0"},
		"status": map[string]any{"phase": "Ready"},
	}}
	obj, err := objectOf(u)
	require.NoError(t, err)
	require.Equal(t, Object{Exists: true, Generation: 3, Labels: map[string]string{"a": "b"},
		Annotations: map[string]string{"nova.openstack.org/cell": "cell1"}, Spec: []byte(`{"hostName":"edpm-compute-0"}`)}, obj)
	// The object's own annotations are left as they were.
	require.Contains(t, u.GetAnnotations(), LastAppliedAnnotation)

	only := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "n2",
		"annotations": map[string]any{LastAppliedAnnotation: "{}"}}}}
	obj, err = objectOf(only)
	require.NoError(t, err)
	require.Nil(t, obj.Annotations)
}

func TestManagedByOther(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   string
	}{
		{"no labels: a person's", nil, ""},
		{"stackflow's", map[string]string{ManagedByLabel: "stackflow"}, ""},
		{"a Helm release's", map[string]string{ManagedByLabel: "Helm", "app.kubernetes.io/instance": "nova"}, "Helm"},
		{"an operator's", map[string]string{ManagedByLabel: "nova-operator"}, "nova-operator"},
		{"other labels only", map[string]string{"app": "nova-api"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, ManagedByOther(tc.labels))
		})
	}
}

func TestClassifyKeepsTheActivitysVerdict(t *testing.T) {
	gr := schema.GroupResource{Group: "apps", Resource: "deployments"}
	for _, tc := range []struct {
		name      string
		err       error
		permanent bool
		typ       string
	}{
		{"an activity's own permanent error", errManagedByOther("Deployment ns/x", "Helm"), true, ErrManagedByOther},
		{"an activity's own retryable error", temporal.NewApplicationError("still running", ErrStillPresent), false, ErrStillPresent},
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "x", nil), true, ErrInvalid},
		{"forbidden", apierrors.NewForbidden(gr, "x", errors.New("no")), true, ErrForbidden},
		{"conflict", apierrors.NewConflict(gr, "x", errors.New("changed")), false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Classify("apply x", tc.err)
			var app *temporal.ApplicationError
			isApp := errors.As(err, &app)
			require.Equal(t, tc.permanent, isApp && app.NonRetryable(), "%v", err)
			if tc.typ != "" {
				require.True(t, isApp, "%v", err)
				require.Equal(t, tc.typ, app.Type())
			}
		})
	}
}

// A list with statuses returns of each what the filter names: the common fields, the named extra fields
// and only the named condition types (a 500-node list must stay a small payload).
func TestStatusOfKeepsWhatTheFilterNames(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "n1", "uid": "u1", "generation": int64(2)},
		"status": map[string]any{
			"observedGeneration": int64(2), "phase": "Paused", "deployed": true, "phases": []any{"long"},
			"conditions": []any{
				map[string]any{"type": "Ready", "status": "False", "reason": "Paused", "message": "held", "lastTransitionTime": "2026-12-01T10:00:00Z"},
				map[string]any{"type": "Paused", "status": "True", "reason": "Paused", "message": "paused", "lastTransitionTime": "2026-12-01T10:00:00Z"},
				map[string]any{"type": "InfrastructureReady", "status": "True", "reason": "Reconciled", "message": "long", "lastTransitionTime": "2026-12-01T10:00:00Z"},
			},
		},
	}}
	for _, tc := range []struct {
		name   string
		filter StatusFilter
		conds  []string
		fields []string
	}{
		{name: "everything", conds: []string{"Ready", "Paused", "InfrastructureReady"}},
		{name: "named", filter: StatusFilter{Fields: []string{"deployed", "absent"}, Conditions: []string{"Ready", "Paused"}},
			conds: []string{"Ready", "Paused"}, fields: []string{"deployed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := statusOf(u, tc.filter)
			require.True(t, st.Exists)
			require.Equal(t, "u1", st.UID)
			require.EqualValues(t, 2, st.ObservedGeneration)
			require.Equal(t, "Paused", st.Phase)
			var conds []string
			for _, c := range st.Conditions {
				conds = append(conds, c.Type)
			}
			require.Equal(t, tc.conds, conds)
			var fields []string
			for f := range st.Fields {
				fields = append(fields, f)
			}
			require.ElementsMatch(t, tc.fields, fields)
		})
	}
}
