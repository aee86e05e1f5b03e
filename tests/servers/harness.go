// Package servers proves OpenStackServer, OpenStackMachine and the OpenStackCluster bastion end to end:
// the real API server, the real Temporal server, the run's one cloud (`make run`'s, which tests/samples
// builds with stackflow and leaves up: its Keystone, Glance and Neutron with OVN, its Nova and EDPM
// computes) in an OpenStack project of the run's own (SetupOnSamples), and the stackflow-bridge and
// stackflow-worker binaries as processes, so a kill -9 is a real crash. What the workflows leave behind
// is listed straight from Nova and Neutron by the owner tag, and the project must be empty at the end.
// On the same cloud, the upgrade test (upgrade_test.go) proves that upgrading stackflow's worker
// mid-flight breaks nothing.
//
// This file is the harness, shared with the benchmark in tests/bench.
package servers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/quotasets"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/config"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/projects"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	osacts "github.com/stackflow/stackflow/activities/openstack"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/tests/e2e"
	serverwf "github.com/stackflow/stackflow/workflows/servers"
)

// Resources of the served kinds.
var (
	ServersGVR  = schema.GroupVersionResource{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1", Resource: "openstackservers"}
	MachinesGVR = schema.GroupVersionResource{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta1", Resource: "openstackmachines"}
	ClustersGVR = schema.GroupVersionResource{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta1", Resource: "openstackclusters"}
)

// IdentitySecret is the identity Secret the harness creates in its namespace.
const IdentitySecret = "openstack-clouds"

// Env is a running test environment: the e2e harness's stack, clients and freshly built binaries, a
// namespace with the identity Secret, and OpenStack clients of the local cloud.
type Env struct {
	*e2e.Env
	Namespace string // Kubernetes namespace of the run's objects
	Compute   *gophercloud.ServiceClient
	Network   *gophercloud.ServiceClient
	Provider  *gophercloud.ProviderClient
	Endpoint  gophercloud.EndpointOpts
	// Nova is the Nova stackflow deployed for the run (see DeployNova, UseNova); nil before, when the
	// run has no compute API (the stack runs no Nova).
	Nova *e2e.Nova

	// Metadata is the NovaMetadata service of Nova that answers the run's servers.
	Metadata string

	auth gophercloud.AuthOptions
	// cloud is the cloud's name in the identity Secret's clouds.yaml.
	cloud string
	// sharedNova: Nova is another Env's (UseNova) or another package's (SetupOnSamples), which removes it.
	sharedNova bool

	// On the samples' cloud (SetupOnSamples): the run's project, the administrator's clients that made it
	// and check it, and the databases of the Nova's API and cell1.
	project                *projects.Project
	adminIdentity          *gophercloud.ServiceClient
	adminNetwork           *gophercloud.ServiceClient
	adminUser              *tokens.User
	adminDomain            string
	novaAPIDB, novaCell1DB string
}

// HostCount is the number of test hosts the package asks for: its hosts are the last two of them
// (edpm-compute-2 and -3), so it runs beside the packages on others (samples on -0 and -1, edpm and nova
// on e2e.EDPMLaneHosts).
const HostCount = 4

// Setup brings up Kubernetes, Temporal and OpenStack (and the extra components named), builds the
// bridge and the worker, registers temporalNS and creates a namespace holding the identity Secret.
func Setup(ctx context.Context, temporalNS, prefix string, extra ...string) (_ *Env, err error) {
	base, err := e2e.Setup(ctx, e2e.Config{Components: append([]string{local.Kubernetes, local.Temporal, local.OpenStack}, extra...),
		HostCount: HostCount, TemporalNamespace: temporalNS, RunPrefix: prefix, QPS: 200, Burst: 400})
	if err != nil {
		return nil, err
	}
	e := &Env{Env: base, cloud: base.Stack.CloudName}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	s := e.Stack
	if s.CloudsYAML == "" || s.OpenStack == nil {
		return nil, errors.New("the local stack reports no OpenStack cloud (stack.json has no cloudsYAML)")
	}

	yml, err := os.ReadFile(s.CloudsYAML)
	if err != nil {
		return nil, fmt.Errorf("read clouds.yaml: %w", err)
	}
	if err := e.useIdentity(ctx, yml); err != nil {
		return nil, err
	}
	if err := e.connect(ctx, ""); err != nil {
		return nil, err
	}
	return e, nil
}

// useIdentity creates the run's namespace with the identity Secret holding yml (a clouds.yaml of the
// Env's cloud) and keeps its parsed credentials for the clients connect makes.
func (e *Env) useIdentity(ctx context.Context, yml []byte) error {
	e.Namespace = e.Run
	if _, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.Namespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %w", e.Namespace, err)
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: IdentitySecret}, Data: map[string][]byte{osacts.CloudsYAMLKey: yml}}
	if _, err := e.Kube.CoreV1().Secrets(e.Namespace).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create identity Secret: %w", err)
	}
	ao, eo, _, err := clouds.Parse(clouds.WithCloudsYAML(bytes.NewReader(yml)), clouds.WithCloudName(e.cloud), clouds.WithLocations(),
		clouds.WithSecureYAML(strings.NewReader("clouds: {}\n")))
	if err != nil {
		return fmt.Errorf("parse the run's clouds.yaml: %w", err)
	}
	ao.AllowReauth = true
	e.auth, e.Endpoint = ao, eo
	return nil
}

