package openstack

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/mock/gomock"

	"github.com/stackflow/stackflow/activities/openstack/mock"
)

// withCinder is the activities on a mock Cinder, for the identity id only, polling quickly.
func withCinder(t *testing.T, id Identity, cinder VolumeClient) *OpenStack {
	return &OpenStack{PollInterval: time.Millisecond, volume: func(_ context.Context, got Identity) (VolumeClient, error) {
		require.Equal(t, id, got, "the activity asks for the identity of its input")
		return cinder, nil
	}}
}

func TestEnsureVolume(t *testing.T) {
	in := VolumeInput{Identity: testID, Marker: testMarker, Name: "web-root", SizeGiB: 2, ImageID: "img-1"}
	list := VolumeListOpts{Name: "web-root", Metadata: testMarker.Metadata()}
	for _, tc := range []struct {
		name    string
		expect  func(c *mock.MockVolumeClientMockRecorder)
		outcome string
		errType string
		adopted bool
	}{
		{"created, waited until available", func(c *mock.MockVolumeClientMockRecorder) {
			c.ListVolumes(gomock.Any(), list).Return(nil, nil)
			c.CreateVolume(gomock.Any(), gomock.Cond(func(o VolumeCreateOpts) bool {
				return o.Name == "web-root" && o.Size == 2 && o.ImageID == "img-1" && o.Metadata["stackflow-owner"] == testMarker.Owner &&
					o.Description == testMarker.Description()
			})).Return(&Volume{ID: "v-1", Status: "creating"}, nil)
			gomock.InOrder(
				c.GetVolume(gomock.Any(), "v-1").Return(&Volume{ID: "v-1", Status: "downloading"}, nil),
				c.GetVolume(gomock.Any(), "v-1").Return(&Volume{ID: "v-1", Status: "available"}, nil),
			)
		}, "ok", "", false},
		{"adopted: an earlier attempt created it", func(c *mock.MockVolumeClientMockRecorder) {
			c.ListVolumes(gomock.Any(), list).Return([]Volume{{ID: "v-1"}}, nil)
			c.GetVolume(gomock.Any(), "v-1").Return(&Volume{ID: "v-1", Status: "in-use"}, nil)
		}, "ok", "", true},
		{"in error: permanent, the workflow deletes it", func(c *mock.MockVolumeClientMockRecorder) {
			c.ListVolumes(gomock.Any(), list).Return(nil, nil)
			c.CreateVolume(gomock.Any(), gomock.Any()).Return(&Volume{ID: "v-1"}, nil)
			c.GetVolume(gomock.Any(), "v-1").Return(&Volume{ID: "v-1", Status: "error"}, nil)
		}, "permanent", ErrVolumeFailed, false},
		{"quota: permanent", func(c *mock.MockVolumeClientMockRecorder) {
			c.ListVolumes(gomock.Any(), list).Return(nil, nil)
			c.CreateVolume(gomock.Any(), gomock.Any()).Return(nil, httpErr(413, `{"overLimit": {"message": "VolumeSizeExceedsAvailableQuota: Requested volume or snapshot exceeds allowed gigabytes quota."}}`))
		}, "permanent", ErrOSQuota, false},
		{"Cinder down: retried", func(c *mock.MockVolumeClientMockRecorder) {
			c.ListVolumes(gomock.Any(), list).Return(nil, httpErr(503, "Service Unavailable"))
		}, "retryable", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mock.NewMockVolumeClient(gomock.NewController(t))
			tc.expect(c.EXPECT())
			info, err := withCinder(t, testID, c).EnsureVolume(context.Background(), in)
			requireOutcome(t, err, tc.outcome, tc.errType)
			if tc.outcome == "ok" {
				require.Equal(t, "v-1", info.ID)
				require.Equal(t, tc.adopted, info.Adopted)
			}
			if tc.errType == ErrVolumeFailed {
				// The volume travels with the error, so the workflow knows what to delete.
				var app *temporal.ApplicationError
				require.ErrorAs(t, err, &app)
				var got *VolumeInfo
				require.NoError(t, app.Details(&got))
				require.Equal(t, "v-1", got.ID)
			}
		})
	}
}

func TestDeleteVolume(t *testing.T) {
	ref := ResourceRef{Identity: testID, ID: "v-1"}
	gone := httpErr(404, `{"itemNotFound": {"message": "Volume v-1 could not be found."}}`)
	for _, tc := range []struct {
		name    string
		expect  func(c *mock.MockVolumeClientMockRecorder)
		outcome string
		errType string
	}{
		{"available: deleted, waited until gone", func(c *mock.MockVolumeClientMockRecorder) {
			gomock.InOrder(
				c.GetVolume(gomock.Any(), "v-1").Return(&Volume{ID: "v-1", Status: "available"}, nil),
				c.DeleteVolume(gomock.Any(), "v-1").Return(nil),
				c.GetVolume(gomock.Any(), "v-1").Return(&Volume{ID: "v-1", Status: "deleting"}, nil),
				c.GetVolume(gomock.Any(), "v-1").Return(nil, gone),
			)
		}, "ok", ""},
		{"attached: waited until detached, then deleted", func(c *mock.MockVolumeClientMockRecorder) {
			gomock.InOrder(
				c.GetVolume(gomock.Any(), "v-1").Return(&Volume{ID: "v-1", Status: "in-use"}, nil),
				c.GetVolume(gomock.Any(), "v-1").Return(&Volume{ID: "v-1", Status: "detaching"}, nil),
				c.GetVolume(gomock.Any(), "v-1").Return(&Volume{ID: "v-1", Status: "available"}, nil),
				c.DeleteVolume(gomock.Any(), "v-1").Return(nil),
				c.GetVolume(gomock.Any(), "v-1").Return(nil, gone),
			)
		}, "ok", ""},
		{"already gone", func(c *mock.MockVolumeClientMockRecorder) {
			c.GetVolume(gomock.Any(), "v-1").Return(nil, gone)
		}, "ok", ""},
		{"refused: permanent", func(c *mock.MockVolumeClientMockRecorder) {
			c.GetVolume(gomock.Any(), "v-1").Return(&Volume{ID: "v-1", Status: "available"}, nil)
			c.DeleteVolume(gomock.Any(), "v-1").Return(httpErr(403, `{"forbidden": {"message": "Policy doesn't allow volume:delete"}}`))
		}, "permanent", ErrOSForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mock.NewMockVolumeClient(gomock.NewController(t))
			tc.expect(c.EXPECT())
			requireOutcome(t, withCinder(t, testID, c).DeleteVolume(context.Background(), ref), tc.outcome, tc.errType)
		})
	}
}
