package activities

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBoundDiffCutsAtALineAndSaysSo(t *testing.T) {
	small := "-a\n+b\n"
	got, cut := boundDiff(small, 100)
	require.False(t, cut)
	require.Equal(t, small, got)

	big := strings.Repeat("+0123456789\n", 100) // 1200 bytes
	got, cut = boundDiff(big, 500)
	require.True(t, cut)
	require.LessOrEqual(t, len(got), 500+len("... (diff truncated)\n"))
	require.True(t, strings.HasSuffix(got, "+0123456789\n... (diff truncated)\n"), "cut at a line boundary: %q", got[len(got)-40:])
}

func TestValuesRefNamesItsConfigMapByComponentAndHash(t *testing.T) {
	r := ValuesRef{Namespace: "openstack", Component: "nova", Hash: "AB12cd"}
	require.Equal(t, "stackflow-values-nova-ab12cd", r.Name())
	require.Equal(t, "openstack/stackflow-values-nova-ab12cd", r.String())
}
