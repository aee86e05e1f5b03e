package bridge

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stackflow/stackflow/api/lifecycle"
)

// proc is a stackflow binary running as a child process of the test.
type proc struct {
	t       *testing.T
	name    string
	argv    []string
	log     string
	metrics string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// startProc starts binary with args (plus --metrics-address on a free loopback port) and stops it when
// the test ends; its log is printed if the test failed.
func startProc(t *testing.T, name, binary string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, metrics: freeAddr(t), log: filepath.Join(t.TempDir(), name+".log")}
	p.argv = append([]string{filepath.Join(bin, binary), "--metrics-address", p.metrics}, args...)
	p.start()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("--- %s log (tail) ---\n%s", name, p.tail(60))
		}
	})
	return p
}

func (p *proc) start() {
	p.t.Helper()
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(p.t, err)
	defer logf.Close()
	fmt.Fprintf(logf, "=== %s start\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	// The kubeconfig goes by environment, so no process outlives the stack with its path on the command line.
	cmd.Env = append(os.Environ(), "KUBECONFIG="+st.Kubeconfig)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(p.t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	require.Eventually(p.t, func() bool {
		resp, err := http.Get("http://" + p.metrics + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	}, 30*time.Second, 100*time.Millisecond, "%s did not serve /healthz:\n%s", p.name, p.tail(30))
}

// kill9 crashes the process: no shutdown code runs, no lease is released.
func (p *proc) kill9() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-exited
	p.t.Logf("%s: killed with SIGKILL (pid %d)", p.name, cmd.Process.Pid)
}

// stop asks the process to shut down (SIGTERM) and kills it if it does not within 40 s.
func (p *proc) stop() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-exited:
		return
	default:
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(40 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
}

func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

func (p *proc) tail(n int) string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// metric sums the samples of a metric whose labels contain every given name="value" pair.
func (p *proc) metric(name string, labels ...string) (float64, error) {
	resp, err := http.Get("http://" + p.metrics + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return sumMetric(resp.Body, name, labels...)
}

func sumMetric(r io.Reader, name string, labels ...string) (float64, error) {
	var sum float64
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || len(line) == len(name) || (line[len(name)] != '{' && line[len(name)] != ' ') {
			continue
		}
		ok := true
		for i := 0; i+1 < len(labels); i += 2 {
			if !strings.Contains(line, labels[i]+`="`+labels[i+1]+`"`) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("metric line %q: %w", line, err)
		}
		sum += v
	}
	return sum, sc.Err()
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// bridgeOptions tune one bridge replica for tests: short leases so a takeover is quick.
func startBridge(t *testing.T, identity, lease string) *proc {
	return startProc(t, identity, "stackflow-bridge",
		"--temporal-address", st.TemporalAddress,
		"--namespace", temporalNamespace,
		"--kinds", "Node,OpenstackNode",
		"--identity", identity,
		"--leader-election-name", lease,
		"--lease-duration", "6s", "--renew-deadline", "4s", "--retry-period", "1s",
		"--workers", "8",
	)
}

func startWorker(t *testing.T, identity string) *proc {
	return startProc(t, identity, "stackflow-worker",
		"--temporal-address", st.TemporalAddress,
		"--namespace", temporalNamespace,
		"--temporal-ui", st.TemporalUI,
		"--identity", identity,
		"--stop-timeout", "5s",
	)
}

var (
	osknodes = schema.GroupVersionResource{Group: "kupenstack.io", Version: "v1alpha1", Resource: "openstacknodes"}
	nodes    = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
)

func newOpenstackNode(name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kupenstack.io/v1alpha1",
		"kind":       "OpenstackNode",
		"metadata":   map[string]any{"name": name, "labels": map[string]any{"stackflow.io/test-run": run}},
		"spec":       spec,
	}}
	return u
}

// ref is the ObjectRef the bridge derives for an object of kind served at gvr.
func ref(kind string, gvr schema.GroupVersionResource, u *unstructured.Unstructured) lifecycle.ObjectRef {
	return lifecycle.ObjectRef{Group: gvr.Group, Version: gvr.Version, Kind: kind, Resource: gvr.Resource,
		Namespace: u.GetNamespace(), Name: u.GetName(), UID: string(u.GetUID())}
}

// executions lists every run (open or closed) whose workflow ID starts with prefix, by workflow ID.
func executions(ctx context.Context, prefix string) (map[string][]string, error) {
	out := map[string][]string{}
	var token []byte
	for {
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace:     temporalNamespace,
			Query:         fmt.Sprintf("WorkflowId STARTS_WITH %q", prefix),
			PageSize:      1000,
			NextPageToken: token,
		})
		if err != nil {
			return nil, err
		}
		for _, e := range resp.Executions {
			out[e.Execution.WorkflowId] = append(out[e.Execution.WorkflowId], e.Execution.RunId)
		}
		token = resp.NextPageToken
		if len(token) == 0 {
			return out, nil
		}
	}
}

// workflowStatus describes the object's workflow's current run.
func workflowStatus(ctx context.Context, id string) (enumspb.WorkflowExecutionStatus, error) {
	d, err := tc.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return 0, err
	}
	return d.WorkflowExecutionInfo.Status, nil
}

// deleteAndWait deletes objects and waits until they are gone: their workflows removed the finalizer.
func deleteAndWait(t *testing.T, gvr schema.GroupVersionResource, names []string, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	r := dyn.Resource(gvr)
	for _, n := range names {
		err := r.Delete(ctx, n, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			require.NoError(t, err, "delete %s", n)
		}
	}
	for _, n := range names {
		for {
			_, err := r.Get(ctx, n, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("%s %s still exists after %s (finalizer not removed by its workflow)", gvr.Resource, n, timeout)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// forceDelete removes objects left by a failed test, finalizers included, so later runs start clean.
func forceDelete(gvr schema.GroupVersionResource, names []string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := dyn.Resource(gvr)
	for _, n := range names {
		_ = r.Delete(ctx, n, metav1.DeleteOptions{})
		_, _ = r.Patch(ctx, n, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	}
}
