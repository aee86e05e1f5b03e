package kube

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/stackflow/stackflow/activities/internal/outcome"
	"github.com/stackflow/stackflow/api"
	"github.com/stackflow/stackflow/api/lifecycle"
)

// The activities on stackflow's own objects (reads, status, finalizers, children) against client-go's
// fake dynamic client: what exists, and under which UID, decides what they write.

// newDynamic is a fake dynamic client that lists every kind stackflow serves, holding objs.
func newDynamic(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	lists := map[schema.GroupVersionResource]string{}
	for _, k := range api.Kinds {
		lists[k.GVR()] = k.GVK.Kind + "List"
	}
	c := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), lists, objs...)
	// The tracker ignores a delete's preconditions; the API server refuses with a conflict.
	c.PrependReactor("delete", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := a.(k8stesting.DeleteAction)
		p := d.GetDeleteOptions().Preconditions
		if p == nil || p.UID == nil {
			return false, nil, nil
		}
		cur, err := c.Tracker().Get(a.GetResource(), a.GetNamespace(), d.GetName())
		if err == nil && cur.(metav1.Object).GetUID() != *p.UID {
			return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), d.GetName(), errors.New("UID precondition failed"))
		}
		return false, nil, nil
	})
	return c
}

// inActivity runs an activity of k in Temporal's test activity environment (for the activity's logger),
// returning its error.
func inActivity(t *testing.T, k *Kube, fn any, args ...any) error {
	t.Helper()
	env := (&testsuite.WorkflowTestSuite{}).NewTestActivityEnvironment()
	env.RegisterActivity(k)
	_, err := env.ExecuteActivity(fn, args...)
	return err
}

// obj is an object of a served kind with a UID and the given fields (metadata merged in).
func obj(kind, ns, name, uid string, fields map[string]any) *unstructured.Unstructured {
	k, _ := api.Lookup(kind)
	u := &unstructured.Unstructured{Object: map[string]any{}}
	for key, v := range fields {
		u.Object[key] = v
	}
	u.SetAPIVersion(k.GVK.GroupVersion().String())
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetUID(types.UID(uid))
	return u
}

// verbs are the verbs (with subresource) the client saw, in order, reads left out.
func verbs(c *dynamicfake.FakeDynamicClient) []string {
	var out []string
	for _, a := range c.Actions() {
		switch a.GetVerb() {
		case "get", "list", "watch":
			continue
		}
		v := a.GetVerb()
		if s := a.GetSubresource(); s != "" {
			v += "/" + s
		}
		out = append(out, v)
	}
	return out
}

func get(t *testing.T, c *dynamicfake.FakeDynamicClient, ref lifecycle.ObjectRef) *unstructured.Unstructured {
	t.Helper()
	u, err := c.Resource(gvr(ref)).Namespace(ref.Namespace).Get(context.Background(), ref.Name, metav1.GetOptions{})
	require.NoError(t, err)
	return u
}

func TestGetObject(t *testing.T) {
	node := obj("OpenStackDataPlaneNode", "ns", "compute-0", "u-1", map[string]any{
		"metadata": map[string]any{"generation": int64(4), "labels": map[string]any{"role": "compute"},
			"annotations": map[string]any{LastAppliedAnnotation: "{}", "nova.openstack.org/cell": "cell1"}},
		"spec":   map[string]any{"hostName": "compute-0"},
		"status": map[string]any{"phase": "Ready"},
	})
	for _, tc := range []struct {
		name string
		uid  string
		want Object
	}{
		{"the object: metadata and spec, no status or kubectl's copy", "u-1", Object{Exists: true, Generation: 4,
			Labels: map[string]string{"role": "compute"}, Annotations: map[string]string{"nova.openstack.org/cell": "cell1"},
			Spec: json.RawMessage(`{"hostName":"compute-0"}`)}},
		{"any UID asked: the object", "", Object{Exists: true, Generation: 4,
			Labels: map[string]string{"role": "compute"}, Annotations: map[string]string{"nova.openstack.org/cell": "cell1"},
			Spec: json.RawMessage(`{"hostName":"compute-0"}`)}},
		{"re-created under the name: gone for this workflow", "u-0", Object{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := &Kube{Dynamic: newDynamic(node.DeepCopy())}
			ref := api.Ref("OpenStackDataPlaneNode", "ns", "compute-0")
			ref.UID = tc.uid
			got, err := k.GetObject(context.Background(), ref)
			require.NoError(t, err)
			require.Equal(t, tc.want, *got)
		})
	}
	t.Run("missing: gone", func(t *testing.T) {
		k := &Kube{Dynamic: newDynamic()}
		got, err := k.GetObject(context.Background(), api.Ref("OpenStackDataPlaneNode", "ns", "compute-9"))
		require.NoError(t, err)
		require.False(t, got.Exists)
	})
	t.Run("forbidden: permanent", func(t *testing.T) {
		c := newDynamic()
		c.PrependReactor("get", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "openstackdataplanenodes"}, "compute-0", errors.New("rbac"))
		})
		_, err := (&Kube{Dynamic: c}).GetObject(context.Background(), api.Ref("OpenStackDataPlaneNode", "ns", "compute-0"))
		requirePermanent(t, err, ErrForbidden)
	})
}

