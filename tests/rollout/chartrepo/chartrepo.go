// Package chartrepo packages stackflow's test charts (deploy/charts) and serves them as a Helm chart
// repository on 127.0.0.1, as the end-to-end tests and benchmarks need one.
package chartrepo

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/repo"
)

// Repo is a running chart repository.
type Repo struct {
	// URL is the repository's base URL (index.yaml lives under it).
	URL string
	// Dir holds the packaged charts and index.yaml.
	Dir string
	srv *http.Server
}

// Serve packages every chart under chartsDir at its own version and at each of extraVersions, writes
// the index with the Helm SDK, and serves the directory on a free port of 127.0.0.1.
func Serve(chartsDir, outDir string, extraVersions ...string) (*Repo, error) {
	entries, err := os.ReadDir(chartsDir)
	if err != nil {
		return nil, fmt.Errorf("charts in %s: %w", chartsDir, err)
	}
	for _, e := range entries {
		dir := filepath.Join(chartsDir, e.Name())
		if _, err := os.Stat(filepath.Join(dir, "Chart.yaml")); err != nil {
			continue
		}
		versions := []string{""}
		// Only charts at their base version get the extra versions (the never-ready one stays alone).
		ch, err := loader.LoadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("load chart %s: %w", dir, err)
		}
		if ch.Metadata.Version == "0.1.0" {
			versions = append(versions, extraVersions...)
		}
		for _, v := range versions {
			ch, err := loader.LoadDir(dir)
			if err != nil {
				return nil, fmt.Errorf("load chart %s: %w", dir, err)
			}
			if v != "" {
				ch.Metadata.Version = v
			}
			if _, err := chartutil.Save(ch, outDir); err != nil {
				return nil, fmt.Errorf("package chart %s %s: %w", ch.Name(), ch.Metadata.Version, err)
			}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	url := "http://" + ln.Addr().String()
	idx, err := repo.IndexDirectory(outDir, url)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("index %s: %w", outDir, err)
	}
	idx.SortEntries()
	if err := idx.WriteFile(filepath.Join(outDir, "index.yaml"), 0o644); err != nil {
		ln.Close()
		return nil, fmt.Errorf("write index: %w", err)
	}
	r := &Repo{URL: url, Dir: outDir, srv: &http.Server{Handler: http.FileServer(http.Dir(outDir))}}
	go func() {
		if err := r.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "chart repository:", err)
		}
	}()
	return r, nil
}

// Close stops serving.
func (r *Repo) Close() error { return r.srv.Close() }
