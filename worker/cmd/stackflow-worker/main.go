// Command stackflow-worker runs stackflow's workflows and activities on their Temporal task queues.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/stackflow/stackflow/worker"
	"github.com/stackflow/stackflow/workflows/object"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "stackflow-worker:", err)
		os.Exit(1)
	}
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func envFloat(name string, def float64) float64 {
	if v, err := strconv.ParseFloat(os.Getenv(name), 64); err == nil {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func run() error {
	var (
		cfg        worker.Config
		kubeconfig = flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file (default $KUBECONFIG, else in-cluster)")
		queues     = flag.String("queues", env("STACKFLOW_QUEUES", strings.Join(worker.AllQueues, ",")), "comma-separated task queues to serve")
		logLevel   = flag.String("log-level", env("STACKFLOW_LOG_LEVEL", "info"), "debug, info, warn or error")
		kubeQPS    = flag.Float64("kube-qps", envFloat("STACKFLOW_KUBE_QPS", -1),
			"client-side limit of Kubernetes API requests per second; negative: none, the API server's priority and fairness governs")
		kubeBurst = flag.Int("kube-burst", envInt("STACKFLOW_KUBE_BURST", 200), "burst above --kube-qps, when it is positive")
	)
	cfg.Temporal.AddFlags(flag.CommandLine, "127.0.0.1:7233", "default")
	flag.StringVar(&cfg.TemporalUI, "temporal-ui", env("TEMPORAL_UI", "http://127.0.0.1:8233"), "Temporal UI base URL, linked from objects' status")
	flag.StringVar(&cfg.MetricsAddress, "metrics-address", env("STACKFLOW_METRICS_ADDRESS", "127.0.0.1:9465"), "address of /metrics and /healthz (empty disables)")
	flag.StringVar(&cfg.Identity, "identity", env("POD_NAME", ""), "this worker's identity (default hostname plus a random suffix)")
	flag.StringVar(&cfg.WatchFilter, "watch-filter", env("STACKFLOW_WATCH_FILTER", ""), "label the objects the workers create stackflow.io/watch-filter=<value>, for the bridge of the same --watch-filter (default: no label)")
	flag.IntVar(&cfg.Pollers, "pollers", envInt("STACKFLOW_POLLERS", 8), "pollers per task queue (tasks wait in the server while too few poll)")
	flag.DurationVar(&cfg.StickyTimeout, "sticky-timeout", envDuration("STACKFLOW_STICKY_TIMEOUT", worker.DefaultStickyTimeout),
		"how long a workflow task waits for this worker (which holds the workflow in its cache) before any worker may take it")
	flag.DurationVar(&cfg.StopTimeout, "stop-timeout", 30*time.Second, "how long in-flight activities may run on after SIGTERM")
	flag.IntVar(&cfg.Limits.MaxHistory, "max-history", envInt("STACKFLOW_MAX_HISTORY", object.DefaultLimits.MaxHistory),
		"events one run of an object workflow may hold in a long wait before it continues as new (tests shorten it)")
	flag.DurationVar(&cfg.Limits.PollInterval, "poll-interval", envDuration("STACKFLOW_POLL_INTERVAL", object.DefaultLimits.PollInterval),
		"longest pause between two looks at what a workflow waits for (10s at most while it waits for a Secret or another object; tests shorten it)")
	flag.StringVar(&cfg.Deployment, "deployment-name", env("STACKFLOW_DEPLOYMENT_NAME", worker.DefaultDeployment), "Temporal worker deployment of the workflow worker")
	flag.StringVar(&cfg.BuildID, "build-id", env("STACKFLOW_BUILD_ID", worker.BuildIDFromBinary()), "build ID of the workflow worker's version (default this binary's VCS revision)")
	flag.BoolVar(&cfg.NoPromote, "no-promote", os.Getenv("STACKFLOW_NO_PROMOTE") != "", "do not make this build the deployment's current version")
	flag.Parse()

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	for _, q := range strings.Split(*queues, ",") {
		if q = strings.TrimSpace(q); q != "" {
			cfg.Queues = append(cfg.Queues, q)
		}
	}

	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = *kubeconfig
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	// A client-side token bucket queued the status writes of 500 nodes starting at once for tens of
	// seconds while the API server idled; API Priority and Fairness protects the server instead.
	rc.QPS, rc.Burst = float32(*kubeQPS), *kubeBurst
	cfg.Kube = rc

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return worker.Run(ctx, cfg)
}
