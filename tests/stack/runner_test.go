package stack

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/stackflow/stackflow/deploy/local"
)

// TestPodRunnerRunsThePodSpec deploys, on the pod runner's node, a Deployment whose init container merges
// a ConfigMap with a Secret into an emptyDir and whose container serves the merged file over HTTP, and two
// Jobs (one with a console script of the host image, one failing). What runs is the pod spec's own: the
// process's mount namespace holds the volumes at their mount paths (the machine's does not), the
// readiness probe makes the Deployment Available, a failed Job carries its log tail, and deleting the
// Deployment stops the process.
func TestPodRunnerRunsThePodSpec(t *testing.T) {
	cs, err := st.KubeClient()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := fmt.Sprintf("runner-%d", time.Now().UnixNano()%1e6)
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	secretValue := fmt.Sprintf("s3cret-%d", time.Now().UnixNano())
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "config"},
		Data: map[string]string{"app.conf": "[DEFAULT]\ndebug = true\n", "merge.sh": "set -e\ncat /config/app.conf > /merged/app.conf\nprintf 'password = %s\\n' \"$(cat /secret/password)\" >> /merged/app.conf\n"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "credentials"},
		Data: map[string][]byte{"password": []byte(secretValue)}}, metav1.CreateOptions{})
	require.NoError(t, err)

	port := 18000 + int(time.Now().UnixNano()%1000)
	labels := map[string]string{"app": "merged"}
	one := int32(1)
	mergedVol := corev1.VolumeMount{Name: "merged", MountPath: "/var/lib/runner-test/merged"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "merged"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{local.RunnerNodeLabel: local.RunnerNodeValue},
					Volumes: []corev1.Volume{
						{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "config"}}}},
						{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "credentials"}}},
						{Name: "merged", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					},
					InitContainers: []corev1.Container{{
						Name: "merge", Image: "registry.invalid/busybox",
						Command: []string{"/bin/sh", "/config/merge.sh"},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "config", MountPath: "/config", ReadOnly: true},
							{Name: "secret", MountPath: "/secret", ReadOnly: true},
							{Name: "merged", MountPath: "/merged"},
						},
					}},
					Containers: []corev1.Container{{
						Name: "serve", Image: "registry.invalid/python",
						Command:      []string{"python3", "-m", "http.server", "$(PORT)", "--bind", "127.0.0.1", "--directory", mergedVol.MountPath},
						Env:          []corev1.EnvVar{{Name: "PORT", Value: strconv.Itoa(port)}},
						VolumeMounts: []corev1.VolumeMount{mergedVol},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
							Host: "127.0.0.1", Port: intstr.FromInt(port), Path: "/app.conf"}}, PeriodSeconds: 2},
					}},
				},
			},
		},
	}
	_, err = cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	var pod corev1.Pod
	require.Eventually(t, func() bool {
		dep, err := cs.AppsV1().Deployments(ns).Get(ctx, "merged", metav1.GetOptions{})
		if err != nil || dep.Status.AvailableReplicas != 1 {
			return false
		}
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=merged"})
		if err != nil || len(pods.Items) != 1 {
			return false
		}
		pod = pods.Items[0]
		return true
	}, 2*time.Minute, 500*time.Millisecond, "deployment on the runner node not Available")
	require.Equal(t, local.RunnerNode, pod.Spec.NodeName)
	require.Len(t, pod.Status.InitContainerStatuses, 1)
	require.NotNil(t, pod.Status.InitContainerStatuses[0].State.Terminated)
	require.EqualValues(t, 0, pod.Status.InitContainerStatuses[0].State.Terminated.ExitCode)
	pid := containerPID(t, pod.Status.ContainerStatuses[0])

	// The process sees the merged file at its mount path; the machine does not.
	merged, err := os.ReadFile(filepath.Join(fmt.Sprintf("/proc/%d/root", pid), mergedVol.MountPath, "app.conf"))
	require.NoError(t, err)
	require.Equal(t, "[DEFAULT]\ndebug = true\npassword = "+secretValue+"\n", string(merged))
	_, err = os.Stat(filepath.Join(mergedVol.MountPath, "app.conf"))
	require.True(t, os.IsNotExist(err), "the merged file leaked into the machine's own filesystem")
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/app.conf", port))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(body), "debug = true")
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	require.NoError(t, err)
	require.Contains(t, strings.ReplaceAll(string(cmdline), "\x00", " "), "http.server "+strconv.Itoa(port), "the pod's own command, $(PORT) expanded")

	// A console script of the host image (Debian's Nova library) and a failing command, as Jobs.
	require.Equal(t, batchv1.JobComplete, runJob(t, cs, ns, "manage", []string{"nova-manage", "--version"}))
	require.Equal(t, batchv1.JobFailed, runJob(t, cs, ns, "fail", []string{"/bin/sh", "-c", "echo boom >&2; exit 3"}))
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=fail"})
	require.NoError(t, err)
	require.NotEmpty(t, pods.Items)
	term := pods.Items[0].Status.ContainerStatuses[0].State.Terminated
	require.NotNil(t, term)
	require.EqualValues(t, 3, term.ExitCode)
	require.Contains(t, term.Message, "boom", "the log tail says why")

	// Deleting the Deployment stops the process.
	require.NoError(t, cs.AppsV1().Deployments(ns).Delete(ctx, "merged", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return syscall.Kill(pid, 0) != nil }, time.Minute, 500*time.Millisecond, "process %d survived its pod", pid)
}

func containerPID(t *testing.T, cs corev1.ContainerStatus) int {
	t.Helper()
	id, ok := strings.CutPrefix(cs.ContainerID, "host://")
	require.True(t, ok, "container ID %q", cs.ContainerID)
	pid, err := strconv.Atoi(id)
	require.NoError(t, err)
	return pid
}

// runJob runs command as a Job on the runner node and returns the Job's final condition.
func runJob(t *testing.T, cs kubernetes.Interface, ns, name string, command []string) batchv1.JobConditionType {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	zero := int32(0)
	_, err := cs.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{BackoffLimit: &zero, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			NodeSelector:  map[string]string{local.RunnerNodeLabel: local.RunnerNodeValue},
			Containers:    []corev1.Container{{Name: name, Image: "registry.invalid/nova", Command: command}},
		}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	for {
		j, err := cs.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		for _, c := range j.Status.Conditions {
			if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
				return c.Type
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("job %s did not finish: %+v", name, j.Status)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
