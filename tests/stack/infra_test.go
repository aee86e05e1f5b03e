package stack

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	rabbithole "github.com/michaelklishin/rabbit-hole/v2"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/activities/database"
	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/activities/messagebus"
	"github.com/stackflow/stackflow/deploy/local"
)

// TestDatabaseAndMessageBusActivities runs the database and message-bus activities against the stack's
// MariaDB and RabbitMQ with the administrator Secrets the stack publishes: twice (idempotent, same
// generated passwords), then the user logs in with the password from its Secret and the transport URL
// names the vhost; dropping removes database, users and vhost.
func TestDatabaseAndMessageBusActivities(t *testing.T) {
	cs, err := st.KubeClient()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := fmt.Sprintf("infra%d", time.Now().UnixNano()%1e6)
	ns := local.SystemNamespace
	secret := run + "-passwords"
	t.Cleanup(func() { _ = cs.CoreV1().Secrets(ns).Delete(context.Background(), secret, metav1.DeleteOptions{}) })

	db := &database.Database{Core: cs}
	dbIn := database.DatabaseInput{
		Server:   database.DatabaseServer{Host: "127.0.0.1", Port: local.MariaDBPort, Namespace: ns, AdminSecret: local.DatabaseAdminSecretName},
		Database: run + "_db", User: run + "_user",
		Password: kube.SecretKeyRef{Namespace: ns, Name: secret, Key: "db-password"},
	}
	require.NoError(t, db.EnsureDatabase(ctx, dbIn))
	pw1 := secretKey(t, ns, secret, "db-password")
	require.NoError(t, db.EnsureDatabase(ctx, dbIn))
	require.Equal(t, pw1, secretKey(t, ns, secret, "db-password"), "a second run keeps the password")
	// The user logs in with the Secret's password and owns its database.
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = dbIn.User, pw1, "tcp", fmt.Sprintf("127.0.0.1:%d", local.MariaDBPort), dbIn.Database
	conn, err := mysql.NewConnector(cfg)
	require.NoError(t, err)
	userDB := sql.OpenDB(conn)
	_, err = userDB.ExecContext(ctx, "CREATE TABLE probe (id INT)")
	require.NoError(t, err)
	userDB.Close()

	mb := &messagebus.MessageBus{Core: cs}
	vIn := messagebus.VhostInput{
		Server: messagebus.MessageBusServer{Namespace: ns, AdminSecret: local.MessageBusAdminSecretName},
		Vhost:  run, User: run,
		Password:     kube.SecretKeyRef{Namespace: ns, Name: secret, Key: "mq-password"},
		TransportURL: kube.SecretKeyRef{Namespace: ns, Name: secret, Key: "transport_url"},
	}
	require.NoError(t, mb.EnsureVhost(ctx, vIn))
	require.NoError(t, mb.EnsureVhost(ctx, vIn))
	mqpw := secretKey(t, ns, secret, "mq-password")
	require.Equal(t, fmt.Sprintf("rabbit://%s:%s@%s:%d/%s", run, mqpw, local.HostGateway, local.RabbitMQPort, run), secretKey(t, ns, secret, "transport_url"))
	admin := rabbitAdmin(t, ns)
	perms, err := admin.GetPermissionsIn(run, run)
	require.NoError(t, err)
	require.Equal(t, ".*", perms.Write)

	// A database that was there before is neither adopted nor dropped; nor is a user serving others.
	foreign := dbIn
	foreign.Database, foreign.User = run+"_foreign", dbIn.User
	_, err = st.SQL(ctx, "CREATE DATABASE "+foreign.Database)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = st.SQL(context.Background(), "DROP DATABASE IF EXISTS "+foreign.Database) })
	err = db.EnsureDatabase(ctx, foreign)
	require.ErrorContains(t, err, "exists and was not created for")
	require.NoError(t, db.DropDatabase(ctx, foreign))
	out, err := st.SQL(ctx, fmt.Sprintf("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name='%s'", foreign.Database))
	require.NoError(t, err)
	require.Equal(t, "1", out, "a database not created by stackflow is never dropped")
	other := dbIn
	other.Database = run + "_other"
	require.ErrorContains(t, db.EnsureDatabase(ctx, other), "exists and has grants on", "user "+dbIn.User+" serves "+dbIn.Database)
	require.NoError(t, db.DropDatabase(ctx, other))

	require.NoError(t, db.DropDatabase(ctx, dbIn))
	require.NoError(t, db.DropDatabase(ctx, dbIn), "dropping twice is fine")
	require.NoError(t, mb.DeleteVhost(ctx, vIn))
	require.NoError(t, mb.DeleteVhost(ctx, vIn))
	_, err = admin.GetVhost(run)
	require.Error(t, err)
	_, err = admin.GetUser(run)
	require.Error(t, err)
	out, err = st.SQL(ctx, fmt.Sprintf("SELECT COUNT(*) FROM mysql.user WHERE User='%s'; SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name='%s'", dbIn.User, dbIn.Database))
	require.NoError(t, err)
	require.Equal(t, "0\n0", out)
}

func secretKey(t *testing.T, ns, name, key string) string {
	t.Helper()
	cs, err := st.KubeClient()
	require.NoError(t, err)
	sec, err := cs.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, sec.Data[key], "key %s of Secret %s", key, name)
	return string(sec.Data[key])
}

func rabbitAdmin(t *testing.T, ns string) *rabbithole.Client {
	t.Helper()
	c, err := rabbithole.NewClient(secretKey(t, ns, local.MessageBusAdminSecretName, "management_url"),
		secretKey(t, ns, local.MessageBusAdminSecretName, "username"), secretKey(t, ns, local.MessageBusAdminSecretName, "password"))
	require.NoError(t, err)
	return c
}