func TestListObjects(t *testing.T) {
	mk := func(ns, name, phase string) runtime.Object {
		return obj("OpenStackServer", ns, name, "u-"+name, map[string]any{
			"metadata": map[string]any{"generation": int64(2), "labels": map[string]any{"tier": "web"}},
			"status": map[string]any{"phase": phase, "observedGeneration": int64(2), "instanceID": "i-" + name,
				"conditions": []any{
					map[string]any{"type": "Ready", "status": "True", "reason": "Active", "lastTransitionTime": "2026-01-01T00:00:00Z"},
					map[string]any{"type": "Progressing", "status": "False", "reason": "Done", "lastTransitionTime": "2026-01-01T00:00:00Z"},
				}},
		})
	}
	c := newDynamic(mk("b", "s1", "Ready"), mk("a", "s2", "Ready"), mk("a", "s1", "Creating"))
	k := &Kube{Dynamic: c}

	all, err := k.ListObjects(context.Background(), ListInput{Ref: api.Ref("OpenStackServer", "", "")})
	require.NoError(t, err)
	var keys []string
	for _, o := range all {
		keys = append(keys, o.Ref.Namespace+"/"+o.Ref.Name+"@"+o.Ref.UID)
		require.Nil(t, o.Status, "no status asked")
		require.True(t, o.Exists)
	}
	require.Equal(t, []string{"a/s1@u-s1", "a/s2@u-s2", "b/s1@u-s1"}, keys, "sorted by namespace and name, each with its UID")

	one, err := k.ListObjects(context.Background(), ListInput{Ref: api.Ref("OpenStackServer", "a", ""),
		Status: &StatusFilter{Fields: []string{"instanceID", "absent"}, Conditions: []string{"Ready"}}})
	require.NoError(t, err)
	require.Len(t, one, 2)
	st := one[0].Status
	require.Equal(t, "Creating", st.Phase)
	require.Equal(t, int64(2), st.ObservedGeneration)
	require.Equal(t, map[string]json.RawMessage{"instanceID": json.RawMessage(`"i-s1"`)}, st.Fields, "only the fields asked that exist")
	require.Len(t, st.Conditions, 1)
	require.Equal(t, "Ready", st.Conditions[0].Type, "only the conditions asked")
	require.True(t, st.Ready())

	c.PrependReactor("list", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd")
	})
	_, err = k.ListObjects(context.Background(), ListInput{Ref: api.Ref("OpenStackServer", "a", "")})
	requireOutcome(t, err, "retryable", "")
}

// requireJSON compares v as JSON (the fake's numbers come back as int64 or float64).
func requireJSON(t *testing.T, want string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	require.JSONEq(t, want, string(b))
}

// requireOutcome is outcome.Require.
var requireOutcome = outcome.Require

