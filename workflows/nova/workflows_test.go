package nova

import (
	"context"
	"encoding/json"
	corev1 "k8s.io/api/core/v1"
	"slices"
	"strings"
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

	"github.com/stackflow/stackflow/activities/database"
	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/activities/messagebus"
	"github.com/stackflow/stackflow/activities/openstack"
	"github.com/stackflow/stackflow/api/lifecycle"
	novav1beta1 "github.com/stackflow/stackflow/api/nova/v1beta1"
	"github.com/stackflow/stackflow/workflows/object"
	"github.com/stackflow/stackflow/workflows/object/objecttest"
)

// fakeCluster answers the Kubernetes activities of a service workflow from memory, and records what
// the workflow asked for.
type fakeCluster struct {
	mu          sync.Mutex
	spec        json.RawMessage
	deployments []*DeploymentSeen
	services    []*corev1.Service
	jobs        []string
	rerunAsked  []string // Jobs DeleteFailedJob was asked about, in order
	deleted     []string
	endpoints   []openstack.EndpointsInput
	removedEPs  []string
	statuses    []kube.StatusPatch
	// notRolledOut is how many WaitDeployment calls fail first, as they do while pods are not ready.
	notRolledOut int
}

// DeploymentSeen is what ApplyDeployment received, decoded as the activity decodes it.
type DeploymentSeen struct {
	Name      string
	ProbePort string
	Hash      string
}

func newEnv(t *testing.T, f *fakeCluster, kind string, wf any) *testsuite.TestWorkflowEnvironment {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterActivity(&kube.Kube{})
	env.RegisterActivity(&openstack.OpenStack{})
	env.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: kind})
	env.OnActivity(kubeActs.GetObject, mock.Anything, mock.Anything).Return(func(context.Context, lifecycle.ObjectRef) (*kube.Object, error) {
		return &kube.Object{Exists: true, Generation: 1, Spec: f.spec}, nil
	})
	env.OnActivity(kubeActs.PatchStatus, mock.Anything, mock.Anything).Return(func(_ context.Context, p kube.StatusPatch) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.statuses = append(f.statuses, p)
		return nil
	})
	env.OnActivity(kubeActs.RemoveFinalizer, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(kubeActs.HashSecrets, mock.Anything, mock.Anything).Return(func(_ context.Context, in kube.SecretHashesInput) (*kube.SecretHashes, error) {
		out := &kube.SecretHashes{Hashes: map[string]string{}}
		for name := range in.Keys {
			out.Hashes[name] = "h-" + name
		}
		return out, nil
	})
	env.OnActivity(kubeActs.ApplyConfigMap, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(kubeActs.ApplyDeployment, mock.Anything, mock.Anything).Return(func(_ context.Context, in kube.DeploymentInput) error {
		d := in.Deployment
		seen := &DeploymentSeen{Name: d.Name, Hash: d.Spec.Template.Annotations[HashAnnotation]}
		if p := d.Spec.Template.Spec.Containers[0].ReadinessProbe; p != nil && p.HTTPGet != nil {
			seen.ProbePort = p.HTTPGet.Port.String()
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.deployments = append(f.deployments, seen)
		return nil
	})
	env.OnActivity(kubeActs.ApplyService, mock.Anything, mock.Anything).Return(func(_ context.Context, in kube.ServiceInput) (*kube.ServiceState, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.services = append(f.services, in.Service)
		return &kube.ServiceState{ClusterIP: "10.96.0.20"}, nil
	})
	env.OnActivity(kubeActs.WaitDeployment, mock.Anything, mock.Anything, mock.Anything).Return(func(_ context.Context, ns, name string) (*kube.DeploymentState, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.notRolledOut > 0 {
			f.notRolledOut--
			return nil, temporal.NewApplicationError("Deployment "+ns+"/"+name+": 0/1 updated, 0 ready: pod "+name+"-7d4f9 container "+name+
				` ImagePullBackOff: Back-off pulling image "127.0.0.1:1/missing:dev"`, kube.ErrNotRolledOut)
		}
		return &kube.DeploymentState{Replicas: 1, Ready: 1, Updated: 1, RolledOut: true, PodIPs: []string{"198.51.100.1"}}, nil
	})
	env.OnActivity(kubeActs.DeleteFailedJob, mock.Anything, mock.Anything).Return(func(_ context.Context, ref kube.JobRef) (bool, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.rerunAsked = append(f.rerunAsked, ref.Name)
		return false, nil
	})
	env.OnActivity(kubeActs.RunJob, mock.Anything, mock.Anything).Return(func(_ context.Context, in kube.JobInput) (*kube.JobState, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.rerunAsked) == 0 || f.rerunAsked[len(f.rerunAsked)-1] != in.Job.Name {
			return nil, temporal.NewNonRetryableApplicationError("Job "+in.Job.Name+" run without asking first to delete it if it failed", "Test", nil)
		}
		f.jobs = append(f.jobs, in.Job.Name)
		msg := ""
		if in.Job.Labels["stackflow.io/job"] == "cell-mapping" {
			msg = "cell_uuid=11111111-2222-3333-4444-555555555555"
		}
		return &kube.JobState{Done: true, Message: msg}, nil
	})
	env.OnActivity(kubeActs.DeleteObject, mock.Anything, mock.Anything).Return(func(_ context.Context, ref lifecycle.ObjectRef) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.deleted = append(f.deleted, ref.Kind+"/"+ref.Name)
		return nil
	})
	env.OnActivity(kubeActs.WaitDeleted, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(osActs.EnsureEndpoints, mock.Anything, mock.Anything).Return(func(_ context.Context, in openstack.EndpointsInput) (*openstack.EndpointsResult, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.endpoints = append(f.endpoints, in)
		return &openstack.EndpointsResult{IDs: map[string]string{"public": "ep-public", "internal": "ep-internal"}}, nil
	})
	env.OnActivity(osActs.DeleteEndpoints, mock.Anything, mock.Anything).Return(func(_ context.Context, in openstack.DeleteEndpointsInput) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.removedEPs = append(f.removedEPs, in.IDs...)
		return nil
	})
	return env
}

