package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"

	"go.temporal.io/sdk/temporal"

	"github.com/stackflow/stackflow/api"
	"github.com/stackflow/stackflow/api/lifecycle"
)

// The Kubernetes activities of the Nova control plane: ConfigMaps, Deployments and Jobs of service
// instances, child CRs, Secret fingerprints and hand-down.

// ConfigMapInput is a ConfigMap to create or update.
type ConfigMapInput struct {
	Namespace string            `json:"namespace"`
	Name      string            `json:"name"`
	Data      map[string]string `json:"data"`
	Labels    map[string]string `json:"labels,omitempty"`
	Owner     *Owner            `json:"owner,omitempty"`
}

// ApplyConfigMap creates the ConfigMap or replaces its data (and labels).
func (k *Kube) ApplyConfigMap(ctx context.Context, in ConfigMapInput) error {
	cms := k.Core.CoreV1().ConfigMaps(in.Namespace)
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := cms.Get(ctx, in.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: in.Name, Namespace: in.Namespace, Labels: in.Labels}, Data: in.Data}
			if in.Owner != nil {
				cm.OwnerReferences = []metav1.OwnerReference{ownerRef(*in.Owner)}
			}
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: "stackflow"})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), in.Name, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		if tool := ManagedByOther(cur.Labels); tool != "" {
			return errManagedByOther("ConfigMap "+in.Namespace+"/"+in.Name, tool)
		}
		if mapsEqual(cur.Data, in.Data) && labelsContain(cur.Labels, in.Labels) {
			return nil
		}
		cur.Data = in.Data
		if cur.Labels == nil {
			cur.Labels = map[string]string{}
		}
		for key, v := range in.Labels {
			cur.Labels[key] = v
		}
		_, err = cms.Update(ctx, cur, metav1.UpdateOptions{FieldManager: "stackflow"})
		return err
	})
	return Classify("apply ConfigMap "+in.Namespace+"/"+in.Name, err)
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for key, v := range a {
		if w, ok := b[key]; !ok || w != v {
			return false
		}
	}
	return true
}

func labelsContain(have, want map[string]string) bool {
	for key, v := range want {
		if have[key] != v {
			return false
		}
	}
	return true
}

// SecretHashesInput names Secrets (and the keys each must hold) in a namespace.
type SecretHashesInput struct {
	Namespace string              `json:"namespace"`
	Keys      map[string][]string `json:"keys"`
}

// SecretHashes is a fingerprint of each Secret's data (never the data), or what is missing.
type SecretHashes struct {
	Hashes map[string]string `json:"hashes,omitempty"`
	// Missing lists "secret" or "secret[key]" for what does not exist.
	Missing []string `json:"missing,omitempty"`
}

// HashSecrets fingerprints Secrets (the keys named, or all) so a change of what a service reads rolls it.
func (k *Kube) HashSecrets(ctx context.Context, in SecretHashesInput) (*SecretHashes, error) {
	out := &SecretHashes{Hashes: map[string]string{}}
	names := make([]string, 0, len(in.Keys))
	for n := range in.Keys {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		sec, err := k.Core.CoreV1().Secrets(in.Namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			out.Missing = append(out.Missing, name)
			continue
		}
		if err != nil {
			return nil, Classify("read Secret "+in.Namespace+"/"+name, err)
		}
		for _, key := range in.Keys[name] {
			if len(sec.Data[key]) == 0 {
				out.Missing = append(out.Missing, name+"["+key+"]")
			}
		}
		// Only the keys the reader names count: a Secret handed down to many services changes for one
		// without rolling the others.
		keys := slices.Clone(in.Keys[name])
		if len(keys) == 0 {
			for key := range sec.Data {
				keys = append(keys, key)
			}
		}
		slices.Sort(keys)
		h := sha256.New()
		// Salted with the Secret's UID: the fingerprint says when the data changed, and is useless for
		// guessing a value.
		h.Write([]byte(sec.UID))
		for _, key := range keys {
			fmt.Fprintf(h, "%d:%s%d:", len(key), key, len(sec.Data[key]))
			h.Write(sec.Data[key])
		}
		out.Hashes[name] = hex.EncodeToString(h.Sum(nil))[:16]
	}
	return out, nil
}

