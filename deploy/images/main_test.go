package main

import (
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// writeLayout writes a layout of the empty image built from inputs key and returns the image's digest.
func writeLayout(t *testing.T, dir, key string) v1.Hash {
	t.Helper()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(empty.Image, layout.WithAnnotations(map[string]string{inputsAnnotation: key})); err != nil {
		t.Fatal(err)
	}
	d, err := empty.Image.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// An image is reused only when the layout records the same inputs and still holds its manifest.
func TestBuiltReusesOnlyWhatMatches(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "img")
	want := writeLayout(t, dir, "k1")
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

// A layout copied into the cache and back is the same image; a copy replaces what was there.
func TestCopyTreeKeepsTheImage(t *testing.T) {
	base := t.TempDir()
	src, kept, dst := filepath.Join(base, "img"), filepath.Join(base, "cache", "img@dev"), filepath.Join(base, "out", "img")
	want := writeLayout(t, src, "k1")
	// An older build is in the way at both ends: it goes, stale files and all.
	for _, d := range []string{kept, dst} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "stale"), []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := copyTree(src, kept); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(src); err != nil {
		t.Fatal(err)
	}
	if err := copyTree(kept, dst); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{kept, dst} {
		if got, ok := built(d, "k1"); !ok || got != want {
			t.Fatalf("built(%s) = %v, %v; want %v", d, got, ok, want)
		}
		if _, err := os.Stat(filepath.Join(d, "stale")); !os.IsNotExist(err) {
			t.Fatalf("%s kept a file of the older build: %v", d, err)
		}
		if _, err := os.Stat(d + ".tmp"); !os.IsNotExist(err) {
			t.Fatalf("%s.tmp left behind: %v", d, err)
		}
	}
}
