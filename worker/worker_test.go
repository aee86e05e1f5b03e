package worker

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	prom "github.com/prometheus/client_golang/prometheus"

	"github.com/stackflow/stackflow/workflows"
)

func TestRunRefusesUnknownQueue(t *testing.T) {
	err := Run(context.Background(), Config{Queues: []string{"no-such-queue"}})
	if err == nil || !strings.Contains(err.Error(), "no-such-queue") {
		t.Fatalf("Run with an unknown queue = %v, want an error naming it", err)
	}
}

// Workflow types are registered by name: a duplicate or empty name would make one definition shadow
// another on the workflow queue.
func TestWorkflowNamesUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range workflows.All() {
		if d.Name == "" || d.Fn == nil {
			t.Errorf("definition %+v has no name or function", d)
		}
		if seen[d.Name] {
			t.Errorf("workflow %s registered twice", d.Name)
		}
		seen[d.Name] = true
	}
	for _, kind := range []string{"Node", "OpenstackNode"} {
		if !seen[kind] {
			t.Errorf("no workflow for the bridge's kind %s", kind)
		}
	}
}

// /readyz says whether the worker serves its task queues; /healthz only that the process lives.
func TestReadyzAnswersOnceServing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var serving atomic.Bool
	stop, err := serveMetrics(addr, prom.NewRegistry(), &serving, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	code := func(path string) int {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := code("/healthz"); got != http.StatusOK {
		t.Errorf("/healthz before serving = %d, want 200", got)
	}
	if got := code("/readyz"); got != http.StatusServiceUnavailable {
		t.Errorf("/readyz before serving = %d, want 503", got)
	}
	serving.Store(true)
	if got := code("/readyz"); got != http.StatusOK {
		t.Errorf("/readyz while serving = %d, want 200", got)
	}
}
