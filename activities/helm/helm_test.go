package helm

import (
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
)

// What one list of a namespace's releases says of each, in whatever order the list gave its revisions.
func TestInfoOfAReleaseHistory(t *testing.T) {
	rev := func(v int, st release.Status, ready bool) *release.Release {
		r := &release.Release{Name: "nova", Version: v, Info: &release.Info{Status: st, Description: "rev"},
			Chart: &chart.Chart{Metadata: &chart.Metadata{Version: "0.1.0"}}, Labels: map[string]string{ReleaseLabelValuesHash: "h"}}
		if ready {
			r.Labels[ReleaseLabelReady] = "true"
		}
		return r
	}
	tests := []struct {
		name           string
		hist           []*release.Release
		exists         bool
		revision, good int
		status         string
	}{
		{"no history: no release", nil, false, 0, 0, ""},
		{"one ready revision", []*release.Release{rev(1, release.StatusDeployed, true)}, true, 1, 1, "deployed"},
		{"failed upgrade after a ready one, listed out of order",
			[]*release.Release{rev(3, release.StatusFailed, false), rev(1, release.StatusSuperseded, true), rev(2, release.StatusSuperseded, false)}, true, 3, 1, "failed"},
		{"never seen Ready: the newest deployed stands in",
			[]*release.Release{rev(2, release.StatusDeployed, false), rev(1, release.StatusSuperseded, false)}, true, 2, 2, "deployed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info := infoOf("nova", tt.hist)
			require.Equal(t, "nova", info.Name)
			require.Equal(t, tt.exists, info.Exists)
			require.Equal(t, tt.revision, info.Revision)
			require.Equal(t, tt.good, info.LastGood)
			require.Equal(t, tt.status, info.Status)
			if tt.exists {
				require.Equal(t, "0.1.0", info.ChartVersion)
				require.Equal(t, "h", info.ValuesHash)
			}
		})
	}
}
