package local

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/stackflow/stackflow/api/lifecycle"
)

// SamplesDir is where the samples `make run` applies live, relative to the repository root;
// Day2SamplesDir holds what a user applies to that cloud afterwards (the data-plane update).
const (
	SamplesDir     = "deploy/samples"
	Day2SamplesDir = "deploy/samples/day2"
)

// ApplySamples server-side applies every object of deploy/samples and returns them in order.
func (s *Stack) ApplySamples(ctx context.Context) ([]Applied, error) {
	return s.ApplyManifestObjects(ctx, filepath.Join(s.RepoRoot, SamplesDir))
}

// SampleObjects names the objects of deploy/samples, in order, without applying them.
func (s *Stack) SampleObjects(ctx context.Context) ([]Applied, error) {
	return s.ManifestObjects(ctx, filepath.Join(s.RepoRoot, SamplesDir))
}

// AllSampleObjects names the objects of deploy/samples and deploy/samples/day2: what `make run` and a
// user following the README may have applied.
func (s *Stack) AllSampleObjects(ctx context.Context) ([]Applied, error) {
	return s.ManifestObjects(ctx, filepath.Join(s.RepoRoot, SamplesDir), filepath.Join(s.RepoRoot, Day2SamplesDir))
}

// ManifestObjects names the objects of the manifests under paths (files, or directories' *.yaml), in
// order, without applying them.
func (s *Stack) ManifestObjects(ctx context.Context, paths ...string) ([]Applied, error) {
	var files []string
	for _, p := range paths {
		f, err := manifestFiles(p)
		if err != nil {
			return nil, err
		}
		files = append(files, f...)
	}
	cfg, err := s.KubeREST()
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	var out []Applied
	for _, f := range files {
		objs, err := readManifests(f)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			gvk := o.GroupVersionKind()
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				return nil, fmt.Errorf("%s: %s %s: %w", f, gvk.Kind, o.GetName(), err)
			}
			ns := o.GetNamespace()
			if m.Scope.Name() == meta.RESTScopeNameNamespace && ns == "" {
				ns = "default"
			}
			out = append(out, Applied{Kind: gvk.Kind, GVR: m.Resource, Namespace: ns, Name: o.GetName()})
		}
	}
	return out, nil
}

// SampleState is one object's state as `make run` shows it.
type SampleState struct {
	Applied
	// Exists is false once the object is gone.
	Exists bool
	// Unserved is true for kinds stackflow has no workflow for yet (API only): nothing will make them
	// Ready, and nothing waits for them.
	Unserved bool
	// Served is true once the bridge took the object on (it carries stackflow's finalizer).
	Served bool
	// UID is the object's UID while it exists.
	UID string
	// Ready is the Ready condition's status for the object's current generation ("" while none).
	Ready   string
	Phase   string
	Step    string
	Message string
}

// Settled is true when the object is Ready for its current generation, or of a kind not served.
func (st SampleState) Settled() bool {
	return st.Unserved || st.Exists && st.Ready == string(metav1.ConditionTrue)
}

// SampleStates reads the state of the objects applied; served says which kinds stackflow serves.
func SampleStates(ctx context.Context, dyn dynamic.Interface, objs []Applied, served func(kind string) bool) ([]SampleState, error) {
	out := make([]SampleState, 0, len(objs))
	for _, o := range objs {
		st := SampleState{Applied: o, Unserved: !served(o.Kind)}
		u, err := sampleResource(dyn, o).Get(ctx, o.Name, metav1.GetOptions{})
		switch {
		case err == nil:
			st.Exists = true
			st.UID = string(u.GetUID())
			fillSampleState(&st, u)
		case apierrors.IsNotFound(err):
		default:
			return nil, fmt.Errorf("read %s %s: %w", o.Kind, o.Name, err)
		}
		out = append(out, st)
	}
	return out, nil
}

func fillSampleState(st *SampleState, u *unstructured.Unstructured) {
	st.Served = slices.Contains(u.GetFinalizers(), lifecycle.Finalizer)
	st.Phase, _, _ = unstructured.NestedString(u.Object, "status", "phase")
	st.Step, _, _ = unstructured.NestedString(u.Object, "status", "currentStep")
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != lifecycle.ConditionReady {
			continue
		}
		status, _ := m["status"].(string)
		st.Message, _ = m["message"].(string)
		// Ready for an older generation is not Ready yet.
		if status == string(metav1.ConditionTrue) && observed < lifecycle.EffectiveGeneration(u.GetGeneration(), u.GetAnnotations()) {
			status = string(metav1.ConditionUnknown)
		}
		st.Ready = status
	}
}

