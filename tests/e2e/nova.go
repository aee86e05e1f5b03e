package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/stackflow/stackflow/deploy/local"
)

// NovaKinds are the kinds of the Nova control plane, as a bridge's --kinds names them.
const NovaKinds = "Nova,NovaCell,NovaAPI,NovaScheduler,NovaConductor,NovaMetadata,NovaNoVNCProxy"

// GVRNova is the resource of the Nova kind.
var GVRNova = schema.GroupVersionResource{Group: "nova.openstack.org", Version: "v1beta1", Resource: "novas"}

// NovaOptions describe a Nova that a package's tests compose on.
type NovaOptions struct {
	// Namespace is the Kubernetes namespace of the Nova and of the computes that join it; it holds the
	// stack's Secrets a user starts from: the nova service user's (osp-secret) and the administrators of
	// MariaDB and RabbitMQ.
	Namespace string
	// Region is the Keystone region of its compute API; APIPort the port that API listens on (the
	// samples' Nova and each package's have ports of their own, so an endpoint's URL tells which it is).
	Region  string
	APIPort int
	// Computes are test hosts that join the Nova's cell1 as EDPM computes, as `make run`'s sample computes
	// join the samples' Nova: a role with the cell annotation and the cloud's OVN southbound database, an
	// OpenStackDataPlaneNode per host and its NovaExternalCompute (Nova's fake driver: the hosts have no
	// hypervisor), served by the Nova's own bridge and worker. A package whose tests boot servers boots
	// them there; the namespace must hold the hosts' SSH key Secret (edpm-ssh-key) too.
	Computes []local.TestHost
	// CellMetadataPort, when set, has cell1 serve metadata on that port (its NovaMetadata,
	// <name>-cell1-metadata); the Nova's global metadata service stays disabled.
	CellMetadataPort int
}

// ComputeKinds are the data-plane kinds a Nova's bridge serves when it has computes.
const ComputeKinds = "OpenStackDataPlaneRole,OpenStackDataPlaneNode,NovaExternalCompute"

// Resources of a Nova's computes.
var (
	// GVRDataPlaneRole and GVRDataPlaneNode are the resources of the data-plane role and node kinds.
	GVRDataPlaneRole = schema.GroupVersionResource{Group: "dataplane.openstack.org", Version: "v1beta1", Resource: "openstackdataplaneroles"}
	GVRDataPlaneNode = schema.GroupVersionResource{Group: "dataplane.openstack.org", Version: "v1beta1", Resource: "openstackdataplanenodes"}
	// GVRNovaExternalCompute is the resource of the NovaExternalCompute kind.
	GVRNovaExternalCompute = schema.GroupVersionResource{Group: "nova.openstack.org", Version: "v1beta1", Resource: "novaexternalcomputes"}
)

// computeRole is the role of a Nova's computes.
const computeRole = "compute"

// computeManifests are the role, the nodes and their NovaExternalComputes, as a user writes them (the
// samples' way): the node's cell annotation would create the NovaExternalCompute, and the one applied
// beside it adds what only a person decides, the fake driver, which plugs no VIF (so no waiting for one).
func computeManifests(o NovaOptions, run string) []string {
	out := []string{fmt.Sprintf(`
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneRole
metadata:
  name: %s
  annotations: {nova.openstack.org/cell: cell1}
spec:
  preProvisioned: true
  nodeTemplate:
    ansibleUser: root
    ansibleSSHPrivateKeySecret: edpm-ssh-key
    managementNetwork: ctlplane
    ansibleVars: {edpm_ovn_sb_connection: %q}
`, computeRole, local.OVNSouthbound)}
	for _, h := range o.Computes {
		out = append(out, fmt.Sprintf(`
apiVersion: nova.openstack.org/v1beta1
kind: NovaExternalCompute
metadata: {name: %[1]s}
spec:
  dataplaneNodeName: %[1]s
  cellName: cell1
  sshKeySecretName: edpm-ssh-key
  inventoryConfigMapName: %[1]s-inventory
  deploy: true
  customServiceConfig: |
    [DEFAULT]
    compute_driver = fake.FakeDriver
    vif_plugging_is_fatal = false
    vif_plugging_timeout = 0
`, h.Name), fmt.Sprintf(`
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneNode
metadata: {name: %s}
spec: {role: %s, hostName: %s, ansibleHost: %s, deploy: true}
`, h.Name, computeRole, ComputeHostName(run, h), h.Address))
	}
	return out
}