// connect authenticates (the token's catalog names the endpoints) and makes the clients: Nova's of
// computeRegion (none when empty: the stack runs no Nova, DeployNova or UseNova name one), the other
// services' of the cloud's region.
func (e *Env) connect(ctx context.Context, computeRegion string) (err error) {
	if e.Provider, err = config.NewProviderClient(ctx, e.auth); err != nil {
		return fmt.Errorf("authenticate: %w", err)
	}
	e.Compute = nil
	if computeRegion != "" {
		ceo := e.Endpoint
		ceo.Region = computeRegion
		if e.Compute, err = openstack.NewComputeV2(e.Provider, ceo); err != nil {
			return err
		}
		e.Compute.Microversion = osacts.ComputeMicroversion
	}
	if e.Network, err = openstack.NewNetworkV2(e.Provider, e.Endpoint); err != nil {
		return err
	}
	return nil
}

// DeployNova has stackflow deploy the Nova the run's servers boot on, as on `make run`'s cloud: a Nova
// with cells v2 in o.Region in a namespace of its own (with the stack's Secrets a user starts from), its
// compute API on o.APIPort, and the test host named compute joining its cell1 as an EDPM compute (the
// namespace and computes of o are set here). It waits until both are Ready; from then on the run's
// objects (their identityRef) and clients use that region. The Setup must have brought up the test
// hosts (local.Hosts). CloseNova removes it all.
func (e *Env) DeployNova(ctx context.Context, o e2e.NovaOptions, compute string) error {
	var host *local.TestHost
	for _, h := range e.Stack.TestHosts {
		if h.Name == compute {
			host = &h
		}
	}
	if host == nil {
		return fmt.Errorf("no test host %s (Setup with local.Hosts)", compute)
	}
	ns := "nova-" + e.Run
	if err := e.NamespaceWithSecrets(ctx, ns, local.HostsSSHKeySecretName, local.CloudsSecretName, local.ServiceSecretName,
		local.DatabaseAdminSecretName, local.MessageBusAdminSecretName); err != nil {
		return fmt.Errorf("the Nova's namespace: %w", err)
	}
	o.Namespace, o.Computes = ns, []local.TestHost{*host}
	n, err := e.StartNova(ctx, o)
	if err != nil {
		return err
	}
	e.Nova, e.Metadata = n, n.Cell("cell1")+"-metadata"
	if err := n.Wait(); err != nil {
		return err
	}
	return e.connect(ctx, o.Region)
}

// UseNova has the run's objects (their identityRef) and clients use n, a Nova another Env of the
// process deployed with DeployNova: that Env's CloseNova removes it, not this one's.
func (e *Env) UseNova(ctx context.Context, n *e2e.Nova) error {
	if n == nil {
		return errors.New("no Nova to share: DeployNova first")
	}
	e.Nova, e.sharedNova, e.Metadata = n, true, n.Cell("cell1")+"-metadata"
	return e.connect(ctx, n.Region)
}

