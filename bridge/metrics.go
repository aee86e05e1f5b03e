package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/time/rate"
)

// metrics are the bridge's Prometheus metrics, in a registry of their own.
type metrics struct {
	registry *prometheus.Registry
	events   *prometheus.CounterVec
	signals  *prometheus.CounterVec
	errors   *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	rpc      *prometheus.HistogramVec
	patch    *prometheus.HistogramVec
	leader   prometheus.Gauge
	served   prometheus.Gauge

	mu    sync.Mutex
	depth func() int
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stackflow_bridge_events_total", Help: "Informer events seen, by kind and type (add, update, delete).",
		}, []string{"kind", "type"}),
		signals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stackflow_bridge_signals_total", Help: "Signals sent to workflows, by kind, signal and outcome (started, signalled, gone: a delete telling a running workflow its object left the API server).",
		}, []string{"kind", "signal", "outcome"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stackflow_bridge_errors_total", Help: "Failed attempts to process an object (retried with backoff), by kind.",
		}, []string{"kind"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "stackflow_bridge_signal_latency_seconds",
			Help:    "Time from an object's event to its workflow being signalled, retries included.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"kind"}),
		rpc: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "stackflow_bridge_signal_rpc_seconds",
			Help:    "Duration of one SignalWithStart call to Temporal.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"kind"}),
		patch: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "stackflow_bridge_finalizer_patch_seconds",
			Help:    "Duration of one finalizer patch to the API server.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"kind"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "stackflow_bridge_leader", Help: "1 while this replica leads and acts, 0 otherwise.",
		}),
		served: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "stackflow_bridge_served_kinds", Help: "Kinds being watched (their resource is installed).",
		}),
	}
	depth := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "stackflow_bridge_queue_depth", Help: "Objects waiting in the work queue.",
	}, func() float64 {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.depth == nil {
			return 0
		}
		return float64(m.depth())
	})
	m.registry.MustRegister(m.events, m.signals, m.errors, m.latency, m.rpc, m.patch, m.leader, m.served, depth,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) setQueue(depth func() int) {
	m.mu.Lock()
	m.depth = depth
	m.mu.Unlock()
}

// serve starts /metrics and /healthz on addr and returns a function that stops the server.
func (m *metrics) serve(addr string, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listener on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "err", err)
		}
	}()
	log.Info("metrics", "address", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

func newLimiter(qps float64, burst int) *rate.Limiter { return rate.NewLimiter(rate.Limit(qps), burst) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
