// Package charts loads the project's charts (the directories beside this file) with their file://
// dependencies, the shared library chart stackflow-common, taken from their directories, as
// `helm dependency build` would vendor them into charts/: the packaged charts are complete, and the
// source tree holds each template once.
package charts

import (
	"fmt"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
)

// Load loads the chart in dir and adds each dependency whose repository is file://<path> (relative to
// dir) and that the chart does not already carry in charts/.
func Load(dir string) (*chart.Chart, error) {
	ch, err := loader.LoadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", dir, err)
	}
	have := map[string]bool{}
	for _, d := range ch.Dependencies() {
		have[d.Name()] = true
	}
	for _, d := range ch.Metadata.Dependencies {
		rel, ok := strings.CutPrefix(d.Repository, "file://")
		if !ok || have[d.Name] {
			continue
		}
		sub, err := Load(filepath.Join(dir, rel))
		if err != nil {
			return nil, fmt.Errorf("chart %s: dependency %s: %w", ch.Name(), d.Name, err)
		}
		if sub.Name() != d.Name || sub.Metadata.Version != d.Version {
			return nil, fmt.Errorf("chart %s: dependency %s %s: %s holds %s %s", ch.Name(), d.Name, d.Version, rel, sub.Name(), sub.Metadata.Version)
		}
		ch.AddDependency(sub)
	}
	return ch, nil
}
