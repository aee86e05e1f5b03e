package local

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// pendingSecret is a Secret a component wants in the cluster once Kubernetes is up; components that start
// in parallel with Kubernetes queue theirs here.
type pendingSecret struct {
	namespace, name string
	data            map[string][]byte
}

var pendingMu sync.Mutex

// QueueSecret asks for a Secret to be created or updated after Kubernetes is up.
func (s *Stack) QueueSecret(namespace, name string, data map[string][]byte) {
	pendingMu.Lock()
	defer pendingMu.Unlock()
	s.pending = append(s.pending, pendingSecret{namespace, name, data})
}

func (s *Stack) publishSecrets(ctx context.Context) error {
	pendingMu.Lock()
	pending := s.pending
	s.pending = nil
	pendingMu.Unlock()
	for _, p := range pending {
		if err := s.ApplySecret(ctx, p.namespace, p.name, p.data); err != nil {
			return err
		}
	}
	return nil
}

// KubeClient returns a clientset for the local API server with the admin kubeconfig.
func (s *Stack) KubeClient() (kubernetes.Interface, error) {
	if s.Kubeconfig == "" {
		return nil, fmt.Errorf("kubernetes is not part of this stack")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", s.Kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	return kubernetes.NewForConfig(cfg)
}

// ApplySecret creates or replaces the data of an Opaque Secret, creating its namespace if needed.
func (s *Stack) ApplySecret(ctx context.Context, namespace, name string, data map[string][]byte) error {
	cs, err := s.KubeClient()
	if err != nil {
		return err
	}
	if err := ensureNamespace(ctx, cs, namespace); err != nil {
		return err
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"app.kubernetes.io/managed-by": "stackflow-local"}},
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
	cur, err := cs.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = cs.CoreV1().Secrets(namespace).Create(ctx, sec, metav1.CreateOptions{})
	case err == nil:
		cur.Data = data
		_, err = cs.CoreV1().Secrets(namespace).Update(ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("apply secret %s/%s: %w", namespace, name, err)
	}
	return nil
}

func ensureNamespace(ctx context.Context, cs kubernetes.Interface, name string) error {
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}
