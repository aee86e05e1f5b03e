// Package bridge turns events on stackflow's Kubernetes objects into Temporal workflows. It watches the
// metadata of every served kind, adds the teardown finalizer, and signals (starting when needed) one
// workflow per object: a spec signal per new generation, a delete signal when the object is being
// deleted. It never waits for a workflow and never writes status: the workflow does.
//
// Only the leader of a Lease acts, so replicas never act twice; every action is idempotent anyway
// (SignalWithStart on a workflow ID derived from the object), so restarts and resyncs create nothing new.
package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/client"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/workqueue"

	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/api/temporalconn"
)

// Config configures a bridge. Zero values take the defaults noted on each field.
type Config struct {
	// Kube is the API server's REST config (required).
	Kube *rest.Config
	// KubeQPS and KubeBurst limit the bridge's API calls; default 100 and 200, enough for bursts of
	// thousands of objects.
	KubeQPS   float32
	KubeBurst int

	// Temporal says how to reach Temporal: address (default 127.0.0.1:7233), namespace of the workflows
	// (default "default"), TLS, API key and payload codec keys.
	Temporal temporalconn.Options

	// Kinds are the served kinds; default Served.
	Kinds []Kind
	// Namespaces limits the namespaced kinds to objects in these namespaces (one informer each), so the
	// bridge needs rights there only; empty serves every namespace. Cluster-scoped kinds are served whole.
	Namespaces []string
	// WatchFilter serves only objects labelled lifecycle.WatchFilterLabel with this value; empty serves
	// only objects without that label. It must be a valid label value.
	WatchFilter string
	// Workers is the number of objects processed in parallel; default 16 (a signal is mostly waiting on
	// Temporal, so throughput grows with it).
	Workers int

	// Identity names this replica in the Lease, in Events and to Temporal; default hostname plus a random suffix.
	Identity string
	// LeaseNamespace and LeaseName locate the leader-election Lease; default stackflow-system/stackflow-bridge.
	LeaseNamespace string
	LeaseName      string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election; default 15s, 10s, 2s.
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration

	// MetricsAddress serves /metrics and /healthz; empty disables it. Keep it on loopback.
	MetricsAddress string

	// Resync is the informers' resync period; default 10m. Resyncs are cheap: a signalled generation is
	// not signalled again.
	Resync time.Duration
	// Rediscover is how often kinds not yet installed are looked for again; default 30s.
	Rediscover time.Duration
	// Redeliver is how long after a delete signal it is sent again while the object still waits on our
	// finalizer (the workflow may have failed since); default 10m.
	Redeliver time.Duration
	// EventQPS and EventBurst cap the Kubernetes Events the bridge records, across all objects, so a burst
	// of ten thousand objects does not flood the API server; default 5 and 50.
	EventQPS   float32
	EventBurst int

	// Log receives the bridge's logs; default slog.Default().
	Log *slog.Logger
}

