// Package nova proves the Nova control plane end to end on the real local stack: a Nova CR with cell0,
// cell1 and cell2 deployed by the real worker and bridge (built from this tree) into the stack's MariaDB
// and RabbitMQ, its services run as containers of the stackflow-nova image on the stack's real node, its
// compute API registered in Keystone in a region of its own, EDPM computes joining cell1 and cell2 and a server
// booting on cell2, a NovaConductor deployed on its own, a customServiceConfig roll, the removal of a
// cell, bad input, and no password in any workflow history.
//
// It lives beside the other packages' Novas: databases named after the run, vhosts named after the
// namespace, the compute API on its own port and registered in region NovaRegion, so they share nothing
// but the stack's Keystone, Placement, Neutron and Glance.
package nova

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

var (
	// env is the run's stack, clients and binaries; env.Run names this run.
	env *e2e.Env
	// ns is the run's Kubernetes namespace.
	ns string
)

// host0 and host1 are the package's test hosts (the lane's, beside the samples' and the servers').
var host0, host1 = e2e.EDPMLaneHosts[0], e2e.EDPMLaneHosts[1]

func TestMain(m *testing.M) {
	os.Exit(mainErr(m))
}

func mainErr(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var err error
	env, err = e2e.Setup(ctx, e2e.Config{
		Components:        []string{local.Kubernetes, local.Temporal, local.OpenStack, local.Hosts},
		HostCount:         e2e.EDPMLaneHostCount,
		TemporalNamespace: "stackflow-e2e-nova",
		Run:               fmt.Sprintf("n%05x", time.Now().UnixNano()&0xfffff),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Close()
	ns = "nova-" + env.Run
	if err := setUpNamespace(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "test namespace:", err)
		return 1
	}
	code := env.RunTests(m)
	if code == 0 {
		_ = env.Kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	} else {
		fmt.Fprintf(os.Stderr, "left namespace %s for inspection\n", ns)
	}
	return code
}

// setUpNamespace creates the run's namespace with the stack's Secrets a user of the stack starts from:
// the hosts' SSH key, clouds.yaml, the nova service user's password (osp-secret) and the administrators
// of MariaDB and RabbitMQ, with which the Nova creates its databases and vhosts.
func setUpNamespace(ctx context.Context) error {
	return env.NamespaceWithSecrets(ctx, ns, "edpm-ssh-key", local.CloudsSecretName, local.ServiceSecretName,
		local.DatabaseAdminSecretName, local.MessageBusAdminSecretName)
}

func createSecret(ctx context.Context, name string, data map[string][]byte) error {
	return env.CreateSecret(ctx, ns, name, data)
}
