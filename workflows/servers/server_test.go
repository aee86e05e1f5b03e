package servers

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/activities/openstack"
	infrav1alpha1 "github.com/stackflow/stackflow/api/infrastructure/v1alpha1"
	infrav1 "github.com/stackflow/stackflow/api/infrastructure/v1beta1"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/workflows/object"
	"github.com/stackflow/stackflow/workflows/object/objecttest"
)

// fakeCloud is an in-memory OpenStack for the workflow logic: it keeps what exists and logs every call,
// so tests check what is left behind and in which order things happened.
type fakeCloud struct {
	n        int
	ports    map[string]openstack.PortInput
	servers  map[string]openstack.ServerInput
	fips     map[string]openstack.FloatingIPInfo
	volumes  map[string]string
	log      []string
	resolve  func(openstack.ResolveServerInput) error
	create   func(openstack.ServerInput) error
	states   []string // states WaitServer reports, in turn; ACTIVE when spent
	fault    string   // the fault of a server in ERROR (Nova's "No valid host was found." when unset)
	sweeps   int
	finalize int
}

func newFakeCloud() *fakeCloud {
	return &fakeCloud{ports: map[string]openstack.PortInput{}, servers: map[string]openstack.ServerInput{},
		fips: map[string]openstack.FloatingIPInfo{}, volumes: map[string]string{}}
}

func (c *fakeCloud) id(kind string) string { c.n++; return fmt.Sprintf("%s-%d", kind, c.n) }

func (c *fakeCloud) install(env *testsuite.TestWorkflowEnvironment) {
	env.RegisterActivity(&openstack.OpenStack{})
	env.OnActivity(osActs.ResolveServer, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in openstack.ResolveServerInput) (*openstack.ResolvedServer, error) {
			c.log = append(c.log, "resolve "+in.Name)
			if c.resolve != nil {
				if err := c.resolve(in); err != nil {
					return nil, err
				}
			}
			r := &openstack.ResolvedServer{ImageID: "img", FlavorID: "flv"}
			if in.FloatingIP {
				r.FloatingNetworkID = "public"
			}
			for i := range in.Spec.Ports {
				r.Ports = append(r.Ports, openstack.ResolvedPort{Name: openstack.PortName(in.Name, i, nil), NetworkID: "private", Description: in.Marker.Description()})
			}
			return r, nil
		})
	env.OnActivity(osActs.EnsurePort, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in openstack.PortInput) (*openstack.PortInfo, error) {
			for id, p := range c.ports {
				if p.Port.Name == in.Port.Name && p.Marker == in.Marker {
					return &openstack.PortInfo{ID: id, Adopted: true}, nil
				}
			}
			id := c.id("port")
			c.ports[id] = in
			c.log = append(c.log, "create port "+in.Port.Name)
			return &openstack.PortInfo{ID: id, Name: in.Port.Name}, nil
		})
	env.OnActivity(osActs.EnsureServer, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in openstack.ServerInput) (*openstack.ServerInfo, error) {
			if c.create != nil {
				if err := c.create(in); err != nil {
					return nil, err
				}
			}
			id := c.id("server")
			c.servers[id] = in
			c.log = append(c.log, "create server "+in.Name)
			return &openstack.ServerInfo{ID: id, Name: in.Name, Status: "BUILD"}, nil
		})
	env.OnActivity(osActs.WaitServer, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in openstack.ResourceRef) (*openstack.ServerInfo, error) {
			st := openstack.ServerActive
			if len(c.states) > 0 {
				st, c.states = c.states[0], c.states[1:]
			}
			info := &openstack.ServerInfo{ID: in.ID, Status: st, Addresses: []openstack.Address{{Type: "InternalIP", Address: "10.0.0.5"}}}
			if st == openstack.ServerError {
				info.Fault = c.fault
				if info.Fault == "" {
					info.Fault = "No valid host was found."
				}
			}
			return info, nil
		})
	env.OnActivity(osActs.GetServer, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in openstack.ResourceRef) (*openstack.ServerInfo, error) {
			if _, ok := c.servers[in.ID]; !ok {
				return &openstack.ServerInfo{ID: in.ID, Status: openstack.ServerDeleted}, nil
			}
			return &openstack.ServerInfo{ID: in.ID, Status: openstack.ServerActive}, nil
		})
	env.OnActivity(osActs.DeleteServer, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in openstack.ResourceRef) error {
			if s, ok := c.servers[in.ID]; ok {
				c.log = append(c.log, "delete server "+s.Name)
			}
			delete(c.servers, in.ID)
			return nil
		})
	env.OnActivity(osActs.DeletePort, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in openstack.ResourceRef) error {
			if p, ok := c.ports[in.ID]; ok {
				c.log = append(c.log, "delete port "+p.Port.Name)
			}
			delete(c.ports, in.ID)
			return nil
		})
	env.OnActivity(osActs.EnsureVolume, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in openstack.VolumeInput) (*openstack.VolumeInfo, error) {
			id := c.id("volume")
			c.volumes[id] = in.Name
			return &openstack.VolumeInfo{ID: id, Name: in.Name, Status: "available"}, nil
		})
	env.OnActivity(osActs.DeleteVolume, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in openstack.ResourceRef) error { delete(c.volumes, in.ID); return nil })
	env.OnActivity(osActs.EnsureFloatingIP, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in openstack.FloatingIPInput) (*openstack.FloatingIPInfo, error) {
			for _, f := range c.fips {
				if in.Address != "" && f.Address == in.Address {
					c.log = append(c.log, "associate "+f.Address)
					return &f, nil
				}
			}
			addr := in.Address
			if addr == "" {
				addr = fmt.Sprintf("203.0.113.%d", c.n)
			}
			f := openstack.FloatingIPInfo{ID: c.id("fip"), Address: addr, Owned: true}
			c.fips[f.ID] = f
			c.log = append(c.log, "allocate "+addr)
			return &f, nil
		})
	env.OnActivity(osActs.ReleaseFloatingIP, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in openstack.FloatingIPRelease) error {
			if in.Delete {
				c.log = append(c.log, "delete fip "+c.fips[in.ID].Address)
				delete(c.fips, in.ID)
			}
			return nil
		})
	env.OnActivity(osActs.SweepOwned, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in openstack.SweepInput) (*openstack.SweepResult, error) {
			c.sweeps++
			return &openstack.SweepResult{}, nil
		})
}

