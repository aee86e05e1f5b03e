package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/stackflow/stackflow/deploy/local"
)

// ContainerPID is the host PID of a running container of the real node, from its status' container ID
// (containerd://ID): /proc/PID/root is then the container's root as its process sees it, volumes
// included.
func ContainerPID(ctx context.Context, s *local.Stack, containerID string) (int, error) {
	id, ok := strings.CutPrefix(containerID, "containerd://")
	if !ok {
		return 0, fmt.Errorf("container %q: not a containerd container", containerID)
	}
	out, err := exec.CommandContext(ctx, "ctr", "-a", s.ContainerdSocket(), "-n", "k8s.io", "tasks", "ls").Output()
	if err != nil {
		return 0, fmt.Errorf("ctr tasks ls: %w", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == id && f[2] == "RUNNING" {
			return strconv.Atoi(f[1])
		}
	}
	return 0, fmt.Errorf("container %s: no running task", id)
}

// RunningContainerPID is the host PID of the pod's first container when it runs, or 0.
func RunningContainerPID(ctx context.Context, s *local.Stack, p corev1.Pod) int {
	if p.DeletionTimestamp != nil || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
		return 0
	}
	pid, err := ContainerPID(ctx, s, p.Status.ContainerStatuses[0].ContainerID)
	if err != nil {
		return 0
	}
	return pid
}

// DumpPods logs, for a failed test, each pod of namespace ns whose labels match selector: its phase,
// its containers' states and the last lines of its log.
func DumpPods(t TB, cs kubernetes.Interface, ns, selector string) {
	ctx := context.Background()
	l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Logf("pods of %s (%s): %v", ns, selector, err)
		return
	}
	tail := int64(30)
	for _, p := range l.Items {
		st, _ := json.Marshal(p.Status.ContainerStatuses)
		t.Logf("pod %s on %s: %s %s", p.Name, p.Spec.NodeName, p.Status.Phase, st)
		b, err := cs.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: &tail}).DoRaw(ctx)
		t.Logf("--- log of pod %s (%v):\n%s", p.Name, err, b)
	}
}
