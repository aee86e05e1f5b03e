package kube

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// A password is generated once, stored with its owner before use, and read back afterwards; keys of an
// existing Secret are kept.
func TestEnsureSecretKeyGeneratesOnce(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewSimpleClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "given", Namespace: "ns"}, Data: map[string][]byte{"other": []byte("x")}})
	owner := &Owner{APIVersion: "nova.openstack.org/v1beta1", Kind: "Nova", Name: "nova", UID: "u1"}
	ref := SecretKeyRef{Namespace: "ns", Name: "nova-secret", Key: "NovaAPIDatabasePassword"}
	first, err := EnsureSecretKey(ctx, cs, ref, owner, GeneratePassword)
	require.NoError(t, err)
	require.Len(t, first, 24)
	again, err := EnsureSecretKey(ctx, cs, ref, owner, GeneratePassword)
	require.NoError(t, err)
	require.Equal(t, first, again)
	sec, err := cs.CoreV1().Secrets("ns").Get(ctx, "nova-secret", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "Nova", sec.OwnerReferences[0].Kind)

	v, err := EnsureSecretKey(ctx, cs, SecretKeyRef{Namespace: "ns", Name: "given", Key: "pw"}, nil, func() (string, error) { return "generated", nil })
	require.NoError(t, err)
	require.Equal(t, "generated", v)
	sec, err = cs.CoreV1().Secrets("ns").Get(ctx, "given", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "x", string(sec.Data["other"]))

	_, err = ReadSecretKey(ctx, cs, SecretKeyRef{Namespace: "ns", Name: "absent", Key: "k"})
	require.ErrorContains(t, err, "Secret ns/absent not found")
}
