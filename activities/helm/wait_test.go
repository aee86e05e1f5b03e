package helm

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"helm.sh/helm/v3/pkg/chart"
	helmkube "helm.sh/helm/v3/pkg/kube"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	helmtime "helm.sh/helm/v3/pkg/time"
)

// WaitReady, Diff, Uninstall and PruneValues on Helm's in-memory release storage, with the release's
// objects in client-go's fake clientset.

// info is a release object as Helm's client builds it from a manifest.
func info(kind schema.GroupVersionKind, obj runtime.Object) *resource.Info {
	m := obj.(metav1.Object)
	return &resource.Info{Name: m.GetName(), Namespace: m.GetNamespace(), Object: obj,
		Mapping: &meta.RESTMapping{GroupVersionKind: kind}}
}

var (
	podKind = corev1.SchemeGroupVersion.WithKind("Pod")
	jobKind = batchv1.SchemeGroupVersion.WithKind("Job")
	depKind = appsv1.SchemeGroupVersion.WithKind("Deployment")
)

func pod(name string, ready bool, why string) *corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: name, Labels: map[string]string{"app": "keystone"}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st, Message: why}}}}
}

func job(name string, failed bool) *batchv1.Job {
	backoff, one := int32(0), int32(1)
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: name},
		Spec: batchv1.JobSpec{BackoffLimit: &backoff, Completions: &one}, Status: batchv1.JobStatus{Succeeded: 1}}
	if failed {
		j.Status = batchv1.JobStatus{Failed: 1, Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue}}}
	}
	return j
}

// waiting is a release revision deployed at when, whose objects are res (also in the clientset).
func waiting(t *testing.T, when time.Time, objs []runtime.Object, res ...*resource.Info) (*Helm, *storage.Storage) {
	kube := &kubefake.FailingKubeClient{PrintingKubeClient: kubefake.PrintingKubeClient{Out: io.Discard}, DummyResources: helmkube.ResourceList(res)}
	h, store := releases(t, kube)
	for _, o := range objs {
		require.NoError(t, h.core.(*fake.Clientset).Tracker().Add(o))
	}
	h.PollInterval = 10 * time.Millisecond
	require.NoError(t, store.Create(&release.Release{Name: "keystone", Namespace: "openstack", Version: 1,
		Labels: map[string]string{ReleaseLabelValuesHash: "h1"},
		Info:   &release.Info{Status: release.StatusDeployed, LastDeployed: helmtime.Time{Time: when}},
		Chart:  &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: "keystone", Version: "1.0.0"}}}))
	return h, store
}

func TestWaitReady(t *testing.T) {
	in := WaitInput{Release: "keystone", Namespace: "openstack", Revision: 1, Timeout: time.Minute}
	t.Run("every object Ready: the revision is marked good", func(t *testing.T) {
		p, j := pod("keystone-api-0", true, ""), job("keystone-db-sync", false)
		h, store := waiting(t, time.Now(), []runtime.Object{p, j}, info(podKind, p), info(jobKind, j))
		require.NoError(t, h.WaitReady(context.Background(), in))
		rel, err := store.Get("keystone", 1)
		require.NoError(t, err)
		require.Equal(t, "true", rel.Labels[ReleaseLabelReady])
	})
	t.Run("a Job failed for good: permanent at once, with its container's reason", func(t *testing.T) {
		j := job("keystone-db-sync", true)
		failedPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "keystone-db-sync-x",
			Labels: map[string]string{"batch.kubernetes.io/job-name": "keystone-db-sync"}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "db-sync", State: corev1.ContainerState{
				Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: "line 1\nAccess denied for user keystone\n"}}}}}}
		h, store := waiting(t, time.Now(), []runtime.Object{j, failedPod}, info(jobKind, j))
		t0 := time.Now()
		err := h.WaitReady(context.Background(), in)
		permanent(t, err, ErrNotReady)
		require.Less(t, time.Since(t0), in.Timeout, "not held to the deadline")
		require.Contains(t, err.Error(), "Job keystone-db-sync failed (pod keystone-db-sync-x container db-sync exited 1: line 1 | Access denied for user keystone)")
		rel, _ := store.Get("keystone", 1)
		require.Empty(t, rel.Labels[ReleaseLabelReady])
	})
	t.Run("past the deadline counted from the deployment: permanent, naming what waits and why", func(t *testing.T) {
		sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "keystone"}}
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "openstack", Name: "keystone-api"}, Spec: appsv1.DeploymentSpec{Selector: sel}}
		p := pod("keystone-api-0", false, "0/1 nodes are available: 1 node(s) had untolerated taint")
		h, _ := waiting(t, time.Now().Add(-2*time.Minute), []runtime.Object{d, p}, info(depKind, d))
		err := h.WaitReady(context.Background(), in)
		permanent(t, err, ErrNotReady)
		require.Contains(t, err.Error(), "not Ready after 1m0s: Deployment/keystone-api")
		require.Contains(t, err.Error(), "pod keystone-api-0 Ready: 0/1 nodes are available")
	})
	t.Run("not Ready before the deadline: waits (until the attempt ends)", func(t *testing.T) {
		p := pod("keystone-api-0", false, "")
		h, store := waiting(t, time.Now(), []runtime.Object{p}, info(podKind, p))
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		err := h.WaitReady(ctx, in)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		rel, _ := store.Get("keystone", 1)
		require.Empty(t, rel.Labels[ReleaseLabelReady])
	})
	t.Run("a revision that does not exist: retried", func(t *testing.T) {
		h, _ := waiting(t, time.Now(), nil)
		err := h.WaitReady(context.Background(), WaitInput{Release: "keystone", Namespace: "openstack", Revision: 7, Timeout: time.Minute})
		require.Error(t, err)
		var app *temporal.ApplicationError
		require.False(t, errors.As(err, &app) && app.NonRetryable(), "%v", err)
	})
}

