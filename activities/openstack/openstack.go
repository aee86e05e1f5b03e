// Package openstack holds the activities that talk to OpenStack's APIs through gophercloud: servers,
// ports, volumes and floating IPs (the servers family), compute services, hypervisors and live migration
// (data-plane computes and their updates), Keystone endpoints (the Nova control plane) and Ironic nodes
// (phase -1). Clients come from a clouds.yaml Secret per identity, per region of the compute API; a file
// per OpenStack service; OpenStack's errors are classified beside them (permanent 4xx with OpenStack's
// own message, retried 409/5xx/timeouts).
package openstack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"go.temporal.io/sdk/temporal"

	"github.com/stackflow/stackflow/activities/internal/heartbeat"
)

// OpenStack holds the OpenStack API activities (Nova, Neutron, Cinder, Glance), registered on
// lifecycle.OpenStackQueue. Credentials never travel through workflows: every activity names an Identity
// (a Secret holding clouds.yaml and a cloud name) and reads it through the Kubernetes API when it runs.
type OpenStack struct {
	Core kubernetes.Interface
	// PollInterval paces the waits for servers and volumes inside heartbeating activities (default 1s).
	PollInterval time.Duration
	// AdoptWindow is how long a retried or refused server create looks for the server of an earlier
	// attempt before making another (default 15s).
	AdoptWindow time.Duration

	mu      sync.Mutex
	clients map[string]*osClients
	// network, when set (unit tests), makes the Neutron clients instead of networkFor's gophercloud.
	network func(ctx context.Context, id Identity) (NetworkClient, error)
	// compute, when set (unit tests), makes the Nova clients instead of computeFor's gophercloud.
	compute func(ctx context.Context, id Identity) (ComputeClient, error)
	// volume and image, when set (unit tests), make the Cinder and Glance clients.
	volume func(ctx context.Context, id Identity) (VolumeClient, error)
	image  func(ctx context.Context, id Identity) (ImageClient, error)
	// placement, when set (unit tests), makes the Placement clients.
	placement func(ctx context.Context, id Identity) (PlacementClient, error)
	// identity, when set (unit tests), is the Keystone client (and Keystone's endpoint) of every
	// service user and administrator.
	identity func(ctx context.Context) (IdentityClient, string, error)
}

// NewOpenStack builds the OpenStack activities from a Kubernetes REST config (for the identity Secrets).
func NewOpenStack(cfg *rest.Config) (*OpenStack, error) {
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return &OpenStack{Core: core}, nil
}

// Identity names the credentials of a cloud: the Secret (in Namespace) whose key clouds.yaml holds the
// cloud CloudName. It carries no secret value.
type Identity struct {
	Namespace  string `json:"namespace"`
	SecretName string `json:"secretName"`
	CloudName  string `json:"cloudName"`
	Region     string `json:"region,omitempty"`
	// ComputeRegion is the region whose compute endpoint the Nova client uses (a Nova serving a region of
	// its own); Region when empty.
	ComputeRegion string `json:"computeRegion,omitempty"`
	// Fallback is the Secret used instead when SecretName holds no clouds.yaml, or is gone while no
	// client of it is kept (the cloud is then the fallback's own).
	Fallback string `json:"fallback,omitempty"`
}

func (id Identity) String() string {
	return fmt.Sprintf("%s/%s (cloud %s)", id.Namespace, id.SecretName, id.CloudName)
}

// Keys of the identity Secret.
const (
	CloudsYAMLKey = "clouds.yaml"
	CACertKey     = "cacert"
)

// Error types of OpenStack activities that retrying cannot fix. They become condition reasons.
const (
	ErrOSNotFound    = "OpenStackNotFound"
	ErrOSInvalid     = "OpenStackInvalidRequest"
	ErrOSQuota       = "OpenStackQuotaExceeded"
	ErrOSForbidden   = "OpenStackForbidden"
	ErrOSAmbiguous   = "OpenStackAmbiguousReference"
	ErrOSCredentials = "OpenStackCredentials"
	ErrServerFailed  = "ServerError"
	ErrVolumeFailed  = "VolumeError"
	// ErrOSNotReady is the retryable error of activities whose retry policy paces a wait.
	ErrOSNotReady = "OpenStackNotReady"
)

// Marker makes every resource a workflow creates findable again: by its deterministic name plus the owner
// tag (and the description or metadata carrying the same marker, set atomically at creation for
// resources whose tags can only be set afterwards).
type Marker struct {
	// Owner is a short hash of the workflow ID; every resource of one object carries it.
	Owner string `json:"owner"`
	// Instance is a short hash of the server instance name; empty for resources shared across
	// instances (a bastion's pinned floating IP).
	Instance string `json:"instance,omitempty"`
}

// Tag names of the marker.
const (
	OwnerTagPrefix    = "stackflow-owner="
	InstanceTagPrefix = "stackflow-instance="
)

// ShortHash is the first 12 hex digits of the SHA-256 of s: stable, short enough for tags.
func ShortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}

// OwnerTag is the tag every resource of the owner carries.
func (m Marker) OwnerTag() string { return OwnerTagPrefix + m.Owner }

