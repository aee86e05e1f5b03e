package e2e

import (
	"context"
	"database/sql"
	"net"
	"slices"
	"strconv"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/stackflow/stackflow/deploy/local"
)

// StackDB connects to the stack's MariaDB as the administrator its Secret names; the connection is
// closed when the test ends.
func (e *Env) StackDB(t testing.TB) *sql.DB {
	t.Helper()
	cfg := mysql.NewConfig()
	cfg.User = e.SecretValue(t, local.SystemNamespace, local.DatabaseAdminSecretName, "username")
	cfg.Passwd = e.SecretValue(t, local.SystemNamespace, local.DatabaseAdminSecretName, "password")
	cfg.Net, cfg.Addr = "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(local.MariaDBPort))
	conn, err := mysql.NewConnector(cfg)
	require.NoError(t, err)
	db := sql.OpenDB(conn)
	t.Cleanup(func() { db.Close() })
	return db
}

// QueryStrings runs a query returning one string column; the values come back sorted.
func QueryStrings(t testing.TB, db *sql.DB, q string, args ...any) []string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), q, args...)
	require.NoError(t, err, "query %s", q)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	slices.Sort(out)
	return out
}
