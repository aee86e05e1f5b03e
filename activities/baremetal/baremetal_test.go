package baremetal

import (
	"context"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/stretchr/testify/require"
	"go.uber.org/mock/gomock"

	"github.com/stackflow/stackflow/activities/baremetal/mock"
	"github.com/stackflow/stackflow/activities/internal/outcome"
	"github.com/stackflow/stackflow/activities/openstack"
	osmock "github.com/stackflow/stackflow/activities/openstack/mock"
)

func TestProvisionStep(t *testing.T) {
	for _, tc := range []struct {
		state, transition string
		want              ironicStep
	}{
		{"enroll", "", ironicStep{target: TargetManage}},
		{"verifying", "manageable", ironicStep{}},
		{"manageable", "", ironicStep{target: TargetProvide}},
		{"cleaning", "available", ironicStep{}},
		{"clean wait", "available", ironicStep{}},
		{"available", "", ironicStep{target: TargetActive}},
		{"deploying", "active", ironicStep{}},
		{"wait call-back", "active", ironicStep{}},
		{"active", "", ironicStep{done: true}},
		{"deploy failed", "", ironicStep{failed: true}},
		{"clean failed", "", ironicStep{failed: true}},
		{"error", "", ironicStep{failed: true}},
		{"inspect failed", "", ironicStep{failed: true}},
		{"adopt failed", "", ironicStep{failed: true}},
		{"rescue", "", ironicStep{}},
	} {
		t.Run(tc.state+"→"+tc.transition, func(t *testing.T) {
			require.Equal(t, tc.want, provisionStep(tc.state, tc.transition))
		})
	}
}

func TestDeprovisionStep(t *testing.T) {
	for _, tc := range []struct {
		state, transition string
		del               bool
		want              ironicStep
	}{
		{"active", "", false, ironicStep{target: TargetDeleted}},
		{"deploy failed", "", true, ironicStep{target: TargetDeleted}},
		{"error", "", false, ironicStep{target: TargetDeleted}},
		{"deleting", "available", true, ironicStep{}},
		{"cleaning", "available", true, ironicStep{}},
		{"available", "", false, ironicStep{done: true}},
		{"available", "", true, ironicStep{delete: true}},
		{"manageable", "", true, ironicStep{delete: true}},
		{"enroll", "", false, ironicStep{done: true}},
		{"clean failed", "", true, ironicStep{}},
	} {
		t.Run(tc.state+"→"+tc.transition, func(t *testing.T) {
			require.Equal(t, tc.want, deprovisionStep(tc.state, tc.transition, tc.del))
		})
	}
}

// ironicNode is a node as Ironic shows it.
func ironicNode(state, target string) *Node {
	return &Node{UUID: "n-1", Name: "edpm-0", ProvisionState: state, TargetProvisionState: target,
		Properties: map[string]any{"local_gb": 10}, InstanceInfo: map[string]any{}}
}

// marked is n with stackflow's enrolled mark.
func marked(n *Node) *Node {
	n.Extra = map[string]any{EnrolledMark: true}
	return n
}

// withIronic is the activities on a mock Ironic and Glance, polling quickly.
func withIronic(t *testing.T, id openstack.Identity) (*Ironic, *mock.MockClient, *osmock.MockImageClient) {
	ctl := gomock.NewController(t)
	ironic, glance := mock.NewMockClient(ctl), osmock.NewMockImageClient(ctl)
	check := func(got openstack.Identity) {
		require.Equal(t, id, got, "the activity asks for the identity of its input")
	}
	return &Ironic{PollInterval: time.Millisecond,
		client: func(_ context.Context, got openstack.Identity) (Client, error) { check(got); return ironic, nil },
		image: func(_ context.Context, got openstack.Identity) (openstack.ImageClient, error) {
			check(got)
			return glance, nil
		},
	}, ironic, glance
}

func httpErr(code int, body string) error {
	return gophercloud.ErrUnexpectedResponseCode{Actual: code, Body: []byte(body), Method: "GET", URL: "http://127.0.0.1/x"}
}

// requireOutcome is outcome.Require.
var requireOutcome = outcome.Require

