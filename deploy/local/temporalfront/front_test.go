package temporalfront

import (
	"context"
	"crypto/tls"
	"net"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// TestProxyKeepsErrorStatuses calls through the proxy many times: a backend's error (trailers-only) must
// reach the client as that error every time, and a success as a success.
func TestProxyKeepsErrorStatuses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	backend := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("known", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(backend, hs)
	go func() { _ = backend.Serve(ln) }()
	t.Cleanup(backend.Stop)

	front := httptest.NewUnstartedServer(newProxy(ln.Addr().String()))
	front.EnableHTTP2 = true
	front.StartTLS()
	t.Cleanup(front.Close)

	conn, err := grpc.NewClient(front.Listener.Addr().String(),
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	client := healthpb.NewHealthClient(conn)

	for i := range 200 {
		_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "unknown"})
		require.Equal(t, codes.NotFound, status.Code(err), "call %d: %v", i, err)
		res, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "known"})
		require.NoError(t, err, "call %d", i)
		require.Equal(t, healthpb.HealthCheckResponse_SERVING, res.Status)
	}
}