// ComputeHostName is the Nova host name of a compute of the run on test host h: the run's own, so Nova's
// and Neutron's records (services, hypervisors, agents, OVN chassis) of one run never meet another's.
func ComputeHostName(run string, h local.TestHost) string { return run + "-" + h.Name }

// Nova is a Nova control plane (cell0 and cell1, named nova) that stackflow deploys for a package whose
// tests compose on it: their EDPM computes join its cell1 and their servers boot there, as they do on
// the cloud `make run` builds. Its bridge and worker run in a Temporal namespace of their own, so the
// tests' own workers (crashed, restarted, stopped between tests) leave it alone. Start it in TestMain
// before m.Run (it deploys while the first test's nodes run phase 0), wait for it with WaitReady where a
// test needs it, and Close it after m.Run, pass or fail: the Nova's teardown drops its databases and
// vhosts, and its histories are scanned like the package's.
type Nova struct {
	NovaOptions
	// Name is the Nova's object name; its services and cells are named after it (nova-api, nova-cell1).
	Name string

	env    *Env
	parent *Env
	scope  *Scope
	ready  sync.Once
	err    error
}

// NovaImage is the image of the Nova's services: make images builds it, the stack imports it.
const NovaImage = "stackflow-nova"

// novaManifest is the Nova CR: on the real node, databases named after the run, vhosts after the namespace, the API on
// its own port in its own region, no global metadata service (cell1's when CellMetadataPort asks for
// it), no console proxy (no test uses it), and the flavor NovaFlavor the tests' servers boot with (a
// Nova's API database starts with none).
func novaManifest(o NovaOptions, run string) string {
	cellMetadata := ""
	if o.CellMetadataPort != 0 {
		cellMetadata = fmt.Sprintf(`
      metadataServiceTemplate:
        enabled: true
        customServiceConfig: |
          [DEFAULT]
          metadata_listen_port = %d`, o.CellMetadataPort)
	}
	return fmt.Sprintf(`
apiVersion: nova.openstack.org/v1beta1
kind: Nova
metadata: {name: nova, namespace: %[1]s}
spec:
  secret: %[2]s
  keystoneAuthURL: http://%[3]s:5000/v3
  region: %[4]s
  nodeSelector: {%[5]s: "true"}
  tolerations: [{key: %[5]s, operator: Exists, effect: NoSchedule}]
  containerImage: %[6]s
  apiDatabase: {hostname: %[3]s, database: %[7]s_api, adminSecret: %[8]s}
  apiMessageBus: {adminSecret: %[9]s, transportURLSecret: nova-api-transport}
  apiServiceTemplate:
    customServiceConfig: |
      [DEFAULT]
      osapi_compute_listen_port = %[10]d
  metadataServiceTemplate: {enabled: false}
  cellTemplates:
    cell0:
      cellDatabase: {hostname: %[3]s, database: %[7]s_cell0, adminSecret: %[8]s}
    cell1:
      cellDatabase: {hostname: %[3]s, database: %[7]s_cell1, adminSecret: %[8]s}
      cellMessageBus: {adminSecret: %[9]s, transportURLSecret: nova-cell1-transport}
      noVNCProxyServiceTemplate: {enabled: false}%[11]s
  flavors:
  - {name: %[12]s, vcpus: 1, ram: 512, disk: 1}
`, o.Namespace, local.ServiceSecretName, local.HostGateway, o.Region, local.RealNodeLabel, local.ImageRef(NovaImage),
		run, local.DatabaseAdminSecretName, local.MessageBusAdminSecretName, o.APIPort, cellMetadata, NovaFlavor)
}

// NovaFlavor is the flavor a Nova of NovaOptions offers, the smallest that boots the stack's image.
const NovaFlavor = "m1.tiny"

