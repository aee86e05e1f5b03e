// Package local brings up stackflow's local real stack on one machine: a Kubernetes control plane with
// kwok nodes, a Temporal dev server, an OpenStack from Debian's packages and EDPM test hosts in network
// namespaces. Everything listens on loopback (or the test hosts' own veth network) and lives under one
// state directory; tool binaries are cached outside the checkout by version.
//
// Up is idempotent: what already runs is reused. Down stops only what Up started, by PID.
package local

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
)

//go:embed versions.env
var versionsEnv string

// Versions holds the pinned tool versions from versions.env.
var Versions = parseVersions(versionsEnv)

func parseVersions(s string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if ok {
			out[k] = v
		}
	}
	return out
}

// Component names accepted in Options.Components.
const (
	Kubernetes = "kubernetes"
	Temporal   = "temporal"
	OpenStack  = "openstack"
	Hosts      = "hosts"
)

// AllComponents is the default set, in start order.
var AllComponents = []string{Kubernetes, Temporal, OpenStack, Hosts}

// Options configures a stack.
type Options struct {
	// StateDir holds PID files, logs, data and generated configuration. Default: $STACKFLOW_STATE, or
	// .stackflow at the repository root.
	StateDir string
	// CacheDir holds built tools by version. Default: $STACKFLOW_CACHE, or ~/.cache/stackflow.
	CacheDir string
	// Components to bring up; default AllComponents.
	Components []string
	// HostCount is the number of EDPM test hosts; default 2 (or $STACKFLOW_HOSTS).
	HostCount int
	// KeepHosts keeps (and brings up) the hosts that exist beyond HostCount instead of removing them:
	// test packages running side by side share the hosts, and one's Up must not take another's away.
	KeepHosts bool
	// Log receives progress lines; default os.Stderr.
	Log io.Writer
}

// Stack is a running (or to be started) local stack. Its exported fields are the endpoints a user or a
// test needs; they are also written to <StateDir>/stack.json.
type Stack struct {
	StateDir string `json:"stateDir"`
	CacheDir string `json:"cacheDir"`
	RepoRoot string `json:"repoRoot"`

	// Kubeconfig is the admin kubeconfig of the local API server.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// KubeAPI is the API server URL.
	KubeAPI string `json:"kubeAPI,omitempty"`
	// ChartRepository is the Helm chart repository serving the project's charts (deploy/charts).
	ChartRepository string `json:"chartRepository,omitempty"`
	// TemporalAddress is the frontend gRPC address; TemporalUI the web UI URL.
	TemporalAddress   string `json:"temporalAddress,omitempty"`
	TemporalUI        string `json:"temporalUI,omitempty"`
	TemporalNamespace string `json:"temporalNamespace,omitempty"`
	// TemporalTLS is the TLS front of Temporal (mutual TLS and an API key); clients use TemporalOptions.
	TemporalTLS *TemporalTLS `json:"temporalTLS,omitempty"`
	// CodecKeys is the directory of the payload codec's keys; CodecEndpoint serves the codec to the UI and
	// to `temporal --codec-endpoint`.
	CodecKeys     string `json:"codecKeys,omitempty"`
	CodecEndpoint string `json:"codecEndpoint,omitempty"`
	// CloudsYAML is a clouds.yaml with an admin cloud named CloudName.
	CloudsYAML string `json:"cloudsYAML,omitempty"`
	CloudName  string `json:"cloudName,omitempty"`
	// OpenStack holds extra facts about the cloud (network names, image, Secrets) as set up.
	OpenStack *OpenStackInfo `json:"openstack,omitempty"`
	// TestHosts are the EDPM test hosts.
	TestHosts []TestHost `json:"testHosts,omitempty"`
	// SSHKeySecret names the Kubernetes Secret (namespace/name) holding the hosts' SSH private key.
	SSHKeySecret string `json:"sshKeySecret,omitempty"`

	opts    Options
	log     io.Writer
	pending []pendingSecret
}

