package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

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

// The resolution cache is keyed on apt's state: the same lists give the same key, and any list apt-get
// update rewrites (its size or time), a new list or a changed configuration gives another; apt's lock and
// its partial downloads do not count.
func TestAptStateFollowsTheLists(t *testing.T) {
	root := t.TempDir()
	etc, lists := filepath.Join(root, "etc"), filepath.Join(root, "lists")
	for _, d := range []string{etc, filepath.Join(lists, "partial")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(etc, "sources.list"), "deb http://deb.debian.org/debian bookworm main\n")
	write(filepath.Join(lists, "bookworm_main_Packages"), "Package: a\n")
	saved := aptRoots
	aptRoots = []string{etc, lists, filepath.Join(root, "absent")}
	t.Cleanup(func() { aptRoots = saved })
	state := func() string {
		t.Helper()
		s, err := aptState()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	base := state()
	if again := state(); again != base {
		t.Fatalf("the same lists give two states: %s, %s", base, again)
	}
	later := time.Now().Add(time.Hour)
	for _, c := range []struct {
		name   string
		change func()
		same   bool
	}{
		{"apt's lock", func() { write(filepath.Join(lists, "lock"), "") }, true},
		{"a partial download", func() { write(filepath.Join(lists, "partial", "x_Packages"), "Package: b\n") }, true},
		{"a list rewritten at the same size", func() {
			write(filepath.Join(lists, "bookworm_main_Packages"), "Package: b\n")
			if err := os.Chtimes(filepath.Join(lists, "bookworm_main_Packages"), later, later); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"a new list", func() { write(filepath.Join(lists, "bookworm-updates_main_Packages"), "Package: c\n") }, false},
		{"another source", func() { write(filepath.Join(etc, "sources.list"), "deb http://deb.debian.org/debian trixie main\n") }, false},
	} {
		before := state()
		c.change()
		if after := state(); (after == before) != c.same {
			t.Errorf("%s: state changed %v, want %v", c.name, after != before, !c.same)
		}
	}
}

// writeAtomic leaves the whole content under the final name and nothing beside it.
func TestWriteAtomic(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sub")
	f := filepath.Join(dir, "k")
	for _, content := range []string{"first", "second, longer"} {
		if err := writeAtomic(f, []byte(content)); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(f)
		if err != nil || string(b) != content {
			t.Fatalf("read %q, %v; want %q", b, err, content)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.tmp*")); len(left) > 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}
