package openstack

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
)

func httpErr(code int, body string) error {
	return gophercloud.ErrUnexpectedResponseCode{Actual: code, Body: []byte(body), Method: "POST", URL: "http://127.0.0.1/x"}
}

func TestClassifyOS(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		permanent bool
		typ       string
		msg       string
	}{
		{"nova 404", httpErr(404, `{"itemNotFound": {"code": 404, "message": "Flavor big could not be found."}}`), true, ErrOSNotFound, "Flavor big could not be found."},
		{"nova 400", httpErr(400, `{"badRequest": {"code": 400, "message": "Invalid key_name provided."}}`), true, ErrOSInvalid, "Invalid key_name provided."},
		{"nova quota 403", httpErr(403, `{"forbidden": {"code": 403, "message": "Quota exceeded for instances: Requested 1, but already used 10 of 10 instances"}}`), true, ErrOSQuota, "Quota exceeded for instances"},
		{"neutron quota 409", httpErr(409, `{"NeutronError": {"type": "OverQuota", "message": "Quota exceeded for resources: ['port'].", "detail": ""}}`), true, ErrOSQuota, "Quota exceeded for resources"},
		{"neutron conflict 409", httpErr(409, `{"NeutronError": {"type": "IpAddressInUse", "message": "IP address 10.0.0.5 already allocated", "detail": ""}}`), false, "", "already allocated"},
		{"nova 409 task state", httpErr(409, `{"conflictingRequest": {"code": 409, "message": "Cannot 'delete' instance while it is in task_state spawning"}}`), false, "", "task_state spawning"},
		{"503", httpErr(503, `Service Unavailable`), false, "", "Service Unavailable"},
		{"glance text 404", httpErr(404, "404 Not Found\n\nNo image found with ID abc\n\n"), true, ErrOSNotFound, "No image found with ID abc"},
		{"connection refused", fmt.Errorf("dial tcp 127.0.0.1:8774: connect: connection refused"), false, "", "connection refused"},
		{"keystone 401", httpErr(401, `{"error": {"code": 401, "title": "Unauthorized", "message": "The request you have made requires authentication."}}`), true, ErrOSCredentials, "requires authentication"},
		{"keystone 403 policy", httpErr(403, `{"error": {"code": 403, "title": "Forbidden", "message": "You are not authorized to perform the requested action: identity:create_user."}}`), true, ErrOSForbidden, "identity:create_user"},
		{"cinder quota 413", httpErr(413, `{"overLimit": {"code": 413, "message": "VolumeSizeExceedsAvailableQuota: Requested volume or snapshot exceeds allowed gigabytes quota. Requested 10G, quota is 5G and 0G has been consumed."}}`), true, ErrOSQuota, "exceeds allowed gigabytes quota"},
		{"nova 413 rate limit", httpErr(413, `{"overLimit": {"code": 413, "message": "This request was rate-limited."}}`), true, ErrOSQuota, "rate-limited"},
		{"ironic 409 node locked", httpErr(409, `{"error_message": "{\"faultstring\": \"Node n-1 is locked by host conductor-0, please retry after the current operation is completed.\"}"}`), false, "", "locked by host"},
		{"placement 409 in use", httpErr(409, `{"errors": [{"status": 409, "title": "Conflict", "detail": "Unable to delete resource provider rp-1: Resource provider has allocations."}]}`), false, "", "create thing: Unable to delete resource provider rp-1: Resource provider has allocations.:"},
		{"nova 422", httpErr(422, `{"badRequest": {"code": 422, "message": "unprocessable"}}`), true, ErrOSInvalid, "unprocessable"},
		{"deadline", fmt.Errorf("get server: %w", context.DeadlineExceeded), false, "", "deadline exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := classifyOS("create thing", tc.err)
			var app *temporal.ApplicationError
			isApp := errors.As(err, &app)
			require.Equal(t, tc.permanent, isApp && app.NonRetryable(), "%v", err)
			if tc.permanent {
				require.Equal(t, tc.typ, app.Type())
			}
			require.Contains(t, err.Error(), tc.msg)
		})
	}
}

func TestMarker(t *testing.T) {
	m := Marker{Owner: "abc", Instance: "def"}
	require.Equal(t, []string{"stackflow-owner=abc", "stackflow-instance=def"}, m.Tags())
	require.True(t, m.Owns(m.Tags(), ""))
	require.True(t, m.Owns(nil, m.Description()+" my port"), "the description marks resources not tagged yet")
	require.False(t, m.Owns([]string{"stackflow-owner=abc"}, ""), "another instance of the owner")
	require.True(t, Marker{Owner: "abc"}.Owns([]string{"stackflow-owner=abc", "stackflow-instance=zzz"}, ""), "the owner sweeps every instance")
	require.False(t, Marker{Owner: "ab"}.Owns(nil, "stackflow-owner=abc"), "prefixes do not match")
}

func TestPortName(t *testing.T) {
	suffix := "mgmt"
	require.Equal(t, "web-0", PortName("web", 0, nil))
	require.Equal(t, "web-mgmt", PortName("web", 1, &suffix))
}

func TestFlavorMismatch(t *testing.T) {
	have := NovaFlavor{ID: "1", Name: "m1.tiny", VCPUs: 1, RAM: 512, Disk: 1}
	for _, tc := range []struct {
		name string
		want Flavor
		msg  string
	}{
		{"same size", Flavor{Name: "m1.tiny", VCPUs: 1, RAM: 512, Disk: 1}, ""},
		{"same size and ID", Flavor{Name: "m1.tiny", ID: "1", VCPUs: 1, RAM: 512, Disk: 1}, ""},
		{"another ID", Flavor{Name: "m1.tiny", ID: "tiny", VCPUs: 1, RAM: 512, Disk: 1}, "exists with ID 1, not tiny"},
		{"more RAM", Flavor{Name: "m1.tiny", VCPUs: 1, RAM: 1024, Disk: 1}, "1 vCPU, 512 MiB RAM, 1 GiB disk, not 1, 1024, 1"},
		{"no disk", Flavor{Name: "m1.tiny", VCPUs: 1, RAM: 512}, "not 1, 512, 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := FlavorMismatch(have, tc.want)
			if tc.msg == "" {
				require.Empty(t, got)
				return
			}
			require.Contains(t, got, tc.msg)
		})
	}
}