// leftovers counts what still exists.
func (c *fakeCloud) leftovers() int {
	return len(c.ports) + len(c.servers) + len(c.fips) + len(c.volumes)
}

// objectHarness runs one object workflow against a fake cloud, with a scripted object.
type objectHarness struct {
	t       *testing.T
	env     *testsuite.TestWorkflowEnvironment
	chain   *objecttest.Chain
	cloud   *fakeCloud
	gen     int64
	spec    any
	annot   map[string]string
	patches []kube.StatusPatch
	removed int
	// secretMissing is how many more looks at the identity Secret find none; secretLooks counts looks.
	secretMissing int
	secretLooks   int
	// askedWhileMissing is what the cloud had been asked when a look found no Secret.
	askedWhileMissing []string
}

func newHarness(t *testing.T, spec any) *objectHarness {
	var ts testsuite.WorkflowTestSuite
	h := &objectHarness{t: t, env: ts.NewTestWorkflowEnvironment(), cloud: newFakeCloud(), gen: 1, spec: spec}
	h.chain = objecttest.New(h.env)
	h.env.RegisterActivity(&kube.Kube{})
	h.env.OnActivity(kubeActs.GetObject, mock.Anything, mock.Anything).Return(
		func(context.Context, lifecycle.ObjectRef) (*kube.Object, error) {
			raw, _ := json.Marshal(h.spec)
			return &kube.Object{Exists: true, Generation: h.gen, Spec: raw, Annotations: h.annot}, nil
		})
	h.env.OnActivity(kubeActs.PatchStatus, mock.Anything, mock.Anything).Return(
		func(_ context.Context, p kube.StatusPatch) error { h.patches = append(h.patches, p); return nil })
	h.env.OnActivity(kubeActs.RemoveFinalizer, mock.Anything, mock.Anything).Return(
		func(context.Context, lifecycle.ObjectRef) error { h.removed++; return nil })
	h.env.OnActivity(kubeActs.CheckSecret, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in kube.SecretCheck) (*kube.SecretPresence, error) {
			h.secretLooks++
			if h.secretMissing > 0 {
				h.askedWhileMissing = append(h.askedWhileMissing, h.cloud.log...)
				h.secretMissing--
				return &kube.SecretPresence{}, nil
			}
			return &kube.SecretPresence{Exists: true}, nil
		})
	h.cloud.install(h.env)
	h.env.RegisterWorkflowWithOptions(OpenStackServerWorkflow, workflow.RegisterOptions{Name: KindOpenStackServer})
	h.env.RegisterWorkflowWithOptions(OpenStackClusterWorkflow, workflow.RegisterOptions{Name: KindOpenStackCluster})
	return h
}

