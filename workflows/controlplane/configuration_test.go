package controlplane

import (
	"context"
	"encoding/json"
	"slices"
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

	"github.com/stackflow/stackflow/activities/helm"
	"github.com/stackflow/stackflow/activities/kube"
	kupenstackv1alpha1 "github.com/stackflow/stackflow/api/kupenstack/v1alpha1"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/workflows/object"
	"github.com/stackflow/stackflow/workflows/object/objecttest"
)

// configCluster answers a KupenstackConfiguration's activities from memory and records what it was asked.
type configCluster struct {
	config  kupenstackv1alpha1.KupenstackConfigurationSpec
	profile *ProfileSpec // nil: the profile does not exist

	mu      sync.Mutex
	started []string // activity types, in the order they started
	nodes   []string // OpenstackNodes given a spec
	// released: OpenstackNodes whose spec was cleared (patched only if they exist).
	released []string
	clouds   []kube.CloudsYAMLInput
	stored   [][]string // components whose values were stored, per StoreAllValues
	// ahead: the values are expected to be stored while the releases are read.
	ahead    bool
	statuses []kube.StatusPatch
	// Each is closed when its activity started: the activity that must run beside it waits for it.
	releasesStarted, storeStarted chan struct{}
	storeOnce                     bool
	// installed: the releases UpgradeOrInstall was asked for, in order; rolledBack: Rollback's.
	installed, rolledBack []string
	// waitReady, when set, answers WaitReady (nil: Ready at once).
	waitReady func(ctx context.Context, in helm.WaitInput) error
	// cloudUsers answers the looks for the users of the configuration's cloud: its first cloudUsed looks
	// find them, later ones none. looks counts the looks; uninstalled lists each release uninstalled
	// with the number of looks before it.
	cloudUsers  []string
	cloudUsed   int
	looks       int
	cloudAsked  []kube.CloudInput
	uninstalled []string
	looksBefore []int
}

// usersNow is the users of the cloud at the next look.
func (f *configCluster) usersNow(in kube.CloudInput) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.looks++
	f.cloudAsked = append(f.cloudAsked, in)
	if f.looks <= f.cloudUsed {
		return f.cloudUsers
	}
	return nil
}

