// Package database holds the activities that create and drop the databases and users of the Nova control
// plane on a MariaDB/MySQL server whose administrator's credentials a Secret holds; generated passwords go
// straight into Secrets. Access and ownership errors are classified beside them.
package database

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"time"

	"github.com/stackflow/stackflow/activities/kube"

	"github.com/go-sql-driver/mysql"
	"go.temporal.io/sdk/temporal"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Database holds the database-server activities: databases, users and grants in MariaDB (or MySQL),
// through the server's administrator account. Passwords are generated here and stored in Secrets before
// they are used; no password leaves an activity.
type Database struct {
	Core kubernetes.Interface

	// connect, when set (unit tests), opens the administrator's connection instead of open.
	connect func(ctx context.Context, srv DatabaseServer) (*sql.DB, error)
}

// NewDatabase builds the database activities from a REST config (Secrets hold every credential).
func NewDatabase(cfg *rest.Config) (*Database, error) {
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return &Database{Core: core}, nil
}

// DatabaseServer is a database server and the Secret (keys username, password) of its administrator.
type DatabaseServer struct {
	Host      string `json:"host"`
	Port      int32  `json:"port,omitempty"`
	Namespace string `json:"namespace"`
	// AdminSecret names the administrator's Secret in Namespace.
	AdminSecret string `json:"adminSecret"`
}

// DatabaseInput is one database and the user that owns it.
type DatabaseInput struct {
	Server   DatabaseServer `json:"server"`
	Database string         `json:"database"`
	User     string         `json:"user"`
	// Password is where the user's password lives; EnsureDatabase generates it when the key is missing.
	Password kube.SecretKeyRef `json:"password"`
	// Owner owns the password Secret when EnsureDatabase creates it.
	Owner *kube.Owner `json:"owner,omitempty"`
}

// Error types of the database activities.
const (
	ErrDatabaseInvalid = "DatabaseInvalid"
	ErrDatabaseAuth    = "DatabaseAccessDenied"
	// ErrDatabaseInUse is a database or user that exists and belongs to someone else.
	ErrDatabaseInUse = "DatabaseInUse"
)

// ownerComment is the comment a created database carries: it tells the owner's own database (created
// by an earlier attempt) from one that was there before, which is never adopted nor dropped.
func (in DatabaseInput) ownerComment() string {
	if in.Owner == nil {
		return "stackflow"
	}
	return "stackflow " + in.Owner.Kind + "/" + in.Owner.Name + " " + in.Owner.UID
}

// dbOwnership is what the server says about a database and its user.
type dbOwnership struct {
	dbExists, dbOurs bool
	comment          string
	// userExists, and the databases the user has grants on.
	userExists bool
	userDBs    []string
}

func (d *Database) ownership(ctx context.Context, db *sql.DB, in DatabaseInput) (*dbOwnership, error) {
	o := &dbOwnership{}
	err := db.QueryRowContext(ctx, "SELECT SCHEMA_COMMENT FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", in.Database).Scan(&o.comment)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return nil, err
	default:
		o.dbExists, o.dbOurs = true, o.comment == in.ownerComment()
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM mysql.user WHERE User = ? AND Host = '%'", in.User).Scan(&n); err != nil {
		return nil, err
	}
	o.userExists = n > 0
	rows, err := db.QueryContext(ctx, "SELECT Db FROM mysql.db WHERE User = ? AND Host = '%' ORDER BY Db", in.User)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		o.userDBs = append(o.userDBs, name)
	}
	return o, rows.Err()
}

// userOurs reports whether the user is the database's own: it has grants on that database alone.
func (o *dbOwnership) userOurs(database string) bool {
	return len(o.userDBs) == 1 && o.userDBs[0] == database
}

var sqlName = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)

func (in DatabaseInput) validate() error {
	for what, n := range map[string]string{"database": in.Database, "user": in.User} {
		if !sqlName.MatchString(n) {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s name %q: only letters, digits and _ (at most 64)", what, n), ErrDatabaseInvalid, nil)
		}
	}
	return nil
}