// Tags are the marker tags (owner, and instance when set).
func (m Marker) Tags() []string {
	t := []string{m.OwnerTag()}
	if m.Instance != "" {
		t = append(t, InstanceTagPrefix+m.Instance)
	}
	return t
}

// Description is the marker as a description (Neutron resources: set at creation, unlike tags).
func (m Marker) Description() string { return strings.Join(m.Tags(), " ") }

// Metadata is the marker as metadata (Nova servers, Cinder volumes).
func (m Marker) Metadata() map[string]string {
	md := map[string]string{"stackflow-owner": m.Owner}
	if m.Instance != "" {
		md["stackflow-instance"] = m.Instance
	}
	return md
}

// Owns reports whether a resource with these tags or this description belongs to the marker (to its
// instance when the marker names one).
func (m Marker) Owns(tags []string, description string) bool {
	want := m.Tags()
	has := func(t string) bool {
		for _, x := range tags {
			if x == t {
				return true
			}
		}
		return strings.Contains(" "+description+" ", " "+t+" ")
	}
	for _, t := range want {
		if !has(t) {
			return false
		}
	}
	return true
}

func (o *OpenStack) poll() time.Duration {
	if o.PollInterval > 0 {
		return o.PollInterval
	}
	return time.Second
}

// Classify turns an OpenStack API error into an activity's error as the OpenStack activities do (see
// classifyOS): the bare-metal activities share the table.
func Classify(op string, err error) error { return classifyOS(op, err) }

// sleep is heartbeat.Sleep.
var sleep = heartbeat.Sleep

// classifyOS turns an OpenStack API error into a non-retryable application error carrying OpenStack's
// own message when retrying cannot help (400, 401, 403, 404, quota), and leaves it retryable otherwise
// (409 conflicts, 429, 5xx, timeouts, connection errors).
func classifyOS(op string, err error) error {
	if err == nil {
		return nil
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return err
	}
	var code gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &code) {
		msg := OpenStackMessage(code.Body)
		if msg == "" {
			msg = fmt.Sprintf("HTTP %d", code.Actual)
		}
		full := fmt.Sprintf("%s: %s", op, msg)
		if IsQuotaMessage(msg) && (code.Actual == 403 || code.Actual == 409 || code.Actual == 413) {
			return temporal.NewNonRetryableApplicationError(full, ErrOSQuota, err)
		}
		switch code.Actual {
		case 400, 405, 406, 415, 422:
			return temporal.NewNonRetryableApplicationError(full, ErrOSInvalid, err)
		case 401:
			return temporal.NewNonRetryableApplicationError(full, ErrOSCredentials, err)
		case 403:
			return temporal.NewNonRetryableApplicationError(full, ErrOSForbidden, err)
		case 404:
			return temporal.NewNonRetryableApplicationError(full, ErrOSNotFound, err)
		case 413:
			return temporal.NewNonRetryableApplicationError(full, ErrOSQuota, err)
		}
		return fmt.Errorf("%s: %s: %w", op, msg, err)
	}
	var nerr net.Error
	if errors.As(err, &nerr) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// IsQuotaMessage reports whether an OpenStack error message is about an exceeded quota.
func IsQuotaMessage(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "quota exceeded") || strings.Contains(m, "overquota") || strings.Contains(m, "over quota") || strings.Contains(m, "exceeded quota")
}

// OpenStackMessage extracts the human message from an OpenStack error body: Nova and Cinder
// ({"itemNotFound": {"message": …}}), Neutron ({"NeutronError": {"message": …}}), Keystone
// ({"error": {"message": …}}), Placement ({"errors": [{"detail": …}]}), Ironic ({"error_message": …}) or
// a plain-text body (Glance).
func OpenStackMessage(body []byte) string {
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err == nil {
		if m, ok := doc["message"].(string); ok && m != "" {
			return m
		}
		for _, k := range sortedKeys(doc) {
			if inner, ok := doc[k].(map[string]any); ok {
				if m, ok := inner["message"].(string); ok && m != "" {
					return m
				}
			}
		}
		// Placement: {"errors": [{"detail": …}]}.
		if errs, ok := doc["errors"].([]any); ok && len(errs) > 0 {
			if e, ok := errs[0].(map[string]any); ok {
				if m, ok := e["detail"].(string); ok && m != "" {
					return m
				}
			}
		}
		// Ironic: {"error_message": "{\"faultstring\": …}"}, its fault encoded again as a string.
		if em, ok := doc["error_message"].(string); ok && em != "" {
			var fault struct {
				Faultstring string `json:"faultstring"`
			}
			if json.Unmarshal([]byte(em), &fault) == nil && fault.Faultstring != "" {
				return fault.Faultstring
			}
			return em
		}
	}
	text := strings.Join(strings.Fields(string(body)), " ")
	if len(text) > 400 {
		text = text[:400] + "…"
	}
	return text
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

func isNotFound(err error) bool {
	return gophercloud.ResponseCodeIs(err, 404)
}

// notFound is the permanent error of a reference that matches nothing.
func notFound(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), ErrOSNotFound, nil)
}

// ambiguous is the permanent error of a reference that matches more than one resource.
func ambiguous(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), ErrOSAmbiguous, nil)
}
