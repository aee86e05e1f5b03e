package local

import (
	"bytes"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/template"
)

// openStackFiles holds the configuration templates, the WSGI entry point and the bootstrap script.
//
//go:embed all:openstack
var openStackFiles embed.FS

// osEnv is everything the OpenStack services' configuration is rendered from. Its methods are used by
// the templates in openstack/etc.
type osEnv struct {
	s *Stack
	// Dir is s.Path("openstack"); Etc, Data and Lib are its configuration, data and code directories.
	Dir, Etc, Data, Lib string
	// Share is the unpacked *-common packages' /usr/share (api-paste.ini files).
	Share string
	// Pw holds the generated passwords, by user ("admin", "rabbit", service users, "db-<user>").
	Pw map[string]string
	// Transport is the message-bus URL the services on this machine use.
	Transport            string
	Keystone             string
	Region               string
	Gateway              string
	Physnet              string
	RabbitPort           int
	RabbitManagementPort int
	// ControlHost names the control services (conductors, schedulers); GatewayHost the stack's own OVN
	// chassis, the gateway of the cloud's routers.
	ControlHost, GatewayHost string
}

// osPasswordNames are the users that get a generated password.
var osPasswordNames = []string{
	"admin", "rabbit",
	"keystone", "placement", "glance", "neutron", "nova", "ironic",
	"db-keystone", "db-placement", "db-glance", "db-neutron", "db-ironic",
	"db-admin",
}

// osServiceUsers are the Keystone users of the services, each with admin and service roles in the
// service project.
var osServiceUsers = []string{"placement", "glance", "neutron", "nova", "ironic"}

func (s *Stack) newOSEnv() (*osEnv, error) {
	dir := s.Path("openstack")
	o := &osEnv{
		s: s, Dir: dir,
		Etc:         filepath.Join(dir, "etc"),
		Data:        filepath.Join(dir, "data"),
		Lib:         filepath.Join(dir, "lib"),
		Share:       filepath.Join(s.CacheDir, "share", "debian-common", "root", "usr", "share"),
		Keystone:    fmt.Sprintf("http://127.0.0.1:%d", KeystonePort),
		Region:      OpenStackRegion,
		Gateway:     HostGateway,
		Physnet:     "physnet1",
		RabbitPort:  RabbitMQPort,
		ControlHost: "stackflow-control",
		GatewayHost: GatewayChassis,
	}
	o.RabbitManagementPort = RabbitMQManagementPort
	if err := mkdirs(o.Etc, o.Data, o.Lib, filepath.Join(dir, "markers")); err != nil {
		return nil, err
	}
	pw, err := loadPasswords(filepath.Join(dir, "passwords.json"))
	if err != nil {
		return nil, err
	}
	o.Pw = pw
	o.Transport = fmt.Sprintf("rabbit://openstack:%s@127.0.0.1:%d/", pw["rabbit"], RabbitMQPort)
	return o, nil
}

// loadPasswords reads the stack's OpenStack passwords, generating the missing ones. They are kept
// across down/up because the databases and Keystone keep them too.
func loadPasswords(file string) (map[string]string, error) {
	pw := map[string]string{}
	b, err := os.ReadFile(file)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &pw); err != nil {
			return nil, fmt.Errorf("read passwords %s: %w", file, err)
		}
	case !errors.Is(err, os.ErrNotExist):
		return nil, err
	}
	changed := false
	for _, n := range osPasswordNames {
		if pw[n] != "" {
			continue
		}
		buf := make([]byte, 12)
		if _, err := rand.Read(buf); err != nil {
			return nil, err
		}
		// Hex only: the passwords go into URLs and INI files unquoted.
		pw[n] = hex.EncodeToString(buf)
		changed = true
	}
	if changed {
		b, _ := json.MarshalIndent(pw, "", "  ")
		if err := os.WriteFile(file, b, 0o600); err != nil {
			return nil, err
		}
	}
	return pw, nil
}

// NeutronPort is neutron-server's port, for its configuration.
func (o *osEnv) NeutronPort() int { return NeutronPort }

// DB is the SQLAlchemy URL of database db for MariaDB user user.
func (o *osEnv) DB(user, db string) string {
	return fmt.Sprintf("mysql+pymysql://%s:%s@127.0.0.1:%d/%s?charset=utf8", user, o.Pw["db-"+user], MariaDBPort, db)
}

// Auth renders the [keystone_authtoken] section of a service whose Keystone user is user.
func (o *osEnv) Auth(user string) string {
	return strings.Join([]string{
		"[keystone_authtoken]",
		"www_authenticate_uri = " + o.Keystone + "/v3",
		o.Client(user, "127.0.0.1", ""),
		"service_token_roles_required = true",
	}, "\n")
}

