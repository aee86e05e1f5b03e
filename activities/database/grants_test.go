package database

import (
	"context"
	"database/sql"
	"errors"
	"regexp"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"
	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/stackflow/stackflow/activities/kube"
)

var (
	testOwner = &kube.Owner{Kind: "Nova", Name: "nova", UID: "u-1"}
	testInput = DatabaseInput{Server: DatabaseServer{Namespace: "infra", AdminSecret: "mariadb-admin", Host: "mariadb.infra"},
		Database: "nova_cell1", User: "nova_cell1", Password: kube.SecretKeyRef{Namespace: "openstack", Name: "nova-db", Key: "password"}, Owner: testOwner}
	ours = "stackflow Nova/nova u-1"
)

// server expects the statements a database activity sends, in order.
type server func(m sqlmock.Sqlmock)

func created(m sqlmock.Sqlmock) {
	m.ExpectExec(regexp.QuoteMeta("CREATE DATABASE IF NOT EXISTS `nova_cell1` CHARACTER SET utf8 COMMENT ?")).WithArgs(ours).WillReturnResult(sqlmock.NewResult(0, 1))
}

func owns(comment string, userDBs ...string) server {
	return func(m sqlmock.Sqlmock) {
		q := m.ExpectQuery(regexp.QuoteMeta("SELECT SCHEMA_COMMENT FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?")).WithArgs("nova_cell1")
		if comment == "" {
			q.WillReturnRows(sqlmock.NewRows([]string{"SCHEMA_COMMENT"}))
		} else {
			q.WillReturnRows(sqlmock.NewRows([]string{"SCHEMA_COMMENT"}).AddRow(comment))
		}
		n := 0
		if len(userDBs) > 0 {
			n = 1
		}
		m.ExpectQuery(regexp.QuoteMeta("SELECT COUNT(*) FROM mysql.user WHERE User = ? AND Host = '%'")).WithArgs("nova_cell1").
			WillReturnRows(sqlmock.NewRows([]string{"n"}).AddRow(n))
		rows := sqlmock.NewRows([]string{"Db"})
		for _, d := range userDBs {
			rows.AddRow(d)
		}
		m.ExpectQuery(regexp.QuoteMeta("SELECT Db FROM mysql.db WHERE User = ? AND Host = '%' ORDER BY Db")).WithArgs("nova_cell1").WillReturnRows(rows)
	}
}

func granted(m sqlmock.Sqlmock) {
	m.ExpectExec(regexp.QuoteMeta("GRANT ALL PRIVILEGES ON `nova_cell1`.* TO 'nova_cell1'@'%' IDENTIFIED BY ?")).WithArgs(sqlmock.AnyArg()).WillReturnResult(sqlmock.NewResult(0, 0))
}

// withServer is the activities on a mock server, expecting exactly what expect says.
func withServer(t *testing.T, expect ...server) *Database {
	return withConnections(t, expect)
}

// withConnections is the activities on a mock server, a connection per call, each expecting exactly
// what its list says.
func withConnections(t *testing.T, conns ...[]server) *Database {
	next := 0
	return &Database{Core: fake.NewClientset(), connect: func(context.Context, DatabaseServer) (*sql.DB, error) {
		require.Less(t, next, len(conns), "one connection per call expected")
		db, m, err := sqlmock.New()
		require.NoError(t, err)
		for _, e := range conns[next] {
			e(m)
		}
		next++
		t.Cleanup(func() { require.NoError(t, m.ExpectationsWereMet(), "every statement expected was sent") })
		return db, nil
	}}
}

func requireOutcome(t *testing.T, err error, errType string) {
	t.Helper()
	if errType == "" {
		require.NoError(t, err)
		return
	}
	var app *temporal.ApplicationError
	if errType == "retryable" {
		require.Error(t, err)
		require.False(t, errors.As(err, &app) && app.NonRetryable(), "retryable: %v", err)
		return
	}
	require.True(t, errors.As(err, &app) && app.NonRetryable(), "permanent: %v", err)
	require.Equal(t, errType, app.Type(), "%v", err)
}

