package openstack

import (
	"context"

	"github.com/gophercloud/gophercloud/v2"

	"go.temporal.io/sdk/temporal"
)

// DefaultCloudsSecret is the Secret (in the object's namespace) holding the clouds.yaml the data-plane
// activities authenticate with (key clouds.yaml; key cloud names the cloud, else the only one).
const DefaultCloudsSecret = "openstack-clouds"

// CloudSecret names a clouds.yaml Secret. The cloud is the Secret's "cloud" key, or the file's only
// cloud: the workflow never needs to know it.
type CloudSecret struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// ComputeRegion is the region whose compute endpoint the Nova client uses (a Nova serving its own
	// region); the cloud's region when empty. Other services are found in the cloud's region.
	ComputeRegion string `json:"computeRegion,omitempty"`
	// Fallback is the Secret used instead when Name holds no clouds.yaml (or is gone and no client of
	// it is kept): see ServiceCloud.
	Fallback string `json:"fallback,omitempty"`
}

// ServiceCloud is how a data-plane service reaches the cloud of the Nova it belongs to: with the
// clouds.yaml in secret, the Secret of that Nova's services, where a Nova writes one for its service
// user; with the namespace's DefaultCloudsSecret when that Secret holds none (a NovaCell made by hand
// from a Secret of the user's) or when the service belongs to no Nova (secret empty).
func ServiceCloud(namespace, secret, computeRegion string) CloudSecret {
	if secret == "" || secret == DefaultCloudsSecret {
		return CloudSecret{Namespace: namespace, Name: DefaultCloudsSecret, ComputeRegion: computeRegion}
	}
	return CloudSecret{Namespace: namespace, Name: secret, ComputeRegion: computeRegion, Fallback: DefaultCloudsSecret}
}

func (c CloudSecret) String() string {
	if c.ComputeRegion != "" {
		return c.Namespace + "/" + c.Name + " (compute in " + c.ComputeRegion + ")"
	}
	return c.Namespace + "/" + c.Name
}

// Identity is the identity of the Secret's cloud (named by the Secret itself), with its compute region.
func (c CloudSecret) Identity() Identity {
	return Identity{Namespace: c.Namespace, SecretName: c.Name, ComputeRegion: c.ComputeRegion, Fallback: c.Fallback}
}

// ResolveImageID finds a Glance image by ID or by its unique name (a bare-metal node's image).
func ResolveImageID(ctx context.Context, glance ImageClient, ref string) (string, error) {
	if ref == "" {
		return "", temporal.NewNonRetryableApplicationError("no image to deploy: set bareMetal.image or the role's baremetalSetTemplate.image", ErrOSInvalid, nil)
	}
	if img, err := glance.GetImage(ctx, ref); err == nil {
		return img.ID, nil
	}
	found, err := glance.ListImages(ctx, ImageListOpts{Name: ref})
	if err != nil {
		return "", classifyOS("list images named "+ref, err)
	}
	switch len(found) {
	case 0:
		return "", notFound("image %q not found", ref)
	case 1:
		return found[0].ID, nil
	}
	return "", ambiguous("%d images are named %q", len(found), ref)
}

func isConflict(err error) bool {
	return gophercloud.ResponseCodeIs(err, 409)
}