func (h *objectHarness) at(d time.Duration, fn func()) { h.env.RegisterDelayedCallback(fn, d) }

func (h *objectHarness) signal(name string, arg any) { require.NoError(h.t, h.chain.Signal(name, arg)) }

func (h *objectHarness) specChange(d time.Duration, spec any) {
	h.at(d, func() {
		h.spec = spec
		h.gen++
		h.signal(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: h.gen})
	})
}

// field is the last value written to a kind-specific status field.
func (h *objectHarness) field(key string, into any) bool {
	for i := len(h.patches) - 1; i >= 0; i-- {
		if raw, ok := h.patches[i].Fields[key]; ok {
			require.NoError(h.t, json.Unmarshal(raw, into))
			return string(raw) != "null"
		}
	}
	return false
}

func (h *objectHarness) ready() metav1.Condition {
	for i := len(h.patches) - 1; i >= 0; i-- {
		for _, c := range h.patches[i].Conditions {
			if c.Type == lifecycle.ConditionReady {
				return c
			}
		}
	}
	h.t.Fatal("no Ready condition written")
	return metav1.Condition{}
}

// phase is the last phase written.
func (h *objectHarness) phase() string {
	for i := len(h.patches) - 1; i >= 0; i-- {
		if p := h.patches[i].Phase; p != "" {
			return p
		}
	}
	return ""
}

func (h *objectHarness) run(kind string, deleteAt time.Duration) {
	h.at(time.Second, func() { h.signal(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: h.gen}) })
	h.at(deleteAt, func() { h.signal(lifecycle.SignalDelete, lifecycle.DeleteSignal{}) })
	ref := lifecycle.ObjectRef{Group: infrastructureGroup, Version: "v1alpha1", Kind: kind, Resource: strings.ToLower(kind) + "s",
		Namespace: "default", Name: "web", UID: "0f1e2d3c-4b5a"}
	h.chain.Execute(kind, object.Input{ObjectRef: ref})
	h.t.Logf("cloud log: %q; error: %+v", h.cloud.log, h.env.GetWorkflowError())
	require.True(h.t, h.env.IsWorkflowCompleted())
	require.NoError(h.t, h.env.GetWorkflowError())
}

func serverSpec(flavor string, ports int) infrav1alpha1.OpenStackServerSpec {
	s := MachineServerSpec(machineSpec(flavor, ports))
	s.IdentityRef = identity
	return s
}

var identity = infrav1.OpenStackIdentityReference{Name: "clouds", CloudName: "admin"}

func machineSpec(flavor string, ports int) infrav1.OpenStackMachineSpec {
	s := infrav1.OpenStackMachineSpec{Flavor: &flavor, Image: infrav1.ImageParam{Filter: &infrav1.ImageFilter{Name: ptr("cirros")}}}
	for i := 0; i < ports; i++ {
		s.Ports = append(s.Ports, infrav1.PortOpts{Network: &infrav1.NetworkParam{Filter: &infrav1.NetworkFilter{Name: "private"}}})
	}
	return s
}

func ptr[T any](v T) *T { return &v }

func TestServerIsCreatedOnceReportedAndTornDown(t *testing.T) {
	h := newHarness(t, serverSpec("m1.tiny", 2))
	h.specChange(time.Minute, serverSpec("m1.tiny", 2))
	h.at(2*time.Minute, func() {
		var ready bool
		require.True(t, h.field("ready", &ready))
		require.True(t, ready)
		var id string
		require.True(t, h.field("instanceID", &id))
		var res infrav1.ServerResources
		require.True(t, h.field("resources", &res))
		require.Len(t, res.Ports, 2)
		var addrs []openstack.Address
		require.True(t, h.field("addresses", &addrs))
		require.Equal(t, metav1.ConditionTrue, h.ready().Status)
		// The second generation created nothing more: created once.
		require.Len(t, h.cloud.servers, 1)
		require.Len(t, h.cloud.ports, 2)
	})
	h.run(KindOpenStackServer, 3*time.Minute)
	require.Zero(t, h.cloud.leftovers(), "teardown leaves nothing: %v", h.cloud.log)
	require.Equal(t, 2, h.cloud.sweeps, "teardown sweeps the instance, then the owner, by marker")
	require.Equal(t, 1, h.removed)
}

