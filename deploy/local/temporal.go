package local

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/api/temporalconn"
	"github.com/stackflow/stackflow/deploy/local/pki"
)

// Temporal dev-server endpoints (its defaults, on loopback), and those of its TLS front and codec endpoint.
const (
	TemporalPort   = 7233
	TemporalUIPort = 8233
	// TemporalTLSPort is the TLS front: mutual TLS and an API key, then the dev server.
	TemporalTLSPort = 7234
	// CodecPort serves the payload codec endpoint the UI decrypts through.
	CodecPort = 8234
)

// procTemporalFront names the TLS front's process.
const procTemporalFront = "temporal-front"

// TemporalTLS is how clients reach Temporal through the stack's TLS front. Every file is in the state
// directory.
type TemporalTLS struct {
	// Address is the front's host:port; ServerName the name its certificate carries.
	Address    string `json:"address"`
	ServerName string `json:"serverName"`
	// CA signed the front's certificate and the client certificates; Cert and Key are a client's.
	CA   string `json:"ca"`
	Cert string `json:"cert"`
	Key  string `json:"key"`
	// APIKeyFile holds the API key the front requires.
	APIKeyFile string `json:"apiKeyFile"`
	// WrongCA is a CA that signed nothing the front presents, for tests of that failure.
	WrongCA string `json:"wrongCA"`
}

// TemporalOptions are the connection options of a client of namespace: through the TLS front (mutual TLS,
// API key) with the stack's payload codec when the stack has them, else plain to the dev server.
func (s *Stack) TemporalOptions(namespace string) temporalconn.Options {
	if s.TemporalTLS == nil {
		return temporalconn.Options{Address: s.TemporalAddress, Namespace: namespace}
	}
	t := s.TemporalTLS
	return temporalconn.Options{
		Address:    t.Address,
		Namespace:  namespace,
		TLS:        temporalconn.TLSOptions{CAFile: t.CA, CertFile: t.Cert, KeyFile: t.Key, ServerName: t.ServerName},
		APIKeyFile: t.APIKeyFile,
		CodecKeys:  s.CodecKeys,
	}
}

// TctlEnv is the environment of tctl (v1.18's TEMPORAL_CLI_* variables) for namespace: the TLS front with
// the client certificate and the API key as a bearer token, and the codec endpoint that decodes payloads.
// tctl cannot read an API key from a file, so the key itself is in the environment.
func (s *Stack) TctlEnv(namespace string) ([]string, error) {
	o := s.TemporalOptions(namespace)
	out := []string{"TEMPORAL_CLI_ADDRESS=" + o.Address, "TEMPORAL_CLI_NAMESPACE=" + o.Namespace,
		"TEMPORAL_CLI_TLS_CA=" + o.TLS.CAFile, "TEMPORAL_CLI_TLS_CERT=" + o.TLS.CertFile, "TEMPORAL_CLI_TLS_KEY=" + o.TLS.KeyFile,
		"TEMPORAL_CLI_TLS_SERVER_NAME=" + o.TLS.ServerName, "TEMPORAL_CLI_CODEC_ENDPOINT=" + s.CodecEndpoint}
	if o.APIKeyFile != "" {
		key, err := os.ReadFile(o.APIKeyFile)
		if err != nil {
			return nil, fmt.Errorf("API key of the TLS front: %w", err)
		}
		out = append(out, "TEMPORAL_CLI_AUTH=Bearer "+strings.TrimSpace(string(key)))
	}
	return out, nil
}

// TemporalEnv is TemporalOptions as the environment stackflow's commands read their defaults from.
func (s *Stack) TemporalEnv(namespace string) []string {
	o := s.TemporalOptions(namespace)
	e := temporalconn.Env
	return []string{
		e.Address + "=" + o.Address, e.Namespace + "=" + o.Namespace,
		e.CA + "=" + o.TLS.CAFile, e.Cert + "=" + o.TLS.CertFile, e.Key + "=" + o.TLS.KeyFile, e.ServerName + "=" + o.TLS.ServerName,
		e.APIKeyFile + "=" + o.APIKeyFile, e.CodecKeys + "=" + o.CodecKeys,
	}
}

