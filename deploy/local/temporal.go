package local

import (
	"context"
	"fmt"
	"net"
	"slices"
	"time"

	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/stackflow/stackflow/api/lifecycle"
)

// Temporal dev-server endpoints (its defaults, on loopback).
const (
	TemporalPort   = 7233
	TemporalUIPort = 8233
)

// upTemporal starts the Temporal CLI's dev server with its UI and a database file in the state directory,
// so a restart keeps every workflow's history, and registers stackflow's search attributes.
func (s *Stack) upTemporal(ctx context.Context) error {
	bin, err := s.Tool("temporal", "TEMPORAL_CLI_VERSION")
	if err != nil {
		return err
	}
	s.TemporalAddress = fmt.Sprintf("127.0.0.1:%d", TemporalPort)
	s.TemporalUI = fmt.Sprintf("http://127.0.0.1:%d", TemporalUIPort)
	s.TemporalNamespace = "default"
	argv := []string{bin, "server", "start-dev",
		"--ip", "127.0.0.1",
		"--port", fmt.Sprint(TemporalPort),
		"--ui-port", fmt.Sprint(TemporalUIPort),
		"--db-filename", s.Path("temporal", "temporal.db"),
		"--namespace", s.TemporalNamespace,
		"--log-level", "warn",
	}
	names := make([]string, 0, len(lifecycle.SearchAttributes))
	for n := range lifecycle.SearchAttributes {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		argv = append(argv, "--search-attribute", n+"="+lifecycle.SearchAttributes[n])
	}
	if err := mkdirs(s.Path("temporal"), s.Path("bin")); err != nil {
		return err
	}
	// People steer workflows with the temporal CLI: offer it beside the state.
	if err := symlink(bin, s.Path("bin", "temporal")); err != nil {
		return err
	}
	started, err := s.Start(Proc{Name: "temporal", Argv: argv})
	if err != nil {
		return err
	}
	if started {
		s.Logf("temporal: started dev server on %s, UI %s", s.TemporalAddress, s.TemporalUI)
	}
	wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	return s.WaitFor(wctx, "temporal ready", "temporal", 300*time.Millisecond, func(ctx context.Context) error {
		return s.checkTemporal(ctx)
	})
}

// checkTemporal is ready when the frontend answers and every custom search attribute is registered.
func (s *Stack) checkTemporal(ctx context.Context) error {
	conn, err := net.DialTimeout("tcp", s.TemporalAddress, time.Second)
	if err != nil {
		return err
	}
	conn.Close()
	c, err := client.DialContext(ctx, client.Options{HostPort: s.TemporalAddress, Namespace: s.TemporalNamespace, Logger: quietLogger{}})
	if err != nil {
		return err
	}
	defer c.Close()
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: s.TemporalNamespace})
	if err != nil {
		return err
	}
	for n := range lifecycle.SearchAttributes {
		if _, ok := resp.GetCustomAttributes()[n]; !ok {
			return fmt.Errorf("search attribute %s not registered yet", n)
		}
	}
	return nil
}

// quietLogger drops the SDK client's logs during readiness polling.
type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}
