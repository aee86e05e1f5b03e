package temporalconn

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"google.golang.org/protobuf/proto"
)

// Payload metadata of an encrypted payload.
const (
	// MetadataEncoding is the standard payload metadata key that names a payload's encoding.
	MetadataEncoding = "encoding"
	// EncodingEncrypted is the encoding of a payload encrypted by Codec.
	EncodingEncrypted = "binary/encrypted"
	// MetadataKeyID names the key (its file name in the key directory) that encrypted the payload.
	MetadataKeyID = "encryption-key-id"
)

// KeySize is the size of an AES-256 key.
const KeySize = 32

// Keyring holds the payload-encryption keys by ID. Payloads are encrypted with the newest key (the last
// ID in sort order) and decrypted with whichever key their metadata names, so rotating is: add a key
// whose ID sorts last (a date works: 2025-06-01), roll the processes, and remove the old key only once no
// history that needs it is kept.
type Keyring struct {
	ids  []string
	aead map[string]cipher.AEAD
}

// NewKeyring builds a keyring from raw 32-byte keys by ID.
func NewKeyring(keys map[string][]byte) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("codec: no key")
	}
	k := &Keyring{aead: map[string]cipher.AEAD{}}
	for id, key := range keys {
		if len(key) != KeySize {
			return nil, fmt.Errorf("codec key %q: %d bytes, want %d (AES-256)", id, len(key), KeySize)
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("codec key %q: %w", id, err)
		}
		gcm, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("codec key %q: %w", id, err)
		}
		k.ids = append(k.ids, id)
		k.aead[id] = gcm
	}
	slices.Sort(k.ids)
	return k, nil
}

// LoadKeyring reads every key in dir: one file per key, named by its ID, holding the 32-byte key in
// base64 (a Kubernetes Secret mounted as a volume has exactly this shape; make one with
// `head -c32 /dev/urandom | base64`). Hidden files (a mounted Secret's ..data links) are skipped.
func LoadKeyring(dir string) (*Keyring, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("codec keys: %w", err)
	}
	keys := map[string][]byte{}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		st, err := os.Stat(path) // follows the links of a mounted Secret
		if err != nil {
			return nil, fmt.Errorf("codec key %s: %w", path, err)
		}
		if st.IsDir() {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("codec key %s: %w", path, err)
		}
		key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, fmt.Errorf("codec key %s: not base64: %w", path, err)
		}
		keys[e.Name()] = key
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("codec keys: no key in %s", dir)
	}
	return NewKeyring(keys)
}

// Active is the ID of the key new payloads are encrypted with.
func (k *Keyring) Active() string { return k.ids[len(k.ids)-1] }

// IDs are the key IDs, in sort order.
func (k *Keyring) IDs() []string { return slices.Clone(k.ids) }

// Codec is a converter.PayloadCodec that encrypts each payload whole (data and metadata) with AES-256-GCM
// under the keyring's active key, the key ID in the clear metadata and also bound as additional data, so a
// payload cannot be passed off as encrypted under another key. Payloads it did not encrypt pass through
// Decode unchanged (histories written before the codec was turned on stay readable).
type Codec struct {
	Keys *Keyring
}

// NewCodec returns the codec of a keyring.
func NewCodec(k *Keyring) *Codec { return &Codec{Keys: k} }

// Encode encrypts every payload with the active key.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	id := c.Keys.Active()
	aead := c.Keys.aead[id]
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return payloads, fmt.Errorf("codec: marshal payload: %w", err)
		}
		nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
		if _, err := rand.Read(nonce); err != nil {
			return payloads, fmt.Errorf("codec: nonce: %w", err)
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{MetadataEncoding: []byte(EncodingEncrypted), MetadataKeyID: []byte(id)},
			Data:     aead.Seal(nonce, nonce, plain, []byte(id)),
		}
	}
	return out, nil
}

// Decode decrypts the payloads Encode encrypted, with the key each one names.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[MetadataEncoding]) != EncodingEncrypted {
			out[i] = p
			continue
		}
		id := string(p.GetMetadata()[MetadataKeyID])
		aead, ok := c.Keys.aead[id]
		if !ok {
			return payloads, fmt.Errorf("codec: payload encrypted with key %q, which is not among the configured keys %v", id, c.Keys.ids)
		}
		data := p.GetData()
		if len(data) < aead.NonceSize() {
			return payloads, fmt.Errorf("codec: payload encrypted with key %q is truncated", id)
		}
		plain, err := aead.Open(nil, data[:aead.NonceSize()], data[aead.NonceSize():], []byte(id))
		if err != nil {
			return payloads, fmt.Errorf("codec: payload does not decrypt with key %q: %w", id, err)
		}
		var dp commonpb.Payload
		if err := proto.Unmarshal(plain, &dp); err != nil {
			return payloads, fmt.Errorf("codec: decrypted payload: %w", err)
		}
		out[i] = &dp
	}
	return out, nil
}
