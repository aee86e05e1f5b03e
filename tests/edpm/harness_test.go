package edpm

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/stackflow/stackflow/activities/ansible"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/tests/e2e"
)

func yamlUnmarshal(b []byte, v any) error { return yaml.Unmarshal(b, v) }

// startBridge runs a bridge for the data-plane kinds of the run's namespace with short leases.
func startBridge(t *testing.T) *e2e.Proc {
	return env.StartBridge(t, e2e.BridgeOptions{Identity: env.Run + "-bridge", Kinds: servedKinds, Namespaces: []string{ns}})
}

func startWorker(t *testing.T) *e2e.Proc {
	return env.StartWorker(t, e2e.WorkerOptions{Identity: env.Run + "-worker"})
}

// Resources of the kinds the tests create.
var (
	gvrRole = schema.GroupVersionResource{Group: "dataplane.openstack.org", Version: "v1beta1", Resource: "openstackdataplaneroles"}
	gvrNode = schema.GroupVersionResource{Group: "dataplane.openstack.org", Version: "v1beta1", Resource: "openstackdataplanenodes"}
	gvrDP   = schema.GroupVersionResource{Group: "dataplane.openstack.org", Version: "v1beta1", Resource: "openstackdataplanes"}
	gvrNEC  = schema.GroupVersionResource{Group: "nova.openstack.org", Version: "v1beta1", Resource: "novaexternalcomputes"}
	gvrCell = schema.GroupVersionResource{Group: "nova.openstack.org", Version: "v1beta1", Resource: "novacells"}
)

// create creates an object from YAML in the run's namespace and deletes it (waiting until it is gone)
// when the test ends.
func create(t *testing.T, gvr schema.GroupVersionResource, manifest string) *unstructured.Unstructured {
	t.Helper()
	return env.Create(t, gvr, ns, manifest)
}

func get(t *testing.T, gvr schema.GroupVersionResource, name string) *unstructured.Unstructured {
	t.Helper()
	return env.Get(t, gvr, ns, name)
}

// workflowID is the workflow ID the bridge derives for an object.
func workflowID(kind string, gvr schema.GroupVersionResource, u *unstructured.Unstructured) string {
	return lifecycle.WorkflowID(e2e.Ref(kind, gvr, u))
}

// playbookRuns counts the RunPlaybook activities a workflow scheduled (every attempt that reached a
// worker counts once per scheduling), by step.
func playbookRuns(t *testing.T, wfID string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, ev := range historyEvents(t, wfID) {
		a := ev.GetActivityTaskScheduledEventAttributes()
		if a == nil || a.GetActivityType().GetName() != "RunPlaybook" {
			continue
		}
		var in ansible.PlaybookInput
		if p := a.GetInput().GetPayloads(); len(p) > 0 {
			dc, err := env.DataConverter()
			require.NoError(t, err)
			require.NoError(t, dc.FromPayload(p[0], &in))
		}
		out[in.Step]++
	}
	return out
}

// historyEvents is a workflow's whole history, every run of it.
// activityCount counts the activities of one type a workflow's current run scheduled.
func activityCount(t *testing.T, wfID, activityType string) int {
	t.Helper()
	n := 0
	for _, ev := range historyEvents(t, wfID) {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == activityType {
			n++
		}
	}
	return n
}

func historyEvents(t *testing.T, wfID string) []*historypb.HistoryEvent {
	t.Helper()
	out, err := env.History(context.Background(), wfID)
	require.NoError(t, err)
	return out
}

// workflowsWith lists the workflow IDs a search-attribute query finds in the tests' namespace.
func workflowsWith(t *testing.T, query string) []string {
	t.Helper()
	resp, err := env.Temporal.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Namespace: env.TemporalNamespace, Query: query, PageSize: 100})
	require.NoError(t, err)
	var out []string
	for _, e := range resp.Executions {
		out = append(out, e.Execution.WorkflowId)
	}
	return out
}
