package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/deploy/rbac"
	"github.com/stackflow/stackflow/worker"
)

const (
	// healthTimeout bounds the wait for a started process to serve (ProcSpec.Ready).
	healthTimeout = time.Minute
	// stopGrace is how long Stop waits after SIGTERM before it kills; the worker drains its activities
	// in that time.
	stopGrace = 40 * time.Second
	// failureTail is how many of its last warnings and errors a failed test prints per process part:
	// few, so the failure itself stays within the tail CI shows; the whole logs are kept (KeptLogs).
	failureTail = 6
)

// ProcSpec describes a stackflow binary to run.
type ProcSpec struct {
	// Name names the process in the test's output and its log file.
	Name string
	// Binary is the file in Env.Bin: Bridge or Worker.
	Binary string
	// Args follow --metrics-address, which the harness sets to a free loopback port.
	Args []string
	// Env is added to the test's environment (and the kubeconfig's).
	Env []string
	// Account is the chart's ServiceAccount the process acts as ("bridge", "worker-kube", …): its
	// kubeconfig impersonates it, so the API server enforces the chart's RBAC. Empty: the stack's admin.
	Account string
	// Parts run the binary several times as one Proc, each with its own extra arguments and account
	// (a worker per task queue, as the chart deploys them); Args and Account apply when empty.
	Parts []ProcPart
	// Ready is the path that answers 200 once the process serves (a worker's /readyz: it polls its task
	// queues); /healthz when empty.
	Ready string
}

// ProcPart is one process of a Proc made of several.
type ProcPart struct {
	Suffix  string
	Args    []string
	Account string
}

// Proc is a stackflow binary running as child processes of the test (one, or one per part), each in a
// process group of its own; it starts, crashes and stops as one.
type Proc struct {
	t     TB
	name  string
	parts []*procPart
}

// procPart is one process of a Proc.
type procPart struct {
	name    string
	argv    []string
	env     []string
	log     string
	metrics string
	ready   string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// StartProc starts spec's binary and waits until it serves (spec.Ready). The process is stopped when the
// test ends, and its log tail is printed if the test failed; a failed start fails the test.
func (e *Env) StartProc(t TB, spec ProcSpec) *Proc {
	t.Helper()
	parts := spec.Parts
	if len(parts) == 0 {
		parts = []ProcPart{{Args: spec.Args, Account: spec.Account}}
	}
	p := &Proc{t: t, name: spec.Name}
	for _, part := range parts {
		addr, err := metricsAddress()
		if err != nil {
			t.Fatalf("metrics port for %s: %v", spec.Name, err)
		}
		kubeconfig, err := e.Kubeconfig(part.Account)
		if err != nil {
			t.Fatalf("kubeconfig of %s: %v", spec.Name, err)
		}
		name := spec.Name + part.Suffix
		ready := spec.Ready
		if ready == "" {
			ready = "/healthz"
		}
		pp := &procPart{name: name, metrics: addr, ready: ready, log: filepath.Join(t.TempDir(), name+".log"),
			// The kubeconfig goes by environment, so no process has the stack's state directory on its
			// command line.
			env: slices.Concat(os.Environ(), []string{"KUBECONFIG=" + kubeconfig,
				// The stack's test hosts get new host keys with a new state directory; check them there.
				"STACKFLOW_KNOWN_HOSTS=" + e.Stack.Path(local.HostsKnownHosts)},
				// Temporal through the TLS front (mutual TLS, API key) with the payload codec.
				e.Stack.TemporalEnv(e.TemporalNamespace), spec.Env)}
		pp.argv = slices.Concat([]string{filepath.Join(e.Bin, spec.Binary), "--metrics-address", addr}, spec.Args, part.Args)
		if len(spec.Parts) == 0 {
			pp.argv = append([]string{filepath.Join(e.Bin, spec.Binary), "--metrics-address", addr}, spec.Args...)
		}
		p.parts = append(p.parts, pp)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			dir := e.Stack.Path(KeptLogs, strings.ReplaceAll(t.Name(), "/", "_"))
			kept := p.Keep(dir)
			t.Logf("--- %s: last warnings and errors (whole log: %s) ---\n%s", p.name, kept, p.Problems(failureTail))
		}
	})
	p.Start()
	return p
}

