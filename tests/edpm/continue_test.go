package edpm

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/tests/e2e"
)

// TestLongWaitContinuesAsNew: a node of a data plane waits for its SSH key Secret long enough to
// continue as new several times (the worker's history limit is shortened for the test); its data plane
// granted it a slot meanwhile, and the grant, unread while the node waited, is carried from run to run:
// once the Secret appears the node deploys on that grant (a lost grant would leave it waiting for one
// forever, its data plane believing it running). Its role puts it in cell1, so in phase 1 it waits for
// its nova-compute (which waits for the package's Nova) and continues as new there too, holding the
// grant: the next run goes on under it without asking again. The data plane, which continued as new too
// while it watched, reports it deployed on one grant. Every run stays short.
func TestLongWaitContinuesAsNew(t *testing.T) {
	const maxHistory = 150
	h0 := env.Host(t, host0)
	e2e.CleanHost(t, h0)
	startBridge(t)
	env.StartWorker(t, e2e.WorkerOptions{Identity: env.Run + "-worker",
		ExtraArgs: []string{"--max-history", fmt.Sprint(maxHistory), "--poll-interval", "1s"}})
	ctx := context.Background()

	create(t, gvrRole, `
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneRole
metadata:
  name: patient
  annotations: {nova.openstack.org/cell: cell1}
spec:
  dataPlane: patience
  preProvisioned: true
  nodeTemplate: {ansibleUser: root, ansibleSSHPrivateKeySecret: patient-key}
`)
	// Its compute, made ahead as a user would to give it the fake driver (the host has no hypervisor);
	// the node adopts it.
	create(t, gvrNEC, fmt.Sprintf(`
apiVersion: nova.openstack.org/v1beta1
kind: NovaExternalCompute
metadata: {name: patient-0}
spec:
  dataplaneNodeName: patient-0
  cellName: cell1
  sshKeySecretName: patient-key
  inventoryConfigMapName: patient-0-inventory
  deploy: true
  customServiceConfig: %q
`, customConfig))
	node := create(t, gvrNode, fmt.Sprintf(`
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlaneNode
metadata: {name: patient-0}
spec: {role: patient, hostName: %s, ansibleHost: %s, deploy: true}
`, env.Run+"-patient-0", h0.Address))
	dp := create(t, gvrDP, `
apiVersion: dataplane.openstack.org/v1beta1
kind: OpenStackDataPlane
metadata: {name: patience}
spec: {roles: [patient], deploy: true, maxConcurrency: 1}
`)
	nodeID := workflowID("OpenStackDataPlaneNode", gvrNode, node)
	dpID := workflowID("OpenStackDataPlane", gvrDP, dp)

	continued := func(id string) int {
		return len(workflowsWith(t, fmt.Sprintf("WorkflowId = %q AND ExecutionStatus = 'ContinuedAsNew'", id)))
	}
	e2e.WaitFor(t, "patient-0 continued as new three times while it waited for its Secret", 5*time.Minute, func() (bool, string) {
		c := e2e.Condition(get(t, gvrNode, "patient-0"), "SSHKeyReady")
		waiting := c != nil && c.Reason == "WaitingForSecret" && strings.Contains(c.Message, ns+"/patient-key")
		n := continued(nodeID)
		return waiting && n >= 3, fmt.Sprintf("%d runs continued as new; %s", n, e2e.CondString(c))
	})
	require.Contains(t, e2e.Str(get(t, gvrDP, "patience"), "status", "nodeStates"), `"state":"Running"`,
		"the data plane granted the waiting node its slot")

	key, err := env.Kube.CoreV1().Secrets(ns).Get(ctx, "edpm-ssh-key", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, createSecret(ctx, "patient-key", key.Data))
	admittedAt := 0
	e2e.WaitFor(t, "patient-0 admitted on the grant it carried", 5*time.Minute, func() (bool, string) {
		c := e2e.Condition(get(t, gvrNode, "patient-0"), "DataPlaneAdmitted")
		admittedAt = continued(nodeID)
		return c != nil && c.Status == metav1.ConditionTrue, e2e.CondString(c)
	})
	e2e.WaitFor(t, "patient-0 continued as new in phase 1, holding its grant", 10*time.Minute, func() (bool, string) {
		n := get(t, gvrNode, "patient-0")
		runs := continued(nodeID)
		return runs > admittedAt && e2e.Str(n, "status", "phase") == "Services" && e2e.Str(n, "status", "deployed") != "true",
			fmt.Sprintf("%d runs continued as new (%d when admitted); %s", runs, admittedAt, e2e.Summary(n))
	})
	e2e.WaitFor(t, "patient-0 deployed on the grant it carried", 15*time.Minute, func() (bool, string) {
		n := get(t, gvrNode, "patient-0")
		return e2e.Str(n, "status", "deployed") == "true", e2e.Summary(n)
	})
	e2e.WaitFor(t, "the data plane reports the node deployed", 3*time.Minute, func() (bool, string) {
		d := get(t, gvrDP, "patience")
		c := e2e.Condition(d, "Deployed")
		return c != nil && c.Status == metav1.ConditionTrue, e2e.Summary(d)
	})
	require.Contains(t, e2e.Str(get(t, gvrDP, "patience"), "status", "nodeStates"), `"attempts":1`, "one grant, carried, was enough")

	// Every run of both stayed near the limit: a wait continues as new at its next look past it.
	for _, id := range []string{nodeID, dpID} {
		runs, err := e2e.Runs(ctx, env.Temporal, id)
		require.NoError(t, err)
		longest := 0
		for _, r := range runs {
			longest = max(longest, len(r))
		}
		t.Logf("%s: %d runs, longest %d events", id, len(runs), longest)
		require.Less(t, longest, 2*maxHistory, "%s: a run of %d events", id, longest)
	}
	require.Equal(t, 1, len(workflowsWith(t, fmt.Sprintf("WorkflowId = %q AND ExecutionStatus != 'ContinuedAsNew'", nodeID))), "one workflow for the node")
}
