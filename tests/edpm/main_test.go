// Package edpm proves the EDPM data plane end to end on the real local stack: the real API server,
// Temporal, OpenStack (Keystone, Nova cells v2, Placement, Neutron, Glance, Ironic fake-hardware,
// RabbitMQ) and the EDPM test hosts (network namespaces with sshd and private filesystems), with the
// stackflow-worker and stackflow-bridge binaries built from this tree running as processes, so a kill -9
// is a real crash. Workflows run in a Temporal namespace of their own and objects live in a Kubernetes
// namespace of their own per run; the bridge serves only the data-plane kinds.
package edpm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/worker"
	"github.com/stackflow/stackflow/workflows"
)

// temporalNamespace holds the tests' workflows.
const temporalNamespace = "stackflow-e2e-edpm"

// servedKinds are the kinds the tests' bridge serves.
const servedKinds = "OpenStackDataPlane,OpenStackDataPlaneRole,OpenStackDataPlaneNode,NovaExternalCompute,OVNMetadataAgent"

var (
	st *local.Stack
	// bin holds the freshly built stackflow-bridge and stackflow-worker.
	bin string
	// run names this run; ns is its Kubernetes namespace.
	run     string
	ns      string
	restCfg *rest.Config
	kube    kubernetes.Interface
	dyn     dynamic.Interface
	tc      client.Client
)

func TestMain(m *testing.M) {
	os.Exit(mainErr(m))
}

func mainErr(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	s, err := local.Up(ctx, local.Options{Components: []string{local.Kubernetes, local.Temporal, local.OpenStack, local.Hosts}, HostCount: hostCount()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "local stack:", err)
		return 1
	}
	st = s
	if len(st.TestHosts) < 2 {
		fmt.Fprintf(os.Stderr, "need 2 EDPM test hosts, the stack has %d\n", len(st.TestHosts))
		return 1
	}
	run = fmt.Sprintf("e%05x", time.Now().UnixNano()&0xfffff)
	ns = "edpm-" + run

	dir, err := os.MkdirTemp("", "stackflow-edpm-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin = dir
	for _, pkg := range []string{"./bridge/cmd/stackflow-bridge", "./worker/cmd/stackflow-worker"} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin+string(filepath.Separator), pkg)
		cmd.Dir = st.RepoRoot
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build", pkg+":", err)
			return 1
		}
	}
	restCfg, err = clientcmd.BuildConfigFromFlags("", st.Kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	restCfg.QPS, restCfg.Burst = 100, 200
	kube = kubernetes.NewForConfigOrDie(restCfg)
	dyn = dynamic.NewForConfigOrDie(restCfg)
	if err := ensureTemporalNamespace(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tc, err = client.DialContext(ctx, client.Options{HostPort: st.TemporalAddress, Namespace: temporalNamespace})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer tc.Close()
	if err := setUpNamespace(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "test namespace:", err)
		return 1
	}
	code := m.Run()
	if code == 0 {
		_ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	} else {
		fmt.Fprintf(os.Stderr, "left namespace %s for inspection\n", ns)
	}
	return code
}

func hostCount() int {
	var n int
	fmt.Sscanf(os.Getenv("STACKFLOW_HOSTS"), "%d", &n)
	return max(n, 2)
}

// setUpNamespace creates the run's namespace with the Secrets the data plane reads there: the hosts'
// SSH key, clouds.yaml and cell1's message bus (copied from the stack's), and the Nova service password.
func setUpNamespace(ctx context.Context) error {
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	for _, name := range []string{"edpm-ssh-key", "openstack-clouds", "cell1-transport"} {
		src, err := kube.CoreV1().Secrets(local.SystemNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("stack Secret %s: %w", name, err)
		}
		if err := createSecret(ctx, name, src.Data); err != nil {
			return err
		}
	}
	pw, err := novaPassword()
	if err != nil {
		return err
	}
	return createSecret(ctx, "nova-service", map[string][]byte{"NovaPassword": []byte(pw)})
}

func createSecret(ctx context.Context, name string, data map[string][]byte) error {
	_, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: data}, metav1.CreateOptions{})
	return err
}

// novaPassword is the Keystone password of the local cloud's nova service user.
func novaPassword() (string, error) {
	b, err := os.ReadFile(filepath.Join(st.StateDir, "openstack", "passwords.json"))
	if err != nil {
		return "", err
	}
	var pw map[string]string
	if err := json.Unmarshal(b, &pw); err != nil {
		return "", err
	}
	if pw["nova"] == "" {
		return "", errors.New("no nova password in passwords.json")
	}
	return pw["nova"], nil
}

// ensureTemporalNamespace registers the tests' namespace with stackflow's search attributes.
func ensureTemporalNamespace(ctx context.Context) error {
	c, err := client.DialContext(ctx, client.Options{HostPort: st.TemporalAddress, Namespace: st.TemporalNamespace})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace:                        temporalNamespace,
		WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
	})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("register namespace %s: %w", temporalNamespace, err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		nc, err := client.DialContext(ctx, client.Options{HostPort: st.TemporalAddress, Namespace: temporalNamespace})
		if err == nil {
			err = worker.EnsureSearchAttributes(ctx, nc, temporalNamespace, workflows.SearchAttributes)
			if err == nil {
				_, err = nc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: temporalNamespace, Query: `StackflowKind = "none"`})
			}
			nc.Close()
		}
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("namespace %s not usable: %w", temporalNamespace, err)
		}
		time.Sleep(time.Second)
	}
}