func TestProvisionBaremetal(t *testing.T) {
	cloud := openstack.CloudSecret{Namespace: "ns", Name: "cloud"}
	in := ProvisionInput{Cloud: cloud, Name: "edpm-0", Driver: "fake-hardware", Image: "debian", Properties: map[string]string{"local_gb": "10", "cpu_arch": "x86_64"}}
	gone := httpErr(404, `{"error_message": "{\"faultstring\": \"Node edpm-0 could not be found.\"}"}`)
	imageSet := NodeUpdateOpts{
		NodeUpdateOperation{Op: AddOp, Path: "/instance_info/image_source", Value: "img-1"},
		NodeUpdateOperation{Op: AddOp, Path: "/instance_info/root_gb", Value: 10},
	}
	for _, tc := range []struct {
		name     string
		expect   func(i *mock.MockClientMockRecorder)
		outcome  string
		errType  string
		enrolled bool
	}{
		{"enrolled and walked to active", func(i *mock.MockClientMockRecorder) {
			i.GetNode(gomock.Any(), "edpm-0").Return(nil, gone)
			i.CreateNode(gomock.Any(), NodeCreateOpts{Name: "edpm-0", Driver: "fake-hardware", Properties: map[string]any{"local_gb": 10, "cpu_arch": "x86_64"},
				Extra: map[string]any{EnrolledMark: true}}).
				Return(marked(ironicNode("enroll", "")), nil)
			gomock.InOrder(
				i.GetNode(gomock.Any(), "n-1").Return(ironicNode("enroll", ""), nil),
				i.ChangeProvisionState(gomock.Any(), "n-1", TargetManage).Return(nil),
				i.GetNode(gomock.Any(), "n-1").Return(ironicNode("verifying", "manageable"), nil),
				i.GetNode(gomock.Any(), "n-1").Return(ironicNode("manageable", ""), nil),
				i.ChangeProvisionState(gomock.Any(), "n-1", TargetProvide).Return(nil),
				i.GetNode(gomock.Any(), "n-1").Return(ironicNode("cleaning", "available"), nil),
				i.GetNode(gomock.Any(), "n-1").Return(ironicNode("available", ""), nil),
				i.UpdateNode(gomock.Any(), "n-1", imageSet).Return(nil),
				i.ChangeProvisionState(gomock.Any(), "n-1", TargetActive).Return(nil),
				i.GetNode(gomock.Any(), "n-1").Return(ironicNode("deploying", "active"), nil),
				i.GetNode(gomock.Any(), "n-1").Return(ironicNode("active", ""), nil),
			)
		}, "ok", "", true},
		{"adopted where an earlier attempt left it (deploying)", func(i *mock.MockClientMockRecorder) {
			i.GetNode(gomock.Any(), "edpm-0").Return(ironicNode("deploying", "active"), nil)
			gomock.InOrder(
				i.GetNode(gomock.Any(), "n-1").Return(ironicNode("wait call-back", "active"), nil),
				i.GetNode(gomock.Any(), "n-1").Return(ironicNode("active", ""), nil),
			)
		}, "ok", "", false},
		{"enrolled by an attempt that then failed: the retry finds it marked, and records it enrolled", func(i *mock.MockClientMockRecorder) {
			i.GetNode(gomock.Any(), "edpm-0").Return(marked(ironicNode("manageable", "")), nil)
			gomock.InOrder(
				i.GetNode(gomock.Any(), "n-1").Return(ironicNode("manageable", ""), nil),
				i.ChangeProvisionState(gomock.Any(), "n-1", TargetProvide).Return(nil),
				i.GetNode(gomock.Any(), "n-1").Return(ironicNode("active", ""), nil),
			)
		}, "ok", "", true},
		{"moved meanwhile (409): read again", func(i *mock.MockClientMockRecorder) {
			i.GetNode(gomock.Any(), "edpm-0").Return(ironicNode("manageable", ""), nil)
			gomock.InOrder(
				i.GetNode(gomock.Any(), "n-1").Return(ironicNode("manageable", ""), nil),
				i.ChangeProvisionState(gomock.Any(), "n-1", TargetProvide).Return(httpErr(409, `{"error_message": "Node n-1 is locked by host conductor-0"}`)),
				i.GetNode(gomock.Any(), "n-1").Return(ironicNode("active", ""), nil),
			)
		}, "ok", "", false},
		{"deploy failed: permanent, with Ironic's last error", func(i *mock.MockClientMockRecorder) {
			i.GetNode(gomock.Any(), "edpm-0").Return(ironicNode("available", ""), nil)
			n := ironicNode("deploy failed", "")
			n.LastError = "Timeout reached while waiting for callback"
			i.GetNode(gomock.Any(), "n-1").Return(n, nil)
		}, "permanent", ErrFailed, false},
		{"Ironic down: retried", func(i *mock.MockClientMockRecorder) {
			i.GetNode(gomock.Any(), "edpm-0").Return(nil, httpErr(503, "Service Unavailable"))
		}, "retryable", "", false},
		{"enroll refused (unknown driver): permanent", func(i *mock.MockClientMockRecorder) {
			i.GetNode(gomock.Any(), "edpm-0").Return(nil, gone)
			i.CreateNode(gomock.Any(), gomock.Any()).Return(nil, httpErr(400, `{"error_message": "No valid host was found. Reason: No conductor service registered which supports driver fake-hardware"}`))
		}, "permanent", openstack.ErrOSInvalid, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, ironic, glance := withIronic(t, cloud.Identity())
			glance.EXPECT().GetImage(gomock.Any(), "debian").Return(nil, httpErr(404, "404 Not Found")).AnyTimes()
			glance.EXPECT().ListImages(gomock.Any(), openstack.ImageListOpts{Name: "debian"}).Return([]openstack.Image{{ID: "img-1"}}, nil).AnyTimes()
			tc.expect(ironic.EXPECT())
			res, err := o.ProvisionBaremetal(context.Background(), in)
			requireOutcome(t, err, tc.outcome, tc.errType)
			if tc.outcome == "ok" {
				require.Equal(t, &Result{UUID: "n-1", ProvisionState: "active", Enrolled: tc.enrolled}, res)
			}
			if tc.errType == ErrFailed {
				require.ErrorContains(t, err, "Timeout reached while waiting for callback")
			}
		})
	}
}

