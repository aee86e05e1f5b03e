// Package kube holds the activities that talk to the Kubernetes API server: reading stackflow's objects
// and writing their status (with the Events that tell their story), finalizers, the objects workflows
// derive (inventories, ConfigMaps, Deployments, Jobs, child CRs, Secrets of generated passwords) and
// Node labels. Kubernetes errors are classified beside it (Classify): 4xx permanent, conflicts, 429 and
// 5xx retried. Like every activities package (one per backend: kube, helm, ansible, openstack,
// database, messagebus), it is a struct holding its clients whose exported methods are the activities,
// registered on its task queue (see api/lifecycle); their names are the methods' names.
package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/stackflow/stackflow/api/lifecycle"
)

// Kube holds the Kubernetes activities: reading objects, patching status, finalizers, child objects.
type Kube struct {
	Core    kubernetes.Interface
	Dynamic dynamic.Interface
	// UIBase is the Temporal UI's base URL, used to link objects to their workflows.
	UIBase string
	// Namespace is the Temporal namespace, part of the UI link.
	Namespace string
	// Events records the Events of status changes on objects (none when nil).
	Events *EventRecorder
	// WatchFilter is the worker's watch filter (lifecycle.WatchFilterLabel): the objects the activities
	// create carry it, so the bridge of the same filter serves them.
	WatchFilter string
}

// labels returns the labels of an object the activities create: these, plus the watch filter when set.
func (k *Kube) labels(labels map[string]string) map[string]string {
	if k.WatchFilter == "" {
		return labels
	}
	out := make(map[string]string, len(labels)+1)
	for key, v := range labels {
		out[key] = v
	}
	out[lifecycle.WatchFilterLabel] = k.WatchFilter
	return out
}

// NewKube builds the Kubernetes activities from a REST config.
func NewKube(cfg *rest.Config, uiBase, namespace string) (*Kube, error) {
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	return &Kube{Core: core, Dynamic: dyn, UIBase: uiBase, Namespace: namespace}, nil
}

// Error types of Kubernetes activities that retrying cannot fix.
const (
	ErrInvalid   = "KubeInvalid"
	ErrForbidden = "KubeForbidden"
	// ErrManagedByOther: the object of that name belongs to another tool (Helm, an operator).
	ErrManagedByOther = "ManagedByOther"
)

// ManagedByLabel is the label naming the tool that manages an object; stackflow's objects say stackflow.
const ManagedByLabel = "app.kubernetes.io/managed-by"

// ManagedByOther names the tool that manages an object with these labels when it is not stackflow, or
// "": stackflow neither takes over nor deletes what another tool manages (an OpenStack-Helm release's
// nova-api Deployment beside a NovaAPI named nova-api, say). Objects with no such label are a person's.
func ManagedByOther(labels map[string]string) string {
	if m := labels[ManagedByLabel]; m != "" && m != "stackflow" {
		return m
	}
	return ""
}

// errManagedByOther refuses to take over an object another tool manages.
func errManagedByOther(what, tool string) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s exists and is managed by %s: stackflow does not take it over (name this object otherwise, or use another namespace)", what, tool), ErrManagedByOther, nil)
}

// Classify turns an API error into a non-retryable application error when retrying cannot help (4xx other
// than conflict and throttling), and leaves it retryable otherwise (409, 429, 5xx, timeouts).
func Classify(op string, err error) error {
	if err == nil {
		return nil
	}
	// An activity's own verdict stands: wrapped, it would reach Temporal as a retryable error.
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return err
	}
	switch {
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsMethodNotSupported(err):
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: %v", op, err), ErrInvalid, err)
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: %v", op, err), ErrForbidden, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

func gvr(ref lifecycle.ObjectRef) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: ref.Group, Version: ref.Version, Resource: ref.Resource}
}

func (k *Kube) resource(ref lifecycle.ObjectRef) dynamic.ResourceInterface {
	r := k.Dynamic.Resource(gvr(ref))
	if ref.Namespace != "" {
		return r.Namespace(ref.Namespace)
	}
	return r
}

