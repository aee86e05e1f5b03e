package apitest

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/api"
)

// TestCRDsEstablishedAndExplained checks that the API server serves every kind, with its status
// subresource, printer columns and a documented schema that kubectl explain shows.
func TestCRDsEstablishedAndExplained(t *testing.T) {
	kubectl, err := st.Kubectl()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range api.Kinds {
		t.Run(k.GVK.Kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			crd, err := apiext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, k.CRDName(), metav1.GetOptions{})
			if err != nil {
				t.Fatalf("CRD %s: %v", k.CRDName(), err)
			}
			for _, cond := range []apiextensionsv1.CustomResourceDefinitionConditionType{apiextensionsv1.Established, apiextensionsv1.NamesAccepted} {
				if !crdCondition(crd, cond) {
					t.Errorf("CRD %s is not %s: %+v", crd.Name, cond, crd.Status.Conditions)
				}
			}
			v := crd.Spec.Versions[0]
			if v.Name != k.GVK.Version || v.Subresources == nil || v.Subresources.Status == nil {
				t.Errorf("CRD %s: version %s without status subresource", crd.Name, v.Name)
			}
			var columns []string
			for _, c := range v.AdditionalPrinterColumns {
				columns = append(columns, c.Name)
			}
			if !slices.Contains(columns, "Age") || !(slices.Contains(columns, "Ready") || slices.Contains(columns, "Status")) {
				t.Errorf("CRD %s printer columns %v lack Age and Ready (or Status)", crd.Name, columns)
			}
			status := v.Schema.OpenAPIV3Schema.Properties["status"].Properties
			for _, f := range []string{"conditions", "observedGeneration", "phase", "currentStep", "workflowID", "workflowURL"} {
				if _, ok := status[f]; !ok {
					t.Errorf("CRD %s: status lacks the common field %s", crd.Name, f)
				}
			}

			// kubectl explain reads the published OpenAPI, which trails the CRD by a moment.
			spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
			var out string
			deadline := time.Now().Add(30 * time.Second)
			for {
				b, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", st.Kubeconfig, "explain", k.Resource+".spec",
					"--api-version", k.GVK.GroupVersion().String()).CombinedOutput()
				out = string(b)
				if err == nil || time.Now().After(deadline) {
					if err != nil {
						t.Fatalf("kubectl explain %s.spec: %v\n%s", k.Resource, err, out)
					}
					break
				}
				time.Sleep(time.Second)
			}
			if !strings.Contains(out, "KIND:       "+k.GVK.Kind) || !strings.Contains(out, "FIELDS:") {
				t.Errorf("kubectl explain %s.spec does not describe the kind:\n%s", k.Resource, out)
			}
			if first, _, _ := strings.Cut(strings.TrimSpace(spec.Description), "\n"); first == "" || !strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(first), " ")) {
				t.Errorf("kubectl explain %s.spec lacks the spec's description %q:\n%s", k.Resource, first, out)
			}
			for field := range spec.Properties {
				if !strings.Contains(out, "  "+field+"\t") && !strings.Contains(out, "  "+field+" ") {
					t.Errorf("kubectl explain %s.spec does not list field %s", k.Resource, field)
				}
			}
		})
	}
}

func crdCondition(crd *apiextensionsv1.CustomResourceDefinition, typ apiextensionsv1.CustomResourceDefinitionConditionType) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == typ {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

// TestOpenstackNodeColumns checks what `kubectl get osknodes` prints: NAME STATUS ROLES PROFILE AGE,
// with the values the workflow writes into status.
func TestOpenstackNodeColumns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kubectl, err := st.Kubectl()
	if err != nil {
		t.Fatal(err)
	}
	obj := sample(t, "OpenstackNode", "columns")
	res := resource(t, "OpenstackNode")
	created, err := res.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create OpenstackNode: %v", err)
	}
	defer res.Delete(context.Background(), created.GetName(), metav1.DeleteOptions{})
	created.Object["status"] = map[string]any{"status": "Ready", "roles": []any{"control", "compute"}, "roleNames": "control,compute", "profile": "default", "phase": "Ready"}
	if _, err := res.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update OpenstackNode status: %v", err)
	}
	out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", st.Kubeconfig, "get", "osknodes", created.GetName()).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get osknodes: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		t.Fatalf("kubectl get osknodes printed %d lines, want header and one row:\n%s", len(lines), out)
	}
	if got := strings.Fields(lines[0]); !slices.Equal(got, []string{"NAME", "STATUS", "ROLES", "PROFILE", "AGE"}) {
		t.Errorf("columns %v, want NAME STATUS ROLES PROFILE AGE", got)
	}
	row := strings.Fields(lines[1])
	// ROLES plain and comma-separated, as KupenStack shows them (not a JSON list).
	if len(row) != 5 || row[0] != created.GetName() || row[1] != "Ready" || row[2] != "control,compute" || row[3] != "default" {
		t.Errorf("row %q does not show the node's status, roles and profile", lines[1])
	}
}
