// Package servers proves OpenStackServer, OpenStackMachine and the OpenStackCluster bastion end to end:
// the real API server, the real Temporal server, the real OpenStack of the local stack, and the
// stackflow-bridge and stackflow-worker binaries as processes, so a kill -9 is a real crash. What the
// workflows leave behind is listed straight from Nova and Neutron by the owner tag.
//
// This file is the harness, shared with the benchmark in tests/bench.
package servers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/quotasets"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/config"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/stackflow/stackflow/activities"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/worker"
	"github.com/stackflow/stackflow/workflows"
)

// Resources of the served kinds.
var (
	ServersGVR  = schema.GroupVersionResource{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Resource: "openstackservers"}
	MachinesGVR = schema.GroupVersionResource{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta1", Resource: "openstackmachines"}
	ClustersGVR = schema.GroupVersionResource{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta1", Resource: "openstackclusters"}
)

// IdentitySecret is the identity Secret the harness creates in its namespace.
const IdentitySecret = "openstack-clouds"

// Env is a running test environment: stack, clients, a namespace with the identity Secret, and the
// freshly built binaries.
type Env struct {
	Stack      *local.Stack
	Kube       kubernetes.Interface
	Dyn        dynamic.Interface
	Temporal   client.Client
	Namespace  string // Kubernetes namespace of the run's objects
	TemporalNS string
	Run        string
	Bin        string
	Compute    *gophercloud.ServiceClient
	Network    *gophercloud.ServiceClient
	Provider   *gophercloud.ProviderClient
	Endpoint   gophercloud.EndpointOpts
}

// Setup brings up Kubernetes, Temporal and OpenStack, builds the bridge and the worker into binDir,
// registers temporalNS and creates a namespace holding the identity Secret.
func Setup(ctx context.Context, binDir, temporalNS, prefix string) (*Env, error) {
	s, err := local.Up(ctx, local.Options{Components: []string{local.Kubernetes, local.Temporal, local.OpenStack}})
	if err != nil {
		return nil, fmt.Errorf("local stack: %w", err)
	}
	if s.CloudsYAML == "" || s.OpenStack == nil {
		return nil, errors.New("the local stack reports no OpenStack cloud (stack.json has no cloudsYAML)")
	}
	e := &Env{Stack: s, TemporalNS: temporalNS, Bin: binDir, Run: fmt.Sprintf("%s%06x", prefix, time.Now().UnixNano()&0xffffff)}
	for _, pkg := range []string{"./bridge/cmd/stackflow-bridge", "./worker/cmd/stackflow-worker"} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", binDir+string(filepath.Separator), pkg)
		cmd.Dir = s.RepoRoot
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("build %s: %w", pkg, err)
		}
	}
	cfg, err := s.KubeREST()
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 200, 400
	e.Kube = kubernetes.NewForConfigOrDie(cfg)
	e.Dyn = dynamic.NewForConfigOrDie(cfg)
	if err := e.ensureTemporalNamespace(ctx); err != nil {
		return nil, err
	}
	if e.Temporal, err = client.DialContext(ctx, client.Options{HostPort: s.TemporalAddress, Namespace: temporalNS}); err != nil {
		return nil, err
	}

	yml, err := os.ReadFile(s.CloudsYAML)
	if err != nil {
		return nil, fmt.Errorf("read clouds.yaml: %w", err)
	}
	e.Namespace = e.Run
	if _, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.Namespace}}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create namespace %s: %w", e.Namespace, err)
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: IdentitySecret}, Data: map[string][]byte{activities.CloudsYAMLKey: yml}}
	if _, err := e.Kube.CoreV1().Secrets(e.Namespace).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create identity Secret: %w", err)
	}

	ao, eo, _, err := clouds.Parse(clouds.WithCloudsYAML(bytes.NewReader(yml)), clouds.WithCloudName(s.CloudName), clouds.WithLocations(),
		clouds.WithSecureYAML(strings.NewReader("clouds: {}\n")))
	if err != nil {
		return nil, fmt.Errorf("parse clouds.yaml: %w", err)
	}
	ao.AllowReauth = true
	if e.Provider, err = config.NewProviderClient(ctx, ao); err != nil {
		return nil, fmt.Errorf("authenticate: %w", err)
	}
	e.Endpoint = eo
	if e.Compute, err = openstack.NewComputeV2(e.Provider, eo); err != nil {
		return nil, err
	}
	e.Compute.Microversion = activities.ComputeMicroversion
	if e.Network, err = openstack.NewNetworkV2(e.Provider, eo); err != nil {
		return nil, err
	}
	return e, nil
}