func (f *fakeCluster) lastField(key string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.statuses) - 1; i >= 0; i-- {
		if v, ok := f.statuses[i].Fields[key]; ok {
			var s string
			_ = json.Unmarshal(v, &s)
			return s
		}
	}
	return ""
}

// The API's Deployment reaches its activity whole (its readiness probe's named port survives Temporal's
// converter), its endpoints are registered at its Service's address (not its pod's, which changes with
// the pod) in the Nova's region, and deleting it removes the endpoints it registered before its
// Deployment, Service and ConfigMaps.
func TestNovaAPIRegistersAndRemovesItsEndpoints(t *testing.T) {
	spec := novav1beta1.NovaAPISpec{
		NovaServiceBase:     novav1beta1.NovaServiceBase{CustomServiceConfig: "[DEFAULT]\nosapi_compute_listen_port = 18774\n"},
		NovaServiceAuth:     novav1beta1.NovaServiceAuth{Secret: "nova-secret", KeystoneAuthURL: "http://198.51.100.1:5000/v3", Region: "NovaE2E"},
		APIDatabaseHostname: "127.0.0.1", Cell0Database: novav1beta1.Cell0Database{Cell0DatabaseHostname: "127.0.0.1"},
		TransportURLSecret: "nova-api-transport",
	}
	f := &fakeCluster{spec: mustJSON(t, spec)}
	env := newEnv(t, f, KindNovaAPI, NovaAPIWorkflow)
	chain := objecttest.New(env)
	env.RegisterDelayedCallback(func() { require.NoError(t, chain.Signal(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})) }, time.Second)
	// Settled, it does nothing at all: no activity, no timer, until the delete.
	acts, timers, settled := 0, 0, 0
	env.SetOnActivityStartedListener(func(*activity.Info, context.Context, converter.EncodedValues) { acts++ })
	env.SetOnTimerScheduledListener(func(string, time.Duration) { timers++ })
	env.RegisterDelayedCallback(func() {
		require.Equal(t, "http://10.96.0.20:18774/v2.1", f.lastField("endpoint"))
		require.Equal(t, 2, chain.Runs(), "the settled reconcile continued as new")
		settled = acts + timers
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		require.Equal(t, settled, acts+timers, "activities and timers while settled")
		require.Equal(t, 2, chain.Runs())
		require.NoError(t, chain.Signal(lifecycle.SignalDelete, lifecycle.DeleteSignal{}))
	}, 48*time.Hour)
	chain.Execute(KindNovaAPI, object.Input{ObjectRef: novaRef(KindNovaAPI, "ns", "nova-api")})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())

	require.Len(t, f.deployments, 1)
	require.Equal(t, "service", f.deployments[0].ProbePort, "the probe's named port survived the activity's input")
	require.Len(t, f.endpoints, 1)
	ep := f.endpoints[0]
	require.Equal(t, "NovaE2E", ep.Region)
	require.Equal(t, map[string]string{"public": "http://10.96.0.20:18774/v2.1", "internal": "http://10.96.0.20:18774/v2.1"}, ep.URLs)
	require.Len(t, f.services, 1)
	svc := f.services[0]
	require.Equal(t, "nova-api", svc.Name)
	require.Equal(t, int32(18774), svc.Spec.Ports[0].Port, "the Service answers on the port the user's config chose")
	require.Equal(t, "service", svc.Spec.Ports[0].TargetPort.String(), "it forwards to the container's named port")
	require.Equal(t, "nova-api", svc.Spec.Selector["app.kubernetes.io/name"])
	require.Equal(t, "nova-api", svc.Spec.Selector["app.kubernetes.io/instance"])
	require.Equal(t, kube.SecretKeyRef{Namespace: "ns", Name: "nova-secret", Key: "NovaPassword"}, ep.Auth.Password, "a reference, never the password")
	require.ElementsMatch(t, []string{"ep-public", "ep-internal"}, f.removedEPs)
	require.Contains(t, f.deleted, "Deployment/nova-api")
	require.Contains(t, f.deleted, "Service/nova-api")
}

