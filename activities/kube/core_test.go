package kube

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// The activities on Kubernetes' own kinds (Nodes, Secrets, Jobs) against client-go's fake clientset.

// coreVerbs are the write verbs the clientset saw, in order, with their resource.
func coreVerbs(cs *fake.Clientset) []string {
	var out []string
	for _, a := range cs.Actions() {
		switch a.GetVerb() {
		case "get", "list", "watch":
			continue
		}
		out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
	}
	return out
}

func TestGetNode(t *testing.T) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-0", UID: "u-n", Labels: map[string]string{"openstack-control-plane": "enabled"},
			Annotations: map[string]string{AnnotationSiteRoleLabels: `{"openstack-compute-node":"enabled"}`}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	notReady := node.DeepCopy()
	notReady.Name, notReady.Annotations = "node-1", nil
	notReady.Status.Conditions[1].Status = corev1.ConditionUnknown
	broken := node.DeepCopy()
	broken.Name, broken.Annotations = "node-2", map[string]string{AnnotationSiteRoleLabels: "{"}
	k := &Kube{Core: fake.NewClientset(node, notReady, broken)}

	for _, tc := range []struct {
		name string
		node string
		want NodeInfo
	}{
		{"ready, role labels managed", "node-0", NodeInfo{Exists: true, UID: "u-n", Ready: true, Labels: node.Labels,
			RoleLabelsManaged: true, SiteRoleLabels: map[string]string{"openstack-compute-node": "enabled"}}},
		{"not ready, the site's own labels", "node-1", NodeInfo{Exists: true, UID: "u-n", Labels: node.Labels}},
		{"missing", "node-9", NodeInfo{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := k.GetNode(context.Background(), tc.node)
			require.NoError(t, err)
			require.Equal(t, tc.want, *got)
		})
	}
	t.Run("a record that is no JSON: an error, not a guess", func(t *testing.T) {
		_, err := k.GetNode(context.Background(), "node-2")
		require.Error(t, err)
	})
}

func TestSetNodeLabels(t *testing.T) {
	node := func() *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-0", Labels: map[string]string{"site": "rack-1", "old-role": "enabled"}}}
	}
	for _, tc := range []struct {
		name   string
		steps  []NodeLabelsInput
		writes []string
		labels map[string]string
	}{
		{"set and removed, then the same again: one patch",
			[]NodeLabelsInput{{Node: "node-0", Set: map[string]string{"openstack-compute-node": "enabled"}, Remove: []string{"old-role"}, Manage: true},
				{Node: "node-0", Set: map[string]string{"openstack-compute-node": "enabled"}, Remove: []string{"old-role"}, Manage: true}},
			[]string{"patch nodes"}, map[string]string{"site": "rack-1", "openstack-compute-node": "enabled"}},
		{"managed, then given back: the site's labels as they were",
			[]NodeLabelsInput{{Node: "node-0", Set: map[string]string{"openstack-compute-node": "enabled"}, Remove: []string{"old-role"}, Manage: true},
				{Node: "node-0", Remove: []string{"openstack-compute-node", "old-role"}, Restore: true}},
			[]string{"patch nodes", "patch nodes"}, map[string]string{"site": "rack-1", "old-role": "enabled"}},
		{"given back when never managed: untouched",
			[]NodeLabelsInput{{Node: "node-0", Remove: []string{"old-role"}, Restore: true}}, nil,
			map[string]string{"site": "rack-1", "old-role": "enabled"}},
		{"a missing Node: nothing to schedule on",
			[]NodeLabelsInput{{Node: "node-9", Set: map[string]string{"a": "b"}}}, nil, map[string]string{"site": "rack-1", "old-role": "enabled"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(node())
			k := &Kube{Core: cs}
			for _, in := range tc.steps {
				require.NoError(t, k.SetNodeLabels(context.Background(), in))
			}
			require.Equal(t, tc.writes, coreVerbs(cs))
			n, err := cs.CoreV1().Nodes().Get(context.Background(), "node-0", metav1.GetOptions{})
			require.NoError(t, err)
			require.Equal(t, tc.labels, n.Labels)
			if len(tc.steps) == 2 && tc.steps[1].Restore {
				require.NotContains(t, n.Annotations, AnnotationSiteRoleLabels, "the record goes with the labels it kept")
			}
		})
	}
}

func TestCheckSecret(t *testing.T) {
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "osp-secret"},
		Data: map[string][]byte{"NovaPassword": []byte("x"), "Empty": nil}}
	k := &Kube{Core: fake.NewClientset(sec)}
	for _, tc := range []struct {
		name  string
		check SecretCheck
		want  SecretPresence
		ready bool
	}{
		{"every key", SecretCheck{Namespace: "ns", Name: "osp-secret", Keys: []string{"NovaPassword"}}, SecretPresence{Exists: true}, true},
		{"an empty key is missing", SecretCheck{Namespace: "ns", Name: "osp-secret", Keys: []string{"NovaPassword", "Empty", "Other"}},
			SecretPresence{Exists: true, Missing: []string{"Empty", "Other"}}, false},
		{"no Secret: every key missing", SecretCheck{Namespace: "ns", Name: "gone", Keys: []string{"A"}}, SecretPresence{Missing: []string{"A"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := k.CheckSecret(context.Background(), tc.check)
			require.NoError(t, err)
			require.Equal(t, tc.want, *got)
			require.Equal(t, tc.ready, got.Ready())
		})
	}
}