// upTemporal starts the Temporal CLI's dev server with its UI and a database file in the state directory,
// so a restart keeps every workflow's history, and registers stackflow's search attributes.
func (s *Stack) upTemporal(ctx context.Context) error {
	bin, err := s.Tool("temporal", "TEMPORAL_CLI_BUILD")
	if err != nil {
		return err
	}
	s.TemporalAddress = fmt.Sprintf("127.0.0.1:%d", TemporalPort)
	s.TemporalUI = fmt.Sprintf("http://127.0.0.1:%d", TemporalUIPort)
	s.TemporalNamespace = "default"
	if err := s.ensureTemporalSecrets(); err != nil {
		return err
	}
	s.CodecEndpoint = fmt.Sprintf("http://127.0.0.1:%d", CodecPort)
	argv := []string{bin, "server", "start-dev",
		"--ip", "127.0.0.1",
		"--port", fmt.Sprint(TemporalPort),
		"--ui-port", fmt.Sprint(TemporalUIPort),
		"--db-filename", s.Path("temporal", "temporal.db"),
		// A write-ahead log, synced at checkpoints: SQLite's default rollback journal creates, syncs and
		// deletes a journal file per transaction, and every workflow task is a few. A crashed dev server
		// loses nothing so; only a power loss may lose the last transactions.
		"--sqlite-pragma", "journal_mode=wal",
		"--sqlite-pragma", "synchronous=normal",
		"--namespace", s.TemporalNamespace,
		"--log-level", "warn",
		// The matcher that honours task priority: a data plane's workflow tasks (priority 2, set by the
		// bridge) go before its 500 nodes' start-up tasks instead of queueing behind them for ≈ 25 s.
		"--dynamic-config-value", "matching.useNewMatcher=true",
		// New tasks go to one partition of each task queue, so that priority orders all of them (it
		// orders tasks within a partition only): a 200-node rollout's data plane waited 26 s behind its
		// nodes' tasks in another partition. Reads keep the default four, so tasks written before into
		// the others are still polled; one host gains nothing from more partitions.
		"--dynamic-config-value", "matching.numTaskqueueWritePartitions=1",
		// The UI shows payloads decrypted by the stack's codec endpoint (served by the TLS front).
		"--ui-codec-endpoint", s.CodecEndpoint,
	}
	names := make([]string, 0, len(lifecycle.SearchAttributes))
	for n := range lifecycle.SearchAttributes {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		argv = append(argv, "--search-attribute", n+"="+lifecycle.SearchAttributes[n])
	}
	if err := mkdirs(s.Path("temporal"), s.Path("bin")); err != nil {
		return err
	}
	// People steer workflows with the temporal CLI, or with tctl from older runbooks: offer both beside
	// the state.
	if err := symlink(bin, s.Path("bin", "temporal")); err != nil {
		return err
	}
	tctl, err := s.Tool("tctl", "TCTL_VERSION")
	if err != nil {
		return err
	}
	if err := symlink(tctl, s.Path("bin", "tctl")); err != nil {
		return err
	}
	started, err := s.Start(Proc{Name: "temporal", Argv: argv})
	if err != nil {
		return err
	}
	if started {
		s.Logf("temporal: started dev server on %s, UI %s", s.TemporalAddress, s.TemporalUI)
	}
	wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := s.WaitFor(wctx, "temporal ready", "temporal", 300*time.Millisecond, func(ctx context.Context) error {
		return s.checkTemporal(ctx, temporalconn.Options{Address: s.TemporalAddress, Namespace: s.TemporalNamespace})
	}); err != nil {
		return err
	}
	return s.upTemporalFront(wctx)
}

// upTemporalFront starts the TLS front (built from this checkout the first time) and waits until a client
// with the stack's certificate, API key and codec gets through it.
func (s *Stack) upTemporalFront(ctx context.Context) error {
	t := s.TemporalTLS
	if _, running := s.Running(procTemporalFront); !running {
		bin := s.Path("bin", "stackflow-temporal-front")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./deploy/local/cmd/stackflow-temporal-front")
		cmd.Dir = s.RepoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build the temporal TLS front: %w\n%s", err, out)
		}
		started, err := s.Start(Proc{Name: procTemporalFront, Argv: []string{bin,
			// Also on the gateway, for stackflow's own pods on the real node (the release tests/install
			// deploys); they verify the server name, which the certificate carries.
			"--listen", t.Address + "," + fmt.Sprintf("%s:%d", HostGateway, TemporalTLSPort),
			"--backend", s.TemporalAddress,
			"--client-ca", t.CA,
			"--cert", s.Path("temporal", "pki", "server.crt"),
			"--key", s.Path("temporal", "pki", "server.key"),
			"--api-key-file", t.APIKeyFile,
			"--codec-listen", strings.TrimPrefix(s.CodecEndpoint, "http://"),
			"--codec-keys", s.CodecKeys,
			"--codec-origins", s.TemporalUI,
		}})
		if err != nil {
			return err
		}
		if started {
			s.Logf("temporal: started TLS front on %s (mutual TLS, API key), codec endpoint %s", t.Address, s.CodecEndpoint)
		}
	}
	return s.WaitFor(ctx, "temporal TLS front ready", procTemporalFront, 300*time.Millisecond, func(ctx context.Context) error {
		return s.checkTemporal(ctx, s.TemporalOptions(s.TemporalNamespace))
	})
}

