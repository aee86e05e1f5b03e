package bridge

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"

	"github.com/stackflow/stackflow/api/lifecycle"
)

// Two bridges, one with a filter and one without, split the objects between them: each object is served
// by exactly one, whatever its other labels.
func TestWatchSelectorSplitsObjects(t *testing.T) {
	objects := []struct {
		name   string
		labels map[string]string
		served string // the filter of the bridge that serves it
	}{
		{"no labels", nil, ""},
		{"other labels only", map[string]string{"app": "nova"}, ""},
		{"labelled run-a", map[string]string{lifecycle.WatchFilterLabel: "run-a", "app": "nova"}, "run-a"},
		{"labelled run-b", map[string]string{lifecycle.WatchFilterLabel: "run-b"}, "run-b"},
		{"labelled empty", map[string]string{lifecycle.WatchFilterLabel: ""}, "none"},
	}
	filters := []string{"", "run-a", "run-b"}
	for _, o := range objects {
		t.Run(o.name, func(t *testing.T) {
			var servedBy []string
			for _, f := range filters {
				sel, err := labels.Parse(WatchSelector(f))
				require.NoError(t, err, "selector of filter %q", f)
				if sel.Matches(labels.Set(o.labels)) {
					servedBy = append(servedBy, f)
				}
			}
			if o.served == "none" {
				// An empty value is neither absent nor any filter's: admission refuses it (see
				// deploy/admission), so nobody serves such an object.
				require.Empty(t, servedBy)
				return
			}
			require.Equal(t, []string{o.served}, servedBy)
		})
	}
}

func TestNewRefusesAFilterThatIsNoLabelValue(t *testing.T) {
	for _, f := range []string{"has space", "a/b", strings.Repeat("x", 64), "-leading"} {
		_, err := New(Config{Kube: &rest.Config{Host: "https://127.0.0.1:1"}, WatchFilter: f})
		require.ErrorContains(t, err, "is no label value", "filter %q", f)
	}
}
