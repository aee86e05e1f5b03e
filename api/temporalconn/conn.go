// Package temporalconn is how every stackflow process reaches Temporal: the frontend address and
// namespace, TLS (server CA, client certificate for mTLS, server name), an API key, and the payload codec
// that encrypts what stackflow stores in Temporal (AES-256-GCM, see Codec).
//
// It sits under api/ because it is part of the contract between the bridge and the workers, like
// api/lifecycle: both must speak to the same Temporal with the same codec, or a worker cannot read what the
// bridge sent. The bridge may import only api/ (it never imports workflows or activities), so the shared
// connection code lives here; it depends on the Temporal SDK alone, never on other stackflow packages.
package temporalconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
)

// Options say how to reach Temporal. Files are read when the connection is made and again on every TLS
// handshake or request (client certificates and API keys), so certificates and keys rotated in a mounted
// Secret are picked up without a restart.
type Options struct {
	// Address is the frontend's host:port.
	Address string
	// Namespace is the Temporal namespace.
	Namespace string
	// TLS configures transport security; off unless Enabled or any file is set.
	TLS TLSOptions
	// APIKeyFile holds an API key sent as a bearer token on every call (Temporal Cloud, or a server with
	// an authorizer). It implies TLS unless TLS.Disabled.
	APIKeyFile string
	// CodecKeys is a directory of payload-encryption keys (see LoadKeyring); empty leaves payloads as
	// they are.
	CodecKeys string
}

// TLSOptions configure TLS to the Temporal frontend.
type TLSOptions struct {
	// Enabled turns TLS on with the system's roots even when no file is given.
	Enabled bool
	// Disabled forces plain text even with an API key (a local server without TLS).
	Disabled bool
	// CAFile holds the PEM certificates of the CAs the server's certificate must chain to; the system
	// roots when empty.
	CAFile string
	// CertFile and KeyFile are the client's certificate and key for mutual TLS.
	CertFile string
	KeyFile  string
	// ServerName is the name the server's certificate must carry; the address's host when empty.
	ServerName string
}

// on reports whether TLS is requested.
func (t TLSOptions) on() bool {
	return !t.Disabled && (t.Enabled || t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != "")
}

// Env names the environment variables AddFlags reads its defaults from: the temporal CLI's names where it
// has one (those of the Temporal SDK's envconfig), so one environment serves both.
var Env = struct {
	Address, Namespace, TLS, CA, Cert, Key, ServerName, APIKeyFile, CodecKeys string
}{
	Address:    "TEMPORAL_ADDRESS",
	Namespace:  "TEMPORAL_NAMESPACE",
	TLS:        "TEMPORAL_TLS",
	CA:         "TEMPORAL_TLS_SERVER_CA_CERT_PATH",
	Cert:       "TEMPORAL_TLS_CLIENT_CERT_PATH",
	Key:        "TEMPORAL_TLS_CLIENT_KEY_PATH",
	ServerName: "TEMPORAL_TLS_SERVER_NAME",
	APIKeyFile: "TEMPORAL_API_KEY_FILE",
	CodecKeys:  "STACKFLOW_CODEC_KEYS",
}

// AddFlags registers the connection flags on fs, with defaults from the environment (Env) and the given
// address and namespace otherwise. Both commands use it, so they take the same flags.
func (o *Options) AddFlags(fs *flag.FlagSet, defaultAddress, defaultNamespace string) {
	fs.StringVar(&o.Address, "temporal-address", envOr(Env.Address, defaultAddress), "Temporal frontend host:port")
	fs.StringVar(&o.Namespace, "namespace", envOr(Env.Namespace, defaultNamespace), "Temporal namespace")
	fs.BoolVar(&o.TLS.Enabled, "temporal-tls", os.Getenv(Env.TLS) == "true", "use TLS to Temporal (implied by any --temporal-tls-* file)")
	fs.StringVar(&o.TLS.CAFile, "temporal-tls-ca", os.Getenv(Env.CA), "PEM file of the CAs Temporal's certificate must chain to (default: system roots)")
	fs.StringVar(&o.TLS.CertFile, "temporal-tls-cert", os.Getenv(Env.Cert), "PEM client certificate for mutual TLS")
	fs.StringVar(&o.TLS.KeyFile, "temporal-tls-key", os.Getenv(Env.Key), "PEM client key for mutual TLS")
	fs.StringVar(&o.TLS.ServerName, "temporal-tls-server-name", os.Getenv(Env.ServerName), "name Temporal's certificate must carry (default: the address's host)")
	fs.StringVar(&o.APIKeyFile, "temporal-api-key-file", os.Getenv(Env.APIKeyFile), "file holding a Temporal API key, sent as a bearer token")
	fs.StringVar(&o.CodecKeys, "codec-keys", os.Getenv(Env.CodecKeys), "directory of payload-encryption keys, one file per key ID (empty: payloads unencrypted)")
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// ClientOptions turns o into Temporal client options: address, namespace, TLS, API key and, with codec
// keys, a data converter that encrypts every payload and a failure converter that moves failure messages
// and stack traces into (encrypted) payloads. The failure converter is always Classified, so a wrapped
// application error keeps its type and retryability. Callers add their identity, logger and metrics.
func (o Options) ClientOptions() (client.Options, error) {
	opts := client.Options{HostPort: o.Address, Namespace: o.Namespace}
	if o.TLS.on() {
		cfg, err := o.TLS.config(o.Address)
		if err != nil {
			return opts, err
		}
		opts.ConnectionOptions.TLS = cfg
	} else if o.TLS.Disabled {
		opts.ConnectionOptions.TLSDisabled = true
	}
	if o.APIKeyFile != "" {
		if _, err := readAPIKey(o.APIKeyFile); err != nil {
			return opts, err
		}
		file := o.APIKeyFile
		opts.Credentials = client.NewAPIKeyDynamicCredentials(func(context.Context) (string, error) { return readAPIKey(file) })
	}
	if o.CodecKeys != "" {
		ring, err := LoadKeyring(o.CodecKeys)
		if err != nil {
			return opts, err
		}
		opts.DataConverter = DataConverter(NewCodec(ring))
		opts.FailureConverter = Classified(FailureConverter(opts.DataConverter))
	} else {
		opts.FailureConverter = Classified(nil)
	}
	return opts, nil
}

// DataConverter is the default data converter with codec applied to every payload.
func DataConverter(codec converter.PayloadCodec) converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), codec)
}