func TestEnsureDatabase(t *testing.T) {
	denied := &mysql.MySQLError{Number: 1045, Message: "Access denied for user 'root'@'10.0.0.1'"}
	for _, tc := range []struct {
		name    string
		server  []server
		errType string
	}{
		{"created with its user", []server{created, owns(ours), granted}, ""},
		{"ours from an earlier attempt, user too: granted again", []server{created, owns(ours, "nova_cell1"), granted}, ""},
		{"a database that was there before: refused", []server{created, owns("made by hand")}, ErrDatabaseInUse},
		{"a user with grants elsewhere: refused", []server{created, owns(ours, "keystone")}, ErrDatabaseInUse},
		{"the administrator's password is wrong: permanent", []server{func(m sqlmock.Sqlmock) {
			m.ExpectExec("CREATE DATABASE").WillReturnError(denied)
		}}, ErrDatabaseAuth},
		{"server gone away: retried", []server{created, owns(ours), func(m sqlmock.Sqlmock) {
			m.ExpectExec("GRANT ALL").WillReturnError(&mysql.MySQLError{Number: 2006, Message: "MySQL server has gone away"})
		}}, "retryable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := withServer(t, tc.server...)
			requireOutcome(t, d.EnsureDatabase(context.Background(), testInput), tc.errType)
		})
	}
}

// TestEnsureDatabasePassword: the user's password is the Secret's, generated once and kept.
func TestEnsureDatabasePassword(t *testing.T) {
	d := withConnections(t, []server{created, owns(ours), granted}, []server{created, owns(ours, "nova_cell1"), granted})
	require.NoError(t, d.EnsureDatabase(context.Background(), testInput))
	pw, err := kube.ReadSecretKey(context.Background(), d.Core, testInput.Password)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(pw), 16)
	require.NoError(t, d.EnsureDatabase(context.Background(), testInput))
	again, err := kube.ReadSecretKey(context.Background(), d.Core, testInput.Password)
	require.NoError(t, err)
	require.Equal(t, pw, again)
}

func TestEnsureDatabaseRefusesNames(t *testing.T) {
	in := testInput
	in.Database = "nova; DROP DATABASE keystone"
	d := withConnections(t)
	requireOutcome(t, d.EnsureDatabase(context.Background(), in), ErrDatabaseInvalid)
}

func TestDropDatabase(t *testing.T) {
	dropped := func(m sqlmock.Sqlmock) {
		m.ExpectExec(regexp.QuoteMeta("DROP DATABASE IF EXISTS `nova_cell1`")).WillReturnResult(sqlmock.NewResult(0, 0))
	}
	userDropped := func(m sqlmock.Sqlmock) {
		m.ExpectExec(regexp.QuoteMeta("DROP USER IF EXISTS 'nova_cell1'@'%'")).WillReturnResult(sqlmock.NewResult(0, 0))
	}
	for _, tc := range []struct {
		name   string
		server []server
	}{
		{"ours: database and user dropped", []server{owns(ours, "nova_cell1"), dropped, userDropped}},
		{"database gone, its user left: user dropped", []server{owns("", "nova_cell1"), userDropped}},
		{"somebody else's database: left", []server{owns("made by hand", "nova_cell1")}},
		{"ours, the user shared with another database: user left", []server{owns(ours, "keystone", "nova_cell1"), dropped}},
		{"nothing there", []server{owns("")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := withServer(t, tc.server...)
			require.NoError(t, d.DropDatabase(context.Background(), testInput))
		})
	}
}

// A drop the server cannot finish now is retried; one the administrator may not make is not; a name
// that could not be quoted safely never reaches the server.
func TestDropDatabaseFailures(t *testing.T) {
	for _, tc := range []struct {
		name    string
		server  []server
		errType string
	}{
		{"server gone away while dropping: retried", []server{owns(ours, "nova_cell1"), func(m sqlmock.Sqlmock) {
			m.ExpectExec("DROP DATABASE").WillReturnError(&mysql.MySQLError{Number: 2006, Message: "MySQL server has gone away"})
		}}, "retryable"},
		{"the user's drop refused: permanent", []server{owns("", "nova_cell1"), func(m sqlmock.Sqlmock) {
			m.ExpectExec("DROP USER").WillReturnError(&mysql.MySQLError{Number: 1227, Message: "Access denied; you need (at least one of) the CREATE USER privilege(s)"})
		}}, ErrDatabaseAuth},
		{"the ownership query fails: retried", []server{func(m sqlmock.Sqlmock) {
			m.ExpectQuery("SELECT SCHEMA_COMMENT").WillReturnError(&mysql.MySQLError{Number: 2013, Message: "Lost connection to MySQL server during query"})
		}}, "retryable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := withServer(t, tc.server...)
			requireOutcome(t, d.DropDatabase(context.Background(), testInput), tc.errType)
		})
	}
	in := testInput
	in.User = "nova'@'%"
	requireOutcome(t, withConnections(t).DropDatabase(context.Background(), in), ErrDatabaseInvalid)
}