// The global metadata service reports where it answers (its Service's address and its listen port, the
// user's customServiceConfig winning): the OVN metadata agents forward there.
func TestNovaMetadataReportsItsEndpoint(t *testing.T) {
	spec := novav1beta1.NovaMetadataSpec{
		NovaServiceBase:     novav1beta1.NovaServiceBase{CustomServiceConfig: "[DEFAULT]\nmetadata_listen_port = 28775\n"},
		NovaServiceAuth:     novav1beta1.NovaServiceAuth{Secret: "nova-secret", KeystoneAuthURL: "http://198.51.100.1:5000/v3"},
		APIDatabaseHostname: "127.0.0.1", CellDatabaseHostname: "127.0.0.1", TransportURLSecret: "nova-api-transport",
	}
	f := &fakeCluster{spec: mustJSON(t, spec)}
	env := newEnv(t, f, KindNovaMetadata, NovaMetadataWorkflow)
	chain := objecttest.New(env)
	env.RegisterDelayedCallback(func() { require.NoError(t, chain.Signal(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})) }, time.Second)
	env.RegisterDelayedCallback(func() {
		require.Equal(t, "http://10.96.0.20:28775", f.lastField("endpoint"))
		require.NoError(t, chain.Signal(lifecycle.SignalDelete, lifecycle.DeleteSignal{}))
	}, time.Minute)
	chain.Execute(KindNovaMetadata, object.Input{ObjectRef: novaRef(KindNovaMetadata, "ns", "nova-metadata")})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Empty(t, f.endpoints, "the metadata API is not in Keystone's catalog")
}