// FailureConverter encodes failure messages and stack traces with dc, so error texts (which name hosts
// and addresses) are encrypted like any other payload.
func FailureConverter(dc converter.DataConverter) converter.FailureConverter {
	return temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{DataConverter: dc, EncodeCommonAttributes: true})
}

func readAPIKey(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("temporal API key: %w", err)
	}
	key := strings.TrimSpace(string(b))
	if key == "" {
		return "", fmt.Errorf("temporal API key: %s is empty", file)
	}
	return key, nil
}

// config builds the client TLS configuration: the CA pool is read once (a changed CA needs a restart,
// as with any trust root); the client certificate is read on every handshake.
func (t TLSOptions) config(address string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(address); err == nil {
			cfg.ServerName = host
		}
	}
	if t.CAFile != "" {
		pool, err := CertPool(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("temporal TLS CA: %w", err)
		}
		cfg.RootCAs = pool
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return nil, errors.New("temporal TLS: a client certificate needs both --temporal-tls-cert and --temporal-tls-key")
	}
	if t.CertFile != "" {
		// Fail now on unreadable files; then reload on every handshake, for rotated certificates.
		if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
			return nil, fmt.Errorf("temporal TLS client certificate %s: %w", t.CertFile, err)
		}
		cert, key := t.CertFile, t.KeyFile
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			c, err := tls.LoadX509KeyPair(cert, key)
			if err != nil {
				return nil, fmt.Errorf("temporal TLS client certificate %s: %w", cert, err)
			}
			return &c, nil
		}
	}
	return cfg, nil
}

// CertPool reads the PEM certificates of file into a pool.
func CertPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return pool, nil
}

// ErrTLS marks a connection refused for a TLS reason that retrying cannot fix (an unknown CA, a wrong
// server name, a client certificate the server rejects): the process should stop and say so.
var ErrTLS = errors.New("temporal TLS")

// Preflight checks, once at start, that Temporal's TLS is what the options expect: it dials the address,
// completes a TLS handshake with the same configuration the client uses, and returns an error wrapping
// ErrTLS that names the problem and the flag to fix when the handshake fails on certificates. A
// frontend that does not answer yet is a plain error (the caller may wait for it); without TLS it only
// checks the options.
func (o Options) Preflight(ctx context.Context) error {
	if !o.TLS.on() {
		return nil
	}
	cfg, err := o.TLS.config(o.Address)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrTLS, err)
	}
	// Temporal speaks gRPC over HTTP/2.
	cfg.NextProtos = []string{"h2"}
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: cfg}
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := d.DialContext(hctx, "tcp", o.Address)
	if err != nil {
		return o.explain(err)
	}
	tc := conn.(*tls.Conn)
	// With TLS 1.3 a rejected client certificate surfaces on the first read, not in the handshake.
	_ = tc.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	_, rerr := tc.Read(make([]byte, 1))
	_ = tc.Close()
	if remoteAlert(rerr) {
		return o.explain(rerr)
	}
	return nil
}

// explain turns a dial or handshake error into one that names the cause and the flag to look at.
func (o Options) explain(err error) error {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		verify   *tls.CertificateVerificationError
		rec      tls.RecordHeaderError
	)
	ca := "the system roots"
	if o.TLS.CAFile != "" {
		ca = "the CA in " + o.TLS.CAFile
	}
	switch {
	case errors.As(err, &unknown):
		return fmt.Errorf("%w: Temporal at %s presents a certificate that %s did not sign (check --temporal-tls-ca): %w", ErrTLS, o.Address, ca, err)
	case errors.As(err, &hostname):
		return fmt.Errorf("%w: Temporal at %s presents a certificate for another name (check --temporal-tls-server-name): %w", ErrTLS, o.Address, err)
	case errors.As(err, &invalid):
		return fmt.Errorf("%w: Temporal at %s presents an invalid certificate (expired or not for serving): %w", ErrTLS, o.Address, err)
	case errors.As(err, &verify):
		return fmt.Errorf("%w: Temporal at %s presents a certificate %s does not accept (check --temporal-tls-ca): %w", ErrTLS, o.Address, ca, err)
	case remoteAlert(err):
		what := "refused the TLS handshake"
		if o.TLS.CertFile == "" {
			what += "; it may require a client certificate (--temporal-tls-cert, --temporal-tls-key)"
		} else {
			what += " and may not trust the client certificate " + o.TLS.CertFile
		}
		return fmt.Errorf("%w: Temporal at %s %s: %w", ErrTLS, o.Address, what, err)
	case errors.As(err, &rec):
		return fmt.Errorf("%w: Temporal at %s does not speak TLS (drop the --temporal-tls* flags, or use its TLS port): %w", ErrTLS, o.Address, err)
	}
	return fmt.Errorf("temporal at %s: %w", o.Address, err)
}

// remoteAlert reports whether err is a TLS alert the server sent (it refused the handshake).
func remoteAlert(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error"
}