func (c *Config) setDefaults() {
	if c.KubeQPS == 0 {
		c.KubeQPS = 100
	}
	if c.KubeBurst == 0 {
		c.KubeBurst = 200
	}
	if c.Temporal.Address == "" {
		c.Temporal.Address = "127.0.0.1:7233"
	}
	if c.Temporal.Namespace == "" {
		c.Temporal.Namespace = "default"
	}
	if len(c.Kinds) == 0 {
		c.Kinds = Served
	}
	if c.Workers <= 0 {
		c.Workers = 16
	}
	if c.Identity == "" {
		host, _ := os.Hostname()
		c.Identity = host + "-" + uuid.NewString()[:8]
	}
	if c.LeaseNamespace == "" {
		c.LeaseNamespace = "stackflow-system"
	}
	if c.LeaseName == "" {
		c.LeaseName = "stackflow-bridge"
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = 15 * time.Second
	}
	if c.RenewDeadline == 0 {
		c.RenewDeadline = 10 * time.Second
	}
	if c.RetryPeriod == 0 {
		c.RetryPeriod = 2 * time.Second
	}
	if c.Resync == 0 {
		c.Resync = 10 * time.Minute
	}
	if c.Rediscover == 0 {
		c.Rediscover = 30 * time.Second
	}
	if c.Redeliver == 0 {
		c.Redeliver = 10 * time.Minute
	}
	if c.EventQPS == 0 {
		c.EventQPS = 5
	}
	if c.EventBurst == 0 {
		c.EventBurst = 50
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
}

// key names one object in the work queue.
type key struct {
	kind      string
	namespace string
	name      string
	// uid is set for an object that left the API server: its workflow, if it still runs, is told so.
	uid types.UID
}

func (k key) cacheKey() string {
	if k.namespace == "" {
		return k.name
	}
	return k.namespace + "/" + k.name
}

// Bridge is one replica of the bridge.
type Bridge struct {
	cfg      Config
	log      *slog.Logger
	core     kubernetes.Interface
	meta     metadata.Interface
	dyn      dynamic.Interface
	temporal client.Client
	events   *events
	metrics  *metrics

	mu sync.Mutex
	// signalled remembers, per object UID, what was told to its workflow; entries go with their object.
	signalled map[types.UID]Signalled
	// firstSeen is when a key was first queued since it was last processed, for the latency metric.
	firstSeen map[key]time.Time
	// missing remembers kinds reported as not installed, so the log says it once.
	missing map[string]bool
}

// New builds a bridge: clients, metrics and the event recorder. Nothing runs until Run.
func New(cfg Config) (*Bridge, error) {
	cfg.setDefaults()
	if cfg.Kube == nil {
		return nil, errors.New("bridge: no Kubernetes REST config")
	}
	if errs := validation.IsValidLabelValue(cfg.WatchFilter); len(errs) > 0 {
		return nil, fmt.Errorf("bridge: watch filter %q is no label value: %s", cfg.WatchFilter, strings.Join(errs, "; "))
	}
	kc := rest.CopyConfig(cfg.Kube)
	kc.QPS, kc.Burst = cfg.KubeQPS, cfg.KubeBurst
	kc.UserAgent = "stackflow-bridge/" + cfg.Identity
	core, err := kubernetes.NewForConfig(kc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	meta, err := metadata.NewForConfig(kc)
	if err != nil {
		return nil, fmt.Errorf("metadata client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(kc)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	tc, err := newTemporalClient(cfg)
	if err != nil {
		return nil, err
	}
	b := &Bridge{
		cfg:       cfg,
		log:       cfg.Log,
		core:      core,
		meta:      meta,
		dyn:       dyn,
		temporal:  tc,
		signalled: map[types.UID]Signalled{},
		firstSeen: map[key]time.Time{},
		missing:   map[string]bool{},
	}
	b.metrics = newMetrics()
	b.events = newEvents(core, cfg.Identity, cfg.EventQPS, cfg.EventBurst)
	return b, nil
}

// Run serves until ctx ends: metrics at once, the work itself only while this replica leads. It returns
// an error when leadership is lost, so the process restarts with a clean state.
func (b *Bridge) Run(ctx context.Context) error {
	defer b.temporal.Close()
	defer b.events.shutdown()
	if b.cfg.MetricsAddress != "" {
		stop, err := b.metrics.serve(b.cfg.MetricsAddress, b.log)
		if err != nil {
			return err
		}
		defer stop()
	}
	b.ensureLeaseNamespace(ctx)

	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: b.cfg.LeaseNamespace, Name: b.cfg.LeaseName},
		Client:     b.core.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: b.cfg.Identity},
	}
	// started and done bracket a leadership term, so Run returns only after the term's workers stopped.
	started, done := make(chan struct{}), make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   b.cfg.LeaseDuration,
		RenewDeadline:   b.cfg.RenewDeadline,
		RetryPeriod:     b.cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            b.cfg.LeaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				close(started)
				defer close(done)
				b.lead(ctx)
			},
			OnStoppedLeading: func() { b.metrics.leader.Set(0) },
			OnNewLeader: func(id string) {
				b.log.Info("leader", "identity", id, "self", id == b.cfg.Identity)
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election %s/%s: %w", b.cfg.LeaseNamespace, b.cfg.LeaseName, err)
	}
	b.log.Info("waiting for leadership", "lease", b.cfg.LeaseNamespace+"/"+b.cfg.LeaseName, "identity", b.cfg.Identity)
	le.Run(ctx)
	// Run starts the term's goroutine just before it returns on a lost lease: wait for it briefly.
	select {
	case <-started:
		<-done
	case <-time.After(time.Second):
	}
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("lost leadership of %s/%s", b.cfg.LeaseNamespace, b.cfg.LeaseName)
}

