package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	rabbithole "github.com/michaelklishin/rabbit-hole/v2"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/deploy/local"
)

// Ref is the ObjectRef the bridge derives for an object of kind served at gvr; lifecycle.WorkflowID of
// it is the ID of the object's workflow.
func Ref(kind string, gvr schema.GroupVersionResource, u *unstructured.Unstructured) lifecycle.ObjectRef {
	return lifecycle.ObjectRef{Group: gvr.Group, Version: gvr.Version, Kind: kind, Resource: gvr.Resource,
		Namespace: u.GetNamespace(), Name: u.GetName(), UID: string(u.GetUID())}
}

// Executions lists every run (open or closed) in the run's Temporal namespace whose workflow ID starts
// with prefix, except runs that continued as new (object workflows continue as new after every
// reconcile; a chain of runs is one execution, listed as its current or last run): run IDs by workflow
// ID.
func (e *Env) Executions(ctx context.Context, prefix string) (map[string][]string, error) {
	out := map[string][]string{}
	var token []byte
	for {
		resp, err := e.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace:     e.TemporalNamespace,
			Query:         fmt.Sprintf("WorkflowId STARTS_WITH %q AND ExecutionStatus != 'ContinuedAsNew'", prefix),
			PageSize:      1000,
			NextPageToken: token,
		})
		if err != nil {
			return nil, fmt.Errorf("list workflows %s*: %w", prefix, err)
		}
		for _, x := range resp.Executions {
			out[x.Execution.WorkflowId] = append(out[x.Execution.WorkflowId], x.Execution.RunId)
		}
		token = resp.NextPageToken
		if len(token) == 0 {
			return out, nil
		}
	}
}

// History is the whole history of workflow id: the events of every run of it, from its first run to its
// current one (object workflows continue as new after every reconcile). Event IDs restart with each run;
// a position in the slice orders events across runs.
func (e *Env) History(ctx context.Context, id string) ([]*historypb.HistoryEvent, error) {
	runs, err := Runs(ctx, e.Temporal, id)
	var out []*historypb.HistoryEvent
	for _, r := range runs {
		out = append(out, r...)
	}
	return out, err
}

// Runs is the history of every run of workflow id, first run first: each run's first event names the
// run it continues (if any), so the chain is followed back from the current run.
func Runs(ctx context.Context, c client.Client, id string) ([][]*historypb.HistoryEvent, error) {
	var runs [][]*historypb.HistoryEvent
	for runID := ""; ; {
		var events []*historypb.HistoryEvent
		it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return nil, fmt.Errorf("history of %s (run %q): %w", id, runID, err)
			}
			events = append(events, ev)
		}
		if len(events) == 0 {
			break
		}
		runs = append([][]*historypb.HistoryEvent{events}, runs...)
		if runID = events[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId(); runID == "" {
			break
		}
	}
	return runs, nil
}

// WorkflowStatus is the status of the current run of workflow id.
func (e *Env) WorkflowStatus(ctx context.Context, id string) (enumspb.WorkflowExecutionStatus, error) {
	d, err := e.Temporal.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return 0, fmt.Errorf("describe workflow %s: %w", id, err)
	}
	return d.WorkflowExecutionInfo.Status, nil
}

// resource is gvr in namespace ns, or cluster-wide when ns is empty.
func (e *Env) resource(gvr schema.GroupVersionResource, ns string) dynamic.ResourceInterface {
	if ns == "" {
		return e.Dyn.Resource(gvr)
	}
	return e.Dyn.Resource(gvr).Namespace(ns)
}

