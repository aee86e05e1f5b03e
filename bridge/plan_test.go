package bridge

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/api/lifecycle"
)

func TestPlanFor(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	const redeliver = 10 * time.Minute
	tests := []struct {
		name string
		o    Observed
		s    Signalled
		want Plan
	}{
		{
			name: "new object gets the finalizer and its first spec signal",
			o:    Observed{Generation: 1},
			want: Plan{AddFinalizer: true, Signal: lifecycle.SignalSpec, Generation: 1},
		},
		{
			name: "finalizer present, generation not yet signalled",
			o:    Observed{Generation: 1, HasFinalizer: true},
			want: Plan{Signal: lifecycle.SignalSpec, Generation: 1},
		},
		{
			name: "resync of a signalled generation does nothing",
			o:    Observed{Generation: 3, HasFinalizer: true},
			s:    Signalled{Generation: 3},
			want: Plan{},
		},
		{
			name: "spec edit signals the new generation",
			o:    Observed{Generation: 4, HasFinalizer: true},
			s:    Signalled{Generation: 3},
			want: Plan{Signal: lifecycle.SignalSpec, Generation: 4},
		},
		{
			name: "an older generation in the cache than signalled is not sent again",
			o:    Observed{Generation: 2, HasFinalizer: true},
			s:    Signalled{Generation: 3},
			want: Plan{},
		},
		{
			name: "finalizer removed by someone else is put back without a signal",
			o:    Observed{Generation: 2},
			s:    Signalled{Generation: 2},
			want: Plan{AddFinalizer: true},
		},
		{
			name: "deleting with our finalizer signals delete",
			o:    Observed{Generation: 2, Deleting: true, HasFinalizer: true},
			s:    Signalled{Generation: 2},
			want: Plan{Signal: lifecycle.SignalDelete},
		},
		{
			name: "deleting an object never signalled still signals delete",
			o:    Observed{Generation: 1, Deleting: true, HasFinalizer: true},
			want: Plan{Signal: lifecycle.SignalDelete},
		},
		{
			name: "delete recently signalled is not repeated",
			o:    Observed{Generation: 2, Deleting: true, HasFinalizer: true},
			s:    Signalled{Generation: 2, DeleteAt: now.Add(-time.Minute)},
			want: Plan{},
		},
		{
			name: "delete signalled long ago is repeated",
			o:    Observed{Generation: 2, Deleting: true, HasFinalizer: true},
			s:    Signalled{Generation: 2, DeleteAt: now.Add(-redeliver)},
			want: Plan{Signal: lifecycle.SignalDelete},
		},
		{
			name: "deleting without our finalizer is not ours",
			o:    Observed{Generation: 1, Deleting: true},
			want: Plan{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PlanFor(tt.o, tt.s, now, redeliver)
			if got != tt.want {
				t.Errorf("PlanFor(%+v, %+v) = %+v, want %+v", tt.o, tt.s, got, tt.want)
			}
		})
	}
}

func TestObserve(t *testing.T) {
	ts := metav1.Now()
	tests := []struct {
		name string
		meta metav1.ObjectMeta
		want Observed
	}{
		{
			name: "generation 0 counts as 1 (Nodes)",
			meta: metav1.ObjectMeta{Name: "n"},
			want: Observed{Generation: 1},
		},
		{
			name: "a derived generation (Nodes the bridge fingerprinted)",
			meta: metav1.ObjectMeta{Name: "n", Annotations: map[string]string{lifecycle.AnnotationGeneration: "3"}},
			want: Observed{Generation: 3},
		},
		{
			name: "our finalizer among others",
			meta: metav1.ObjectMeta{Generation: 5, Finalizers: []string{"other", lifecycle.Finalizer}},
			want: Observed{Generation: 5, HasFinalizer: true},
		},
		{
			name: "deletion timestamp",
			meta: metav1.ObjectMeta{Generation: 2, DeletionTimestamp: &ts, Finalizers: []string{"other"}},
			want: Observed{Generation: 2, Deleting: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Observe(&tt.meta); got != tt.want {
				t.Errorf("Observe = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestFinalizerPatch(t *testing.T) {
	tests := []struct {
		name       string
		finalizers []string
		rv         string
		want       string
	}{
		{
			name: "first finalizer",
			rv:   "42",
			want: `{"metadata":{"finalizers":["stackflow.io/teardown"],"resourceVersion":"42"}}`,
		},
		{
			name:       "kept after others",
			finalizers: []string{"a/b"},
			rv:         "7",
			want:       `{"metadata":{"finalizers":["a/b","stackflow.io/teardown"],"resourceVersion":"7"}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := finalizerPatch(tt.finalizers, tt.rv)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("finalizerPatch = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestWorkflowIdentity(t *testing.T) {
	node := Served[0]
	ref := node.Ref("ignored", "worker-1", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
	if got, want := lifecycle.WorkflowID(ref), "Node/worker-1/0f1e2d3c"; got != want {
		t.Errorf("WorkflowID = %q, want %q", got, want)
	}
	ns := Kind{Kind: "OpenStackDataPlaneNode", GVR: schema.GroupVersionResource{Group: "dataplane.openstack.org", Version: "v1beta1", Resource: "openstackdataplanenodes"}}
	ref = ns.Ref("openstack", "edpm-0", "abcdef0123456789")
	if got, want := lifecycle.WorkflowID(ref), "OpenStackDataPlaneNode/openstack/edpm-0/abcdef01"; got != want {
		t.Errorf("WorkflowID = %q, want %q", got, want)
	}
	if ref.APIVersion() != "dataplane.openstack.org/v1beta1" || ref.Resource != "openstackdataplanenodes" {
		t.Errorf("ref = %+v", ref)
	}
}

func TestSelect(t *testing.T) {
	kinds, unknown := Select([]string{"OpenstackNode", "Nope"})
	if len(kinds) != 1 || kinds[0].Kind != "OpenstackNode" || len(unknown) != 1 || unknown[0] != "Nope" {
		t.Errorf("Select = %v, %v", kinds, unknown)
	}
	all, _ := Select(nil)
	if len(all) != len(Served) {
		t.Errorf("Select(nil) = %d kinds, want %d", len(all), len(Served))
	}
	seen := map[string]bool{}
	for _, k := range Served {
		if seen[k.Kind] {
			t.Errorf("kind %s served twice", k.Kind)
		}
		seen[k.Kind] = true
	}
}
