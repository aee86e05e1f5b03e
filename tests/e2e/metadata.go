package e2e

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/stackflow/stackflow/deploy/local"
)

// GVRNovaMetadata is the resource of the NovaMetadata kind.
var GVRNovaMetadata = schema.GroupVersionResource{Group: "nova.openstack.org", Version: "v1beta1", Resource: "novametadata"}

// InstanceMetadata is the request an OVN metadata agent forwards for an instance, as the agent signs it
// (X-Instance-ID, X-Tenant-ID, HMAC-SHA256 of the instance ID with the shared secret, X-Forwarded-For the
// instance's address), sent with curl from test host from's network to the NovaMetadata ns/name at the
// endpoint its status reports, signed with the shared secret of its Nova's Secret. The answer must be
// the instance's meta_data.json; it is returned.
func (e *Env) InstanceMetadata(ctx context.Context, t testing.TB, ns, name string, from local.TestHost, instance, tenant, address string) map[string]any {
	t.Helper()
	md, err := e.Dyn.Resource(GVRNovaMetadata).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	endpoint := Str(md, "status", "endpoint")
	require.NotEmpty(t, endpoint, "the NovaMetadata %s/%s reports where it answers", ns, name)
	mac := hmac.New(sha256.New, []byte(e.SecretValue(t, ns, Str(md, "spec", "secret"), "MetadataSecret")))
	mac.Write([]byte(instance))
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", from.Namespace, "curl", "-sS", "--fail-with-body", "--max-time", "20",
		"-H", "X-Instance-ID: "+instance, "-H", "X-Tenant-ID: "+tenant, "-H", "X-Instance-ID-Signature: "+hex.EncodeToString(mac.Sum(nil)),
		"-H", "X-Forwarded-For: "+address, endpoint+"/openstack/latest/meta_data.json").CombinedOutput()
	require.NoError(t, err, "the metadata request from %s to %s: %s", from.Name, endpoint, out)
	var meta map[string]any
	require.NoError(t, json.Unmarshal(out, &meta), "%s", out)
	require.Equal(t, instance, meta["uuid"], "%s answered with the metadata of instance %s: %s", name, instance, out)
	return meta
}