// components is the last written status.components.
func (f *configCluster) components(t *testing.T) map[string]kupenstackv1alpha1.ComponentStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.statuses) - 1; i >= 0; i-- {
		if raw, ok := f.statuses[i].Fields["components"]; ok {
			var list []kupenstackv1alpha1.ComponentStatus
			require.NoError(t, json.Unmarshal(raw, &list))
			out := map[string]kupenstackv1alpha1.ComponentStatus{}
			for _, c := range list {
				out[c.Name] = c
			}
			return out
		}
	}
	return nil
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
	env.RegisterActivity(&kube.Kube{})
	env.RegisterActivity(&helm.Helm{})
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
			if !f.storeOnce {
				f.storeOnce = true
				close(f.storeStarted)
			}
		}
	})
	env.OnActivity(kubeActs.GetObject, mock.Anything, mock.Anything).Return(func(_ context.Context, ref lifecycle.ObjectRef) (*kube.Object, error) {
		if ref.Kind == "KupenstackConfiguration" {
			b, _ := json.Marshal(f.config)
			return &kube.Object{Exists: true, Generation: 1, Spec: b}, nil
		}
		// The profile is read while the releases are: it returns only once they were asked for.
		select {
		case <-f.releasesStarted:
		case <-time.After(sideBySideWait):
			return nil, temporal.NewNonRetryableApplicationError("the releases were not read beside the profile", "Serial", nil)
		}
		if f.profile == nil {
			return &kube.Object{}, nil
		}
		b, _ := json.Marshal(f.profile)
		return &kube.Object{Exists: true, Generation: 1, Spec: b}, nil
	})
	env.OnActivity(kubeActs.PatchStatus, mock.Anything, mock.Anything).Return(func(_ context.Context, p kube.StatusPatch) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.statuses = append(f.statuses, p)
		return nil
	})
	env.OnActivity(kubeActs.ApplySpec, mock.Anything, mock.Anything).Return(func(_ context.Context, in kube.EnsureInput) (string, error) {
		if in.ExistingOnly {
			f.mu.Lock()
			defer f.mu.Unlock()
			if string(in.Spec) != `{"type":null,"profile":null,"disabled":null}` {
				return "", temporal.NewNonRetryableApplicationError("a release clears every field: "+string(in.Spec), "Test", nil)
			}
			f.released = append(f.released, in.Ref.Name)
			return "uid-" + in.Ref.Name, nil
		}
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
	env.OnActivity(helmActs.Releases, mock.Anything, mock.Anything).Return(func(context.Context, helm.ReleasesInput) (map[string]helm.ReleaseInfo, error) {
		// The values the recorded status does not show deployed are stored while the releases are read.
		if f.ahead {
			select {
			case <-f.storeStarted:
			case <-time.After(sideBySideWait):
				return nil, temporal.NewNonRetryableApplicationError("the values were not stored beside the releases' read", "Serial", nil)
			}
		}
		return map[string]helm.ReleaseInfo{}, nil
	})
	env.OnActivity(helmActs.StoreAllValues, mock.Anything, mock.Anything).Return(func(_ context.Context, in helm.StoreAllValuesInput) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		var batch []string
		for _, it := range in.Items {
			batch = append(batch, it.Ref.Component)
		}
		f.stored = append(f.stored, batch)
		return nil
	})
	env.OnActivity(helmActs.Recover, mock.Anything, mock.Anything).Return(&helm.RecoverResult{Action: "none"}, nil)
	env.OnActivity(helmActs.UpgradeOrInstall, mock.Anything, mock.Anything).Return(func(_ context.Context, in helm.ReleaseInput) (*helm.UpgradeResult, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.installed = append(f.installed, in.Release)
		return &helm.UpgradeResult{Action: "install", Revision: 1}, nil
	})
	env.OnActivity(helmActs.WaitReady, mock.Anything, mock.Anything).Return(func(ctx context.Context, in helm.WaitInput) error {
		if f.waitReady != nil {
			return f.waitReady(ctx, in)
		}
		return nil
	})
	env.OnActivity(helmActs.Rollback, mock.Anything, mock.Anything).Return(func(_ context.Context, in helm.RollbackInput) (*helm.RollbackResult, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.rolledBack = append(f.rolledBack, in.Release)
		return &helm.RollbackResult{}, nil
	})
	env.OnActivity(helmActs.PruneValues, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(kubeActs.CloudUsers, mock.Anything, mock.Anything).Return(func(_ context.Context, in kube.CloudInput) ([]string, error) {
		return f.usersNow(in), nil
	})
	env.OnActivity(kubeActs.WaitCloudUnused, mock.Anything, mock.Anything).Return(func(_ context.Context, in kube.CloudInput) error {
		if users := f.usersNow(in); len(users) > 0 {
			return temporal.NewApplicationError(kube.CloudInUseMessage(in, users), kube.ErrCloudInUse)
		}
		return nil
	})
	env.OnActivity(helmActs.Uninstall, mock.Anything, mock.Anything).Return(func(_ context.Context, in helm.UninstallInput) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.uninstalled = append(f.uninstalled, in.Release)
		f.looksBefore = append(f.looksBefore, f.looks)
		return nil
	})
	env.OnActivity(kubeActs.WriteCloudsYAML, mock.Anything, mock.Anything).Return(func(_ context.Context, in kube.CloudsYAMLInput) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.clouds = append(f.clouds, in)
		return nil
	})
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

// executeConfiguration runs a configuration from its first spec to its deletion an hour later.
func executeConfiguration(t *testing.T, f *configCluster, carry *object.State) *testsuite.TestWorkflowEnvironment {
	env := newConfigEnv(t, f)
	chain := objecttest.New(env)
	env.RegisterDelayedCallback(func() { require.NoError(t, chain.Signal(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})) }, time.Second)
	env.RegisterDelayedCallback(func() { require.NoError(t, chain.Signal(lifecycle.SignalDelete, lifecycle.DeleteSignal{})) }, time.Hour)
	env.OnActivity(kubeActs.RemoveFinalizer, mock.Anything, mock.Anything).Return(nil)
	chain.Execute("KupenstackConfiguration", object.Input{ObjectRef: KupenstackConfigurationRef("cloud"), Carry: carry})
	return env
}

