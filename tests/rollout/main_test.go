// Package rollout proves the control-plane rollouts end to end: the real API server with kwok nodes,
// the real Temporal server, the stackflow-bridge and stackflow-worker binaries as processes (so kill -9
// is a real crash), and Helm releases of the project's test charts served from a chart repository on
// 127.0.0.1. Workflows run in a Temporal namespace of their own; objects and release namespaces carry a
// per-run prefix.
package rollout

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/tests/e2e"
)

var (
	// env is the run's stack, clients and binaries; env.Run prefixes every object this run creates.
	env *e2e.Env
	// charts serves the test charts.
	charts *local.ChartServer
)

func TestMain(m *testing.M) {
	os.Exit(mainErr(m))
}

func mainErr(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var err error
	env, err = e2e.Setup(ctx, e2e.Config{TemporalNamespace: "stackflow-e2e-rollout", RunPrefix: "ro"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Close()

	charts, err = env.ServeCharts("0.1.1")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer charts.Close()
	return env.RunTests(m)
}
