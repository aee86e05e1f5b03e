package servers

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/services"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/layer3/floatingips"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stackflow/stackflow/activities/openstack"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/tests/e2e"
	serverwf "github.com/stackflow/stackflow/workflows/servers"
)

func clusterSpec(bastion map[string]any) map[string]any {
	return map[string]any{
		"identityRef":     env.Identity(),
		"externalNetwork": map[string]any{"filter": map[string]any{"name": local.ExternalNetwork}},
		"bastion":         map[string]any{"enabled": true, "spec": bastion},
	}
}

// computeHosts are the Nova host names of the cloud's computes that are up (their services,
// hypervisors and host mappings): a server boots on one of them.
func computeHosts(t *testing.T) []string {
	t.Helper()
	svcs, err := env.Computes(context.Background())
	require.NoError(t, err)
	require.NotEmpty(t, svcs, "the cloud's nova-compute services that are up")
	var hosts []string
	for _, s := range svcs {
		hosts = append(hosts, s.Host)
	}
	return hosts
}

func gone(err error) bool { return gophercloud.ResponseCodeIs(err, 404) }

// requireOwned checks what OpenStack holds for an object, by its owner tag.
func requireOwned(t *testing.T, ref lifecycle.ObjectRef, nServers, nPorts, nFIPs int) Owned {
	t.Helper()
	o, err := env.ListOwned(context.Background(), ref)
	require.NoError(t, err)
	require.Equal(t, []int{nServers, nPorts, nFIPs}, []int{len(o.Servers), len(o.Ports), len(o.FloatingIPs)},
		"servers, ports, floating IPs of %s: %s", ref, o)
	return o
}