func TestPatchStatus(t *testing.T) {
	ref := api.Ref("OpenStackServer", "ns", "web-0")
	ref.UID = "u-1"
	gen := int64(3)
	step := "createServer"
	empty := ""
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Creating", Message: "creating the server",
		LastTransitionTime: metav1.Date(2026, 1, 1, 0, 0, 0, 0, metav1.Now().Location())}
	existing := func(status map[string]any) *unstructured.Unstructured {
		fields := map[string]any{"spec": map[string]any{"flavor": "m1.tiny"}}
		if status != nil {
			fields["status"] = status
		}
		return obj("OpenStackServer", "ns", "web-0", "u-1", fields)
	}
	for _, tc := range []struct {
		name     string
		existing runtime.Object
		uid      string
		patch    StatusPatch
		writes   []string
		want     map[string]any
		errType  string
	}{
		{"first status: every field written through the status subresource", existing(nil), "u-1",
			StatusPatch{ObservedGeneration: &gen, Phase: "Creating", CurrentStep: &step, WorkflowID: "wf-1", RunID: "r-1",
				Conditions: []metav1.Condition{ready}, Fields: map[string]json.RawMessage{"instanceID": json.RawMessage(`"i-1"`)}},
			[]string{"update/status"},
			map[string]any{"observedGeneration": int64(3), "phase": "Creating", "currentStep": "createServer", "workflowID": "wf-1",
				"workflowURL": "http://ui/namespaces/default/workflows/wf-1/r-1/history", "instanceID": "i-1",
				"conditions": []any{map[string]any{"type": "Ready", "status": "False", "reason": "Creating", "message": "creating the server",
					"lastTransitionTime": "2026-01-01T00:00:00Z"}}}, ""},
		{"the same again: nothing written", existing(map[string]any{"phase": "Creating", "instanceID": "i-1"}), "u-1",
			StatusPatch{Phase: "Creating", Fields: map[string]json.RawMessage{"instanceID": json.RawMessage(`"i-1"`)}},
			nil, map[string]any{"phase": "Creating", "instanceID": "i-1"}, ""},
		{"an empty step and a null field remove them; other fields stay",
			existing(map[string]any{"phase": "Ready", "currentStep": "x", "instanceID": "i-1", "kept": "yes"}), "u-1",
			StatusPatch{CurrentStep: &empty, Fields: map[string]json.RawMessage{"instanceID": json.RawMessage(`null`)}},
			[]string{"update/status"}, map[string]any{"phase": "Ready", "kept": "yes"}, ""},
		{"another object of the name: left alone", existing(map[string]any{"phase": "Ready"}), "u-2",
			StatusPatch{Phase: "Deleting"}, nil, map[string]any{"phase": "Ready"}, ""},
		{"a field that is no JSON: permanent", existing(nil), "u-1",
			StatusPatch{Fields: map[string]json.RawMessage{"bad": json.RawMessage(`{`)}}, nil, nil, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newDynamic(tc.existing)
			k := &Kube{Dynamic: c, UIBase: "http://ui", Namespace: "default"}
			p := tc.patch
			p.Ref = ref
			p.Ref.UID = tc.uid
			err := k.PatchStatus(context.Background(), p)
			if tc.errType != "" {
				requirePermanent(t, err, tc.errType)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.writes, verbs(c))
			got, _, _ := unstructured.NestedMap(get(t, c, ref).Object, "status")
			require.Equal(t, tc.want, got)
		})
	}
	t.Run("gone: nothing to report on", func(t *testing.T) {
		require.NoError(t, (&Kube{Dynamic: newDynamic()}).PatchStatus(context.Background(), StatusPatch{Ref: ref, Phase: "Ready"}))
	})
	t.Run("a conflict is retried with a fresh read", func(t *testing.T) {
		c := newDynamic(existing(nil))
		conflicts := 1
		c.PrependReactor("update", "openstackservers", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if conflicts > 0 {
				conflicts--
				return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "openstackservers"}, "web-0", errors.New("changed"))
			}
			return false, nil, nil
		})
		require.NoError(t, (&Kube{Dynamic: c}).PatchStatus(context.Background(), StatusPatch{Ref: ref, Phase: "Ready"}))
		require.Equal(t, []string{"update/status", "update/status"}, verbs(c))
		require.Equal(t, "Ready", get(t, c, ref).Object["status"].(map[string]any)["phase"])
	})
	t.Run("a condition that keeps its status keeps its transition time", func(t *testing.T) {
		c := newDynamic(existing(map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "False",
			"reason": "Creating", "message": "old", "lastTransitionTime": "2025-06-01T00:00:00Z"}}}))
		cond := ready
		cond.LastTransitionTime = metav1.Time{}
		cond.Message = "still creating"
		require.NoError(t, (&Kube{Dynamic: c}).PatchStatus(context.Background(), StatusPatch{Ref: ref, Conditions: []metav1.Condition{cond}}))
		conds := get(t, c, ref).Object["status"].(map[string]any)["conditions"].([]any)
		require.Equal(t, "2025-06-01T00:00:00Z", conds[0].(map[string]any)["lastTransitionTime"])
		require.Equal(t, "still creating", conds[0].(map[string]any)["message"])
	})
}

func TestRemoveFinalizer(t *testing.T) {
	withFinalizers := func(uid string, fin ...any) runtime.Object {
		return obj("Nova", "ns", "nova", uid, map[string]any{"metadata": map[string]any{"finalizers": fin}})
	}
	ref := api.Ref("Nova", "ns", "nova")
	ref.UID = "u-1"
	for _, tc := range []struct {
		name     string
		existing []runtime.Object
		writes   []string
		left     []string
	}{
		{"ours among others: only ours removed", []runtime.Object{withFinalizers("u-1", "other.io/x", lifecycle.Finalizer)},
			[]string{"patch"}, []string{"other.io/x"}},
		{"already removed: nothing written", []runtime.Object{withFinalizers("u-1", "other.io/x")}, nil, []string{"other.io/x"}},
		{"another object of the name: untouched", []runtime.Object{withFinalizers("u-2", lifecycle.Finalizer)}, nil,
			[]string{lifecycle.Finalizer}},
		{"gone: done", nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newDynamic(tc.existing...)
			require.NoError(t, (&Kube{Dynamic: c}).RemoveFinalizer(context.Background(), ref))
			require.Equal(t, tc.writes, verbs(c))
			if tc.existing != nil {
				require.Equal(t, tc.left, get(t, c, ref).GetFinalizers())
			}
		})
	}
	t.Run("the list moved under the patch: retried", func(t *testing.T) {
		c := newDynamic(withFinalizers("u-1", lifecycle.Finalizer))
		c.PrependReactor("patch", "novas", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewInvalid(schema.GroupKind{Group: "nova.openstack.org", Kind: "Nova"}, "nova", nil)
		})
		requireOutcome(t, (&Kube{Dynamic: c}).RemoveFinalizer(context.Background(), ref), "retryable", "")
	})
}

