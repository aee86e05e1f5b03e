package openstack

import (
	"context"
	"fmt"
	"strconv"

	"github.com/stackflow/stackflow/activities/internal/heartbeat"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"

	"go.temporal.io/sdk/activity"
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

// BaremetalInput provisions one host through Ironic.
type BaremetalInput struct {
	Cloud CloudSecret `json:"cloud"`
	// Name is the Ironic node's name: the node is adopted when it exists, enrolled when not.
	Name   string `json:"name"`
	Driver string `json:"driver"`
	// Image is the Glance image (name or ID) deployed to the root disk.
	Image      string            `json:"image"`
	Properties map[string]string `json:"properties,omitempty"`
}

// BaremetalResult is the provisioned Ironic node.
type BaremetalResult struct {
	UUID           string `json:"uuid"`
	ProvisionState string `json:"provisionState"`
	// Enrolled is true when this activity created the Ironic node (teardown deletes only such nodes).
	Enrolled bool `json:"enrolled"`
}

// ErrBaremetalFailed is the permanent error of a provisioning that Ironic reports as failed.
const ErrBaremetalFailed = "BaremetalFailed"

// ProvisionBaremetal takes the Ironic node named in.Name to active: enroll (or adopt) → manage →
// provide → deploy with the image → wait for active, heartbeat.While all along. It is idempotent: it
// resumes from whatever state an earlier attempt left the node in (provisionStep decides each move).
func (o *OpenStack) ProvisionBaremetal(ctx context.Context, in BaremetalInput) (*BaremetalResult, error) {
	return heartbeat.While(ctx, func(ctx context.Context) (*BaremetalResult, error) {
		ironic, err := o.baremetalFor(ctx, in.Cloud.Identity())
		if err != nil {
			return nil, err
		}
		glance, err := o.imageFor(ctx, in.Cloud.Identity())
		if err != nil {
			return nil, err
		}
		res := &BaremetalResult{}
		node, err := ironic.GetNode(ctx, in.Name)
		if isNotFound(err) {
			props := map[string]any{}
			for k, v := range in.Properties {
				if n, err := strconv.Atoi(v); err == nil {
					props[k] = n
				} else {
					props[k] = v
				}
			}
			node, err = ironic.CreateNode(ctx, nodes.CreateOpts{Name: in.Name, Driver: in.Driver, Properties: props})
			if err != nil {
				return nil, classifyOS("enroll Ironic node "+in.Name, err)
			}
			res.Enrolled = true
		} else if err != nil {
			return nil, classifyOS("get Ironic node "+in.Name, err)
		}
		res.UUID = node.UUID
		imageID, err := resolveImageID(ctx, glance, in.Image)
		if err != nil {
			return nil, err
		}
		for {
			node, err = ironic.GetNode(ctx, res.UUID)
			if err != nil {
				return nil, classifyOS("get Ironic node "+in.Name, err)
			}
			res.ProvisionState = node.ProvisionState
			if activity.IsActivity(ctx) {
				activity.RecordHeartbeat(ctx, res)
			}
			step := provisionStep(node.ProvisionState, node.TargetProvisionState)
			switch {
			case step.done:
				return res, nil
			case step.failed:
				return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("Ironic node %s is in state %q: %s", in.Name, node.ProvisionState, node.LastError), ErrBaremetalFailed, nil)
			case step.target == "":
				if err := sleep(ctx, o.poll()); err != nil {
					return nil, err
				}
				continue
			}
			if step.target == nodes.TargetActive {
				if err := setImage(ctx, ironic, node, imageID); err != nil {
					return nil, err
				}
			}
			// A conflict is a node another call moved meanwhile: the next read sees where it went.
			if err := ironic.ChangeProvisionState(ctx, res.UUID, step.target); err != nil && !isConflict(err) {
				return nil, classifyOS(fmt.Sprintf("move Ironic node %s to %s", in.Name, step.target), err)
			}
		}
	})
}

// ironicStep is what a provisioning or deprovisioning does next with a node: it is done, it failed, it
// asks Ironic for a target (deploying sets the image first), it deletes the node, or (none of these)
// it waits for Ironic to move the node on.
type ironicStep struct {
	done, failed, delete bool
	target               nodes.TargetProvisionState
}

