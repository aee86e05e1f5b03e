package v1beta1_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/stackflow/stackflow/api/infrastructure/v1beta1"
)

// TestMachineImmutabilityCoversEverySpecField guards the OpenStackMachine spec's CEL immutability rule,
// which names each field (providerID aside, which may be set once): a field added to the spec without
// being added to the rule would silently become mutable.
func TestMachineImmutabilityCoversEverySpecField(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "crds", "infrastructure.cluster.x-k8s.io_openstackmachines.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	var rule string
	for _, v := range spec.XValidations {
		if strings.Contains(v.Message, "spec is immutable") {
			rule = v.Rule
		}
	}
	if rule == "" {
		t.Fatal("no spec immutability rule on OpenStackMachine")
	}
	typ := reflect.TypeFor[v1beta1.OpenStackMachineSpec]()
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if name == "providerID" {
			continue
		}
		if !strings.Contains(rule, "self."+name+" == oldSelf."+name) {
			t.Errorf("spec field %s is not covered by the immutability rule", name)
		}
	}
}
