// Package e2e is the harness of stackflow's end-to-end tests and benchmarks against the real local
// stack: it brings up the components a package needs, builds the stackflow-bridge and stackflow-worker
// binaries from this tree, registers a Temporal namespace of the package's own with stackflow's search
// attributes, and gives the clients (Kubernetes, dynamic, Temporal) the tests drive the stack with.
//
// The binaries run as child processes in their own process groups (Proc), so a kill -9 is a real crash;
// each one is stopped when its test ends, so nothing a test started outlives it. The kubeconfig reaches
// them by environment, never on the command line.
//
// What is particular to a scenario (the kinds a bridge serves, the objects created, what is asserted)
// stays in the test package.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/durationpb"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/api/temporalconn"
	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/worker"
)

// The binaries Setup can build, by the name of their file in Env.Bin.
const (
	Bridge = "stackflow-bridge"
	Worker = "stackflow-worker"
)

// packages are the Go packages of the binaries, relative to the repository root.
var packages = map[string]string{
	Bridge: "./bridge/cmd/stackflow-bridge",
	Worker: "./worker/cmd/stackflow-worker",
}

// EDPMLaneHosts are the test hosts of tests/edpm and tests/nova, which run one after the other in a lane
// beside tests/samples (whose make run cloud uses edpm-compute-0 and -1) and tests/servers (-2 and -3):
// each package's host0 and host1. EDPMLaneHostCount is the HostCount that includes them.
var EDPMLaneHosts = [2]string{"edpm-compute-4", "edpm-compute-5"}

// EDPMLaneHostCount is the number of test hosts up to and including EDPMLaneHosts.
const EDPMLaneHostCount = 6

// Config says what an end-to-end package needs from the stack.
type Config struct {
	// Components of the local stack to bring up; Kubernetes and Temporal when empty.
	Components []string
	// HostCount is the number of EDPM test hosts, when Components include local.Hosts: the package's
	// hosts are among the first HostCount (hosts beyond it that other packages use are kept).
	HostCount int
	// TemporalNamespace holds the package's workflows, so other users of the shared stack cannot take
	// its work. Required.
	TemporalNamespace string
	// RunPrefix starts Env.Run, the name of this run that prefixes the objects it creates; six random
	// hex digits follow. Run, when set, is the whole name instead.
	RunPrefix string
	Run       string
	// Binaries to build into Env.Bin; the bridge and the worker when nil.
	Binaries []string
	// QPS and Burst of the Kubernetes clients; 100 and 200 when zero.
	QPS   float32
	Burst int
}

// Env is a running end-to-end environment: the stack, its clients, and the freshly built binaries.
type Env struct {
	Stack *local.Stack
	// Dir is a scratch directory of the run, removed by Close; Bin (inside it) holds the binaries.
	Dir string
	Bin string
	// Run names this run: a per-run prefix for object names, leases and Kubernetes namespaces.
	Run string
	// TemporalNamespace holds the run's workflows; Temporal is a client of it.
	TemporalNamespace string
	REST              *rest.Config
	Kube              kubernetes.Interface
	Dyn               dynamic.Interface
	Temporal          client.Client

	// started is when Setup finished: RunTests scans the histories of workflows started since.
	started time.Time
	// forbidden are the spec values no history of the run may hold in clear (see Forbid).
	forbidden []string
	// paths label runs for the replay corpus (see RecordPath); mu guards them.
	mu    sync.Mutex
	paths []Path
	// regions are the regions of the Novas the run deployed (see StartNova): RemoveLeakedServers looks
	// there too.
	regions []string
	// noRecord keeps the run's histories out of the replay corpus (a Nova's namespace of its own).
	noRecord bool
}

// Setup brings up the stack's components (reusing what runs), builds the binaries, creates the clients
// and makes the Temporal namespace usable. Close releases what it made.
func Setup(ctx context.Context, cfg Config) (_ *Env, err error) {
	if cfg.TemporalNamespace == "" {
		return nil, errors.New("e2e: Config.TemporalNamespace is required")
	}
	comps := cfg.Components
	if len(comps) == 0 {
		comps = []string{local.Kubernetes, local.Temporal}
	}
	// KeepHosts: packages run side by side on the stack (deploy/local/scripts/e2e.sh), each on hosts of its own.
	st, err := local.Up(ctx, local.Options{Components: comps, HostCount: cfg.HostCount, KeepHosts: true})
	if err != nil {
		return nil, fmt.Errorf("local stack: %w", err)
	}
	e := &Env{Stack: st, TemporalNamespace: cfg.TemporalNamespace, Run: cfg.Run}
	if e.Run == "" {
		e.Run = fmt.Sprintf("%s%06x", cfg.RunPrefix, time.Now().UnixNano()&0xffffff)
	}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	if e.Dir, err = os.MkdirTemp("", "stackflow-e2e-"+cfg.TemporalNamespace+"-"); err != nil {
		return nil, err
	}
	e.Bin = filepath.Join(e.Dir, "bin")
	bins := cfg.Binaries
	if bins == nil {
		bins = []string{Bridge, Worker}
	}
	for _, b := range bins {
		if err := e.build(ctx, b); err != nil {
			return nil, err
		}
	}

	if e.REST, err = st.KubeREST(); err != nil {
		return nil, err
	}
	e.REST.QPS, e.REST.Burst = 100, 200
	if cfg.QPS != 0 {
		e.REST.QPS = cfg.QPS
	}
	if cfg.Burst != 0 {
		e.REST.Burst = cfg.Burst
	}
	if e.Kube, err = kubernetes.NewForConfig(e.REST); err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	if e.Dyn, err = dynamic.NewForConfig(e.REST); err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}

	if err := EnsureTemporalNamespace(ctx, st, cfg.TemporalNamespace); err != nil {
		return nil, err
	}
	if e.Temporal, err = Dial(ctx, st, cfg.TemporalNamespace); err != nil {
		return nil, err
	}
	e.started = time.Now()
	return e, nil
}