func TestServerWithTwoPortsAndBastionWithFloatingIPThenBastionReplacement(t *testing.T) {
	stack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	srvName, clName := "web-"+env.Run, "c1-"+env.Run
	t.Cleanup(func() { env.ForceDelete(ServersGVR, srvName); env.ForceDelete(ClustersGVR, clName) })

	start := time.Now()
	srv, err := env.Create(ctx, ServersGVR, env.Object("infrastructure.cluster.x-k8s.io/v1alpha1", "OpenStackServer", srvName, env.ServerSpec(env.Flavor(), 2)))
	require.NoError(t, err)
	cl, err := env.Create(ctx, ClustersGVR, env.Object("infrastructure.cluster.x-k8s.io/v1beta1", "OpenStackCluster", clName, clusterSpec(env.ServerSpec(env.Flavor(), 1))))
	require.NoError(t, err)
	srvRef, clRef := e2e.Ref("OpenStackServer", ServersGVR, srv), e2e.Ref("OpenStackCluster", ClustersGVR, cl)
	env.RecordPath(lifecycle.WorkflowID(clRef), "bastion-replaced", e2e.All(e2e.Scheduled("DeleteServer"), e2e.Not(e2e.Signaled(lifecycle.SignalDelete))))

	srv, err = env.WaitFor(ctx, ServersGVR, srvName, ready)
	require.NoError(t, err)
	cl, err = env.WaitFor(ctx, ClustersGVR, clName, ready)
	require.NoError(t, err)
	t.Logf("server and bastion ACTIVE with complete status in %s", time.Since(start).Round(time.Millisecond))

	// The server: ACTIVE, two ports, both addresses, everything in status.
	st := srv.Object["status"].(map[string]any)
	require.Equal(t, true, st["ready"])
	require.Equal(t, "ACTIVE", st["instanceState"])
	id, _ := st["instanceID"].(string)
	require.NotEmpty(t, id)
	portStatus, _, _ := unstructured.NestedSlice(srv.Object, "status", "resources", "ports")
	require.Len(t, portStatus, 2)
	addrs, _, _ := unstructured.NestedSlice(srv.Object, "status", "addresses")
	require.Len(t, addrs, 2, "one address per port")
	nova, err := servers.Get(ctx, env.Compute, id).Extract()
	require.NoError(t, err)
	require.Equal(t, "ACTIVE", nova.Status)
	// On an EDPM compute of the Nova stackflow deployed (openstack server show's host and hypervisor).
	require.Contains(t, computeHosts(t), nova.Host, "host of server %s", id)
	require.Equal(t, nova.Host, nova.HypervisorHostname, "host and hypervisor of server %s", id)
	require.Len(t, nova.Addresses[local.TenantNetwork], 2)
	// The Nova's metadata service answers for it, as the OVN metadata agent on its compute would ask.
	env.InstanceMetadata(ctx, t, env.Nova.Namespace, env.Metadata, env.Host(t, nova.Host), id, nova.TenantID,
		addrs[0].(map[string]any)["address"].(string))
	owned := requireOwned(t, srvRef, 1, 2, 0)
	names := []string{owned.Ports[0].Name, owned.Ports[1].Name}
	require.ElementsMatch(t, []string{srvName + "-0", srvName + "-1"}, names, "ports have deterministic names")

	// The bastion: ACTIVE with a floating IP from the external network.
	b1 := bastionStatus(t, cl)
	require.Equal(t, clName+"-bastion-1", b1["name"])
	require.Equal(t, "ACTIVE", b1["state"])
	require.NotEmpty(t, b1["ip"])
	require.NotEmpty(t, b1["floatingIP"])
	o1 := requireOwned(t, clRef, 1, 1, 1)
	require.Equal(t, b1["floatingIP"], o1.FloatingIPs[0].FloatingIP)
	require.Equal(t, o1.Ports[0].ID, o1.FloatingIPs[0].PortID)

	// A spec change replaces the bastion; the old server, port and address are gone.
	bastion := env.ServerSpec(env.Flavor(), 1)
	bastion["tags"] = []any{"e2e-" + env.Run, "second"}
	start = time.Now()
	require.NoError(t, env.MergePatch(ctx, ClustersGVR, clName, mustJSON(map[string]any{"spec": map[string]any{"bastion": map[string]any{"spec": bastion}}})))
	cl, err = env.WaitFor(ctx, ClustersGVR, clName, ready)
	require.NoError(t, err)
	t.Logf("bastion replaced in %s", time.Since(start).Round(time.Millisecond))
	b2 := bastionStatus(t, cl)
	require.Equal(t, clName+"-bastion-2", b2["name"])
	o2 := requireOwned(t, clRef, 1, 1, 1)
	require.NotEqual(t, o1.Servers[0].ID, o2.Servers[0].ID)
	_, err = servers.Get(ctx, env.Compute, o1.Servers[0].ID).Extract()
	require.True(t, gone(err), "old bastion server still there: %v", err)
	_, err = ports.Get(ctx, env.Network, o1.Ports[0].ID).Extract()
	require.True(t, gone(err), "old bastion port still there: %v", err)
	_, err = floatingips.Get(ctx, env.Network, o1.FloatingIPs[0].ID).Extract()
	require.True(t, gone(err), "old bastion floating IP still there: %v", err)

	// Pinning the current address, then changing the spec again: the address survives the replacement.
	pinned := b2["floatingIP"].(string)
	bastion["tags"] = []any{"e2e-" + env.Run, "third"}
	require.NoError(t, env.MergePatch(ctx, ClustersGVR, clName, mustJSON(map[string]any{"spec": map[string]any{"bastion": map[string]any{"spec": bastion, "floatingIP": pinned}}})))
	cl, err = env.WaitFor(ctx, ClustersGVR, clName, ready)
	require.NoError(t, err)
	b3 := bastionStatus(t, cl)
	require.Equal(t, clName+"-bastion-3", b3["name"])
	require.Equal(t, pinned, b3["floatingIP"])
	o3 := requireOwned(t, clRef, 1, 1, 1)
	require.Equal(t, o2.FloatingIPs[0].ID, o3.FloatingIPs[0].ID, "the pinned floating IP is kept")
	require.Equal(t, o3.Ports[0].ID, o3.FloatingIPs[0].PortID)

	// Deleting both removes everything they created.
	start = time.Now()
	require.NoError(t, env.DeleteAndWait(ctx, ServersGVR, srvName))
	require.NoError(t, env.DeleteAndWait(ctx, ClustersGVR, clName))
	t.Logf("both deleted in %s", time.Since(start).Round(time.Millisecond))
	requireOwned(t, srvRef, 0, 0, 0)
	requireOwned(t, clRef, 0, 0, 0)
}