func TestEnsureObject(t *testing.T) {
	ref := api.Ref("OpenstackNode", "", "node-1")
	in := EnsureInput{Ref: ref, Labels: map[string]string{"app": "x"}, Spec: json.RawMessage(`{"profile":"default"}`)}
	t.Run("missing: created with labels and spec", func(t *testing.T) {
		c := newDynamic()
		_, err := (&Kube{Dynamic: c}).EnsureObject(context.Background(), in)
		require.NoError(t, err)
		require.Equal(t, []string{"create"}, verbs(c))
		u := get(t, c, ref)
		require.Equal(t, map[string]any{"profile": "default"}, u.Object["spec"])
		require.Equal(t, map[string]string{"app": "x"}, u.GetLabels())
	})
	t.Run("there already (a lost response, a person's): adopted as it is", func(t *testing.T) {
		c := newDynamic(obj("OpenstackNode", "", "node-1", "u-9", map[string]any{"spec": map[string]any{"profile": "mine"}}))
		uid, err := (&Kube{Dynamic: c}).EnsureObject(context.Background(), in)
		require.NoError(t, err)
		require.Equal(t, "u-9", uid)
		require.Empty(t, verbs(c))
		require.Equal(t, map[string]any{"profile": "mine"}, get(t, c, ref).Object["spec"])
	})
	t.Run("created meanwhile by another: its UID", func(t *testing.T) {
		c := newDynamic()
		c.PrependReactor("create", "openstacknodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
			u := obj("OpenstackNode", "", "node-1", "u-7", nil)
			require.NoError(t, c.Tracker().Add(u))
			return true, nil, apierrors.NewAlreadyExists(schema.GroupResource{Resource: "openstacknodes"}, "node-1")
		})
		uid, err := (&Kube{Dynamic: c}).EnsureObject(context.Background(), in)
		require.NoError(t, err)
		require.Equal(t, "u-7", uid)
	})
	t.Run("a spec that is no JSON: permanent", func(t *testing.T) {
		bad := in
		bad.Spec = json.RawMessage(`{`)
		_, err := (&Kube{Dynamic: newDynamic()}).EnsureObject(context.Background(), bad)
		requirePermanent(t, err, ErrInvalid)
	})
}

func TestApplySpec(t *testing.T) {
	ref := api.Ref("OpenstackNode", "", "node-1")
	have := func() runtime.Object {
		return obj("OpenstackNode", "", "node-1", "u-1", map[string]any{"spec": map[string]any{"profile": "default", "drain": true}})
	}
	for _, tc := range []struct {
		name      string
		existing  []runtime.Object
		spec      string
		existing0 bool
		writes    []string
		want      map[string]any
	}{
		{"missing: created", nil, `{"profile":"default"}`, false, []string{"create"}, map[string]any{"profile": "default"}},
		{"missing and existing only: left missing", nil, `{"profile":"default"}`, true, nil, nil},
		{"the same fields: nothing written", []runtime.Object{have()}, `{"profile":"default"}`, false, nil,
			map[string]any{"profile": "default", "drain": true}},
		{"a null for a field it lacks: nothing written", []runtime.Object{have()}, `{"profile":"default","gone":null}`, false, nil,
			map[string]any{"profile": "default", "drain": true}},
		{"a field changed and one removed: merge-patched", []runtime.Object{have()}, `{"profile":"big","drain":null}`, false,
			[]string{"patch"}, map[string]any{"profile": "big"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newDynamic(tc.existing...)
			_, err := (&Kube{Dynamic: c}).ApplySpec(context.Background(), EnsureInput{Ref: ref, Spec: json.RawMessage(tc.spec), ExistingOnly: tc.existing0})
			require.NoError(t, err)
			require.Equal(t, tc.writes, verbs(c))
			if tc.want == nil {
				_, err := c.Resource(gvr(ref)).Get(context.Background(), "node-1", metav1.GetOptions{})
				require.True(t, apierrors.IsNotFound(err))
				return
			}
			require.Equal(t, tc.want, get(t, c, ref).Object["spec"])
		})
	}
}

