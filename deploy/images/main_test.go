package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// An image is reused only when the layout records the same inputs and still holds its manifest.
func TestBuiltReusesOnlyWhatMatches(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "img")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(empty.Image, layout.WithAnnotations(map[string]string{inputsAnnotation: "k1"})); err != nil {
		t.Fatal(err)
	}
	want, err := empty.Image.Digest()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		dir    string
		key    string
		remove bool
		ok     bool
	}{
		{name: "same inputs", dir: dir, key: "k1", ok: true},
		{name: "other inputs", dir: dir, key: "k2"},
		{name: "no layout", dir: filepath.Join(t.TempDir(), "none"), key: "k1"},
		{name: "manifest gone", dir: dir, key: "k1", remove: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.remove {
				if err := os.Remove(filepath.Join(dir, "blobs", want.Algorithm, want.Hex)); err != nil {
					t.Fatal(err)
				}
			}
			got, ok := built(tc.dir, tc.key)
			if ok != tc.ok || (ok && got != want) {
				t.Fatalf("built(%s) = %v, %v; want %v, %v", tc.key, got, ok, want, tc.ok)
			}
		})
	}
}
