package e2e

import (
	"github.com/stackflow/stackflow/deploy/local"

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
	"syscall"
	"testing"
	"time"
)

const (
	// healthTimeout bounds the wait for a started process to serve /healthz.
	healthTimeout = time.Minute
	// stopGrace is how long Stop waits after SIGTERM before it kills; the worker drains its activities
	// in that time.
	stopGrace = 40 * time.Second
	// failureTail is how many log lines a failed test prints per process.
	failureTail = 80
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
}

// Proc is a stackflow binary running as a child process of the test, in a process group of its own.
type Proc struct {
	t       testing.TB
	name    string
	argv    []string
	env     []string
	log     string
	metrics string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// StartProc starts spec's binary and waits until it serves /healthz. The process is stopped when the
// test ends, and its log tail is printed if the test failed; a failed start fails the test.
func (e *Env) StartProc(t testing.TB, spec ProcSpec) *Proc {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port for %s: %v", spec.Name, err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := &Proc{t: t, name: spec.Name, metrics: addr, log: filepath.Join(t.TempDir(), spec.Name+".log"),
		// The kubeconfig goes by environment, so no process has the stack's state directory on its
		// command line.
		env: slices.Concat(os.Environ(), []string{"KUBECONFIG=" + e.Stack.Kubeconfig,
			// The stack's test hosts get new host keys with a new state directory; check them there.
			"STACKFLOW_KNOWN_HOSTS=" + e.Stack.Path(local.HostsKnownHosts)},
			// Temporal through the TLS front (mutual TLS, API key) with the payload codec.
			e.Stack.TemporalEnv(e.TemporalNamespace), spec.Env)}
	p.argv = append([]string{filepath.Join(e.Bin, spec.Binary), "--metrics-address", addr}, spec.Args...)
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("--- %s log (tail) ---\n%s", p.name, p.Tail(failureTail))
		}
	})
	p.Start()
	return p
}

// WorkerOptions tune a worker for a test.
type WorkerOptions struct {
	// Identity is the worker's Temporal identity and its process name.
	Identity string
	// Env is added to the worker's environment.
	Env []string
	// ExtraArgs follow the harness's flags.
	ExtraArgs []string
}

// StartWorker runs a worker on every queue of the run's Temporal namespace; it drains for at most 5 s
// when stopped.
func (e *Env) StartWorker(t testing.TB, opts WorkerOptions) *Proc {
	t.Helper()
	args := append([]string{
		"--namespace", e.TemporalNamespace,
		"--temporal-ui", e.Stack.TemporalUI,
		"--identity", opts.Identity,
		"--stop-timeout", "5s",
	}, opts.ExtraArgs...)
	return e.StartProc(t, ProcSpec{Name: opts.Identity, Binary: Worker, Args: args, Env: opts.Env})
}

// BridgeOptions tune a bridge replica for a test.
type BridgeOptions struct {
	// Identity is the replica's identity and its process name.
	Identity string
	// Kinds the bridge serves, comma-separated.
	Kinds string
	// Lease is the leader-election lease; replicas sharing it are one bridge. Identity when empty.
	Lease string
	// Workers is the number of reconcile workers; the binary's default when zero.
	Workers int
	// DefaultLeases keeps the binary's lease timings. Otherwise they are short (6 s lease, 4 s renew
	// deadline, 1 s retry) so a takeover in a test is quick.
	DefaultLeases bool
	// ExtraArgs follow the harness's flags.
	ExtraArgs []string
}

// StartBridge runs a bridge replica against the run's Temporal namespace.
func (e *Env) StartBridge(t testing.TB, opts BridgeOptions) *Proc {
	t.Helper()
	lease := opts.Lease
	if lease == "" {
		lease = opts.Identity
	}
	args := []string{
		"--namespace", e.TemporalNamespace,
		"--kinds", opts.Kinds,
		"--identity", opts.Identity,
		"--leader-election-name", lease,
	}
	if !opts.DefaultLeases {
		args = append(args, "--lease-duration", "6s", "--renew-deadline", "4s", "--retry-period", "1s")
	}
	if opts.Workers > 0 {
		args = append(args, "--workers", strconv.Itoa(opts.Workers))
	}
	return e.StartProc(t, ProcSpec{Name: opts.Identity, Binary: Bridge, Args: append(args, opts.ExtraArgs...)})
}

// Start (re)starts the process, appending to its log, and waits until it serves /healthz; it fails the
// test if the process exits or does not become healthy in time. Call it from the test's goroutine;
// elsewhere, use Restart.
func (p *Proc) Start() {
	p.t.Helper()
	if err := p.Restart(); err != nil {
		p.t.Fatal(err)
	}
}

// Restart (re)starts the process like Start but returns what went wrong, so it can run on any
// goroutine (a chaos loop that crashes and restarts a worker, say).
func (p *Proc) Restart() error {
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("log of %s: %w", p.name, err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "=== %s start\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = logf, logf
	// A group of its own: Kill9 and Stop reach whatever the binary started too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	for deadline := time.Now().Add(healthTimeout); ; {
		resp, err := http.Get("http://" + p.metrics + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not serve /healthz within %s:\n%s", p.name, healthTimeout, p.Tail(30))
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited at start:\n%s", p.name, p.Tail(30))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Kill9 crashes the process group: no shutdown code runs, no lease is released.
func (p *Proc) Kill9() {
	p.t.Helper()
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

// Stop asks the process to shut down (SIGTERM to its group) and kills the group if it has not exited
// within 40 s. Stopping a stopped process does nothing.
func (p *Proc) Stop() {
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
	case <-time.After(stopGrace):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
}

// Running reports whether the process was started, not stopped, and has not exited.
func (p *Proc) Running() bool {
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

// PID is the process ID of the latest start, 0 if it was stopped.
func (p *Proc) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Name is the process's name in the test's output.
func (p *Proc) Name() string { return p.name }

// Tail is the last n lines of the process's log, across restarts.
func (p *Proc) Tail(n int) string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Metric scrapes the process's /metrics and sums the samples of the metric name whose labels contain
// every given name, value pair (labels alternate names and values).
func (p *Proc) Metric(name string, labels ...string) (float64, error) {
	resp, err := http.Get("http://" + p.metrics + "/metrics")
	if err != nil {
		return 0, fmt.Errorf("scrape %s: %w", p.name, err)
	}
	defer resp.Body.Close()
	return sumMetric(resp.Body, name, labels...)
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
