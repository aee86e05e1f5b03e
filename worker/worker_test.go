package worker

import (
	"context"
	"strings"
	"testing"

	"github.com/stackflow/stackflow/workflows"
)

func TestRunRefusesUnknownQueue(t *testing.T) {
	err := Run(context.Background(), Config{Queues: []string{"no-such-queue"}})
	if err == nil || !strings.Contains(err.Error(), "no-such-queue") {
		t.Fatalf("Run with an unknown queue = %v, want an error naming it", err)
	}
}

// Workflow types are registered by name: a duplicate or empty name would make one definition shadow
// another on the workflow queue.
func TestWorkflowNamesUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range workflows.All() {
		if d.Name == "" || d.Fn == nil {
			t.Errorf("definition %+v has no name or function", d)
		}
		if seen[d.Name] {
			t.Errorf("workflow %s registered twice", d.Name)
		}
		seen[d.Name] = true
	}
	for _, kind := range []string{"Node", "OpenstackNode"} {
		if !seen[kind] {
			t.Errorf("no workflow for the bridge's kind %s", kind)
		}
	}
}