// OpenStackInfo describes what the local cloud was set up with.
type OpenStackInfo struct {
	// AuthURL is Keystone's public endpoint.
	AuthURL string `json:"authURL"`
	// Region is the region of every endpoint.
	Region string `json:"region"`
	// ExternalNetwork is the flat provider network floating IPs come from.
	ExternalNetwork string `json:"externalNetwork"`
	// TenantNetwork and TenantSubnet are a vxlan network for servers.
	TenantNetwork string `json:"tenantNetwork"`
	TenantSubnet  string `json:"tenantSubnet"`
	// Router connects the tenant subnet to the external network.
	Router string `json:"router"`
	// Image is a small raw image in Glance.
	Image string `json:"image"`
	// ServiceSecret names the Kubernetes Secret (namespace/name) holding the nova service user's
	// password (key NovaPassword), for NovaCells.
	ServiceSecret string `json:"serviceSecret,omitempty"`
	// CloudsSecret names the Kubernetes Secret (namespace/name) holding clouds.yaml.
	CloudsSecret string `json:"cloudsSecret,omitempty"`
}

// TestHost is one EDPM test host: a network namespace with its own address and sshd.
type TestHost struct {
	Name      string `json:"name"`
	Namespace string `json:"netns"`
	Address   string `json:"address"`
	// Gateway is the host-side address of the host's veth: services on the machine reachable from it
	// (RabbitMQ) listen there too.
	Gateway string `json:"gateway"`
	SSHPort int    `json:"sshPort"`
	User    string `json:"user"`
	// Root is the host's private directory tree, mounted over the paths its playbooks write.
	Root string `json:"root"`
}

// The EDPM test hosts' network: a bridge on the machine holding the gateway address, and one veth per
// host attached to it. A documentation range (TEST-NET-2), never routed anywhere; not TEST-NET-1, which
// these machines' own uplink uses. Services the hosts need (RabbitMQ, Keystone, Placement, …) listen on
// the gateway address as well as on loopback.
const (
	HostBridge  = "sfbr0"
	HostCIDR    = "198.51.100.0/24"
	HostGateway = "198.51.100.1"
)

// HostAddress is the address of EDPM test host i (host 0 is .10).
func HostAddress(i int) string {
	return strings.TrimSuffix(HostGateway, ".1") + "." + strconv.Itoa(10+i)
}

// SystemNamespace is the Kubernetes namespace holding the stack's own Secrets (clouds.yaml, SSH key).
const SystemNamespace = "openstack"

// New resolves options into a Stack without starting anything.
func New(opts Options) (*Stack, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	if opts.StateDir == "" {
		opts.StateDir = os.Getenv("STACKFLOW_STATE")
	}
	if opts.StateDir == "" {
		opts.StateDir = filepath.Join(root, ".stackflow")
	}
	if opts.CacheDir == "" {
		opts.CacheDir = os.Getenv("STACKFLOW_CACHE")
	}
	if opts.CacheDir == "" {
		home, _ := os.UserHomeDir()
		opts.CacheDir = filepath.Join(home, ".cache", "stackflow")
	}
	if len(opts.Components) == 0 {
		opts.Components = AllComponents
	}
	if opts.HostCount == 0 {
		fmt.Sscanf(os.Getenv("STACKFLOW_HOSTS"), "%d", &opts.HostCount)
	}
	if opts.HostCount == 0 {
		opts.HostCount = 2
	}
	if opts.Log == nil {
		opts.Log = os.Stderr
	}
	state, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, err
	}
	s := &Stack{StateDir: state, CacheDir: opts.CacheDir, RepoRoot: root, opts: opts, log: opts.Log}
	s.opts.StateDir = state
	return s, nil
}

// Load reads the endpoints of an already running stack from its state directory.
func Load(stateDir string) (*Stack, error) {
	s, err := New(Options{StateDir: stateDir})
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(s.StateDir, "stack.json"))
	if err != nil {
		return nil, fmt.Errorf("no running stack in %s (run 'make up' first): %w", s.StateDir, err)
	}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("read stack.json: %w", err)
	}
	return s, nil
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "deploy", "local", "versions.env")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("cannot find the stackflow checkout above %s", dir)
		}
	}
}