// StartNova starts the Nova's own bridge and worker and creates the Nova; it does not wait for it.
func (e *Env) StartNova(ctx context.Context, o NovaOptions) (_ *Nova, err error) {
	if o.Namespace == "" || o.Region == "" || o.APIPort == 0 {
		return nil, errors.New("e2e: a Nova needs a namespace, a region and an API port")
	}
	tns := e.TemporalNamespace + "-nova"
	if err := EnsureTemporalNamespace(ctx, e.Stack, tns); err != nil {
		return nil, err
	}
	tc, err := Dial(ctx, e.Stack, tns)
	if err != nil {
		return nil, err
	}
	ne := &Env{Stack: e.Stack, Dir: e.Dir, Bin: e.Bin, Run: e.Run, TemporalNamespace: tns, REST: e.REST, Kube: e.Kube,
		Dyn: e.Dyn, Temporal: tc, started: time.Now(), noRecord: true}
	scope, err := NewScope(tns)
	if err != nil {
		tc.Close()
		return nil, err
	}
	n := &Nova{NovaOptions: o, Name: "nova", env: ne, parent: e, scope: scope}
	defer func() {
		if err != nil {
			_ = scope.Close()
			tc.Close()
		}
	}()
	kinds := NovaKinds
	if len(o.Computes) > 0 {
		kinds += "," + ComputeKinds
		// A host holding what a teardown should have removed fails here (an earlier package leaked it);
		// phase 0's records go, as on a re-imaged host.
		for _, h := range o.Computes {
			if err := prepareHost(h); err != nil {
				return nil, err
			}
		}
	}
	if err := scope.Do(func() {
		// Its namespace only: the objects of other namespaces are not this Nova's bridge's business.
		ne.StartBridge(scope, BridgeOptions{Identity: e.Run + "-nova-bridge", Kinds: kinds, Namespaces: []string{o.Namespace}})
		ne.StartWorker(scope, WorkerOptions{Identity: e.Run + "-nova-worker"})
	}); err != nil {
		return nil, err
	}
	// The computes first: their phase 0 runs while the control plane comes up.
	var manifests []string
	if len(o.Computes) > 0 {
		manifests = computeManifests(o, e.Run)
	}
	for _, m := range append(manifests, novaManifest(o, e.Run)) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(m), &u.Object); err != nil {
			return nil, fmt.Errorf("manifest: %w", err)
		}
		gvr := map[string]schema.GroupVersionResource{"Nova": GVRNova, "OpenStackDataPlaneRole": GVRDataPlaneRole,
			"OpenStackDataPlaneNode": GVRDataPlaneNode, "NovaExternalCompute": GVRNovaExternalCompute}[u.GetKind()]
		if _, err := e.Dyn.Resource(gvr).Namespace(o.Namespace).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("create %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	e.mu.Lock()
	e.regions = append(e.regions, o.Region)
	e.mu.Unlock()
	return n, nil
}

// Cell is the name of the NovaCell object of a cell of the Nova.
func (n *Nova) Cell(cell string) string { return n.Name + "-" + cell }

// WaitReady waits until the Nova is Ready (its flavors created) and its computes are (registered and
// mapped to cell1: a server can land there) and, the first time, adds its Secrets' values to the
// forbidden values of its histories.
func (n *Nova) WaitReady(t TB) {
	t.Helper()
	ready := func(gvr schema.GroupVersionResource, name string) func() (bool, string) {
		return func() (bool, string) {
			u, err := n.env.Dyn.Resource(gvr).Namespace(n.Namespace).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return Ready(u), Summary(u)
		}
	}
	WaitFor(t, "Nova "+n.Name+" (region "+n.Region+") Ready", 12*time.Minute, stopOnFailed(t, "Nova "+n.Name, ready(GVRNova, n.Name)))
	for _, h := range n.Computes {
		WaitFor(t, "compute "+h.Name+" of Nova "+n.Name+" Ready", 10*time.Minute,
			stopOnFailed(t, "compute "+h.Name+" of Nova "+n.Name, ready(GVRNovaExternalCompute, h.Name)))
	}
	n.ready.Do(func() { n.err = n.prepare() })
	if n.err != nil {
		t.Fatalf("Nova %s: %v", n.Name, n.err)
	}
}

