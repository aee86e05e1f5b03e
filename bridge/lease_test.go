package bridge

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// The Lease's namespace is created when missing; an account without rights on namespaces (the chart's)
// assumes the installer made it, without a warning in every start-up's log.
func TestEnsureLeaseNamespace(t *testing.T) {
	for _, tc := range []struct {
		name      string
		existing  bool
		forbidden bool
		failing   bool
		created   bool
		warned    bool
	}{
		{name: "missing: created", created: true},
		{name: "present: left alone", existing: true},
		{name: "no right to read namespaces: no warning", forbidden: true},
		{name: "API server error: warned", failing: true, warned: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			if tc.existing {
				objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sf"}})
			}
			cs := fake.NewClientset(objs...)
			if tc.forbidden {
				cs.PrependReactor("*", "namespaces", func(a k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(corev1.Resource("namespaces"), "sf", nil)
				})
			}
			if tc.failing {
				cs.PrependReactor("get", "namespaces", func(a k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewInternalError(context.DeadlineExceeded)
				})
			}
			var logs bytes.Buffer
			b := &Bridge{cfg: Config{LeaseNamespace: "sf"}, core: cs, log: slog.New(slog.NewTextHandler(&logs, nil))}
			b.ensureLeaseNamespace(context.Background())
			created := false
			for _, a := range cs.Actions() {
				created = created || a.GetVerb() == "create"
			}
			require.Equal(t, tc.created, created)
			require.Equal(t, tc.warned, bytes.Contains(logs.Bytes(), []byte("level=WARN")), logs.String())
		})
	}
}
