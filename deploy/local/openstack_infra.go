package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Process names of the OpenStack part of the stack.
const (
	procMariaDB  = "os-mariadb"
	procEPMD     = "os-epmd"
	procRabbitMQ = "os-rabbitmq"
)

// mariadbSocket is the server's Unix socket; root logs in through it without a password.
func (o *osEnv) mariadbSocket() string { return filepath.Join(o.Data, "mariadb.sock") }

// upMariaDB initializes the data directory once and starts the server on loopback.
func (o *osEnv) upMariaDB(ctx context.Context) error {
	datadir := filepath.Join(o.Data, "mariadb")
	if _, err := os.Stat(filepath.Join(datadir, "mysql")); errors.Is(err, os.ErrNotExist) {
		o.s.Logf("openstack: initializing MariaDB in %s", datadir)
		if err := o.run(ctx, "mariadb-install-db", nil, "/usr/bin/mariadb-install-db", "--no-defaults",
			"--datadir="+datadir, "--user=root", "--auth-root-authentication-method=normal",
			"--skip-test-db", "--skip-name-resolve"); err != nil {
			return err
		}
	}
	_, err := o.s.Start(Proc{Name: procMariaDB, Argv: []string{"/usr/sbin/mariadbd", "--no-defaults",
		"--datadir=" + datadir,
		"--socket=" + o.mariadbSocket(),
		"--pid-file=" + filepath.Join(o.Data, "mariadb.pid"),
		// The gateway too: pods on the real node reach the stack's services there.
		"--bind-address=127.0.0.1," + HostGateway, fmt.Sprintf("--port=%d", MariaDBPort),
		"--user=root", "--skip-name-resolve", "--skip-log-bin",
		"--max-connections=1000",
		"--innodb-buffer-pool-size=256M",
		// Throwaway data: trade durability for speed of the schema migrations.
		"--innodb-flush-log-at-trx-commit=0", "--innodb-doublewrite=0", "--sync-binlog=0",
		"--character-set-server=utf8", "--collation-server=utf8_general_ci",
	}})
	if err != nil {
		return err
	}
	return o.s.WaitFor(ctx, "mariadb ready", procMariaDB, 200*time.Millisecond, func(ctx context.Context) error {
		_, err := o.sql(ctx, "SELECT 1")
		return err
	})
}

// SQL runs statements as MariaDB's root (through the server's socket) and returns the output,
// tab-separated without headers: for tests and people inspecting the stack's databases.
func (s *Stack) SQL(ctx context.Context, stmts string) (string, error) {
	o, err := s.newOSEnv()
	if err != nil {
		return "", err
	}
	return o.sql(ctx, stmts)
}

