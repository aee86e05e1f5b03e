package kube

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// Why a pod is not ready, as a wait reports it: a waiting container's reason and message first, a
// crash's log tail over the kubelet's message, and for a container that runs but is not ready the
// latest probe failure of that pod.
func TestPodTrouble(t *testing.T) {
	sel := map[string]string{"app": "svc"}
	pod := func(name string, cs corev1.ContainerStatus) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: sel},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{cs}}}
	}
	probe := func(name, pod, msg string, at time.Time) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Reason: "Unhealthy", Message: msg,
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: pod}, LastTimestamp: metav1.NewTime(at)}
	}
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		objs     []*corev1.Pod
		events   []*corev1.Event
		want     string
		crashing bool
	}{
		{name: "image", objs: []*corev1.Pod{pod("p1", corev1.ContainerStatus{Name: "api",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "x"`}}})},
			want: `pod p1 container api ImagePullBackOff: Back-off pulling image "x"`},
		{name: "crash loop", objs: []*corev1.Pod{pod("p1", corev1.ContainerStatus{Name: "api", RestartCount: 4,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: "a\nb\nc\nno such option\n"}}})},
			want: "pod p1 container api CrashLoopBackOff: b | c | no such option", crashing: true},
		{name: "probe", objs: []*corev1.Pod{pod("p1", corev1.ContainerStatus{Name: "api",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})},
			events: []*corev1.Event{
				probe("e1", "p1", "Readiness probe failed: connection refused", t0),
				probe("e2", "p1", "Readiness probe failed: HTTP probe failed with statuscode: 503", t0.Add(time.Minute)),
				probe("e3", "other", "Liveness probe failed: of another pod", t0.Add(2*time.Minute)),
			},
			want: "pod p1 container api running, not ready: Readiness probe failed: HTTP probe failed with statuscode: 503"},
		{name: "running, no event yet", objs: []*corev1.Pod{pod("p1", corev1.ContainerStatus{Name: "api",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})},
			want: "pod p1 container api running, not ready"},
		{name: "ready", objs: []*corev1.Pod{pod("p1", corev1.ContainerStatus{Name: "api", Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewSimpleClientset()
			for _, p := range tc.objs {
				_, err := cs.CoreV1().Pods("ns").Create(context.Background(), p, metav1.CreateOptions{})
				require.NoError(t, err)
			}
			for _, e := range tc.events {
				_, err := cs.CoreV1().Events("ns").Create(context.Background(), e, metav1.CreateOptions{})
				require.NoError(t, err)
			}
			got, crashing := (&Kube{Core: cs}).podTrouble(context.Background(), "ns", sel)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.crashing, crashing)
		})
	}
}

// Before a new run of a Job, only a failed one is deleted (it runs again); a completed or running Job,
// or none, is left.
func TestDeleteFailedJob(t *testing.T) {
	job := func(cond batchv1.JobConditionType) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "cell-delete", Namespace: "ns"}}
		if cond != "" {
			j.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue}}
		}
		return j
	}
	for _, tc := range []struct {
		name    string
		job     *batchv1.Job
		deleted bool
	}{
		{"failed", job(batchv1.JobFailed), true},
		{"completed", job(batchv1.JobComplete), false},
		{"running", job(""), false},
		{"missing", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewSimpleClientset()
			if tc.job != nil {
				_, err := cs.BatchV1().Jobs("ns").Create(context.Background(), tc.job, metav1.CreateOptions{})
				require.NoError(t, err)
			}
			deleted, err := (&Kube{Core: cs}).DeleteFailedJob(context.Background(), JobRef{Namespace: "ns", Name: "cell-delete"})
			require.NoError(t, err)
			require.Equal(t, tc.deleted, deleted)
			_, err = cs.BatchV1().Jobs("ns").Get(context.Background(), "cell-delete", metav1.GetOptions{})
			require.Equal(t, tc.job == nil || tc.deleted, apierrors.IsNotFound(err), "the Job is gone only when it failed")
		})
	}
}
