// Command stackflow-bridge watches stackflow's Kubernetes objects and starts or signals one Temporal
// workflow per object. Run two or more replicas: one leads (a Lease), the others wait.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/stackflow/stackflow/api/temporalconn"
	"github.com/stackflow/stackflow/bridge"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "stackflow-bridge:", err)
		os.Exit(1)
	}
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func run() error {
	var (
		cfg        bridge.Config
		kubeconfig = flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file (default $KUBECONFIG, else in-cluster)")
		kinds      = flag.String("kinds", env("STACKFLOW_KINDS", ""), "comma-separated kinds to serve (default every served kind)")
		namespaces = flag.String("watch-namespaces", env("STACKFLOW_WATCH_NAMESPACES", ""), "comma-separated namespaces whose objects are served (default every namespace; cluster-scoped kinds are always served)")
		logLevel   = flag.String("log-level", env("STACKFLOW_LOG_LEVEL", "info"), "debug, info, warn or error")
	)
	cfg.Temporal.AddFlags(flag.CommandLine, "127.0.0.1:7233", "default")
	codecAddress := flag.String("codec-server-address", env("STACKFLOW_CODEC_SERVER_ADDRESS", ""), "address of the codec endpoint for the Temporal UI and CLI (POST …/decode, …/encode); empty disables it; needs --codec-keys")
	codecOrigins := flag.String("codec-server-origins", env("STACKFLOW_CODEC_SERVER_ORIGINS", ""), "comma-separated origins (the Temporal UI's) allowed to call the codec endpoint from a browser")
	flag.StringVar(&cfg.LeaseNamespace, "leader-election-namespace", env("STACKFLOW_LEASE_NAMESPACE", "stackflow-system"), "namespace of the leader-election Lease")
	flag.StringVar(&cfg.LeaseName, "leader-election-name", env("STACKFLOW_LEASE_NAME", "stackflow-bridge"), "name of the leader-election Lease")
	flag.DurationVar(&cfg.LeaseDuration, "lease-duration", 15*time.Second, "how long a standby waits before taking over a silent leader's Lease")
	flag.DurationVar(&cfg.RenewDeadline, "renew-deadline", 10*time.Second, "how long the leader retries renewing before it gives up")
	flag.DurationVar(&cfg.RetryPeriod, "retry-period", 2*time.Second, "interval between leader-election attempts")
	flag.StringVar(&cfg.Identity, "identity", env("POD_NAME", ""), "this replica's identity (default hostname plus a random suffix)")
	flag.StringVar(&cfg.MetricsAddress, "metrics-address", env("STACKFLOW_METRICS_ADDRESS", "127.0.0.1:9464"), "address of /metrics and /healthz (empty disables)")
	flag.StringVar(&cfg.WatchFilter, "watch-filter", env("STACKFLOW_WATCH_FILTER", ""), "serve only objects labelled stackflow.io/watch-filter with this value (default: only objects without the label)")
	flag.IntVar(&cfg.Workers, "workers", 16, "objects processed in parallel")
	flag.DurationVar(&cfg.Resync, "resync", 10*time.Minute, "informer resync period")
	flag.Parse()

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = *kubeconfig
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.Kube = rc

	for _, ns := range strings.Split(*namespaces, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			cfg.Namespaces = append(cfg.Namespaces, ns)
		}
	}
	if *kinds != "" {
		selected, unknown := bridge.Select(strings.Split(*kinds, ","))
		if len(unknown) > 0 {
			return fmt.Errorf("--kinds: not served: %s", strings.Join(unknown, ", "))
		}
		cfg.Kinds = selected
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// A TLS set-up that cannot work (a wrong CA, say) stops the start with a message that names it; an
	// unreachable Temporal does not: the bridge waits for it.
	if err := cfg.Temporal.Preflight(ctx); errors.Is(err, temporalconn.ErrTLS) {
		return err
	} else if err != nil {
		cfg.Log.Warn("temporal not reachable yet", "err", err)
	}
	if *codecAddress != "" {
		stopCodec, err := serveCodec(*codecAddress, cfg.Temporal.CodecKeys, *codecOrigins, cfg.Log)
		if err != nil {
			return err
		}
		defer stopCodec()
	}
	b, err := bridge.New(cfg)
	if err != nil {
		return err
	}
	return b.Run(ctx)
}

// serveCodec serves the payload codec endpoint for operators' Temporal UI and CLI. Every replica serves it,
// leader or not: it needs only the keys.
func serveCodec(addr, keys, origins string, log *slog.Logger) (func(), error) {
	if keys == "" {
		return nil, errors.New("--codec-server-address needs --codec-keys")
	}
	ring, err := temporalconn.LoadKeyring(keys)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("codec endpoint on %s: %w", addr, err)
	}
	var allowed []string
	for _, o := range strings.Split(origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			allowed = append(allowed, o)
		}
	}
	srv := &http.Server{Handler: temporalconn.CodecHandler(temporalconn.NewCodec(ring), allowed), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("codec endpoint", "err", err)
		}
	}()
	log.Info("codec endpoint", "address", ln.Addr().String(), "keys", ring.IDs())
	return func() { _ = srv.Close() }, nil
}