// provisionStep is Ironic's provisioning state machine as stackflow walks it to active: enroll →
// manage, manageable → provide (cleaning, when Ironic is set to), available → deploy, active is done;
// a failed state is final; a node with a transition under way (verifying, cleaning, deploying, wait
// call-back), or in a state of no move of ours, is waited for.
func provisionStep(state, transition string) ironicStep {
	if transition != "" {
		return ironicStep{}
	}
	switch nodes.ProvisionState(state) {
	case nodes.Active:
		return ironicStep{done: true}
	case nodes.Enroll:
		return ironicStep{target: nodes.TargetManage}
	case nodes.Manageable:
		return ironicStep{target: nodes.TargetProvide}
	case nodes.Available:
		return ironicStep{target: nodes.TargetActive}
	case nodes.DeployFail, nodes.CleanFail, nodes.Error, nodes.InspectFail, nodes.AdoptFail:
		return ironicStep{failed: true}
	}
	return ironicStep{}
}

// deprovisionStep walks a node back: a deployed (or failed) node is undeployed (Ironic cleans it on the
// way to available); an available, manageable or enrolled node is done, or deleted when del (stackflow
// enrolled it); a node in transition is waited for.
func deprovisionStep(state, transition string, del bool) ironicStep {
	if transition != "" {
		return ironicStep{}
	}
	switch nodes.ProvisionState(state) {
	case nodes.Active, nodes.DeployFail, nodes.Error:
		return ironicStep{target: nodes.TargetDeleted}
	case nodes.Available, nodes.Manageable, nodes.Enroll:
		return ironicStep{done: !del, delete: del}
	}
	return ironicStep{}
}

// DeprovisionInput undeploys (and, when stackflow enrolled it, deletes) an Ironic node.
type DeprovisionInput struct {
	Cloud  CloudSecret `json:"cloud"`
	UUID   string      `json:"uuid"`
	Delete bool        `json:"delete"`
}

// DeprovisionBaremetal undeploys the node back to available and deletes it when asked; a missing node
// is not an error.
func (o *OpenStack) DeprovisionBaremetal(ctx context.Context, in DeprovisionInput) error {
	_, err := heartbeat.While(ctx, func(ctx context.Context) (struct{}, error) {
		ironic, err := o.baremetalFor(ctx, in.Cloud.Identity())
		if err != nil {
			return struct{}{}, err
		}
		for {
			node, err := ironic.GetNode(ctx, in.UUID)
			if isNotFound(err) {
				return struct{}{}, nil
			}
			if err != nil {
				return struct{}{}, classifyOS("get Ironic node "+in.UUID, err)
			}
			step := deprovisionStep(node.ProvisionState, node.TargetProvisionState, in.Delete)
			switch {
			case step.done:
				return struct{}{}, nil
			case step.delete:
				err := ironic.DeleteNode(ctx, in.UUID)
				if err == nil || isNotFound(err) {
					return struct{}{}, nil
				}
				if !isConflict(err) {
					return struct{}{}, classifyOS("delete Ironic node "+in.UUID, err)
				}
				// Locked by a task of Ironic's own: asked again once it is done.
				if err := sleep(ctx, o.poll()); err != nil {
					return struct{}{}, err
				}
				continue
			case step.target == "":
				if err := sleep(ctx, o.poll()); err != nil {
					return struct{}{}, err
				}
				continue
			}
			if err := ironic.ChangeProvisionState(ctx, in.UUID, step.target); err != nil && !isConflict(err) {
				return struct{}{}, classifyOS("deprovision Ironic node "+in.UUID, err)
			}
		}
	})
	return err
}

func setImage(ctx context.Context, ironic BaremetalClient, node *nodes.Node, imageID string) error {
	if node.InstanceInfo["image_source"] == imageID {
		return nil
	}
	rootGB := 1
	if v, ok := node.Properties["local_gb"]; ok {
		if n, err := strconv.Atoi(fmt.Sprint(v)); err == nil && n > 0 {
			rootGB = n
		}
	}
	err := ironic.UpdateNode(ctx, node.UUID, nodes.UpdateOpts{
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/image_source", Value: imageID},
		nodes.UpdateOperation{Op: nodes.AddOp, Path: "/instance_info/root_gb", Value: rootGB},
	})
	if err != nil {
		return classifyOS("set the image of Ironic node "+node.Name, err)
	}
	return nil
}

// resolveImageID finds a Glance image by ID or by its unique name.
func resolveImageID(ctx context.Context, glance ImageClient, ref string) (string, error) {
	if ref == "" {
		return "", temporal.NewNonRetryableApplicationError("no image to deploy: set bareMetal.image or the role's baremetalSetTemplate.image", ErrOSInvalid, nil)
	}
	if img, err := glance.GetImage(ctx, ref); err == nil {
		return img.ID, nil
	}
	found, err := glance.ListImages(ctx, images.ListOpts{Name: ref})
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