// CloseNova deletes DeployNova's compute and Nova, checks their teardown and histories (0 when all
// passes, as RunTests), and deletes its namespace when it passed (left for inspection when not).
func (e *Env) CloseNova() int {
	if e.Nova == nil || e.sharedNova {
		return 0
	}
	code := e.Nova.Close()
	if code == 0 {
		_ = e.Kube.CoreV1().Namespaces().Delete(context.Background(), e.Nova.Namespace, metav1.DeleteOptions{})
	} else {
		fmt.Fprintf(os.Stderr, "left namespace %s for inspection\n", e.Nova.Namespace)
	}
	return code
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
	if e.Compute == nil {
		return errNoNova
	}
	unlimited := -1
	_, err = quotasets.Update(ctx, e.Compute, proj.ID, quotasets.UpdateOpts{Instances: &unlimited, Cores: &unlimited, RAM: &unlimited}).Extract()
	if err != nil {
		return fmt.Errorf("lift compute quotas of project %s: %w", proj.Name, err)
	}
	return nil
}

// Close deletes the run's namespace (after its objects are gone) and its OpenStack project, if it has
// one, and closes the clients.
func (e *Env) Close() {
	e.closeProject()
	if e.Kube != nil && e.Namespace != "" {
		_ = e.Kube.CoreV1().Namespaces().Delete(context.Background(), e.Namespace, metav1.DeleteOptions{})
	}
	e.Env.Close()
}

// StartBridge runs the bridge for the server kinds of the run's namespace in the run's Temporal
// namespace until the test ends.
func (e *Env) StartBridge(t testing.TB) *e2e.Proc {
	return e.Env.StartBridge(t, e2e.BridgeOptions{Identity: e.Run + "-bridge", Lease: e.Run,
		Kinds: "OpenStackServer,OpenStackMachine,OpenStackCluster", Namespaces: []string{e.Namespace}, Workers: 16})
}

// StartWorker runs a worker serving every queue in the run's Temporal namespace until the test ends.
func (e *Env) StartWorker(t testing.TB) *e2e.Proc {
	return e.Env.StartWorker(t, e2e.WorkerOptions{Identity: e.Run + "-worker"})
}

// Identity is the identityRef of the run's objects: their servers boot in the region of the run's Nova.
func (e *Env) Identity() map[string]any {
	id := map[string]any{"name": IdentitySecret, "cloudName": e.cloud}
	if e.Nova != nil && e.Nova.Region != "" {
		id["region"] = e.Nova.Region
	}
	return id
}

// ServerSpec is an OpenStackServer/OpenStackMachine spec on the local cloud with ports on the tenant network.
func (e *Env) ServerSpec(flavor string, ports int) map[string]any {
	var ps []any
	for i := 0; i < ports; i++ {
		ps = append(ps, map[string]any{"network": map[string]any{"filter": map[string]any{"name": local.TenantNetwork}}})
	}
	return map[string]any{
		"flavor":      flavor,
		"image":       map[string]any{"filter": map[string]any{"name": local.ImageName}},
		"ports":       ps,
		"identityRef": e.Identity(),
		"tags":        []any{"e2e-" + e.Run},
	}
}

// Flavor is the flavor the run's Nova offers (e2e.NovaFlavor).
func (e *Env) Flavor() string { return e2e.NovaFlavor }

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

// DeleteAndWait deletes objects of the run's namespace and waits until they are gone (their workflows
// removed the finalizer).
func (e *Env) DeleteAndWait(ctx context.Context, gvr schema.GroupVersionResource, names ...string) error {
	return e.Env.DeleteAndWait(ctx, gvr, e.Namespace, names...)
}

// ForceDelete removes objects of the run's namespace left by a failed test, finalizers included.
func (e *Env) ForceDelete(gvr schema.GroupVersionResource, names ...string) {
	e.Env.ForceDelete(gvr, e.Namespace, names...)
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

// errNoNova: a call that needs a compute API before DeployNova or UseNova named one.
var errNoNova = errors.New("no compute API: DeployNova or UseNova first (the stack runs no Nova)")

// ListOwned lists from Nova and Neutron everything carrying the owner marker of the object ref.
func (e *Env) ListOwned(ctx context.Context, ref lifecycle.ObjectRef) (Owned, error) {
	m := osacts.Marker{Owner: serverwf.OwnerOf(ref)}
	var o Owned
	if e.Compute == nil {
		return o, errNoNova
	}
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