// CopySecretKeysInput hands keys of one Secret down into another (created, owned by Owner, when missing).
type CopySecretKeysInput struct {
	From SecretKeyRef `json:"from"`
	// Keys maps a key of To's Secret to the key of From's Secret it gets (From.Key and To.Key are
	// ignored).
	Keys map[string]string `json:"keys"`
	// Optional are keys of To whose source may be missing in From.
	Optional []string     `json:"optional,omitempty"`
	To       SecretKeyRef `json:"to"`
	Owner    *Owner       `json:"owner,omitempty"`
}

// CopySecretKeys copies values between Secrets inside the activity, so none enters history.
func (k *Kube) CopySecretKeys(ctx context.Context, in CopySecretKeysInput) error {
	dests := make([]string, 0, len(in.Keys))
	for d := range in.Keys {
		dests = append(dests, d)
	}
	slices.Sort(dests)
	for _, d := range dests {
		v, err := ReadSecretKey(ctx, k.Core, SecretKeyRef{Namespace: in.From.Namespace, Name: in.From.Name, Key: in.Keys[d]})
		if err != nil {
			if slices.Contains(in.Optional, d) {
				continue
			}
			return err
		}
		if err := WriteSecretKey(ctx, k.Core, SecretKeyRef{Namespace: in.To.Namespace, Name: in.To.Name, Key: d}, in.Owner, v); err != nil {
			return err
		}
	}
	return nil
}

// GenerateSecretKey makes sure ref's key holds a value, generating a password when it is missing.
func (k *Kube) GenerateSecretKey(ctx context.Context, ref SecretKeyRef, owner *Owner) error {
	_, err := EnsureSecretKey(ctx, k.Core, ref, owner, GeneratePassword)
	return err
}

// DeleteSecretKeys removes keys from a Secret (a missing Secret or key is fine).
func (k *Kube) DeleteSecretKeys(ctx context.Context, ns, name string, keys []string) error {
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		sec, err := k.Core.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		changed := false
		for _, key := range keys {
			if _, ok := sec.Data[key]; ok {
				delete(sec.Data, key)
				changed = true
			}
		}
		if !changed {
			return nil
		}
		_, err = k.Core.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{FieldManager: "stackflow"})
		return err
	})
	return Classify("delete keys of Secret "+ns+"/"+name, err)
}

// DeploymentInput is a Deployment to apply. The Kubernetes object travels inside a plain struct: on its
// own, Temporal's converter would take it for a (gogo) protobuf message and encode it as protobuf JSON,
// which cannot carry its int-or-string fields (a probe's named port) back.
type DeploymentInput struct {
	Deployment *appsv1.Deployment `json:"deployment"`
}

// ApplyDeployment creates the Deployment or replaces its spec, labels and owners.
func (k *Kube) ApplyDeployment(ctx context.Context, in DeploymentInput) error {
	d := in.Deployment
	deps := k.Core.AppsV1().Deployments(d.Namespace)
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := deps.Get(ctx, d.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = deps.Create(ctx, d, metav1.CreateOptions{FieldManager: "stackflow"})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(appsv1.Resource("deployments"), d.Name, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		if tool := ManagedByOther(cur.Labels); tool != "" {
			return errManagedByOther("Deployment "+d.Namespace+"/"+d.Name, tool)
		}
		cur.Spec = d.Spec
		cur.Labels = d.Labels
		cur.OwnerReferences = d.OwnerReferences
		_, err = deps.Update(ctx, cur, metav1.UpdateOptions{FieldManager: "stackflow"})
		return err
	})
	return Classify("apply Deployment "+d.Namespace+"/"+d.Name, err)
}

// ServiceInput is a Service to create or update.
type ServiceInput struct {
	Service *corev1.Service `json:"service"`
}

