package dataplane

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/activities/ansible"
	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/activities/openstack"
	dataplanev1beta1 "github.com/stackflow/stackflow/api/dataplane/v1beta1"
	"github.com/stackflow/stackflow/api/lifecycle"
	neutronv1beta1 "github.com/stackflow/stackflow/api/neutron/v1beta1"
	"github.com/stackflow/stackflow/api/oslo"
	"github.com/stackflow/stackflow/workflows/object"
	"github.com/stackflow/stackflow/workflows/object/objecttest"
)

// agentWorld is an OVNMetadataAgent's world under test: its spec (generation gen) as the API holds it,
// the playbook runs (real and check-mode) and the status writes.
type agentWorld struct {
	mu           sync.Mutex
	spec         neutronv1beta1.OVNMetadataAgentSpec
	gen          int64
	runs, checks []ansible.PlaybookInput
	statusWrites int
	// alive and deleted are the Neutron agent calls: the wait for the agent, its record's deletion.
	alive, deleted []openstack.NetworkAgentInput
	// aliveAfter is how many waits Neutron answers "not alive yet" first.
	aliveAfter int
	// endpointAfter is how many reads of the NovaMetadata show no endpoint first; endpointReads counts them.
	endpointAfter, endpointReads int
}

func (w *agentWorld) edit(gen int64, custom string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gen, w.spec.CustomServiceConfig = gen, custom
}

func newAgentEnv(t *testing.T, w *agentWorld) *testsuite.TestWorkflowEnvironment {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterActivity(&kube.Kube{})
	env.RegisterActivity(&ansible.Ansible{})
	env.RegisterActivity(&openstack.OpenStack{})
	env.RegisterWorkflowWithOptions(OVNMetadataAgentWorkflow, workflow.RegisterOptions{Name: "OVNMetadataAgent"})
	w.spec, w.gen = neutronv1beta1.OVNMetadataAgentSpec{DataplaneNodeName: "n1", SSHKeySecretName: "key", InventoryConfigMapName: "n1-inventory", Deploy: true}, 1
	onGetObject(t, env, func() (any, int64) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.spec, w.gen
	})
	env.OnActivity(kubeActs.GetObjectStatus, mock.Anything, mock.Anything).Return(func(_ context.Context, in kube.StatusInput) (*kube.ObjectStatus, error) {
		if in.Ref.Kind == "NovaMetadata" {
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.endpointReads++; w.endpointReads <= w.endpointAfter {
				return &kube.ObjectStatus{Exists: true, Generation: 1}, nil
			}
			return &kube.ObjectStatus{Exists: true, Generation: 1, Fields: map[string]json.RawMessage{"endpoint": json.RawMessage(`"http://198.51.100.1:28775"`)}}, nil
		}
		return &kube.ObjectStatus{Exists: true, Generation: 1, ObservedGeneration: 1,
			Conditions: []metav1.Condition{{Type: dataplanev1beta1.ConditionInfrastructureReady, Status: metav1.ConditionTrue}}}, nil
	})
	env.OnActivity(kubeActs.CheckSecret, mock.Anything, mock.Anything).Return(&kube.SecretPresence{Exists: true}, nil)
	env.OnActivity(kubeActs.PatchStatus, mock.Anything, mock.Anything).Return(func(context.Context, kube.StatusPatch) error {
		w.statusWrites++
		return nil
	})
	env.OnActivity(kubeActs.RemoveFinalizer, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(ansibleActs.RunPlaybook, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in ansible.PlaybookInput) (*ansible.PlaybookResult, error) {
			if in.Check {
				w.checks = append(w.checks, in)
				return &ansible.PlaybookResult{Check: true, Changed: 1, Changes: []ansible.TaskChange{{Task: "Install configuration files", Items: []string{OVNMetadataCustomFile}, Diff: "+debug = True\n"}}}, nil
			}
			w.runs = append(w.runs, in)
			return &ansible.PlaybookResult{Ok: 3}, nil
		})
	env.OnActivity(osActs.WaitNetworkAgentAlive, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in openstack.NetworkAgentInput) (*openstack.NetworkAgent, error) {
			w.alive = append(w.alive, in)
			if len(w.alive) <= w.aliveAfter {
				return nil, temporal.NewApplicationError("Neutron lists no agent yet", openstack.ErrNetworkAgentNotAlive)
			}
			return &openstack.NetworkAgent{ID: "agent-1", Binary: in.Binary, Host: in.Host, Alive: true}, nil
		})
	env.OnActivity(osActs.DeleteNetworkAgents, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in openstack.NetworkAgentInput) ([]openstack.NetworkAgent, error) {
			w.deleted = append(w.deleted, in)
			return []openstack.NetworkAgent{{ID: "agent-1", Binary: in.Binary, Host: in.Host}}, nil
		})
	return env
}

