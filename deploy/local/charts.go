package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/repo"

	"github.com/stackflow/stackflow/deploy/charts"
)

// ChartRepoPort is where the stack serves the project's charts (deploy/charts) as a Helm chart
// repository on the hosts' gateway, so the sample profile and any user profile can name
// http://198.51.100.1:8879: the kube worker reaches it there from its pod as from this machine.
const ChartRepoPort = 8879

// ChartRepoURL is the stack's chart repository.
var ChartRepoURL = fmt.Sprintf("http://%s:%d", HostGateway, ChartRepoPort)

const procChartRepo = "chart-repo"

// PackageCharts packages every chart directory under chartsDir into outDir, at its own version and at
// each of extraVersions (only charts at the base version 0.1.0 get those, so a chart that is a special
// version of another stays alone), and writes the repository index for baseURL with the Helm SDK.
func PackageCharts(chartsDir, outDir, baseURL string, extraVersions ...string) error {
	entries, err := os.ReadDir(chartsDir)
	if err != nil {
		return fmt.Errorf("charts in %s: %w", chartsDir, err)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		dir := filepath.Join(chartsDir, e.Name())
		if _, err := os.Stat(filepath.Join(dir, "Chart.yaml")); err != nil {
			continue
		}
		ch, err := charts.Load(dir)
		if err != nil {
			return err
		}
		if ch.Metadata.Type == "library" {
			continue // packaged into the charts that use it
		}
		versions := []string{ch.Metadata.Version}
		if ch.Metadata.Version == "0.1.0" {
			versions = append(versions, extraVersions...)
		}
		for _, v := range versions {
			ch.Metadata.Version = v
			if _, err := chartutil.Save(ch, outDir); err != nil {
				return fmt.Errorf("package chart %s %s: %w", ch.Name(), v, err)
			}
		}
	}
	idx, err := repo.IndexDirectory(outDir, baseURL)
	if err != nil {
		return fmt.Errorf("index %s: %w", outDir, err)
	}
	idx.SortEntries()
	if err := idx.WriteFile(filepath.Join(outDir, "index.yaml"), 0o644); err != nil {
		return fmt.Errorf("write index of %s: %w", outDir, err)
	}
	return nil
}

// upChartRepo packages deploy/charts into the state directory and serves it on ChartRepoPort. The
// server is Python's static file server: a chart repository is only index.yaml and the chart archives.
func (s *Stack) upChartRepo(ctx context.Context) error {
	src := filepath.Join(s.RepoRoot, "deploy", "charts")
	if !isDir(src) {
		return nil
	}
	dir := s.Path("charts")
	// Packaged anew on every Up: the charts of the checkout are the ones served.
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := PackageCharts(src, dir, ChartRepoURL); err != nil {
		return err
	}
	s.ChartRepository = ChartRepoURL
	// A server an older stack started on loopback starts again on the gateway.
	if _, ok := s.Running(procChartRepo); ok && dial(fmt.Sprintf("%s:%d", HostGateway, ChartRepoPort)) != nil {
		if err := s.Stop(procChartRepo, 5*time.Second); err != nil {
			return err
		}
	}
	if _, err := s.Start(Proc{Name: procChartRepo, Dir: dir,
		Argv: []string{"/usr/bin/python3", "-m", "http.server", "--bind", HostGateway, "--directory", dir, fmt.Sprint(ChartRepoPort)}}); err != nil {
		return err
	}
	return s.WaitFor(ctx, "chart repository", procChartRepo, 200*time.Millisecond, func(ctx context.Context) error {
		_, err := httpGet(ctx, ChartRepoURL+"/index.yaml", "")
		return err
	})
}

// ChartServer is a chart repository served in process, for tests that need versions of their own.
type ChartServer struct {
	// URL is the repository's base URL (index.yaml lives under it).
	URL string
	// Dir holds the packaged charts and index.yaml.
	Dir string
	srv *http.Server
}

// ServeCharts packages chartsDir into outDir (see PackageCharts) and serves it on a free port of
// 127.0.0.1 until Close.
func ServeCharts(chartsDir, outDir string, extraVersions ...string) (*ChartServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	url := "http://" + ln.Addr().String()
	if err := PackageCharts(chartsDir, outDir, url, extraVersions...); err != nil {
		ln.Close()
		return nil, err
	}
	cs := &ChartServer{URL: url, Dir: outDir, srv: &http.Server{Handler: http.FileServer(http.Dir(outDir)), ReadHeaderTimeout: 5 * time.Second}}
	go func() {
		if err := cs.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "chart repository:", err)
		}
	}()
	return cs, nil
}

// Close stops the server.
func (c *ChartServer) Close() error { return c.srv.Close() }
