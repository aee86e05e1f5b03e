package temporalconn_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stackflow/stackflow/api/temporalconn"
	"github.com/stackflow/stackflow/deploy/local/pki"
)

// tlsServer serves TLS on loopback with a certificate for 127.0.0.1, requiring client certificates
// signed by its CA when mutual; it completes handshakes and holds the connection briefly.
func tlsServer(t *testing.T, ca *pki.CA, mutual bool) string {
	t.Helper()
	leaf, err := ca.Server("temporal", "127.0.0.1", "temporal.test")
	require.NoError(t, err)
	cert, err := leaf.TLS()
	require.NoError(t, err)
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}}
	if mutual {
		pool := x509.NewCertPool()
		pool.AddCert(ca.Cert)
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if c.(*tls.Conn).Handshake() == nil {
					_, _ = c.Read(make([]byte, 1))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func write(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, b, 0o600))
	return p
}

func TestPreflight(t *testing.T) {
	ca, err := pki.NewCA("stackflow test CA")
	require.NoError(t, err)
	other, err := pki.NewCA("another CA")
	require.NoError(t, err)
	client, err := ca.Client("stackflow-worker")
	require.NoError(t, err)
	stranger, err := other.Client("stranger")
	require.NoError(t, err)
	caFile, otherCA := write(t, "ca.crt", ca.PEM), write(t, "other.crt", other.PEM)
	cert, key := write(t, "tls.crt", client.CertPEM), write(t, "tls.key", client.KeyPEM)
	scert, skey := write(t, "s.crt", stranger.CertPEM), write(t, "s.key", stranger.KeyPEM)
	mtls := tlsServer(t, ca, true)

	plain, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer plain.Close()
	go func() {
		for {
			c, err := plain.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
			c.Close()
		}
	}()

	for _, tc := range []struct {
		name string
		addr string
		tls  temporalconn.TLSOptions
		want string // "" for success; else a part of the message, which must wrap ErrTLS
	}{
		{"mutual TLS", mtls, temporalconn.TLSOptions{CAFile: caFile, CertFile: cert, KeyFile: key}, ""},
		{"server name override", mtls, temporalconn.TLSOptions{CAFile: caFile, CertFile: cert, KeyFile: key, ServerName: "temporal.test"}, ""},
		{"wrong CA", mtls, temporalconn.TLSOptions{CAFile: otherCA, CertFile: cert, KeyFile: key}, "did not sign (check --temporal-tls-ca)"},
		{"wrong server name", mtls, temporalconn.TLSOptions{CAFile: caFile, CertFile: cert, KeyFile: key, ServerName: "elsewhere.test"}, "--temporal-tls-server-name"},
		{"no client certificate", mtls, temporalconn.TLSOptions{CAFile: caFile}, "may require a client certificate"},
		{"client certificate of another CA", mtls, temporalconn.TLSOptions{CAFile: caFile, CertFile: scert, KeyFile: skey}, "may not trust the client certificate"},
		{"plain-text server", plain.Addr().String(), temporalconn.TLSOptions{CAFile: caFile}, "does not speak TLS"},
		{"certificate without key", mtls, temporalconn.TLSOptions{CAFile: caFile, CertFile: cert}, "needs both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := temporalconn.Options{Address: tc.addr, TLS: tc.tls}.Preflight(context.Background())
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, temporalconn.ErrTLS)
			require.ErrorContains(t, err, tc.want)
		})
	}

	// Nobody listening is not a TLS problem: the caller may wait for the server.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gone := ln.Addr().String()
	ln.Close()
	err = temporalconn.Options{Address: gone, TLS: temporalconn.TLSOptions{CAFile: caFile}}.Preflight(context.Background())
	require.Error(t, err)
	require.False(t, errors.Is(err, temporalconn.ErrTLS), "%v", err)
}

func TestClientOptions(t *testing.T) {
	ca, err := pki.NewCA("ca")
	require.NoError(t, err)
	keys := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(keys, "k1"), []byte("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="), 0o600))
	apiKey := write(t, "api-key", []byte("sekret\n"))

	var o temporalconn.Options
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.AddFlags(fs, "127.0.0.1:7233", "default")
	require.NoError(t, fs.Parse([]string{"--temporal-address", "temporal.test:7234", "--namespace", "stackflow",
		"--temporal-tls-ca", write(t, "ca.crt", ca.PEM), "--temporal-api-key-file", apiKey, "--codec-keys", keys}))
	co, err := o.ClientOptions()
	require.NoError(t, err)
	require.Equal(t, "temporal.test:7234", co.HostPort)
	require.Equal(t, "stackflow", co.Namespace)
	require.NotNil(t, co.ConnectionOptions.TLS)
	require.Equal(t, "temporal.test", co.ConnectionOptions.TLS.ServerName)
	require.NotNil(t, co.Credentials)
	require.NotNil(t, co.DataConverter)
	require.NotNil(t, co.FailureConverter)

	// Plain: no TLS, no converters.
	co, err = temporalconn.Options{Address: "127.0.0.1:7233"}.ClientOptions()
	require.NoError(t, err)
	require.Nil(t, co.ConnectionOptions.TLS)
	require.Nil(t, co.DataConverter)
	require.NotNil(t, co.FailureConverter, "wrapped application errors keep their classification without codec keys too")

	for name, o := range map[string]temporalconn.Options{
		"empty API key":  {APIKeyFile: write(t, "empty", nil)},
		"missing CA":     {TLS: temporalconn.TLSOptions{CAFile: "/nonexistent/ca.crt"}},
		"not PEM":        {TLS: temporalconn.TLSOptions{CAFile: apiKey}},
		"no codec key":   {CodecKeys: t.TempDir()},
		"missing keydir": {CodecKeys: "/nonexistent"},
	} {
		_, err := o.ClientOptions()
		require.Error(t, err, name)
	}
}