// The preview update of a data-plane service runs its playbook in check mode with the spec as it is in
// the API (an edit the workflow has not acted on, as while it is paused), says whether that is what it
// installed, and returns the changes; it writes no status and runs nothing for real.
func TestServicePreviewRunsACheckModePlaybookOfTheCurrentSpec(t *testing.T) {
	w := &agentWorld{}
	env := newAgentEnv(t, w)
	chain := objecttest.New(env)
	preview := func(id string, want func(ServicePreview)) {
		require.NoError(t, chain.Update(lifecycle.UpdatePreview, id, &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("preview rejected: %v", err) },
			OnAccept: func() {},
			OnComplete: func(v any, err error) {
				require.NoError(t, err)
				b, _ := json.Marshal(v)
				var p ServicePreview
				require.NoError(t, json.Unmarshal(b, &p))
				want(p)
			},
		}))
	}
	env.RegisterDelayedCallback(func() { require.NoError(t, chain.Signal(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})) }, time.Second)
	var writesBefore int
	env.RegisterDelayedCallback(func() {
		require.Len(t, w.runs, 1, "deployed once")
		writesBefore = w.statusWrites
		// The spec as deployed: nothing to install, the host is compared with it all the same.
		preview("first", func(p ServicePreview) {
			require.True(t, p.UpToDate)
			require.Equal(t, StepOVNMetadataAgent, p.Step)
			require.Equal(t, "n1", p.Host)
		})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		// An edit the workflow has not been told of (its spec signal held back, as while paused).
		w.mu.Lock()
		w.spec.CustomServiceConfig = "[DEFAULT]\ndebug = True\n"
		w.mu.Unlock()
		preview("second", func(p ServicePreview) {
			require.False(t, p.UpToDate, "the edit is not what was installed (runs %d, checks %d)", len(w.runs), len(w.checks))
			require.Len(t, p.Changes, 1)
			require.Equal(t, "+debug = True\n", p.Changes[0].Diff)
		})
	}, 2*time.Minute)
	env.RegisterDelayedCallback(func() {
		require.Len(t, w.runs, 1, "a preview runs nothing for real")
		require.Len(t, w.checks, 2)
		for _, c := range w.checks {
			require.Equal(t, w.runs[0].Host, c.Host)
			require.Equal(t, w.runs[0].Playbook, c.Playbook)
		}
		require.Len(t, w.checks[0].Files, len(w.runs[0].Files), "the deployed spec's files")
		require.Len(t, w.checks[1].Files, len(w.runs[0].Files)+1, "the edit's custom file too")
		require.Equal(t, writesBefore, w.statusWrites, "a preview writes no status")
		require.NoError(t, chain.Signal(lifecycle.SignalDelete, lifecycle.DeleteSignal{}))
	}, 3*time.Minute)
	chain.Execute("OVNMetadataAgent", object.Input{ObjectRef: lifecycle.ObjectRef{Kind: "OVNMetadataAgent", Namespace: "openstack", Name: "n1", UID: "u1"}})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
}

// The agent is deployed once Neutron lists it alive on its host (retried while it does not), and deleting
// it deletes its Neutron record after the removal playbook stopped it.
func TestAgentReadyWhenNeutronListsItAliveAndItsRecordGoesWithIt(t *testing.T) {
	w := &agentWorld{aliveAfter: 2}
	env := newAgentEnv(t, w)
	chain := objecttest.New(env)
	env.RegisterDelayedCallback(func() { require.NoError(t, chain.Signal(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})) }, time.Second)
	env.RegisterDelayedCallback(func() {
		st, err := chain.Status()
		require.NoError(t, err)
		require.Equal(t, lifecycle.PhaseReady, st.Phase, "ready once alive: %+v", st.Conditions)
		require.Len(t, w.alive, 3, "asked until Neutron listed it alive")
		for _, in := range w.alive {
			require.Equal(t, openstack.NetworkAgentInput{Cloud: openstack.CloudSecret{Namespace: "openstack", Name: openstack.DefaultCloudsSecret}, Host: "n1", Binary: openstack.AgentBinaryOVNMetadata}, in)
		}
		require.Empty(t, w.deleted)
		require.NoError(t, chain.Signal(lifecycle.SignalDelete, lifecycle.DeleteSignal{}))
	}, 2*time.Minute)
	chain.Execute("OVNMetadataAgent", object.Input{ObjectRef: lifecycle.ObjectRef{Kind: "OVNMetadataAgent", Namespace: "openstack", Name: "n1", UID: "u1"}})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, w.runs, 2, "the agent's playbook, then its removal")
	require.Equal(t, "ovn-metadata-agent-remove.yml", w.runs[1].Playbook)
	require.Equal(t, []openstack.NetworkAgentInput{{Cloud: openstack.CloudSecret{Namespace: "openstack", Name: openstack.DefaultCloudsSecret}, Host: "n1", Binary: openstack.AgentBinaryOVNMetadata}}, w.deleted)
}

