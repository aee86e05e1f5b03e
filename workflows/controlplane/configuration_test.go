package controlplane

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/activities"
	kupenstackv1alpha1 "github.com/stackflow/stackflow/api/kupenstack/v1alpha1"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/workflows/object"
	"github.com/stackflow/stackflow/workflows/object/objecttest"
)

// configCluster answers a KupenstackConfiguration's activities from memory and records what it was asked.
type configCluster struct {
	config  kupenstackv1alpha1.KupenstackConfigurationSpec
	profile *ProfileSpec // nil: the profile does not exist

	mu       sync.Mutex
	started  []string // activity types, in the order they started
	nodes    []string // OpenstackNodes given a spec
	stored   []string // components whose values were stored
	statuses []activities.StatusPatch
	// Each is closed when its activity started: the activity that must run beside it waits for it.
	releasesStarted, storeStarted chan struct{}
}

// sideBySideWait bounds how long an activity waits for the one that must run beside it: were they run one
// after the other, it would never start.
const sideBySideWait = 10 * time.Second

func newConfigEnv(t *testing.T, f *configCluster) *testsuite.TestWorkflowEnvironment {
	f.releasesStarted, f.storeStarted = make(chan struct{}), make(chan struct{})
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	// Beyond sideBySideWait, so a serial path fails on its mock's error, not on the test's timeout.
	env.SetTestTimeout(3 * sideBySideWait)
	env.RegisterActivity(&activities.Kube{})
	env.RegisterActivity(&activities.Helm{})
	env.RegisterWorkflowWithOptions(KupenstackConfigurationWorkflow, workflow.RegisterOptions{Name: "KupenstackConfiguration"})
	env.RegisterWorkflowWithOptions(RolloutComponentWorkflow, workflow.RegisterOptions{Name: RolloutComponentWorkflowName})
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.started = append(f.started, info.ActivityType.Name)
		switch info.ActivityType.Name {
		case "Releases":
			close(f.releasesStarted)
		case "StoreAllValues":
			close(f.storeStarted)
		}
	})
	env.OnActivity(kube.GetObject, mock.Anything, mock.Anything).Return(func(_ context.Context, ref lifecycle.ObjectRef) (*activities.Object, error) {
		if ref.Kind == "KupenstackConfiguration" {
			b, _ := json.Marshal(f.config)
			return &activities.Object{Exists: true, Generation: 1, Spec: b}, nil
		}
		// The profile is read while the releases are: it returns only once they were asked for.
		select {
		case <-f.releasesStarted:
		case <-time.After(sideBySideWait):
			return nil, temporal.NewNonRetryableApplicationError("the releases were not read beside the profile", "Serial", nil)
		}
		if f.profile == nil {
			return &activities.Object{}, nil
		}
		b, _ := json.Marshal(f.profile)
		return &activities.Object{Exists: true, Generation: 1, Spec: b}, nil
	})
	env.OnActivity(kube.PatchStatus, mock.Anything, mock.Anything).Return(func(_ context.Context, p activities.StatusPatch) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.statuses = append(f.statuses, p)
		return nil
	})
	env.OnActivity(kube.ApplySpec, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.EnsureInput) (string, error) {
		// Node specs are applied while the values are stored.
		select {
		case <-f.storeStarted:
		case <-time.After(sideBySideWait):
			return "", temporal.NewNonRetryableApplicationError("the values were not stored beside the node specs", "Serial", nil)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.nodes = append(f.nodes, in.Ref.Name)
		return "uid-" + in.Ref.Name, nil
	})
	env.OnActivity(helm.Releases, mock.Anything, mock.Anything).Return(map[string]activities.ReleaseInfo{}, nil)
	env.OnActivity(helm.StoreAllValues, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.StoreAllValuesInput) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, it := range in.Items {
			f.stored = append(f.stored, it.Ref.Component)
		}
		return nil
	})
	env.OnActivity(helm.Recover, mock.Anything, mock.Anything).Return(&activities.RecoverResult{Action: "none"}, nil)
	env.OnActivity(helm.UpgradeOrInstall, mock.Anything, mock.Anything).Return(&activities.UpgradeResult{Action: "install", Revision: 1}, nil)
	env.OnActivity(helm.WaitReady, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(helm.PruneValues, mock.Anything, mock.Anything).Return(nil)
	return env
}