// UnlimitCompute lifts the Nova quotas (instances, cores, RAM) of the cloud's project: the local cloud's
// defaults (10 instances) are below what the benchmark creates at once, and other users of the shared
// stack hold servers in the same project.
func (e *Env) UnlimitCompute(ctx context.Context) error {
	res, ok := e.Provider.GetAuthResult().(tokens.CreateResult)
	if !ok {
		return errors.New("no Keystone v3 token to find the project")
	}
	proj, err := res.ExtractProject()
	if err != nil || proj == nil {
		return fmt.Errorf("project of the token: %v", err)
	}
	unlimited := -1
	_, err = quotasets.Update(ctx, e.Compute, proj.ID, quotasets.UpdateOpts{Instances: &unlimited, Cores: &unlimited, RAM: &unlimited}).Extract()
	if err != nil {
		return fmt.Errorf("lift compute quotas of project %s: %w", proj.Name, err)
	}
	return nil
}

// Close deletes the run's namespace (after its objects are gone) and closes the clients.
func (e *Env) Close() {
	if e.Temporal != nil {
		e.Temporal.Close()
	}
	if e.Kube != nil && e.Namespace != "" {
		_ = e.Kube.CoreV1().Namespaces().Delete(context.Background(), e.Namespace, metav1.DeleteOptions{})
	}
}

func (e *Env) ensureTemporalNamespace(ctx context.Context) error {
	c, err := client.DialContext(ctx, client.Options{HostPort: e.Stack.TemporalAddress, Namespace: e.Stack.TemporalNamespace})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: e.TemporalNS, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour)})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("register namespace %s: %w", e.TemporalNS, err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		nc, err := client.DialContext(ctx, client.Options{HostPort: e.Stack.TemporalAddress, Namespace: e.TemporalNS})
		if err == nil {
			err = worker.EnsureSearchAttributes(ctx, nc, e.TemporalNS, workflows.SearchAttributes)
			if err == nil {
				_, err = nc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: e.TemporalNS, Query: `StackflowKind = "none"`})
			}
			nc.Close()
		}
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("namespace %s not usable: %w", e.TemporalNS, err)
		}
		time.Sleep(time.Second)
	}
}

// Proc is a stackflow binary running as a child process.
type Proc struct {
	Name    string
	argv    []string
	env     []string
	log     string
	metrics string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// StartProc starts a binary of the run (with --metrics-address on a free port) and waits for /healthz.
func (e *Env) StartProc(logDir, name, binary string, args ...string) (*Proc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	p := &Proc{Name: name, metrics: addr, log: filepath.Join(logDir, name+".log"),
		env: append(os.Environ(), "KUBECONFIG="+e.Stack.Kubeconfig)}
	p.argv = append([]string{filepath.Join(e.Bin, binary), "--metrics-address", addr}, args...)
	return p, p.Start()
}

// StartBridge runs the bridge for the server kinds in the run's Temporal namespace.
func (e *Env) StartBridge(logDir string) (*Proc, error) {
	return e.StartProc(logDir, "bridge", "stackflow-bridge", "--temporal-address", e.Stack.TemporalAddress, "--namespace", e.TemporalNS,
		"--kinds", "OpenStackServer,OpenStackMachine,OpenStackCluster", "--identity", e.Run+"-bridge",
		"--leader-election-name", e.Run, "--lease-duration", "6s", "--renew-deadline", "4s", "--retry-period", "1s", "--workers", "16")
}

// StartWorker runs a worker serving every queue in the run's Temporal namespace.
func (e *Env) StartWorker(logDir string) (*Proc, error) {
	return e.StartProc(logDir, "worker", "stackflow-worker", "--temporal-address", e.Stack.TemporalAddress, "--namespace", e.TemporalNS,
		"--temporal-ui", e.Stack.TemporalUI, "--identity", e.Run+"-worker", "--stop-timeout", "5s")
}

// Start (re)starts the process and waits until it serves /healthz.
func (p *Proc) Start() error {
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "=== %s start\n", time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + p.metrics + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited at start:\n%s", p.Name, p.Tail(30))
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s did not serve /healthz:\n%s", p.Name, p.Tail(30))
}

// Kill9 crashes the process: no shutdown code runs.
func (p *Proc) Kill9() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-exited
}

// Stop asks the process to shut down and kills it if it does not within 40 s.
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
	case <-time.After(40 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
}

// Tail is the end of the process's log.
func (p *Proc) Tail(n int) string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// Identity is the identityRef of the run's objects.
func (e *Env) Identity() map[string]any {
	return map[string]any{"name": IdentitySecret, "cloudName": e.Stack.CloudName}
}

// ServerSpec is an OpenStackServer/OpenStackMachine spec on the local cloud with ports on the tenant network.
func (e *Env) ServerSpec(flavor string, ports int) map[string]any {
	var ps []any
	for i := 0; i < ports; i++ {
		ps = append(ps, map[string]any{"network": map[string]any{"filter": map[string]any{"name": e.Stack.OpenStack.TenantNetwork}}})
	}
	return map[string]any{
		"flavor":      flavor,
		"image":       map[string]any{"filter": map[string]any{"name": e.Stack.OpenStack.Image}},
		"ports":       ps,
		"identityRef": e.Identity(),
		"tags":        []any{"e2e-" + e.Run},
	}
}

// Flavor is the smallest flavor of the local cloud.
func (e *Env) Flavor() string { return e.Stack.OpenStack.Flavors[0] }

