// Package baremetal holds the activities of Ironic: phase -1 of a data-plane node, provisioning a host
// from enrolled to active and back. Ironic is a system of its own, with its own state machine:
// provisionStep and deprovisionStep say each move, the activities walk them against a narrow Client.
package baremetal

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/stackflow/stackflow/activities/internal/heartbeat"
	"github.com/stackflow/stackflow/activities/openstack"
)

// Ironic is the bare-metal activities. They reach Ironic and Glance with the credentials and cached
// clients of the OpenStack activities (an identity's clouds.yaml Secret).
type Ironic struct {
	os *openstack.OpenStack
	// PollInterval paces the waits for Ironic's transitions (default 1s).
	PollInterval time.Duration

	// client and image, when set (unit tests), make the Ironic and Glance clients.
	client func(ctx context.Context, id openstack.Identity) (Client, error)
	image  func(ctx context.Context, id openstack.Identity) (openstack.ImageClient, error)
}

// NewIronic builds the bare-metal activities on the OpenStack activities' clients.
func NewIronic(os *openstack.OpenStack) *Ironic {
	return &Ironic{os: os}
}

func (i *Ironic) clientFor(ctx context.Context, id openstack.Identity) (Client, error) {
	if i.client != nil {
		return i.client(ctx, id)
	}
	sc, err := i.os.BaremetalServiceClient(ctx, id)
	if err != nil {
		return nil, err
	}
	return gopherClient{sc}, nil
}

func (i *Ironic) imageFor(ctx context.Context, id openstack.Identity) (openstack.ImageClient, error) {
	if i.image != nil {
		return i.image(ctx, id)
	}
	return i.os.ImageClientFor(ctx, id)
}

func (i *Ironic) poll() time.Duration {
	if i.PollInterval > 0 {
		return i.PollInterval
	}
	return time.Second
}

// sleep is heartbeat.Sleep.
var sleep = heartbeat.Sleep

func notFound(err error) bool   { return gophercloud.ResponseCodeIs(err, 404) }
func isConflict(err error) bool { return gophercloud.ResponseCodeIs(err, 409) }

// ProvisionInput provisions one host through Ironic.
type ProvisionInput struct {
	Cloud openstack.CloudSecret `json:"cloud"`
	// Name is the Ironic node's name: the node is adopted when it exists, enrolled when not.
	Name   string `json:"name"`
	Driver string `json:"driver"`
	// Image is the Glance image (name or ID) deployed to the root disk.
	Image      string            `json:"image"`
	Properties map[string]string `json:"properties,omitempty"`
}

// Result is the provisioned Ironic node.
type Result struct {
	UUID           string `json:"uuid"`
	ProvisionState string `json:"provisionState"`
	// Enrolled is true when this activity created the Ironic node (teardown deletes only such nodes).
	Enrolled bool `json:"enrolled"`
}

// EnrolledMark is the key of an Ironic node's extra that says stackflow enrolled it (its value true):
// teardown deletes such a node, and only such a node, after undeploying it; a node an administrator
// enrolled is adopted and kept.
const EnrolledMark = "stackflow_enrolled"

// enrolledHere reports whether node carries EnrolledMark.
func enrolledHere(node *Node) bool {
	v, _ := node.Extra[EnrolledMark].(bool)
	return v
}

// ErrFailed is the permanent error of a provisioning that Ironic reports as failed.
const ErrFailed = "BaremetalFailed"

// ProvisionBaremetal takes the Ironic node named in.Name to active: enroll (or adopt) → manage →
// provide → deploy with the image → wait for active, heartbeat.While all along. It is idempotent: it
// resumes from whatever state an earlier attempt left the node in (provisionStep decides each move).
func (i *Ironic) ProvisionBaremetal(ctx context.Context, in ProvisionInput) (*Result, error) {
	return heartbeat.While(ctx, func(ctx context.Context) (*Result, error) {
		ironic, err := i.clientFor(ctx, in.Cloud.Identity())
		if err != nil {
			return nil, err
		}
		glance, err := i.imageFor(ctx, in.Cloud.Identity())
		if err != nil {
			return nil, err
		}
		res := &Result{}
		node, err := ironic.GetNode(ctx, in.Name)
		if notFound(err) {
			props := map[string]any{}
			for k, v := range in.Properties {
				if n, err := strconv.Atoi(v); err == nil {
					props[k] = n
				} else {
					props[k] = v
				}
			}
			node, err = ironic.CreateNode(ctx, NodeCreateOpts{Name: in.Name, Driver: in.Driver, Properties: props,
				Extra: map[string]any{EnrolledMark: true}})
			if err != nil {
				return nil, openstack.Classify("enroll Ironic node "+in.Name, err)
			}
		} else if err != nil {
			return nil, openstack.Classify("get Ironic node "+in.Name, err)
		}
		// From the node, not from this attempt: an attempt that enrolled the node and then failed leaves
		// the retry to find it, and teardown must still delete it.
		res.Enrolled = enrolledHere(node)
		res.UUID = node.UUID
		imageID, err := openstack.ResolveImageID(ctx, glance, in.Image)
		if err != nil {
			return nil, err
		}
		for {
			node, err = ironic.GetNode(ctx, res.UUID)
			if err != nil {
				return nil, openstack.Classify("get Ironic node "+in.Name, err)
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
				return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("Ironic node %s is in state %q: %s", in.Name, node.ProvisionState, node.LastError), ErrFailed, nil)
			case step.target == "":
				if err := sleep(ctx, i.poll()); err != nil {
					return nil, err
				}
				continue
			}
			if step.target == TargetActive {
				if err := setImage(ctx, ironic, node, imageID); err != nil {
					return nil, err
				}
			}
			// A conflict is a node another call moved meanwhile: the next read sees where it went.
			if err := ironic.ChangeProvisionState(ctx, res.UUID, step.target); err != nil && !isConflict(err) {
				return nil, openstack.Classify(fmt.Sprintf("move Ironic node %s to %s", in.Name, step.target), err)
			}
		}
	})
}