// runConfiguration is executeConfiguration that must complete without error.
func runConfiguration(t *testing.T, f *configCluster, carry *object.State) {
	env := executeConfiguration(t, f, carry)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
}

var fiveComponents = []string{"mariadb", "rabbitmq", "memcached", "keystone", "glance"}

func fiveComponentProfile() *ProfileSpec {
	profile := &ProfileSpec{Components: map[string]ComponentProfile{}}
	for _, c := range fiveComponents {
		profile.Components[c] = ComponentProfile{Chart: &ChartRef{Repository: "http://198.51.100.1/charts", Name: c, Version: "0.1.0"}}
	}
	return profile
}

// A rollout's preparation runs side by side: the releases are read while the profile is, and while the
// values are stored (all in one activity) and the node specs applied (each mock waits for the other to
// start); every component then rolls out.
func TestConfigurationPreparesTheRolloutSideBySide(t *testing.T) {
	f := &configCluster{profile: fiveComponentProfile(), ahead: true, config: kupenstackv1alpha1.KupenstackConfigurationSpec{DefaultProfile: "default", ReleaseNamespace: "openstack",
		Nodes: []kupenstackv1alpha1.NodeConfiguration{{Name: "control-0", Type: RoleControl}, {Name: "compute-0", Type: RoleCompute}}}}
	runConfiguration(t, f, nil)

	require.ElementsMatch(t, []string{"control-0", "compute-0"}, f.nodes)
	require.ElementsMatch(t, []string{"control-0", "compute-0"}, f.released, "deleted, the configuration lets go of its nodes")
	// Keystone deployed: its administrator's clouds.yaml is written, owned by the configuration.
	require.Len(t, f.clouds, 1)
	require.Equal(t, kube.CloudsYAMLInput{Namespace: "openstack", AdminSecret: "keystone-admin", Service: "keystone-api", Secret: CloudsSecret, Cloud: "cloud",
		Owner: &kube.Owner{APIVersion: "kupenstack.io/v1alpha1", Kind: "KupenstackConfiguration", Name: "cloud"}}, f.clouds[0])
	require.Len(t, f.stored, 1, "one activity stores every rolling component's values")
	require.ElementsMatch(t, fiveComponents, f.stored[0])
	require.NotContains(t, f.started, "StoreValues", "no activity per component")
	c, ok := f.condition(ConditionComponentsReady)
	require.True(t, ok)
	require.Equal(t, metav1.ConditionTrue, c.Status, c.Message)
	require.Contains(t, c.Message, "5 components Ready")
}

// A component the recorded status shows deployed as rendered is not stored ahead; when the releases say
// it must roll after all (its release is gone), its values are stored once the plan says so.
func TestConfigurationStoresWhatThePlanRollsBeyondWhatItStoredAhead(t *testing.T) {
	profile := fiveComponentProfile()
	rendered, err := RenderComponents(ControlPlane, MergeProfiles([]ProfileSpec{*profile}))
	require.NoError(t, err)
	known := []kupenstackv1alpha1.ComponentStatus{{Name: "keystone", Release: "keystone", State: ComponentDeployed, Revision: 1,
		ChartVersion: "0.1.0", ValuesHash: rendered["keystone"].ValuesHash}}
	fields, err := json.Marshal(known)
	require.NoError(t, err)
	f := &configCluster{profile: profile, ahead: true, config: kupenstackv1alpha1.KupenstackConfigurationSpec{DefaultProfile: "default", ReleaseNamespace: "openstack"}}
	runConfiguration(t, f, &object.State{Fields: map[string]json.RawMessage{"components": fields}})

	require.Len(t, f.stored, 2, "%v", f.stored)
	require.ElementsMatch(t, []string{"mariadb", "rabbitmq", "memcached", "glance"}, f.stored[0], "ahead: what the status does not show deployed")
	require.Equal(t, []string{"keystone"}, f.stored[1], "then what the plan rolls beyond it")
	c, ok := f.condition(ConditionComponentsReady)
	require.True(t, ok)
	require.Equal(t, metav1.ConditionTrue, c.Status, c.Message)
}

