// Package upgrade proves that upgrading stackflow never breaks a running deployment, end to end: objects
// of several kinds run on the worker build A (this tree), A stops with them mid-flight, and build B
// takes over: the same tree built with the tag upgradeprobe, whose reconcile path has one more step
// guarded by GetVersion (workflows/object/upgrade_probe.go), with a build ID of its own that it makes
// current in the worker deployment as the README's upgrade procedure says. Real API server, Temporal,
// OpenStack and Helm releases of the project's charts; the binaries run as processes.
package upgrade

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/tests/e2e"
	"github.com/stackflow/stackflow/tests/servers"
)

// temporalNamespace holds the test's workflows and its worker deployment, away from other users of
// the shared stack.
const temporalNamespace = "stackflow-e2e-upgrade"

// The servers boot on a Nova that stackflow deploys (region novaRegion, compute API on novaAPIPort),
// on the EDPM compute computeHost joins to its cell1; the test's own data-plane node is on the other
// test host.
var novaRegion = local.ServersRegions[1]

const (
	novaAPIPort = 19274
	computeHost = "edpm-compute-1"
)

// workerB is the file name of build B's worker binary in the run's bin directory.
const workerB = "stackflow-worker-upgraded"

var (
	// env is the run's stack, clients, binaries and a namespace with the cloud's identity Secret.
	env *servers.Env
	// charts serves the project's charts for the rollout.
	charts *local.ChartServer
)

func TestMain(m *testing.M) {
	os.Exit(mainErr(m))
}

func mainErr(m *testing.M) (code int) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var err error
	// Build B's histories hold its extra step, which the tree without its tag does not replay: they are
	// never part of the replay corpus.
	os.Unsetenv(e2e.RecordEnv)
	env, err = servers.Setup(ctx, temporalNamespace, "upg", local.Hosts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Close()
	if err := env.BuildTagged(ctx, e2e.Worker, workerB, "upgradeprobe"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	charts, err = env.ServeCharts("0.1.1")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer charts.Close()
	defer func() {
		if c := env.CloseNova(); code == 0 {
			code = c
		}
	}()
	if err := env.DeployNova(ctx, e2e.NovaOptions{Region: novaRegion, APIPort: novaAPIPort}, computeHost); err != nil {
		fmt.Fprintln(os.Stderr, "the test's Nova:", err)
		return 1
	}
	return env.RunTests(m)
}
