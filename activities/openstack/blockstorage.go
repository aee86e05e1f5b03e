package openstack

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/stackflow/stackflow/activities/internal/heartbeat"
)

// VolumeInput asks for one Cinder volume, found again by its name and marker metadata on retry. ImageID
// makes it bootable (a root volume).
type VolumeInput struct {
	Identity         Identity `json:"identity"`
	Marker           Marker   `json:"marker"`
	Name             string   `json:"name"`
	SizeGiB          int      `json:"sizeGiB"`
	Type             string   `json:"type,omitempty"`
	AvailabilityZone string   `json:"availabilityZone,omitempty"`
	ImageID          string   `json:"imageID,omitempty"`
}

// VolumeInfo is a volume as created or adopted, once available.
type VolumeInfo struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Status  string `json:"status"`
	Adopted bool   `json:"adopted,omitempty"`
}

// EnsureVolume creates the volume unless one with its name and marker exists, then waits (heartbeat.While)
// until it is available. A volume in error is a permanent failure; the workflow deletes it.
func (o *OpenStack) EnsureVolume(ctx context.Context, in VolumeInput) (*VolumeInfo, error) {
	return heartbeat.While(ctx, func(ctx context.Context) (*VolumeInfo, error) {
		cinder, err := o.volumeFor(ctx, in.Identity)
		if err != nil {
			return nil, err
		}
		all, err := cinder.ListVolumes(ctx, VolumeListOpts{Name: in.Name, Metadata: in.Marker.Metadata()})
		if err != nil {
			return nil, classifyOS("list volumes named "+in.Name, err)
		}
		info := &VolumeInfo{Name: in.Name}
		if len(all) > 0 {
			info.ID, info.Adopted = all[0].ID, true
		} else {
			v, err := cinder.CreateVolume(ctx, VolumeCreateOpts{Name: in.Name, Size: in.SizeGiB, VolumeType: in.Type,
				AvailabilityZone: in.AvailabilityZone, ImageID: in.ImageID, Metadata: in.Marker.Metadata(),
				Description: in.Marker.Description()})
			if err != nil {
				return nil, classifyOS("create volume "+in.Name, err)
			}
			info.ID = v.ID
		}
		for {
			v, err := cinder.GetVolume(ctx, info.ID)
			if err != nil {
				return nil, classifyOS("volume "+in.Name, err)
			}
			info.Status = v.Status
			switch v.Status {
			case "available", "in-use":
				return info, nil
			case "error", "error_restoring", "error_extending":
				return info, temporal.NewNonRetryableApplicationError(fmt.Sprintf("volume %s (%s) is in status %s", in.Name, v.ID, v.Status), ErrVolumeFailed, nil, info)
			}
			if err := sleep(ctx, o.poll()); err != nil {
				return nil, err
			}
		}
	})
}

// DeleteVolume deletes a volume once it is detached and waits until it is gone; one already gone is not
// an error.
func (o *OpenStack) DeleteVolume(ctx context.Context, in ResourceRef) error {
	_, err := heartbeat.While(ctx, func(ctx context.Context) (struct{}, error) {
		cinder, err := o.volumeFor(ctx, in.Identity)
		if err != nil {
			return struct{}{}, err
		}
		return struct{}{}, deleteVolumeAndWait(ctx, cinder, in.ID, o.poll())
	})
	return err
}

// deleteVolumeAndWait deletes the volume once it can go (available or in error; attached, detaching,
// creating or deleting: Cinder gets it there first) and waits until it is gone.
func deleteVolumeAndWait(ctx context.Context, cinder VolumeClient, id string, poll time.Duration) error {
	var sent time.Time
	for {
		v, err := cinder.GetVolume(ctx, id)
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return classifyOS("volume "+id, err)
		}
		switch v.Status {
		case "available", "error", "error_restoring", "error_extending", "error_deleting":
			// Sent again after a while: a delete that ended in error_deleting may work the next time.
			if time.Since(sent) > 15*time.Second {
				if err := cinder.DeleteVolume(ctx, id); err != nil && !isNotFound(err) {
					return classifyOS("delete volume "+id, err)
				}
				sent = time.Now()
			}
		}
		if err := sleep(ctx, poll); err != nil {
			return err
		}
	}
}
