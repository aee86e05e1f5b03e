// Package samplesdown ends the run's one cloud: tests/samples builds `make run`'s cloud and leaves it up,
// the packages after it in its lane compose on it (tests/servers), and this package deletes every sample
// as a user does (`kubectl delete -f deploy/samples`, day 2 and the limited run included) and proves that
// their workflows tore everything down: databases and their users, the message bus's vhost and user, the
// clouds Secret, and on the hosts every process and file of the services. It fails at once when the
// samples' cloud is not there: make e2e runs tests/samples first.
package samplesdown

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/tests/e2e"
	"github.com/stackflow/stackflow/workflows/controlplane"
)

var env *e2e.Env

func TestMain(m *testing.M) {
	os.Exit(mainErr(m))
}

func mainErr(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var err error
	// The samples' Temporal namespace, hosts and release: tests/samples' (stackflow runs from the images
	// make up imported).
	env, err = e2e.Setup(ctx, e2e.Config{TemporalNamespace: "stackflow-e2e-samples", RunPrefix: "sd",
		Components: local.AllComponents, HostCount: 2, Binaries: []string{}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Close()
	return env.RunTests(m)
}

// sampleControlPlane are the components of the sample profile with a database: each release's database
// is sample_<name>. The profile's ovn release has none.
var sampleControlPlane = []string{"keystone", "placement", "glance", "neutron"}

// sampleHosts are the sample computes.
var sampleHosts = []string{"edpm-compute-0", "edpm-compute-1"}

func TestDeletingTheSamplesTearsEverythingDown(t *testing.T) {
	ctx := context.Background()
	nova, err := env.Dyn.Resource(e2e.GVRNova).Namespace(local.SampleNamespace).Get(ctx, "nova", metav1.GetOptions{})
	require.NoError(t, err, "the samples' Nova: tests/samples builds the cloud this package tears down (make e2e runs it first)")
	require.Equal(t, "True", string(e2e.Condition(nova, "Ready").Status), "the samples' Nova Ready: %s", e2e.CondString(e2e.Condition(nova, "Ready")))

	// Everything a user may have applied: the samples, day 2 and the documented limited run.
	objs, err := env.Stack.AllSampleObjects(ctx)
	require.NoError(t, err)
	run, err := env.Stack.ManifestObjects(ctx, filepath.Join(env.Stack.RepoRoot, "tests", "api", "testdata", "dataplane_v1beta1_openstackdataplanedeployment.yaml"))
	require.NoError(t, err)
	var present []local.Applied
	oldest := time.Now()
	for _, o := range append(objs, run...) {
		u, err := env.Dyn.Resource(o.GVR).Namespace(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		require.NoError(t, err, "%s %s", o.Kind, o.Name)
		present = append(present, o)
		if c := u.GetCreationTimestamp().Time; c.Before(oldest) {
			oldest = c
		}
	}
	require.NotEmpty(t, present)
	// The samples' workflows started in tests/samples: the package's history scan covers them whole,
	// their teardown included.
	env.ScanSince(oldest.Add(-time.Second))

	serveRelease(t)
	start := time.Now()
	dctx, cancel := context.WithTimeout(ctx, 12*time.Minute)
	defer cancel()
	// All at once, as `kubectl delete -f deploy/samples` does: each workflow waits for what it needs to
	// go first (the Nova for the computes in its cells), so no order is required.
	for _, o := range present {
		err := env.Dyn.Resource(o.GVR).Namespace(o.Namespace).Delete(dctx, o.Name, metav1.DeleteOptions{})
		require.True(t, err == nil || apierrors.IsNotFound(err), "delete %s %s: %v", o.Kind, o.Name, err)
	}
	for _, o := range present {
		require.NoError(t, env.DeleteAndWait(dctx, o.GVR, o.Namespace, o.Name), "%s %s torn down", o.Kind, o.Name)
	}
	t.Logf("%d samples deleted and torn down in %s", len(present), time.Since(start).Round(time.Second))

	// Deleting the nodes took the hosts out of the cloud: no nova-compute, Open vSwitch, ovn-controller
	// or metadata agent, and nothing else of a service, is left on them.
	for _, name := range sampleHosts {
		h := env.Host(t, name)
		e2e.RequireRemoved(t, h, "nova-compute", "ovn-metadata-agent", e2e.OVNChassis.Name)
		require.Empty(t, e2e.Leftovers(h), "host %s after the samples' teardown", name)
	}
	// The control plane's releases were uninstalled, their db-drop hooks dropping their databases.
	db := env.StackDB(t)
	for _, chart := range sampleControlPlane {
		name := "sample_" + chart
		require.Empty(t, e2e.QueryStrings(t, db, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", name), "database %s dropped", name)
		require.Empty(t, e2e.QueryStrings(t, db, "SELECT User FROM mysql.user WHERE User = ?", name), "user %s dropped", name)
	}
	// The Nova dropped the databases it made for its API and cells, and their users.
	for _, name := range []string{"sample_nova_api", "sample_nova_cell0", "sample_nova_cell1"} {
		require.Empty(t, e2e.QueryStrings(t, db, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", name), "database %s dropped", name)
	}
	// and neutron's dropped its vhost and bus user.
	broker := env.BrokerAdmin(t, local.SampleNamespace)
	_, err = broker.GetVhost("sample_neutron")
	require.Error(t, err, "vhost sample_neutron dropped")
	_, err = broker.GetUser("sample_neutron")
	require.Error(t, err, "bus user sample_neutron dropped")
	// The clouds.yaml went with its configuration (its owner).
	require.Eventually(t, func() bool {
		_, err := env.Kube.CoreV1().Secrets(local.SampleNamespace).Get(ctx, controlplane.CloudsSecret, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, time.Minute, 250*time.Millisecond, "Secret %s deleted with the configuration", controlplane.CloudsSecret)
}

// serveRelease has the stack's release serve the samples' namespace (tests/samples left it so; serving
// again changes nothing then) while they are torn down, and scales it back to no pods at the end.
func serveRelease(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		if t.Failed() {
			e2e.DumpPods(t, env.Kube, local.ChartNamespace, "app.kubernetes.io/instance="+local.ChartRelease)
		}
		require.NoError(t, env.Stack.StopRelease(context.Background()), "the stack's release back to no pods")
	})
	require.NoError(t, env.Stack.ServeRelease(ctx, env.TemporalNamespace, local.SampleNamespace), "stackflow served by the stack's release")
}

// The hosts' names are the samples' (deploy/samples): a rename there must reach this package.
func TestSampleHostsAreTheSamples(t *testing.T) {
	objs, err := env.Stack.SampleObjects(context.Background())
	require.NoError(t, err)
	var nodes []string
	for _, o := range objs {
		if o.Kind == "OpenStackDataPlaneNode" {
			nodes = append(nodes, o.Name)
		}
	}
	require.ElementsMatch(t, sampleHosts, nodes, strings.Join(nodes, ", "))
}