func TestBadFlavorWaitsWithOpenStacksMessageAndLeavesNothing(t *testing.T) {
	stack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	name := "bad-" + env.Run
	t.Cleanup(func() { env.ForceDelete(ServersGVR, name) })
	u, err := env.Create(ctx, ServersGVR, env.Object("infrastructure.cluster.x-k8s.io/v1alpha1", "OpenStackServer", name, env.ServerSpec("no-such-flavor", 2)))
	require.NoError(t, err)
	ref := e2e.Ref("OpenStackServer", ServersGVR, u)
	env.RecordPath(lifecycle.WorkflowID(ref), "permanent-error", e2e.All(e2e.Scheduled("ResolveServer"), e2e.Not(e2e.Signaled(lifecycle.SignalDelete))))
	u, err = env.WaitFor(ctx, ServersGVR, name, waiting)
	require.NoError(t, err)
	_, reason, msg := condition(u, "Ready")
	require.Equal(t, openstack.ErrOSNotFound, reason)
	require.Contains(t, msg, "Flavor no-such-flavor could not be found.", "Nova's own message")
	// A flavor may be on its way (a new Nova creates its own): the server looks again by itself.
	require.Contains(t, msg, "tried again by itself at")
	requireOwned(t, ref, 0, 0, 0)
	require.NoError(t, env.DeleteAndWait(ctx, ServersGVR, name))
	requireOwned(t, ref, 0, 0, 0)
}

// TestNoHostYetWaitsThenBoots: while every compute of the Nova is disabled, as one still joining its
// cell is to the scheduler, Nova finds no host for a server; the server waits (phase Waiting, reason
// NoValidHost with Nova's fault), its ERROR instance deleted and its port kept, and boots by itself once
// the computes take servers again.
func TestNoHostYetWaitsThenBoots(t *testing.T) {
	stack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	svcs, err := env.Computes(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, svcs, "the Nova's compute services")
	setStatus := func(status services.ServiceStatus, why string) error {
		for _, s := range svcs {
			if _, err := services.Update(ctx, env.Compute, s.ID, services.UpdateOpts{Status: status, DisabledReason: why}).Extract(); err != nil {
				return err
			}
		}
		return nil
	}
	require.NoError(t, setStatus(services.ServiceDisabled, "test: no host for servers yet"))
	t.Cleanup(func() { _ = setStatus(services.ServiceEnabled, "") })

	name := "nohost-" + env.Run
	t.Cleanup(func() { env.ForceDelete(ServersGVR, name) })
	u, err := env.Create(ctx, ServersGVR, env.Object("infrastructure.cluster.x-k8s.io/v1alpha1", "OpenStackServer", name, env.ServerSpec(env.Flavor(), 1)))
	require.NoError(t, err)
	ref := e2e.Ref("OpenStackServer", ServersGVR, u)
	u, err = env.WaitFor(ctx, ServersGVR, name, waitingForAHost)
	require.NoError(t, err)
	_, _, msg := condition(u, "Ready")
	require.Contains(t, msg, "No valid host was found", "Nova's fault")
	require.Contains(t, msg, "tried again by itself at")
	requireOwned(t, ref, 0, 1, 0)

	require.NoError(t, setStatus(services.ServiceEnabled, ""))
	requireBootsOnTheComputeThenGoes(ctx, t, name, ref)
}

// waitingForAHost is a WaitFor condition: phase Waiting with reason NoValidHost.
func waitingForAHost(u *unstructured.Unstructured) error {
	if err := waiting(u); err != nil {
		return err
	}
	if _, reason, msg := condition(u, "Ready"); reason != serverwf.ReasonNoValidHost {
		return fmt.Errorf("waiting with %s: %s", reason, msg)
	}
	return nil
}

// requireBootsOnTheComputeThenGoes waits until the server is Ready, ACTIVE on one of the cloud's
// computes, then deletes it and requires that nothing of it is left.
func requireBootsOnTheComputeThenGoes(ctx context.Context, t *testing.T, name string, ref lifecycle.ObjectRef) {
	t.Helper()
	_, err := env.WaitFor(ctx, ServersGVR, name, ready)
	require.NoError(t, err)
	o := requireOwned(t, ref, 1, 1, 0)
	require.Equal(t, "ACTIVE", o.Servers[0].Status)
	require.Contains(t, computeHosts(t), o.Servers[0].Host)
	require.NoError(t, env.DeleteAndWait(ctx, ServersGVR, name))
	requireOwned(t, ref, 0, 0, 0)
}

