// Package bridge proves the bridge and the worker end to end: the real API server, the real Temporal
// server, and the stackflow-bridge and stackflow-worker binaries running as processes, so that a kill -9
// is a real crash. Workflows run in a Temporal namespace of their own, so other users of the shared
// stack cannot take the tests' work; objects carry a per-run name prefix.
package bridge

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stackflow/stackflow/tests/e2e"
)

// env is the run's stack, clients and binaries; env.Run prefixes every object this run creates.
var env *e2e.Env

func TestMain(m *testing.M) {
	os.Exit(mainErr(m))
}

func mainErr(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var err error
	env, err = e2e.Setup(ctx, e2e.Config{TemporalNamespace: "stackflow-e2e-bridge", RunPrefix: "bt", QPS: 200, Burst: 400})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Close()
	return env.RunTests(m)
}
