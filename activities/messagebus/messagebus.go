// Package messagebus holds the activities that create and remove the RabbitMQ vhosts and users of the Nova
// control plane through RabbitMQ's management API (rabbit-hole), with generated passwords written into
// Secrets and transport URLs handed down in them.
package messagebus

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/stackflow/stackflow/activities/kube"

	rabbithole "github.com/michaelklishin/rabbit-hole/v2"
	"go.temporal.io/sdk/temporal"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// MessageBus holds the message-bus activities: virtual hosts, users and permissions in RabbitMQ through
// its management HTTP API (rabbit-hole, the RabbitMQ team's Go client), and the transport URLs services
// connect with, written into Secrets. No password leaves an activity.
type MessageBus struct {
	Core kubernetes.Interface
}

// NewMessageBus builds the message-bus activities from a REST config (Secrets hold every credential).
func NewMessageBus(cfg *rest.Config) (*MessageBus, error) {
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return &MessageBus{Core: core}, nil
}

// MessageBusServer is a RabbitMQ broker known by the Secret of its administrator, with the keys
// management_url (the HTTP API), username, password and amqp_host, amqp_port (where services connect).
type MessageBusServer struct {
	Namespace   string `json:"namespace"`
	AdminSecret string `json:"adminSecret"`
}

// VhostInput is one virtual host and its user, and where the transport URL goes.
type VhostInput struct {
	Server MessageBusServer `json:"server"`
	Vhost  string           `json:"vhost"`
	User   string           `json:"user"`
	// Password is where the user's password lives; generated when the key is missing.
	Password kube.SecretKeyRef `json:"password"`
	// TransportURL receives rabbit://user:password@host:port/vhost.
	TransportURL kube.SecretKeyRef `json:"transportURL"`
	Owner        *kube.Owner       `json:"owner,omitempty"`
}

// Error types of the message-bus activities.
const (
	ErrMessageBusInvalid = "MessageBusInvalid"
	ErrMessageBusAuth    = "MessageBusAccessDenied"
)

type brokerAdmin struct {
	client   *rabbithole.Client
	amqpHost string
	amqpPort string
}

func (m *MessageBus) admin(ctx context.Context, srv MessageBusServer) (*brokerAdmin, error) {
	get := func(key string) (string, error) {
		return kube.ReadSecretKey(ctx, m.Core, kube.SecretKeyRef{Namespace: srv.Namespace, Name: srv.AdminSecret, Key: key})
	}
	vals := map[string]string{}
	for _, k := range []string{"management_url", "username", "password", "amqp_host", "amqp_port"} {
		v, err := get(k)
		if err != nil {
			return nil, err
		}
		vals[k] = v
	}
	tr := &http.Transport{DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext, ResponseHeaderTimeout: 30 * time.Second}
	c, err := rabbithole.NewClient(vals["management_url"], vals["username"], vals["password"])
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("message bus %s: %v", vals["management_url"], err), ErrMessageBusInvalid, err)
	}
	c.SetTransport(authCheck{tr})
	return &brokerAdmin{client: c, amqpHost: vals["amqp_host"], amqpPort: vals["amqp_port"]}, nil
}

// errUnauthorized is the management API's 401. rabbit-hole reports it as an error of text only, so
// authCheck returns this one instead, for classifyBroker to find.
var errUnauthorized = errors.New("the management API refused the administrator's credentials (401)")

// authCheck turns the management API's 401 into errUnauthorized.
type authCheck struct{ next http.RoundTripper }

func (a authCheck) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := a.next.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		resp.Body.Close()
		return nil, errUnauthorized
	}
	return resp, err
}

// classifyBroker makes 401/403 and 400 permanent and leaves the rest retryable.
func classifyBroker(op string, err error) error {
	if errors.Is(err, errUnauthorized) {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: %v", op, err), ErrMessageBusAuth, err)
	}
	var e rabbithole.ErrorResponse
	if errors.As(err, &e) {
		switch e.StatusCode {
		case 401, 403:
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: %v", op, err), ErrMessageBusAuth, err)
		case 400:
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: %v", op, err), ErrMessageBusInvalid, err)
		}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// checkResponse turns an HTTP response of the management API into an error.
func checkResponse(resp *http.Response, err error) error {
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		return rabbithole.ErrorResponse{StatusCode: resp.StatusCode, Message: resp.Status}
	}
	return nil
}

// EnsureVhost creates the virtual host and its user (adopting either when present), gives the user all
// permissions on it, sets its password to the Secret's (generated first when missing) and writes the
// transport URL. Idempotent.
func (m *MessageBus) EnsureVhost(ctx context.Context, in VhostInput) error {
	if in.Vhost == "" || in.User == "" {
		return temporal.NewNonRetryableApplicationError("vhost and user are required", ErrMessageBusInvalid, nil)
	}
	pw, err := kube.EnsureSecretKey(ctx, m.Core, in.Password, in.Owner, kube.GeneratePassword)
	if err != nil {
		return err
	}
	b, err := m.admin(ctx, in.Server)
	if err != nil {
		return err
	}
	op := fmt.Sprintf("vhost %s (user %s)", in.Vhost, in.User)
	if err := checkResponse(b.client.PutVhost(in.Vhost, rabbithole.VhostSettings{Description: "stackflow"})); err != nil {
		return classifyBroker(op, err)
	}
	if err := checkResponse(b.client.PutUser(in.User, rabbithole.UserSettings{Password: pw, Tags: rabbithole.UserTags{}})); err != nil {
		return classifyBroker(op, err)
	}
	if err := checkResponse(b.client.UpdatePermissionsIn(in.Vhost, in.User, rabbithole.Permissions{Configure: ".*", Write: ".*", Read: ".*"})); err != nil {
		return classifyBroker(op, err)
	}
	return kube.WriteSecretKey(ctx, m.Core, in.TransportURL, in.Owner, TransportURL(in.User, pw, b.amqpHost, b.amqpPort, in.Vhost))
}

// DeleteVhost removes the virtual host (with its queues) and the user; what is gone is not an error.
func (m *MessageBus) DeleteVhost(ctx context.Context, in VhostInput) error {
	b, err := m.admin(ctx, in.Server)
	if err != nil {
		return err
	}
	op := fmt.Sprintf("delete vhost %s (user %s)", in.Vhost, in.User)
	for _, del := range []func() (*http.Response, error){
		func() (*http.Response, error) { return b.client.DeleteVhost(in.Vhost) },
		func() (*http.Response, error) { return b.client.DeleteUser(in.User) },
	} {
		err := checkResponse(del())
		var e rabbithole.ErrorResponse
		if err != nil && !(errors.As(err, &e) && e.StatusCode == 404) {
			return classifyBroker(op, err)
		}
	}
	return nil
}

// TransportURL is oslo.messaging's URL for a RabbitMQ user on a vhost.
func TransportURL(user, password, host, port, vhost string) string {
	u := url.URL{Scheme: "rabbit", User: url.UserPassword(user, password), Host: net.JoinHostPort(host, port), Path: "/" + vhost}
	// oslo.messaging takes the vhost from the path: slashes in it must stay escaped.
	u.RawPath = "/" + strings.ReplaceAll(url.PathEscape(vhost), "/", "%2F")
	return u.String()
}
