package temporalconn_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/stackflow/stackflow/api/temporalconn"
)

func key(b byte) []byte { return bytes.Repeat([]byte{b}, temporalconn.KeySize) }

func ring(t *testing.T, keys map[string][]byte) *temporalconn.Keyring {
	t.Helper()
	k, err := temporalconn.NewKeyring(keys)
	require.NoError(t, err)
	return k
}

func TestCodecRoundTripHidesTheValue(t *testing.T) {
	dc := temporalconn.DataConverter(temporalconn.NewCodec(ring(t, map[string][]byte{"2025-01": key(1)})))
	p, err := dc.ToPayload(map[string]string{"host": "edpm-compute-0.example", "address": "198.51.100.10"})
	require.NoError(t, err)
	require.NotContains(t, string(p.Data), "198.51.100.10")
	require.NotContains(t, p.String(), "edpm-compute-0")
	require.Equal(t, "binary/encrypted", string(p.Metadata["encoding"]))
	require.Equal(t, "2025-01", string(p.Metadata["encryption-key-id"]))
	var back map[string]string
	require.NoError(t, dc.FromPayload(p, &back))
	require.Equal(t, "198.51.100.10", back["address"])
}

func TestCodecRotation(t *testing.T) {
	plain := []*commonpb.Payload{{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"secret-ish"`)}}
	old := temporalconn.NewCodec(ring(t, map[string][]byte{"2025-01": key(1)}))
	both := temporalconn.NewCodec(ring(t, map[string][]byte{"2025-01": key(1), "2025-06": key(2)}))
	onlyNew := temporalconn.NewCodec(ring(t, map[string][]byte{"2025-06": key(2)}))

	enc, err := old.Encode(plain)
	require.NoError(t, err)

	// After rotation: the old payload still decrypts, new payloads use the newest key.
	dec, err := both.Decode(enc)
	require.NoError(t, err)
	require.Equal(t, plain[0].Data, dec[0].Data)
	require.Equal(t, "json/plain", string(dec[0].Metadata["encoding"]))
	enc2, err := both.Encode(plain)
	require.NoError(t, err)
	require.Equal(t, "2025-06", string(enc2[0].Metadata["encryption-key-id"]))

	// Once the old key is gone, its payloads say which key they need.
	_, err = onlyNew.Decode(enc)
	require.ErrorContains(t, err, `key "2025-01"`)
}

func TestCodecDecode(t *testing.T) {
	c := temporalconn.NewCodec(ring(t, map[string][]byte{"a": key(1)}))
	enc, err := c.Encode([]*commonpb.Payload{{Data: []byte("x")}})
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		payload *commonpb.Payload
		err     string
	}{
		{"not encrypted passes through", &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte("1")}, ""},
		{"tampered", &commonpb.Payload{Metadata: enc[0].Metadata, Data: append(bytes.Clone(enc[0].Data[:len(enc[0].Data)-1]), enc[0].Data[len(enc[0].Data)-1]^1)}, "does not decrypt"},
		{"key ID swapped", &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("binary/encrypted"), "encryption-key-id": []byte("b")}, Data: enc[0].Data}, `key "b"`},
		{"truncated", &commonpb.Payload{Metadata: enc[0].Metadata, Data: enc[0].Data[:4]}, "truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := c.Decode([]*commonpb.Payload{tc.payload})
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.payload, out[0])
		})
	}
}

func TestKeyringRejectsWrongSizes(t *testing.T) {
	_, err := temporalconn.NewKeyring(map[string][]byte{"short": make([]byte, 16)})
	require.ErrorContains(t, err, "want 32")
	_, err = temporalconn.NewKeyring(nil)
	require.Error(t, err)
}

// A Secret mounted as a volume: key files are links into a hidden, timestamped directory.
func TestLoadKeyringFromMountedSecret(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "..2025_06_01_00_00_00.000")
	require.NoError(t, os.Mkdir(data, 0o755))
	for id, b := range map[string]byte{"2025-01": 1, "2025-06": 2} {
		require.NoError(t, os.WriteFile(filepath.Join(data, id), []byte(base64.StdEncoding.EncodeToString(key(b))+"\n"), 0o600))
		require.NoError(t, os.Symlink(filepath.Join("..data", id), filepath.Join(dir, id)))
	}
	require.NoError(t, os.Symlink(filepath.Base(data), filepath.Join(dir, "..data")))
	k, err := temporalconn.LoadKeyring(dir)
	require.NoError(t, err)
	require.Equal(t, []string{"2025-01", "2025-06"}, k.IDs())
	require.Equal(t, "2025-06", k.Active())

	bad := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bad, "k"), []byte("not base64!"), 0o600))
	_, err = temporalconn.LoadKeyring(bad)
	require.ErrorContains(t, err, "not base64")
	_, err = temporalconn.LoadKeyring(t.TempDir())
	require.ErrorContains(t, err, "no key")
}

// The codec endpoint is what the Temporal UI and `temporal --codec-endpoint` call.
func TestCodecHandler(t *testing.T) {
	codec := temporalconn.NewCodec(ring(t, map[string][]byte{"a": key(1)}))
	srv := httptest.NewServer(temporalconn.CodecHandler(codec, []string{"http://127.0.0.1:8233"}))
	defer srv.Close()
	dc := temporalconn.DataConverter(codec)
	p, err := dc.ToPayload("198.51.100.10")
	require.NoError(t, err)
	body, err := json.Marshal(map[string]any{"payloads": []any{p}})
	require.NoError(t, err)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/stackflow/decode", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Namespace", "stackflow")
	req.Header.Set("Origin", "http://127.0.0.1:8233")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "http://127.0.0.1:8233", resp.Header.Get("Access-Control-Allow-Origin"))
	var out struct {
		Payloads []struct {
			Data []byte `json:"data"`
		} `json:"payloads"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.Len(t, out.Payloads, 1)
	require.Equal(t, `"198.51.100.10"`, string(out.Payloads[0].Data))

	// A preflight from another origin gets no CORS grant.
	req, _ = http.NewRequest(http.MethodOptions, srv.URL+"/stackflow/decode", nil)
	req.Header.Set("Origin", "http://elsewhere.example")
	resp2, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp2.Body.Close()
	require.Empty(t, resp2.Header.Get("Access-Control-Allow-Origin"))
}

var _ converter.PayloadCodec = (*temporalconn.Codec)(nil)