func TestValuesAhead(t *testing.T) {
	rendered, err := RenderComponents(ControlPlane, MergeProfiles([]ProfileSpec{*fiveComponentProfile()}))
	require.NoError(t, err)
	deployed := func(name, chart, hash string) kupenstackv1alpha1.ComponentStatus {
		return kupenstackv1alpha1.ComponentStatus{Name: name, State: ComponentDeployed, ChartVersion: chart, ValuesHash: hash}
	}
	ks := rendered["keystone"]
	tests := []struct {
		name  string
		known map[string]kupenstackv1alpha1.ComponentStatus
		want  []string
	}{
		{"nothing recorded: every enabled component", nil, fiveComponents},
		{"deployed as rendered: left out", map[string]kupenstackv1alpha1.ComponentStatus{"keystone": deployed("keystone", "0.1.0", ks.ValuesHash)},
			[]string{"mariadb", "rabbitmq", "memcached", "glance"}},
		{"other values", map[string]kupenstackv1alpha1.ComponentStatus{"keystone": deployed("keystone", "0.1.0", "old")}, fiveComponents},
		{"other chart", map[string]kupenstackv1alpha1.ComponentStatus{"keystone": deployed("keystone", "0.0.9", ks.ValuesHash)}, fiveComponents},
		{"failed last time", map[string]kupenstackv1alpha1.ComponentStatus{"keystone": {Name: "keystone", State: ComponentFailed, ChartVersion: "0.1.0", ValuesHash: ks.ValuesHash}}, fiveComponents},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ElementsMatch(t, tt.want, valuesAhead(rendered, tt.known))
		})
	}
}

// A profile that does not exist fails the rollout with the reason and configures no node, as the serial
// path did.
func TestConfigurationWithAMissingProfileConfiguresNoNode(t *testing.T) {
	f := &configCluster{config: kupenstackv1alpha1.KupenstackConfigurationSpec{DefaultProfile: "gone",
		Nodes: []kupenstackv1alpha1.NodeConfiguration{{Name: "control-0", Type: RoleControl}}}}
	runConfiguration(t, f, nil)

	require.Empty(t, f.nodes)
	require.NotContains(t, f.started, "StoreAllValues")
	c, ok := f.condition(ConditionComponentsReady)
	require.True(t, ok)
	require.Equal(t, metav1.ConditionFalse, c.Status)
	require.Equal(t, ReasonProfileMissing, c.Reason, c.Message)
}

func (f *configCluster) rolledBackCopy() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.rolledBack)
}

// installedBeside is true once release was asked for (UpgradeOrInstall), waiting up to sideBySideWait.
func (f *configCluster) installedBeside(release string) bool {
	for deadline := time.Now().Add(sideBySideWait); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		f.mu.Lock()
		ok := slices.Contains(f.installed, release)
		f.mu.Unlock()
		if ok {
			return true
		}
	}
	return false
}

// Glance and placement install beside keystone: keystone becomes Ready only once both were installed
// (its WaitReady waits for them; were they started after it, it would fail).
func TestRolloutInstallsGlanceAndPlacementBesideKeystone(t *testing.T) {
	profile := fiveComponentProfile()
	profile.Components["placement"] = ComponentProfile{Chart: &ChartRef{Repository: "http://198.51.100.1/charts", Name: "placement", Version: "0.1.0"}}
	f := &configCluster{profile: profile, ahead: true, config: kupenstackv1alpha1.KupenstackConfigurationSpec{DefaultProfile: "default", ReleaseNamespace: "openstack"}}
	f.waitReady = func(_ context.Context, in helm.WaitInput) error {
		if in.Release == "keystone" && !(f.installedBeside("glance") && f.installedBeside("placement")) {
			return temporal.NewNonRetryableApplicationError("glance and placement were not installed beside keystone", "Serial", nil)
		}
		return nil
	}
	runConfiguration(t, f, nil)

	f.mu.Lock()
	require.Less(t, slices.Index(f.installed, "keystone"), slices.Index(f.installed, "glance"), "keystone's release is applied first: %v", f.installed)
	f.mu.Unlock()
	c, ok := f.condition(ConditionComponentsReady)
	require.True(t, ok)
	require.Equal(t, metav1.ConditionTrue, c.Status, c.Message)
	require.Contains(t, c.Message, "6 components Ready")
}

