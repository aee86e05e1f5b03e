package podrunner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

func TestParseConsoleScripts(t *testing.T) {
	text := `[console_scripts]
nova-manage = nova.cmd.manage:main
nova-api-wsgi = nova.api.openstack.compute.wsgi:init_application [extra]
# a comment
odd = pkg.mod:Class.method

[wsgi_scripts]
nova-metadata-wsgi = nova.api.metadata.wsgi:init_application
`
	got := ParseConsoleScripts(text)
	require.Equal(t, []ConsoleScript{
		{"nova-manage", "nova.cmd.manage", "main"},
		{"nova-api-wsgi", "nova.api.openstack.compute.wsgi", "init_application"},
		{"odd", "pkg.mod", "Class.method"},
	}, got)
	script := got[2].Script("/usr/bin/python3")
	require.True(t, strings.HasPrefix(script, "#!/usr/bin/python3\n"))
	require.Contains(t, script, "from pkg.mod import Class\n")
	require.Contains(t, script, "sys.exit(Class.method())")
}

func TestBuildHostImageSkipsPackagedPrograms(t *testing.T) {
	site, bin, usrbin := t.TempDir(), t.TempDir(), t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(site, "nova-26.egg-info"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(site, "nova-26.egg-info", "entry_points.txt"), []byte("[console_scripts]\nnova-manage = nova.cmd.manage:main\nsh = evil:main\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(usrbin, "sh"), []byte("#!"), 0o755))
	n, err := BuildHostImage(site, "/usr/bin/python3", bin, usrbin)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	fi, err := os.Stat(filepath.Join(bin, "nova-manage"))
	require.NoError(t, err)
	require.NotZero(t, fi.Mode()&0o111)
	_, err = os.Stat(filepath.Join(bin, "sh"))
	require.True(t, os.IsNotExist(err))
}

func TestExpand(t *testing.T) {
	vals := map[string]string{"PORT": "8774", "NAME": "api"}
	for in, want := range map[string]string{
		"plain":           "plain",
		"$(PORT)":         "8774",
		"--port=$(PORT)":  "--port=8774",
		"$(UNKNOWN)":      "$(UNKNOWN)",
		"$$(PORT)":        "$(PORT)",
		"$(NAME)-$(PORT)": "api-8774",
		"cost $5":         "cost $5",
		"open $(PORT":     "open $(PORT",
	} {
		require.Equal(t, want, expand(in, vals), in)
	}
}

func TestKeyFiles(t *testing.T) {
	data := map[string][]byte{"a.conf": []byte("A"), "b.sh": []byte("B")}
	mode := int32(0o755)
	files, err := keyFiles("configmap x", data, nil, nil, false)
	require.NoError(t, err)
	require.Equal(t, []file{{"a.conf", []byte("A"), 0o644}, {"b.sh", []byte("B"), 0o644}}, files)
	files, err = keyFiles("configmap x", data, []corev1.KeyToPath{{Key: "b.sh", Path: "bin/run.sh", Mode: &mode}}, nil, false)
	require.NoError(t, err)
	require.Equal(t, []file{{"bin/run.sh", []byte("B"), 0o755}}, files)
	_, err = keyFiles("secret y", data, []corev1.KeyToPath{{Key: "missing", Path: "m"}}, nil, false)
	var w *WaitingError
	require.ErrorAs(t, err, &w)
	files, err = keyFiles("secret y", data, []corev1.KeyToPath{{Key: "missing", Path: "m"}}, nil, true)
	require.NoError(t, err)
	require.Empty(t, files)
}

func TestMountsWithSubPath(t *testing.T) {
	c := corev1.Container{Name: "c", VolumeMounts: []corev1.VolumeMount{
		{Name: "config", MountPath: "/etc/nova/nova.conf", SubPath: "nova.conf", ReadOnly: true},
		{Name: "scripts", MountPath: "/usr/local/bin/container-scripts"},
	}}
	ms, err := mounts(c, map[string]string{"config": "/s/config", "scripts": "/s/scripts"})
	require.NoError(t, err)
	require.Equal(t, []Mount{{"/s/config/nova.conf", "/etc/nova/nova.conf", true}, {"/s/scripts", "/usr/local/bin/container-scripts", false}}, ms)
	_, err = mounts(c, map[string]string{"config": "/s/config"})
	require.ErrorContains(t, err, "unknown volume scripts")
}
