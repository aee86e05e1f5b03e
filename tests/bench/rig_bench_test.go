package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/tests/e2e"
)

var (
	gvrRole = schema.GroupVersionResource{Group: "dataplane.openstack.org", Version: "v1beta1", Resource: "openstackdataplaneroles"}
	gvrNode = schema.GroupVersionResource{Group: "dataplane.openstack.org", Version: "v1beta1", Resource: "openstackdataplanenodes"}
	gvrDP   = schema.GroupVersionResource{Group: "dataplane.openstack.org", Version: "v1beta1", Resource: "openstackdataplanes"}
)

// edpmRig is what the data-plane benchmarks share: the stack with hosts test hosts, this checkout's
// stackflow binaries (and the simulated Ansible worker), a namespace of the run holding the SSH key
// Secret, clients, and the processes and objects to remove at the end.
type edpmRig struct {
	b       *testing.B
	st      *local.Stack
	dir     string
	kc      kubernetes.Interface
	dyn     dynamic.Interface
	tc      client.Client
	run, ns string
	created []createdObject
	procs   []*benchProc
}

// createdObject is an object the benchmark created.
type createdObject struct {
	gvr  schema.GroupVersionResource
	name string
}

func edpmRigUp(ctx context.Context, b *testing.B, hosts int, prefix string) *edpmRig {
	st, err := local.Up(ctx, local.Options{Components: []string{local.Kubernetes, local.Temporal, local.OpenStack, local.Hosts}, HostCount: hosts})
	if err != nil {
		b.Fatal(err)
	}
	if len(st.TestHosts) < hosts {
		b.Fatalf("the stack has %d test hosts, %d wanted", len(st.TestHosts), hosts)
	}
	r := &edpmRig{b: b, st: st, dir: b.TempDir()}
	for _, pkg := range []string{"./bridge/cmd/stackflow-bridge", "./worker/cmd/stackflow-worker", "./tests/bench/simansible"} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", r.dir+string(filepath.Separator), pkg)
		cmd.Dir, cmd.Stdout, cmd.Stderr = st.RepoRoot, os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			b.Fatalf("build %s: %v", pkg, err)
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", st.Kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	r.kc, r.dyn = kubernetes.NewForConfigOrDie(cfg), dynamic.NewForConfigOrDie(cfg)
	if err := e2e.EnsureTemporalNamespace(ctx, st, edpmBenchNamespace); err != nil {
		b.Fatal(err)
	}
	if r.tc, err = e2e.Dial(ctx, st, edpmBenchNamespace); err != nil {
		b.Fatal(err)
	}
	copts, err := st.TemporalOptions(edpmBenchNamespace).ClientOptions()
	if err != nil {
		b.Fatal(err)
	}
	if copts.DataConverter != nil {
		edpmBenchDC = copts.DataConverter
	}
	r.run = fmt.Sprintf("%s%05x", prefix, time.Now().UnixNano()&0xfffff)
	r.ns = "edpm-" + r.run
	if _, err := r.kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	key, err := r.kc.CoreV1().Secrets(local.SystemNamespace).Get(ctx, "edpm-ssh-key", metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := r.kc.CoreV1().Secrets(r.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "edpm-ssh-key"}, Data: key.Data}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	return r
}

// close deletes what the benchmark created (its workflows still running, so their teardowns run), then
// stops the processes and removes the namespace.
func (r *edpmRig) close() {
	r.deleteCreated()
	r.waitWorkflowsClosed(2 * time.Minute)
	for i := len(r.procs) - 1; i >= 0; i-- {
		r.procs[i].stop()
	}
	_ = r.kc.CoreV1().Namespaces().Delete(context.Background(), r.ns, metav1.DeleteOptions{})
	r.tc.Close()
}

