package nova

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/stackflow/stackflow/activities/kube"
)

func instance(svc Service) Instance {
	in := Instance{
		Service: svc, Name: "nova-" + string(svc), Namespace: "ns", Image: DefaultImages[svc], Replicas: 1,
		Owner:  kube.Owner{APIVersion: "nova.openstack.org/v1beta1", Kind: "NovaScheduler", Name: "x", UID: "u"},
		Secret: "nova-secret", ServicePasswordKey: "NovaPassword", ServiceUser: "nova", KeystoneAuthURL: "http://198.51.100.1:5000/v3",
		TransportURLSecret: "nova-api-transport",
		APIDatabase:        &DB{Host: "127.0.0.1", User: "nova_api", Database: "nova_api", PasswordKey: "NovaAPIDatabasePassword"},
	}
	return in
}

// What each service's generated configuration holds: its own options, credentials only as Secret
// references in the template, never in the defaults.
func TestConfigPerService(t *testing.T) {
	for _, tc := range []struct {
		svc      Service
		cell     string
		port     int32
		defaults map[string]string // "section/option" → value
		creds    map[string]string
		scripts  []string
	}{
		{svc: API, port: 18774,
			defaults: map[string]string{"DEFAULT/enabled_apis": "osapi_compute", "DEFAULT/osapi_compute_listen_port": "18774", "keystone_authtoken/username": "nova", "wsgi/api_paste_config": MergedDir + "/api-paste.ini"},
			creds:    map[string]string{"keystone_authtoken/password": "${raw:nova-secret/NovaPassword}", "api_database/connection": "mysql+pymysql://nova_api:${url:nova-secret/NovaAPIDatabasePassword}@127.0.0.1:3306/nova_api?charset=utf8"},
			scripts:  []string{"merge_config.py", "run.sh", WSGIFile}},
		{svc: Scheduler,
			defaults: map[string]string{"scheduler/discover_hosts_in_cells_interval": "30", "placement/auth_url": "http://198.51.100.1:5000/v3"},
			creds:    map[string]string{"DEFAULT/transport_url": "${raw:nova-api-transport/transport_url}", "placement/password": "${raw:nova-secret/NovaPassword}"},
			scripts:  []string{"merge_config.py", "run.sh"}},
		{svc: Conductor, cell: "cell0",
			defaults: map[string]string{"conductor/workers": "1", "DEFAULT/host": "nova-nova-conductor"},
			creds:    map[string]string{"database/connection": "mysql+pymysql://nova_cell0:${url:nova-secret/cell0}@127.0.0.1:3306/nova_cell0?charset=utf8"},
			scripts:  []string{"db-sync.sh", "merge_config.py", "run.sh"}},
		{svc: Metadata, cell: "cell1", port: 8775,
			defaults: map[string]string{"api/local_metadata_per_cell": "true", "DEFAULT/metadata_listen_port": "8775"},
			creds:    map[string]string{"neutron/metadata_proxy_shared_secret": "${raw:nova-secret/MetadataSecret}"},
			scripts:  []string{"merge_config.py", "run.sh", WSGIFile}},
		{svc: NoVNCProxy, cell: "cell1", port: 6080,
			defaults: map[string]string{"vnc/enabled": "true", "vnc/novncproxy_port": "6080"},
			scripts:  []string{"merge_config.py", "run.sh"}},
		{svc: Cell, cell: "cell2",
			creds:   map[string]string{"database/connection": "mysql+pymysql://nova_cell0:${url:nova-secret/cell0}@127.0.0.1:3306/nova_cell0?charset=utf8"},
			scripts: []string{"cell-delete.sh", "cell-mapping.sh", "host-discovery.sh", "merge_config.py"}},
	} {
		t.Run(string(tc.svc), func(t *testing.T) {
			in := instance(tc.svc)
			in.CellName, in.Port, in.MetadataSecretKey = tc.cell, tc.port, "MetadataSecret"
			if tc.cell != "" {
				in.CellDatabase = &DB{Host: "127.0.0.1", User: "nova_cell0", Database: "nova_cell0", PasswordKey: "cell0"}
			}
			d, c := in.Config()
			for k, want := range tc.defaults {
				sec, opt, _ := strings.Cut(k, "/")
				require.Equal(t, want, d[sec][opt], k)
			}
			for k, want := range tc.creds {
				sec, opt, _ := strings.Cut(k, "/")
				require.Equal(t, want, c[sec][opt], k)
			}
			for sec, opts := range d {
				for opt, v := range opts {
					require.NotContains(t, v, "${", "credential %s/%s in the defaults", sec, opt)
					require.NotEqual(t, "password", opt, "password in the defaults (%s)", sec)
				}
			}
			var names []string
			for k := range in.Scripts() {
				names = append(names, k)
			}
			require.ElementsMatch(t, tc.scripts, names)
		})
	}
}