// While a service's pods are not ready, the wait shows why (pod, container, reason) in DeploymentReady and
// in Ready, once per change, and Ready turns True once they are.
func TestServiceShowsWhyItsPodsAreNotReady(t *testing.T) {
	spec := novav1beta1.NovaMetadataSpec{
		NovaServiceAuth:     novav1beta1.NovaServiceAuth{Secret: "nova-secret", KeystoneAuthURL: "http://198.51.100.1:5000/v3"},
		APIDatabaseHostname: "127.0.0.1", CellDatabaseHostname: "127.0.0.1", TransportURLSecret: "nova-api-transport",
	}
	// 12 failed calls, 1 s growing to 5 s apart: about a minute, three rounds of the wait.
	f := &fakeCluster{spec: mustJSON(t, spec), notRolledOut: 12}
	env := newEnv(t, f, KindNovaMetadata, NovaMetadataWorkflow)
	chain := objecttest.New(env)
	env.RegisterDelayedCallback(func() { require.NoError(t, chain.Signal(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})) }, time.Second)
	env.RegisterDelayedCallback(func() { require.NoError(t, chain.Signal(lifecycle.SignalDelete, lifecycle.DeleteSignal{})) }, 10*time.Minute)
	chain.Execute(KindNovaMetadata, object.Input{ObjectRef: novaRef(KindNovaMetadata, "ns", "nova-metadata")})
	require.NoError(t, env.GetWorkflowError())

	var shown []string
	readyAfter := false
	for _, p := range f.statuses {
		for _, c := range p.Conditions {
			switch {
			case c.Type == lifecycle.ConditionReady && c.Reason == ReasonPodsNotReady:
				require.Equal(t, metav1.ConditionFalse, c.Status)
				shown = append(shown, c.Message)
			case c.Type == lifecycle.ConditionReady && c.Status == metav1.ConditionTrue:
				readyAfter = len(shown) > 0
			}
		}
	}
	require.NotEmpty(t, shown, "Ready said why while the pods were not ready")
	require.Contains(t, shown[0], `pod nova-metadata-7d4f9 container nova-metadata ImagePullBackOff: Back-off pulling image "127.0.0.1:1/missing:dev"`)
	require.True(t, readyAfter, "Ready turned True once the pods were ready")
	require.Len(t, shown, 1, "the same reason is written once, not once per round")
}

// A cell maps itself, discovers its hosts, and on deletion runs its unmapping Job before its services go.
func TestNovaCellMapsThenUnmapsOnDelete(t *testing.T) {
	spec := novav1beta1.NovaCellSpec{
		NovaServiceAuth: novav1beta1.NovaServiceAuth{Secret: "nova-secret", KeystoneAuthURL: "http://198.51.100.1:5000/v3"},
		CellName:        "cell1", CellDatabaseHostname: "127.0.0.1", APIDatabaseHostname: "127.0.0.1",
		TransportURLSecret:        "nova-cell1-transport",
		NoVNCProxyServiceTemplate: novav1beta1.NovaNoVNCProxyTemplate{Enabled: new(bool)},
	}
	f := &fakeCluster{spec: mustJSON(t, spec)}
	env := newEnv(t, f, KindNovaCell, NovaCellWorkflow)
	env.OnActivity(kubeActs.ListObjects, mock.Anything, mock.Anything).Return([]kube.ListedObject{{Ref: lifecycle.ObjectRef{Name: "nova-cell1"}, Object: kube.Object{Spec: f.spec}, Created: "2024-01-01T00:00:00Z"}}, nil)
	env.OnActivity(kubeActs.ApplyChild, mock.Anything, mock.Anything).Return("uid", nil)
	env.OnActivity(kubeActs.GetObjectStatus, mock.Anything, mock.Anything).Return(&kube.ObjectStatus{Exists: true, Generation: 1, ObservedGeneration: 1,
		Conditions: []metav1.Condition{{Type: lifecycle.ConditionReady, Status: metav1.ConditionTrue}}}, nil)
	chain := objecttest.New(env)
	env.RegisterDelayedCallback(func() { require.NoError(t, chain.Signal(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})) }, time.Second)
	env.RegisterDelayedCallback(func() {
		require.Equal(t, "11111111-2222-3333-4444-555555555555", f.lastField("cellUUID"))
		require.Equal(t, 2, chain.Runs(), "the settled reconcile continued as new")
		require.NoError(t, chain.Signal(lifecycle.SignalDelete, lifecycle.DeleteSignal{}))
	}, time.Minute)
	chain.Execute(KindNovaCell, object.Input{ObjectRef: novaRef(KindNovaCell, "ns", "nova-cell1")})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, []string{"nova-cell1-cell-mapping", "nova-cell1-host-discovery", "nova-cell1-cell-delete"}, f.jobs)
	require.Equal(t, f.jobs, f.rerunAsked, "each run of a Job first deletes it if it failed before, so a retry runs it again")
	require.Contains(t, f.deleted, "NovaConductor/nova-cell1-conductor")
}