func TestDeprovisionBaremetal(t *testing.T) {
	cloud := openstack.CloudSecret{Namespace: "ns", Name: "cloud"}
	gone := httpErr(404, `{"error_message": "Node n-1 could not be found."}`)
	for _, tc := range []struct {
		name    string
		del     bool
		expect  func(i *mock.MockClientMockRecorder)
		outcome string
	}{
		{"undeployed, then deleted (stackflow enrolled it)", true, func(i *mock.MockClientMockRecorder) {
			gomock.InOrder(
				i.GetNode(gomock.Any(), "n-1").Return(ironicNode("active", ""), nil),
				i.ChangeProvisionState(gomock.Any(), "n-1", TargetDeleted).Return(nil),
				i.GetNode(gomock.Any(), "n-1").Return(ironicNode("cleaning", "available"), nil),
				i.GetNode(gomock.Any(), "n-1").Return(ironicNode("available", ""), nil),
				i.DeleteNode(gomock.Any(), "n-1").Return(nil),
			)
		}, "ok"},
		{"undeployed and kept (adopted, not ours to delete)", false, func(i *mock.MockClientMockRecorder) {
			gomock.InOrder(
				i.GetNode(gomock.Any(), "n-1").Return(ironicNode("active", ""), nil),
				i.ChangeProvisionState(gomock.Any(), "n-1", TargetDeleted).Return(nil),
				i.GetNode(gomock.Any(), "n-1").Return(ironicNode("available", ""), nil),
			)
		}, "ok"},
		{"locked while deleting (409): asked again", true, func(i *mock.MockClientMockRecorder) {
			gomock.InOrder(
				i.GetNode(gomock.Any(), "n-1").Return(ironicNode("available", ""), nil),
				i.DeleteNode(gomock.Any(), "n-1").Return(httpErr(409, `{"error_message": "Node n-1 is locked by host conductor-0"}`)),
				i.GetNode(gomock.Any(), "n-1").Return(ironicNode("available", ""), nil),
				i.DeleteNode(gomock.Any(), "n-1").Return(nil),
			)
		}, "ok"},
		{"already gone", true, func(i *mock.MockClientMockRecorder) {
			i.GetNode(gomock.Any(), "n-1").Return(nil, gone)
		}, "ok"},
		{"Ironic down: retried", true, func(i *mock.MockClientMockRecorder) {
			i.GetNode(gomock.Any(), "n-1").Return(nil, httpErr(503, "Service Unavailable"))
		}, "retryable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, ironic, _ := withIronic(t, cloud.Identity())
			tc.expect(ironic.EXPECT())
			err := o.DeprovisionBaremetal(context.Background(), DeprovisionInput{Cloud: cloud, UUID: "n-1", Delete: tc.del})
			requireOutcome(t, err, tc.outcome, "")
		})
	}
}
