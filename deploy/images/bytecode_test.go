package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// layerOf is a base layer of the given files.
func layerOf(t *testing.T, files map[string]string) layer {
	t.Helper()
	var entries []entry
	l := layer{paths: map[string]bool{}}
	for name, src := range files {
		entries = append(entries, entry{name: name, mode: 0o644, data: []byte(src)})
		l.paths[name] = true
	}
	b, err := tarOf(entries)
	if err != nil {
		t.Fatal(err)
	}
	l.data = b
	return l
}

// unpack writes a layer's files under dir and returns their names.
func unpack(t *testing.T, data []byte, dir string) []string {
	t.Helper()
	var names []string
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The bytecode layer holds a module's bytecode where Python looks for it, which Python loads without
// reading the source again; a module that does not compile has none; the same sources give the same
// layer, from the cache or compiled again.
func TestBytecodeLayerIsWhatPythonLoads(t *testing.T) {
	if _, err := os.Stat(hostPython); err != nil {
		t.Skipf("%s: %v (make packages installs it)", hostPython, err)
	}
	version, tag, _, err := pythonID()
	if err != nil {
		t.Fatal(err)
	}
	base := layerOf(t, map[string]string{
		"usr/lib/python3/dist-packages/sfmod/__init__.py":    "ANSWER = 42\n",
		"usr/lib/python3/dist-packages/sfmod/py2example.py":  "print 'not Python 3'\n",
		"usr/lib/python" + version + "/sfstdlib.py":          "NAME = 'stdlib'\n",
		"usr/share/sfdoc/example.py":                         "not a module of the image's Python\n",
		"usr/lib/python3/dist-packages/sfmod/data/table.txt": "not Python\n",
	})
	cache := t.TempDir()
	first, err := bytecodeLayer(base, cache)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	names := unpack(t, first, dir)
	want := []string{
		"usr/lib/python" + version + "/__pycache__/",
		"usr/lib/python" + version + "/__pycache__/sfstdlib." + tag + ".pyc",
		"usr/lib/python3/dist-packages/sfmod/__pycache__/",
		"usr/lib/python3/dist-packages/sfmod/__pycache__/__init__." + tag + ".pyc",
	}
	if strings.Join(names, "\n") != strings.Join(want, "\n") {
		t.Fatalf("layer holds\n%s\nwant\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}

	// The source beside the bytecode now says otherwise: Python still runs the bytecode (it does not
	// check the source), and names the module's path in the image.
	unpack(t, layerOf(t, map[string]string{"usr/lib/python3/dist-packages/sfmod/__init__.py": "ANSWER = 7\n"}).data, dir)
	cmd := exec.Command(hostPython, "-c", "import sfmod; print(sfmod.ANSWER, sfmod.__spec__.cached.endswith('."+tag+".pyc'), __import__('marshal').loads(open(sfmod.__spec__.cached, 'rb').read()[16:]).co_filename)")
	cmd.Env = []string{"PYTHONPATH=" + filepath.Join(dir, "usr/lib/python3/dist-packages"), "PYTHONDONTWRITEBYTECODE=1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("import: %v: %s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "42 True /usr/lib/python3/dist-packages/sfmod/__init__.py" {
		t.Fatalf("Python loaded %q; want the bytecode's answer 42, from __pycache__, naming the module's path in the image", got)
	}

	again, err := bytecodeLayer(base, cache)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := bytecodeLayer(base, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, again) || !bytes.Equal(first, fresh) {
		t.Fatal("the same sources gave another layer (from the cache or compiled again)")
	}
}

// An image without Python gets no bytecode layer.
func TestNoBytecodeWithoutPython(t *testing.T) {
	got, err := bytecodeLayer(layerOf(t, map[string]string{"usr/bin/tool": "#!/bin/sh\n"}), t.TempDir())
	if err != nil || got != nil {
		t.Fatalf("bytecodeLayer = %d bytes, %v; want none", len(got), err)
	}
}
