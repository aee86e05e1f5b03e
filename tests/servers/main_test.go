package servers

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/deploy/local"
	"github.com/stackflow/stackflow/tests/e2e"
)

// temporalNamespace holds the tests' workflows, away from other users of the shared stack.
const temporalNamespace = "stackflow-e2e-servers"

// The tests' servers boot on a Nova that stackflow deploys (region novaRegion, its compute API on
// novaAPIPort, cell1's metadata service on novaMetadataPort), on the EDPM compute computeHost joins to
// its cell1, as on `make run`'s cloud (the stack runs no Nova of its own).
var novaRegion = local.ServersRegions[0]

const (
	novaAPIPort      = 19174
	novaMetadataPort = 19175
	computeHost      = "edpm-compute-2"
)

var env *Env

func TestMain(m *testing.M) {
	os.Exit(mainErr(m))
}

func mainErr(m *testing.M) (code int) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	var err error
	env, err = Setup(ctx, temporalNamespace, "srv", local.Hosts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Close()
	// The Nova's teardown waits for its compute, whose removal the servers' teardown has left empty.
	defer func() {
		if c := env.CloseNova(); code == 0 {
			code = c
		}
	}()
	if err := env.DeployNova(ctx, e2e.NovaOptions{Region: novaRegion, APIPort: novaAPIPort, CellMetadataPort: novaMetadataPort}, computeHost); err != nil {
		fmt.Fprintln(os.Stderr, "the tests' Nova:", err)
		return 1
	}
	return env.RunTests(m)
}

// stack runs a bridge and a worker for the test and stops them at its end, printing their logs when
// the test failed.
func stack(t *testing.T) (bridge, worker *e2e.Proc) {
	t.Helper()
	w := env.StartWorker(t)
	return env.StartBridge(t), w
}

// condition returns the object's condition of type typ.
func condition(u *unstructured.Unstructured, typ string) (status, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			s, _ := m["status"].(string)
			r, _ := m["reason"].(string)
			msg, _ := m["message"].(string)
			return s, r, msg
		}
	}
	return "", "", ""
}

// ready is a WaitFor condition: Ready=True at the object's current generation.
func ready(u *unstructured.Unstructured) error {
	s, r, msg := condition(u, "Ready")
	og, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	if s != "True" || og != u.GetGeneration() {
		return fmt.Errorf("Ready=%s (%s: %s), observed generation %d of %d", s, r, msg, og, u.GetGeneration())
	}
	return nil
}

// waiting is a WaitFor condition: Ready=False and phase Waiting, a failure that may clear by itself.
func waiting(u *unstructured.Unstructured) error {
	s, r, msg := condition(u, "Ready")
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	if s != "False" || phase != lifecycle.PhaseWaiting {
		return fmt.Errorf("Ready=%s (%s: %s), phase %s", s, r, msg, phase)
	}
	return nil
}