func TestSuperconductorSyncsTheAPIDatabase(t *testing.T) {
	in := instance(Conductor)
	in.CellName = "cell0"
	require.Contains(t, in.Scripts()["db-sync.sh"], "api_db sync\n")
	in.CellName = "cell1"
	require.NotContains(t, in.Scripts()["db-sync.sh"], "api_db sync")
}

func TestConfigDataCarriesCustomServiceConfigLast(t *testing.T) {
	in := instance(Scheduler)
	require.NotContains(t, in.ConfigData(), CustomFile)
	in.CustomServiceConfig = "[scheduler]\ndiscover_hosts_in_cells_interval = 2\n"
	data := in.ConfigData()
	require.Equal(t, in.CustomServiceConfig, data[CustomFile])
	require.Less(t, DefaultsFile, CredentialsFile)
	require.Less(t, CredentialsFile, CustomFile, "the merge takes files in name order: custom wins")
	require.Equal(t, []string{"nova-api-transport", "nova-secret"}, in.Secrets())
}

// The Deployment mounts config-data and the Secrets only in the init container; the main container gets
// scripts and the merged configuration. The hash is on the pod template.
func TestDeploymentMounts(t *testing.T) {
	in := instance(API)
	in.Port = 8774
	d := in.Deployment("abc")
	require.Equal(t, "abc", d.Spec.Template.Annotations[HashAnnotation])
	spec := d.Spec.Template.Spec
	mountsOf := func(c corev1.Container) []string {
		var out []string
		for _, m := range c.VolumeMounts {
			out = append(out, m.MountPath)
		}
		return out
	}
	require.ElementsMatch(t, []string{ConfigDataDir, ScriptsDir, MergedDir, SecretsDir + "/nova-api-transport", SecretsDir + "/nova-secret"}, mountsOf(spec.InitContainers[0]))
	require.ElementsMatch(t, []string{ScriptsDir, MergedDir, StateDir}, mountsOf(spec.Containers[0]))
	require.Equal(t, []string{"/bin/bash", ScriptsDir + "/run.sh"}, spec.Containers[0].Command)
	require.NotNil(t, spec.Containers[0].ReadinessProbe.HTTPGet)
	require.False(t, *spec.AutomountServiceAccountToken)
	require.Equal(t, PodFSGroup, *spec.SecurityContext.FSGroup, "a non-root image reads the Secrets through the volumes' group")

	j := instance(Cell).Job("cell-mapping", "cell-mapping.sh", "h1", map[string]string{"CELL_NAME": "cell1"})
	require.Equal(t, "nova-nova-cell-cell-mapping", j.Name)
	require.Equal(t, corev1.RestartPolicyNever, j.Spec.Template.Spec.RestartPolicy)
	require.Equal(t, []corev1.EnvVar{{Name: "CELL_NAME", Value: "cell1"}}, j.Spec.Template.Spec.Containers[0].Env)
}

