package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/stackflow/stackflow/api/lifecycle"
)

// discover starts an informer for every configured kind the API server now offers. A kind whose resource
// is missing (CRD not installed) is logged once and looked for again later.
func (w *watcher) discover(ctx context.Context) {
	b := w.b
	var added []servedKind
	for _, k := range b.cfg.Kinds {
		if _, ok := w.kind(k.Kind); ok {
			continue
		}
		found, err := b.offered(k)
		if err != nil {
			if !b.missing[k.Kind] {
				b.log.Info("kind not served: not offered by the API server", "kind", k.Kind, "resource", k.GVR.String(), "reason", err)
				b.missing[k.Kind] = true
			}
			continue
		}
		kind := found.Kind
		sk := servedKind{Kind: found, informers: map[string]cache.SharedIndexInformer{}}
		ok := true
		for _, ns := range w.scope(found) {
			var inf cache.SharedIndexInformer
			var transform cache.TransformFunc = slim
			if found.Fingerprint != nil {
				inf, transform = w.fullFactory(ns).ForResource(found.GVR).Informer(), slimFingerprinted(found.Fingerprint)
			} else {
				inf = w.factory(ns).ForResource(found.GVR).Informer()
			}
			if err := inf.SetTransform(transform); err != nil {
				b.log.Error("informer transform", "kind", k.Kind, "err", err)
				ok = false
				break
			}
			_, err = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc: func(obj any) {
					b.metrics.events.WithLabelValues(kind, "add").Inc()
					w.enqueue(kind, obj)
				},
				UpdateFunc: func(_, obj any) {
					b.metrics.events.WithLabelValues(kind, "update").Inc()
					w.enqueue(kind, obj)
				},
				DeleteFunc: func(obj any) {
					b.metrics.events.WithLabelValues(kind, "delete").Inc()
					if m, err := meta(obj); err == nil {
						b.forget(m.GetUID())
						// Usually its workflow ended when its teardown dropped the finalizer; if someone
						// took the finalizer off by hand, the workflow would wait or poll for it forever.
						w.queue.Add(key{kind: kind, namespace: m.GetNamespace(), name: m.GetName(), uid: m.GetUID()})
					}
				},
			})
			if err != nil {
				b.log.Error("informer handler", "kind", k.Kind, "err", err)
				ok = false
				break
			}
			sk.informers[ns] = inf
		}
		if !ok {
			continue
		}
		w.mu.Lock()
		w.informers[k.Kind] = sk
		w.mu.Unlock()
		delete(b.missing, k.Kind)
		added = append(added, sk)
	}
	if len(added) == 0 {
		return
	}
	for _, f := range w.factories {
		f.Start(ctx.Done())
	}
	for _, f := range w.full {
		f.Start(ctx.Done())
	}
	for _, sk := range added {
		objects, synced := 0, true
		for _, inf := range sk.informers {
			synced = synced && cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
			objects += len(inf.GetStore().ListKeys())
		}
		if synced {
			b.log.Info("serving kind", "kind", sk.Kind.Kind, "resource", sk.GVR.String(), "clusterScoped", sk.ClusterScoped, "objects", objects)
		}
	}
	w.mu.RLock()
	b.metrics.served.Set(float64(len(w.informers)))
	w.mu.RUnlock()
}

// offered checks the kind against discovery and returns it with the scope the API server reports.
func (b *Bridge) offered(k Kind) (Kind, error) {
	list, err := b.core.Discovery().ServerResourcesForGroupVersion(k.GVR.GroupVersion().String())
	if err != nil {
		return k, err
	}
	for _, r := range list.APIResources {
		if r.Name != k.GVR.Resource {
			continue
		}
		if r.Kind != k.Kind {
			return k, fmt.Errorf("resource %s holds kind %s, not %s", k.GVR, r.Kind, k.Kind)
		}
		if r.Namespaced == k.ClusterScoped {
			b.log.Warn("kind scope differs from the table; using the API server's", "kind", k.Kind, "namespaced", r.Namespaced)
			k.ClusterScoped = !r.Namespaced
		}
		return k, nil
	}
	return k, fmt.Errorf("resource %s not found", k.GVR)
}

func (b *Bridge) forget(uid types.UID) {
	b.mu.Lock()
	delete(b.signalled, uid)
	b.mu.Unlock()
}