// ServiceState is where a Service answers.
type ServiceState struct {
	// ClusterIP is the Service's stable address: it outlives every pod behind it.
	ClusterIP string `json:"clusterIP"`
}

// ApplyService creates the Service or replaces its ports, selector, labels and owners (keeping the
// ClusterIP the API server gave it, which is immutable), and returns its address.
func (k *Kube) ApplyService(ctx context.Context, in ServiceInput) (*ServiceState, error) {
	want := in.Service
	svcs := k.Core.CoreV1().Services(want.Namespace)
	var got *corev1.Service
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := svcs.Get(ctx, want.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			got, err = svcs.Create(ctx, want, metav1.CreateOptions{FieldManager: "stackflow"})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("services"), want.Name, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		if tool := ManagedByOther(cur.Labels); tool != "" {
			return errManagedByOther("Service "+want.Namespace+"/"+want.Name, tool)
		}
		cur.Spec.Ports = want.Spec.Ports
		cur.Spec.Selector = want.Spec.Selector
		cur.Labels = want.Labels
		cur.OwnerReferences = want.OwnerReferences
		got, err = svcs.Update(ctx, cur, metav1.UpdateOptions{FieldManager: "stackflow"})
		return err
	})
	if err != nil {
		return nil, Classify("apply Service "+want.Namespace+"/"+want.Name, err)
	}
	if got.Spec.ClusterIP == "" || got.Spec.ClusterIP == corev1.ClusterIPNone {
		return nil, temporal.NewNonRetryableApplicationError("Service "+want.Namespace+"/"+want.Name+" has no ClusterIP", ErrInvalid, nil)
	}
	return &ServiceState{ClusterIP: got.Spec.ClusterIP}, nil
}

// DeploymentState is how far a Deployment's rollout is.
type DeploymentState struct {
	Replicas int32 `json:"replicas"`
	Ready    int32 `json:"ready"`
	Updated  int32 `json:"updated"`
	// RolledOut is true when the controller acted on the newest spec and every replica is updated and ready.
	RolledOut bool `json:"rolledOut"`
	// Waiting says why a pod is not ready (a container's waiting or last termination reason), if known.
	Waiting string `json:"waiting,omitempty"`
	// PodIPs are the addresses of the ready pods, sorted, once rolled out.
	PodIPs []string `json:"podIPs,omitempty"`
}

// ErrNotRolledOut is the retryable error of WaitDeployment; the retry policy paces the wait.
const ErrNotRolledOut = "NotRolledOut"

// WaitDeployment succeeds with the Deployment's state once it is rolled out, and fails retryably before,
// saying why its pods are not ready.
func (k *Kube) WaitDeployment(ctx context.Context, ns, name string) (*DeploymentState, error) {
	d, err := k.Core.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, Classify("get Deployment "+ns+"/"+name, err)
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := &DeploymentState{Replicas: want, Ready: d.Status.ReadyReplicas, Updated: d.Status.UpdatedReplicas}
	// Available, not just ready: a service without a readiness probe counts only once it stayed up for
	// the Deployment's minReadySeconds.
	st.RolledOut = d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == want &&
		d.Status.ReadyReplicas == want && d.Status.AvailableReplicas == want && d.Status.Replicas == want
	if st.RolledOut {
		st.PodIPs, err = k.readyPodIPs(ctx, ns, d.Spec.Selector.MatchLabels)
		if err != nil {
			return nil, Classify("list pods of Deployment "+ns+"/"+name, err)
		}
		return st, nil
	}
	var crashing bool
	st.Waiting, crashing = k.podTrouble(ctx, ns, d.Spec.Selector.MatchLabels)
	msg := fmt.Sprintf("Deployment %s/%s: %d/%d updated, %d ready", ns, name, st.Updated, want, st.Ready)
	if st.Waiting != "" {
		msg += ": " + st.Waiting
	}
	if crashing {
		return nil, temporal.NewNonRetryableApplicationError(msg, ErrServiceCrashing, nil)
	}
	return nil, temporal.NewApplicationError(msg, ErrNotRolledOut, st)
}

