package activities

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestTransportURL(t *testing.T) {
	for _, tc := range []struct {
		name, user, pw, host, port, vhost, want string
	}{
		{"plain", "nova-cell1", "abc123", "198.51.100.1", "5672", "nova-cell1", "rabbit://nova-cell1:abc123@198.51.100.1:5672/nova-cell1"},
		{"slash in vhost stays one path segment", "u", "p", "127.0.0.1", "5672", "a/b", "rabbit://u:p@127.0.0.1:5672/a%2Fb"},
		{"password is escaped", "u", "p@ss:/", "::1", "5672", "v", "rabbit://u:p%40ss%3A%2F@[::1]:5672/v"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, TransportURL(tc.user, tc.pw, tc.host, tc.port, tc.vhost))
		})
	}
}

func TestDatabaseNames(t *testing.T) {
	for _, tc := range []struct {
		db, user string
		ok       bool
	}{
		{"nova_cell1", "nova_cell1", true},
		{"nova_api", "n1a2_api", true},
		{"nova-api", "nova", false},
		{"nova_api", "x'; DROP USER root; --", false},
		{"", "nova", false},
	} {
		err := DatabaseInput{Database: tc.db, User: tc.user}.validate()
		require.Equal(t, tc.ok, err == nil, "%s/%s: %v", tc.db, tc.user, err)
	}
}

// A password is generated once, stored with its owner before use, and read back afterwards; keys of an
// existing Secret are kept.
func TestEnsureSecretKeyGeneratesOnce(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewSimpleClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "given", Namespace: "ns"}, Data: map[string][]byte{"other": []byte("x")}})
	owner := &Owner{APIVersion: "nova.openstack.org/v1beta1", Kind: "Nova", Name: "nova", UID: "u1"}
	ref := SecretKeyRef{Namespace: "ns", Name: "nova-secret", Key: "NovaAPIDatabasePassword"}
	first, err := ensureSecretKey(ctx, cs, ref, owner, GeneratePassword)
	require.NoError(t, err)
	require.Len(t, first, 24)
	again, err := ensureSecretKey(ctx, cs, ref, owner, GeneratePassword)
	require.NoError(t, err)
	require.Equal(t, first, again)
	sec, err := cs.CoreV1().Secrets("ns").Get(ctx, "nova-secret", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "Nova", sec.OwnerReferences[0].Kind)

	v, err := ensureSecretKey(ctx, cs, SecretKeyRef{Namespace: "ns", Name: "given", Key: "pw"}, nil, func() (string, error) { return "generated", nil })
	require.NoError(t, err)
	require.Equal(t, "generated", v)
	sec, err = cs.CoreV1().Secrets("ns").Get(ctx, "given", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "x", string(sec.Data["other"]))

	_, err = readSecretKey(ctx, cs, SecretKeyRef{Namespace: "ns", Name: "absent", Key: "k"})
	require.ErrorContains(t, err, "Secret ns/absent not found")
}