func TestApplyChild(t *testing.T) {
	ref := api.Ref("NovaAPI", "ns", "nova-api")
	owner := &Owner{APIVersion: "nova.openstack.org/v1beta1", Kind: "Nova", Name: "nova", UID: "u-nova"}
	in := ChildInput{Ref: ref, Labels: map[string]string{"app": "nova"}, Spec: json.RawMessage(`{"replicas":1}`), Owner: owner}
	t.Run("missing: created, owned", func(t *testing.T) {
		c := newDynamic()
		_, err := (&Kube{Dynamic: c}).ApplyChild(context.Background(), in)
		require.NoError(t, err)
		require.Equal(t, []string{"create"}, verbs(c))
		u := get(t, c, ref)
		require.Equal(t, "u-nova", string(u.GetOwnerReferences()[0].UID))
		requireJSON(t, `{"replicas":1}`, u.Object["spec"])
	})
	t.Run("the same spec: nothing written, its UID", func(t *testing.T) {
		c := newDynamic(obj("NovaAPI", "ns", "nova-api", "u-1", map[string]any{"spec": map[string]any{"replicas": int64(1)}}))
		uid, err := (&Kube{Dynamic: c}).ApplyChild(context.Background(), in)
		require.NoError(t, err)
		require.Equal(t, "u-1", uid)
		require.Empty(t, verbs(c))
	})
	t.Run("another spec: replaced whole", func(t *testing.T) {
		c := newDynamic(obj("NovaAPI", "ns", "nova-api", "u-1", map[string]any{"spec": map[string]any{"replicas": int64(3), "extra": "x"}}))
		uid, err := (&Kube{Dynamic: c}).ApplyChild(context.Background(), in)
		require.NoError(t, err)
		require.Equal(t, "u-1", uid)
		require.Equal(t, []string{"update"}, verbs(c))
		requireJSON(t, `{"replicas":1}`, get(t, c, ref).Object["spec"])
	})
	t.Run("created meanwhile: read again and updated", func(t *testing.T) {
		c := newDynamic()
		c.PrependReactor("create", "novaapis", func(k8stesting.Action) (bool, runtime.Object, error) {
			require.NoError(t, c.Tracker().Add(obj("NovaAPI", "ns", "nova-api", "u-5", map[string]any{"spec": map[string]any{"replicas": int64(2)}})))
			return true, nil, apierrors.NewAlreadyExists(schema.GroupResource{Resource: "novaapis"}, "nova-api")
		})
		uid, err := (&Kube{Dynamic: c}).ApplyChild(context.Background(), in)
		require.NoError(t, err)
		require.Equal(t, "u-5", uid)
		requireJSON(t, `{"replicas":1}`, get(t, c, ref).Object["spec"])
	})
	t.Run("a spec that is no JSON: permanent", func(t *testing.T) {
		bad := in
		bad.Spec = json.RawMessage(`[`)
		_, err := (&Kube{Dynamic: newDynamic()}).ApplyChild(context.Background(), bad)
		requirePermanent(t, err, ErrInvalid)
	})
}

func TestDeleteObjectAndWaitDeleted(t *testing.T) {
	ref := api.Ref("NovaCell", "ns", "nova-cell1")
	ref.UID = "u-1"
	for _, tc := range []struct {
		name     string
		existing []runtime.Object
		deleted  bool
		// waitErr is WaitDeleted's verdict afterwards: "" done, or its retryable error type.
		waitErr string
	}{
		{"ours: deleted", []runtime.Object{obj("NovaCell", "ns", "nova-cell1", "u-1", nil)}, true, ""},
		{"ours with a finalizer: deleting, waited for",
			[]runtime.Object{obj("NovaCell", "ns", "nova-cell1", "u-1", map[string]any{"metadata": map[string]any{"finalizers": []any{lifecycle.Finalizer}}})},
			false, ErrStillPresent},
		{"another object of the name: kept, not waited for", []runtime.Object{obj("NovaCell", "ns", "nova-cell1", "u-2", nil)}, false, ""},
		{"another tool's: kept, not waited for", []runtime.Object{obj("NovaCell", "ns", "nova-cell1", "u-1",
			map[string]any{"metadata": map[string]any{"labels": map[string]any{ManagedByLabel: "Helm"}}})}, false, ""},
		{"gone: done", nil, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newDynamic(tc.existing...)
			if tc.waitErr != "" {
				// The fake has no finalizers: the delete is answered as the API server would, by marking it.
				c.PrependReactor("delete", "novacells", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, nil })
			}
			k := &Kube{Dynamic: c}
			require.NoError(t, inActivity(t, k, k.DeleteObject, ref))
			_, err := c.Resource(gvr(ref)).Namespace("ns").Get(context.Background(), "nova-cell1", metav1.GetOptions{})
			require.Equal(t, tc.deleted, apierrors.IsNotFound(err))
			err = k.WaitDeleted(context.Background(), ref)
			if tc.waitErr == "" {
				require.NoError(t, err)
				return
			}
			requireOutcome(t, err, "retryable", "")
			require.Contains(t, err.Error(), lifecycle.Finalizer)
		})
	}
	t.Run("the UID precondition fails (the name was taken meanwhile): ours is gone", func(t *testing.T) {
		c := newDynamic(obj("NovaCell", "ns", "nova-cell1", "u-1", nil))
		c.PrependReactor("delete", "novacells", func(a k8stesting.Action) (bool, runtime.Object, error) {
			d := a.(k8stesting.DeleteAction)
			require.Equal(t, "u-1", string(*d.GetDeleteOptions().Preconditions.UID))
			require.Equal(t, metav1.DeletePropagationBackground, *d.GetDeleteOptions().PropagationPolicy)
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "novacells"}, "nova-cell1", errors.New("uid"))
		})
		require.NoError(t, (&Kube{Dynamic: c}).DeleteObject(context.Background(), ref))
	})
}