// Client renders keystoneauth options for a service client that logs in as user through Keystone at
// host; endpoint, when set, overrides the catalog.
func (o *osEnv) Client(user, host, endpoint string) string {
	lines := []string{
		fmt.Sprintf("auth_url = http://%s:%d/v3", host, KeystonePort),
		"auth_type = password",
		"project_domain_name = Default",
		"user_domain_name = Default",
		"project_name = service",
		"username = " + user,
		"password = " + o.Pw[user],
		"region_name = " + o.Region,
		"valid_interfaces = public",
	}
	if endpoint != "" {
		lines = append(lines, "endpoint_override = "+endpoint)
	}
	return strings.Join(lines, "\n")
}

// osConfigs maps each rendered file (under Etc) to its template (under openstack/etc).
var osConfigs = map[string]string{
	"keystone/keystone.conf":      "keystone.conf.tmpl",
	"placement/placement.conf":    "placement.conf.tmpl",
	"glance/glance-api.conf":      "glance-api.conf.tmpl",
	"neutron/neutron.conf":        "neutron.conf.tmpl",
	"neutron/ml2_conf.ini":        "ml2_conf.ini.tmpl",
	"ironic/ironic.conf":          "ironic.conf.tmpl",
	"rabbitmq/rabbitmq.conf":      "rabbitmq.conf.tmpl",
	"rabbitmq/enabled_plugins":    "rabbitmq-enabled-plugins.tmpl",
	"rabbitmq/rabbitmq-env.conf":  "rabbitmq-env.conf.tmpl",
	"neutron/api-paste.ini":       "@neutron-common/api-paste.ini",
	"glance/glance-api-paste.ini": "@glance-common/glance-api-paste.ini",
	"keystone/policy.yaml":        "policy.yaml.tmpl",
	"placement/policy.yaml":       "policy.yaml.tmpl",
	"glance/policy.yaml":          "policy.yaml.tmpl",
	"neutron/policy.yaml":         "policy.yaml.tmpl",
	"ironic/policy.yaml":          "policy.yaml.tmpl",
}

// writeConfigs renders every configuration file and unpacks the Python helpers. Files are rewritten on
// every Up; a running service keeps what it read at its start.
func (o *osEnv) writeConfigs() error {
	for _, d := range []string{"glance/images", "glance/staging", "neutron", "ironic", "keystone"} {
		if err := mkdirs(filepath.Join(o.Data, d)); err != nil {
			return err
		}
	}
	for dst, src := range osConfigs {
		path := filepath.Join(o.Etc, dst)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		var content []byte
		switch {
		case strings.HasPrefix(src, "@"):
			b, err := os.ReadFile(filepath.Join(o.Share, src[1:]))
			if err != nil {
				return fmt.Errorf("%s (run deploy/local/scripts/install-packages.sh): %w", dst, err)
			}
			content = b
		default:
			b, err := o.render(src)
			if err != nil {
				return err
			}
			content = b
		}
		// Configuration holds passwords: readable by root only.
		if err := writeIfChanged(path, content, 0o600); err != nil {
			return err
		}
	}
	return fs.WalkDir(openStackFiles, "openstack/python", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := openStackFiles.ReadFile(p)
		if err != nil {
			return err
		}
		dst := filepath.Join(o.Lib, strings.TrimPrefix(p, "openstack/"))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return writeIfChanged(dst, b, 0o644)
	})
}

func (o *osEnv) render(name string) ([]byte, error) {
	t, err := template.New(name).Option("missingkey=error").ParseFS(openStackFiles, "openstack/etc/"+name)
	if err != nil {
		return nil, fmt.Errorf("parse template %s: %w", name, err)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, o); err != nil {
		return nil, fmt.Errorf("render %s: %w", name, err)
	}
	return buf.Bytes(), nil
}

// writeIfChanged leaves an identical file alone, so its modification time says when it last changed.
func writeIfChanged(path string, content []byte, mode os.FileMode) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, content) {
		return os.Chmod(path, mode)
	}
	return os.WriteFile(path, content, mode)
}

// cloudsYAML is the admin cloud for clients on this machine (public endpoints, on loopback).
func (o *osEnv) cloudsYAML() []byte {
	return o.clouds(o.Keystone, "public")
}

// cloudsSecretYAML is the admin cloud of the Secret stackflow's workers read: Keystone and the catalog's
// internal endpoints on the hosts' gateway, which the workers reach from the real node's pods as from
// this machine.
func (o *osEnv) cloudsSecretYAML() []byte {
	return o.clouds(strings.Replace(o.Keystone, "127.0.0.1", HostGateway, 1), "internal")
}

func (o *osEnv) clouds(keystone, iface string) []byte {
	return fmt.Appendf(nil, `clouds:
  %s:
    auth:
      auth_url: %s/v3
      username: admin
      password: %s
      project_name: admin
      user_domain_name: Default
      project_domain_name: Default
    region_name: %s
    interface: %s
    identity_api_version: 3
`, CloudName, keystone, o.Pw["admin"], o.Region, iface)
}