// WriteSampleStates prints states as a table: KIND NAME READY PHASE DETAIL.
func WriteSampleStates(w io.Writer, states []SampleState) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAME\tREADY\tPHASE\tDETAIL")
	for _, st := range states {
		name := st.Name
		if st.Namespace != "" {
			name = st.Namespace + "/" + st.Name
		}
		ready, phase, detail := firstNonEmpty(st.Ready, "-"), firstNonEmpty(st.Phase, "-"), st.Step
		switch {
		case !st.Exists:
			ready, phase, detail = "-", "Gone", ""
		case st.Unserved:
			detail = "API only: no workflow serves this kind yet"
		case !st.Served:
			detail = "waiting for the bridge"
		case st.Ready != string(metav1.ConditionTrue) && st.Message != "":
			detail = st.Message
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", st.Kind, name, ready, phase, truncate(detail, 90))
	}
	_ = tw.Flush()
}

// PresentSamples are the objects of objs that exist.
func PresentSamples(ctx context.Context, dyn dynamic.Interface, objs []Applied) ([]Applied, error) {
	states, err := SampleStates(ctx, dyn, objs, func(string) bool { return true })
	if err != nil {
		return nil, err
	}
	var out []Applied
	for _, st := range states {
		if st.Exists {
			out = append(out, st.Applied)
		}
	}
	return out, nil
}

// DeleteSamples deletes the objects all at once, as `kubectl delete -f` does, and waits until every one
// is gone: their workflows tear down what they made and remove their finalizers, so a worker and a bridge
// must serve them meanwhile. An object stackflow creates anew once deleted (the OpenstackNode of a
// Kubernetes Node, spec-less) counts as gone once its UID changed. The table is printed to w whenever it
// changes.
func DeleteSamples(ctx context.Context, dyn dynamic.Interface, objs []Applied, w io.Writer, interval time.Duration) error {
	before, err := SampleStates(ctx, dyn, objs, func(string) bool { return true })
	if err != nil {
		return err
	}
	deleted := map[Applied]string{}
	for _, st := range before {
		if !st.Exists {
			continue
		}
		uid := types.UID(st.UID)
		err := sampleResource(dyn, st.Applied).Delete(ctx, st.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete %s %s: %w", st.Kind, st.Name, err)
		}
		deleted[st.Applied] = st.UID
	}
	var last string
	for {
		states, err := SampleStates(ctx, dyn, objs, func(string) bool { return true })
		if err == nil {
			var left []SampleState
			for _, st := range states {
				if st.Exists && st.UID == deleted[st.Applied] {
					left = append(left, st)
				}
			}
			if len(left) == 0 {
				return nil
			}
			if w != nil {
				var b strings.Builder
				WriteSampleStates(&b, left)
				if b.String() != last {
					fmt.Fprintf(w, "\n[%s] %d left\n%s", time.Now().Format("15:04:05"), len(left), b.String())
					last = b.String()
				}
			}
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			return fmt.Errorf("samples not all torn down: %w", err)
		case <-time.After(interval):
		}
	}
}

func sampleResource(dyn dynamic.Interface, o Applied) dynamic.ResourceInterface {
	if o.Namespace == "" {
		return dyn.Resource(o.GVR)
	}
	return dyn.Resource(o.GVR).Namespace(o.Namespace)
}

// LastingFailure is how long a sample stays Failed, read after read, before WaitSamples stops waiting
// for it: longer than the first automatic retries take, so only a failure that needs a person (a bad
// spec, a retry signal) or keeps coming back ends the wait.
const LastingFailure = 3 * time.Minute

// WaitSamples polls the objects until every one of a served kind is Ready for its current generation, printing the
// table to w whenever it changes (nil w prints nothing), or until one has been Failed for LastingFailure.
// It returns the last states either way.
func WaitSamples(ctx context.Context, dyn dynamic.Interface, objs []Applied, served func(kind string) bool, w io.Writer, interval time.Duration) ([]SampleState, error) {
	var last string
	failedSince := map[Applied]time.Time{}
	for {
		states, err := SampleStates(ctx, dyn, objs, served)
		if err == nil {
			if st, ok := lastingFailure(states, failedSince, time.Now()); ok {
				return states, fmt.Errorf("samples not all Ready: %s %s has been Failed for %s: %s", st.Kind, st.Name, LastingFailure, st.Message)
			}
			if w != nil {
				var b strings.Builder
				WriteSampleStates(&b, states)
				if b.String() != last {
					fmt.Fprintf(w, "\n[%s]\n%s", time.Now().Format("15:04:05"), b.String())
					last = b.String()
				}
			}
			if !slices.ContainsFunc(states, func(st SampleState) bool { return !st.Settled() }) {
				return states, nil
			}
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			return states, fmt.Errorf("samples not all Ready: %w", err)
		case <-time.After(interval):
		}
	}
}

// lastingFailure notes in failedSince when each sample was first read Failed (forgetting those that are
// not) and returns one Failed for LastingFailure at now.
func lastingFailure(states []SampleState, failedSince map[Applied]time.Time, now time.Time) (SampleState, bool) {
	for _, st := range states {
		if st.Phase != lifecycle.PhaseFailed {
			delete(failedSince, st.Applied)
			continue
		}
		since, ok := failedSince[st.Applied]
		if !ok {
			failedSince[st.Applied] = now
		} else if now.Sub(since) >= LastingFailure {
			return st, true
		}
	}
	return SampleState{}, false
}

func truncate(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