// ErrServiceCrashing is the permanent error of a Deployment whose pods keep crashing: waiting longer
// would not help; the message carries the last crash's log tail.
const ErrServiceCrashing = "ServiceCrashing"

// crashLoops is how many restarts of a crashing container end the wait for its Deployment.
const crashLoops = 4

// readyPodIPs lists the addresses of the selector's ready pods, sorted.
func (k *Kube) readyPodIPs(ctx context.Context, ns string, sel map[string]string) ([]string, error) {
	pods, err := k.Core.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labelSelector(sel)})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.PodIP == "" {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && !slices.Contains(out, p.Status.PodIP) {
				out = append(out, p.Status.PodIP)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// labelSelector is sel as a selector string, sorted.
func labelSelector(sel map[string]string) string {
	parts := make([]string, 0, len(sel))
	for key, v := range sel {
		parts = append(parts, key+"="+v)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// podTrouble is the first reason a pod of the selector gives for not being ready, and whether that pod
// keeps crashing.
func (k *Kube) podTrouble(ctx context.Context, ns string, sel map[string]string) (string, bool) {
	pods, err := k.Core.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labelSelector(sel)})
	if err != nil {
		return "", false
	}
	for _, p := range pods.Items {
		for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "PodInitializing" {
				msg := fmt.Sprintf("pod %s container %s %s", p.Name, cs.Name, w.Reason)
				if t := cs.LastTerminationState.Terminated; t != nil && t.Message != "" {
					msg += ": " + strings.ReplaceAll(LastLines(t.Message, 3), "\n", " | ")
				} else if w.Message != "" {
					msg += ": " + w.Message
				}
				return msg, w.Reason == "CrashLoopBackOff" && cs.RestartCount >= crashLoops
			}
		}
	}
	// Running but not ready: the kubelet's last probe failure says why (an Event, not in the status).
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running != nil && !cs.Ready {
				msg := fmt.Sprintf("pod %s container %s running, not ready", p.Name, cs.Name)
				if why := k.lastProbeFailure(ctx, ns, p.Name); why != "" {
					msg += ": " + why
				}
				return msg, false
			}
		}
	}
	return "", false
}

// lastProbeFailure is the message of the pod's latest probe failure Event (reason Unhealthy: "Readiness
// probe failed: …"), "" when there is none or it cannot be read.
func (k *Kube) lastProbeFailure(ctx context.Context, ns, pod string) string {
	evs, err := k.Core.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Pod,involvedObject.name=" + pod + ",reason=Unhealthy"})
	if err != nil {
		return ""
	}
	var last *corev1.Event
	for i, e := range evs.Items {
		// The field selector is the API server's; the check here keeps the answer right without it.
		if e.InvolvedObject.Name != pod || e.Reason != "Unhealthy" {
			continue
		}
		if last == nil || eventTime(e).After(eventTime(*last)) {
			last = &evs.Items[i]
		}
	}
	if last == nil {
		return ""
	}
	return strings.TrimSpace(last.Message)
}

// eventTime is when an Event last happened, whichever API wrote it.
func eventTime(e corev1.Event) time.Time {
	switch {
	case e.Series != nil:
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	default:
		return e.EventTime.Time
	}
}

// JobState is where a Job is.
type JobState struct {
	Done   bool `json:"done"`
	Failed bool `json:"failed"`
	// Message is the termination message of the Job's last pod (its log tail when it failed).
	Message string `json:"message,omitempty"`
}

// JobInput is a Job to run, in a plain struct for the reason DeploymentInput gives.
type JobInput struct {
	Job *batchv1.Job `json:"job"`
}

// ErrJobRunning is the retryable error of RunJob while the Job runs.
const ErrJobRunning = "JobRunning"

