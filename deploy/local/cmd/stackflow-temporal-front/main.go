// Command stackflow-temporal-front is the local stack's TLS front of the Temporal dev server (mutual TLS,
// API key) and its codec endpoint; see package temporalfront. The stack starts it; nothing else should.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/stackflow/stackflow/deploy/local/temporalfront"
)

func main() {
	var cfg temporalfront.Config
	origins := flag.String("codec-origins", "", "comma-separated browser origins allowed to call the codec endpoint")
	flag.StringVar(&cfg.Listen, "listen", "127.0.0.1:7234", "TLS address")
	flag.StringVar(&cfg.Backend, "backend", "127.0.0.1:7233", "dev server gRPC address")
	flag.StringVar(&cfg.CAFile, "client-ca", "", "CA of client certificates")
	flag.StringVar(&cfg.CertFile, "cert", "", "serving certificate")
	flag.StringVar(&cfg.KeyFile, "key", "", "serving key")
	flag.StringVar(&cfg.APIKeyFile, "api-key-file", "", "API key every call must carry (empty: none)")
	flag.StringVar(&cfg.CodecListen, "codec-listen", "", "address of the codec endpoint (empty: none)")
	flag.StringVar(&cfg.CodecKeys, "codec-keys", "", "codec key directory")
	flag.Parse()
	for _, o := range strings.Split(*origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			cfg.CodecOrigins = append(cfg.CodecOrigins, o)
		}
	}
	cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := temporalfront.Serve(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "stackflow-temporal-front:", err)
		os.Exit(1)
	}
}