func TestUninstall(t *testing.T) {
	h, store := releases(t, nil)
	revision(t, store, 1, release.StatusSuperseded, "1.0.0", "h1", true)
	revision(t, store, 2, release.StatusDeployed, "1.1.0", "h2", true)
	in := UninstallInput{Release: "keystone", Namespace: "openstack"}
	require.NoError(t, h.Uninstall(context.Background(), in))
	hist, _ := store.History("keystone")
	require.Empty(t, hist, "every revision gone")
	require.NoError(t, h.Uninstall(context.Background(), in), "a missing release is not an error")
}

func TestPruneValues(t *testing.T) {
	h, _ := releases(t, nil)
	cs := h.core.(*fake.Clientset)
	// The tracker lists no collection to delete; the API server deletes what the selector selects.
	cs.PrependReactor("delete-collection", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sel := a.(k8stesting.DeleteCollectionAction).GetListRestrictions().Labels
		cms, err := cs.Tracker().List(a.GetResource(), corev1.SchemeGroupVersion.WithKind("ConfigMap"), a.GetNamespace())
		require.NoError(t, err)
		for _, cm := range cms.(*corev1.ConfigMapList).Items {
			if sel.Matches(labels.Set(cm.Labels)) {
				require.NoError(t, cs.Tracker().Delete(a.GetResource(), cm.Namespace, cm.Name))
			}
		}
		return true, nil, nil
	})
	for _, hash := range []string{"h1", "h3"} {
		require.NoError(t, h.StoreValues(context.Background(), StoreValuesInput{Ref: ValuesRef{Namespace: "openstack", Component: "keystone", Hash: hash},
			Values: map[string]any{"replicas": 1}}))
	}
	require.NoError(t, h.StoreValues(context.Background(), StoreValuesInput{Ref: ValuesRef{Namespace: "openstack", Component: "glance", Hash: "g1"},
		Values: map[string]any{"replicas": 1}}))
	stored := func() []string {
		cms, err := h.core.CoreV1().ConfigMaps("openstack").List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		var names []string
		for _, cm := range cms.Items {
			names = append(names, cm.Labels[LabelValuesOf]+":"+cm.Labels[LabelValuesHash])
		}
		return names
	}
	require.ElementsMatch(t, []string{"keystone:h1", "keystone:h2", "keystone:h3", "glance:g1"}, stored())
	require.NoError(t, h.PruneValues(context.Background(), ValuesRef{Namespace: "openstack", Component: "keystone", Hash: "h2"}))
	require.ElementsMatch(t, []string{"keystone:h2", "glance:g1"}, stored(), "the component's others go, other components' stay")
	require.NoError(t, h.PruneValues(context.Background(), ValuesRef{Namespace: "openstack", Component: "keystone"}))
	require.ElementsMatch(t, []string{"glance:g1"}, stored(), "no hash: every one of the component")
}