func TestConfigHashNamesTheChangedInput(t *testing.T) {
	cd, sc := map[string]string{"99-custom.conf": "a"}, map[string]string{"run.sh": "x"}
	h1, in1 := ConfigHash(cd, sc, map[string]string{"nova-secret": "s1"})
	h2, in2 := ConfigHash(cd, sc, map[string]string{"nova-secret": "s1"})
	require.Equal(t, h1, h2)
	require.Empty(t, ChangedInputs(in1, in2))
	h3, in3 := ConfigHash(map[string]string{"99-custom.conf": "b"}, sc, map[string]string{"nova-secret": "s1"})
	require.NotEqual(t, h1, h3)
	require.Equal(t, []string{"config-data"}, ChangedInputs(in1, in3))
	_, in4 := ConfigHash(cd, sc, map[string]string{"nova-secret": "s2", "cell1-transport": "t"})
	require.Equal(t, []string{"secret/cell1-transport", "secret/nova-secret"}, ChangedInputs(in1, in4))
}

// The metadata API runs as nova-api's metadata application (enabled_apis = metadata, under uwsgi its WSGI
// application): nova-api-metadata reads instances through
// the conductor of its bus, and a global service's conductor sees cell0 only.
func TestMetadataRunsWithoutConductorIndirection(t *testing.T) {
	for _, cell := range []string{"", "cell1"} {
		in := instance(Metadata)
		in.CellName = cell
		run := in.Scripts()["run.sh"]
		require.Contains(t, run, "exec nova-api --config-file "+MergedConfig+"\n", "cell %q", cell)
		require.NotContains(t, run, "nova-api-metadata", "cell %q", cell)
		d, _ := in.Config()
		require.Equal(t, "metadata", d["DEFAULT"]["enabled_apis"], "cell %q", cell)
	}
}

// The compute API and the metadata service run under uwsgi (an idle nova-api launcher polls its worker
// 100 times a second), with the paste pipeline first among Nova's files, Connection: close (uwsgi resets a
// reused connection), and nova-api where the image has no uwsgi.
func TestAPIsServeUnderUWSGI(t *testing.T) {
	for _, tc := range []struct {
		svc       Service
		port      int32
		processes string
		module    string
	}{
		{API, 8774, "2", "nova.api.openstack.compute.wsgi"},
		{Metadata, 8775, "1", "nova.api.metadata.wsgi"},
	} {
		t.Run(string(tc.svc), func(t *testing.T) {
			in := instance(tc.svc)
			in.Port = tc.port
			scripts := in.Scripts()
			run := scripts["run.sh"]
			for _, want := range []string{
				fmt.Sprintf("--http-socket :%d ", tc.port),
				"--processes " + tc.processes + " ",
				`OS_NOVA_CONFIG_FILES="api-paste.ini;nova.conf"`,
				"OS_NOVA_CONFIG_DIR=" + MergedDir + " ",
				`--add-header "Connection: close"`,
				"--wsgi-file " + ScriptsDir + "/" + WSGIFile + "\n",
				"exec nova-api --config-file " + MergedConfig + "\n",
			} {
				require.Contains(t, run, want)
			}
			require.Less(t, strings.Index(run, "exec nova-api"), strings.Index(run, "exec \"$uwsgi\""), "the fallback comes before uwsgi's exec")
			require.Contains(t, scripts[WSGIFile], "from "+tc.module+" import init_application\n")
			require.Contains(t, scripts[WSGIFile], "\napplication = init_application()\n")

			dir := t.TempDir()
			for name, body := range map[string]string{"run.sh": run, WSGIFile: scripts[WSGIFile]} {
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
			}
			out, err := exec.Command("bash", "-n", filepath.Join(dir, "run.sh")).CombinedOutput()
			require.NoError(t, err, "%s", out)
			if py, err := exec.LookPath("python3"); err == nil {
				out, err := exec.Command(py, "-m", "py_compile", filepath.Join(dir, WSGIFile)).CombinedOutput()
				require.NoError(t, err, "%s", out)
			}
		})
	}
	require.NotContains(t, instance(Scheduler).Scripts(), WSGIFile)
}
