package rollout

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// keepOnFailure keeps a failed test's namespaces and objects for inspection (STACKFLOW_KEEP=1).
func keepOnFailure() bool { return os.Getenv("STACKFLOW_KEEP") != "" }

// releaseNamespace creates a namespace of the test's own for its releases and deletes it at the end.
func releaseNamespace(t *testing.T, suffix string) string {
	t.Helper()
	name := env.Run + "-" + suffix
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{"stackflow.io/test-run": env.Run}}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		if t.Failed() && keepOnFailure() {
			t.Logf("keeping namespace %s for inspection", name)
			return
		}
		_ = env.Kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// restClientGetter gives the test's own Helm configuration the stack's kubeconfig and a namespace.
type restClientGetter struct{ ns string }

func (g *restClientGetter) flags() *genericclioptions.ConfigFlags {
	f := genericclioptions.NewConfigFlags(false)
	f.KubeConfig = &env.Stack.Kubeconfig
	f.Namespace = &g.ns
	return f
}

func (g *restClientGetter) ToRESTConfig() (*rest.Config, error) { return g.flags().ToRESTConfig() }
func (g *restClientGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	return g.flags().ToDiscoveryClient()
}
func (g *restClientGetter) ToRESTMapper() (meta.RESTMapper, error) { return g.flags().ToRESTMapper() }
func (g *restClientGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	return g.flags().ToRawKubeConfigLoader()
}
