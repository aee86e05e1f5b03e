// Package chart loads and renders stackflow's Helm chart (deploy/chart/stackflow) with the Helm SDK, for
// its tests, the end-to-end tests that install it, and the local stack.
package chart

import (
	"fmt"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Path is the chart's directory relative to the module root.
const Path = "deploy/chart/stackflow"

// Load loads the chart under the module root root (its crds/ and files/admission are links to
// deploy/crds and deploy/admission, which the loader follows).
func Load(root string) (*chart.Chart, error) {
	ch, err := loader.Load(filepath.Join(root, Path))
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", Path, err)
	}
	return ch, nil
}

// Render renders the chart as `helm template` does (no cluster) for a release in namespace and returns
// its objects, CRDs first when includeCRDs.
func Render(root, release, namespace string, values map[string]any, includeCRDs bool) ([]*unstructured.Unstructured, error) {
	ch, err := Load(root)
	if err != nil {
		return nil, err
	}
	inst := action.NewInstall(&action.Configuration{})
	inst.DryRun, inst.ClientOnly, inst.Replace = true, true, true
	inst.ReleaseName, inst.Namespace = release, namespace
	inst.IncludeCRDs = includeCRDs
	inst.KubeVersion = &chartutil.KubeVersion{Version: "v1.34.2", Major: "1", Minor: "34"}
	rel, err := inst.Run(ch, values)
	if err != nil {
		return nil, fmt.Errorf("render chart: %w", err)
	}
	return Objects(rel.Manifest)
}

// Objects parses a multi-document manifest.
func Objects(manifest string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, doc := range releaseutil.SplitManifests(manifest) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			return nil, fmt.Errorf("parse rendered object: %w\n%s", err, doc)
		}
		if strings.TrimSpace(string(j)) == "null" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(j); err != nil {
			return nil, fmt.Errorf("parse rendered object: %w\n%s", err, doc)
		}
		out = append(out, u)
	}
	return out, nil
}
