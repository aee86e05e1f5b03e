package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/tests/e2e"
)

// updateBenchNamespace holds the update benchmark's workflows; its computes join a Nova of region
// updateBenchRegion whose compute API listens on updateBenchAPIPort.
const (
	updateBenchNamespace = "stackflow-bench-update"
	updateBenchRegion    = "UPDBENCH"
	updateBenchAPIPort   = 18974
)

// BenchmarkDataPlaneUpdate deploys two computes (Nova's fake driver) of one data plane through
// stackflow, in cell1 of a Nova stackflow deploys, boots a server on each, and updates both, one at a
// time (canary, then the other), each node disabled, drained, checkpointed, updated, verified, enabled
// and its server migrated back. From the
// update workflow's history it splits each node's time (its first activity scheduled to its last
// completed) into playbooks (RunPlaybook), live migrations (MigrateServers) and the rest, the
// orchestration: workflow tasks and the waits between activities, Nova API calls, and the wait for the
// restarted nova-compute to report its version. It prints the rest's share of the total per node.
func BenchmarkDataPlaneUpdate(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	env, err := e2e.Setup(ctx, e2e.Config{TemporalNamespace: updateBenchNamespace, RunPrefix: "ub",
		Components: []string{local.Kubernetes, local.Temporal, local.OpenStack, local.Hosts}, HostCount: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer env.Close()
	if len(env.Stack.TestHosts) < 2 {
		b.Fatalf("need 2 EDPM test hosts, the stack has %d", len(env.Stack.TestHosts))
	}
	ns := "upd-" + env.Run
	if _, err := env.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	defer env.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	for _, name := range []string{"edpm-ssh-key", local.CloudsSecretName, local.ServiceSecretName, local.DatabaseAdminSecretName, local.MessageBusAdminSecretName} {
		src, err := env.Kube.CoreV1().Secrets(local.SystemNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := env.Kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: src.Data}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	// The computes join cell1 of a Nova stackflow deploys, as on `make run`'s cloud; it goes once the
	// computes went (deferred first, it runs last).
	nova, err := env.StartNova(ctx, e2e.NovaOptions{Namespace: ns, Region: updateBenchRegion, APIPort: updateBenchAPIPort})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if nova.Close() != 0 {
			b.Error("the benchmark's Nova: teardown or histories failed (see above)")
		}
	}()
	env.StartWorker(b, e2e.WorkerOptions{Identity: env.Run + "-worker"})
	env.StartBridge(b, e2e.BridgeOptions{Identity: env.Run + "-bridge",
		Kinds: "OpenStackDataPlane,OpenStackDataPlaneRole,OpenStackDataPlaneNode,NovaExternalCompute,OpenStackDataPlaneUpdate"})

	dp := func(res string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: "dataplane.openstack.org", Version: "v1beta1", Resource: res}
	}
	gvrNEC := schema.GroupVersionResource{Group: "nova.openstack.org", Version: "v1beta1", Resource: "novaexternalcomputes"}
	var created []func()
	defer func() {
		for i := len(created) - 1; i >= 0; i-- {
			created[i]()
		}
	}()
	apply := func(gvr schema.GroupVersionResource, manifest string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
			b.Fatal(err)
		}
		out, err := env.Dyn.Resource(gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
		if err != nil {
			b.Fatalf("create %s: %v", u.GetName(), err)
		}
		created = append(created, func() {
			dctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			if err := env.DeleteAndWait(dctx, gvr, ns, out.GetName()); err != nil {
				b.Log(err)
			}
		})
		return out
	}
	hosts := []string{env.Run + "-0", env.Run + "-1"}
	apply(dp("openstackdataplaneroles"), `{apiVersion: dataplane.openstack.org/v1beta1, kind: OpenStackDataPlaneRole, metadata: {name: c, annotations: {nova.openstack.org/cell: cell1}}, spec: {dataPlane: c, preProvisioned: true, nodeTemplate: {ansibleUser: root, ansibleSSHPrivateKeySecret: edpm-ssh-key, managementNetwork: ctlplane, ansibleVars: {edpm_ovn_sb_connection: '`+local.OVNSouthbound+`'}}}}`)
	apply(dp("openstackdataplanes"), `{apiVersion: dataplane.openstack.org/v1beta1, kind: OpenStackDataPlane, metadata: {name: c}, spec: {roles: [c], deploy: true, maxConcurrency: 2}}`)
	for i, h := range env.Stack.TestHosts[:2] {
		apply(dp("openstackdataplanenodes"), fmt.Sprintf(`{apiVersion: dataplane.openstack.org/v1beta1, kind: OpenStackDataPlaneNode, metadata: {name: c-%d}, spec: {role: c, hostName: %s, ansibleHost: %s, deploy: true}}`, i, hosts[i], h.Address))
	}
	fake := `{"spec":{"customServiceConfig":"[DEFAULT]\ncompute_driver = fake.FakeDriver\nvif_plugging_is_fatal = false\nvif_plugging_timeout = 0\n"}}`
	for i := range 2 {
		name := fmt.Sprintf("c-%d", i)
		if err := benchWait(ctx, 3*time.Minute, func() bool {
			_, err := env.Dyn.Resource(gvrNEC).Namespace(ns).Patch(ctx, name, types.MergePatchType, []byte(fake), metav1.PatchOptions{})
			return err == nil
		}); err != nil {
			b.Fatalf("NovaExternalCompute %s: %v", name, err)
		}
	}
	if err := benchWait(ctx, 15*time.Minute, func() bool { return benchCondition(ctx, env, dp("openstackdataplanes"), ns, "c", "Deployed") }); err != nil {
		b.Fatal("data plane not deployed: ", err)
	}
	nova.WaitReady(b)
	cloud, err := env.CloudIn(ctx, updateBenchRegion)
	if err != nil {
		b.Fatal(err)
	}
	for i, h := range hosts {
		id, err := cloud.BootServer(ctx, fmt.Sprintf("%s-s%d", env.Run, i), h, env.Stack.OpenStack.Image, env.Stack.OpenStack.TenantNetwork)
		if id != "" {
			defer cloud.Compute.Delete(context.Background(), cloud.Compute.ServiceURL("servers", id), nil)
		}
		if err != nil {
			b.Fatal(err)
		}
	}

	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("to-%d", i+2)
		start := time.Now()
		u := apply(dp("openstackdataplaneupdates"), fmt.Sprintf(`{apiVersion: dataplane.openstack.org/v1beta1, kind: OpenStackDataPlaneUpdate, metadata: {name: %s}, spec: {dataPlane: c, novaCompute: {version: "%d"}, strategy: {canary: 1, maxUnavailable: 1}}}`, name, i+2))
		if err := benchWait(ctx, 15*time.Minute, func() bool {
			return benchCondition(ctx, env, dp("openstackdataplaneupdates"), ns, name, lifecycle.ConditionReady)
		}); err != nil {
			b.Fatal("update not Ready: ", err)
		}
		total := time.Since(start)
		wfID := lifecycle.WorkflowID(e2e.Ref("OpenStackDataPlaneUpdate", dp("openstackdataplaneupdates"), u))
		nodes, err := updateBenchSplit(ctx, env, wfID)
		if err != nil {
			b.Fatal(err)
		}
		fmt.Printf("data-plane update of %d nodes (one server each, one node at a time): %.1fs from create to Ready\n", len(nodes), total.Seconds())
		var sumTotal, sumRest float64
		for _, h := range hosts {
			n := nodes[h]
			rest := n.total - n.playbooks - n.migrations
			sumTotal += n.total
			sumRest += rest
			fmt.Printf("  node %s: %.1fs = playbooks %.1fs + live migrations %.1fs + orchestration %.1fs (%.0f%%: version report wait %.1fs, other Nova calls %.1fs, workflow and queues %.1fs)\n",
				h, n.total, n.playbooks, n.migrations, rest, 100*rest/n.total, n.verify, n.nova, rest-n.verify-n.nova)
		}
		fmt.Printf("  per-node overhead (time outside playbooks and migrations) share of the total: %.0f%%\n", 100*sumRest/sumTotal)
		b.ReportMetric(100*sumRest/sumTotal, "overhead-%")
		b.ReportMetric(total.Seconds(), "update-s")
	}
}