// TestUnmappedHostWaitsThenBoots: the scheduler picks a compute while its host has no cell mapping (taken
// away, as for a compute that joined after the last discovery), so Nova buries the server with "Host … is
// not mapped to any cell"; the server waits (reason NoValidHost), its port kept, and boots once the
// scheduler's periodic host discovery (every 30 s on stackflow's Nova) maps the host again. A discovery
// that lands between the unmapping and the scheduling lets the server boot at once: the test then
// unmaps again with a new server, up to three times.
func TestUnmappedHostWaitsThenBoots(t *testing.T) {
	stack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	hosts := computeHosts(t)
	var (
		name string
		ref  lifecycle.ObjectRef
		msg  string
	)
	for attempt := 1; ; attempt++ {
		env.unmapHosts(t, hosts)
		name = fmt.Sprintf("unmapped-%d-%s", attempt, env.Run)
		t.Cleanup(func() { env.ForceDelete(ServersGVR, name) })
		u, err := env.Create(ctx, ServersGVR, env.Object("infrastructure.cluster.x-k8s.io/v1alpha1", "OpenStackServer", name, env.ServerSpec(env.Flavor(), 1)))
		require.NoError(t, err)
		ref = e2e.Ref("OpenStackServer", ServersGVR, u)
		var booted bool
		u, err = env.WaitFor(ctx, ServersGVR, name, func(u *unstructured.Unstructured) error {
			if booted = ready(u) == nil; booted {
				return nil
			}
			return waitingForAHost(u)
		})
		require.NoError(t, err)
		if !booted {
			_, _, msg = condition(u, "Ready")
			break
		}
		t.Logf("attempt %d: the hosts were mapped again before the server was scheduled; unmapping again", attempt)
		require.NoError(t, env.DeleteAndWait(ctx, ServersGVR, name))
		require.Less(t, attempt, 3, "the hosts were mapped again before every server was scheduled")
	}
	require.Regexp(t, `Host '[^']+' is not mapped to any cell`, msg, "Nova's fault")
	requireOwned(t, ref, 0, 1, 0)

	requireBootsOnTheComputeThenGoes(ctx, t, name, ref)
	require.Subset(t, env.mappedHosts(t), hosts, "the hosts are mapped again")
}

func TestMachineSpecEditIsRefused(t *testing.T) {
	stack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	name := "m-" + env.Run
	t.Cleanup(func() { env.ForceDelete(MachinesGVR, name) })
	u, err := env.Create(ctx, MachinesGVR, env.Object("infrastructure.cluster.x-k8s.io/v1beta1", "OpenStackMachine", name, env.ServerSpec(env.Flavor(), 1)))
	require.NoError(t, err)
	ref := e2e.Ref("OpenStackMachine", MachinesGVR, u)
	err = env.MergePatch(ctx, MachinesGVR, name, `{"spec":{"flavor":"m1.other"}}`)
	require.Error(t, err, "a machine's spec cannot change")
	require.Contains(t, strings.ToLower(err.Error()), "immutable")
	_, err = env.WaitFor(ctx, MachinesGVR, name, ready)
	require.NoError(t, err)
	requireOwned(t, ref, 1, 1, 0)
	require.NoError(t, env.DeleteAndWait(ctx, MachinesGVR, name))
	requireOwned(t, ref, 0, 0, 0)
}

// TestKillNineAnywhereConverges crashes the worker with SIGKILL at random moments while servers and a
// bastion are created, the bastion replaced and everything deleted: every object converges, with
// exactly the resources it should have, and nothing is left afterwards. Every phase of a round sees a
// crash early in it, and up to two; rounds repeat until at least six crashes happened (one or two
// rounds: a round costs minutes of real boots, and more rounds of the same phases add no new point).
func TestKillNineAnywhereConverges(t *testing.T) {
	const minKills = 6
	_, worker := stack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()

	// The chaos: kill -9 every 8–20 s and start again at once; crashed activities resume after their
	// heartbeat timeout. At most two crashes per phase, so every phase gets to finish: a retried create
	// first waits for an earlier attempt's server, and crashing faster than that would only starve it.
	var kills atomic.Int32
	var phase atomic.Value
	phaseStarted := make(chan struct{}, 1)
	phase.Store("create")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var points []string
	wg.Add(1)
	go func() {
		defer wg.Done()
		const maxPerPhase = 2
		inPhase := 0
		// Every phase gets at least one crash, early in it, wherever that falls.
		early := func() bool {
			inPhase = 0
			select {
			case <-stop:
				return false
			case <-time.After(time.Duration(500+rand.IntN(6000)) * time.Millisecond):
				return true
			}
		}
		for {
			var every <-chan time.Time
			if inPhase < maxPerPhase {
				every = time.After(time.Duration(8000+rand.IntN(12000)) * time.Millisecond)
			}
			select {
			case <-stop:
				return
			case <-every:
			case <-phaseStarted:
				if !early() {
					return
				}
			}
			inPhase++
			worker.Kill9()
			kills.Add(1)
			mu.Lock()
			points = append(points, phase.Load().(string))
			mu.Unlock()
			if err := worker.Restart(); err != nil {
				t.Errorf("restart worker: %v", err)
				return
			}
		}
	}()
	var once sync.Once
	stopChaos := func() { once.Do(func() { close(stop); wg.Wait() }) }
	defer stopChaos()

	for round := 1; round <= 3 && (round == 1 || kills.Load() < minKills); round++ {
		killRound(ctx, t, round, func(p string) {
			phase.Store(p)
			select {
			case phaseStarted <- struct{}{}:
			default:
			}
		})
		t.Logf("round %d converged; %d kills so far", round, kills.Load())
	}
	stopChaos()
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d kill -9 of the worker, at phases %v", kills.Load(), points)
	require.GreaterOrEqual(t, int(kills.Load()), minKills)
}