// Object builds an object of the run.
func (e *Env) Object(apiVersion, kind, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": e.Namespace},
		"spec":     spec,
	}}
}

// Create creates an object and returns it as stored.
func (e *Env) Create(ctx context.Context, gvr schema.GroupVersionResource, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return e.Dyn.Resource(gvr).Namespace(e.Namespace).Create(ctx, u, metav1.CreateOptions{})
}

// Get reads an object of the run.
func (e *Env) Get(ctx context.Context, gvr schema.GroupVersionResource, name string) (*unstructured.Unstructured, error) {
	return e.Dyn.Resource(gvr).Namespace(e.Namespace).Get(ctx, name, metav1.GetOptions{})
}

// MergePatch merge-patches an object of the run.
func (e *Env) MergePatch(ctx context.Context, gvr schema.GroupVersionResource, name, patch string) error {
	_, err := e.Dyn.Resource(gvr).Namespace(e.Namespace).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// WaitFor polls an object until cond holds or ctx ends; it returns the last error cond gave.
func (e *Env) WaitFor(ctx context.Context, gvr schema.GroupVersionResource, name string, cond func(u *unstructured.Unstructured) error) (*unstructured.Unstructured, error) {
	var last error
	for {
		u, err := e.Get(ctx, gvr, name)
		if err == nil {
			if last = cond(u); last == nil {
				return u, nil
			}
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return u, fmt.Errorf("%s %s: %w (last: %v)", gvr.Resource, name, ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// DeleteAndWait deletes objects and waits until they are gone (their workflows removed the finalizer).
func (e *Env) DeleteAndWait(ctx context.Context, gvr schema.GroupVersionResource, names ...string) error {
	r := e.Dyn.Resource(gvr).Namespace(e.Namespace)
	for _, n := range names {
		if err := r.Delete(ctx, n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	for _, n := range names {
		for {
			_, err := r.Get(ctx, n, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s %s still exists: %w", gvr.Resource, n, ctx.Err())
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
	return nil
}

// ForceDelete removes objects left by a failed test, finalizers included.
func (e *Env) ForceDelete(gvr schema.GroupVersionResource, names ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := e.Dyn.Resource(gvr).Namespace(e.Namespace)
	for _, n := range names {
		_ = r.Delete(ctx, n, metav1.DeleteOptions{})
		_, _ = r.Patch(ctx, n, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	}
}

// RefOf is the ObjectRef the bridge derives for u.
func RefOf(kind string, gvr schema.GroupVersionResource, u *unstructured.Unstructured) lifecycle.ObjectRef {
	return lifecycle.ObjectRef{Group: gvr.Group, Version: gvr.Version, Kind: kind, Resource: gvr.Resource,
		Namespace: u.GetNamespace(), Name: u.GetName(), UID: string(u.GetUID())}
}

// Owned is what OpenStack holds with an owner's tag (or, for floating IPs and ports not tagged yet, its
// marker description).
type Owned struct {
	Servers     []servers.Server
	Ports       []ports.Port
	FloatingIPs []floatingips.FloatingIP
}

// Count is the number of resources.
func (o Owned) Count() int { return len(o.Servers) + len(o.Ports) + len(o.FloatingIPs) }

func (o Owned) String() string {
	var s []string
	for _, x := range o.Servers {
		s = append(s, "server "+x.Name+" "+x.ID+" "+x.Status)
	}
	for _, x := range o.Ports {
		s = append(s, "port "+x.Name+" "+x.ID)
	}
	for _, x := range o.FloatingIPs {
		s = append(s, "floating IP "+x.FloatingIP+" "+x.ID)
	}
	return "[" + strings.Join(s, "; ") + "]"
}

// ListOwned lists from Nova and Neutron everything carrying the owner marker of the object ref.
func (e *Env) ListOwned(ctx context.Context, ref lifecycle.ObjectRef) (Owned, error) {
	m := activities.Marker{Owner: workflows.OwnerOf(ref)}
	var o Owned
	pages, err := servers.List(e.Compute, servers.ListOpts{Tags: m.OwnerTag()}).AllPages(ctx)
	if err != nil {
		return o, err
	}
	if o.Servers, err = servers.ExtractServers(pages); err != nil {
		return o, err
	}
	ppages, err := ports.List(e.Network, ports.ListOpts{}).AllPages(ctx)
	if err != nil {
		return o, err
	}
	all, err := ports.ExtractPorts(ppages)
	if err != nil {
		return o, err
	}
	for _, p := range all {
		if m.Owns(p.Tags, p.Description) {
			o.Ports = append(o.Ports, p)
		}
	}
	fpages, err := floatingips.List(e.Network, floatingips.ListOpts{}).AllPages(ctx)
	if err != nil {
		return o, err
	}
	fips, err := floatingips.ExtractFloatingIPs(fpages)
	if err != nil {
		return o, err
	}
	for _, f := range fips {
		if m.Owns(f.Tags, f.Description) {
			o.FloatingIPs = append(o.FloatingIPs, f)
		}
	}
	return o, nil
}
