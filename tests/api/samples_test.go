package apitest

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stackflow/stackflow/api"
	"github.com/stackflow/stackflow/api/lifecycle"
	novav1beta1 "github.com/stackflow/stackflow/api/nova/v1beta1"
)

// TestSamplesAccepted creates an example of every kind (the first of deploy/samples, else of
// tests/api/testdata) in the test namespace and deletes it again: what `make run` applies is valid.
func TestSamplesAccepted(t *testing.T) {
	for _, k := range api.Kinds {
		t.Run(k.GVK.Kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			obj := sample(t, k.GVK.Kind, "sample")
			if obj.GetAPIVersion() != k.GVK.GroupVersion().String() {
				t.Fatalf("sample of %s has apiVersion %s, want %s", k.GVK.Kind, obj.GetAPIVersion(), k.GVK.GroupVersion())
			}
			res := resource(t, k.GVK.Kind)
			created, err := res.Create(ctx, obj, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("sample %s refused: %v", k.GVK.Kind, err)
			}
			if err := res.Delete(ctx, created.GetName(), metav1.DeleteOptions{}); err != nil {
				t.Fatalf("delete sample %s: %v", k.GVK.Kind, err)
			}
		})
	}
	if len(samples) != len(api.Kinds) {
		t.Errorf("deploy/samples and tests/api/testdata hold %d kinds, want an example of each of the %d kinds", len(samples), len(api.Kinds))
	}
}

// TestGoTypesRoundTrip creates an object from the Go types, reads it back with the server's defaults
// applied, and writes the common status through the status subresource: the Go types and the CRD schema
// agree.
func TestGoTypesRoundTrip(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in := &novav1beta1.NovaAPI{
		TypeMeta:   metav1.TypeMeta{APIVersion: novav1beta1.SchemeGroupVersion.String(), Kind: "NovaAPI"},
		ObjectMeta: metav1.ObjectMeta{Name: "typed-api", Namespace: testNS},
		Spec: novav1beta1.NovaAPISpec{
			NovaServiceBase:     novav1beta1.NovaServiceBase{CustomServiceConfig: "[DEFAULT]\ndebug = true\n"},
			NovaServiceAuth:     novav1beta1.NovaServiceAuth{Secret: "osp-secret", KeystoneAuthURL: "http://127.0.0.1:5000/v3"},
			APIDatabaseHostname: "127.0.0.1",
			Cell0Database:       novav1beta1.Cell0Database{Cell0DatabaseHostname: "127.0.0.1"},
		},
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(in)
	if err != nil {
		t.Fatal(err)
	}
	res := resource(t, "NovaAPI")
	created, err := res.Create(ctx, unstructuredOf(u), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create NovaAPI from the Go type: %v", err)
	}
	defer res.Delete(context.Background(), created.GetName(), metav1.DeleteOptions{})
	var out novav1beta1.NovaAPI
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(created.Object, &out); err != nil {
		t.Fatal(err)
	}
	s := out.Spec
	if s.Replicas == nil || *s.Replicas != 1 || s.ServiceUser != "nova" || s.APIDatabaseUser != "nova_api" ||
		s.PasswordSelectors.Service != "NovaPassword" || s.PasswordSelectors.APIDatabase != "NovaAPIDatabasePassword" {
		t.Errorf("server defaults not applied: replicas %v serviceUser %q apiDatabaseUser %q selectors %+v",
			s.Replicas, s.ServiceUser, s.APIDatabaseUser, s.PasswordSelectors)
	}

	out.Status.CommonStatus = lifecycle.CommonStatus{
		ObservedGeneration: out.Generation,
		Phase:              lifecycle.PhaseRunning,
		CurrentStep:        "render configuration",
		WorkflowID:         "NovaAPI/" + testNS + "/typed-api/0000",
		Conditions: []metav1.Condition{{
			Type: lifecycle.ConditionReady, Status: metav1.ConditionFalse, Reason: lifecycle.ReasonReconciling,
			Message: "rendering", LastTransitionTime: metav1.Now(),
		}},
	}
	out.Status.ReadyCount = 0
	u, err = runtime.DefaultUnstructuredConverter.ToUnstructured(&out)
	if err != nil {
		t.Fatal(err)
	}
	updated, err := res.UpdateStatus(ctx, unstructuredOf(u), metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("write the common status: %v", err)
	}
	var back novav1beta1.NovaAPI
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(updated.Object, &back); err != nil {
		t.Fatal(err)
	}
	if back.Status.Phase != lifecycle.PhaseRunning || back.Status.CurrentStep != "render configuration" ||
		len(back.Status.Conditions) != 1 || back.Status.Conditions[0].Reason != lifecycle.ReasonReconciling {
		t.Errorf("common status did not round-trip: %+v", back.Status.CommonStatus)
	}
}
