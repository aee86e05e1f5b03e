package activities

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/config"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
)

// OpenStack holds the OpenStack API activities (Nova, Neutron, Cinder, Glance), registered on
// lifecycle.OpenStackQueue. Credentials never travel through workflows: every activity names an Identity
// (a Secret holding clouds.yaml and a cloud name) and reads it through the Kubernetes API when it runs.
type OpenStack struct {
	Core kubernetes.Interface
	// PollInterval paces the waits for servers and volumes inside heartbeating activities (default 1s).
	PollInterval time.Duration

	mu      sync.Mutex
	clients map[string]*osClients
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

// osClients are the service clients of one identity, kept while its Secret does not change.
type osClients struct {
	version string
	compute *gophercloud.ServiceClient
	network *gophercloud.ServiceClient
	volume  *gophercloud.ServiceClient
	image   *gophercloud.ServiceClient
	volErr  error
}

// ComputeMicroversion is the Nova API microversion used: tags at boot (2.52), volume type in block
// device mappings (2.67).
const ComputeMicroversion = "2.67"

// clientsFor reads the identity Secret and returns (cached) clients authenticated with it.
func (o *OpenStack) clientsFor(ctx context.Context, id Identity) (*osClients, error) {
	if id.SecretName == "" || id.CloudName == "" {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("identity %s: secret name and cloud name are required", id), ErrOSCredentials, nil)
	}
	key := id.Namespace + "/" + id.SecretName + "/" + id.CloudName + "/" + id.Region
	o.mu.Lock()
	if o.clients == nil {
		o.clients = map[string]*osClients{}
	}
	c := o.clients[key]
	o.mu.Unlock()
	sec, err := o.Core.CoreV1().Secrets(id.Namespace).Get(ctx, id.SecretName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// Deleting a namespace deletes the Secret while the objects in it are still being torn down:
		// clients this worker already authenticated with it finish the job.
		if c != nil {
			return c, nil
		}
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("identity Secret %s/%s not found", id.Namespace, id.SecretName), ErrOSCredentials, err)
	}
	if err != nil {
		return nil, classify("get identity Secret "+id.Namespace+"/"+id.SecretName, err)
	}
	version := string(sec.UID) + "/" + sec.ResourceVersion
	if c != nil && c.version == version {
		return c, nil
	}
	yml, ok := sec.Data[CloudsYAMLKey]
	if !ok {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("identity Secret %s/%s has no key %s", id.Namespace, id.SecretName, CloudsYAMLKey), ErrOSCredentials, nil)
	}
	// Only the Secret's content counts: no file on this machine and no OS_* variable may leak in.
	opts := []clouds.ParseOption{clouds.WithCloudsYAML(bytes.NewReader(yml)), clouds.WithCloudName(id.CloudName),
		clouds.WithLocations(), clouds.WithSecureYAML(bytes.NewReader([]byte("clouds: {}\n")))}
	if id.Region != "" {
		opts = append(opts, clouds.WithRegion(id.Region))
	}
	ao, eo, tlsCfg, err := clouds.Parse(opts...)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("identity %s: %v", id, err), ErrOSCredentials, err)
	}
	if ca, ok := sec.Data[CACertKey]; ok {
		// The Secret's CA bundle, as CAPO's identity Secrets carry it next to clouds.yaml.
		if tlsCfg == nil {
			tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		if tlsCfg.RootCAs == nil {
			if tlsCfg.RootCAs, err = x509.SystemCertPool(); err != nil {
				tlsCfg.RootCAs = x509.NewCertPool()
			}
		}
		tlsCfg.RootCAs.AppendCertsFromPEM(ca)
	}
	ao.AllowReauth = true
	var provider *gophercloud.ProviderClient
	if tlsCfg != nil {
		provider, err = config.NewProviderClient(ctx, ao, config.WithTLSConfig(tlsCfg))
	} else {
		provider, err = config.NewProviderClient(ctx, ao)
	}
	if err != nil {
		return nil, classifyOS("authenticate with "+id.String(), err)
	}
	nc := &osClients{version: version}
	if nc.compute, err = openstack.NewComputeV2(provider, eo); err != nil {
		return nil, classifyOS("compute endpoint of "+id.String(), err)
	}
	nc.compute.Microversion = ComputeMicroversion
	if nc.network, err = openstack.NewNetworkV2(provider, eo); err != nil {
		return nil, classifyOS("network endpoint of "+id.String(), err)
	}
	if nc.image, err = openstack.NewImageV2(provider, eo); err != nil {
		return nil, classifyOS("image endpoint of "+id.String(), err)
	}
	// Block storage is optional: only block devices of type Volume need it.
	nc.volume, nc.volErr = openstack.NewBlockStorageV3(provider, eo)
	o.mu.Lock()
	o.clients[key] = nc
	o.mu.Unlock()
	return nc, nil
}

// blockStorage returns the Cinder client or a permanent error naming why there is none.
func (c *osClients) blockStorage() (*gophercloud.ServiceClient, error) {
	if c.volume == nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("no block-storage service in this cloud: %v", c.volErr), ErrOSNotFound, c.volErr)
	}
	return c.volume, nil
}

// heartbeating runs fn while heartbeating every second, so a worker that dies is noticed within the
// activity's heartbeat timeout and a cancelled workflow reaches fn through ctx.
func heartbeating[T any](ctx context.Context, fn func(ctx context.Context) (T, error)) (T, error) {
	if !activity.IsActivity(ctx) {
		return fn(ctx)
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return fn(ctx)
}

func (o *OpenStack) poll() time.Duration {
	if o.PollInterval > 0 {
		return o.PollInterval
	}
	return time.Second
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

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
// ({"error": {"message": …}}) or a plain-text body (Glance).
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