// When keystone fails, glance, installed beside it, cannot become Ready: its rollout is cancelled, rolls
// its release back, and glance is Blocked by keystone rather than failed on a timeout of its own.
func TestRolloutStopsWhatInstalledBesideAFailedComponent(t *testing.T) {
	f := &configCluster{profile: fiveComponentProfile(), ahead: true, config: kupenstackv1alpha1.KupenstackConfigurationSpec{DefaultProfile: "default", ReleaseNamespace: "openstack"}}
	f.waitReady = func(ctx context.Context, in helm.WaitInput) error {
		switch in.Release {
		case "keystone":
			if !f.installedBeside("glance") {
				return temporal.NewNonRetryableApplicationError("glance was not installed beside keystone", "Serial", nil)
			}
			return temporal.NewNonRetryableApplicationError("keystone-api never became Ready", helm.ErrNotReady, nil)
		case "glance":
			// Ready a while after keystone failed, unless something stops it first (the test environment
			// resolves a cancelled activity at once, without telling the mock).
			for !slices.Contains(f.rolledBackCopy(), "keystone") {
				time.Sleep(10 * time.Millisecond)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(2 * time.Second):
				return nil
			}
		}
		return nil
	}
	executeConfiguration(t, f, nil)

	f.mu.Lock()
	require.ElementsMatch(t, []string{"keystone", "glance"}, f.rolledBack[:2], "both first installs are taken back: %v", f.rolledBack)
	f.mu.Unlock()
	got := f.components(t)
	require.Equal(t, ComponentFailed, got["keystone"].State, got["keystone"].Message)
	require.Equal(t, ComponentBlocked, got["glance"].State, got["glance"].Message)
	require.Contains(t, got["glance"].Message, "not rolled out: keystone did not become Ready")
}

// A configuration deleted while objects of its namespace log in with its cloud (a Nova, a server: their
// own teardowns need Keystone and Neutron) keeps every release until they are gone, and Ready says
// whom it waits for; with no user it uninstalls at once.
func TestConfigurationTeardownWaitsForTheUsersOfItsCloud(t *testing.T) {
	for _, tc := range []struct {
		name  string
		users []string
		used  int
	}{
		{"two users for four looks", []string{"Nova/nova", "OpenStackServer/bastion"}, 4},
		{"no user", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &configCluster{profile: fiveComponentProfile(), cloudUsers: tc.users, cloudUsed: tc.used,
				config: kupenstackv1alpha1.KupenstackConfigurationSpec{DefaultProfile: "default", ReleaseNamespace: "openstack"}}
			runConfiguration(t, f, nil)

			f.mu.Lock()
			defer f.mu.Unlock()
			require.ElementsMatch(t, fiveComponents, f.uninstalled)
			want := max(tc.used+1, 1)
			for i, release := range f.uninstalled {
				require.Equal(t, want, f.looksBefore[i], "%s was uninstalled after the last look found no user", release)
			}
			for _, in := range f.cloudAsked {
				require.Equal(t, kube.CloudInput{Namespace: "openstack", Secret: CloudsSecret}, in)
			}
			var inUse *metav1.Condition
			for _, p := range f.statuses {
				for i, c := range p.Conditions {
					if c.Type == lifecycle.ConditionReady && c.Reason == ReasonCloudInUse {
						inUse = &p.Conditions[i]
					}
				}
			}
			if tc.used == 0 {
				require.Nil(t, inUse, "no user, no wait")
				return
			}
			require.NotNil(t, inUse, "Ready said the cloud is in use")
			require.Equal(t, metav1.ConditionFalse, inUse.Status)
			for _, u := range tc.users {
				require.Contains(t, inUse.Message, u)
			}
		})
	}
}