// waitWorkflowsClosed waits until no workflow of the run's objects is open: an object is gone once its
// workflow removed the finalizer, one workflow task before that workflow completes, and stopping the
// workers in between leaves it running in the benchmark's namespace.
func (r *edpmRig) waitWorkflowsClosed(timeout time.Duration) {
	q := fmt.Sprintf(`ExecutionStatus = "Running" AND StackflowObject STARTS_WITH "%s/"`, r.ns)
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := r.tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: edpmBenchNamespace, Query: q})
		cancel()
		if err == nil && resp.Count == 0 {
			return
		}
		if time.Now().After(deadline) {
			fmt.Printf("  %s: workflows of the run still open after %s (count %d, %v)\n", r.ns, timeout, resp.GetCount(), err)
			return
		}
		time.Sleep(time.Second)
	}
}

// deleteCreated deletes the objects created so far, all at once as a person would (each workflow waits
// for what must go first), and waits until every one is gone.
func (r *edpmRig) deleteCreated() {
	ctx := context.Background()
	for i := len(r.created) - 1; i >= 0; i-- {
		o := r.created[i]
		_ = r.dyn.Resource(o.gvr).Namespace(r.ns).Delete(ctx, o.name, metav1.DeleteOptions{})
	}
	for i := len(r.created) - 1; i >= 0; i-- {
		edpmBenchDelete(r.dyn, r.created[i].gvr, r.ns, r.created[i].name)
	}
	r.created = nil
}

// mk creates an object in the run's namespace; deleteCreated removes it.
func (r *edpmRig) mk(gvr schema.GroupVersionResource, obj map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: obj}
	u.SetNamespace(r.ns)
	out, err := r.dyn.Resource(gvr).Namespace(r.ns).Create(context.Background(), u, metav1.CreateOptions{})
	if err != nil {
		r.b.Fatalf("create %s: %v", u.GetName(), err)
	}
	r.created = append(r.created, createdObject{gvr: gvr, name: out.GetName()})
	return out
}

// start runs one of the rig's binaries against the benchmark's Temporal namespace; close stops it.
func (r *edpmRig) start(binary string, args ...string) (*benchProc, error) {
	p, err := startBenchProc(r.st, filepath.Join(r.dir, binary), filepath.Join(r.dir, binary+".log"), args...)
	if err == nil {
		r.procs = append(r.procs, p)
	}
	return p, err
}

// startBridge runs a bridge for the data-plane kinds.
func (r *edpmRig) startBridge() (*benchProc, error) {
	return r.start("stackflow-bridge", "--namespace", edpmBenchNamespace, "--identity", r.run+"-bridge",
		"--kinds", "OpenStackDataPlane,OpenStackDataPlaneRole,OpenStackDataPlaneNode,NovaExternalCompute,OVNMetadataAgent",
		"--leader-election-name", r.run+"-bridge")
}

// benchProc is a running benchmark process.
type benchProc struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// startBenchProc starts a binary with a free metrics port and waits until it is healthy.
func startBenchProc(st *local.Stack, path, log string, args ...string) (*benchProc, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	metrics := ln.Addr().String()
	ln.Close()
	f, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, append([]string{"--metrics-address", metrics}, args...)...)
	cmd.Env = append(append(os.Environ(), "KUBECONFIG="+st.Kubeconfig, "STACKFLOW_KNOWN_HOSTS="+st.Path(local.HostsKnownHosts)),
		st.TemporalEnv(edpmBenchNamespace)...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	p := &benchProc{cmd: cmd, done: make(chan struct{}), log: log}
	go func() { _ = cmd.Wait(); close(p.done); f.Close() }()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if resp, err := http.Get("http://" + metrics + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
	}
	p.stop()
	return nil, fmt.Errorf("%s not healthy: %s", path, edpmBenchTail(log, 20))
}

// stop ends the process (SIGTERM, then SIGKILL after 30 s); stopping twice is harmless.
func (p *benchProc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// memMB reads a memory figure in MB from /proc/<pid>/status: VmHWM (peak resident) or VmRSS.
func (p *benchProc) memMB(field string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field+":" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}