// ensureTemporalSecrets makes, once, what the TLS front and its clients share: a CA, the front's serving
// certificate, a client certificate, a CA that signed none of them, the API key and a codec key.
func (s *Stack) ensureTemporalSecrets() error {
	dir := s.Path("temporal", "pki")
	keys := s.Path("temporal", "codec-keys")
	s.TemporalTLS = &TemporalTLS{
		Address:    fmt.Sprintf("127.0.0.1:%d", TemporalTLSPort),
		ServerName: "temporal.stackflow.local",
		CA:         filepath.Join(dir, "ca.crt"),
		Cert:       filepath.Join(dir, "client.crt"),
		Key:        filepath.Join(dir, "client.key"),
		APIKeyFile: filepath.Join(dir, "api-key"),
		WrongCA:    filepath.Join(dir, "wrong-ca.crt"),
	}
	s.CodecKeys = keys
	if err := mkdirs(dir, keys); err != nil {
		return err
	}
	if !fileExists(s.TemporalTLS.WrongCA) {
		ca, err := pki.NewCA("stackflow local Temporal CA")
		if err != nil {
			return err
		}
		server, err := ca.Server("temporal", s.TemporalTLS.ServerName, "127.0.0.1", "localhost")
		if err != nil {
			return err
		}
		client, err := ca.Client("stackflow")
		if err != nil {
			return err
		}
		wrong, err := pki.NewCA("a CA that signed nothing of the stack's")
		if err != nil {
			return err
		}
		if err := server.Write(filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")); err != nil {
			return err
		}
		if err := client.Write(s.TemporalTLS.Cert, s.TemporalTLS.Key); err != nil {
			return err
		}
		if err := os.WriteFile(s.TemporalTLS.CA, ca.PEM, 0o644); err != nil {
			return err
		}
		// Written last: its presence says the set is complete.
		if err := writeFileAtomic(s.TemporalTLS.WrongCA, wrong.PEM, 0o644); err != nil {
			return err
		}
	}
	if !fileExists(s.TemporalTLS.APIKeyFile) {
		tok := make([]byte, 24)
		if _, err := rand.Read(tok); err != nil {
			return err
		}
		if err := writeFileAtomic(s.TemporalTLS.APIKeyFile, []byte(hex.EncodeToString(tok)+"\n"), 0o600); err != nil {
			return err
		}
	}
	if entries, _ := os.ReadDir(keys); len(entries) == 0 {
		key := make([]byte, temporalconn.KeySize)
		if _, err := rand.Read(key); err != nil {
			return err
		}
		id := time.Now().UTC().Format("2006-01-02")
		if err := writeFileAtomic(filepath.Join(keys, id), []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// checkTemporal is ready when the frontend answers the client of o and every custom search attribute is
// registered.
func (s *Stack) checkTemporal(ctx context.Context, o temporalconn.Options) error {
	conn, err := net.DialTimeout("tcp", o.Address, time.Second)
	if err != nil {
		return err
	}
	conn.Close()
	opts, err := o.ClientOptions()
	if err != nil {
		return err
	}
	opts.Logger = quietLogger{}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return err
	}
	defer c.Close()
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: s.TemporalNamespace})
	if err != nil {
		return err
	}
	for n := range lifecycle.SearchAttributes {
		if _, ok := resp.GetCustomAttributes()[n]; !ok {
			return fmt.Errorf("search attribute %s not registered yet", n)
		}
	}
	return nil
}

// quietLogger drops the SDK client's logs during readiness polling.
type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}
