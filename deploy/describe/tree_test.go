package describe

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

var update = flag.Bool("update", false, "write the golden files anew")

var now = time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)

func cloud(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "cloud.yaml"))
	require.NoError(t, err)
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else {
			require.NoError(t, err)
		}
		if m != nil {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
	return out
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "golden file (go test ./deploy/describe -update writes it)")
	require.Equal(t, string(want), string(got))
}

// The tree of a cloud, each view against its golden file: the plain tree, with workflows, and as JSON.
func TestRenderGolden(t *testing.T) {
	roots := Build(cloud(t), now)
	for _, tc := range []struct {
		name string
		opts RenderOptions
	}{{"cloud.txt", RenderOptions{}}, {"cloud-workflows.txt", RenderOptions{Workflows: true}}} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, Render(&b, roots, tc.opts))
			golden(t, tc.name, b.Bytes())
		})
	}
	b, err := json.MarshalIndent(roots, "", "  ")
	require.NoError(t, err)
	golden(t, "cloud.json", append(b, '\n'))
}

// The tree's shape, in words: what sits under what, and what is marked failing.
func TestBuildPlacesEachObjectOnce(t *testing.T) {
	roots := Build(cloud(t), now)
	var seen []string
	var walk func([]*Node, string)
	walk = func(ns []*Node, parent string) {
		for _, n := range ns {
			if !n.Ref {
				seen = append(seen, parent+" > "+n.Kind+"/"+n.Name)
			}
			walk(n.Children, n.Kind+"/"+n.Name)
		}
	}
	walk(roots, "")
	require.Subset(t, seen, []string{
		" > KupenstackConfiguration/kupenstack",
		"KupenstackConfiguration/kupenstack > OpenStackCloudConfigurationProfile/default",
		"KupenstackConfiguration/kupenstack > Release/keystone",
		"KupenstackConfiguration/kupenstack > OpenstackNode/control-0",
		" > Nova/nova",
		"Nova/nova > NovaCell/nova-cell1",
		"NovaCell/nova-cell1 > NovaConductor/nova-cell1-conductor",
		"Nova/nova > NovaAPI/nova-api",
		" > OpenStackDataPlane/edpm",
		"OpenStackDataPlane/edpm > OpenStackDataPlaneRole/edpm-compute",
		"OpenStackDataPlaneRole/edpm-compute > OpenStackDataPlaneNode/edpm-compute-0",
		"OpenStackDataPlaneNode/edpm-compute-0 > NovaExternalCompute/edpm-compute-0",
		"OpenStackDataPlaneNode/edpm-compute-0 > OVNMetadataAgent/edpm-compute-0",
		"OpenStackDataPlane/edpm > OpenStackDataPlaneUpdate/edpm-to-2",
		"OpenStackCluster/sample-cluster > Bastion/sample-cluster-bastion-1",
		" > OpenStackServer/sample-server",
	})
	counts := map[string]int{}
	for _, s := range seen {
		counts[s[len(s)-len(s[bytes.LastIndexByte([]byte(s), '>')+2:]):]]++
	}
	for what, n := range counts {
		require.Equal(t, 1, n, "%s placed %d times", what, n)
	}
	require.Equal(t, 2, Failures(roots), "the data plane and its unreachable node")
}
