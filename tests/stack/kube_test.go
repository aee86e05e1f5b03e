package stack

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/stackflow/stackflow/deploy/local"
)

func TestKubeNodesReadyWithRoleLabels(t *testing.T) {
	cs, err := st.KubeClient()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	nodes := local.KwokNodes()
	require.Len(t, nodes, 5)
	roles := map[string]int{}
	for _, want := range nodes {
		n, err := cs.CoreV1().Nodes().Get(ctx, want.Name, metav1.GetOptions{})
		require.NoError(t, err, "node %s", want.Name)
		require.True(t, local.NodeReady(n), "node %s is not Ready: %+v", n.Name, n.Status.Conditions)
		require.Equal(t, n.Name, n.Labels["kubernetes.io/hostname"])
		require.Equal(t, "kwok", n.Labels["type"])
		require.Equal(t, "fake", n.Annotations["kwok.x-k8s.io/node"])
		for k, v := range want.Labels {
			require.Equal(t, v, n.Labels[k], "node %s label %s", n.Name, k)
			roles[k]++
		}
	}
	require.Equal(t, 3, roles[local.ControlPlaneNodeLabel], "control-plane nodes")
	require.Equal(t, 2, roles[local.ComputeNodeLabel], "compute nodes")
	_, err = cs.CoreV1().Nodes().Get(ctx, "runner-0", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "no fake node stands in for a real one: %v", err)

	// The role labels select exactly these nodes, as the product's schedulers will.
	cp, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: local.ControlPlaneNodeLabel + "=enabled"})
	require.NoError(t, err)
	require.Len(t, cp.Items, 3)
	comp, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: local.ComputeNodeLabel + "=enabled"})
	require.NoError(t, err)
	require.Len(t, comp.Items, 2)

	_, err = cs.CoreV1().Namespaces().Get(ctx, local.SystemNamespace, metav1.GetOptions{})
	require.NoError(t, err, "namespace %s", local.SystemNamespace)
}

func TestKubeDeploymentBecomesAvailable(t *testing.T) {
	cs, err := st.KubeClient()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	name := fmt.Sprintf("stack-test-%d", time.Now().UnixNano())
	replicas := int32(3)
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{local.ControlPlaneNodeLabel: "enabled"},
					Containers:   []corev1.Container{{Name: "app", Image: "registry.invalid/stackflow/noop:1"}},
				},
			},
		},
	}
	start := time.Now()
	_, err = cs.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		fg := metav1.DeletePropagationForeground
		err := cs.AppsV1().Deployments("default").Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &fg})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete deployment %s: %v", name, err)
		}
	})

	var last *appsv1.Deployment
	require.Eventually(t, func() bool {
		last, err = cs.AppsV1().Deployments("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil || last.Status.AvailableReplicas != 3 || last.Status.ObservedGeneration != last.Generation {
			return false
		}
		for _, c := range last.Status.Conditions {
			if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	}, 90*time.Second, 250*time.Millisecond, "deployment %s not Available: %+v", name, func() any {
		if last == nil {
			return nil
		}
		return last.Status
	}())
	t.Logf("deployment of 3 replicas Available in %s", time.Since(start).Round(10*time.Millisecond))

	// The scheduler placed the pods on the selected kwok nodes and kwok made them Running.
	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	require.NoError(t, err)
	require.Len(t, pods.Items, 3)
	for _, p := range pods.Items {
		require.Equal(t, corev1.PodRunning, p.Status.Phase, "pod %s", p.Name)
		require.True(t, strings.HasPrefix(p.Spec.NodeName, "control-"), "pod %s on node %q", p.Name, p.Spec.NodeName)
		require.NotEmpty(t, p.Status.PodIP, "pod %s", p.Name)
	}
}

func TestKubeServerVersion(t *testing.T) {
	cs, err := st.KubeClient()
	require.NoError(t, err)
	v, err := cs.Discovery().ServerVersion()
	require.NoError(t, err)
	require.Equal(t, local.Versions["KUBERNETES_VERSION"], v.GitVersion)
	require.Equal(t, "v1.34.2", v.GitVersion)
}

func TestKubectlGetNodes(t *testing.T) {
	kubectl, err := st.Kubectl()
	require.NoError(t, err)
	// The state directory's bin/kubectl is the same binary, for people to put on PATH.
	linked, err := filepath.EvalSymlinks(st.Path("bin", "kubectl"))
	require.NoError(t, err)
	require.Equal(t, kubectl, linked)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, st.Path("bin", "kubectl"), "get", "nodes", "-o", "name")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+st.Kubeconfig)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "kubectl get nodes: %s", out)
	got := strings.Fields(string(out))
	for _, n := range local.KwokNodes() {
		require.Contains(t, got, "node/"+n.Name)
	}
}

// A CRD and an object of it in one multi-document file: the CRD is Established before the object is
// applied, and applying again is a no-op that keeps the object.
func TestKubeApplyManifestsCRDThenObject(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	suffix := fmt.Sprint(time.Now().UnixNano())
	group := "stacktest.stackflow.io"
	plural := "probes" + suffix
	manifest := fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[1]s.%[2]s
spec:
  group: %[2]s
  scope: Namespaced
  names: {plural: %[1]s, singular: probe%[3]s, kind: Probe%[3]s, listKind: Probe%[3]sList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
---
apiVersion: %[2]s/v1
kind: Probe%[3]s
metadata:
  name: one
spec:
  size: 3
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: probe-%[3]s
  namespace: %[4]s
data:
  size: "3"
`, plural, group, suffix, local.SystemNamespace)
	file := filepath.Join(t.TempDir(), "probe.yaml")
	require.NoError(t, os.WriteFile(file, []byte(manifest), 0o644))

	cfg, err := st.KubeREST()
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = dyn.Resource(crdGVR).Delete(ctx, plural+"."+group, metav1.DeleteOptions{})
		cs, err := st.KubeClient()
		if err == nil {
			_ = cs.CoreV1().ConfigMaps(local.SystemNamespace).Delete(ctx, "probe-"+suffix, metav1.DeleteOptions{})
		}
	})

	for range 2 {
		require.NoError(t, st.ApplyManifests(ctx, file))
		obj, err := dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: plural}).Namespace("default").Get(ctx, "one", metav1.GetOptions{})
		require.NoError(t, err)
		size, _, _ := unstructured.NestedInt64(obj.Object, "spec", "size")
		require.EqualValues(t, 3, size)
		managers := []string{}
		for _, m := range obj.GetManagedFields() {
			managers = append(managers, m.Manager)
		}
		require.Contains(t, managers, local.FieldManager)
	}
	cs, err := st.KubeClient()
	require.NoError(t, err)
	cm, err := cs.CoreV1().ConfigMaps(local.SystemNamespace).Get(ctx, "probe-"+suffix, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "3", cm.Data["size"])
}