// ensureLeaseNamespace creates the Lease's namespace when missing. Best effort: without the right to do
// so, an installer is expected to have created it, and leader election reports the problem. The chart
// grants no right on namespaces (its release namespace holds the Lease), so a refusal is no warning.
func (b *Bridge) ensureLeaseNamespace(ctx context.Context) {
	_, err := b.core.CoreV1().Namespaces().Get(ctx, b.cfg.LeaseNamespace, metav1.GetOptions{})
	if apierrors.IsForbidden(err) {
		b.log.Debug("may not read the lease namespace; assuming it exists", "namespace", b.cfg.LeaseNamespace)
		return
	}
	if apierrors.IsNotFound(err) {
		_, err = b.core.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: b.cfg.LeaseNamespace}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
	}
	if err != nil {
		b.log.Warn("cannot ensure the lease namespace", "namespace", b.cfg.LeaseNamespace, "err", err)
	}
}

// lead runs the informers and workers for one leadership term.
func (b *Bridge) lead(ctx context.Context) {
	b.log.Info("leading: serving objects", "workers", b.cfg.Workers)
	b.metrics.leader.Set(1)
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedMaxOfRateLimiter(
			// Per key: quick retries first, then at most a minute apart through an outage.
			workqueue.NewTypedItemExponentialFailureRateLimiter[key](10*time.Millisecond, time.Minute),
			// Overall: retries of many keys at once do not hammer a recovering server.
			&workqueue.TypedBucketRateLimiter[key]{Limiter: newLimiter(50, 500)},
		),
		workqueue.TypedRateLimitingQueueConfig[key]{Name: "stackflow-bridge"},
	)
	b.metrics.setQueue(queue.Len)
	w := &watcher{b: b, queue: queue, factories: map[string]metadatainformer.SharedInformerFactory{},
		full: map[string]dynamicinformer.DynamicSharedInformerFactory{}, informers: map[string]servedKind{}}

	var wg sync.WaitGroup
	for range b.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for w.processNext(ctx) {
			}
		}()
	}
	w.discover(ctx)
	ticker := time.NewTicker(b.cfg.Rediscover)
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-ticker.C:
			w.discover(ctx)
		}
	}
	ticker.Stop()
	queue.ShutDown()
	for _, f := range w.factories {
		f.Shutdown()
	}
	for _, f := range w.full {
		f.Shutdown()
	}
	wg.Wait()
	b.metrics.setQueue(nil)
	b.log.Info("stopped leading")
}

// servedKind is a kind being watched: one informer for every namespace (key ""), or one per served
// namespace.
type servedKind struct {
	Kind
	informers map[string]cache.SharedIndexInformer
}

// watcher holds one leadership term's informers and queue.
type watcher struct {
	b     *Bridge
	queue workqueue.TypedRateLimitingInterface[key]
	// factories are the metadata informer factories by namespace ("" for all); full the dynamic ones of
	// the kinds that need more than metadata (Kind.Fingerprint).
	factories map[string]metadatainformer.SharedInformerFactory
	full      map[string]dynamicinformer.DynamicSharedInformerFactory
	mu        sync.RWMutex
	informers map[string]servedKind
}

// scope is the namespaces a kind is watched in: "" (all) for cluster-scoped kinds or when every
// namespace is served.
func (w *watcher) scope(k Kind) []string {
	if k.ClusterScoped || len(w.b.cfg.Namespaces) == 0 {
		return []string{""}
	}
	return w.b.cfg.Namespaces
}

// factory is the metadata informer factory of namespace ns ("" for all).
func (w *watcher) factory(ns string) metadatainformer.SharedInformerFactory {
	f, ok := w.factories[ns]
	if !ok {
		f = metadatainformer.NewFilteredSharedInformerFactory(w.b.meta, w.b.cfg.Resync, ns, w.filter)
		w.factories[ns] = f
	}
	return f
}

