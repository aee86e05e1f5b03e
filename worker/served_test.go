package worker

import (
	"testing"

	"github.com/stackflow/stackflow/bridge"
	"github.com/stackflow/stackflow/workflows"
)

// Every kind the bridge serves must have a workflow of the same name: otherwise its objects would get a
// finalizer that no workflow ever removes.
func TestEveryServedKindHasAWorkflow(t *testing.T) {
	registered := map[string]bool{}
	for _, d := range workflows.All() {
		registered[d.Name] = true
	}
	for _, k := range bridge.Served {
		if !registered[k.Kind] {
			t.Errorf("the bridge serves %s but no workflow of that name is registered", k.Kind)
		}
	}
}