// Kubeconfig is a kubeconfig of the stack's API server acting as the chart's ServiceAccount account
// (impersonation by the stack's admin, so the API server applies that account's RBAC); the admin's own
// for "". It is written once per run.
func (e *Env) Kubeconfig(account string) (string, error) {
	if account == "" {
		return e.Stack.Kubeconfig, nil
	}
	path := filepath.Join(e.Dir, "kubeconfig-"+account)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	cfg, err := clientcmd.LoadFromFile(e.Stack.Kubeconfig)
	if err != nil {
		return "", err
	}
	for _, ai := range cfg.AuthInfos {
		ai.Impersonate = local.ServiceAccount(account)
		ai.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + local.ChartNamespace, "system:authenticated"}
	}
	return path, clientcmd.WriteToFile(*cfg, path)
}

// RESTAs is a REST config of the stack's API server acting as the chart's ServiceAccount account, for
// activities a test drives in-process.
func (e *Env) RESTAs(account string) (*rest.Config, error) {
	c := rest.CopyConfig(e.REST)
	c.Impersonate = rest.ImpersonationConfig{UserName: local.ServiceAccount(account),
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + local.ChartNamespace, "system:authenticated"}}
	return c, nil
}

// WorkerOptions tune a worker for a test.
type WorkerOptions struct {
	// Identity is the worker's Temporal identity and its process name.
	Identity string
	// Env is added to the worker's environment.
	Env []string
	// ExtraArgs follow the harness's flags.
	ExtraArgs []string
	// Queues the worker serves; every task queue when empty.
	Queues []string
	// Binary is the worker's file in Env.Bin (see BuildTagged); Worker when empty.
	Binary string
	// WatchFilter labels the objects the worker creates (--watch-filter), for a bridge of the same filter.
	WatchFilter string
}

// E2EBuildID is the build ID of the workers the tests start (see StartWorker).
const E2EBuildID = "e2e"

// StartWorker runs a worker on every queue of the run's Temporal namespace, as the chart deploys it: one
// process per task queue, each acting as that queue's ServiceAccount. They drain for at most 5 s when
// stopped, and crash, restart and stop together.
func (e *Env) StartWorker(t TB, opts WorkerOptions) *Proc {
	t.Helper()
	args := append([]string{
		"--namespace", e.TemporalNamespace,
		"--temporal-ui", e.Stack.TemporalUI,
		"--identity", opts.Identity,
		"--stop-timeout", "5s",
		// Every build is one version in the tests (ExtraArgs may name another): runs of the same package
		// from different checkouts share its namespace, and an older build never takes over from a newer.
		"--build-id", E2EBuildID,
	}, opts.ExtraArgs...)
	if opts.WatchFilter != "" {
		args = append(args, "--watch-filter", opts.WatchFilter)
	}
	queues := opts.Queues
	if len(queues) == 0 {
		queues = worker.AllQueues
	}
	var parts []ProcPart
	for _, q := range queues {
		account := rbac.WorkerAccount(q)
		parts = append(parts, ProcPart{Suffix: strings.TrimPrefix(account, "worker"), Args: []string{"--queues", q}, Account: account})
	}
	binary := opts.Binary
	if binary == "" {
		binary = Worker
	}
	// Started once it polls: a test's clock never runs while the worker still connects.
	return e.StartProc(t, ProcSpec{Name: opts.Identity, Binary: binary, Args: args, Env: opts.Env, Parts: parts, Ready: "/readyz"})
}

// BridgeOptions tune a bridge replica for a test.
type BridgeOptions struct {
	// Identity is the replica's identity and its process name.
	Identity string
	// Kinds the bridge serves, comma-separated.
	Kinds string
	// Namespaces whose objects it serves (--watch-namespaces): packages run side by side (e2e.sh), and
	// a bridge of one must not serve another's objects. Every namespace when empty, for cluster-scoped
	// kinds, which are served cluster-wide anyway.
	Namespaces []string
	// Lease is the leader-election lease; replicas sharing it are one bridge. Identity when empty.
	Lease string
	// Workers is the number of reconcile workers; the binary's default when zero.
	Workers int
	// DefaultLeases keeps the binary's lease timings. Otherwise they are short (6 s lease, 4 s renew
	// deadline, 1 s retry) so a takeover in a test is quick.
	DefaultLeases bool
	// WatchFilter serves only objects labelled with it (--watch-filter); empty serves only unlabelled
	// ones. Cluster-scoped objects of a run beside a cloud that stackflow serves (the samples') carry it.
	WatchFilter string
	// ExtraArgs follow the harness's flags.
	ExtraArgs []string
}