// process executes the plan for one object. Errors are retried by the queue with backoff.
func (b *Bridge) process(ctx context.Context, w *watcher, k key) error {
	b.mu.Lock()
	seen, queued := b.firstSeen[k]
	delete(b.firstSeen, k)
	b.mu.Unlock()
	requeued := false
	defer func() {
		// A failed attempt keeps the first sighting, so the latency metric covers the retries.
		if requeued && queued {
			b.mu.Lock()
			if _, ok := b.firstSeen[k]; !ok {
				b.firstSeen[k] = seen
			}
			b.mu.Unlock()
		}
	}()

	sk, ok := w.kind(k.kind)
	if !ok {
		return nil
	}
	if k.uid != "" {
		return b.gone(ctx, sk, k)
	}
	inf := sk.informers[""]
	if !sk.ClusterScoped && len(b.cfg.Namespaces) > 0 {
		inf = sk.informers[k.namespace]
	}
	if inf == nil {
		return nil
	}
	obj, exists, err := inf.GetIndexer().GetByKey(k.cacheKey())
	if err != nil || !exists {
		return nil // gone: its workflow already dropped the finalizer
	}
	m := obj.(*metav1.PartialObjectMetadata)
	ref := sk.Ref(m.Namespace, m.Name, string(m.UID))

	if sk.Fingerprint != nil {
		if next, bump := lifecycle.NextDerivedGeneration(m.Annotations, m.Annotations[liveFingerprint]); bump {
			// The object changed in what its workflow reads: record the next generation on it. The
			// update event of this write brings the object back here, to be signalled at it.
			if err := b.bumpGeneration(ctx, sk, m, next); err != nil && !apierrors.IsNotFound(err) {
				requeued = true
				return fmt.Errorf("derive generation %d of %s: %w", next, ref, err)
			}
			return nil
		}
	}
	b.mu.Lock()
	s := b.signalled[m.UID]
	b.mu.Unlock()
	plan := PlanFor(Observe(m), s, time.Now(), b.cfg.Redeliver)
	if plan.Empty() {
		return nil
	}
	if plan.AddFinalizer {
		if err := b.addFinalizer(ctx, sk, m); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			requeued = true
			return fmt.Errorf("add finalizer to %s: %w", ref, err)
		}
	}
	if plan.Signal == "" {
		return nil
	}
	res, err := b.signal(ctx, ref, plan)
	if err != nil {
		var closed *workflowClosedError
		if errors.As(err, &closed) {
			// Retrying cannot help: a person has to look. Remember it so resyncs stay quiet.
			b.remember(m.UID, plan)
			b.events.warn(ref, ReasonWorkflowClosed, closed.Error())
			return nil
		}
		requeued = true
		return fmt.Errorf("signal %s to %s: %w", plan.Signal, ref, err)
	}
	b.remember(m.UID, plan)
	if queued {
		b.metrics.latency.WithLabelValues(ref.Kind).Observe(time.Since(seen).Seconds())
	}
	b.events.signalled(ref, plan, res)
	return nil
}

func (b *Bridge) remember(uid types.UID, p Plan) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.signalled[uid]
	switch p.Signal {
	case lifecycle.SignalSpec:
		s.Generation = p.Generation
	case lifecycle.SignalDelete:
		s.DeleteAt = time.Now()
	}
	b.signalled[uid] = s
}

// addFinalizer adds lifecycle.Finalizer with a merge patch that carries the cached resourceVersion: if the
// cache is stale the API server answers Conflict and the key is retried on fresh data, so finalizers
// written by others meanwhile are never lost.
func (b *Bridge) addFinalizer(ctx context.Context, sk servedKind, m *metav1.PartialObjectMetadata) error {
	patch, err := finalizerPatch(m.Finalizers, m.ResourceVersion)
	if err != nil {
		return err
	}
	t0 := time.Now()
	err = b.patchMeta(ctx, sk, m, patch)
	b.metrics.patch.WithLabelValues(sk.Kind.Kind).Observe(time.Since(t0).Seconds())
	return err
}

// bumpGeneration writes a derived generation and the fingerprint it stands for, with the cached
// resourceVersion: a stale cache gets Conflict and the key is retried on fresh data.
func (b *Bridge) bumpGeneration(ctx context.Context, sk servedKind, m *metav1.PartialObjectMetadata, next int64) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": m.ResourceVersion,
		"annotations": map[string]string{
			lifecycle.AnnotationGeneration:  strconv.FormatInt(next, 10),
			lifecycle.AnnotationFingerprint: m.Annotations[liveFingerprint],
		},
	}})
	if err != nil {
		return err
	}
	return b.patchMeta(ctx, sk, m, patch)
}

// patchMeta applies a merge patch to an object's metadata as the bridge's field manager.
func (b *Bridge) patchMeta(ctx context.Context, sk servedKind, m *metav1.PartialObjectMetadata, patch []byte) error {
	var ri interface {
		Patch(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (*metav1.PartialObjectMetadata, error)
	} = b.meta.Resource(sk.GVR)
	if !sk.ClusterScoped {
		ri = b.meta.Resource(sk.GVR).Namespace(m.Namespace)
	}
	_, err := ri.Patch(ctx, m.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "stackflow-bridge"})
	return err
}

// finalizerPatch is the merge patch that appends lifecycle.Finalizer to finalizers at resourceVersion rv.
func finalizerPatch(finalizers []string, rv string) ([]byte, error) {
	type meta struct {
		Finalizers      []string `json:"finalizers"`
		ResourceVersion string   `json:"resourceVersion"`
	}
	all := append(append([]string(nil), finalizers...), lifecycle.Finalizer)
	return json.Marshal(struct {
		Metadata meta `json:"metadata"`
	}{meta{Finalizers: all, ResourceVersion: rv}})
}
