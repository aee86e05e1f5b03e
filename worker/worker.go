// Package worker is stackflow's worker process: one Temporal worker per task queue it is asked to serve,
// each registering what runs on that queue (the workflows on lifecycle.WorkflowQueue, the Kubernetes
// activities on lifecycle.KubeQueue, …), with Prometheus metrics and a graceful stop.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"

	"github.com/stackflow/stackflow/activities/ansible"
	"github.com/stackflow/stackflow/activities/baremetal"
	"github.com/stackflow/stackflow/activities/database"
	"github.com/stackflow/stackflow/activities/helm"
	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/activities/messagebus"
	"github.com/stackflow/stackflow/activities/openstack"
	"github.com/stackflow/stackflow/activities/signals"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/api/temporalconn"
	"github.com/stackflow/stackflow/workflows"
	"github.com/stackflow/stackflow/workflows/object"
)

// AllQueues are the task queues a worker serves by default.
var AllQueues = []string{lifecycle.WorkflowQueue, lifecycle.KubeQueue, lifecycle.AnsibleQueue, lifecycle.OpenStackQueue}

// DefaultStickyTimeout is Config.StickyTimeout's default, Temporal's own. A longer one helps a single
// workflow worker through bursts: in a 500-node start-up, 0.63 workflow tasks per node outwaited 5 s on
// its sticky queue and went to the normal queue, to wait there too and replay their whole history (0.01
// at 30 s). It costs crash recovery as much: after a kill -9, tasks Temporal still routed to the dead
// worker's sticky queue (it does so for 10 s after its last poll) wait out the timeout (a workflow
// resumed 25 s later at 30 s than at 5 s).
const DefaultStickyTimeout = 5 * time.Second

// Config configures a worker process. Zero values take the defaults noted on each field.
type Config struct {
	// Kube is the API server's REST config; required by every queue (the workflows write status with it).
	Kube *rest.Config
	// Temporal says how to reach Temporal: address (default 127.0.0.1:7233), namespace (default
	// "default"), TLS, API key and payload codec keys.
	Temporal temporalconn.Options
	// TemporalUI is the Temporal UI's base URL, linked from objects' status; default http://127.0.0.1:8233.
	TemporalUI string
	// WatchFilter is the value of lifecycle.WatchFilterLabel the Kubernetes activities put on the
	// objects they create, so the bridge of the same filter serves them; empty puts none.
	WatchFilter string
	// Queues are the task queues to serve; default AllQueues.
	Queues []string
	// MetricsAddress serves /metrics and /healthz; empty disables it. Keep it on loopback.
	MetricsAddress string
	// Identity names this process to Temporal; default hostname plus a random suffix.
	Identity string
	// StopTimeout is how long in-flight activities may run on after a stop is asked; default 30s.
	StopTimeout time.Duration
	// Pollers is how many pollers each task queue's worker runs; 0 means 8.
	Pollers int
	// StickyTimeout is how long a workflow task waits for this worker on its sticky queue before
	// Temporal hands it to any worker, which must replay the whole history; default DefaultStickyTimeout.
	StickyTimeout time.Duration
	// Log receives the worker's logs; default slog.Default().
	Log *slog.Logger
	// Limits bound the histories of object workflows and pace their waits; zero fields take
	// object.DefaultLimits. Every worker of a deployment should use the same (each run records them).
	Limits object.Limits
	// Deployment and BuildID version the workflow worker (Temporal worker deployments): it serves only
	// workflow tasks of its version. Deployment defaults to DefaultDeployment, BuildID to
	// BuildIDFromBinary; with no build ID the worker is unversioned. The activity queues are never
	// versioned: activities are idempotent adapters any build may run.
	Deployment, BuildID string
	// NoPromote leaves the deployment's current version alone. Otherwise a versioned worker makes its
	// build current when it is the newer one (see shouldPromote), so workflows that auto-upgrade move to
	// it on their next task.
	NoPromote bool
}

