package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// FieldManager is the server-side apply field manager of everything the local stack applies.
const FieldManager = "stackflow-local"

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// ApplyManifests server-side applies (field manager FieldManager, forcing conflicts) every object of the
// multi-document YAML files given; a directory stands for its *.yaml and *.yml files in name order.
// Namespaces and CustomResourceDefinitions go first and the CRDs must become Established before the
// other objects, which are applied in file order; namespaced objects without a namespace go to
// "default".
func (s *Stack) ApplyManifests(ctx context.Context, paths ...string) error {
	_, err := s.ApplyManifestObjects(ctx, paths...)
	return err
}

// Applied names an object ApplyManifestObjects applied.
type Applied struct {
	Kind      string
	GVR       schema.GroupVersionResource
	Namespace string
	Name      string
}

// ApplyManifestObjects is ApplyManifests, returning what it applied, in order.
func (s *Stack) ApplyManifestObjects(ctx context.Context, paths ...string) ([]Applied, error) {
	var objs []*unstructured.Unstructured
	for _, p := range paths {
		files, err := manifestFiles(p)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			o, err := readManifests(f)
			if err != nil {
				return nil, err
			}
			objs = append(objs, o...)
		}
	}
	if len(objs) == 0 {
		return nil, nil
	}
	cfg, err := s.KubeREST()
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	a := &applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))}

	first := func(o *unstructured.Unstructured) bool {
		gk := o.GroupVersionKind().GroupKind()
		return gk == schema.GroupKind{Kind: "Namespace"} || gk == schema.GroupKind{Group: crdGVR.Group, Kind: "CustomResourceDefinition"}
	}
	var crds []string
	var applied []Applied
	for _, o := range objs {
		if !first(o) {
			continue
		}
		if _, err := a.apply(ctx, o); err != nil {
			return nil, err
		}
		if o.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, o.GetName())
		}
	}
	for _, name := range crds {
		if err := a.waitEstablished(ctx, name); err != nil {
			return nil, err
		}
	}
	if len(crds) > 0 {
		a.mapper.Reset()
	}
	for _, o := range objs {
		if first(o) {
			continue
		}
		gvr, err := a.apply(ctx, o)
		if err != nil {
			return nil, err
		}
		applied = append(applied, Applied{Kind: o.GetKind(), GVR: gvr, Namespace: o.GetNamespace(), Name: o.GetName()})
	}
	s.Logf("kubernetes: applied %d objects (%d CRDs) from %s", len(objs), len(crds), strings.Join(shortPaths(s.RepoRoot, paths), ", "))
	return applied, nil
}

type applier struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

// apply server-side applies one object and returns its resource. A kind the API server does not serve yet (a CRD applied by
// someone else a moment ago) is retried with fresh discovery for a short while.
func (a *applier) apply(ctx context.Context, o *unstructured.Unstructured) (schema.GroupVersionResource, error) {
	gvk := o.GroupVersionKind()
	what := fmt.Sprintf("%s %s", gvk.Kind, o.GetName())
	if o.GetNamespace() != "" {
		what = fmt.Sprintf("%s %s/%s", gvk.Kind, o.GetNamespace(), o.GetName())
	}
	var mapping *meta.RESTMapping
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		mapping, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err == nil {
			break
		}
		if !meta.IsNoMatchError(err) || time.Now().After(deadline) {
			return schema.GroupVersionResource{}, fmt.Errorf("apply %s: map %s: %w", what, gvk, err)
		}
		a.mapper.Reset()
		select {
		case <-ctx.Done():
			return schema.GroupVersionResource{}, fmt.Errorf("apply %s: %w", what, ctx.Err())
		case <-time.After(time.Second):
		}
	}
	var ri dynamic.ResourceInterface = a.dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if o.GetNamespace() == "" {
			o.SetNamespace("default")
		}
		ri = a.dyn.Resource(mapping.Resource).Namespace(o.GetNamespace())
	} else {
		o.SetNamespace("")
	}
	if _, err := ri.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
		return schema.GroupVersionResource{}, fmt.Errorf("apply %s: %w", what, err)
	}
	return mapping.Resource, nil
}

// waitEstablished waits until the CRD's Established condition is True, i.e. its API is served.
func (a *applier) waitEstablished(ctx context.Context, name string) error {
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var last error
	for {
		crd, err := a.dyn.Resource(crdGVR).Get(wctx, name, metav1.GetOptions{})
		if err == nil {
			if established(crd) {
				return nil
			}
			err = errors.New("not Established yet")
		}
		last = err
		select {
		case <-wctx.Done():
			return fmt.Errorf("CRD %s: %w (last: %v)", name, wctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// manifestFiles expands a path: a file is itself, a directory its *.yaml and *.yml files in name order.
func manifestFiles(p string) ([]string, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("manifests %s: %w", p, err)
	}
	if !fi.IsDir() {
		return []string{p}, nil
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		return nil, fmt.Errorf("manifests %s: %w", p, err)
	}
	var files []string
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if !e.IsDir() && (ext == ".yaml" || ext == ".yml") {
			files = append(files, filepath.Join(p, e.Name()))
		}
	}
	slices.Sort(files)
	return files, nil
}

// readManifests decodes every object of a multi-document YAML (or JSON) file; empty documents are
// skipped and a List contributes its items.
func readManifests(file string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read manifests %s: %w", file, err)
	}
	objs, err := decodeManifests(b)
	if err != nil {
		return nil, fmt.Errorf("decode manifests %s: %w", file, err)
	}
	return objs, nil
}

func decodeManifests(b []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for i := 1; ; i++ {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(m) == 0 {
			continue
		}
		o := &unstructured.Unstructured{Object: m}
		items := []*unstructured.Unstructured{o}
		if o.IsList() {
			l, err := o.ToList()
			if err != nil {
				return nil, fmt.Errorf("document %d: %w", i, err)
			}
			items = items[:0]
			for j := range l.Items {
				items = append(items, &l.Items[j])
			}
		}
		for _, it := range items {
			if it.GetAPIVersion() == "" || it.GetKind() == "" || it.GetName() == "" {
				return nil, fmt.Errorf("document %d: apiVersion, kind and metadata.name (a string) are required", i)
			}
		}
		out = append(out, items...)
	}
}

func shortPaths(root string, paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		if r, err := filepath.Rel(root, p); err == nil && !strings.HasPrefix(r, "..") {
			p = r
		} else {
			p = filepath.Base(p)
		}
		out[i] = p
	}
	return out
}
