package local

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	certutil "k8s.io/client-go/util/cert"
)

func TestDecodeManifests(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string // kind/name
		wantErr bool
	}{
		{
			name: "documents with separators and empty documents",
			in: `---
apiVersion: v1
kind: Namespace
metadata: {name: a}
---
# only a comment
---
apiVersion: v1
kind: ConfigMap
metadata: {name: b, namespace: a}
`,
			want: []string{"Namespace/a", "ConfigMap/b"},
		},
		{
			name: "a List contributes its items",
			in: `apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: ConfigMap, metadata: {name: first}}
- {apiVersion: v1, kind: Secret, metadata: {name: second}}
`,
			want: []string{"ConfigMap/first", "Secret/second"},
		},
		{
			name:    "a List item without a name",
			in:      "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {}}\n",
			wantErr: true,
		},
		{
			name: "JSON",
			in:   `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "j"}}`,
			want: []string{"ConfigMap/j"},
		},
		{name: "empty file", in: "", want: nil},
		{name: "object without a name", in: "apiVersion: v1\nkind: ConfigMap\n", wantErr: true},
		// YAML 1.1 reads a bare y as true: the name is not a string, which must not pass as unnamed.
		{name: "name that is not a string", in: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: y}\n", wantErr: true},
		{name: "not YAML", in: "apiVersion: [", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := decodeManifests([]byte(tt.in))
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			var got []string
			for _, o := range objs {
				got = append(got, o.GetKind()+"/"+o.GetName())
			}
			require.Equal(t, tt.want, got)
		})
	}
}

func TestAPIServerCAVerifiesLoopbackOnly(t *testing.T) {
	// The same kind of certificate the API server writes to its cert dir: serving certificate then CA.
	crt, _, err := certutil.GenerateSelfSignedCertKey("192.0.2.2", []net.IP{net.ParseIP("127.0.0.1")}, []string{"localhost"})
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "apiserver.crt")
	require.NoError(t, os.WriteFile(file, crt, 0o644))

	ca, err := apiServerCA(file, "127.0.0.1")
	require.NoError(t, err)
	require.NotEmpty(t, ca)
	require.NotEqual(t, crt, ca, "only the CA is trusted, not the serving certificate")

	_, err = apiServerCA(file, "127.0.0.2")
	require.Error(t, err)
	_, err = apiServerCA(filepath.Join(t.TempDir(), "missing.crt"), "127.0.0.1")
	require.Error(t, err)
}

func TestTokensGeneratedOnceEach(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens.csv")
	first, err := ensureToken(file, adminUser, "system:masters")
	require.NoError(t, err)
	require.Len(t, first, 48)
	again, err := ensureToken(file, adminUser, "system:masters")
	require.NoError(t, err)
	require.Equal(t, first, again)
	node, err := ensureToken(file, nodeUser, "system:nodes")
	require.NoError(t, err)
	require.NotEqual(t, first, node)
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, first+","+adminUser+","+adminUser+",\"system:masters\"\n"+
		node+","+nodeUser+","+nodeUser+",\"system:nodes\"\n", string(b))
	// A second call for the node keeps both lines as they are.
	again, err = ensureToken(file, nodeUser, "system:nodes")
	require.NoError(t, err)
	require.Equal(t, node, again)
	b2, err := os.ReadFile(file)
	require.NoError(t, err)
	require.Equal(t, string(b), string(b2))
}