// A flavor not there may still come (its Nova applied beside the server): phase Waiting, not Failed.
func TestBadFlavorWaitsWithOpenStacksMessageAndCreatesNothing(t *testing.T) {
	h := newHarness(t, serverSpec("no-such-flavor", 2))
	h.cloud.resolve = func(in openstack.ResolveServerInput) error {
		return temporal.NewNonRetryableApplicationError("flavor no-such-flavor: Flavor no-such-flavor could not be found.", openstack.ErrOSNotFound, nil)
	}
	h.at(time.Minute, func() {
		require.Equal(t, lifecycle.PhaseWaiting, h.phase())
		c := h.ready()
		require.Equal(t, metav1.ConditionFalse, c.Status)
		require.Equal(t, openstack.ErrOSNotFound, c.Reason)
		require.Contains(t, c.Message, "Flavor no-such-flavor could not be found.")
		require.Zero(t, h.cloud.leftovers())
	})
	h.run(KindOpenStackServer, 2*time.Minute)
}

func TestQuotaAtBootRemovesThePortsAlreadyCreated(t *testing.T) {
	h := newHarness(t, serverSpec("m1.tiny", 2))
	h.cloud.create = func(openstack.ServerInput) error {
		return temporal.NewNonRetryableApplicationError("create server web: Quota exceeded for instances", openstack.ErrOSQuota, nil)
	}
	h.at(time.Minute, func() {
		c := h.ready()
		require.Equal(t, openstack.ErrOSQuota, c.Reason)
		require.Contains(t, c.Message, "Quota exceeded")
		require.Zero(t, h.cloud.leftovers(), "compensation removed the ports: %v", h.cloud.log)
		require.Contains(t, h.cloud.log, "delete port web-0")
	})
	h.run(KindOpenStackServer, 2*time.Minute)
}

func TestServerInErrorIsBootedAgainThenGivenUp(t *testing.T) {
	h := newHarness(t, serverSpec("m1.tiny", 1))
	h.cloud.states = []string{openstack.ServerError, openstack.ServerError, openstack.ServerError}
	h.cloud.fault = "Build of instance aborted: image could not be converted"
	h.at(time.Minute, func() {
		c := h.ready()
		require.Equal(t, openstack.ErrServerFailed, c.Reason)
		require.Contains(t, c.Message, "Build of instance aborted")
		require.Zero(t, h.cloud.leftovers())
		require.Equal(t, MaxServerRecreates+1, strings.Count(strings.Join(h.cloud.log, "\n"), "create server web"))
	})
	h.run(KindOpenStackServer, 2*time.Minute)
}

// A server no compute can take yet (computes still joining their cell) is deleted and booted again
// after a back-off, as often as it takes, without spending a recreate; its ports stay for the next boot.
func TestNoValidHostWaitsForComputesThenBecomesReady(t *testing.T) {
	h := newHarness(t, serverSpec("m1.tiny", 1))
	h.cloud.states = []string{openstack.ServerError, openstack.ServerError, openstack.ServerError, openstack.ServerError}
	h.at(15*time.Second, func() {
		require.Equal(t, lifecycle.PhaseWaiting, h.phase())
		c := h.ready()
		require.Equal(t, metav1.ConditionFalse, c.Status)
		require.Equal(t, ReasonNoValidHost, c.Reason)
		require.Contains(t, c.Message, "no compute can take server web yet: No valid host was found.")
		require.Contains(t, c.Message, "tried again by itself at")
		require.Len(t, h.cloud.ports, 1, "the port stays for the next boot")
		require.Empty(t, h.cloud.servers, "the server in ERROR is gone")
	})
	h.at(10*time.Minute, func() {
		require.Equal(t, metav1.ConditionTrue, h.ready().Status)
		require.Len(t, h.cloud.servers, 1)
		require.Len(t, h.cloud.ports, 1, "one port throughout")
		require.Equal(t, 5, strings.Count(strings.Join(h.cloud.log, "\n"), "create server web"), "four boots without a host, then one on a compute: more than MaxServerRecreates")
	})
	h.run(KindOpenStackServer, 11*time.Minute)
}