// RunJob creates the Job when missing (a Job of the same name run with other inputs, by its hash
// annotation, is deleted and created anew) and reports it: it fails retryably while the Job runs, so the
// retry policy paces the wait, and returns its state once it completed or failed (a failed Job stays
// failed here: DeleteFailedJob, before a new run, has it run again).
func (k *Kube) RunJob(ctx context.Context, in JobInput) (*JobState, error) {
	job := in.Job
	jobs := k.Core.BatchV1().Jobs(job.Namespace)
	name := job.Namespace + "/" + job.Name
	cur, err := jobs.Get(ctx, job.Name, metav1.GetOptions{})
	if err == nil && ManagedByOther(cur.Labels) != "" {
		return nil, errManagedByOther("Job "+name, ManagedByOther(cur.Labels))
	}
	if err == nil && cur.DeletionTimestamp != nil {
		return nil, temporal.NewApplicationError("Job "+name+" is being replaced", ErrJobRunning)
	}
	if err == nil && cur.Annotations[hashAnnotation] != job.Annotations[hashAnnotation] {
		bg := metav1.DeletePropagationBackground
		if err := jobs.Delete(ctx, job.Name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
			return nil, Classify("delete Job "+name, err)
		}
		return nil, temporal.NewApplicationError(fmt.Sprintf("Job %s ran with other inputs: deleted, to run again", name), ErrJobRunning)
	}
	if apierrors.IsNotFound(err) {
		cur, err = jobs.Create(ctx, job, metav1.CreateOptions{FieldManager: "stackflow"})
		if apierrors.IsAlreadyExists(err) {
			return nil, temporal.NewApplicationError("Job "+name+" is being replaced", ErrJobRunning)
		}
	}
	if err != nil {
		return nil, Classify("run Job "+name, err)
	}
	st := &JobState{}
	for _, c := range cur.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			st.Done = true
		case batchv1.JobFailed:
			st.Done, st.Failed = true, true
		}
	}
	if !st.Done {
		msg := "Job " + name + " running"
		if t, _ := k.podTrouble(ctx, job.Namespace, map[string]string{"batch.kubernetes.io/job-name": job.Name}); t != "" {
			msg += ": " + t
		}
		return nil, temporal.NewApplicationError(msg, ErrJobRunning)
	}
	pods, err := k.Core.CoreV1().Pods(job.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job.Name})
	if err == nil {
		var last *corev1.ContainerStateTerminated
		for _, p := range pods.Items {
			for _, cs := range p.Status.ContainerStatuses {
				if t := cs.State.Terminated; t != nil && (last == nil || t.FinishedAt.After(last.FinishedAt.Time)) {
					last = t
				}
			}
		}
		if last != nil {
			st.Message = strings.TrimSpace(last.Message)
		}
	}
	return st, nil
}

// jobFailed says whether the Job's Failed condition is true.
func jobFailed(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// JobRef names a Job.
type JobRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// DeleteFailedJob deletes the Job when it failed, and says whether it did: a new run of a Job (a retry,
// a person's or automatic) runs what failed again rather than reading its old failure. A Job that
// completed or still runs, or none, is left alone.
func (k *Kube) DeleteFailedJob(ctx context.Context, ref JobRef) (bool, error) {
	jobs := k.Core.BatchV1().Jobs(ref.Namespace)
	name := ref.Namespace + "/" + ref.Name
	cur, err := jobs.Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, Classify("read Job "+name, err)
	}
	if ManagedByOther(cur.Labels) != "" {
		return false, errManagedByOther("Job "+name, ManagedByOther(cur.Labels))
	}
	if !jobFailed(cur) || cur.DeletionTimestamp != nil {
		return false, nil
	}
	bg := metav1.DeletePropagationBackground
	if err := jobs.Delete(ctx, ref.Name, metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &cur.UID}}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return false, Classify("delete Job "+name, err)
	}
	return true, nil
}

// hashAnnotation is the annotation workflows put the inputs' hash in (workflows/nova.HashAnnotation).
const hashAnnotation = "stackflow.io/config-hash"