func (c *Config) setDefaults() {
	if c.Temporal.Address == "" {
		c.Temporal.Address = "127.0.0.1:7233"
	}
	if c.Temporal.Namespace == "" {
		c.Temporal.Namespace = "default"
	}
	if c.TemporalUI == "" {
		c.TemporalUI = "http://127.0.0.1:8233"
	}
	if len(c.Queues) == 0 {
		c.Queues = AllQueues
	}
	if c.Identity == "" {
		host, _ := os.Hostname()
		c.Identity = host + "-" + uuid.NewString()[:8]
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = 30 * time.Second
	}
	if c.StickyTimeout == 0 {
		c.StickyTimeout = DefaultStickyTimeout
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.Deployment == "" {
		c.Deployment = DefaultDeployment
	}
	if c.BuildID == "" {
		c.BuildID = BuildIDFromBinary()
	}
}

// Run serves the configured task queues until ctx ends, then stops every worker, letting in-flight
// activities finish within StopTimeout.
func Run(ctx context.Context, cfg Config) error {
	cfg.setDefaults()
	log := cfg.Log
	for _, q := range cfg.Queues {
		if !slices.Contains(AllQueues, q) {
			return fmt.Errorf("unknown task queue %q (known: %v)", q, AllQueues)
		}
	}
	if errs := validation.IsValidLabelValue(cfg.WatchFilter); len(errs) > 0 {
		return fmt.Errorf("watch filter %q is no label value: %s", cfg.WatchFilter, strings.Join(errs, "; "))
	}

	// serving is set once every task queue's worker polls: /readyz answers from it.
	var serving atomic.Bool
	reg := prom.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	scope, closeScope := newScope(reg)
	defer closeScope.Close()
	if cfg.MetricsAddress != "" {
		stop, err := serveMetrics(cfg.MetricsAddress, reg, &serving, log)
		if err != nil {
			return err
		}
		defer stop()
	}

	c, dc, err := dial(ctx, cfg, scope)
	if err != nil {
		return err
	}
	defer c.Close()
	// Signals a workflow sends to many others at once go out through this worker's client.
	sender := signals.NewSender(c.WorkflowService(), dc, cfg.Temporal.Namespace, cfg.Identity)
	if err := EnsureSearchAttributes(ctx, c, cfg.Temporal.Namespace, lifecycle.SearchAttributes); err != nil {
		return err
	}

	object.SetLimits(cfg.Limits)
	var running []sdkworker.Worker
	defer func() {
		// Stop blocks until in-flight activities finish or StopTimeout passes.
		for _, w := range running {
			w.Stop()
		}
		log.Info("stopped")
	}()
	versioned := false
	for _, q := range cfg.Queues {
		opts := sdkworker.Options{
			Identity:          cfg.Identity,
			WorkerStopTimeout: cfg.StopTimeout,
			// Two pollers (the SDK's default) let tasks wait in the server's queue while this worker
			// idles: a 500-node rollout's start-up queued workflow tasks for half a minute.
			MaxConcurrentWorkflowTaskPollers: cfg.pollers(),
			MaxConcurrentActivityTaskPollers: cfg.pollers(),
		}
		if q == lifecycle.WorkflowQueue {
			opts.Interceptors = object.Interceptors()
			opts.DeploymentOptions = cfg.deploymentOptions()
			versioned = opts.DeploymentOptions.UseVersioning
			// Its activities (status writes, object reads, batches of signals) run locally: no activity task
			// is ever put on this queue.
			opts.LocalActivityWorkerOnly = true
			opts.StickyScheduleToStartTimeout = cfg.StickyTimeout
		}
		w := sdkworker.New(c, q, opts)
		n, err := register(q, w, cfg, sender)
		if err != nil {
			return fmt.Errorf("task queue %s: %w", q, err)
		}
		if n == 0 {
			log.Info("task queue not served: nothing registered for it yet", "queue", q)
			continue
		}
		if err := w.Start(); err != nil {
			return fmt.Errorf("start worker on %s: %w", q, err)
		}
		running = append(running, w)
		log.Info("serving task queue", "queue", q, "registered", n)
	}
	if len(running) == 0 {
		return errors.New("no task queue has anything registered")
	}
	serving.Store(true)
	if versioned {
		log.Info("workflow worker versioned", "deployment", cfg.Deployment, "buildID", cfg.BuildID)
		if !cfg.NoPromote {
			// In the background: a busy server must not stop a worker that already serves its version's
			// tasks (it did: the promotion's one minute ran out while 1,000 workflows started at once).
			go func() {
				current, err := promote(ctx, c, cfg, log)
				if err != nil {
					log.Error("build not made current: promote it by hand (docs/operations/upgrade.md)", "deployment", cfg.Deployment, "buildID", cfg.BuildID, "error", err)
					return
				}
				log.Info("worker deployment", "deployment", cfg.Deployment, "current", current)
			}()
		}
	} else if slices.Contains(cfg.Queues, lifecycle.WorkflowQueue) {
		log.Warn("workflow worker unversioned: no build ID (set --build-id)")
	}
	<-ctx.Done()
	log.Info("stopping", "timeout", cfg.StopTimeout)
	return nil
}

// register puts on w what runs on queue and returns how many workflows or activity structs it registered.
// This is the one place that says which capability serves which queue.
func register(queue string, w sdkworker.Worker, cfg Config, sender *signals.Sender) (int, error) {
	switch queue {
	case lifecycle.WorkflowQueue:
		// The workflows write their objects' status and read their objects themselves, as local activities.
		if cfg.Kube == nil {
			return 0, errors.New("the workflows write their objects' status and read them: they need a kubeconfig")
		}
		k, err := kube.NewKube(cfg.Kube, cfg.TemporalUI, cfg.Temporal.Namespace)
		if err != nil {
			return 0, fmt.Errorf("workflow worker's kubernetes client: %w", err)
		}
		k.Events = kube.NewEventRecorder(k.Core, "stackflow-worker", cfg.Identity)
		w.RegisterActivity(kube.NewLocalKube(k))
		// A data plane grants its nodes in one batch of signals (activities/signals).
		w.RegisterActivity(sender)
		return workflows.Register(w), nil
	case lifecycle.KubeQueue:
		if cfg.Kube == nil {
			return 0, errors.New("the Kubernetes activities need a kubeconfig")
		}
		k, err := kube.NewKube(cfg.Kube, cfg.TemporalUI, cfg.Temporal.Namespace)
		if err != nil {
			return 0, fmt.Errorf("kubernetes activities: %w", err)
		}
		// Status writes tell the object's story as Events (kubectl describe).
		k.Events = kube.NewEventRecorder(k.Core, "stackflow-worker", cfg.Identity)
		k.WatchFilter = cfg.WatchFilter
		w.RegisterActivity(k)
		// The Helm activities of the control-plane rollouts are Kubernetes work too: same queue.
		h, err := helm.NewHelm(cfg.Kube, helmCacheDir())
		if err != nil {
			return 0, fmt.Errorf("helm activities: %w", err)
		}
		w.RegisterActivity(h)
		return 2, nil
	case lifecycle.AnsibleQueue:
		// ansible-playbook over SSH with the playbooks embedded in this binary (or those in
		// $STACKFLOW_ANSIBLE_DIR); SSH keys are read from Secrets, hence the kubeconfig.
		if cfg.Kube == nil {
			return 0, errors.New("the Ansible activities need a kubeconfig (SSH key Secrets)")
		}
		ans, err := ansible.NewAnsible(cfg.Kube, os.Getenv("STACKFLOW_ANSIBLE_DIR"))
		if err != nil {
			return 0, fmt.Errorf("ansible activities: %w", err)
		}
		// Hosts whose keys are known ahead (the local stack lists its test hosts' keys, which change
		// when its state directory is made anew) are checked against that file instead.
		if kh := os.Getenv("STACKFLOW_KNOWN_HOSTS"); kh != "" {
			ans.KnownHostsFile = kh
		}
		w.RegisterActivity(ans)
		return 1, nil
	case lifecycle.OpenStackQueue:
		// The OpenStack API activities read credentials from identity Secrets, hence the kubeconfig.
		if cfg.Kube == nil {
			return 0, errors.New("the OpenStack activities need a kubeconfig (identity Secrets)")
		}
		osa, err := openstack.NewOpenStack(cfg.Kube)
		if err != nil {
			return 0, fmt.Errorf("openstack activities: %w", err)
		}
		w.RegisterActivity(osa)
		// Ironic's activities (phase -1) share the OpenStack activities' credentials and clients.
		w.RegisterActivity(baremetal.NewIronic(osa))
		// The Nova control plane's databases and message buses are OpenStack infrastructure; their
		// administrators' credentials are in Secrets too.
		db, err := database.NewDatabase(cfg.Kube)
		if err != nil {
			return 0, fmt.Errorf("database activities: %w", err)
		}
		w.RegisterActivity(db)
		mb, err := messagebus.NewMessageBus(cfg.Kube)
		if err != nil {
			return 0, fmt.Errorf("message-bus activities: %w", err)
		}
		w.RegisterActivity(mb)
		return 3, nil
	}
	return 0, fmt.Errorf("unknown task queue %q", queue)
}

// helmCacheDir is where the Helm activities cache downloaded charts: $STACKFLOW_HELM_CACHE, else the
// user's cache directory.
func helmCacheDir() string {
	if d := os.Getenv("STACKFLOW_HELM_CACHE"); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		d = os.TempDir()
	}
	return filepath.Join(d, "stackflow", "helm")
}