// A server the scheduler placed on a compute Placement lists before host discovery mapped it waits like
// one with no host (the next discovery maps the compute), without spending a recreate.
func TestUnmappedHostWaitsThenBecomesReady(t *testing.T) {
	h := newHarness(t, serverSpec("m1.tiny", 1))
	h.cloud.fault = "Host 'edpm-compute-0' is not mapped to any cell"
	h.cloud.states = []string{openstack.ServerError, openstack.ServerError, openstack.ServerError, openstack.ServerError}
	h.at(15*time.Second, func() {
		c := h.ready()
		require.Equal(t, metav1.ConditionFalse, c.Status)
		require.Equal(t, ReasonNoValidHost, c.Reason)
		require.Contains(t, c.Message, "is not mapped to any cell")
	})
	h.at(10*time.Minute, func() {
		require.Equal(t, metav1.ConditionTrue, h.ready().Status)
		require.Equal(t, 5, strings.Count(strings.Join(h.cloud.log, "\n"), "create server web"), "four boots on an unmapped compute, then one mapped: more than MaxServerRecreates")
	})
	h.run(KindOpenStackServer, 11*time.Minute)
}

// The faults of a compute still joining its cell, which wait, and of the server itself, which recreate.
func TestComputeJoiningFaults(t *testing.T) {
	for _, tc := range []struct {
		fault                string
		noHost, notMappedYet bool
	}{
		{"No valid host was found. There are not enough hosts available.", true, false},
		{"Host 'edpm-compute-0' is not mapped to any cell", false, true},
		{"Build of instance aborted: image could not be converted", false, false},
	} {
		info := openstack.ServerInfo{Status: openstack.ServerError, Fault: tc.fault}
		require.Equal(t, tc.noHost, NoComputeYet(info), tc.fault)
		require.Equal(t, tc.notMappedYet, HostNotMappedYet(info), tc.fault)
		info.Status = openstack.ServerActive
		require.False(t, NoComputeYet(info) || HostNotMappedYet(info), "an ACTIVE server waits for nothing")
	}
}

func TestServerInErrorOnceIsReplacedAndBecomesReady(t *testing.T) {
	h := newHarness(t, serverSpec("m1.tiny", 1))
	h.cloud.states = []string{openstack.ServerError}
	h.cloud.fault = "Build of instance aborted: image could not be converted"
	h.at(time.Minute, func() {
		require.Equal(t, metav1.ConditionTrue, h.ready().Status)
		require.Len(t, h.cloud.servers, 1)
		require.Len(t, h.cloud.ports, 1, "the port is reused by the second boot")
	})
	h.run(KindOpenStackServer, 2*time.Minute)
	require.Zero(t, h.cloud.leftovers())
}

func clusterSpec(flavor, fip string, enabled bool) infrav1.OpenStackClusterSpec {
	s := machineSpec(flavor, 1)
	b := &infrav1.Bastion{Enabled: &enabled, Spec: &s}
	if fip != "" {
		b.FloatingIP = &fip
	}
	return infrav1.OpenStackClusterSpec{IdentityRef: identity, Bastion: b}
}