// ChildInput is a child object (a CR a workflow owns) to create or update.
type ChildInput struct {
	Ref    lifecycle.ObjectRef `json:"ref"`
	Labels map[string]string   `json:"labels,omitempty"`
	Spec   json.RawMessage     `json:"spec"`
	Owner  *Owner              `json:"owner,omitempty"`
}

// ApplyChild creates the object or replaces its spec; it returns the object's UID.
func (k *Kube) ApplyChild(ctx context.Context, in ChildInput) (string, error) {
	var spec any
	if err := json.Unmarshal(in.Spec, &spec); err != nil {
		return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("spec of %s: %v", in.Ref, err), ErrInvalid, err)
	}
	r := k.resource(in.Ref)
	var uid string
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := r.Get(ctx, in.Ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
			u.SetAPIVersion(in.Ref.APIVersion())
			u.SetKind(in.Ref.Kind)
			u.SetName(in.Ref.Name)
			u.SetNamespace(in.Ref.Namespace)
			u.SetLabels(k.labels(in.Labels))
			if in.Owner != nil {
				u.SetOwnerReferences([]metav1.OwnerReference{ownerRef(*in.Owner)})
			}
			created, err := r.Create(ctx, u, metav1.CreateOptions{FieldManager: "stackflow"})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(gvr(in.Ref).GroupResource(), in.Ref.Name, err)
			}
			if err == nil {
				uid = string(created.GetUID())
			}
			return err
		}
		if err != nil {
			return err
		}
		uid = string(cur.GetUID())
		before, _ := json.Marshal(cur.Object["spec"])
		after, _ := json.Marshal(spec)
		if string(before) == string(after) {
			return nil
		}
		cur.Object["spec"] = spec
		_, err = r.Update(ctx, cur, metav1.UpdateOptions{FieldManager: "stackflow"})
		return err
	})
	if err != nil {
		return "", Classify("apply "+in.Ref.String(), err)
	}
	return uid, nil
}

// CellsInput names cells of the Nova control plane in a namespace.
type CellsInput struct {
	Namespace string   `json:"namespace"`
	Cells     []string `json:"cells"`
	// Metadata names NovaMetadata services: WaitNoComputes also waits for the OVNMetadataAgents naming one.
	Metadata []string `json:"metadata,omitempty"`
}

// ErrComputesRemain is the retryable error of WaitNoComputes.
const ErrComputesRemain = "ComputesRemain"

// WaitNoComputes succeeds once no NovaExternalCompute of the namespace is in one of the cells and no
// OVNMetadataAgent names one of the metadata services, and fails retryably before, naming them (a cell
// with hosts cannot go: they would be lost to Nova; an agent deregisters with the Nova's service user).
func (k *Kube) WaitNoComputes(ctx context.Context, in CellsInput) error {
	ref := api.Ref("NovaExternalCompute", in.Namespace, "")
	list, err := k.resource(ref).List(ctx, metav1.ListOptions{})
	if err != nil {
		return Classify("list novaexternalcomputes in "+in.Namespace, err)
	}
	var using []string
	for _, u := range list.Items {
		if cell, _, _ := unstructured.NestedString(u.Object, "spec", "cellName"); slices.Contains(in.Cells, cell) {
			using = append(using, "NovaExternalCompute "+u.GetName())
		}
	}
	if len(in.Metadata) > 0 {
		ref := api.Ref("OVNMetadataAgent", in.Namespace, "")
		agents, err := k.resource(ref).List(ctx, metav1.ListOptions{})
		if err != nil {
			return Classify("list ovnmetadataagents in "+in.Namespace, err)
		}
		for _, u := range agents.Items {
			if md, _, _ := unstructured.NestedString(u.Object, "spec", "novaMetadata"); slices.Contains(in.Metadata, md) {
				using = append(using, "OVNMetadataAgent "+u.GetName())
			}
		}
	}
	if len(using) == 0 {
		return nil
	}
	slices.Sort(using)
	return temporal.NewApplicationError(fmt.Sprintf("the Nova still has users (%s): they go first", strings.Join(using, ", ")), ErrComputesRemain)
}
