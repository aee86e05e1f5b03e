package helm

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestBoundDiffCutsAtALineAndSaysSo(t *testing.T) {
	small := "-a\n+b\n"
	got, cut := boundDiff(small, 100)
	require.False(t, cut)
	require.Equal(t, small, got)

	big := strings.Repeat("+0123456789\n", 100) // 1200 bytes
	got, cut = boundDiff(big, 500)
	require.True(t, cut)
	require.LessOrEqual(t, len(got), 500+len("... (diff truncated)\n"))
	require.True(t, strings.HasSuffix(got, "+0123456789\n... (diff truncated)\n"), "cut at a line boundary: %q", got[len(got)-40:])
}

func TestValuesRefNamesItsConfigMapByComponentAndHash(t *testing.T) {
	r := ValuesRef{Namespace: "openstack", Component: "nova", Hash: "AB12cd"}
	require.Equal(t, "stackflow-values-nova-ab12cd", r.Name())
	require.Equal(t, "openstack/stackflow-values-nova-ab12cd", r.String())
}

func TestStoreAllValuesStoresEveryItemOnceAndAgainIsANoOp(t *testing.T) {
	cs := fake.NewSimpleClientset()
	h := &Helm{core: cs}
	var items []StoreValuesInput
	for _, c := range []string{"mariadb", "keystone", "nova"} {
		items = append(items, StoreValuesInput{Ref: ValuesRef{Namespace: "openstack", Component: c, Hash: "h-" + c}, Values: map[string]any{"component": c}})
	}
	ctx := context.Background()
	require.NoError(t, h.StoreAllValues(ctx, StoreAllValuesInput{Items: items}))
	// Idempotent: a retried attempt finds everything stored.
	require.NoError(t, h.StoreAllValues(ctx, StoreAllValuesInput{Items: items}))

	_, err := cs.CoreV1().Namespaces().Get(ctx, "openstack", metav1.GetOptions{})
	require.NoError(t, err, "the release namespace is created")
	for _, it := range items {
		cm, err := cs.CoreV1().ConfigMaps("openstack").Get(ctx, it.Ref.Name(), metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, it.Ref.Component, cm.Labels[LabelValuesOf])
		require.Equal(t, it.Ref.Hash, cm.Labels[LabelValuesHash])
		v, err := h.values(ctx, it.Ref)
		require.NoError(t, err)
		require.Equal(t, it.Ref.Component, v["component"])
	}
}

func TestStoreAllValuesFailsForGoodOnValuesThatCannotBeStored(t *testing.T) {
	h := &Helm{core: fake.NewSimpleClientset()}
	err := h.StoreAllValues(context.Background(), StoreAllValuesInput{Items: []StoreValuesInput{
		{Ref: ValuesRef{Namespace: "openstack", Component: "keystone", Hash: "a"}, Values: map[string]any{"ok": true}},
		{Ref: ValuesRef{Namespace: "openstack", Component: "nova", Hash: "b"}, Values: map[string]any{"bad": func() {}}},
	}})
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	require.True(t, app.NonRetryable(), "%v", err)
	require.Contains(t, app.Message(), "nova")
}
