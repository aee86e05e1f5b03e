package servers

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/tests/e2e"
)

// temporalNamespace holds the tests' workflows, away from other users of the shared stack.
const temporalNamespace = "stackflow-e2e-servers"

var env *Env

func TestMain(m *testing.M) {
	os.Exit(mainErr(m))
}

// mainErr runs the tests on the run's one cloud, which tests/samples builds and leaves up: their servers
// boot in a project of their own on the samples' Nova and computes. When they pass, the project must
// hold nothing: every object's teardown removed what it made.
func mainErr(m *testing.M) (code int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var err error
	env, err = SetupOnSamples(ctx, temporalNamespace, "srv")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Close()
	if code = env.RunTests(m); code != 0 {
		return code
	}
	left, err := env.Leftovers(context.Background())
	if err != nil || len(left) > 0 {
		fmt.Fprintf(os.Stderr, "the run's project %s after every test passed: %v %s\n", env.Run, err, strings.Join(left, "; "))
		return 1
	}
	return 0
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