// TemporalOptions are the run's Temporal connection options: the stack's TLS front (mutual TLS, API
// key) and its payload codec, as the bridge and workers of the run get them.
func (e *Env) TemporalOptions() temporalconn.Options {
	return e.Stack.TemporalOptions(e.TemporalNamespace)
}

// Dial is a Temporal client of namespace the way stackflow's processes connect: through the stack's TLS
// front with its codec.
func Dial(ctx context.Context, st *local.Stack, namespace string) (client.Client, error) {
	opts, err := st.TemporalOptions(namespace).ClientOptions()
	if err != nil {
		return nil, err
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("temporal client of namespace %s at %s: %w", namespace, opts.HostPort, err)
	}
	return c, nil
}

// DataConverter decodes payloads the run's processes wrote (history inputs, say) as they see them.
func (e *Env) DataConverter() (converter.DataConverter, error) {
	opts, err := e.TemporalOptions().ClientOptions()
	if err != nil {
		return nil, err
	}
	if opts.DataConverter == nil {
		return converter.GetDefaultDataConverter(), nil
	}
	return opts.DataConverter, nil
}

// build compiles one binary of this tree into e.Bin.
func (e *Env) build(ctx context.Context, binary string) error {
	return e.BuildTagged(ctx, binary, binary)
}

// BuildTagged compiles binary (Bridge or Worker) of this tree with the build tags into e.Bin under the
// file name name: another build of the same tree (the upgrade test's second worker build, say). The
// build is kept in the checkout's bin/e2e-bin, and a later package's build from the same inputs links it
// instead of building again.
func (e *Env) BuildTagged(ctx context.Context, binary, name string, tags ...string) error {
	pkg, ok := packages[binary]
	if !ok {
		return fmt.Errorf("e2e: unknown binary %q", binary)
	}
	repo, dst := e.Stack.RepoRoot, filepath.Join(e.Bin, name)
	if err := os.MkdirAll(e.Bin, 0o755); err != nil {
		return err
	}
	// The cache is an optimisation: without a key, the binary is built as if there were none.
	key, keyErr := binaryKey(ctx, repo, pkg, tags)
	cacheName := strings.Join(append([]string{binary}, tags...), "+")
	if keyErr == nil {
		if err := linkOrCopy(cachedBinary(repo, cacheName, key), dst); err == nil {
			return nil
		}
	}
	args := []string{"build", "-o", dst}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.CommandContext(ctx, "go", append(args, pkg)...)
	cmd.Dir = repo
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build %s with tags %v: %w", pkg, tags, err)
	}
	if keyErr == nil {
		if err := storeBinary(repo, cacheName, key, dst); err != nil {
			return fmt.Errorf("keep the build of %s: %w", pkg, err)
		}
	}
	return nil
}

// ServeCharts serves the project's charts (deploy/charts, packaged into the run's scratch directory,
// with the extra chart versions) on a free port of 127.0.0.1 until its Close.
func (e *Env) ServeCharts(extraVersions ...string) (*local.ChartServer, error) {
	repoDir := filepath.Join(e.Dir, "charts")
	if err := os.MkdirAll(repoDir, 0o755); err != nil {
		return nil, err
	}
	cs, err := local.ServeCharts(filepath.Join(e.Stack.RepoRoot, "deploy", "charts"), repoDir, extraVersions...)
	if err != nil {
		return nil, fmt.Errorf("chart repository: %w", err)
	}
	return cs, nil
}

// Close closes the Temporal client and removes the scratch directory. Processes are stopped by their
// tests' cleanups, before this runs.
func (e *Env) Close() {
	if e.Temporal != nil {
		e.Temporal.Close()
	}
	if e.Dir != "" {
		_ = os.RemoveAll(e.Dir)
	}
}

// EnsureTemporalNamespace registers namespace on the stack's Temporal server (once per stack) with
// stackflow's search attributes, and waits until the server accepts work and visibility queries on
// every attribute in it: a freshly registered namespace takes a while to reach all services.
func EnsureTemporalNamespace(ctx context.Context, st *local.Stack, namespace string) error {
	c, err := Dial(ctx, st, st.TemporalNamespace)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace:                        namespace,
		WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
	})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("register namespace %s: %w", namespace, err)
	}
	probe := searchAttributesProbe()
	deadline := time.Now().Add(time.Minute)
	for {
		nc, err := Dial(ctx, st, namespace)
		if err == nil {
			err = worker.EnsureSearchAttributes(ctx, nc, namespace, lifecycle.SearchAttributes)
			if err == nil {
				_, err = nc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: namespace, Query: probe})
			}
			nc.Close()
		}
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("namespace %s not usable: %w", namespace, err)
		}
		time.Sleep(time.Second)
	}
}

// searchAttributesProbe is a visibility query naming every stackflow search attribute: it fails until
// all of them are known to the namespace.
func searchAttributesProbe() string {
	var terms []string
	for name := range lifecycle.SearchAttributes {
		terms = append(terms, fmt.Sprintf("%s = %q", name, "none"))
	}
	slices.Sort(terms)
	return strings.Join(terms, " AND ")
}