func TestDiff(t *testing.T) {
	t.Run("nothing deployed: the whole rendering is new", func(t *testing.T) {
		h, _ := releases(t, nil)
		d, err := h.Diff(context.Background(), want("1.0.0", "h2"))
		require.NoError(t, err)
		require.Equal(t, "none", d.From)
		require.Equal(t, "1.0.0:h2", d.To)
		require.Contains(t, d.Diff, `+  replicas: "2"`)
		require.False(t, d.Truncated)
	})
	t.Run("deployed with other values: the change only", func(t *testing.T) {
		h, store := releases(t, nil)
		revision(t, store, 1, release.StatusDeployed, "1.0.0", "h1", true)
		rel, _ := store.Get("keystone", 1)
		rel.Manifest = "---\n# Source: keystone/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keystone\ndata:\n  replicas: \"1\"\n"
		require.NoError(t, store.Update(rel))
		d, err := h.Diff(context.Background(), want("1.0.0", "h2"))
		require.NoError(t, err)
		require.Equal(t, "1.0.0:h1", d.From)
		require.Contains(t, d.Diff, `-  replicas: "1"`)
		require.Contains(t, d.Diff, `+  replicas: "2"`)
		require.Contains(t, d.Diff, "\n metadata:\n", "context around the change")
	})
	t.Run("a chart that does not render: permanent", func(t *testing.T) {
		h, _ := releases(t, nil)
		_, err := h.Diff(context.Background(), want("0.0.0-broken", "h2"))
		permanent(t, err, ErrRender)
	})
	t.Run("values not stored: permanent", func(t *testing.T) {
		h, _ := releases(t, nil)
		_, err := h.Diff(context.Background(), want("1.0.0", "h9"))
		permanent(t, err, ErrValuesMissing)
	})
}

// An install the API server cannot be reached for is retried; one it refuses, or a chart that does not
// render, is not; a failed first install is removed before the next one.
func TestInstallFailures(t *testing.T) {
	for _, tc := range []struct {
		name      string
		create    error
		retryable bool
		errType   string
	}{
		{"API server unreachable: retried", errors.New(`Post "https://10.0.0.1:6443/api/v1/namespaces/openstack/configmaps": dial tcp 10.0.0.1:6443: connect: connection refused`), true, ""},
		{"refused: permanent", errors.New(`ConfigMap "keystone" is invalid: metadata.name: Invalid value`), false, ErrUpgradeFailed},
		{"rendered objects the cluster cannot build: permanent", errors.New(`unable to build kubernetes objects from release manifest: resource mapping not found`), false, ErrRender},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := releases(t, &kubefake.FailingKubeClient{PrintingKubeClient: kubefake.PrintingKubeClient{Out: io.Discard}, CreateError: tc.create})
			_, err := h.UpgradeOrInstall(context.Background(), want("1.0.0", "h2"))
			require.ErrorContains(t, err, "install of release openstack/keystone (chart keystone-1.0.0)")
			var app *temporal.ApplicationError
			if tc.retryable {
				require.False(t, errors.As(err, &app), "retryable: %v", err)
				return
			}
			permanent(t, err, tc.errType)
		})
	}
	t.Run("after a failed first install: removed, installed anew", func(t *testing.T) {
		h, store := releases(t, nil)
		revision(t, store, 1, release.StatusFailed, "1.0.0", "h1", false)
		got, err := h.UpgradeOrInstall(context.Background(), want("1.0.0", "h2"))
		require.NoError(t, err)
		require.Equal(t, UpgradeResult{Action: "install", Revision: 1}, *got)
		last, err := store.Last("keystone")
		require.NoError(t, err)
		require.Equal(t, release.StatusDeployed, last.Info.Status)
		require.Equal(t, "h2", last.Labels[ReleaseLabelValuesHash])
	})
	t.Run("pending: refused until recovered", func(t *testing.T) {
		h, store := releases(t, nil)
		revision(t, store, 1, release.StatusDeployed, "1.0.0", "h1", true)
		revision(t, store, 2, release.StatusPendingRollback, "1.0.0", "h1", false)
		_, err := h.UpgradeOrInstall(context.Background(), want("1.0.0", "h2"))
		permanent(t, err, ErrPending)
		got, err := h.Recover(context.Background(), RecoverInput{Release: "keystone", Namespace: "openstack"})
		require.NoError(t, err)
		require.Equal(t, "rollback", got.Action)
		require.Equal(t, "pending-rollback", got.Status)
		up, err := h.UpgradeOrInstall(context.Background(), want("1.0.0", "h2"))
		require.NoError(t, err)
		require.Equal(t, "upgrade", up.Action)
		require.Equal(t, got.LastGood, up.Previous)
	})
	t.Run("a rollback to a revision that is not there: an error, the release as it was", func(t *testing.T) {
		h, store := releases(t, nil)
		revision(t, store, 1, release.StatusFailed, "1.0.0", "h1", false)
		revision(t, store, 2, release.StatusFailed, "1.0.1", "h1", false)
		_, err := h.Rollback(context.Background(), RollbackInput{Release: "keystone", Namespace: "openstack", To: 7, Failed: 2})
		require.ErrorContains(t, err, "rollback openstack/keystone to revision 7")
		hist, _ := store.History("keystone")
		require.Len(t, hist, 2)
	})
}
