package helm

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/provenance"
	"helm.sh/helm/v3/pkg/repo"
)

// chartRepo serves a chart repository holding keystone 1.0.0 (and an entry for 1.0.1 whose archive is
// no chart), counting its requests.
func chartRepo(t *testing.T) (*httptest.Server, *atomic.Int32) {
	dir := t.TempDir()
	ch := &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: "keystone", Version: "1.0.0"},
		Templates: []*chart.File{{Name: "templates/cm.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")}}}
	archive, err := chartutil.Save(ch, dir)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "keystone-1.0.1.tgz"), []byte("not a chart"), 0o644))
	idx := repo.NewIndexFile()
	digest, err := provenance.DigestFile(archive)
	require.NoError(t, err)
	require.NoError(t, idx.MustAdd(ch.Metadata, filepath.Base(archive), "", digest))
	broken := *ch.Metadata
	broken.Version = "1.0.1"
	require.NoError(t, idx.MustAdd(&broken, "keystone-1.0.1.tgz", "", "sha256:0"))
	require.NoError(t, idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644))
	hits := &atomic.Int32{}
	files := http.FileServer(http.Dir(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, hits
}

func TestLoadChart(t *testing.T) {
	srv, hits := chartRepo(t)
	h := &Helm{cacheDir: t.TempDir(), settings: cli.New()}
	ctx := context.Background()

	ch, err := h.loadChart(ctx, ChartRef{Repository: srv.URL, Name: "keystone", Version: "1.0.0"})
	require.NoError(t, err)
	require.Equal(t, "1.0.0", ch.Metadata.Version)
	require.Equal(t, int32(2), hits.Load(), "the index, then the archive")
	_, err = h.loadChart(ctx, ChartRef{Repository: srv.URL, Name: "keystone", Version: "1.0.0"})
	require.NoError(t, err)
	require.Equal(t, int32(2), hits.Load(), "the second time from the cache")

	_, err = h.loadChart(ctx, ChartRef{Repository: srv.URL, Name: "keystone", Version: "9.9.9"})
	permanent(t, err, ErrChartNotFound)
	_, err = h.loadChart(ctx, ChartRef{Repository: srv.URL, Name: "glance", Version: "1.0.0"})
	permanent(t, err, ErrChartNotFound)
	_, err = h.loadChart(ctx, ChartRef{Repository: srv.URL, Name: "keystone", Version: "1.0.1"})
	permanent(t, err, ErrChartNotFound)

	// The same chart from another repository is another chart: not served from this one's cache.
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	_, err = h.loadChart(ctx, ChartRef{Repository: gone.URL, Name: "keystone", Version: "1.0.0"})
	require.Error(t, err)
	var app interface {
		NonRetryable() bool
		Type() string
	}
	require.ErrorAs(t, err, &app)
	require.False(t, app.NonRetryable(), "an unreachable repository is retried: %v", err)
	require.Equal(t, ErrChartRepository, app.Type())
}