// An agent naming a NovaMetadata waits until it reports where it answers, then forwards there: its
// generated file names the metadata API's address and takes the shared secret from the NovaMetadata's
// Secret (a Secret reference: the value never enters the workflow).
func TestAgentForwardsToTheNovaMetadataItNames(t *testing.T) {
	w := &agentWorld{endpointAfter: 2}
	env := newAgentEnv(t, w)
	w.spec.NovaMetadata = "nova-metadata"
	chain := objecttest.New(env)
	env.RegisterDelayedCallback(func() { require.NoError(t, chain.Signal(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})) }, time.Second)
	env.RegisterDelayedCallback(func() {
		st, err := chain.Status()
		require.NoError(t, err)
		require.Equal(t, lifecycle.PhaseReady, st.Phase, "%+v", st.Conditions)
		require.Equal(t, 3, w.endpointReads, "waited while the NovaMetadata reported no endpoint")
		require.Len(t, w.runs, 1)
		gen := w.runs[0].Files[0]
		require.Equal(t, OVNMetadataGeneratedFile, gen.Dest)
		require.Equal(t, map[string]string{"nova_metadata_host": "198.51.100.1", "nova_metadata_port": "28775", "nova_metadata_protocol": "http"},
			map[string]string{"nova_metadata_host": gen.Options["DEFAULT"]["nova_metadata_host"], "nova_metadata_port": gen.Options["DEFAULT"]["nova_metadata_port"],
				"nova_metadata_protocol": gen.Options["DEFAULT"]["nova_metadata_protocol"]})
		require.Equal(t, []oslo.SecretOption{{Section: "DEFAULT", Option: "metadata_proxy_shared_secret", Secret: "nova-secret", Key: "MetadataSecret"}}, gen.SecretOptions)
		require.NoError(t, chain.Signal(lifecycle.SignalDelete, lifecycle.DeleteSignal{}))
	}, 2*time.Minute)
	chain.Execute("OVNMetadataAgent", object.Input{ObjectRef: lifecycle.ObjectRef{Kind: "OVNMetadataAgent", Namespace: "openstack", Name: "n1", UID: "u1"}})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
}

// The preview flow: pause, edit, preview, revert, resume. A paused workflow starts no reconcile, so the
// edit never reaches the host, and resume reconciles the newest generation, which is what is installed.
func TestServiceEditRevertedWhilePausedNeverRuns(t *testing.T) {
	w := &agentWorld{}
	env := newAgentEnv(t, w)
	chain := objecttest.New(env)
	env.RegisterDelayedCallback(func() { require.NoError(t, chain.Signal(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})) }, time.Second)
	env.RegisterDelayedCallback(func() {
		require.Len(t, w.runs, 1)
		require.NoError(t, chain.Signal(lifecycle.SignalPause, nil))
		w.edit(2, "[DEFAULT]\ndebug = True\n")
		require.NoError(t, chain.Signal(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 2}))
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		st, err := chain.Status()
		require.NoError(t, err)
		require.EqualValues(t, 1, st.ObservedGeneration, "paused: generation 2 is not acted on")
		require.Len(t, w.runs, 1)
		w.edit(3, "")
		require.NoError(t, chain.Signal(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 3}))
		require.NoError(t, chain.Signal(lifecycle.SignalResume, nil))
	}, 2*time.Minute)
	env.RegisterDelayedCallback(func() {
		st, err := chain.Status()
		require.NoError(t, err)
		require.Equal(t, lifecycle.PhaseReady, st.Phase)
		require.EqualValues(t, 3, st.ObservedGeneration)
		require.Len(t, w.runs, 1, "generation 2 never ran; 3 is what was installed")
		require.NoError(t, chain.Signal(lifecycle.SignalDelete, lifecycle.DeleteSignal{}))
	}, 3*time.Minute)
	chain.Execute("OVNMetadataAgent", object.Input{ObjectRef: lifecycle.ObjectRef{Kind: "OVNMetadataAgent", Namespace: "openstack", Name: "n1", UID: "u1"}})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
}

// onGetObject answers GetObject for a service's tests: node n1's spec for the data-plane node, else the
// service's own spec and generation as own returns them now.
func onGetObject(t *testing.T, env *testsuite.TestWorkflowEnvironment, own func() (spec any, gen int64)) {
	nodeSpec, err := json.Marshal(node("n1", nil, nil).Spec)
	require.NoError(t, err)
	env.OnActivity(kubeActs.GetObject, mock.Anything, mock.Anything).Return(
		func(_ context.Context, ref lifecycle.ObjectRef) (*kube.Object, error) {
			if ref.Kind == "OpenStackDataPlaneNode" {
				return &kube.Object{Exists: true, Generation: 1, Spec: nodeSpec}, nil
			}
			if ref.Kind == "NovaMetadata" {
				return &kube.Object{Exists: true, Generation: 1, Spec: json.RawMessage(`{"secret":"nova-secret","keystoneAuthURL":"http://x/v3"}`)}, nil
			}
			spec, gen := own()
			b, err := json.Marshal(spec)
			return &kube.Object{Exists: true, Generation: gen, Spec: b}, err
		})
}
