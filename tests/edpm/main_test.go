// Package edpm proves the EDPM data plane end to end on the real local stack: the real API server,
// Temporal, OpenStack (Keystone, Placement, Neutron, Glance, Ironic fake-hardware, MariaDB, RabbitMQ),
// a Nova with cells v2 that stackflow deploys for the package (its computes join that Nova's cell1), and
// the EDPM test hosts (network namespaces with sshd and private filesystems), with the
// stackflow-worker and stackflow-bridge binaries built from this tree running as processes, so a kill -9
// is a real crash. Workflows run in a Temporal namespace of their own and objects live in a Kubernetes
// namespace of their own per run; the bridge serves only the data-plane kinds.
package edpm

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/tests/e2e"
)

// servedKinds are the kinds the tests' bridge serves.
const servedKinds = "OpenStackDataPlane,OpenStackDataPlaneRole,OpenStackDataPlaneNode,NovaExternalCompute,OVNMetadataAgent,OpenStackDataPlaneUpdate,OpenStackDataPlaneDeployment"

// NovaRegion is the region of the tests' Nova in the stack's Keystone; novaAPIPort is where its compute
// API listens (tests/nova's holds 18774, tests/servers' 19174).
const (
	NovaRegion  = "EDPME2E"
	novaAPIPort = 18874
)

// host0 and host1 are the package's test hosts (the lane's, beside the samples' and the servers').
var host0, host1 = e2e.EDPMLaneHosts[0], e2e.EDPMLaneHosts[1]

var (
	// env is the run's stack, clients and binaries; env.Run names this run.
	env *e2e.Env
	// ns is the run's Kubernetes namespace.
	ns string
	// nova is the Nova whose cells the tests' computes join (see TestMain).
	nova *e2e.Nova
)

func TestMain(m *testing.M) {
	os.Exit(mainErr(m))
}

func mainErr(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var err error
	env, err = e2e.Setup(ctx, e2e.Config{
		Components:        []string{local.Kubernetes, local.Temporal, local.OpenStack, local.Hosts},
		HostCount:         hostCount(),
		TemporalNamespace: "stackflow-e2e-edpm",
		Run:               fmt.Sprintf("e%05x", time.Now().UnixNano()&0xfffff),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Close()
	if len(env.Stack.TestHosts) < e2e.EDPMLaneHostCount {
		fmt.Fprintf(os.Stderr, "need %d EDPM test hosts, the stack has %d\n", e2e.EDPMLaneHostCount, len(env.Stack.TestHosts))
		return 1
	}
	ns = "edpm-" + env.Run
	if err := setUpNamespace(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "test namespace:", err)
		return 1
	}
	// The computes join cells of a Nova that stackflow deploys, as on `make run`'s cloud: it comes up while
	// the first test's nodes run phase 0, and goes once every test removed its computes.
	nova, err = env.StartNova(ctx, e2e.NovaOptions{Namespace: ns, Region: NovaRegion, APIPort: novaAPIPort})
	if err != nil {
		fmt.Fprintln(os.Stderr, "the tests' Nova:", err)
		return 1
	}
	code := env.RunTests(m)
	if c := nova.Close(); code == 0 {
		code = c
	}
	if code == 0 {
		_ = env.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	} else {
		fmt.Fprintf(os.Stderr, "left namespace %s for inspection\n", ns)
	}
	return code
}

func hostCount() int {
	var n int
	fmt.Sscanf(os.Getenv("STACKFLOW_HOSTS"), "%d", &n)
	return max(n, e2e.EDPMLaneHostCount)
}

// setUpNamespace creates the run's namespace with the Secrets a user of the stack starts from, copied
// from the stack's: the hosts' SSH key, clouds.yaml, the nova service password and the administrators of
// MariaDB and RabbitMQ, with which the Nova creates its databases and vhosts.
func setUpNamespace(ctx context.Context) error {
	return env.NamespaceWithSecrets(ctx, ns, "edpm-ssh-key", local.CloudsSecretName, local.ServiceSecretName,
		local.DatabaseAdminSecretName, local.MessageBusAdminSecretName)
}

func createSecret(ctx context.Context, name string, data map[string][]byte) error {
	return env.CreateSecret(ctx, ns, name, data)
}