// stopOnFailed wraps a readiness check (whose summary starts with the phase): an object that stays Failed
// for 30 s waits for a person's retry, so the wait ends there, with its reason, not at its timeout.
func stopOnFailed(t TB, what string, check func() (bool, string)) func() (bool, string) {
	var failedSince time.Time
	return func() (bool, string) {
		ok, seen := check()
		switch {
		case !strings.HasPrefix(seen, "phase=Failed "):
			failedSince = time.Time{}
		case failedSince.IsZero():
			failedSince = time.Now()
		case time.Since(failedSince) > 30*time.Second:
			t.Fatalf("%s failed: %s", what, seen)
		}
		return ok, seen
	}
}

// Wait is WaitReady for a package's TestMain, whose tests all need the Nova.
func (n *Nova) Wait() error {
	start := time.Now()
	if err := n.scope.Do(func() { n.WaitReady(n.scope) }); err != nil {
		return err
	}
	n.scope.Logf("Nova %s and %d compute(s) Ready in %s", n.Name, len(n.Computes), time.Since(start).Round(time.Second))
	return nil
}

func (n *Nova) prepare() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return n.env.ForbidSecrets(ctx, n.Namespace)
}

// SuperconductorConfig is the path, seen from this machine, of the nova.conf cell0's conductor loaded
// (its container's root through /proc/PID/root): with it, nova-manage sees this Nova's API database and
// cells, as an operator's would.
func (n *Nova) SuperconductorConfig(t TB) string {
	t.Helper()
	ctx := context.Background()
	pods, err := n.env.Kube.CoreV1().Pods(n.Namespace).List(ctx,
		metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + n.Cell("cell0") + "-conductor"})
	if err != nil {
		t.Fatalf("pods of %s: %v", n.Cell("cell0")+"-conductor", err)
	}
	for _, p := range pods.Items {
		if p.Labels["stackflow.io/job"] != "" {
			continue
		}
		if pid := RunningContainerPID(ctx, n.env.Stack, p); pid != 0 {
			return fmt.Sprintf("/proc/%d/root/var/lib/openstack/config/nova.conf", pid)
		}
	}
	t.Fatalf("no running pod of %s", n.Cell("cell0")+"-conductor")
	return ""
}

// Close deletes the Nova's computes, then the Nova, and waits until their teardowns finished (a Nova
// waits for the computes of its cells: the tests deleted theirs), checks that the computes' hosts hold
// nothing of them, checks the histories of its namespace like the package's (0 when all passes), and
// stops its bridge and worker.
func (n *Nova) Close() int {
	code := 0
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	start := time.Now()
	if len(n.Computes) > 0 {
		var names []string
		for _, h := range n.Computes {
			names = append(names, h.Name)
		}
		// What the user applied goes as the user would delete it: the computes, then their nodes and role.
		for _, step := range []struct {
			gvr   schema.GroupVersionResource
			names []string
		}{{GVRNovaExternalCompute, names}, {GVRDataPlaneNode, names}, {GVRDataPlaneRole, []string{computeRole}}} {
			if err := n.env.DeleteAndWait(ctx, step.gvr, n.Namespace, step.names...); err != nil {
				n.scope.Errorf("the computes' teardown: %v", err)
				code = 1
				break
			}
		}
		if code == 0 {
			for _, h := range n.Computes {
				if left := Leftovers(h); len(left) > 0 {
					n.scope.Errorf("host %s after its compute was deleted (a teardown that leaked): %s", h.Name, strings.Join(left, "; "))
					code = 1
				}
			}
			n.scope.Logf("%d compute(s) of Nova %s torn down in %s", len(n.Computes), n.Name, time.Since(start).Round(time.Second))
		}
	}
	if err := n.env.DeleteAndWait(ctx, GVRNova, n.Namespace, n.Name); err != nil {
		n.scope.Errorf("the Nova's teardown: %v", err)
		code = 1
	} else {
		n.scope.Logf("Nova %s torn down in %s", n.Name, time.Since(start).Round(time.Second))
	}
	if code == 0 {
		code = n.env.CheckHistories()
	}
	_ = n.scope.Close()
	n.env.Temporal.Close()
	return code
}
