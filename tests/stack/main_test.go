// Package stack proves the local real stack: every component the other tests rely on works as the
// product needs it. The stack is brought up (or reused) once for the package.
package stack

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stackflow/stackflow/deploy/local"
)

// st is the running stack, shared by every test of the package.
var st *local.Stack

func TestMain(m *testing.M) {
	var comps []string
	if c := os.Getenv("STACKFLOW_COMPONENTS"); c != "" {
		comps = strings.Split(c, ",")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	s, err := local.Up(ctx, local.Options{Components: comps})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "local stack:", err)
		os.Exit(1)
	}
	st = s
	os.Exit(m.Run())
}
