package charts

import (
	"os"
	"path/filepath"
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