// updateBenchNode is one node's time in an update, in seconds.
type updateBenchNode struct {
	first, last                                time.Time
	total, playbooks, migrations, verify, nova float64
}

// updateBenchSplit reads the update's history, every run of it (the update continues as new as it goes
// and once settled), and attributes every activity with a host to that node.
func updateBenchSplit(ctx context.Context, env *e2e.Env, wfID string) (map[string]*updateBenchNode, error) {
	type sched struct {
		kind, host string
		at         time.Time
	}
	runs, err := e2e.Runs(ctx, env.Temporal, wfID)
	if err != nil {
		return nil, err
	}
	// Activity inputs are encrypted in Temporal: the host each names is read through the codec.
	codec, err := env.Codec()
	if err != nil {
		return nil, err
	}
	nodes := map[string]*updateBenchNode{}
	for _, events := range runs {
		// Event IDs restart with each run.
		scheduled := map[int64]sched{}
		started := map[int64]time.Time{}
		for _, ev := range events {
			at := ev.GetEventTime().AsTime()
			switch {
			case ev.GetActivityTaskScheduledEventAttributes() != nil:
				a := ev.GetActivityTaskScheduledEventAttributes()
				var in struct {
					Host    string   `json:"host"`
					From    string   `json:"from"`
					Targets []string `json:"targets"`
				}
				if p := a.GetInput().GetPayloads(); len(p) > 0 {
					plain, err := codec.Decode(p[:1])
					if err != nil {
						return nil, fmt.Errorf("decode the input of %s in %s: %w", a.GetActivityType().GetName(), wfID, err)
					}
					_ = json.Unmarshal(plain[0].GetData(), &in)
				}
				host := in.Host
				if host == "" {
					host = in.From
				}
				if host == "" && len(in.Targets) == 1 {
					host = in.Targets[0]
				}
				scheduled[ev.GetEventId()] = sched{kind: a.GetActivityType().GetName(), host: host, at: at}
			case ev.GetActivityTaskStartedEventAttributes() != nil:
				started[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()] = at
			case ev.GetActivityTaskCompletedEventAttributes() != nil:
				a := ev.GetActivityTaskCompletedEventAttributes()
				s := scheduled[a.GetScheduledEventId()]
				if s.host == "" {
					continue
				}
				n := nodes[s.host]
				if n == nil {
					n = &updateBenchNode{first: s.at}
					nodes[s.host] = n
				}
				if s.at.Before(n.first) {
					n.first = s.at
				}
				if at.After(n.last) {
					n.last = at
				}
				ran := at.Sub(started[a.GetScheduledEventId()]).Seconds()
				switch s.kind {
				case "RunPlaybook":
					n.playbooks += ran
				case "MigrateServers":
					n.migrations += ran
				case "WaitComputeVersion":
					n.verify += at.Sub(s.at).Seconds()
				default:
					n.nova += at.Sub(s.at).Seconds()
				}
			}
		}
	}
	for _, n := range nodes {
		n.total = n.last.Sub(n.first).Seconds()
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("no node activity in the history of %s", wfID)
	}
	return nodes, nil
}

// benchCondition reports whether the object's condition of type typ is True.
func benchCondition(ctx context.Context, env *e2e.Env, gvr schema.GroupVersionResource, ns, name, typ string) bool {
	u, err := env.Dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	b, _ := json.Marshal(raw)
	var conds []metav1.Condition
	_ = json.Unmarshal(b, &conds)
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// benchWait polls ok every second until it holds or timeout passes.
func benchWait(ctx context.Context, timeout time.Duration, ok func() bool) error {
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return nil
}
