package stack

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/stackflow/stackflow/deploy/local"
)

// TestRealNodeRunsContainers runs a pod of this checkout's worker image (make images; Up imports it) on
// the real node: a container under containerd and runc, as user 65532 on a read-only root with a memory
// limit, Ready by its readiness probe, restarted by the kubelet once its liveness probe fails, with
// `kubectl logs` and `kubectl exec` going through the API server to the kubelet, and a pod address on the
// CNI bridge that reaches a test host.
func TestRealNodeRunsContainers(t *testing.T) {
	cs, err := st.KubeClient()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	node, err := cs.CoreV1().Nodes().Get(ctx, local.RealNode, metav1.GetOptions{})
	require.NoError(t, err)
	require.True(t, local.NodeReady(node), "node %s: %+v", node.Name, node.Status.Conditions)
	require.True(t, strings.HasPrefix(node.Status.NodeInfo.ContainerRuntimeVersion, "containerd://"), node.Status.NodeInfo.ContainerRuntimeVersion)
	require.Contains(t, node.Spec.Taints, local.RealNodeTaint, "only pods that ask for the real node land there")
	require.Contains(t, node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: local.HostGateway})
	require.FileExists(t, filepath.Join(st.CheckoutImages(), "stackflow-worker", "index.json"), "make images builds the worker image (make e2e does)")

	ns := fmt.Sprintf("node-%d", time.Now().UnixNano()%1e6)
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })

	user, grace, no, yes := int64(65532), int64(1), false, true
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(8080)}},
			PeriodSeconds: 1, FailureThreshold: 1, TimeoutSeconds: 2}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			// python as PID 1 has no SIGTERM handler: a short grace period keeps the deletion quick.
			TerminationGracePeriodSeconds: &grace,
			NodeSelector:                  map[string]string{local.RealNodeLabel: "true"},
			Tolerations:                   []corev1.Toleration{{Key: local.RealNodeTaint.Key, Operator: corev1.TolerationOpEqual, Value: local.RealNodeTaint.Value, Effect: local.RealNodeTaint.Effect}},
			Containers: []corev1.Container{{
				Name: "web", Image: local.ImageRef("stackflow-worker"), ImagePullPolicy: corev1.PullNever,
				// The liveness probe asks for /tmp/alive, which each start of the container writes again. The
				// image has python3 and a shell, not coreutils: every command here is python.
				Command: []string{"python3", "-u", "-c", "open('/tmp/alive', 'w').close(); import runpy, sys; " +
					"sys.argv = ['http.server', '8080', '--directory', '/tmp']; runpy.run_module('http.server', run_name='__main__')"},
				SecurityContext: &corev1.SecurityContext{RunAsUser: &user, RunAsNonRoot: &yes,
					ReadOnlyRootFilesystem: &yes, AllowPrivilegeEscalation: &no},
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
					corev1.ResourceMemory: resource.MustParse("96Mi"), corev1.ResourceCPU: resource.MustParse("500m")}},
				// Liveness counts only once the start-up probe passed: a first liveness probe before the server
				// listens would otherwise restart the container at once.
				StartupProbe:   &corev1.Probe{ProbeHandler: probe("/").ProbeHandler, PeriodSeconds: 1, FailureThreshold: 30},
				ReadinessProbe: probe("/"),
				LivenessProbe:  probe("/alive"),
				VolumeMounts:   []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}},
			}},
			Volumes: []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	_, err = cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)

	ready := func(restarts int32) *corev1.Pod {
		var got *corev1.Pod
		require.NoError(t, waitPod(ctx, cs, ns, "web", func(p *corev1.Pod) bool {
			got = p
			return podReady(p) && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount == restarts
		}), "pod web Ready with %d restart(s): %s", restarts, podSummary(got))
		return got
	}
	t0 := time.Now()
	p := ready(0)
	t.Logf("pod Ready %s after create", time.Since(t0).Round(100*time.Millisecond))
	require.Equal(t, local.RealNode, p.Spec.NodeName)
	_, podNet, _ := net.ParseCIDR(local.RealNodePodCIDR)
	require.True(t, podNet.Contains(net.ParseIP(p.Status.PodIP)), "pod IP %s in the node's pod network %s", p.Status.PodIP, local.RealNodePodCIDR)

	kubectl, err := st.Kubectl()
	require.NoError(t, err)
	run := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", st.Kubeconfig, "-n", ns}, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	py := func(code string) (string, error) { return run("exec", "web", "--", "python3", "-c", code) }
	out, err := py("import os; print(os.getuid())")
	require.NoError(t, err, out)
	require.Equal(t, "65532", out)
	out, err = py("open('/usr/x', 'w')")
	require.Error(t, err, "the root filesystem is read-only")
	require.Contains(t, out, "Read-only file system")
	out, err = py("print(open('/sys/fs/cgroup/memory/memory.limit_in_bytes').read().strip())")
	require.NoError(t, err, out)
	require.Equal(t, fmt.Sprint(96<<20), out, "the container's memory limit is its cgroup's")
	// The pod reaches a test host's sshd through the bridge and this machine's routes.
	h := st.TestHosts[0]
	out, err = py(fmt.Sprintf("import socket; s=socket.create_connection(('%s', 22), 5); print(s.recv(64).decode().strip())", h.Address))
	require.NoError(t, err, out)
	require.True(t, strings.HasPrefix(out, "SSH-2.0-"), "banner of %s from the pod: %q", h.Name, out)
	// A Service's ClusterIP reaches the pod (kube-proxy) from this machine, from a test host (routed
	// through this machine) and from the pod itself (hairpin, masqueraded).
	svc, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, svcNet, _ := net.ParseCIDR(local.ServiceClusterIPRange)
	require.True(t, svcNet.Contains(net.ParseIP(svc.Spec.ClusterIP)), "ClusterIP %s in %s", svc.Spec.ClusterIP, local.ServiceClusterIPRange)
	url := "http://" + svc.Spec.ClusterIP + "/alive"
	// Only once kube-proxy wrote the Service's rule: before, the address is routed like any other, off
	// this machine.
	require.Eventually(t, func() bool {
		rules, err := exec.CommandContext(ctx, "iptables", "-t", "nat", "-S", "KUBE-SERVICES").Output()
		return err == nil && strings.Contains(string(rules), "-d "+svc.Spec.ClusterIP+"/32")
	}, 30*time.Second, 100*time.Millisecond, "kube-proxy programs Service %s", svc.Spec.ClusterIP)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(url)
	require.NoError(t, err, "GET %s from this machine", url)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "GET %s from this machine", url)
	hostOut, err := exec.CommandContext(ctx, "ip", "netns", "exec", h.Namespace, "/usr/bin/python3", "-c",
		fmt.Sprintf("import urllib.request; print(urllib.request.urlopen('%s', timeout=5).status)", url)).CombinedOutput()
	require.NoError(t, err, "GET %s from test host %s: %s", url, h.Name, hostOut)
	require.Equal(t, "200", strings.TrimSpace(string(hostOut)))
	out2, err := py(fmt.Sprintf("import urllib.request; print(urllib.request.urlopen('%s', timeout=5).status)", url))
	require.NoError(t, err, out2)
	require.Equal(t, "200", out2, "the pod reaches itself through its Service")

	// The kubelet's probes are in the container's log, read through the API server.
	require.Eventually(t, func() bool {
		out, err = run("logs", "web")
		return err == nil && strings.Contains(out, `"GET /alive HTTP/1.1" 200`) && strings.Contains(out, `"GET / HTTP/1.1" 200`)
	}, 30*time.Second, time.Second, "probe requests in kubectl logs: %s", out)

	// A failing liveness probe restarts the container; the new start is Ready again.
	cur, err := cs.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	before := cur.Status.ContainerStatuses[0].RestartCount
	require.Zero(t, before, "no restart before the liveness file goes")
	out, err = py("import os; os.remove('/tmp/alive')")
	require.NoError(t, err, out)
	t1 := time.Now()
	ready(before + 1)
	t.Logf("container restarted and Ready %s after its liveness file went", time.Since(t1).Round(100*time.Millisecond))
	out, err = run("logs", "web", "--previous")
	require.NoError(t, err, out)
	require.Contains(t, out, `"GET /alive HTTP/1.1" 404`, "the previous container's log shows the failed liveness probe")

	require.NoError(t, cs.CoreV1().Pods(ns).Delete(ctx, "web", metav1.DeleteOptions{}))
	require.NoError(t, waitPodGone(ctx, cs, ns, "web"), "the kubelet stops and removes the pod")
}

