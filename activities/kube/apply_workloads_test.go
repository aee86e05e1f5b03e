package kube

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// The Nova control plane's workload activities against client-go's fake clientset: what exists decides
// between create, update, nothing and refusal.

func requirePermanent(t *testing.T, err error, errType string) {
	t.Helper()
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app) && app.NonRetryable(), "permanent: %v", err)
	require.Equal(t, errType, app.Type(), "%v", err)
}

// writes counts the create and update calls the clientset saw.
func writes(cs *fake.Clientset) (creates, updates int) {
	for _, a := range cs.Actions() {
		switch a.GetVerb() {
		case "create":
			creates++
		case "update":
			updates++
		}
	}
	return
}

func TestApplyConfigMap(t *testing.T) {
	in := ConfigMapInput{Namespace: "openstack", Name: "nova-config-data", Data: map[string]string{"nova.conf": "[DEFAULT]\n"},
		Labels: map[string]string{"app": "nova"}, Owner: &Owner{APIVersion: "nova.openstack.org/v1beta1", Kind: "NovaAPI", Name: "nova-api", UID: "u-1"}}
	cm := func(data map[string]string, labels map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "nova-config-data", Labels: labels}, Data: data}
	}
	for _, tc := range []struct {
		name             string
		existing         []runtime.Object
		creates, updates int
		errType          string
		labels           map[string]string
	}{
		{"created, owned", nil, 1, 0, "", map[string]string{"app": "nova"}},
		{"the same: nothing written", []runtime.Object{cm(in.Data, map[string]string{"app": "nova", "extra": "kept"})}, 0, 0, "", map[string]string{"app": "nova", "extra": "kept"}},
		{"other data: replaced, labels merged", []runtime.Object{cm(map[string]string{"nova.conf": "old"}, map[string]string{"extra": "kept"})}, 0, 1, "",
			map[string]string{"app": "nova", "extra": "kept"}},
		{"another tool's: refused", []runtime.Object{cm(nil, map[string]string{ManagedByLabel: "Helm"})}, 0, 0, ErrManagedByOther, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(tc.existing...)
			k := &Kube{Core: cs}
			err := k.ApplyConfigMap(context.Background(), in)
			if tc.errType != "" {
				requirePermanent(t, err, tc.errType)
				return
			}
			require.NoError(t, err)
			c, u := writes(cs)
			require.Equal(t, []int{tc.creates, tc.updates}, []int{c, u}, "creates, updates")
			got, err := cs.CoreV1().ConfigMaps("openstack").Get(context.Background(), "nova-config-data", metav1.GetOptions{})
			require.NoError(t, err)
			require.Equal(t, in.Data, got.Data)
			require.Equal(t, tc.labels, got.Labels)
			if tc.creates == 1 {
				require.Len(t, got.OwnerReferences, 1)
				require.Equal(t, types.UID("u-1"), got.OwnerReferences[0].UID)
			}
		})
	}
}

func TestApplyDeployment(t *testing.T) {
	replicas := func(n int32) *int32 { return &n }
	dep := func(n int32, labels map[string]string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "nova-api", Labels: labels},
			Spec: appsv1.DeploymentSpec{Replicas: replicas(n)}}
	}
	t.Run("created, then its spec replaced", func(t *testing.T) {
		cs := fake.NewClientset()
		k := &Kube{Core: cs}
		require.NoError(t, k.ApplyDeployment(context.Background(), DeploymentInput{Deployment: dep(1, map[string]string{"app": "nova"})}))
		require.NoError(t, k.ApplyDeployment(context.Background(), DeploymentInput{Deployment: dep(3, map[string]string{"app": "nova"})}))
		got, err := cs.AppsV1().Deployments("openstack").Get(context.Background(), "nova-api", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, int32(3), *got.Spec.Replicas)
	})
	t.Run("another tool's: refused", func(t *testing.T) {
		k := &Kube{Core: fake.NewClientset(dep(1, map[string]string{ManagedByLabel: "Helm"}))}
		requirePermanent(t, k.ApplyDeployment(context.Background(), DeploymentInput{Deployment: dep(3, nil)}), ErrManagedByOther)
	})
	t.Run("the API server refuses the spec: permanent", func(t *testing.T) {
		cs := fake.NewClientset()
		cs.PrependReactor("create", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewBadRequest("Deployment.apps \"nova-api\" is invalid: spec.template.spec.containers: Required value")
		})
		err := (&Kube{Core: cs}).ApplyDeployment(context.Background(), DeploymentInput{Deployment: dep(1, nil)})
		var app *temporal.ApplicationError
		require.True(t, errors.As(err, &app) && app.NonRetryable(), "permanent: %v", err)
	})
}