// Object is what a workflow learns about its object: metadata it acts on and the spec as raw JSON for the
// kind's own type. It never carries status, managed fields, the last-applied-configuration annotation (a
// second copy of the spec) or Secret data: it goes into workflow history.
type Object struct {
	// Exists is false when the object (with this UID) is gone.
	Exists      bool              `json:"exists"`
	Generation  int64             `json:"generation"`
	Deleting    bool              `json:"deleting"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Spec        json.RawMessage   `json:"spec,omitempty"`
}

// LastAppliedAnnotation is kubectl's copy of the applied object; reads leave it out.
const LastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// objectOf is what a read returns of u: see Object.
func objectOf(u *unstructured.Unstructured) (Object, error) {
	obj := Object{
		Exists:      true,
		Generation:  lifecycle.EffectiveGeneration(u.GetGeneration(), u.GetAnnotations()),
		Deleting:    u.GetDeletionTimestamp() != nil,
		Labels:      u.GetLabels(),
		Annotations: u.GetAnnotations(),
	}
	if _, ok := obj.Annotations[LastAppliedAnnotation]; ok {
		obj.Annotations = maps.Clone(obj.Annotations)
		delete(obj.Annotations, LastAppliedAnnotation)
		if len(obj.Annotations) == 0 {
			obj.Annotations = nil
		}
	}
	if spec, ok := u.Object["spec"]; ok {
		b, err := json.Marshal(spec)
		if err != nil {
			return obj, fmt.Errorf("encode spec of %s %s: %w", u.GetKind(), u.GetName(), err)
		}
		obj.Spec = b
	}
	return obj, nil
}

// GetObject reads the object named by ref. An object re-created under the same name (another UID) counts
// as gone: it belongs to another workflow.
func (k *Kube) GetObject(ctx context.Context, ref lifecycle.ObjectRef) (*Object, error) {
	u, err := k.resource(ref).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return &Object{}, nil
	}
	if err != nil {
		return nil, Classify("get "+ref.String(), err)
	}
	if ref.UID != "" && string(u.GetUID()) != ref.UID {
		return &Object{}, nil
	}
	obj, err := objectOf(u)
	if err != nil {
		return nil, err
	}
	return &obj, nil
}

// ListInput names a kind (Ref's group, version, resource and kind; its namespace, or every namespace
// when empty; its name is ignored) and an optional label selector.
type ListInput struct {
	Ref           lifecycle.ObjectRef `json:"ref"`
	LabelSelector string              `json:"labelSelector,omitempty"`
	// Status, when set, returns each object's status too (what of it, the filter says): one list
	// instead of a read per object.
	Status *StatusFilter `json:"status,omitempty"`
}

// ListedObject is one object of a list: its reference (with namespace, name and UID) and what a read
// returns of it (see Object).
type ListedObject struct {
	Ref lifecycle.ObjectRef `json:"ref"`
	Object
	// Created is the object's creation time (RFC 3339), which orders objects claiming the same thing.
	Created string `json:"created,omitempty"`
	// Status is the object's status when the list asked for it.
	Status *ObjectStatus `json:"status,omitempty"`
}

// ListObjects lists the objects of a kind, sorted by namespace and name.
func (k *Kube) ListObjects(ctx context.Context, in ListInput) ([]ListedObject, error) {
	list, err := k.resource(in.Ref).List(ctx, metav1.ListOptions{LabelSelector: in.LabelSelector})
	if err != nil {
		where := "every namespace"
		if in.Ref.Namespace != "" {
			where = in.Ref.Namespace
		}
		return nil, Classify("list "+in.Ref.Resource+" in "+where, err)
	}
	out := make([]ListedObject, 0, len(list.Items))
	for i := range list.Items {
		u := &list.Items[i]
		r := in.Ref
		r.Name, r.Namespace, r.UID = u.GetName(), u.GetNamespace(), string(u.GetUID())
		obj, err := objectOf(u)
		if err != nil {
			return nil, err
		}
		lo := ListedObject{Ref: r, Object: obj, Created: u.GetCreationTimestamp().UTC().Format(time.RFC3339)}
		if in.Status != nil {
			lo.Status = statusOf(u, *in.Status)
		}
		out = append(out, lo)
	}
	slices.SortFunc(out, func(a, b ListedObject) int {
		return strings.Compare(a.Ref.Namespace+"/"+a.Ref.Name, b.Ref.Namespace+"/"+b.Ref.Name)
	})
	return out, nil
}

// StatusPatch is what a workflow writes into its object's status. Nil or empty fields are left alone,
// except Conditions, which are merged by type.
type StatusPatch struct {
	Ref                lifecycle.ObjectRef `json:"ref"`
	ObservedGeneration *int64              `json:"observedGeneration,omitempty"`
	Phase              string              `json:"phase,omitempty"`
	CurrentStep        *string             `json:"currentStep,omitempty"`
	WorkflowID         string              `json:"workflowID,omitempty"`
	RunID              string              `json:"runID,omitempty"`
	Conditions         []metav1.Condition  `json:"conditions,omitempty"`
	// Fields are kind-specific status fields, set at the top level of status (JSON values).
	Fields map[string]json.RawMessage `json:"fields,omitempty"`
}

// PatchStatus merges p into the object's status through the status subresource, retrying on conflicts.
// It is idempotent: writing the same patch twice leaves the same status (condition transition times only
// move when a condition's status changes). A gone object is not an error: there is nothing to report on.
func (k *Kube) PatchStatus(ctx context.Context, p StatusPatch) error {
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		u, err := k.resource(p.Ref).Get(ctx, p.Ref.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Ref.UID != "" && string(u.GetUID()) != p.Ref.UID {
			return nil
		}
		status, _, _ := unstructured.NestedMap(u.Object, "status")
		if status == nil {
			status = map[string]any{}
		}
		before, _ := json.Marshal(status)
		if err := k.mergeStatus(status, p); err != nil {
			return err
		}
		after, _ := json.Marshal(status)
		if string(before) == string(after) {
			return nil
		}
		u.Object["status"] = status
		if _, err = k.resource(p.Ref).UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: "stackflow"}); err != nil {
			return err
		}
		var old map[string]any
		_ = json.Unmarshal(before, &old)
		k.Events.Record(p.Ref, StatusEvents(old, status))
		return nil
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return Classify("patch status of "+p.Ref.String(), err)
}

func (k *Kube) mergeStatus(status map[string]any, p StatusPatch) error {
	if p.ObservedGeneration != nil {
		status["observedGeneration"] = *p.ObservedGeneration
	}
	if p.Phase != "" {
		status["phase"] = p.Phase
	}
	if p.CurrentStep != nil {
		if *p.CurrentStep == "" {
			delete(status, "currentStep")
		} else {
			status["currentStep"] = *p.CurrentStep
		}
	}
	if p.WorkflowID != "" {
		status["workflowID"] = p.WorkflowID
		if k.UIBase != "" {
			status["workflowURL"] = WorkflowURL(k.UIBase, k.Namespace, p.WorkflowID, p.RunID)
		}
	}
	if len(p.Conditions) > 0 {
		var conds []metav1.Condition
		if raw, ok := status["conditions"]; ok {
			b, _ := json.Marshal(raw)
			_ = json.Unmarshal(b, &conds)
		}
		for _, c := range p.Conditions {
			if c.LastTransitionTime.IsZero() {
				c.LastTransitionTime = metav1.NewTime(time.Now().Truncate(time.Second))
			}
			meta.SetStatusCondition(&conds, c)
		}
		var generic []any
		b, _ := json.Marshal(conds)
		if err := json.Unmarshal(b, &generic); err != nil {
			return err
		}
		status["conditions"] = generic
	}
	for key, raw := range p.Fields {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("status field %s: %v", key, err), ErrInvalid, err)
		}
		if v == nil {
			delete(status, key)
		} else {
			status[key] = v
		}
	}
	return nil
}

// WorkflowURL links to a workflow run in the Temporal UI.
func WorkflowURL(uiBase, namespace, workflowID, runID string) string {
	u := fmt.Sprintf("%s/namespaces/%s/workflows/%s", uiBase, url.PathEscape(namespace), url.PathEscape(workflowID))
	if runID != "" {
		u += "/" + url.PathEscape(runID) + "/history"
	}
	return u
}

// RemoveFinalizer drops stackflow's finalizer from the object, the last step of every teardown. The patch
// tests the UID, so a re-created object of the same name is never touched.
func (k *Kube) RemoveFinalizer(ctx context.Context, ref lifecycle.ObjectRef) error {
	u, err := k.resource(ref).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return Classify("get "+ref.String(), err)
	}
	if ref.UID != "" && string(u.GetUID()) != ref.UID {
		return nil
	}
	i := slices.Index(u.GetFinalizers(), lifecycle.Finalizer)
	if i < 0 {
		return nil
	}
	patch, _ := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": string(u.GetUID())},
		{"op": "test", "path": fmt.Sprintf("/metadata/finalizers/%d", i), "value": lifecycle.Finalizer},
		{"op": "remove", "path": fmt.Sprintf("/metadata/finalizers/%d", i)},
	})
	_, err = k.resource(ref).Patch(ctx, ref.Name, types.JSONPatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	// A failed test (the list moved under us) is a 422 Invalid; it is retryable here because the next
	// attempt reads the list again.
	if apierrors.IsInvalid(err) {
		return fmt.Errorf("remove finalizer of %s: %w", ref, err)
	}
	return Classify("remove finalizer of "+ref.String(), err)
}

// NodeInfo is what the OpenstackNode workflows need to know of a Kubernetes Node.
type NodeInfo struct {
	Exists bool              `json:"exists"`
	UID    string            `json:"uid,omitempty"`
	Ready  bool              `json:"ready"`
	Labels map[string]string `json:"labels,omitempty"`
	// RoleLabelsManaged says stackflow changed the Node's role labels; SiteRoleLabels are the ones the
	// site had given it before (AnnotationSiteRoleLabels).
	RoleLabelsManaged bool              `json:"roleLabelsManaged,omitempty"`
	SiteRoleLabels    map[string]string `json:"siteRoleLabels,omitempty"`
}

// GetNode reads a Kubernetes Node.
func (k *Kube) GetNode(ctx context.Context, name string) (*NodeInfo, error) {
	n, err := k.Core.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return &NodeInfo{}, nil
	}
	if err != nil {
		return nil, Classify("get node "+name, err)
	}
	info := &NodeInfo{Exists: true, UID: string(n.UID), Labels: n.Labels}
	site, managed, err := siteRoleLabels(n.Annotations)
	if err != nil {
		return nil, err
	}
	info.RoleLabelsManaged, info.SiteRoleLabels = managed, site
	for _, c := range n.Status.Conditions {
		if c.Type == "Ready" && c.Status == "True" {
			info.Ready = true
		}
	}
	return info, nil
}

// EnsureInput names a child object to create when missing.
type EnsureInput struct {
	Ref         lifecycle.ObjectRef `json:"ref"`
	Labels      map[string]string   `json:"labels,omitempty"`
	Annotations map[string]string   `json:"annotations,omitempty"`
	Spec        json.RawMessage     `json:"spec,omitempty"`
	// ExistingOnly makes ApplySpec patch an object that exists and leave a missing one missing.
	ExistingOnly bool `json:"existingOnly,omitempty"`
}

// EnsureObject creates the object when it does not exist and adopts it when it does (a retry after a
// lost response, or an object a person created first); it returns the object's UID.
func (k *Kube) EnsureObject(ctx context.Context, in EnsureInput) (string, error) {
	r := k.resource(in.Ref)
	if cur, err := r.Get(ctx, in.Ref.Name, metav1.GetOptions{}); err == nil {
		return string(cur.GetUID()), nil
	} else if !apierrors.IsNotFound(err) {
		return "", Classify("get "+in.Ref.String(), err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion(in.Ref.APIVersion())
	u.SetKind(in.Ref.Kind)
	u.SetName(in.Ref.Name)
	u.SetNamespace(in.Ref.Namespace)
	u.SetLabels(k.labels(in.Labels))
	u.SetAnnotations(in.Annotations)
	if len(in.Spec) > 0 {
		var spec any
		if err := json.Unmarshal(in.Spec, &spec); err != nil {
			return "", temporal.NewNonRetryableApplicationError(fmt.Sprintf("spec of %s: %v", in.Ref, err), ErrInvalid, err)
		}
		u.Object["spec"] = spec
	}
	created, err := r.Create(ctx, u, metav1.CreateOptions{FieldManager: "stackflow"})
	if apierrors.IsAlreadyExists(err) {
		cur, err := r.Get(ctx, in.Ref.Name, metav1.GetOptions{})
		if err != nil {
			return "", Classify("get "+in.Ref.String(), err)
		}
		return string(cur.GetUID()), nil
	}
	if err != nil {
		return "", Classify("create "+in.Ref.String(), err)
	}
	return string(created.GetUID()), nil
}

// DeleteObject deletes the object (only the one with ref.UID when set); a missing object is not an error.
func (k *Kube) DeleteObject(ctx context.Context, ref lifecycle.ObjectRef) error {
	if cur, err := k.resource(ref).Get(ctx, ref.Name, metav1.GetOptions{}); err == nil {
		if tool := ManagedByOther(cur.GetLabels()); tool != "" {
			activity.GetLogger(ctx).Info("not deleting an object another tool manages", "object", ref.String(), "managedBy", tool)
			return nil
		}
	}
	// Background: a batch/v1 Job deleted with the API's default orphans its pods (kept for old
	// clients), which then outlive their owner.
	bg := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &bg}
	if ref.UID != "" {
		uid := types.UID(ref.UID)
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err := k.resource(ref).Delete(ctx, ref.Name, opts)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) && ref.UID != "" {
		// Conflict on the UID precondition: the name now belongs to another object, ours is gone.
		return nil
	}
	return Classify("delete "+ref.String(), err)
}

// ErrStillPresent is the retryable error of WaitDeleted; the workflow's retry policy paces the waiting.
const ErrStillPresent = "StillPresent"

// WaitDeleted succeeds once the object (with ref.UID when set) is gone, and fails retryably before.
func (k *Kube) WaitDeleted(ctx context.Context, ref lifecycle.ObjectRef) error {
	u, err := k.resource(ref).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return Classify("get "+ref.String(), err)
	}
	if ref.UID != "" && string(u.GetUID()) != ref.UID || ManagedByOther(u.GetLabels()) != "" {
		// Another object of that name, or one DeleteObject left to the tool that manages it.
		return nil
	}
	return temporal.NewApplicationError(fmt.Sprintf("%s still present (finalizers %v)", ref, u.GetFinalizers()), ErrStillPresent)
}

// LocalKube is the Kubernetes capability of the workflow worker, run as local activities: it writes the
// status of the objects whose workflows run there, and reads them. A local activity costs the history
// one marker event in the workflow task that asked for it, instead of an activity task's three events
// and often a workflow task of its own; at scale those writes were the largest share of Temporal's
// work, and a read queued behind hundreds of others on the Kubernetes queue held a data plane's start.
type LocalKube struct {
	k *Kube
}

// NewLocalKube writes status and reads objects with k's clients (its Events recorder included).
func NewLocalKube(k *Kube) *LocalKube { return &LocalKube{k: k} }

// PatchStatus is Kube.PatchStatus, under the same activity name: a run recorded with the regular
// activity and one with the local activity write the same status.
func (s *LocalKube) PatchStatus(ctx context.Context, p StatusPatch) error {
	return s.k.PatchStatus(ctx, p)
}

// GetObject is Kube.GetObject, under the same activity name.
func (s *LocalKube) GetObject(ctx context.Context, ref lifecycle.ObjectRef) (*Object, error) {
	return s.k.GetObject(ctx, ref)
}

// ListObjects is Kube.ListObjects, under the same activity name.
func (s *LocalKube) ListObjects(ctx context.Context, in ListInput) ([]ListedObject, error) {
	return s.k.ListObjects(ctx, in)
}