// podSummary is the pod's phase and its containers' states, for a failure message.
func podSummary(p *corev1.Pod) string {
	if p == nil {
		return "no pod seen"
	}
	out := string(p.Status.Phase)
	for _, c := range p.Status.ContainerStatuses {
		out += fmt.Sprintf("; %s ready=%v restarts=%d state=%+v", c.Name, c.Ready, c.RestartCount, c.State)
	}
	return out
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitPod watches the pod until done reports true for it.
func waitPod(ctx context.Context, cs kubernetes.Interface, ns, name string, done func(*corev1.Pod) bool) error {
	lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "pods", ns, fields.OneTermEqualSelector("metadata.name", name))
	_, err := watchtools.UntilWithSync(ctx, lw, &corev1.Pod{}, nil, func(ev watch.Event) (bool, error) {
		p, ok := ev.Object.(*corev1.Pod)
		return ok && ev.Type != watch.Deleted && done(p), nil
	})
	return err
}

// waitPodGone watches the pod until it is deleted.
func waitPodGone(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
	lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "pods", ns, fields.OneTermEqualSelector("metadata.name", name))
	_, err := watchtools.UntilWithSync(ctx, lw, &corev1.Pod{}, func(store cache.Store) (bool, error) {
		return len(store.List()) == 0, nil
	}, func(ev watch.Event) (bool, error) { return ev.Type == watch.Deleted, nil })
	return err
}
