package messagebus

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/stackflow/stackflow/activities/kube"
)

// broker is RabbitMQ's management API as the activities use it: vhosts, users and permissions, each
// answering with the status a test sets for its path (404 once deleted).
type broker struct {
	mu       sync.Mutex
	requests []string
	bodies   map[string]string
	status   map[string]int // "METHOD /path" → status to answer instead
	deleted  map[string]bool
}

func (b *broker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	key := r.Method + " " + r.URL.EscapedPath()
	b.requests = append(b.requests, key)
	body, _ := io.ReadAll(r.Body)
	b.bodies[key] = string(body)
	if code := b.status[key]; code != 0 {
		w.WriteHeader(code)
		_, _ = w.Write([]byte(`{"error":"test","reason":"set by the test"}`))
		return
	}
	if r.Method == http.MethodDelete {
		if b.deleted[r.URL.EscapedPath()] {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":"Object Not Found","reason":"Not Found"}`))
			return
		}
		b.deleted[r.URL.EscapedPath()] = true
	}
	w.WriteHeader(http.StatusCreated)
}

func newBroker(t *testing.T) (*broker, *MessageBus, VhostInput) {
	b := &broker{bodies: map[string]string{}, status: map[string]int{}, deleted: map[string]bool{}}
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	core := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "rabbitmq-admin"},
		Data: map[string][]byte{"management_url": []byte(srv.URL), "username": []byte("admin"), "password": []byte("pw"),
			"amqp_host": []byte("rabbitmq.infra"), "amqp_port": []byte("5672")}})
	in := VhostInput{Server: MessageBusServer{Namespace: "infra", AdminSecret: "rabbitmq-admin"}, Vhost: "nova/cell1", User: "nova-cell1",
		Password:     kube.SecretKeyRef{Namespace: "openstack", Name: "nova-cell1-mq", Key: "password"},
		TransportURL: kube.SecretKeyRef{Namespace: "openstack", Name: "nova-cell1-mq", Key: "transport_url"}}
	return b, &MessageBus{Core: core}, in
}

func secretKey(t *testing.T, m *MessageBus, ref kube.SecretKeyRef) string {
	v, err := kube.ReadSecretKey(context.Background(), m.Core, ref)
	require.NoError(t, err)
	return v
}

// TestEnsureVhost: vhost, user with the Secret's password (generated once, kept on a retry),
// permissions, then the transport URL; a second call changes nothing of the password.
func TestEnsureVhost(t *testing.T) {
	b, m, in := newBroker(t)
	require.NoError(t, m.EnsureVhost(context.Background(), in))
	require.Equal(t, []string{"PUT /api/vhosts/nova%2Fcell1", "PUT /api/users/nova-cell1", "PUT /api/permissions/nova%2Fcell1/nova-cell1"}, b.requests)
	pw := secretKey(t, m, in.Password)
	require.GreaterOrEqual(t, len(pw), 16, "a generated password")
	require.Contains(t, b.bodies["PUT /api/users/nova-cell1"], pw, "the user gets the Secret's password")
	require.Contains(t, b.bodies["PUT /api/permissions/nova%2Fcell1/nova-cell1"], `"configure":".*"`)
	require.Equal(t, "rabbit://nova-cell1:"+url.QueryEscape(pw)+"@rabbitmq.infra:5672/nova%2Fcell1", secretKey(t, m, in.TransportURL))

	require.NoError(t, m.EnsureVhost(context.Background(), in), "a retry")
	require.Equal(t, pw, secretKey(t, m, in.Password), "the password is generated once")
}

func TestEnsureVhostRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      func(*VhostInput)
		path    string
		code    int
		errType string // "" for retryable
	}{
		{"no vhost named", func(in *VhostInput) { in.Vhost = "" }, "", 0, ErrMessageBusInvalid},
		{"administrator refused", func(*VhostInput) {}, "PUT /api/vhosts/nova%2Fcell1", 401, ErrMessageBusAuth},
		{"not allowed to make users", func(*VhostInput) {}, "PUT /api/users/nova-cell1", 403, ErrMessageBusAuth},
		{"bad request", func(*VhostInput) {}, "PUT /api/permissions/nova%2Fcell1/nova-cell1", 400, ErrMessageBusInvalid},
		{"broker busy: retried", func(*VhostInput) {}, "PUT /api/users/nova-cell1", 503, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, m, in := newBroker(t)
			tc.in(&in)
			if tc.path != "" {
				b.status[tc.path] = tc.code
			}
			err := m.EnsureVhost(context.Background(), in)
			require.Error(t, err)
			var app *temporal.ApplicationError
			if tc.errType == "" {
				require.False(t, errors.As(err, &app) && app.NonRetryable(), "retryable: %v", err)
				return
			}
			require.True(t, errors.As(err, &app) && app.NonRetryable(), "permanent: %v", err)
			require.Equal(t, tc.errType, app.Type())
			_, err = kube.ReadSecretKey(context.Background(), m.Core, in.TransportURL)
			require.Error(t, err, "no transport URL for a vhost that failed")
		})
	}
}

// TestDeleteVhost: vhost and user go; what is gone already is no error; a broker error is retried.
func TestDeleteVhost(t *testing.T) {
	b, m, in := newBroker(t)
	require.NoError(t, m.DeleteVhost(context.Background(), in))
	require.Equal(t, []string{"DELETE /api/vhosts/nova%2Fcell1", "DELETE /api/users/nova-cell1"}, b.requests)
	require.NoError(t, m.DeleteVhost(context.Background(), in), "gone already (404)")

	b.status["DELETE /api/users/nova-cell1"] = 503
	delete(b.deleted, "/api/vhosts/nova%2Fcell1")
	err := m.DeleteVhost(context.Background(), in)
	require.Error(t, err)
	var app *temporal.ApplicationError
	require.False(t, errors.As(err, &app) && app.NonRetryable(), "retryable: %v", err)
}
