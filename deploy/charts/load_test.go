package charts

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
)

// writeChart writes a chart directory: Chart.yaml and templates/ files.
func writeChart(t *testing.T, dir, chartYAML string, templates map[string]string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "templates"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte(chartYAML), 0o644))
	for name, body := range templates {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "templates", name), []byte(body), 0o644))
	}
}

func TestLoad(t *testing.T) {
	lib := "apiVersion: v2\nname: lib\ntype: library\nversion: 0.1.0\n"
	dep := func(version string) string {
		return "apiVersion: v2\nname: app\nversion: 0.1.0\ndependencies:\n  - name: lib\n    version: " + version + "\n    repository: file://../lib\n"
	}
	tests := []struct {
		name    string
		app     string
		wantErr string
		want    string
	}{
		{name: "file dependency added", app: dep("0.1.0"), want: "kind: ConfigMap # from lib"},
		{name: "wrong version refused", app: dep("0.2.0"), wantErr: "dependency lib 0.2.0: ../lib holds lib 0.1.0"},
		{name: "no dependency", app: "apiVersion: v2\nname: app\nversion: 0.1.0\n", wantErr: `no template "lib.kind"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			writeChart(t, filepath.Join(root, "lib"), lib, map[string]string{"_lib.tpl": `{{- define "lib.kind" -}}kind: ConfigMap # from lib{{- end -}}`})
			writeChart(t, filepath.Join(root, "app"), tt.app, map[string]string{"cm.yaml": `{{ include "lib.kind" . }}`})
			ch, err := Load(filepath.Join(root, "app"))
			if err == nil {
				var vals chartutil.Values
				vals, err = chartutil.ToRenderValues(ch, map[string]any{}, chartutil.ReleaseOptions{Name: "app"}, chartutil.DefaultCapabilities)
				require.NoError(t, err)
				var out map[string]string
				out, err = engine.Render(ch, vals)
				if err == nil {
					assert.Equal(t, tt.want, out["app/templates/cm.yaml"])
				}
			}
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
		})
	}
}

// The project's charts all load with the shared library and render with their default values.
func TestProjectChartsRender(t *testing.T) {
	entries, err := os.ReadDir(".")
	require.NoError(t, err)
	n := 0
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(e.Name(), "Chart.yaml")); err != nil {
			continue
		}
		ch, err := Load(e.Name())
		require.NoError(t, err)
		if ch.Metadata.Type == "library" {
			continue
		}
		vals, err := chartutil.ToRenderValues(ch, map[string]any{}, chartutil.ReleaseOptions{Name: ch.Name(), Namespace: "openstack"}, chartutil.DefaultCapabilities)
		require.NoError(t, err)
		out, err := engine.Render(ch, vals)
		require.NoError(t, err, "render %s", e.Name())
		assert.NotEmpty(t, out, e.Name())
		n++
	}
	assert.GreaterOrEqual(t, n, 10)
}

// The ovn chart's databases are ClusterIP Services unless network.<db>.node_port asks for a NodePort
// (chassis outside the cluster connect there), at the port asked.
func TestOVNNodePort(t *testing.T) {
	ch, err := Load("ovn")
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   []string
		absent []string
	}{
		{"default", map[string]any{}, nil, []string{"NodePort", "nodePort"}},
		{"southbound on a node port", map[string]any{"network": map[string]any{"ovn_ovsdb_sb": map[string]any{"node_port": map[string]any{"enabled": true, "port": 31642}}}},
			[]string{"type: NodePort", "nodePort: 31642"}, []string{"nodePort: 30641"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals, err := chartutil.ToRenderValues(ch, tc.values, chartutil.ReleaseOptions{Name: "ovn", Namespace: "openstack"}, chartutil.DefaultCapabilities)
			require.NoError(t, err)
			out, err := engine.Render(ch, vals)
			require.NoError(t, err)
			svc := out["ovn/templates/services.yaml"]
			for _, w := range tc.want {
				require.Contains(t, svc, w)
			}
			for _, a := range tc.absent {
				require.NotContains(t, svc, a)
			}
			require.Equal(t, 2, strings.Count(svc, "kind: Service"), svc)
		})
	}
}

// The glance and neutron charts run a bootstrap Job only when bootstrap.enabled, handing it what
// bootstrap.structured lists and the service's API; a change of that list names a new Job (it runs
// again).
func TestBootstrapJob(t *testing.T) {
	for _, tc := range []struct {
		chart, typ string
		structured map[string]any
	}{
		{"glance", "image", map[string]any{"images": map[string]any{"cirros": map[string]any{"name": "cirros-tiny", "size": 1024}}}},
		{"neutron", "network", map[string]any{
			"networks": map[string]any{"private": map[string]any{"subnets": map[string]any{"s": map[string]any{"cidr": "10.0.0.0/24"}}}},
			"routers":  map[string]any{"r": map[string]any{"interfaces": []any{"s"}}},
		}},
	} {
		t.Run(tc.chart, func(t *testing.T) {
			ch, err := Load(tc.chart)
			require.NoError(t, err)
			render := func(values map[string]any) string {
				vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{Name: tc.chart, Namespace: "openstack"}, chartutil.DefaultCapabilities)
				require.NoError(t, err)
				out, err := engine.Render(ch, vals)
				require.NoError(t, err)
				return out[tc.chart+"/templates/job-bootstrap.yaml"]
			}
			require.Empty(t, strings.TrimSpace(render(map[string]any{})), "off by default")
			on := render(map[string]any{"bootstrap": map[string]any{"enabled": true, "structured": tc.structured}})
			require.Contains(t, on, "kind: Job")
			require.Contains(t, on, "name: SERVICE_TYPE, value: \""+tc.typ+"\"")
			b, err := json.Marshal(tc.structured)
			require.NoError(t, err)
			require.Contains(t, on, strconv.Quote(string(b)), "the Job is given the structured list")
			require.Contains(t, on, "/tmp/bin/bootstrap.py")
			other := render(map[string]any{"bootstrap": map[string]any{"enabled": true, "structured": map[string]any{}}})
			name := regexp.MustCompile(`name: (` + tc.chart + `-bootstrap-\w+)`)
			require.NotEqual(t, name.FindStringSubmatch(on)[1], name.FindStringSubmatch(other)[1], "another list, another Job")
		})
	}
}
