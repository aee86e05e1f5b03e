package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stackflow/stackflow/api/lifecycle"
)

// What tests read of objects while they watch a scenario: one object, its conditions and status fields,
// a one-line summary, and a wait that logs what it sees.

// Get reads an object of gvr in namespace ns (cluster-scoped when empty); nil when it does not exist.
// Any other error fails the test.
func (e *Env) Get(t testing.TB, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := e.resource(gvr, ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("get %s %s/%s: %v", gvr.Resource, ns, name, err)
	}
	return u
}

// Condition returns the condition of type typ of an object (nil when absent or when u is nil).
func Condition(u *unstructured.Unstructured, typ string) *metav1.Condition {
	if u == nil {
		return nil
	}
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	b, _ := json.Marshal(raw)
	var conds []metav1.Condition
	_ = json.Unmarshal(b, &conds)
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// Str is a field of an object as a string: strings as they are, anything else as JSON, "" when absent.
func Str(u *unstructured.Unstructured, fields ...string) string {
	if u == nil {
		return ""
	}
	v, _, _ := unstructured.NestedFieldNoCopy(u.Object, fields...)
	if v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// Summary is a one-line view of an object's status for progress logs.
func Summary(u *unstructured.Unstructured) string {
	if u == nil {
		return "<absent>"
	}
	return fmt.Sprintf("phase=%s step=%q ready=%s", Str(u, "status", "phase"), Str(u, "status", "currentStep"), CondString(Condition(u, lifecycle.ConditionReady)))
}

// CondString is a condition as status/reason: message.
func CondString(c *metav1.Condition) string {
	if c == nil {
		return "<none>"
	}
	return fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
}

// Ready reports whether an object acted on its newest generation and says Ready=True.
func Ready(u *unstructured.Unstructured) bool {
	if u == nil {
		return false
	}
	c := Condition(u, lifecycle.ConditionReady)
	obs, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	return c != nil && c.Status == metav1.ConditionTrue && obs >= u.GetGeneration()
}

// WaitFor polls check every second until it holds, logging what it sees whenever that changes; it fails
// the test after timeout with the last observation.
func WaitFor(t TB, what string, timeout time.Duration, check func() (bool, string)) {
	t.Helper()
	start := time.Now()
	last := ""
	for {
		ok, seen := check()
		if seen != last {
			t.Logf("[%5.1fs] %s: %s", time.Since(start).Seconds(), what, seen)
			last = seen
		}
		if ok {
			return
		}
		if time.Since(start) > timeout {
			t.Fatalf("%s: not reached within %s; last seen: %s", what, timeout, seen)
		}
		time.Sleep(time.Second)
	}
}