// DeleteAndWait deletes the named objects of gvr in namespace ns (cluster-scoped when empty) and waits
// until they are gone, that is until their workflows removed the finalizer, or ctx ends. Objects that
// are already gone count as deleted.
func (e *Env) DeleteAndWait(ctx context.Context, gvr schema.GroupVersionResource, ns string, names ...string) error {
	r := e.resource(gvr, ns)
	for _, n := range names {
		if err := r.Delete(ctx, n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s %s: %w", gvr.Resource, n, err)
		}
	}
	for _, n := range names {
		for {
			_, err := r.Get(ctx, n, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s %s still exists (finalizer not removed by its workflow): %w", gvr.Resource, n, ctx.Err())
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

// ForceDelete removes objects a failed test left, so later runs start clean. It deletes them, gives their
// workflows half a minute to tear down what they made (servers, ports: a later run would meet them, or the
// quota they hold), then takes the finalizers off what is still there (which tells their workflows to let
// go). It reports nothing: the objects may well be gone already.
func (e *Env) ForceDelete(gvr schema.GroupVersionResource, ns string, names ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := e.resource(gvr, ns)
	var left []string
	for _, n := range names {
		if err := r.Delete(ctx, n, metav1.DeleteOptions{}); err == nil || !apierrors.IsNotFound(err) {
			left = append(left, n)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); len(left) > 0 && time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		left = slices.DeleteFunc(left, func(n string) bool {
			_, err := r.Get(ctx, n, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
	}
	for _, n := range left {
		_, _ = r.Patch(ctx, n, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	}
}

// Create creates an object from YAML in namespace ns and, when the test ends, deletes it and waits until
// its workflow let it go (reporting an error after 5 minutes). An object the test deleted itself is fine.
func (e *Env) Create(t testing.TB, gvr schema.GroupVersionResource, ns, manifest string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	if ns != "" {
		u.SetNamespace(ns)
	}
	out, err := e.resource(gvr, ns).Create(context.Background(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s %s: %v", gvr.Resource, u.GetName(), err)
	}
	t.Cleanup(func() { e.DeleteAndWaitT(t, gvr, ns, out.GetName()) })
	return out
}

// DeleteAndWaitT is DeleteAndWait within 5 minutes, reporting a failure as a test error.
func (e *Env) DeleteAndWaitT(t testing.TB, gvr schema.GroupVersionResource, ns, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := e.DeleteAndWait(ctx, gvr, ns, name); err != nil {
		t.Error(err)
	}
}

// NamespaceWithSecrets creates namespace ns holding copies of the stack's Secrets (of its system
// namespace) names: what a user of the stack starts from.
func (e *Env) NamespaceWithSecrets(ctx context.Context, ns string, names ...string) error {
	if _, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	for _, name := range names {
		src, err := e.Kube.CoreV1().Secrets(local.SystemNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("stack Secret %s: %w", name, err)
		}
		if err := e.CreateSecret(ctx, ns, name, src.Data); err != nil {
			return err
		}
	}
	return nil
}

// CreateSecret creates a Secret in namespace ns.
func (e *Env) CreateSecret(ctx context.Context, ns, name string, data map[string][]byte) error {
	_, err := e.Kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: data}, metav1.CreateOptions{})
	return err
}

// SecretValue is a key of a Secret of namespace ns; a missing Secret or key fails the test.
func (e *Env) SecretValue(t testing.TB, ns, name, key string) string {
	t.Helper()
	sec, err := e.Kube.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Secret %s/%s: %v", ns, name, err)
	}
	if len(sec.Data[key]) == 0 {
		t.Fatalf("Secret %s/%s has no key %s", ns, name, key)
	}
	return string(sec.Data[key])
}

// BrokerAdmin is the stack's RabbitMQ management API as its administrator, whom the Secret
// local.MessageBusAdminSecretName of namespace ns names.
func (e *Env) BrokerAdmin(t testing.TB, ns string) *rabbithole.Client {
	t.Helper()
	secret := local.MessageBusAdminSecretName
	c, err := rabbithole.NewClient(e.SecretValue(t, ns, secret, "management_url"), e.SecretValue(t, ns, secret, "username"), e.SecretValue(t, ns, secret, "password"))
	if err != nil {
		t.Fatalf("RabbitMQ's management API: %v", err)
	}
	return c
}