func TestBastionSpecChangeReplacesItAndKeepsThePinnedAddress(t *testing.T) {
	h := newHarness(t, clusterSpec("m1.tiny", "172.24.4.50", true))
	var fipID string
	h.at(time.Minute, func() {
		var bs infrav1.BastionStatus
		require.True(t, h.field("bastion", &bs))
		require.Equal(t, "web-bastion-1", bs.Name)
		require.Equal(t, "172.24.4.50", bs.FloatingIP)
		require.Equal(t, openstack.ServerActive, string(bs.State))
		require.Len(t, h.cloud.fips, 1)
		for id := range h.cloud.fips {
			fipID = id
		}
	})
	h.specChange(2*time.Minute, clusterSpec("m1.small", "172.24.4.50", true))
	h.at(3*time.Minute, func() {
		var bs infrav1.BastionStatus
		require.True(t, h.field("bastion", &bs))
		require.Equal(t, "web-bastion-2", bs.Name)
		require.Equal(t, "172.24.4.50", bs.FloatingIP)
		require.Len(t, h.cloud.servers, 1)
		require.Len(t, h.cloud.ports, 1)
		require.Contains(t, h.cloud.fips, fipID, "the pinned address is the same floating IP")
		log := strings.Join(h.cloud.log, "\n")
		require.Less(t, strings.Index(log, "delete server web-bastion-1"), strings.Index(log, "create server web-bastion-2"), "delete first by default")
		require.NotContains(t, log, "delete fip")
	})
	h.specChange(4*time.Minute, clusterSpec("m1.small", "172.24.4.50", false))
	h.at(5*time.Minute, func() {
		var bs infrav1.BastionStatus
		require.False(t, h.field("bastion", &bs), "a disabled bastion has no status")
		require.Zero(t, h.cloud.leftovers(), "disabling deletes the bastion and its floating IP: %v", h.cloud.log)
	})
	h.run(KindOpenStackCluster, 6*time.Minute)
	require.Zero(t, h.cloud.leftovers())
}

func TestBastionCreateBeforeDelete(t *testing.T) {
	h := newHarness(t, clusterSpec("m1.tiny", "", true))
	h.annot = map[string]string{ReplacementAnnotation: ReplaceCreateFirst}
	h.specChange(time.Minute, clusterSpec("m1.small", "", true))
	h.at(2*time.Minute, func() {
		log := strings.Join(h.cloud.log, "\n")
		require.Less(t, strings.Index(log, "create server web-bastion-2"), strings.Index(log, "delete server web-bastion-1"))
		require.Len(t, h.cloud.servers, 1)
		require.Len(t, h.cloud.fips, 1, "the old bastion's own address went with it")
	})
	h.run(KindOpenStackCluster, 3*time.Minute)
	require.Zero(t, h.cloud.leftovers())
}

func TestPlanBastion(t *testing.T) {
	a, b := clusterSpec("m1.tiny", "172.24.4.50", true).Bastion, clusterSpec("m1.small", "172.24.4.50", true).Bastion
	off := clusterSpec("m1.tiny", "", false).Bastion
	ready := &serverRecord{SpecHash: BastionHash(a), Ready: true, FloatingIP: &openstack.FloatingIPInfo{Address: "172.24.4.50"}}
	building := &serverRecord{SpecHash: BastionHash(a)}
	for _, tc := range []struct {
		name        string
		desired     *infrav1.Bastion
		cur         *serverRecord
		createFirst bool
		want        BastionPlan
	}{
		{"none wanted, none there", nil, nil, false, BastionPlan{DeleteOldFirst: true}},
		{"new", a, nil, false, BastionPlan{Create: true, DeleteOldFirst: true}},
		{"same spec, ready", a, ready, false, BastionPlan{}},
		{"same spec, half built", a, building, false, BastionPlan{DeleteOldFirst: true}},
		{"spec change", b, ready, false, BastionPlan{RetireCurrent: true, Create: true, DeleteOldFirst: true, KeepFloatingIP: true}},
		{"spec change, create first", b, ready, true, BastionPlan{RetireCurrent: true, Create: true, KeepFloatingIP: true}},
		{"disabled", off, ready, false, BastionPlan{RetireCurrent: true, DeleteOldFirst: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, PlanBastion(tc.desired, tc.cur, tc.createFirst))
		})
	}
}

func TestServerErrorPolicy(t *testing.T) {
	for _, tc := range []struct {
		state     string
		recreates int
		want      ServerPolicyAction
	}{
		{openstack.ServerActive, 0, ServerKeep},
		{"SHUTOFF", 0, ServerKeep},
		{openstack.ServerError, 0, ServerRecreate},
		{openstack.ServerError, MaxServerRecreates - 1, ServerRecreate},
		{openstack.ServerError, MaxServerRecreates, ServerGiveUp},
		{openstack.ServerDeleted, 0, ServerRecreate},
	} {
		require.Equal(t, tc.want, ServerErrorPolicy(tc.state, tc.recreates), "%s after %d", tc.state, tc.recreates)
	}
}

