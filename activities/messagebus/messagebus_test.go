package messagebus

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTransportURL(t *testing.T) {
	for _, tc := range []struct {
		name, user, pw, host, port, vhost, want string
	}{
		{"plain", "nova-cell1", "abc123", "198.51.100.1", "5672", "nova-cell1", "rabbit://nova-cell1:abc123@198.51.100.1:5672/nova-cell1"},
		{"slash in vhost stays one path segment", "u", "p", "127.0.0.1", "5672", "a/b", "rabbit://u:p@127.0.0.1:5672/a%2Fb"},
		{"password is escaped", "u", "p@ss:/", "::1", "5672", "v", "rabbit://u:p%40ss%3A%2F@[::1]:5672/v"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, TransportURL(tc.user, tc.pw, tc.host, tc.port, tc.vhost))
		})
	}
}
