// Package bridge proves the bridge and the worker end to end: the real API server, the real Temporal
// server, and the stackflow-bridge and stackflow-worker binaries running as processes, so that a kill -9
// is a real crash. Workflows run in a Temporal namespace of their own, so other users of the shared
// stack cannot take the tests' work; objects carry a per-run name prefix.
package bridge

import (
	"context"
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
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/worker"
	"github.com/stackflow/stackflow/workflows"
)

// temporalNamespace holds the tests' workflows.
const temporalNamespace = "stackflow-e2e-bridge"

var (
	st *local.Stack
	// bin holds the freshly built stackflow-bridge and stackflow-worker.
	bin string
	// run prefixes every object this run creates.
	run     string
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
	s, err := local.Up(ctx, local.Options{Components: []string{local.Kubernetes, local.Temporal}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "local stack:", err)
		return 1
	}
	st = s
	run = fmt.Sprintf("bt%06x", time.Now().UnixNano()&0xffffff)

	dir, err := os.MkdirTemp("", "stackflow-bridge-e2e-")
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
	restCfg.QPS, restCfg.Burst = 200, 400
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
	return m.Run()
}

// ensureTemporalNamespace registers the tests' namespace (once per stack) with stackflow's search
// attributes, and waits until the server accepts work in it.
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