func TestServerStatusFields(t *testing.T) {
	rec := &serverRecord{ServerID: "s1", State: openstack.ServerActive, Ready: true,
		Ports:      []createdResource{{Name: "web-0", ID: "p0"}, {Name: "web-1", ID: "p1"}},
		Addresses:  []openstack.Address{{Type: "InternalIP", Address: "10.0.0.5"}},
		FloatingIP: &openstack.FloatingIPInfo{ID: "f1", Address: "172.24.4.9"}}
	f := ServerStatusFields(rec)
	require.Equal(t, true, f["ready"])
	require.Equal(t, "s1", f["instanceID"])
	require.Equal(t, []openstack.Address{{Type: "InternalIP", Address: "10.0.0.5"}, {Type: "ExternalIP", Address: "172.24.4.9"}}, f["addresses"])
	require.Equal(t, infrav1.ServerResources{Ports: []infrav1.PortStatus{{ID: "p0"}, {ID: "p1"}}, FloatingIPID: "f1"}, f["resources"])

	empty := ServerStatusFields(&serverRecord{})
	require.Equal(t, false, empty["ready"])
	require.Nil(t, empty["instanceID"])
	require.Nil(t, empty["resources"])
}

// A machine stands for the server CAPO would make of it: every field it shares with OpenStackServer is
// carried over, JSON for JSON, and its identity stays empty when it names none (its cluster's applies).
func TestMachineServerSpecCarriesEverySharedField(t *testing.T) {
	m := machineSpec("m1.tiny", 2)
	m.SSHKeyName, m.Tags, m.Trunk = "key", []string{"a"}, true
	m.SecurityGroups = []infrav1.SecurityGroupParam{{ID: ptr("sg")}}
	m.ServerMetadata = []infrav1.ServerMetadata{{Key: "k", Value: "v"}}
	m.ConfigDrive = ptr(true)
	m.RootVolume = &infrav1.RootVolume{SizeGiB: 10}
	m.AdditionalBlockDevices = []infrav1.AdditionalBlockDevice{{Name: "data", SizeGiB: 1, Storage: infrav1.BlockDeviceStorage{Type: infrav1.StorageLocal}}}
	m.ServerGroup = &infrav1.ServerGroupParam{ID: ptr("g")}
	s := MachineServerSpec(m)
	require.Empty(t, s.IdentityRef.Name)

	mj, _ := json.Marshal(m)
	sj, _ := json.Marshal(s)
	var mm, sm map[string]any
	require.NoError(t, json.Unmarshal(mj, &mm))
	require.NoError(t, json.Unmarshal(sj, &sm))
	delete(sm, "identityRef")
	require.Equal(t, mm, sm)

	m.IdentityRef = &identity
	require.Equal(t, identity, MachineServerSpec(m).IdentityRef)
}

// A server, or a cluster's bastion, applied before its identity Secret waits for it: Ready False
// SecretMissing naming the Secret, nothing asked of OpenStack; once the Secret holds clouds.yaml, Ready
// says the generation is acted on again, and the server boots.
func TestMissingIdentitySecretWaitsThenBoots(t *testing.T) {
	for _, tc := range []struct {
		kind string
		spec any
	}{
		{KindOpenStackServer, serverSpec("m1.tiny", 1)},
		{KindOpenStackCluster, clusterSpec("m1.tiny", "", true)},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			h := newHarness(t, tc.spec)
			h.secretMissing = 3
			h.at(time.Minute, func() {
				require.Equal(t, 4, h.secretLooks, "three looks found no Secret, the fourth found it")
				var reasons []string
				for _, p := range h.patches {
					for _, c := range p.Conditions {
						if c.Type == lifecycle.ConditionReady && (len(reasons) == 0 || reasons[len(reasons)-1] != c.Reason) {
							reasons = append(reasons, c.Reason)
							if c.Reason == ReasonSecretMissing {
								require.Contains(t, c.Message, "waiting for identity Secret default/"+identity.Name+" (it does not exist)")
							}
						}
					}
				}
				require.Equal(t, []string{lifecycle.ReasonReconciling, ReasonSecretMissing, lifecycle.ReasonReconciling, lifecycle.ReasonReconciled}, reasons)
				require.Empty(t, h.askedWhileMissing, "nothing is asked of OpenStack while the Secret is missing")
				require.Len(t, h.cloud.servers, 1, "the server booted once the Secret was there")
			})
			h.run(tc.kind, 2*time.Minute)
			require.Zero(t, h.cloud.leftovers())
		})
	}
}
