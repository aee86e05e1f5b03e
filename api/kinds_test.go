package api_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/stackflow/stackflow/api"
)

// readCRDs decodes every CRD in deploy/crds, by name.
func readCRDs(t *testing.T) map[string]*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "deploy", "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in deploy/crds (run go generate ./api/...): %v", err)
	}
	out := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := dec.Decode(crd); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("decode %s: %v", f, err)
			}
			if crd.Name != "" {
				out[crd.Name] = crd
			}
		}
	}
	return out
}

// TestKindsMatchGeneratedCRDs keeps api.Kinds, the scheme and deploy/crds in step: a kind added to the
// types but not listed (or the other way round) fails here.
func TestKindsMatchGeneratedCRDs(t *testing.T) {
	crds := readCRDs(t)
	if len(crds) != len(api.Kinds) {
		t.Errorf("deploy/crds has %d CRDs, api.Kinds lists %d kinds", len(crds), len(api.Kinds))
	}
	scheme := runtime.NewScheme()
	if err := api.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for _, k := range api.Kinds {
		crd, ok := crds[k.CRDName()]
		if !ok {
			t.Errorf("%s: no CRD %s in deploy/crds", k.GVK.Kind, k.CRDName())
			continue
		}
		if crd.Spec.Names.Kind != k.GVK.Kind || crd.Spec.Names.Plural != k.Resource {
			t.Errorf("%s: CRD names kind %s plural %s, want %s %s", k.CRDName(), crd.Spec.Names.Kind, crd.Spec.Names.Plural, k.GVK.Kind, k.Resource)
		}
		wantScope := apiextensionsv1.NamespaceScoped
		if k.ClusterScoped {
			wantScope = apiextensionsv1.ClusterScoped
		}
		if crd.Spec.Scope != wantScope {
			t.Errorf("%s: scope %s, want %s", k.CRDName(), crd.Spec.Scope, wantScope)
		}
		served := false
		for _, v := range crd.Spec.Versions {
			if v.Name == k.GVK.Version && v.Served && v.Storage {
				served = true
				if v.Subresources == nil || v.Subresources.Status == nil {
					t.Errorf("%s: no status subresource", k.CRDName())
				}
			}
		}
		if !served {
			t.Errorf("%s: version %s not served as storage version", k.CRDName(), k.GVK.Version)
		}
		if !scheme.Recognizes(k.GVK) {
			t.Errorf("%s: not registered by api.AddToScheme", k.GVK)
		}
	}
}

// The table of served kinds names each object's workflow after its kind and refs the way the API server
// serves the kind; a misspelt kind is refused.
func TestServedKindsAndRefs(t *testing.T) {
	if api.Served[0].GVK.Kind != "Node" || !api.Served[0].BuiltIn || len(api.Served) != len(api.Kinds)+1 {
		t.Fatalf("Served is Kubernetes' Node and every kind of the module: %v", api.Served)
	}
	for _, k := range api.Served {
		if k.Workflow != k.GVK.Kind || k.TaskQueue() != "stackflow" {
			t.Errorf("%s: workflow %q on %q, want its kind on the workflow queue", k.GVK.Kind, k.Workflow, k.TaskQueue())
		}
		got, ok := api.Lookup(k.GVK.Kind)
		if !ok || got.Resource != k.Resource {
			t.Errorf("Lookup(%s) = %v, %v", k.GVK.Kind, got, ok)
		}
	}
	for _, tc := range []struct {
		kind, ns, name                   string
		group, version, resource, wantNS string
	}{
		{"NovaCell", "openstack", "cell1", "nova.openstack.org", "v1beta1", "novacells", "openstack"},
		{"OpenstackNode", "ignored", "control-0", "kupenstack.io", "v1alpha1", "openstacknodes", ""},
		{"Node", "", "compute-0", "", "v1", "nodes", ""},
	} {
		r := api.Ref(tc.kind, tc.ns, tc.name)
		if r.Group != tc.group || r.Version != tc.version || r.Resource != tc.resource || r.Namespace != tc.wantNS || r.Name != tc.name || r.Kind != tc.kind {
			t.Errorf("Ref(%s, %s, %s) = %+v", tc.kind, tc.ns, tc.name, r)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Ref of a kind that is not served must panic")
		}
	}()
	api.Ref("NovaCel", "ns", "x")
}