// A Nova creates the flavors its spec lists through its own API, as its service user (a reference to
// the handed-down Secret, never the password), in its region; a Nova with none asks for none.
func TestNovaCreatesTheFlavorsOfItsSpec(t *testing.T) {
	for _, tc := range []struct {
		name    string
		region  string
		flavors []novav1beta1.Flavor
		want    *openstack.FlavorsInput
	}{
		{name: "no flavors, no call"},
		{name: "flavors in the Nova's region", region: "RegionTwo",
			flavors: []novav1beta1.Flavor{{Name: "m1.tiny", VCPUs: 1, RAM: 512, Disk: 1}, {Name: "m1.small", ID: "2", VCPUs: 1, RAM: 2048, Disk: 20}},
			want: &openstack.FlavorsInput{
				Auth:    openstack.ServiceUser{AuthURL: "http://198.51.100.1:5000/v3", User: "nova", Password: kube.SecretKeyRef{Namespace: "ns", Name: "nova-secret", Key: "NovaPassword"}},
				Region:  "RegionTwo",
				Flavors: []openstack.Flavor{{Name: "m1.tiny", VCPUs: 1, RAM: 512, Disk: 1}, {Name: "m1.small", ID: "2", VCPUs: 1, RAM: 2048, Disk: 20}},
			}},
		{name: "the default region", flavors: []novav1beta1.Flavor{{Name: "m1.tiny", VCPUs: 1, RAM: 512}},
			want: &openstack.FlavorsInput{
				Auth:    openstack.ServiceUser{AuthURL: "http://198.51.100.1:5000/v3", User: "nova", Password: kube.SecretKeyRef{Namespace: "ns", Name: "nova-secret", Key: "NovaPassword"}},
				Region:  DefaultRegion,
				Flavors: []openstack.Flavor{{Name: "m1.tiny", VCPUs: 1, RAM: 512}},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := novav1beta1.NovaSpec{
				NovaServiceAuth: novav1beta1.NovaServiceAuth{Secret: "osp-secret", ServiceUser: "nova", KeystoneAuthURL: "http://198.51.100.1:5000/v3", Region: tc.region},
				APIDatabase:     novav1beta1.DatabaseAccess{Hostname: "127.0.0.1", AdminSecret: "db-admin"},
				APIMessageBus:   novav1beta1.MessageBusAccess{AdminSecret: "mq-admin", TransportURLSecret: "nova-api-transport"},
				CellTemplates: map[string]novav1beta1.NovaCellTemplate{
					"cell0": {CellDatabase: novav1beta1.DatabaseAccess{Hostname: "127.0.0.1", AdminSecret: "db-admin"}},
				},
				Flavors: tc.flavors,
			}
			f := &fakeCluster{spec: mustJSON(t, spec)}
			env := newEnv(t, f, KindNova, NovaWorkflow)
			env.RegisterActivity(&database.Database{})
			env.RegisterActivity(&messagebus.MessageBus{})
			env.OnActivity(kubeActs.CheckSecret, mock.Anything, mock.Anything).Return(&kube.SecretPresence{Exists: true}, nil)
			env.OnActivity(kubeActs.CopySecretKeys, mock.Anything, mock.Anything).Return(nil)
			env.OnActivity(kubeActs.GenerateSecretKey, mock.Anything, mock.Anything, mock.Anything).Return(nil)
			env.OnActivity(kubeActs.WriteServiceCloudsYAML, mock.Anything, mock.Anything).Return(nil)
			env.OnActivity(dbs.EnsureDatabase, mock.Anything, mock.Anything).Return(nil)
			env.OnActivity(buses.EnsureVhost, mock.Anything, mock.Anything).Return(nil)
			env.OnActivity(kubeActs.ApplyChild, mock.Anything, mock.Anything).Return("uid", nil)
			env.OnActivity(kubeActs.GetObjectStatus, mock.Anything, mock.Anything).Return(&kube.ObjectStatus{Exists: true, Generation: 1, ObservedGeneration: 1,
				Conditions: []metav1.Condition{{Type: lifecycle.ConditionReady, Status: metav1.ConditionTrue}}}, nil)
			var got []openstack.FlavorsInput
			env.OnActivity(osActs.EnsureFlavors, mock.Anything, mock.Anything).Return(func(_ context.Context, in openstack.FlavorsInput) (*openstack.FlavorsResult, error) {
				got = append(got, in)
				return &openstack.FlavorsResult{Created: []string{in.Flavors[0].Name}}, nil
			})
			chain := objecttest.New(env)
			env.RegisterDelayedCallback(func() { require.NoError(t, chain.Signal(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})) }, time.Second)
			phase := ""
			env.RegisterDelayedCallback(func() {
				require.Equal(t, 2, chain.Runs(), "the reconcile settled")
				phase = f.lastPhase()
				env.CancelWorkflow()
			}, time.Hour)
			chain.Execute(KindNova, object.Input{ObjectRef: novaRef(KindNova, "ns", "nova")})
			require.Equal(t, lifecycle.PhaseReady, phase, "the Nova reconciled")
			if tc.want == nil {
				require.Empty(t, got)
				return
			}
			require.Equal(t, []openstack.FlavorsInput{*tc.want}, got)
			require.Contains(t, f.lastFields("flavors"), "m1.tiny")
		})
	}
}