func TestGenerateAndDeleteSecretKeys(t *testing.T) {
	cs := fake.NewClientset()
	k := &Kube{Core: cs}
	ref := SecretKeyRef{Namespace: "ns", Name: "nova-passwords", Key: "api"}
	owner := &Owner{APIVersion: "nova.openstack.org/v1beta1", Kind: "Nova", Name: "nova", UID: "u-1"}
	require.NoError(t, k.GenerateSecretKey(context.Background(), ref, owner))
	require.NoError(t, k.GenerateSecretKey(context.Background(), SecretKeyRef{Namespace: "ns", Name: "nova-passwords", Key: "cell1"}, owner))
	sec, err := cs.CoreV1().Secrets("ns").Get(context.Background(), "nova-passwords", metav1.GetOptions{})
	require.NoError(t, err)
	first := string(sec.Data["api"])
	require.Len(t, first, 24)
	require.NotEqual(t, first, string(sec.Data["cell1"]), "each key its own password")
	require.Equal(t, "u-1", string(sec.OwnerReferences[0].UID))

	// A retry keeps the password a killed attempt stored.
	require.NoError(t, k.GenerateSecretKey(context.Background(), ref, owner))
	sec, _ = cs.CoreV1().Secrets("ns").Get(context.Background(), "nova-passwords", metav1.GetOptions{})
	require.Equal(t, first, string(sec.Data["api"]))

	before := len(coreVerbs(cs))
	require.NoError(t, k.DeleteSecretKeys(context.Background(), "ns", "nova-passwords", []string{"api", "absent"}))
	require.NoError(t, k.DeleteSecretKeys(context.Background(), "ns", "nova-passwords", []string{"api"}))
	require.NoError(t, k.DeleteSecretKeys(context.Background(), "ns", "gone", []string{"api"}))
	require.Equal(t, []string{"update secrets"}, coreVerbs(cs)[before:], "one write: the second call and a missing Secret change nothing")
	sec, _ = cs.CoreV1().Secrets("ns").Get(context.Background(), "nova-passwords", metav1.GetOptions{})
	require.Equal(t, []string{"cell1"}, keysOf(sec.Data))
}

func keysOf(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestRunJob(t *testing.T) {
	job := func(hash string, conds ...batchv1.JobCondition) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nova-db-sync",
			Annotations: map[string]string{hashAnnotation: hash}}, Status: batchv1.JobStatus{Conditions: conds}}
	}
	complete := batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}
	failed := batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue}
	pod := func(name, msg string, finished time.Time) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"batch.kubernetes.io/job-name": "nova-db-sync"}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{
				Terminated: &corev1.ContainerStateTerminated{Message: msg, FinishedAt: metav1.NewTime(finished)}}}}}}
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	helm := job("h1")
	helm.Labels = map[string]string{ManagedByLabel: "Helm"}
	deleting := job("h1")
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	deleting.Finalizers = []string{"foregroundDeletion"}
	for _, tc := range []struct {
		name     string
		existing []runtime.Object
		writes   []string
		want     *JobState
		// errType is the activity's error: JobRunning is retried, ManagedByOther is not.
		errType string
	}{
		{"missing: created, then running", nil, []string{"create jobs"}, nil, ErrJobRunning},
		{"running", []runtime.Object{job("h1")}, nil, nil, ErrJobRunning},
		{"completed: its last pod's message", []runtime.Object{job("h1", complete), pod("a", " first ", t0), pod("b", " last\n", t0.Add(time.Minute))},
			nil, &JobState{Done: true, Message: "last"}, ""},
		{"failed: stays failed", []runtime.Object{job("h1", failed)}, nil, &JobState{Done: true, Failed: true}, ""},
		{"ran with other inputs: deleted, to run again", []runtime.Object{job("h0", complete)}, []string{"delete jobs"}, nil, ErrJobRunning},
		{"being deleted: waited for", []runtime.Object{deleting}, nil, nil, ErrJobRunning},
		{"another tool's: refused", []runtime.Object{helm}, nil, nil, ErrManagedByOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(tc.existing...)
			k := &Kube{Core: cs}
			got, err := k.RunJob(context.Background(), JobInput{Job: job("h1")})
			require.Equal(t, tc.writes, coreVerbs(cs))
			switch tc.errType {
			case "":
				require.NoError(t, err)
				require.Equal(t, tc.want, got)
			case ErrManagedByOther:
				requirePermanent(t, err, tc.errType)
			default:
				requireOutcome(t, err, "retryable", "")
				requireType(t, err, tc.errType)
			}
		})
	}
	t.Run("created meanwhile by another attempt: waited for", func(t *testing.T) {
		cs := fake.NewClientset()
		cs.PrependReactor("create", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewAlreadyExists(schema.GroupResource{Group: "batch", Resource: "jobs"}, "nova-db-sync")
		})
		_, err := (&Kube{Core: cs}).RunJob(context.Background(), JobInput{Job: job("h1")})
		requireType(t, err, ErrJobRunning)
	})
	t.Run("the API refuses the Job: permanent", func(t *testing.T) {
		cs := fake.NewClientset()
		cs.PrependReactor("create", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, "nova-db-sync", nil)
		})
		_, err := (&Kube{Core: cs}).RunJob(context.Background(), JobInput{Job: job("h1")})
		requirePermanent(t, err, ErrInvalid)
	})
}

// requireType fails unless err is an application error of type typ.
func requireType(t *testing.T, err error, typ string) {
	t.Helper()
	var app interface{ Type() string }
	require.True(t, errors.As(err, &app), "an application error: %v", err)
	require.Equal(t, typ, app.Type(), "%v", err)
}