// ironicStep is what a provisioning or deprovisioning does next with a node: it is done, it failed, it
// asks Ironic for a target (deploying sets the image first), it deletes the node, or (none of these)
// it waits for Ironic to move the node on.
type ironicStep struct {
	done, failed, delete bool
	target               TargetProvisionState
}

// provisionStep is Ironic's provisioning state machine as stackflow walks it to active: enroll →
// manage, manageable → provide (cleaning, when Ironic is set to), available → deploy, active is done;
// a failed state is final; a node with a transition under way (verifying, cleaning, deploying, wait
// call-back), or in a state of no move of ours, is waited for.
func provisionStep(state, transition string) ironicStep {
	if transition != "" {
		return ironicStep{}
	}
	switch ProvisionState(state) {
	case StateActive:
		return ironicStep{done: true}
	case StateEnroll:
		return ironicStep{target: TargetManage}
	case StateManageable:
		return ironicStep{target: TargetProvide}
	case StateAvailable:
		return ironicStep{target: TargetActive}
	case StateDeployFail, StateCleanFail, StateError, StateInspectFail, StateAdoptFail:
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
	switch ProvisionState(state) {
	case StateActive, StateDeployFail, StateError:
		return ironicStep{target: TargetDeleted}
	case StateAvailable, StateManageable, StateEnroll:
		return ironicStep{done: !del, delete: del}
	}
	return ironicStep{}
}

// DeprovisionInput undeploys (and, when stackflow enrolled it, deletes) an Ironic node.
type DeprovisionInput struct {
	Cloud  openstack.CloudSecret `json:"cloud"`
	UUID   string                `json:"uuid"`
	Delete bool                  `json:"delete"`
}

// DeprovisionBaremetal undeploys the node back to available and deletes it when asked; a missing node
// is not an error.
func (i *Ironic) DeprovisionBaremetal(ctx context.Context, in DeprovisionInput) error {
	_, err := heartbeat.While(ctx, func(ctx context.Context) (struct{}, error) {
		ironic, err := i.clientFor(ctx, in.Cloud.Identity())
		if err != nil {
			return struct{}{}, err
		}
		for {
			node, err := ironic.GetNode(ctx, in.UUID)
			if notFound(err) {
				return struct{}{}, nil
			}
			if err != nil {
				return struct{}{}, openstack.Classify("get Ironic node "+in.UUID, err)
			}
			step := deprovisionStep(node.ProvisionState, node.TargetProvisionState, in.Delete)
			switch {
			case step.done:
				return struct{}{}, nil
			case step.delete:
				err := ironic.DeleteNode(ctx, in.UUID)
				if err == nil || notFound(err) {
					return struct{}{}, nil
				}
				if !isConflict(err) {
					return struct{}{}, openstack.Classify("delete Ironic node "+in.UUID, err)
				}
				// Locked by a task of Ironic's own: asked again once it is done.
				if err := sleep(ctx, i.poll()); err != nil {
					return struct{}{}, err
				}
				continue
			case step.target == "":
				if err := sleep(ctx, i.poll()); err != nil {
					return struct{}{}, err
				}
				continue
			}
			if err := ironic.ChangeProvisionState(ctx, in.UUID, step.target); err != nil && !isConflict(err) {
				return struct{}{}, openstack.Classify("deprovision Ironic node "+in.UUID, err)
			}
		}
	})
	return err
}

func setImage(ctx context.Context, ironic Client, node *Node, imageID string) error {
	if node.InstanceInfo["image_source"] == imageID {
		return nil
	}
	rootGB := 1
	if v, ok := node.Properties["local_gb"]; ok {
		if n, err := strconv.Atoi(fmt.Sprint(v)); err == nil && n > 0 {
			rootGB = n
		}
	}
	err := ironic.UpdateNode(ctx, node.UUID, NodeUpdateOpts{
		NodeUpdateOperation{Op: AddOp, Path: "/instance_info/image_source", Value: imageID},
		NodeUpdateOperation{Op: AddOp, Path: "/instance_info/root_gb", Value: rootGB},
	})
	if err != nil {
		return openstack.Classify("set the image of Ironic node "+node.Name, err)
	}
	return nil
}
