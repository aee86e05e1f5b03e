package activities

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