// StartBridge runs a bridge replica against the run's Temporal namespace, acting as the chart's bridge
// ServiceAccount; its Lease is in the chart's namespace, where that account may hold one.
func (e *Env) StartBridge(t TB, opts BridgeOptions) *Proc {
	t.Helper()
	lease := opts.Lease
	if lease == "" {
		lease = opts.Identity
	}
	args := []string{
		"--namespace", e.TemporalNamespace,
		"--kinds", opts.Kinds,
		"--identity", opts.Identity,
		"--leader-election-namespace", local.ChartNamespace,
		"--leader-election-name", lease,
	}
	if !opts.DefaultLeases {
		args = append(args, "--lease-duration", "6s", "--renew-deadline", "4s", "--retry-period", "1s")
	}
	if opts.Workers > 0 {
		args = append(args, "--workers", strconv.Itoa(opts.Workers))
	}
	if len(opts.Namespaces) > 0 {
		args = append(args, "--watch-namespaces", strings.Join(opts.Namespaces, ","))
	}
	if opts.WatchFilter != "" {
		args = append(args, "--watch-filter", opts.WatchFilter)
	}
	return e.StartProc(t, ProcSpec{Name: opts.Identity, Binary: Bridge, Args: append(args, opts.ExtraArgs...), Account: "bridge"})
}

// Start (re)starts the process, appending to its log, and waits until it serves (ProcSpec.Ready); it fails the
// test if the process exits or does not become healthy in time. Call it from the test's goroutine;
// elsewhere, use Restart.
func (p *Proc) Start() {
	p.t.Helper()
	if err := p.Restart(); err != nil {
		p.t.Fatal(err)
	}
}

// Restart (re)starts every process like Start but returns what went wrong, so it can run on any
// goroutine (a chaos loop that crashes and restarts a worker, say).
func (p *Proc) Restart() error {
	for _, pp := range p.parts {
		if err := pp.start(); err != nil {
			return err
		}
	}
	for _, pp := range p.parts {
		if err := pp.waitHealthy(); err != nil {
			return err
		}
	}
	return nil
}