// sql runs statements as MariaDB's root and returns the output (tab-separated, no headers).
func (o *osEnv) sql(ctx context.Context, stmts string) (string, error) {
	cmd := exec.CommandContext(ctx, "/usr/bin/mariadb", "--no-defaults", "--socket="+o.mariadbSocket(), "-uroot", "-N", "-B")
	cmd.Stdin = strings.NewReader(stmts)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("mariadb: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// osDatabases maps each MariaDB user to its databases.
var osDatabases = map[string][]string{
	"keystone":  {"keystone"},
	"placement": {"placement"},
	"glance":    {"glance"},
	"neutron":   {"neutron"},
	"ironic":    {"ironic"},
}

// createDatabases creates every database and user (idempotent, one client call), and the administrator
// that creates databases and users over TCP for the Nova workflows.
func (o *osEnv) createDatabases(ctx context.Context) error {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE USER IF NOT EXISTS '%[1]s'@'%%' IDENTIFIED BY '%[2]s';\nALTER USER '%[1]s'@'%%' IDENTIFIED BY '%[2]s';\n", DatabaseAdminUser, o.Pw["db-admin"])
	fmt.Fprintf(&b, "GRANT ALL PRIVILEGES ON *.* TO '%s'@'%%' WITH GRANT OPTION;\n", DatabaseAdminUser)
	for user, dbs := range osDatabases {
		pw := o.Pw["db-"+user]
		fmt.Fprintf(&b, "CREATE USER IF NOT EXISTS '%s'@'%%' IDENTIFIED BY '%s';\n", user, pw)
		fmt.Fprintf(&b, "ALTER USER '%s'@'%%' IDENTIFIED BY '%s';\n", user, pw)
		for _, db := range dbs {
			fmt.Fprintf(&b, "CREATE DATABASE IF NOT EXISTS %s CHARACTER SET utf8;\n", db)
			fmt.Fprintf(&b, "GRANT ALL PRIVILEGES ON %s.* TO '%s'@'%%';\n", db, user)
		}
	}
	if _, err := o.sql(ctx, b.String()); err != nil {
		return fmt.Errorf("create OpenStack databases: %w", err)
	}
	return nil
}

// upRabbitMQ starts epmd and the broker on loopback, the broker's AMQP listener also on the hosts'
// gateway. The broker runs as root with its own home, config and data, bypassing Debian's wrapper
// (which switches user and process group).
func (o *osEnv) upRabbitMQ(ctx context.Context) error {
	home := filepath.Join(o.Data, "rabbitmq")
	if err := mkdirs(filepath.Join(home, "mnesia"), filepath.Join(home, "log")); err != nil {
		return err
	}
	if _, err := o.s.Start(Proc{Name: procEPMD, Argv: []string{"/usr/bin/epmd", "-address", "127.0.0.1", "-port", "4369"}}); err != nil {
		return err
	}
	if err := o.s.WaitFor(ctx, "epmd ready", procEPMD, 100*time.Millisecond, func(ctx context.Context) error {
		return dial("127.0.0.1:4369")
	}); err != nil {
		return err
	}
	// A broker started by an older stack serves its management API on loopback only: it starts again
	// with this configuration (the gateway listener), its queues and users kept in its data directory.
	if _, ok := o.s.Running(procRabbitMQ); ok && dial(net.JoinHostPort("127.0.0.1", fmt.Sprint(RabbitMQManagementPort))) == nil {
		o.s.Logf("openstack: rabbitmq serves its management API on loopback; restarting it on %s", HostGateway)
		if err := o.s.Stop(procRabbitMQ, 30*time.Second); err != nil {
			return err
		}
	}
	if _, err := o.s.Start(Proc{Name: procRabbitMQ, Argv: []string{"/usr/lib/rabbitmq/bin/rabbitmq-server"}, Env: o.rabbitEnv(), Dir: home}); err != nil {
		return err
	}
	if err := o.s.WaitFor(ctx, "rabbitmq ready", procRabbitMQ, 300*time.Millisecond, func(ctx context.Context) error {
		for _, h := range []string{"127.0.0.1", HostGateway} {
			if err := dial(net.JoinHostPort(h, fmt.Sprint(RabbitMQPort))); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	return o.ensureRabbitManagement(ctx)
}

// ensureRabbitManagement makes sure the management API answers: a broker started before the stack
// enabled the plugin (in enabled_plugins) gets it enabled online.
func (o *osEnv) ensureRabbitManagement(ctx context.Context) error {
	addr := net.JoinHostPort(HostGateway, fmt.Sprint(RabbitMQManagementPort))
	if dial(addr) == nil {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	enabled := false
	return o.s.WaitFor(wctx, "rabbitmq management API", procRabbitMQ, time.Second, func(ctx context.Context) error {
		if err := dial(addr); err == nil {
			return nil
		}
		if !enabled {
			cmd := exec.CommandContext(ctx, "/usr/lib/rabbitmq/bin/rabbitmq-plugins", "enable", "--online", "rabbitmq_management")
			cmd.Env = append(os.Environ(), o.rabbitEnv()...)
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("rabbitmq-plugins enable rabbitmq_management: %w: %s", err, out)
			}
			enabled = true
		}
		return fmt.Errorf("%s not answering yet", addr)
	})
}

func (o *osEnv) rabbitEnv() []string {
	home := filepath.Join(o.Data, "rabbitmq")
	etc := filepath.Join(o.Etc, "rabbitmq")
	return []string{
		"HOME=" + home, // the Erlang cookie
		"RABBITMQ_NODENAME=rabbit@localhost",
		"RABBITMQ_CONF_ENV_FILE=" + filepath.Join(etc, "rabbitmq-env.conf"),
		"RABBITMQ_CONFIG_FILE=" + filepath.Join(etc, "rabbitmq.conf"),
		"RABBITMQ_ADVANCED_CONFIG_FILE=" + filepath.Join(etc, "advanced.config"),
		"RABBITMQ_ENABLED_PLUGINS_FILE=" + filepath.Join(etc, "enabled_plugins"),
		"RABBITMQ_MNESIA_BASE=" + filepath.Join(home, "mnesia"),
		"RABBITMQ_LOG_BASE=" + filepath.Join(home, "log"),
		"RABBITMQ_PID_FILE=" + filepath.Join(home, "rabbit.pid"),
		"RABBITMQ_LOGS=-",
		"RABBITMQ_DIST_PORT=25672",
		"ERL_EPMD_ADDRESS=127.0.0.1",
		"ERL_EPMD_PORT=4369",
		// Erlang distribution (the CLI tools' channel) on loopback only.
		"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}",
	}
}

func dial(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

// httpReady is nil when every URL answers below 500 (version documents answer 200 or 300).
func httpReady(ctx context.Context, urls ...string) error {
	cl := &http.Client{Timeout: 5 * time.Second}
	for _, u := range urls {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return err
		}
		resp, err := cl.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			return fmt.Errorf("GET %s: %s", u, resp.Status)
		}
	}
	return nil
}

// run executes a one-shot command (schema migration, bootstrap), logging into os-setup.log; a failure
// carries the tail of the command's output.
func (o *osEnv) run(ctx context.Context, what string, stdin []byte, argv ...string) error {
	_, err := o.output(ctx, what, stdin, nil, argv...)
	return err
}

// output is run with extra environment variables, returning standard output.
func (o *osEnv) output(ctx context.Context, what string, stdin []byte, env []string, argv ...string) (string, error) {
	if err := mkdirs(filepath.Dir(o.s.LogFile("os-setup"))); err != nil {
		return "", err
	}
	logf, err := os.OpenFile(o.s.LogFile("os-setup"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return "", err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "\n=== %s %s\n", time.Now().Format(time.RFC3339), what)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(o.pythonEnv(), env...)
	cmd.Dir = o.Dir
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, combined bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &combined
	start := time.Now()
	err = cmd.Run()
	logf.Write(combined.Bytes())
	logf.Write(stdout.Bytes())
	fmt.Fprintf(logf, "=== %s done in %s: %v\n", what, time.Since(start).Round(time.Millisecond), err)
	if err != nil {
		return "", fmt.Errorf("%s: %w\n%s", what, err, tail(combined.String()+stdout.String(), 20))
	}
	return stdout.String(), nil
}

// pythonEnv is the environment of every OpenStack process: Debian's python3 first on PATH (the
// machine's default python3 lacks the OpenStack libraries) and the stack's helpers importable.
func (o *osEnv) pythonEnv() []string {
	return []string{
		"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + os.Getenv("HOME"),
		"LANG=C.UTF-8",
		"PYTHONPATH=" + filepath.Join(o.Lib, "python"),
		"PYTHONDONTWRITEBYTECODE=1",
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// migrateOnce is once for a service's database migration (the marker is the service's MariaDB user of
// osDatabases): it starts from empty databases. MariaDB's DDL is not transactional, so a migration killed
// midway (an interrupted first up) leaves a schema alembic cannot resume ("Duplicate column name"); as
// the step never completed, nothing in them is worth keeping.
func (o *osEnv) migrateOnce(ctx context.Context, service string, step func(context.Context) error) error {
	return o.once(ctx, service, func(ctx context.Context) error {
		var b strings.Builder
		for _, db := range osDatabases[service] {
			fmt.Fprintf(&b, "DROP DATABASE IF EXISTS %[1]s;\nCREATE DATABASE %[1]s CHARACTER SET utf8;\nGRANT ALL PRIVILEGES ON %[1]s.* TO '%[2]s'@'%%';\n", db, service)
		}
		if _, err := o.sql(ctx, b.String()); err != nil {
			return fmt.Errorf("empty the %s databases: %w", service, err)
		}
		return step(ctx)
	})
}

// once runs step unless its marker exists, then writes the marker: schema migrations and bootstraps are
// skipped on later Ups, which keep the data.
func (o *osEnv) once(ctx context.Context, marker string, step func(context.Context) error) error {
	path := filepath.Join(o.Dir, "markers", marker)
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if err := step(ctx); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(time.Now().Format(time.RFC3339)+"\n"), 0o644)
}
