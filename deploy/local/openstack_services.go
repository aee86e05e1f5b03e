package local

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// pyMain is the command line that runs a console script's entry point with Debian's python3 (the
// console scripts themselves come only with the service packages, which the stack does not install).
func pyMain(script, module, fn string, args ...string) []string {
	code := fmt.Sprintf("import sys; sys.argv[0] = %q; from %s import %s as m; sys.exit(m())", script, module, fn)
	return append([]string{"/usr/bin/python3", "-c", code}, args...)
}

// configArgs is --config-file for each file under Etc.
func (o *osEnv) configArgs(files ...string) []string {
	var out []string
	for _, f := range files {
		out = append(out, "--config-file", filepath.Join(o.Etc, f))
	}
	return out
}

// api describes one API served by uwsgi.
type api struct {
	proc    string
	app     string // STACKFLOW_WSGI_APP
	port    int
	files   []string
	workers int
	// path is fetched to decide readiness (an unauthenticated version document).
	path string
	// gatewayOnly: the API listens on the hosts' gateway only (see apiNeutron).
	gatewayOnly bool
}

// startAPI starts an API under uwsgi on loopback and on the hosts' gateway. Connection: close, because
// uwsgi's http-socket resets connections that clients try to reuse.
func (o *osEnv) startAPI(a api) (bool, error) {
	var files []string
	for _, f := range a.files {
		files = append(files, filepath.Join(o.Etc, f))
	}
	workers := a.workers
	if workers == 0 {
		workers = 1
	}
	argv := []string{"/usr/bin/uwsgi",
		"--plugin", "python3",
		"--master", "--die-on-term", "--need-app", "--lazy-apps", "--enable-threads",
		"--processes", fmt.Sprint(workers), "--threads", "1",
		"--http-socket", fmt.Sprintf("127.0.0.1:%d", a.port),
		"--http-socket", fmt.Sprintf("%s:%d", HostGateway, a.port),
		"--add-header", "Connection: close",
		"--buffer-size", "65535",
		"--disable-logging",
		"--wsgi-file", filepath.Join(o.Lib, "python", "stackflow_openstack", "wsgi.py"),
	}
	env := append(o.pythonEnv(), "STACKFLOW_WSGI_APP="+a.app, "STACKFLOW_CONFIG_FILES="+strings.Join(files, ";"))
	return o.s.Start(Proc{Name: a.proc, Argv: argv, Env: env})
}

// waitAPI waits until the API answers on both addresses.
func (o *osEnv) waitAPI(ctx context.Context, a api) error {
	return o.s.WaitFor(ctx, a.proc+" ready", a.proc, 300*time.Millisecond, func(ctx context.Context) error {
		gw := fmt.Sprintf("http://%s:%d%s", HostGateway, a.port, a.path)
		if a.gatewayOnly {
			return httpReady(ctx, gw)
		}
		return httpReady(ctx, fmt.Sprintf("http://127.0.0.1:%d%s", a.port, a.path), gw)
	})
}

// startPy starts a Python service (conductor, scheduler, …) from its entry point.
func (o *osEnv) startPy(proc, module, fn string, files ...string) (bool, error) {
	return o.s.Start(Proc{Name: proc, Argv: pyMain(proc, module, fn, o.configArgs(files...)...), Env: o.pythonEnv()})
}

// Every API of the local cloud.
var (
	apiKeystone  = api{proc: "os-keystone", app: "keystone", port: KeystonePort, files: []string{"keystone/keystone.conf"}, workers: 2, path: "/v3"}
	apiPlacement = api{proc: "os-placement", app: "placement", port: PlacementPort, files: []string{"placement/placement.conf"}, workers: 2, path: "/"}
	apiGlance    = api{proc: "os-glance-api", app: "glance", port: GlancePort, files: []string{"glance/glance-api.conf"}, path: "/versions"}
	// apiNeutron is neutron-server itself, not uwsgi: ML2/OVN opens its OVN connections in the workers
	// neutron-server forks (API and OVN maintenance), which Zed's uwsgi application never starts. It has
	// one bind address, the hosts' gateway, which this machine reaches too.
	apiNeutron = api{proc: "os-neutron-server", app: "neutron", port: NeutronPort, files: []string{"neutron/neutron.conf", "neutron/ml2_conf.ini"}, path: "/", gatewayOnly: true}
	apiIronic  = api{proc: "os-ironic-api", app: "ironic", port: IronicPort, files: []string{"ironic/ironic.conf"}, path: "/"}
)

