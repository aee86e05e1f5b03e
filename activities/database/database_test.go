package database

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDatabaseNames(t *testing.T) {
	for _, tc := range []struct {
		db, user string
		ok       bool
	}{
		{"nova_cell1", "nova_cell1", true},
		{"nova_api", "n1a2_api", true},
		{"nova-api", "nova", false},
		{"nova_api", "x'; DROP USER root; --", false},
		{"", "nova", false},
	} {
		err := DatabaseInput{Database: tc.db, User: tc.user}.validate()
		require.Equal(t, tc.ok, err == nil, "%s/%s: %v", tc.db, tc.user, err)
	}
}