// Logf prints one progress line.
func (s *Stack) Logf(format string, args ...any) {
	fmt.Fprintf(s.log, "[%s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// Has reports whether the component is part of this stack.
func (s *Stack) Has(component string) bool { return slices.Contains(s.opts.Components, component) }

// HostCount is the number of EDPM test hosts requested.
func (s *Stack) HostCount() int { return s.opts.HostCount }

// Path joins elements under the state directory.
func (s *Stack) Path(elem ...string) string {
	return filepath.Join(append([]string{s.StateDir}, elem...)...)
}

// Tool returns the cached binary of a pinned tool, e.g. Tool("kube-apiserver", "KUBERNETES_VERSION").
func (s *Stack) Tool(name, versionKey string) (string, error) {
	p := filepath.Join(s.CacheDir, "bin", name+"-"+Versions[versionKey])
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s %s is not built (run deploy/local/tools/build.sh): %w", name, Versions[versionKey], err)
	}
	return p, nil
}

// lock serializes work on one part of the stack across processes sharing the state directory (parallel
// test packages, a developer's `up`): one lock per component, so bringing up Kubernetes never waits for
// a first OpenStack set-up that takes minutes.
func (s *Stack) lock(name string) (func(), error) {
	if err := os.MkdirAll(s.Path("locks"), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(s.Path("locks", name), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// locked runs fn holding the named lock.
func (s *Stack) locked(name string, fn func() error) error {
	unlock, err := s.lock(name)
	if err != nil {
		return err
	}
	defer unlock()
	return fn()
}

// Up brings up every requested component, reusing what already runs, and records its endpoints in
// stack.json beside those other components published.
func Up(ctx context.Context, opts Options) (*Stack, error) {
	s, err := New(opts)
	if err != nil {
		return nil, err
	}
	// Endpoints other components already published (e.g. hosts on a stack whose Kubernetes runs).
	if err := s.loadPublished(); err != nil {
		return nil, err
	}
	start := time.Now()
	// The hosts' bridge comes first: OpenStack's services, the API server, Temporal's TLS front and the
	// real node's kubelet bind to its gateway address.
	if s.Has(Hosts) || s.Has(OpenStack) || s.Has(Kubernetes) || s.Has(Temporal) {
		if err := s.locked("network", func() error { return s.ensureHostNetwork(ctx) }); err != nil {
			return s, err
		}
	}
	// Kubernetes, Temporal and OpenStack are independent; the test hosts and the Secrets that publish
	// credentials need Kubernetes, so they come after.
	g, gctx := errgroup.WithContext(ctx)
	for _, c := range []struct {
		name string
		up   func(context.Context) error
	}{{Kubernetes, s.upKubernetes}, {Temporal, s.upTemporal}, {OpenStack, s.upOpenStack}} {
		if s.Has(c.name) {
			g.Go(func() error { return s.locked(c.name, func() error { return c.up(gctx) }) })
		}
	}
	if err := g.Wait(); err != nil {
		return s, err
	}
	if s.Has(Hosts) {
		if err := s.locked(Hosts, func() error { return s.upHosts(ctx) }); err != nil {
			return s, err
		}
	}
	if s.Kubeconfig != "" {
		if err := s.publishSecrets(ctx); err != nil {
			if s.Has(Kubernetes) {
				return s, err
			}
			s.Logf("warning: Kubernetes is not reachable, Secrets not written: %v", err)
		}
	}
	if err := s.save(); err != nil {
		return s, err
	}
	s.Logf("stack up in %s", time.Since(start).Round(time.Second))
	return s, nil
}

// published lists the stack.json keys each component owns.
var published = map[string][]string{
	Kubernetes: {"kubeconfig", "kubeAPI", "chartRepository"},
	Temporal:   {"temporalAddress", "temporalUI", "temporalNamespace", "temporalTLS", "codecKeys", "codecEndpoint"},
	OpenStack:  {"cloudsYAML", "cloudName", "openstack"},
	Hosts:      {"testHosts", "sshKeySecret"},
}

func (s *Stack) loadPublished() error {
	b, err := os.ReadFile(s.Path("stack.json"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	prev := *s
	if err := json.Unmarshal(b, s); err != nil {
		return fmt.Errorf("read %s: %w", s.Path("stack.json"), err)
	}
	s.StateDir, s.CacheDir, s.RepoRoot, s.opts, s.log, s.pending = prev.StateDir, prev.CacheDir, prev.RepoRoot, prev.opts, prev.log, nil
	return nil
}

// save merges the endpoints of this Up's components into stack.json, keeping what other components
// published.
func (s *Stack) save() error {
	return s.locked("state", func() error {
		cur := map[string]json.RawMessage{}
		if b, err := os.ReadFile(s.Path("stack.json")); err == nil {
			_ = json.Unmarshal(b, &cur)
		}
		b, err := json.Marshal(s)
		if err != nil {
			return err
		}
		mine := map[string]json.RawMessage{}
		if err := json.Unmarshal(b, &mine); err != nil {
			return err
		}
		for _, k := range []string{"stateDir", "cacheDir", "repoRoot"} {
			cur[k] = mine[k]
		}
		for _, c := range s.opts.Components {
			for _, k := range published[c] {
				if v, ok := mine[k]; ok {
					cur[k] = v
				} else {
					delete(cur, k)
				}
			}
		}
		out, err := json.MarshalIndent(cur, "", "  ")
		if err != nil {
			return err
		}
		tmp := s.Path("stack.json.tmp")
		if err := os.WriteFile(tmp, append(out, '\n'), 0o644); err != nil {
			return err
		}
		return os.Rename(tmp, s.Path("stack.json"))
	})
}

// Down stops every process Up started (by PID) and removes the test hosts' namespaces. Data in the state
// directory is kept, so a later Up resumes with the same databases and Temporal history.
func Down(ctx context.Context, opts Options) error {
	s, err := New(opts)
	if err != nil {
		return err
	}
	// Hold every lock, in one fixed order (Up never holds two at once), so no Up runs half-way meanwhile.
	for _, name := range []string{Kubernetes, Temporal, OpenStack, Hosts, "network", "state"} {
		unlock, err := s.lock(name)
		if err != nil {
			return err
		}
		defer unlock()
	}
	var errs []error
	// Reverse start order, so clients stop before the servers they use.
	if err := s.downHosts(ctx); err != nil {
		errs = append(errs, err)
	}
	// The real node first: its pods stop through containerd, which must still run.
	if err := s.downRealNode(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := s.downKubeProxy(ctx); err != nil {
		errs = append(errs, err)
	}
	// The rest at once: each may take its whole grace period (a few ignore SIGTERM for 15 s), and one at a
	// time those periods added up to most of a minute.
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name := range s.StartedPIDs() {
		wg.Go(func() {
			if err := s.Stop(name, 15*time.Second); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := s.removeHostNetwork(ctx); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("down: %v", errs)
	}
	return nil
}

// Status describes the stack: endpoints and the processes it started.
func (s *Stack) Status(w io.Writer) {
	fmt.Fprintf(w, "state directory:  %s\n", s.StateDir)
	if s.Kubeconfig != "" {
		fmt.Fprintf(w, "kubernetes:       %s (KUBECONFIG=%s)\n", s.KubeAPI, s.Kubeconfig)
	}
	if s.ChartRepository != "" {
		fmt.Fprintf(w, "chart repository: %s (the project's charts, deploy/charts)\n", s.ChartRepository)
	}
	if s.TemporalAddress != "" {
		fmt.Fprintf(w, "temporal:         %s namespace %s, UI %s\n", s.TemporalAddress, s.TemporalNamespace, s.TemporalUI)
	}
	if s.TemporalTLS != nil {
		fmt.Fprintf(w, "temporal TLS:     %s (mutual TLS: CA %s, client %s; API key %s)\n", s.TemporalTLS.Address, s.TemporalTLS.CA, s.TemporalTLS.Cert, s.TemporalTLS.APIKeyFile)
		fmt.Fprintf(w, "codec:            keys %s, endpoint %s (temporal --codec-endpoint)\n", s.CodecKeys, s.CodecEndpoint)
	}
	if s.CloudsYAML != "" {
		fmt.Fprintf(w, "openstack:        OS_CLIENT_CONFIG_FILE=%s OS_CLOUD=%s\n", s.CloudsYAML, s.CloudName)
	}
	if s.OpenStack != nil {
		fmt.Fprintf(w, "                  keystone %s, image %s, networks %s/%s\n",
			s.OpenStack.AuthURL, s.OpenStack.Image, s.OpenStack.ExternalNetwork, s.OpenStack.TenantNetwork)
	}
	for _, h := range s.TestHosts {
		fmt.Fprintf(w, "test host:        %s ssh %s@%s -p %d (netns %s)\n", h.Name, h.User, h.Address, h.SSHPort, h.Namespace)
	}
	pids := s.StartedPIDs()
	names := make([]string, 0, len(pids))
	for n := range pids {
		names = append(names, n)
	}
	slices.Sort(names)
	fmt.Fprintf(w, "processes (%d):\n", len(names))
	for _, n := range names {
		fmt.Fprintf(w, "  %-28s pid %-8d log %s\n", n, pids[n], s.LogFile(n))
	}
}