// killRound creates three servers and a bastion, replaces the bastion and deletes everything, checking
// after each phase that OpenStack holds exactly what it should: no duplicates, no orphans.
func killRound(ctx context.Context, t *testing.T, round int, enter func(phase string)) {
	const nServers = 3
	var srvNames []string
	for i := 0; i < nServers; i++ {
		srvNames = append(srvNames, fmt.Sprintf("k%d-%d-%s", round, i, env.Run))
	}
	clName := fmt.Sprintf("kc%d-%s", round, env.Run)
	t.Cleanup(func() { env.ForceDelete(ServersGVR, srvNames...); env.ForceDelete(ClustersGVR, clName) })

	enter(fmt.Sprintf("create/%d", round))
	refs := map[string]lifecycle.ObjectRef{}
	for _, n := range srvNames {
		u, err := env.Create(ctx, ServersGVR, env.Object("infrastructure.cluster.x-k8s.io/v1alpha1", "OpenStackServer", n, env.ServerSpec(env.Flavor(), 2)))
		require.NoError(t, err)
		refs[n] = e2e.Ref("OpenStackServer", ServersGVR, u)
		env.RecordPath(lifecycle.WorkflowID(refs[n]), "crash-retried", e2e.Retried(""))
	}
	cl, err := env.Create(ctx, ClustersGVR, env.Object("infrastructure.cluster.x-k8s.io/v1beta1", "OpenStackCluster", clName, clusterSpec(env.ServerSpec(env.Flavor(), 1))))
	require.NoError(t, err)
	clRef := e2e.Ref("OpenStackCluster", ClustersGVR, cl)
	env.RecordPath(lifecycle.WorkflowID(clRef), "crash-retried", e2e.Retried(""))
	for _, n := range srvNames {
		_, err := env.WaitFor(ctx, ServersGVR, n, ready)
		require.NoError(t, err)
		requireOwned(t, refs[n], 1, 2, 0)
	}
	_, err = env.WaitFor(ctx, ClustersGVR, clName, ready)
	require.NoError(t, err)
	before := requireOwned(t, clRef, 1, 1, 1)

	enter(fmt.Sprintf("replace/%d", round))
	bastion := env.ServerSpec(env.Flavor(), 1)
	bastion["tags"] = []any{"e2e-" + env.Run, "replaced"}
	require.NoError(t, env.MergePatch(ctx, ClustersGVR, clName, mustJSON(map[string]any{"spec": map[string]any{"bastion": map[string]any{"spec": bastion}}})))
	cl, err = env.WaitFor(ctx, ClustersGVR, clName, ready)
	require.NoError(t, err)
	after := requireOwned(t, clRef, 1, 1, 1)
	require.NotEqual(t, before.Servers[0].ID, after.Servers[0].ID)
	require.Equal(t, clName+"-bastion-2", bastionStatus(t, cl)["name"])

	enter(fmt.Sprintf("delete/%d", round))
	require.NoError(t, env.DeleteAndWait(ctx, ServersGVR, srvNames...))
	require.NoError(t, env.DeleteAndWait(ctx, ClustersGVR, clName))
	for _, r := range refs {
		requireOwned(t, r, 0, 0, 0)
	}
	requireOwned(t, clRef, 0, 0, 0)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func bastionStatus(t *testing.T, u *unstructured.Unstructured) map[string]any {
	t.Helper()
	b, ok, _ := unstructured.NestedMap(u.Object, "status", "bastion")
	require.True(t, ok, "status.bastion is set: %v", u.Object["status"])
	return b
}
