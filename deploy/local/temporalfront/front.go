// Package temporalfront is the local stack's TLS front of Temporal: a gRPC reverse proxy that terminates
// mutual TLS and checks an API key before it forwards to the dev server (which has no TLS and no
// authentication of its own), and the codec endpoint the Temporal UI decrypts payloads through.
//
// Why a front and not Temporal's own server binary with a TLS frontend: what the tests must prove is
// stackflow's side of the connection — that the bridge, the workers and every tool present the right
// client certificate, verify the server against the right CA and name, send the API key, and fail clearly
// when one is wrong. The front enforces exactly that with Go's crypto/tls (the same library and the same
// settings Temporal's frontend uses: a client CA pool and RequireAndVerifyClientCert), and it also checks
// the API key, which a stock server only does behind a JWT authorizer. It costs no build minutes, where a
// second Temporal server binary would cost several on every fresh machine.
package temporalfront

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stackflow/stackflow/api/temporalconn"
)

// Config configures a front.
type Config struct {
	// Listen is the TLS address clients use; a comma-separated list serves each.
	Listen string
	// Backend is the dev server's plain gRPC address.
	Backend string
	// CAFile holds the CA client certificates must chain to; CertFile and KeyFile the serving certificate.
	CAFile, CertFile, KeyFile string
	// APIKeyFile holds the API key every call must carry as "authorization: Bearer <key>"; empty accepts
	// calls without one.
	APIKeyFile string
	// CodecListen, when set, serves the codec endpoint (plain HTTP, loopback) with the keys in CodecKeys,
	// for browsers of CodecOrigins (the UI).
	CodecListen  string
	CodecKeys    string
	CodecOrigins []string
	Log          *slog.Logger
}

// Front is a running front.
type Front struct {
	cfg     Config
	apiKey  []byte
	calls   atomic.Int64
	refused atomic.Int64
}

// Serve runs the front until ctx ends.
func Serve(ctx context.Context, cfg Config) error {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	f := &Front{cfg: cfg}
	if cfg.APIKeyFile != "" {
		b, err := os.ReadFile(cfg.APIKeyFile)
		if err != nil {
			return fmt.Errorf("api key: %w", err)
		}
		f.apiKey = []byte(strings.TrimSpace(string(b)))
	}
	tlsCfg, err := serverTLS(cfg)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: f.handler(newProxy(cfg.Backend)), TLSConfig: tlsCfg, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(cfg.Log.Handler(), slog.LevelDebug)}
	addrs := strings.Split(cfg.Listen, ",")
	errc := make(chan error, len(addrs)+1)
	for _, addr := range addrs {
		ln, err := net.Listen("tcp", strings.TrimSpace(addr))
		if err != nil {
			return fmt.Errorf("listen %s: %w", addr, err)
		}
		go func() { errc <- srv.ServeTLS(ln, "", "") }()
	}
	cfg.Log.Info("temporal front", "listen", cfg.Listen, "backend", cfg.Backend, "apiKey", f.apiKey != nil)

	var codecSrv *http.Server
	if cfg.CodecListen != "" {
		ring, err := temporalconn.LoadKeyring(cfg.CodecKeys)
		if err != nil {
			return err
		}
		cln, err := net.Listen("tcp", cfg.CodecListen)
		if err != nil {
			return fmt.Errorf("listen %s: %w", cfg.CodecListen, err)
		}
		codecSrv = &http.Server{Handler: temporalconn.CodecHandler(temporalconn.NewCodec(ring), cfg.CodecOrigins), ReadHeaderTimeout: 10 * time.Second}
		go func() { errc <- codecSrv.Serve(cln) }()
		cfg.Log.Info("codec endpoint", "listen", cfg.CodecListen, "keys", ring.IDs())
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if codecSrv != nil {
		_ = codecSrv.Shutdown(sctx)
	}
	cfg.Log.Info("temporal front stopped", "calls", f.calls.Load(), "refused", f.refused.Load())
	return nil
}

func serverTLS(cfg Config) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	pool, err := temporalconn.CertPool(cfg.CAFile)
	if err != nil {
		return nil, fmt.Errorf("client CA: %w", err)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		NextProtos:   []string{"h2"},
	}, nil
}

// handler checks the API key, then proxies.
func (f *Front) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		if f.apiKey != nil {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), f.apiKey) != 1 {
				f.refused.Add(1)
				client := ""
				if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
					client = r.TLS.PeerCertificates[0].Subject.CommonName
				}
				f.cfg.Log.Warn("refused: missing or wrong API key", "client", client, "method", r.URL.Path)
				grpcError(w, 16, "temporal front: missing or wrong API key") // UNAUTHENTICATED
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// newProxy forwards gRPC calls to the plain HTTP/2 backend.
func newProxy(backendAddr string) *httputil.ReverseProxy {
	backend := &url.URL{Scheme: "http", Host: backendAddr}
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true) // gRPC to the dev server: HTTP/2 without TLS, prior knowledge
	return &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(backend); r.Out.Host = r.In.Host },
		Transport:     &http.Transport{Protocols: &protocols, DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext},
		FlushInterval: -1,
		// A gRPC error often comes back trailers-only: its status in the one HEADERS frame that ends the
		// stream. The proxy flushes headers early (streams need it), so that status would go out as
		// plain headers followed by an empty end of stream, which clients read as "closed without
		// trailers". Sent as announced trailers, it arrives as a status every time.
		ModifyResponse: func(res *http.Response) error {
			if res.Header.Get("Grpc-Status") == "" {
				return nil
			}
			if res.Trailer == nil {
				res.Trailer = http.Header{}
			}
			for _, k := range []string{"Grpc-Status", "Grpc-Message", "Grpc-Status-Details-Bin"} {
				if v, ok := res.Header[k]; ok {
					res.Trailer[k] = v
					delete(res.Header, k)
				}
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			grpcError(w, 14, "temporal front: backend "+backendAddr+": "+err.Error()) // UNAVAILABLE
		},
	}
}

// grpcError answers a gRPC call with a status and no message (a trailers-only response).
func grpcError(w http.ResponseWriter, code int, msg string) {
	h := w.Header()
	h.Set("Content-Type", "application/grpc")
	h.Set("Grpc-Status", fmt.Sprint(code))
	h.Set("Grpc-Message", url.PathEscape(msg))
	w.WriteHeader(http.StatusOK)
}