// condition is the last written condition of type t.
func (f *configCluster) condition(t string) (metav1.Condition, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.statuses) - 1; i >= 0; i-- {
		for _, c := range f.statuses[i].Conditions {
			if c.Type == t {
				return c, true
			}
		}
	}
	return metav1.Condition{}, false
}

func runConfiguration(t *testing.T, f *configCluster) {
	env := newConfigEnv(t, f)
	chain := objecttest.New(env)
	env.RegisterDelayedCallback(func() { require.NoError(t, chain.Signal(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})) }, time.Second)
	env.RegisterDelayedCallback(func() { require.NoError(t, chain.Signal(lifecycle.SignalDelete, lifecycle.DeleteSignal{})) }, time.Hour)
	env.OnActivity(helm.Uninstall, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(kube.RemoveFinalizer, mock.Anything, mock.Anything).Return(nil)
	chain.Execute("KupenstackConfiguration", object.Input{ObjectRef: KupenstackConfigurationRef("cloud")})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
}

// A rollout's preparation runs side by side: the releases are read while the profile is (each mock
// waits for the other to start), the node specs are applied while the values are stored, all values in
// one activity, and every component then rolls out.
func TestConfigurationPreparesTheRolloutSideBySide(t *testing.T) {
	chart := func(name string) *ChartRef {
		return &ChartRef{Repository: "http://198.51.100.1/charts", Name: name, Version: "0.1.0"}
	}
	profile := &ProfileSpec{Components: map[string]ComponentProfile{}}
	for _, c := range []string{"mariadb", "rabbitmq", "memcached", "keystone", "glance"} {
		profile.Components[c] = ComponentProfile{Chart: chart(c)}
	}
	f := &configCluster{profile: profile, config: kupenstackv1alpha1.KupenstackConfigurationSpec{DefaultProfile: "default", ReleaseNamespace: "openstack",
		Nodes: []kupenstackv1alpha1.NodeConfiguration{{Name: "control-0", Type: RoleControl}, {Name: "compute-0", Type: RoleCompute}}}}
	runConfiguration(t, f)

	require.ElementsMatch(t, []string{"control-0", "compute-0"}, f.nodes)
	require.ElementsMatch(t, []string{"mariadb", "rabbitmq", "memcached", "keystone", "glance"}, f.stored, "every rolling component's values, in one activity")
	require.NotContains(t, f.started, "StoreValues", "no activity per component")
	c, ok := f.condition(ConditionComponentsReady)
	require.True(t, ok)
	require.Equal(t, metav1.ConditionTrue, c.Status, c.Message)
	require.Contains(t, c.Message, "5 components Ready")
}

// A profile that does not exist fails the rollout with the reason and configures no node, as the serial
// path did.
func TestConfigurationWithAMissingProfileConfiguresNoNode(t *testing.T) {
	f := &configCluster{config: kupenstackv1alpha1.KupenstackConfigurationSpec{DefaultProfile: "gone",
		Nodes: []kupenstackv1alpha1.NodeConfiguration{{Name: "control-0", Type: RoleControl}}}}
	runConfiguration(t, f)

	require.Empty(t, f.nodes)
	require.NotContains(t, f.started, "StoreAllValues")
	c, ok := f.condition(ConditionComponentsReady)
	require.True(t, ok)
	require.Equal(t, metav1.ConditionFalse, c.Status)
	require.Equal(t, ReasonProfileMissing, c.Reason, c.Message)
}