// open connects as the server's administrator.
func (d *Database) open(ctx context.Context, srv DatabaseServer) (*sql.DB, error) {
	if d.connect != nil {
		return d.connect(ctx, srv)
	}
	user, err := kube.ReadSecretKey(ctx, d.Core, kube.SecretKeyRef{Namespace: srv.Namespace, Name: srv.AdminSecret, Key: "username"})
	if err != nil {
		return nil, err
	}
	pw, err := kube.ReadSecretKey(ctx, d.Core, kube.SecretKeyRef{Namespace: srv.Namespace, Name: srv.AdminSecret, Key: "password"})
	if err != nil {
		return nil, err
	}
	port := srv.Port
	if port == 0 {
		port = 3306
	}
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd = user, pw
	cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(srv.Host, strconv.Itoa(int(port)))
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = 10*time.Second, 30*time.Second, 30*time.Second
	// Client-side interpolation: DDL statements take no server-side placeholders.
	cfg.InterpolateParams = true
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("database server %s: %v", cfg.Addr, err), ErrDatabaseInvalid, err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(1)
	return db, nil
}

// classifySQL makes access denied permanent (the Secret is wrong) and leaves the rest retryable.
func classifySQL(op string, err error) error {
	var me *mysql.MySQLError
	if errors.As(err, &me) && (me.Number == 1045 || me.Number == 1044 || me.Number == 1227) {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: %v", op, err), ErrDatabaseAuth, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// EnsureDatabase creates the database (utf8) and its user when missing, sets the user's password to the
// one in the Secret (generating and storing it first when the key is missing) and grants the user all
// privileges on the database. Idempotent: a database or user that exists is adopted.
func (d *Database) EnsureDatabase(ctx context.Context, in DatabaseInput) error {
	if err := in.validate(); err != nil {
		return err
	}
	pw, err := kube.EnsureSecretKey(ctx, d.Core, in.Password, in.Owner, kube.GeneratePassword)
	if err != nil {
		return err
	}
	db, err := d.open(ctx, in.Server)
	if err != nil {
		return err
	}
	defer db.Close()
	op := fmt.Sprintf("database %s (user %s) on %s", in.Database, in.User, in.Server.Host)
	if _, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+in.Database+"` CHARACTER SET utf8 COMMENT ?", in.ownerComment()); err != nil {
		return classifySQL(op, err)
	}
	own, err := d.ownership(ctx, db, in)
	if err != nil {
		return classifySQL(op, err)
	}
	if !own.dbOurs {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("database %s on %s exists and was not created for %s (its comment: %q): name another database",
			in.Database, in.Server.Host, in.ownerComment(), own.comment), ErrDatabaseInUse, nil)
	}
	// The user is created with its grant in one statement, so a user without a grant on this database
	// was never this database's.
	if own.userExists && !own.userOurs(in.Database) {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("database user %s on %s exists and has grants on %v: give the database a user of its own",
			in.User, in.Server.Host, own.userDBs), ErrDatabaseInUse, nil)
	}
	if _, err := db.ExecContext(ctx, "GRANT ALL PRIVILEGES ON `"+in.Database+"`.* TO '"+in.User+"'@'%' IDENTIFIED BY ?", pw); err != nil {
		return classifySQL(op, err)
	}
	return nil
}

// DropDatabase removes the database and its user if EnsureDatabase created them for the same owner;
// what is already gone, or was never the owner's, is left and is not an error.
func (d *Database) DropDatabase(ctx context.Context, in DatabaseInput) error {
	if err := in.validate(); err != nil {
		return err
	}
	db, err := d.open(ctx, in.Server)
	if err != nil {
		return err
	}
	defer db.Close()
	op := fmt.Sprintf("drop database %s (user %s) on %s", in.Database, in.User, in.Server.Host)
	own, err := d.ownership(ctx, db, in)
	if err != nil {
		return classifySQL(op, err)
	}
	if own.dbExists && !own.dbOurs {
		return nil
	}
	if own.dbExists {
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+in.Database+"`"); err != nil {
			return classifySQL(op, err)
		}
	}
	// The grants outlive the database: a user with grants on this database alone is its own.
	if own.userExists && own.userOurs(in.Database) {
		if _, err := db.ExecContext(ctx, "DROP USER IF EXISTS '"+in.User+"'@'%'"); err != nil {
			return classifySQL(op, err)
		}
	}
	return nil
}