func (f *fakeCluster) lastFields(key string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.statuses) - 1; i >= 0; i-- {
		if v, ok := f.statuses[i].Fields[key]; ok {
			var s []string
			_ = json.Unmarshal(v, &s)
			return s
		}
	}
	return nil
}

func (f *fakeCluster) lastPhase() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.statuses) - 1; i >= 0; i-- {
		if p := f.statuses[i].Phase; p != "" {
			return p
		}
	}
	return ""
}

// A Nova naming keystoneAdminSecret makes its service user as that administrator before anything uses
// it (a reference to the handed-down password, never the value), gives its cells and services the
// Keystone endpoint of the administrator's clouds.yaml (the spec names none), creates its flavors there,
// and deletes the user last when it goes, after the services that deregister as it.
func TestNovaMakesItsServiceUserAndRemovesItLast(t *testing.T) {
	spec := novav1beta1.NovaSpec{
		NovaServiceAuth:     novav1beta1.NovaServiceAuth{Secret: "osp-secret", ServiceUser: "nova-two", Region: "RegionTwo"},
		KeystoneAdminSecret: "keystone-clouds",
		APIDatabase:         novav1beta1.DatabaseAccess{Hostname: "127.0.0.1", AdminSecret: "db-admin"},
		APIMessageBus:       novav1beta1.MessageBusAccess{AdminSecret: "mq-admin", TransportURLSecret: "nova-api-transport"},
		CellTemplates: map[string]novav1beta1.NovaCellTemplate{
			"cell0": {CellDatabase: novav1beta1.DatabaseAccess{Hostname: "127.0.0.1", AdminSecret: "db-admin"}},
		},
		Flavors: []novav1beta1.Flavor{{Name: "m1.tiny", VCPUs: 1, RAM: 512, Disk: 1}},
	}
	const authURL = "http://10.96.0.9:5000/v3"
	f := &fakeCluster{spec: mustJSON(t, spec)}
	env := newEnv(t, f, KindNova, NovaWorkflow)
	env.RegisterActivity(&database.Database{})
	env.RegisterActivity(&messagebus.MessageBus{})
	var mu sync.Mutex
	var calls []string
	record := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, s)
	}
	// The administrator's Secret appears only after a few looks (the configuration writes it once
	// Keystone is deployed): the Nova waits for it, saying so.
	adminLooks := 0
	env.OnActivity(kubeActs.CheckSecret, mock.Anything, mock.Anything).Return(func(_ context.Context, in kube.SecretCheck) (*kube.SecretPresence, error) {
		if in.Name == "keystone-clouds" {
			require.Equal(t, []string{openstack.CloudsYAMLKey}, in.Keys)
			if adminLooks++; adminLooks < 3 {
				return &kube.SecretPresence{}, nil
			}
		}
		return &kube.SecretPresence{Exists: true}, nil
	})
	env.OnActivity(kubeActs.CopySecretKeys, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(kubeActs.GenerateSecretKey, mock.Anything, mock.Anything, mock.Anything).Return(nil)
	var clouds []kube.ServiceCloudsInput
	env.OnActivity(kubeActs.WriteServiceCloudsYAML, mock.Anything, mock.Anything).Return(func(_ context.Context, in kube.ServiceCloudsInput) error {
		record("clouds.yaml")
		clouds = append(clouds, in)
		return nil
	})
	env.OnActivity(dbs.EnsureDatabase, mock.Anything, mock.Anything).Return(func(context.Context, database.DatabaseInput) error { record("database"); return nil })
	env.OnActivity(buses.EnsureVhost, mock.Anything, mock.Anything).Return(nil)
	children := map[string]json.RawMessage{}
	env.OnActivity(kubeActs.ApplyChild, mock.Anything, mock.Anything).Return(func(_ context.Context, in kube.ChildInput) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		children[in.Ref.Kind+"/"+in.Ref.Name] = in.Spec
		return "uid", nil
	})
	env.OnActivity(kubeActs.GetObjectStatus, mock.Anything, mock.Anything).Return(&kube.ObjectStatus{Exists: true, Generation: 1, ObservedGeneration: 1,
		Conditions: []metav1.Condition{{Type: lifecycle.ConditionReady, Status: metav1.ConditionTrue}}}, nil)
	var flavors []openstack.FlavorsInput
	env.OnActivity(osActs.EnsureFlavors, mock.Anything, mock.Anything).Return(func(_ context.Context, in openstack.FlavorsInput) (*openstack.FlavorsResult, error) {
		flavors = append(flavors, in)
		return &openstack.FlavorsResult{}, nil
	})
	var made, deleted []openstack.ServiceUserInput
	env.OnActivity(osActs.EnsureServiceUser, mock.Anything, mock.Anything).Return(func(_ context.Context, in openstack.ServiceUserInput) (*openstack.ServiceUserResult, error) {
		record("user")
		made = append(made, in)
		return &openstack.ServiceUserResult{AuthURL: authURL, Owned: true}, nil
	})
	// One OVN metadata agent names the Nova's metadata service, one another's: the Nova waits for the
	// first before its services (and its service user, the agents' way into Neutron) go.
	env.OnActivity(kubeActs.ListObjects, mock.Anything, mock.Anything).Return(func(_ context.Context, in kube.ListInput) ([]kube.ListedObject, error) {
		if in.Ref.Kind != "OVNMetadataAgent" {
			return []kube.ListedObject{}, nil
		}
		return []kube.ListedObject{
			{Ref: lifecycle.ObjectRef{Name: "edpm-compute-0-ovn-metadata-agent"}, Object: kube.Object{Spec: json.RawMessage(`{"novaMetadata":"nova-metadata"}`)}},
			{Ref: lifecycle.ObjectRef{Name: "elsewhere"}, Object: kube.Object{Spec: json.RawMessage(`{"novaMetadata":"other-metadata"}`)}},
		}, nil
	})
	var waits []kube.CellsInput
	env.OnActivity(kubeActs.WaitNoComputes, mock.Anything, mock.Anything).Return(func(_ context.Context, in kube.CellsInput) error {
		record("wait for users")
		waits = append(waits, in)
		return nil
	})
	env.OnActivity(kubeActs.DeleteObject, mock.Anything, mock.Anything).Return(func(context.Context, lifecycle.ObjectRef) error { record("delete child"); return nil })
	env.OnActivity(kubeActs.WaitDeleted, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(dbs.DropDatabase, mock.Anything, mock.Anything).Return(func(context.Context, database.DatabaseInput) error { record("drop database"); return nil })
	env.OnActivity(buses.DeleteVhost, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(osActs.DeleteServiceUser, mock.Anything, mock.Anything).Return(func(_ context.Context, in openstack.ServiceUserInput) error {
		record("delete user")
		deleted = append(deleted, in)
		return nil
	})
	chain := objecttest.New(env)
	env.RegisterDelayedCallback(func() { require.NoError(t, chain.Signal(lifecycle.SignalSpec, lifecycle.SpecSignal{Generation: 1})) }, time.Second)
	phase := ""
	env.RegisterDelayedCallback(func() {
		phase = f.lastPhase()
		require.NoError(t, chain.Signal(lifecycle.SignalDelete, lifecycle.DeleteSignal{}))
	}, time.Hour)
	chain.Execute(KindNova, object.Input{ObjectRef: novaRef(KindNova, "ns", "nova")})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	require.Equal(t, lifecycle.PhaseReady, phase, "the Nova reconciled")

	want := openstack.ServiceUserInput{Admin: openstack.CloudSecret{Namespace: "ns", Name: "keystone-clouds"}, User: "nova-two",
		Password: kube.SecretKeyRef{Namespace: "ns", Name: "nova-secret", Key: KeyService}}
	require.Len(t, made, 1)
	require.True(t, want.Same(made[0]), "made %+v", made[0])
	require.Equal(t, KindNova, made[0].Owner.Kind)
	require.Equal(t, "nova", made[0].Owner.Name)
	require.Len(t, deleted, 1)
	require.True(t, want.Same(deleted[0]), "deleted %+v", deleted[0])
	require.Less(t, slices.Index(calls, "user"), slices.Index(calls, "database"), "the user comes before the rest: %v", calls)
	require.Equal(t, 3, adminLooks, "looked until the administrator's Secret was there, then no more")
	waited := false
	for _, p := range f.statuses {
		for _, c := range p.Conditions {
			waited = waited || (c.Type == ConditionInputsReady && c.Reason == ReasonSecretMissing && strings.Contains(c.Message, "ns/keystone-clouds with key clouds.yaml"))
		}
	}
	require.True(t, waited, "InputsReady said what the Nova waited for")
	// The data-plane services of its cells log in as that user, with the clouds.yaml of the handed-down
	// Secret, at the administrator's Keystone: written before any cell exists.
	require.NotEmpty(t, clouds)
	require.Equal(t, kube.ServiceCloudsInput{Password: kube.SecretKeyRef{Namespace: "ns", Name: "nova-secret", Key: KeyService}, Cloud: "nova",
		AuthURL: authURL, User: "nova-two", Owner: clouds[0].Owner}, clouds[0])
	require.Less(t, slices.Index(calls, "user"), slices.Index(calls, "clouds.yaml"), "written once Keystone's endpoint is known: %v", calls)
	require.Less(t, slices.Index(calls, "clouds.yaml"), slices.Index(calls, "database"), "%v", calls)
	require.Equal(t, "delete user", calls[len(calls)-1], "the user goes last: %v", calls)
	require.Len(t, waits, 1)
	require.Equal(t, []string{"nova-cell0-metadata", "nova-metadata"}, waits[0].Metadata, "waited for the agents of its metadata services")
	require.Less(t, slices.Index(calls, "wait for users"), slices.Index(calls, "drop database"), "%v", calls)
	said := false
	for _, p := range f.statuses {
		for _, c := range p.Conditions {
			said = said || (c.Reason == ReasonCellRemovalBlocked && strings.Contains(c.Message, "OVNMetadataAgent edpm-compute-0-ovn-metadata-agent)") && !strings.Contains(c.Message, "elsewhere"))
		}
	}
	require.True(t, said, "the condition named the agent it waited for, and only that one")

	require.NotEmpty(t, children)
	for k, raw := range children {
		var got struct {
			KeystoneAuthURL string `json:"keystoneAuthURL"`
			ServiceUser     string `json:"serviceUser"`
		}
		require.NoError(t, json.Unmarshal(raw, &got))
		require.Equal(t, authURL, got.KeystoneAuthURL, "%s is given the administrator's Keystone", k)
		require.Equal(t, "nova-two", got.ServiceUser, k)
	}
	require.Len(t, flavors, 1)
	require.Equal(t, authURL, flavors[0].Auth.AuthURL)
	require.Equal(t, "RegionTwo", flavors[0].Region)
}