func TestApplyService(t *testing.T) {
	svc := func(ip string, port int32) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "nova-api"},
			Spec: corev1.ServiceSpec{ClusterIP: ip, Ports: []corev1.ServicePort{{Name: "api", Port: port}}, Selector: map[string]string{"app": "nova"}}}
	}
	t.Run("updated, keeping the address the API server gave it", func(t *testing.T) {
		cs := fake.NewClientset(svc("10.96.0.20", 8774))
		want := svc("", 8775)
		got, err := (&Kube{Core: cs}).ApplyService(context.Background(), ServiceInput{Service: want})
		require.NoError(t, err)
		require.Equal(t, "10.96.0.20", got.ClusterIP)
		cur, err := cs.CoreV1().Services("openstack").Get(context.Background(), "nova-api", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, int32(8775), cur.Spec.Ports[0].Port)
	})
	t.Run("headless: refused, services need a stable address", func(t *testing.T) {
		_, err := (&Kube{Core: fake.NewClientset()}).ApplyService(context.Background(), ServiceInput{Service: svc(corev1.ClusterIPNone, 8774)})
		requirePermanent(t, err, ErrInvalid)
	})
}

func TestHashSecrets(t *testing.T) {
	sec := func(uid, pw string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "nova-db", UID: types.UID(uid)},
			Data: map[string][]byte{"password": []byte(pw), "other": []byte("x")}}
	}
	in := SecretHashesInput{Namespace: "openstack", Keys: map[string][]string{"nova-db": {"password"}, "nova-mq": {"transport_url"}}}
	hash := func(s *corev1.Secret) *SecretHashes {
		got, err := (&Kube{Core: fake.NewClientset(s)}).HashSecrets(context.Background(), in)
		require.NoError(t, err)
		return got
	}
	a := hash(sec("u-1", "one"))
	require.Equal(t, []string{"nova-mq"}, a.Missing, "a Secret that does not exist is named")
	require.NotContains(t, a.Hashes["nova-db"], "one", "a fingerprint, never the value")
	require.Equal(t, a.Hashes, hash(sec("u-1", "one")).Hashes, "the same data, the same fingerprint")
	require.NotEqual(t, a.Hashes["nova-db"], hash(sec("u-1", "two")).Hashes["nova-db"], "the key read changed")
	other := sec("u-1", "one")
	other.Data["other"] = []byte("y")
	require.Equal(t, a.Hashes["nova-db"], hash(other).Hashes["nova-db"], "a key the reader does not name does not roll it")
	require.NotEqual(t, a.Hashes["nova-db"], hash(sec("u-2", "one")).Hashes["nova-db"], "salted by the Secret's UID")
	empty := sec("u-1", "")
	require.Contains(t, hash(empty).Missing, "nova-db[password]", "an empty key is missing")
}

func TestCopySecretKeys(t *testing.T) {
	from := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "nova-cell1-mq"}, Data: map[string][]byte{"transport_url": []byte("rabbit://u:p@h:5672/v")}}
	cs := fake.NewClientset(from)
	k := &Kube{Core: cs}
	in := CopySecretKeysInput{From: SecretKeyRef{Namespace: "openstack", Name: "nova-cell1-mq"}, To: SecretKeyRef{Namespace: "openstack", Name: "nova-compute-config"},
		Keys: map[string]string{"transport_url": "transport_url", "notify_url": "notifications_url"}, Optional: []string{"notify_url"}}
	require.NoError(t, k.CopySecretKeys(context.Background(), in), "an optional key missing at the source is skipped")
	v, err := ReadSecretKey(context.Background(), cs, SecretKeyRef{Namespace: "openstack", Name: "nova-compute-config", Key: "transport_url"})
	require.NoError(t, err)
	require.Equal(t, "rabbit://u:p@h:5672/v", v)
	in.Optional = nil
	requirePermanent(t, k.CopySecretKeys(context.Background(), in), ErrSecretMissing)
}

func TestWaitDeployment(t *testing.T) {
	one := int32(1)
	dep := func(status appsv1.DeploymentStatus, generation int64) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "nova-api", Generation: generation},
			Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nova"}}}, Status: status}
	}
	ready := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "nova-api-1", Labels: map[string]string{"app": "nova"}},
		Status: corev1.PodStatus{PodIP: "10.0.0.7", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	t.Run("rolled out, with its pods' addresses", func(t *testing.T) {
		k := &Kube{Core: fake.NewClientset(dep(appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}, 2), ready)}
		st, err := k.WaitDeployment(context.Background(), "openstack", "nova-api")
		require.NoError(t, err)
		require.Equal(t, []string{"10.0.0.7"}, st.PodIPs)
	})
	t.Run("the controller has not seen the new spec: retried", func(t *testing.T) {
		k := &Kube{Core: fake.NewClientset(dep(appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}, 2))}
		_, err := k.WaitDeployment(context.Background(), "openstack", "nova-api")
		var app *temporal.ApplicationError
		require.True(t, errors.As(err, &app) && !app.NonRetryable(), "retryable: %v", err)
		require.Equal(t, ErrNotRolledOut, app.Type())
	})
	t.Run("not there (yet): retried", func(t *testing.T) {
		_, err := (&Kube{Core: fake.NewClientset()}).WaitDeployment(context.Background(), "openstack", "nova-api")
		var app *temporal.ApplicationError
		require.Error(t, err)
		require.False(t, errors.As(err, &app) && app.NonRetryable(), "retryable: %v", err)
	})
}
