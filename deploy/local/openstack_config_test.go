package local

import (
	"bufio"
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testOSEnv is an osEnv for rendering only: nothing is created on disk.
func testOSEnv(t *testing.T) (*osEnv, string) {
	state := filepath.Join(t.TempDir(), "state")
	dir := filepath.Join(state, "openstack")
	pw := map[string]string{}
	for _, n := range osPasswordNames {
		pw[n] = "pw-" + n
	}
	return &osEnv{
		s: &Stack{StateDir: state}, Dir: dir,
		Etc: filepath.Join(dir, "etc"), Data: filepath.Join(dir, "data"), Lib: filepath.Join(dir, "lib"),
		Pw: pw, Transport: "rabbit://openstack:x@127.0.0.1:5672/",
		Keystone: "http://127.0.0.1:5000", Region: OpenStackRegion, Gateway: HostGateway, Physnet: "physnet1",
		RabbitPort: RabbitMQPort, ControlHost: "stackflow-control", GatewayHost: GatewayChassis,
	}, state
}

// iniOptions parses rendered oslo.config INI into section/option → value.
func iniOptions(t *testing.T, content []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	section := "DEFAULT"
	sc := bufio.NewScanner(bytes.NewReader(content))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				k, v, ok = strings.Cut(line, ":") // rabbitmq.conf style
			}
			if ok {
				out[section+"/"+strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// pathOf returns the filesystem path a value names (an absolute path or a file:// URL), or "".
func pathOf(v string) string {
	switch {
	case strings.HasPrefix(v, "file://"):
		return strings.TrimPrefix(v, "file://")
	case strings.HasPrefix(v, "/"):
		return v
	}
	return ""
}

// TestRenderedConfigsStayInStateDir renders every OpenStack configuration of the local stack and checks
// that the stack depends on nothing outside its state directory: every path-valued option points inside
// it, and every option whose package default is under /etc or /var (key repositories, state and lock
// paths, policy and paste files) is set. A machine that happens to have /etc/keystone must not hide a
// missing line again.
func TestRenderedConfigsStayInStateDir(t *testing.T) {
	o, state := testOSEnv(t)
	rendered := map[string]map[string]string{}
	for dst, src := range osConfigs {
		if strings.HasPrefix(src, "@") || strings.HasPrefix(dst, "rabbitmq/") || !strings.HasSuffix(dst, ".conf") && !strings.HasSuffix(dst, ".ini") {
			continue // package files copied as they are, RabbitMQ's own format, and non-INI files
		}
		b, err := o.render(src)
		require.NoError(t, err, "render %s", src)
		opts := iniOptions(t, b)
		rendered[dst] = opts
		for key, v := range opts {
			p := pathOf(v)
			if p == "" {
				continue
			}
			assert.True(t, strings.HasPrefix(filepath.Clean(p), state+string(filepath.Separator)),
				"%s: %s = %s is outside the state directory %s", dst, key, v, state)
		}
	}

	// Options whose defaults lie outside the state directory, by the file of the service that reads them.
	// The list comes from oslo-config-generator's defaults for each service's namespaces (path-valued
	// options of the code paths these services run).
	required := map[string][]string{
		"keystone/keystone.conf": {"fernet_tokens/key_repository", "fernet_receipts/key_repository",
			"credential/key_repository", "oslo_policy/policy_file"},
		"placement/placement.conf": {"oslo_policy/policy_file"},
		"glance/glance-api.conf": {"DEFAULT/node_staging_uri", "glance_store/filesystem_store_datadir",
			"oslo_concurrency/lock_path", "paste_deploy/config_file", "oslo_policy/policy_file"},
		"neutron/neutron.conf": {"DEFAULT/state_path", "DEFAULT/api_paste_config", "oslo_concurrency/lock_path",
			"oslo_policy/policy_file"},
		"ironic/ironic.conf": {"DEFAULT/state_path", "oslo_concurrency/lock_path", "oslo_policy/policy_file"},
	}
	for file, keys := range required {
		opts, ok := rendered[file]
		require.True(t, ok, "no rendered %s", file)
		for _, k := range keys {
			assert.NotEmpty(t, pathOf(opts[k]), "%s must set %s inside the state directory (its default is outside)", file, k)
		}
	}

	// Every file those options name that the stack writes itself is rendered too.
	for file, opts := range rendered {
		for _, k := range []string{"oslo_policy/policy_file", "paste_deploy/config_file", "DEFAULT/api_paste_config", "wsgi/api_paste_config"} {
			p := pathOf(opts[k])
			if p == "" {
				continue
			}
			rel, err := filepath.Rel(o.Etc, p)
			require.NoError(t, err)
			_, ok := osConfigs[rel]
			assert.True(t, ok, "%s: %s names %s, which the stack does not write", file, k, p)
		}
	}
}