func TestGetObjectStatus(t *testing.T) {
	u := obj("NovaCell", "ns", "nova-cell1", "u-1", map[string]any{
		"metadata": map[string]any{"generation": int64(2)},
		"status":   map[string]any{"observedGeneration": float64(1), "phase": "Ready", "hosts": []any{"a"}},
	})
	k := &Kube{Dynamic: newDynamic(u)}
	ref := api.Ref("NovaCell", "ns", "nova-cell1")
	st, err := k.GetObjectStatus(context.Background(), StatusInput{Ref: ref, Fields: []string{"hosts"}})
	require.NoError(t, err)
	require.Equal(t, ObjectStatus{Exists: true, UID: "u-1", Generation: 2, ObservedGeneration: 1, Phase: "Ready",
		Fields: map[string]json.RawMessage{"hosts": json.RawMessage(`["a"]`)}}, *st)
	require.False(t, st.Ready(), "it has not observed its newest generation")

	ref.UID = "u-0"
	st, err = k.GetObjectStatus(context.Background(), StatusInput{Ref: ref})
	require.NoError(t, err)
	require.False(t, st.Exists, "another object of the name")
}

func TestCloudUsersAndWaitCloudUnused(t *testing.T) {
	c := newDynamic(
		obj("Nova", "ns", "nova", "u-1", map[string]any{"spec": map[string]any{"keystoneAdminSecret": "cloud-a"}}),
		obj("OpenStackServer", "ns", "web-0", "u-2", map[string]any{"spec": map[string]any{"identityRef": map[string]any{"name": "cloud-a"}}}),
		obj("OpenStackServer", "ns", "web-1", "u-3", map[string]any{"spec": map[string]any{"identityRef": map[string]any{"name": "cloud-b"}}}),
		obj("OpenStackMachine", "other", "m-0", "u-4", map[string]any{"spec": map[string]any{"identityRef": map[string]any{"name": "cloud-a"}}}),
		obj("OpenStackCluster", "ns", "c-0", "u-5", map[string]any{"spec": map[string]any{"identityRef": map[string]any{"name": "cloud-a"}}}),
	)
	k := &Kube{Dynamic: c}
	in := CloudInput{Namespace: "ns", Secret: "cloud-a"}
	users, err := k.CloudUsers(context.Background(), in)
	require.NoError(t, err)
	require.Equal(t, []string{"Nova/nova", "OpenStackCluster/c-0", "OpenStackServer/web-0"}, users, "this Secret's users of this namespace, sorted")
	err = k.WaitCloudUnused(context.Background(), in)
	requireOutcome(t, err, "retryable", "")
	require.Contains(t, err.Error(), "Nova/nova, OpenStackCluster/c-0, OpenStackServer/web-0")

	require.NoError(t, k.WaitCloudUnused(context.Background(), CloudInput{Namespace: "ns", Secret: "cloud-c"}))
}