// dial connects to Temporal, retrying until ctx ends: a worker started before its server waits for it.
// A TLS set-up that cannot work (a wrong CA, say) is not retried: it fails with a message naming it.
func dial(ctx context.Context, cfg Config, scope tally.Scope) (client.Client, converter.DataConverter, error) {
	opts, err := cfg.Temporal.ClientOptions()
	if err != nil {
		return nil, nil, err
	}
	opts.Identity = cfg.Identity
	opts.Logger = sdklog.NewStructuredLogger(cfg.Log.With("component", "temporal"))
	opts.MetricsHandler = sdktally.NewMetricsHandler(scope)
	for {
		err := cfg.Temporal.Preflight(ctx)
		if errors.Is(err, temporalconn.ErrTLS) {
			return nil, nil, err
		}
		if err == nil {
			var c client.Client
			if c, err = client.DialContext(ctx, opts); err == nil {
				return c, opts.DataConverter, nil
			}
		}
		cfg.Log.Warn("temporal not reachable yet", "address", cfg.Temporal.Address, "err", err)
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("connect to temporal at %s: %w", cfg.Temporal.Address, err)
		case <-time.After(2 * time.Second):
		}
	}
}

// EnsureSearchAttributes registers the custom search attributes (name → type name such as "Keyword") that
// the namespace lacks. Registering is idempotent; a type clash is reported.
func EnsureSearchAttributes(ctx context.Context, c client.Client, namespace string, attrs map[string]string) error {
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("list search attributes of namespace %s: %w", namespace, err)
	}
	have := resp.GetCustomAttributes()
	missing := map[string]enumspb.IndexedValueType{}
	for name, typ := range attrs {
		want, err := enumspb.IndexedValueTypeFromString(typ)
		if err != nil {
			return fmt.Errorf("search attribute %s: %w", name, err)
		}
		got, ok := have[name]
		switch {
		case !ok:
			missing[name] = want
		case got != want:
			return fmt.Errorf("search attribute %s is %s in namespace %s, want %s", name, got, namespace, want)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: namespace, SearchAttributes: missing,
	})
	var exists *serviceerror.AlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("add search attributes to namespace %s: %w", namespace, err)
	}
	return nil
}

type closer interface{ Close() error }

// newScope reports the SDK's metrics (Prometheus names, histograms for timers) into reg.
func newScope(reg *prom.Registry) (tally.Scope, closer) {
	reporter := tallyprom.NewReporter(tallyprom.Options{Registerer: reg, DefaultTimerType: tallyprom.HistogramTimerType})
	scope, c := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &sdktally.PrometheusSanitizeOptions,
	}, time.Second)
	return sdktally.NewPrometheusNamingScope(scope), c
}

// serveMetrics serves /metrics, /healthz (the process lives) and /readyz (its workers poll their task
// queues: it serves tasks) on addr and returns a function that stops the server.
func serveMetrics(addr string, reg *prom.Registry, serving *atomic.Bool, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listener on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !serving.Load() {
			http.Error(w, "not serving its task queues yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
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

// pollers is how many pollers each task queue's worker runs (Pollers, else 8).
func (c Config) pollers() int {
	if c.Pollers > 0 {
		return c.Pollers
	}
	return 8
}