// upKeystone migrates and bootstraps Keystone once, starts it and registers the service users,
// services and endpoints.
func (o *osEnv) upKeystone(ctx context.Context) (bool, error) {
	conf := o.configArgs("keystone/keystone.conf")
	manage := func(args ...string) []string {
		return pyMain("keystone-manage", "keystone.cmd.manage", "main", append(conf, args...)...)
	}
	// fernet_setup and credential_setup only write random keys; doing that here spares two Python
	// start-ups on Keystone's path, which everything else waits for.
	for _, repo := range []string{"fernet-keys", "credential-keys"} {
		if err := ensureFernetKeys(filepath.Join(o.Data, "keystone", repo)); err != nil {
			return false, err
		}
	}
	err := o.migrateOnce(ctx, "keystone", func(ctx context.Context) error {
		if err := o.run(ctx, "keystone-manage db_sync", nil, manage("db_sync")...); err != nil {
			return err
		}
		// The admin password goes by environment, not on a command line anyone can read.
		_, err := o.output(ctx, "keystone-manage bootstrap", nil, []string{"OS_BOOTSTRAP_PASSWORD=" + o.Pw["admin"]},
			manage("bootstrap", "--bootstrap-region-id", o.Region,
				"--bootstrap-admin-url", o.Keystone+"/v3",
				"--bootstrap-internal-url", o.Keystone+"/v3",
				"--bootstrap-public-url", o.Keystone+"/v3")...)
		return err
	})
	if err != nil {
		return false, err
	}
	started, err := o.startAPI(apiKeystone)
	if err != nil {
		return false, err
	}
	return started, o.waitAPI(ctx, apiKeystone)
}

// ensureFernetKeys creates a Fernet key repository as keystone-manage would: key 0 staged, key 1
// primary, each 32 random bytes in URL-safe base64. An existing repository is left alone.
func ensureFernetKeys(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "0")); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, name := range []string{"0", "1"} {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(base64.URLEncoding.EncodeToString(key)), 0o600); err != nil {
			return fmt.Errorf("fernet key %s: %w", filepath.Join(dir, name), err)
		}
	}
	return nil
}

// upPlacement, upGlance, upNeutron and upIronic migrate their database once and start their
// services; they return whether any process was started.
func (o *osEnv) upPlacement(ctx context.Context) (bool, error) {
	if err := o.migrateOnce(ctx, "placement", func(ctx context.Context) error {
		return o.run(ctx, "placement-manage db sync", nil,
			pyMain("placement-manage", "placement.cmd.manage", "main", append(o.configArgs("placement/placement.conf"), "db", "sync")...)...)
	}); err != nil {
		return false, err
	}
	started, err := o.startAPI(apiPlacement)
	if err != nil {
		return false, err
	}
	return started, o.waitAPI(ctx, apiPlacement)
}

func (o *osEnv) upGlance(ctx context.Context) (bool, error) {
	if err := o.migrateOnce(ctx, "glance", func(ctx context.Context) error {
		return o.run(ctx, "glance-manage db_sync", nil,
			pyMain("glance-manage", "glance.cmd.manage", "main", append(o.configArgs("glance/glance-api.conf"), "db_sync")...)...)
	}); err != nil {
		return false, err
	}
	started, err := o.startAPI(apiGlance)
	if err != nil {
		return false, err
	}
	return started, o.waitAPI(ctx, apiGlance)
}

func (o *osEnv) upNeutron(ctx context.Context) (bool, error) {
	// A state directory whose Neutron was set up before the stack had OVN holds vxlan networks that
	// ML2/OVN cannot bind: say so instead of failing every boot later.
	if _, err := os.Stat(filepath.Join(o.Dir, "markers", "neutron")); err == nil {
		if _, err := os.Stat(o.ovnDir("db", "ovnnb.db")); errors.Is(err, os.ErrNotExist) {
			return false, fmt.Errorf("the state directory %s holds a cloud set up before the stack ran OVN (its tenant network is vxlan, which ML2/OVN cannot bind): stop the stack and remove it (bin/stackflow-local down && rm -rf %s), then start again", o.s.StateDir, o.s.StateDir)
		}
	}
	if err := o.migrateOnce(ctx, "neutron", func(ctx context.Context) error {
		return o.run(ctx, "neutron-db-manage upgrade heads", nil,
			pyMain("neutron-db-manage", "neutron.db.migration.cli", "main",
				append(o.configArgs("neutron/neutron.conf", "neutron/ml2_conf.ini"), "upgrade", "heads")...)...)
	}); err != nil {
		return false, err
	}
	if err := o.upOVN(ctx); err != nil {
		return false, fmt.Errorf("ovn: %w", err)
	}
	started, err := o.startPy(apiNeutron.proc, "neutron.cmd.eventlet.server", "main", apiNeutron.files...)
	if err != nil {
		return false, err
	}
	return started, o.waitAPI(ctx, apiNeutron)
}

func (o *osEnv) upIronic(ctx context.Context) (bool, error) {
	conf := "ironic/ironic.conf"
	if err := o.migrateOnce(ctx, "ironic", func(ctx context.Context) error {
		return o.run(ctx, "ironic-dbsync upgrade", nil,
			pyMain("ironic-dbsync", "ironic.cmd.dbsync", "main", append(o.configArgs(conf), "upgrade")...)...)
	}); err != nil {
		return false, err
	}
	s1, err := o.startAPI(apiIronic)
	if err != nil {
		return false, err
	}
	s2, err := o.startPy("os-ironic-conductor", "ironic.cmd.conductor", "main", conf)
	if err != nil {
		return false, err
	}
	return s1 || s2, o.waitAPI(ctx, apiIronic)
}
