// Package apitest proves stackflow's API at admission against the real local API server: every CRD is
// served and documented, every sample is accepted, and malformed objects are refused with a message
// that names the offending field.
package apitest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/stackflow/stackflow/api"
	"github.com/stackflow/stackflow/deploy/local"
)

// The stack and clients shared by the package's tests.
var (
	st      *local.Stack
	dyn     dynamic.Interface
	kube    kubernetes.Interface
	apiext  apiextclient.Interface
	testNS  string
	samples map[string]*unstructured.Unstructured // by kind
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	s, err := local.Up(ctx, local.Options{Components: []string{local.Kubernetes}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "local stack:", err)
		return 1
	}
	st = s
	if err := connect(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	samples, err = readSamples(filepath.Join(st.RepoRoot, "deploy", "samples"), filepath.Join(st.RepoRoot, "deploy", "samples", "day2"), filepath.Join(st.RepoRoot, "tests", "api", "testdata"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Every run gets its own namespace, so runs (and `make run`'s samples) never collide.
	testNS = "apitest-" + randomSuffix()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS}}, metav1.CreateOptions{}); err != nil {
		fmt.Fprintf(os.Stderr, "create namespace %s: %v\n", testNS, err)
		return 1
	}
	code := m.Run()
	cleanup(context.Background())
	return code
}

func connect() error {
	cfg, err := st.KubeREST()
	if err != nil {
		return err
	}
	if dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	if kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	if apiext, err = apiextclient.NewForConfig(cfg); err != nil {
		return fmt.Errorf("apiextensions client: %w", err)
	}
	return nil
}

// cleanup deletes the test namespace and the cluster-scoped objects the tests created (labelled).
func cleanup(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_ = kube.CoreV1().Namespaces().Delete(ctx, testNS, metav1.DeleteOptions{})
	for _, k := range api.Kinds {
		if k.ClusterScoped {
			_ = dyn.Resource(k.GVR()).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: testLabel + "=" + testNS})
		}
	}
}

// testLabel marks the cluster-scoped objects a run creates, for cleanup.
const testLabel = "stackflow.io/apitest"

func randomSuffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// readSamples decodes an example object per kind: the first of each kind in deploy/samples (what
// `make run` applies), else in deploy/samples/day2 (what a user applies to make run's cloud: the
// data-plane update), else in tests/api/testdata (the Nova service CRs on their own).
func readSamples(dirs ...string) (map[string]*unstructured.Unstructured, error) {
	out := map[string]*unstructured.Unstructured{}
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
			for {
				var obj map[string]any
				if err := dec.Decode(&obj); err == io.EOF {
					break
				} else if err != nil {
					return nil, fmt.Errorf("decode %s: %w", f, err)
				}
				if obj == nil {
					continue
				}
				u := &unstructured.Unstructured{Object: obj}
				if _, seen := out[u.GetKind()]; !seen {
					out[u.GetKind()] = u
				}
			}
		}
	}
	return out, nil
}

// kindInfo returns the api.Kinds entry of a kind.
func kindInfo(t *testing.T, kind string) api.Kind {
	t.Helper()
	for _, k := range api.Kinds {
		if k.GVK.Kind == kind {
			return k
		}
	}
	t.Fatalf("unknown kind %s", kind)
	return api.Kind{}
}

// resource returns the dynamic client of a kind, namespaced to the test namespace unless cluster scoped.
func resource(t *testing.T, kind string) dynamic.ResourceInterface {
	k := kindInfo(t, kind)
	if k.ClusterScoped {
		return dyn.Resource(k.GVR())
	}
	return dyn.Resource(k.GVR()).Namespace(testNS)
}

// sample returns a copy of the kind's sample, renamed and moved into the test namespace (cluster-scoped
// objects get the test label, and a name unique to the run).
func sample(t *testing.T, kind, name string) *unstructured.Unstructured {
	t.Helper()
	s, ok := samples[kind]
	if !ok {
		t.Fatalf("no example of kind %s in deploy/samples or tests/api/testdata", kind)
	}
	u := s.DeepCopy()
	if kindInfo(t, kind).ClusterScoped {
		u.SetName(testNS + "-" + name)
		labels := u.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[testLabel] = testNS
		u.SetLabels(labels)
	} else {
		u.SetName(name)
		u.SetNamespace(testNS)
	}
	return u
}

// mergePatch applies a JSON merge patch (RFC 7386) to obj in place: objects merge key by key, null
// deletes, anything else replaces.
func mergePatch(obj, patch map[string]any) {
	for k, v := range patch {
		switch pv := v.(type) {
		case nil:
			delete(obj, k)
		case map[string]any:
			cur, ok := obj[k].(map[string]any)
			if !ok {
				cur = map[string]any{}
				obj[k] = cur
			}
			mergePatch(cur, pv)
		default:
			obj[k] = pv
		}
	}
}

func unstructuredOf(m map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: m}
}