// fullFactory is the dynamic informer factory of namespace ns ("" for all).
func (w *watcher) fullFactory(ns string) dynamicinformer.DynamicSharedInformerFactory {
	f, ok := w.full[ns]
	if !ok {
		f = dynamicinformer.NewFilteredDynamicSharedInformerFactory(w.b.dyn, w.b.cfg.Resync, ns, w.filter)
		w.full[ns] = f
	}
	return f
}

// filter narrows every list and watch to the objects of the bridge's watch filter.
func (w *watcher) filter(o *metav1.ListOptions) {
	o.LabelSelector = WatchSelector(w.b.cfg.WatchFilter)
}

// WatchSelector is the label selector of the objects a bridge with watch filter value filter serves:
// those labelled with it, or with no filter, those without the label.
func WatchSelector(filter string) string {
	if filter == "" {
		return "!" + lifecycle.WatchFilterLabel
	}
	return lifecycle.WatchFilterLabel + "=" + filter
}

func (w *watcher) kind(name string) (servedKind, bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	sk, ok := w.informers[name]
	return sk, ok
}

// processNext handles one key; false once the queue is shut down.
func (w *watcher) processNext(ctx context.Context) bool {
	k, quit := w.queue.Get()
	if quit {
		return false
	}
	defer w.queue.Done(k)
	if err := w.b.process(ctx, w, k); err != nil {
		w.b.metrics.errors.WithLabelValues(k.kind).Inc()
		w.b.log.Warn("will retry", "kind", k.kind, "object", k.cacheKey(), "err", err)
		w.queue.AddRateLimited(k)
		return true
	}
	w.queue.Forget(k)
	return true
}

func (w *watcher) enqueue(kind string, obj any) {
	m, err := meta(obj)
	if err != nil {
		return
	}
	k := key{kind: kind, namespace: m.GetNamespace(), name: m.GetName()}
	w.b.mu.Lock()
	if _, ok := w.b.firstSeen[k]; !ok {
		w.b.firstSeen[k] = time.Now()
	}
	w.b.mu.Unlock()
	w.queue.Add(k)
}

// meta unwraps informer objects, including the tombstones of deletes seen late.
func meta(obj any) (metav1.Object, error) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("unexpected informer object %T", obj)
	}
	return m, nil
}

// slim keeps only the metadata the bridge decides on: ten thousand objects then cost a few megabytes.
func slim(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{ObjectMeta: slimMeta(&m.ObjectMeta)}, nil
}

func slimMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:              m.Name,
		Namespace:         m.Namespace,
		UID:               m.UID,
		ResourceVersion:   m.ResourceVersion,
		Generation:        m.Generation,
		DeletionTimestamp: m.DeletionTimestamp,
		Finalizers:        m.Finalizers,
	}
}

// liveFingerprint is a cache-only annotation: the fingerprint of the object as last seen, next to the
// derived generation and the fingerprint it was derived for. It is never written to the API server.
const liveFingerprint = "bridge.stackflow.io/live-fingerprint"

// slimFingerprinted is the transform of kinds watched in full (Kind.Fingerprint): the same slim
// metadata, plus the derived-generation annotations and the live fingerprint.
func slimFingerprinted(fp func(*unstructured.Unstructured) string) cache.TransformFunc {
	return func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		ann := u.GetAnnotations()
		meta := metav1.ObjectMeta{
			Name: u.GetName(), Namespace: u.GetNamespace(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion(),
			Generation: u.GetGeneration(), DeletionTimestamp: u.GetDeletionTimestamp(), Finalizers: u.GetFinalizers(),
		}
		meta.Annotations = map[string]string{liveFingerprint: fp(u)}
		for _, k := range []string{lifecycle.AnnotationGeneration, lifecycle.AnnotationFingerprint} {
			if v, ok := ann[k]; ok {
				meta.Annotations[k] = v
			}
		}
		return &metav1.PartialObjectMetadata{ObjectMeta: meta}, nil
	}
}
