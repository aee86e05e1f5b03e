package bridge

import (
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// The table of served kinds must match the CRDs stackflow installs: group, served version, plural and
// scope. A mismatch would make the bridge skip a kind (or watch the wrong resource) at run time.
func TestServedKindsMatchCRDs(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "deploy", "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no CRDs in deploy/crds")
	}
	crds := map[string]apiextensionsv1.CustomResourceDefinition{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(b, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		crds[crd.Spec.Names.Kind] = crd
	}
	for _, k := range Served {
		if k.GVR.Group == "" {
			continue // core kinds have no CRD
		}
		crd, ok := crds[k.Kind]
		if !ok {
			t.Errorf("served kind %s has no CRD in deploy/crds", k.Kind)
			continue
		}
		if crd.Spec.Group != k.GVR.Group || crd.Spec.Names.Plural != k.GVR.Resource {
			t.Errorf("%s: table has %s, CRD has %s.%s", k.Kind, k.GVR.GroupResource(), crd.Spec.Names.Plural, crd.Spec.Group)
		}
		if got := crd.Spec.Scope == apiextensionsv1.ClusterScoped; got != k.ClusterScoped {
			t.Errorf("%s: table says cluster scoped %v, CRD scope is %s", k.Kind, k.ClusterScoped, crd.Spec.Scope)
		}
		served := false
		for _, v := range crd.Spec.Versions {
			served = served || (v.Name == k.GVR.Version && v.Served)
		}
		if !served {
			t.Errorf("%s: CRD does not serve version %s", k.Kind, k.GVR.Version)
		}
	}
	for kind := range crds {
		if _, unknown := Select([]string{kind}); len(unknown) > 0 {
			t.Errorf("CRD %s is not in the bridge's table of served kinds", kind)
		}
	}
}
