package openstack

import (
	"errors"
	"net/http"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/stretchr/testify/require"
)

// findOrCreate creates only what find does not give, and reads back what another registration created
// at the same moment (a conflict) instead of failing.
func TestFindOrCreate(t *testing.T) {
	conflict := gophercloud.ErrUnexpectedResponseCode{Actual: http.StatusConflict}
	tests := []struct {
		name      string
		found     []string // what find gives, call by call
		createID  string
		createErr error
		want      string
		wantErr   bool
		creates   int
	}{
		{name: "found", found: []string{"p1"}, want: "p1"},
		{name: "missing: created", found: []string{""}, createID: "p2", want: "p2", creates: 1},
		{name: "created meanwhile by another: read back", found: []string{"", "p3"}, createErr: conflict, want: "p3", creates: 1},
		{name: "create fails", found: []string{""}, createErr: errors.New("boom"), wantErr: true, creates: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			finds, creates := 0, 0
			got, err := findOrCreate("project service", func() (string, error) {
				finds++
				return tt.found[finds-1], nil
			}, func() (string, error) {
				creates++
				return tt.createID, tt.createErr
			})
			if tt.wantErr {
				require.ErrorContains(t, err, "create project service")
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.creates, creates)
			require.Equal(t, len(tt.found), finds)
		})
	}
}