func (pp *procPart) start() error {
	logf, err := os.OpenFile(pp.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("log of %s: %w", pp.name, err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "=== %s start\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(pp.argv[0], pp.argv[1:]...)
	cmd.Env = pp.env
	cmd.Stdout, cmd.Stderr = logf, logf
	// A group of its own: Kill9 and Stop reach whatever the binary started too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", pp.name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	pp.mu.Lock()
	pp.cmd, pp.exited = cmd, exited
	pp.mu.Unlock()
	return nil
}

func (pp *procPart) waitHealthy() error {
	pp.mu.Lock()
	exited := pp.exited
	pp.mu.Unlock()
	for deadline := time.Now().Add(healthTimeout); ; {
		resp, err := http.Get("http://" + pp.metrics + pp.ready)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not serve %s within %s:\n%s", pp.name, pp.ready, healthTimeout, pp.tail(30))
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited at start:\n%s", pp.name, pp.tail(30))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Kill9 crashes every process group: no shutdown code runs, no lease is released.
func (p *Proc) Kill9() {
	p.t.Helper()
	for _, pp := range p.parts {
		pp.mu.Lock()
		cmd, exited := pp.cmd, pp.exited
		pp.mu.Unlock()
		if cmd == nil {
			continue
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		p.t.Logf("%s: killed with SIGKILL (pid %d)", pp.name, cmd.Process.Pid)
	}
}

// Stop asks the processes to shut down (SIGTERM to their groups) and kills a group that has not exited
// within 40 s. Stopping a stopped process does nothing.
func (p *Proc) Stop() {
	var wg sync.WaitGroup
	for _, pp := range p.parts {
		wg.Add(1)
		go func() { defer wg.Done(); pp.stop() }()
	}
	wg.Wait()
}

func (pp *procPart) stop() {
	pp.mu.Lock()
	cmd, exited := pp.cmd, pp.exited
	pp.cmd = nil
	pp.mu.Unlock()
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
	case <-time.After(stopGrace):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
}

// Running reports whether every process was started, not stopped, and has not exited.
func (p *Proc) Running() bool {
	for _, pp := range p.parts {
		pp.mu.Lock()
		cmd, exited := pp.cmd, pp.exited
		pp.mu.Unlock()
		if cmd == nil {
			return false
		}
		select {
		case <-exited:
			return false
		default:
		}
	}
	return true
}

// PID is the process ID of the (first) process's latest start, 0 if it was stopped.
func (p *Proc) PID() int {
	pp := p.parts[0]
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.cmd == nil {
		return 0
	}
	return pp.cmd.Process.Pid
}

// Name is the process's name in the test's output.
func (p *Proc) Name() string { return p.name }

// Tail is the last n lines of each process's log, across restarts.
func (p *Proc) Tail(n int) string {
	if len(p.parts) == 1 {
		return p.parts[0].tail(n)
	}
	var out []string
	for _, pp := range p.parts {
		out = append(out, "--- "+pp.name+" ---", pp.tail(n))
	}
	return strings.Join(out, "\n")
}

// KeptLogs is the directory of the stack's state directory where a failed test keeps its processes'
// whole logs (the test's own scratch directory is removed when it ends).
const KeptLogs = "e2e-logs"

// Keep copies every part's log into dir and returns dir, or the error's text if it could not.
func (p *Proc) Keep(dir string) string {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err.Error()
	}
	for _, pp := range p.parts {
		b, err := os.ReadFile(pp.log)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, pp.name+".log"), b, 0o644)
		}
		if err != nil {
			return err.Error()
		}
	}
	return dir
}

// Problems is the last n warning, error and panic lines of each part's log.
func (p *Proc) Problems(n int) string {
	var out []string
	for _, pp := range p.parts {
		b, _ := os.ReadFile(pp.log)
		var lines []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") || strings.HasPrefix(l, "panic:") || strings.Contains(l, "fatal error:") {
				lines = append(lines, l)
			}
		}
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		if len(p.parts) > 1 {
			out = append(out, "--- "+pp.name+" ---")
		}
		out = append(out, lines...)
	}
	return strings.Join(out, "\n")
}

func (pp *procPart) tail(n int) string {
	b, _ := os.ReadFile(pp.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Metric scrapes every process's /metrics and sums the samples of the metric name whose labels contain
// every given name, value pair (labels alternate names and values).
func (p *Proc) Metric(name string, labels ...string) (float64, error) {
	var sum float64
	for _, pp := range p.parts {
		resp, err := http.Get("http://" + pp.metrics + "/metrics")
		if err != nil {
			return 0, fmt.Errorf("scrape %s: %w", pp.name, err)
		}
		v, err := sumMetric(resp.Body, name, labels...)
		resp.Body.Close()
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

// sumMetric sums the samples of metric name in a Prometheus text exposition whose labels contain every
// name="value" pair.
func sumMetric(r io.Reader, name string, labels ...string) (float64, error) {
	var sum float64
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		// The name must end where the labels or the value begin: a prefix of another metric's name
		// does not count.
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

// nextMetricsPort is the next port metricsAddress tries.
var nextMetricsPort atomic.Int32

// Metrics ports come from below the kernel's ephemeral range (32768 and up on Debian): a port the
// kernel hands out, even one just closed, can go to the next caller or to an outgoing connection, and
// a restarted process must get its port back. Each port goes to one process of this test binary.
const (
	metricsPortFirst = 21000
	metricsPortLast  = 32000
)

// metricsAddress returns a loopback address no other process of this test run was given and nothing
// listens on now.
func metricsAddress() (string, error) {
	nextMetricsPort.CompareAndSwap(0, int32(metricsPortFirst+os.Getpid()%50*200))
	for range metricsPortLast - metricsPortFirst {
		port := nextMetricsPort.Add(1)
		if port > metricsPortLast {
			nextMetricsPort.Store(metricsPortFirst)
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		ln.Close()
		return addr, nil
	}
	return "", fmt.Errorf("no free port in %d-%d", metricsPortFirst, metricsPortLast)
}