func TestWaitNoComputes(t *testing.T) {
	c := newDynamic(
		obj("NovaExternalCompute", "ns", "compute-0", "u-1", map[string]any{"spec": map[string]any{"cellName": "cell1"}}),
		obj("NovaExternalCompute", "ns", "compute-1", "u-2", map[string]any{"spec": map[string]any{"cellName": "cell2"}}),
		obj("NovaExternalCompute", "other", "compute-2", "u-3", map[string]any{"spec": map[string]any{"cellName": "cell1"}}),
		obj("OVNMetadataAgent", "ns", "compute-1-metadata", "u-4", map[string]any{"spec": map[string]any{"novaMetadata": "nova-metadata"}}),
	)
	k := &Kube{Dynamic: c}
	for _, tc := range []struct {
		name string
		in   CellsInput
		// users are the users named in the error; none: done.
		users string
	}{
		{"a cell with a compute", CellsInput{Namespace: "ns", Cells: []string{"cell1"}}, "NovaExternalCompute compute-0"},
		{"cells and a metadata service in use", CellsInput{Namespace: "ns", Cells: []string{"cell1", "cell2"}, Metadata: []string{"nova-metadata"}},
			"NovaExternalCompute compute-0, NovaExternalCompute compute-1, OVNMetadataAgent compute-1-metadata"},
		{"cells of another namespace's computes", CellsInput{Namespace: "empty", Cells: []string{"cell1"}}, ""},
		{"an unused cell and metadata service", CellsInput{Namespace: "ns", Cells: []string{"cell3"}, Metadata: []string{"nova-cell3-metadata"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := k.WaitNoComputes(context.Background(), tc.in)
			if tc.users == "" {
				require.NoError(t, err)
				return
			}
			requireOutcome(t, err, "retryable", "")
			require.Contains(t, err.Error(), "("+tc.users+")")
		})
	}
}

// A status patch that moves the phase or a condition tells it as an Event on the object, through the
// Events API, from the component and identity the worker gave.
func TestPatchStatusRecordsEvents(t *testing.T) {
	ref := api.Ref("OpenStackServer", "ns", "web-0")
	ref.UID = "u-1"
	core := fake.NewClientset()
	rec := NewEventRecorder(core, "stackflow-worker", "worker-0")
	k := &Kube{Dynamic: newDynamic(obj("OpenStackServer", "ns", "web-0", "u-1", map[string]any{"status": map[string]any{"phase": "Creating"}})), Events: rec}
	require.NoError(t, k.PatchStatus(context.Background(), StatusPatch{Ref: ref, Phase: "Ready", Conditions: []metav1.Condition{
		{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Active", Message: "the server is ACTIVE"}}}))
	var events []corev1.Event
	require.Eventually(t, func() bool {
		list, err := core.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		events = list.Items
		return len(events) > 0
	}, 5*time.Second, 10*time.Millisecond, "the Event is sent")
	e := events[0]
	require.Equal(t, "web-0", e.InvolvedObject.Name)
	require.Equal(t, "u-1", string(e.InvolvedObject.UID))
	require.Equal(t, "OpenStackServer", e.InvolvedObject.Kind)
	require.Equal(t, corev1.EventSource{Component: "stackflow-worker", Host: "worker-0"}, e.Source)
	var all []string
	for _, e := range events {
		all = append(all, e.Reason+": "+e.Message)
	}
	require.Contains(t, strings.Join(all, "\n"), "Ready: the server is ACTIVE", "the condition that moved, with its message")

	// The same status again tells nothing new.
	n := len(events)
	require.NoError(t, k.PatchStatus(context.Background(), StatusPatch{Ref: ref, Phase: "Ready"}))
	time.Sleep(100 * time.Millisecond)
	list, err := core.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, n)

	var none *EventRecorder
	none.Record(ref, []StatusEvent{{Type: "Normal", Reason: "x"}}) // no recorder: nothing, no panic
}

// ApplyObject creates a derived object with its defaults (the images from the worker's environment, or
// the built-in ones) and then applies the owned fields with force; an existing object gets only the
// owned fields, so what a person changed of the defaults stays.
func TestApplyObject(t *testing.T) {
	ref := api.Ref("NovaExternalCompute", "ns", "compute-0")
	in := ApplyInput{Ref: ref, Labels: map[string]string{"node": "compute-0"},
		Owned:           map[string]json.RawMessage{"spec": json.RawMessage(`{"cellName":"cell1","dataplaneNodeName":"compute-0"}`)},
		Defaults:        map[string]json.RawMessage{"spec": json.RawMessage(`{"deploy":true,"cellName":"cell0"}`)},
		SpecEnvDefaults: map[string]string{"novaImage": "STACKFLOW_NOVA_COMPUTE_IMAGE", "libvirtImage": "STACKFLOW_NOVA_LIBVIRT_IMAGE"}}
	t.Setenv("STACKFLOW_NOVA_COMPUTE_IMAGE", "registry.local/nova-compute:1")
	t.Setenv("STACKFLOW_NOVA_LIBVIRT_IMAGE", "")
	// The fake has no server-side apply: the apply is recorded and answered with the object as it is.
	applied := func(c *dynamicfake.FakeDynamicClient) *[]map[string]any {
		var bodies []map[string]any
		c.PrependReactor("patch", "novaexternalcomputes", func(a k8stesting.Action) (bool, runtime.Object, error) {
			p := a.(k8stesting.PatchAction)
			require.Equal(t, types.ApplyPatchType, p.GetPatchType())
			var b map[string]any
			require.NoError(t, json.Unmarshal(p.GetPatch(), &b))
			bodies = append(bodies, b)
			cur, err := c.Tracker().Get(a.GetResource(), a.GetNamespace(), p.GetName())
			return true, cur, err
		})
		return &bodies
	}
	t.Run("missing: created with defaults, owned fields over them, then applied", func(t *testing.T) {
		c := newDynamic()
		bodies := applied(c)
		_, err := (&Kube{Dynamic: c}).ApplyObject(context.Background(), in)
		require.NoError(t, err)
		require.Equal(t, []string{"create", "patch"}, verbs(c))
		spec := get(t, c, ref).Object["spec"]
		requireJSON(t, `{"deploy":true,"cellName":"cell1","dataplaneNodeName":"compute-0",
			"novaImage":"registry.local/nova-compute:1","libvirtImage":"`+DefaultImages["STACKFLOW_NOVA_LIBVIRT_IMAGE"]+`"}`, spec)
		require.Len(t, *bodies, 1)
		requireJSON(t, `{"apiVersion":"nova.openstack.org/v1beta1","kind":"NovaExternalCompute",
			"metadata":{"name":"compute-0","namespace":"ns","labels":{"node":"compute-0"}},
			"spec":{"cellName":"cell1","dataplaneNodeName":"compute-0"}}`, (*bodies)[0])
	})
	t.Run("existing: only the owned fields applied, the defaults left as they are", func(t *testing.T) {
		c := newDynamic(obj("NovaExternalCompute", "ns", "compute-0", "u-1", map[string]any{"spec": map[string]any{"deploy": false, "novaImage": "mine"}}))
		bodies := applied(c)
		uid, err := (&Kube{Dynamic: c}).ApplyObject(context.Background(), in)
		require.NoError(t, err)
		require.Equal(t, "u-1", uid)
		require.Equal(t, []string{"patch"}, verbs(c))
		require.Len(t, *bodies, 1)
		require.NotContains(t, (*bodies)[0]["spec"], "deploy")
		require.NotContains(t, (*bodies)[0]["spec"], "novaImage")
	})
	t.Run("an owned field that is no JSON: permanent, nothing written", func(t *testing.T) {
		bad := in
		bad.Owned = map[string]json.RawMessage{"spec": json.RawMessage(`{`)}
		c := newDynamic()
		_, err := (&Kube{Dynamic: c}).ApplyObject(context.Background(), bad)
		requirePermanent(t, err, ErrInvalid)
		require.Empty(t, verbs(c))
	})
}

// A worker with a watch filter labels what its activities create with it, so the bridge of the same
// filter serves those objects; one without adds nothing. The callers' labels are kept, and left
// unchanged (they come from workflow inputs).
func TestCreatedObjectsCarryTheWatchFilter(t *testing.T) {
	patchAnswered := func(c *dynamicfake.FakeDynamicClient, resource string) {
		c.PrependReactor("patch", resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
			cur, err := c.Tracker().Get(a.GetResource(), a.GetNamespace(), a.(k8stesting.PatchAction).GetName())
			return true, cur, err
		})
	}
	for _, tc := range []struct {
		name   string
		ref    lifecycle.ObjectRef
		create func(k *Kube, labels map[string]string) error
	}{
		{"EnsureObject", api.Ref("OpenstackNode", "", "node-1"), func(k *Kube, l map[string]string) error {
			_, err := k.EnsureObject(context.Background(), EnsureInput{Ref: api.Ref("OpenstackNode", "", "node-1"), Labels: l})
			return err
		}},
		{"ApplyChild", api.Ref("NovaAPI", "ns", "nova-api"), func(k *Kube, l map[string]string) error {
			_, err := k.ApplyChild(context.Background(), ChildInput{Ref: api.Ref("NovaAPI", "ns", "nova-api"), Labels: l, Spec: json.RawMessage(`{}`)})
			return err
		}},
		{"ApplyObject", api.Ref("NovaExternalCompute", "ns", "compute-0"), func(k *Kube, l map[string]string) error {
			patchAnswered(k.Dynamic.(*dynamicfake.FakeDynamicClient), "novaexternalcomputes")
			_, err := k.ApplyObject(context.Background(), ApplyInput{Ref: api.Ref("NovaExternalCompute", "ns", "compute-0"), Labels: l,
				Owned: map[string]json.RawMessage{"spec": json.RawMessage(`{"cellName":"cell1"}`)}})
			return err
		}},
	} {
		for _, filter := range []string{"", "run-a"} {
			t.Run(tc.name+" filter="+filter, func(t *testing.T) {
				c := newDynamic()
				in := map[string]string{"app": "x"}
				require.NoError(t, tc.create(&Kube{Dynamic: c, WatchFilter: filter}, in))
				want := map[string]string{"app": "x"}
				if filter != "" {
					want[lifecycle.WatchFilterLabel] = filter
				}
				require.Equal(t, want, get(t, c, tc.ref).GetLabels())
				require.Equal(t, map[string]string{"app": "x"}, in, "the caller's labels")
			})
		}
	}
}
