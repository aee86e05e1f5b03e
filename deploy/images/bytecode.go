package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Debian byte-compiles Python modules in its packages' maintainer scripts, which an image unpacked with
// dpkg-deb never runs; and the images' processes run as an unprivileged user on a root file system they
// cannot write. Without a bytecode layer, every Python process of a pod (each nova-manage of a Job, each
// uwsgi worker, each ansible-playbook) compiles every module it imports from source, each time it starts:
// several CPU-seconds per process (importing Nova's conductor: 11 CPU-s from source, 5 from bytecode).
// The layer holds, for every module of the image's Python, the bytecode Debian's py3compile would have
// written, compiled by the build machine's own Debian Python of the same version.
//
// The files are hash-based without source checks (PEP 552, --invalidation-mode unchecked-hash): an
// image's sources never change, the files' times are normalised, and such bytecode is the same on every
// build of the same sources (compiled with a fixed hash seed, as frozenset constants are ordered by it).

// hostPython is the build machine's Debian Python, which compiles the images' modules: the image's
// python3 comes from the same Debian release.
const hostPython = "/usr/bin/python3"

// pythonID identifies hostPython's bytecode: its version, its magic number and its cache tag (a
// "cpython-311" in the files' names). An image built by another Python is built again.
func pythonID() (version, tag string, id string, err error) {
	out, err := exec.Command(hostPython, "-c",
		"import sys, importlib.util; print('%d.%d' % sys.version_info[:2], sys.implementation.cache_tag, importlib.util.MAGIC_NUMBER.hex(), sys.version.split()[0])").Output()
	if err != nil {
		return "", "", "", fmt.Errorf("%s, which byte-compiles the images' Python modules (make packages installs it): %w", hostPython, err)
	}
	f := strings.Fields(string(out))
	if len(f) != 4 {
		return "", "", "", fmt.Errorf("%s printed %q", hostPython, out)
	}
	return f[0], f[1], strings.Join(f, " "), nil
}

// stdlibDir matches the standard library's directory of an image's Python ("usr/lib/python3.11/").
var stdlibDir = regexp.MustCompile(`^usr/lib/python(3\.[0-9]+)/`)

// pyModule is a module's source in a layer.
type pyModule struct {
	name string // its path in the layer
	src  []byte
}

// pythonModules returns the modules of the layer's Python: the standard library and dist-packages, and
// the version of the standard library ("" when the layer has no Python).
func pythonModules(base layer) ([]pyModule, string, error) {
	var mods []pyModule
	version := ""
	tr := tar.NewReader(bytes.NewReader(base.data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, "", err
		}
		if h.Typeflag != tar.TypeReg || !strings.HasSuffix(h.Name, ".py") {
			continue
		}
		if m := stdlibDir.FindStringSubmatch(h.Name); m != nil {
			if version != "" && version != m[1] {
				return nil, "", fmt.Errorf("two Pythons in one image: %s and %s", version, m[1])
			}
			version = m[1]
		} else if !strings.HasPrefix(h.Name, "usr/lib/python3/dist-packages/") {
			continue
		}
		src, err := io.ReadAll(tr)
		if err != nil {
			return nil, "", err
		}
		mods = append(mods, pyModule{name: h.Name, src: src})
	}
	return mods, version, nil
}

// bytecodePath is where Python looks for a module's bytecode: beside it, in __pycache__.
func bytecodePath(module, tag string) string {
	dir, file := path.Split(module)
	return dir + "__pycache__/" + strings.TrimSuffix(file, ".py") + "." + tag + ".pyc"
}

// bytecodeLayer compiles the layer's Python modules and returns the layer of their bytecode (nil when the
// image has no Python). Bytecode is kept in cacheDir by the module's path and source, so a module that
// several images share, or that an image rebuilt for another reason still has, is compiled once.
func bytecodeLayer(base layer, cacheDir string) ([]byte, error) {
	mods, version, err := pythonModules(base)
	if err != nil || len(mods) == 0 {
		return nil, err
	}
	hostVersion, tag, id, err := pythonID()
	if err != nil {
		return nil, err
	}
	if version != "" && version != hostVersion {
		return nil, fmt.Errorf("the image's Python is %s, this machine's %s is %s: its bytecode would not load", version, hostPython, hostVersion)
	}
	cache := filepath.Join(cacheDir, "pyc", tag)
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, err
	}
	key := func(m pyModule) string {
		h := sha256.New()
		fmt.Fprintf(h, "%s\x00%s\x00", id, m.name)
		h.Write(m.src)
		return filepath.Join(cache, hex.EncodeToString(h.Sum(nil)))
	}
	work, err := os.MkdirTemp("", "stackflow-pyc-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	var todo []pyModule
	for _, m := range mods {
		if _, err := os.Stat(key(m)); err == nil {
			continue
		}
		f := filepath.Join(work, filepath.FromSlash(m.name))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(f, m.src, 0o644); err != nil {
			return nil, err
		}
		todo = append(todo, m)
	}
	if len(todo) > 0 {
		// -s/-p: the bytecode names the module's path in the image, as tracebacks show it.
		cmd := exec.Command(hostPython, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash",
			"-s", work, "-p", "/", filepath.Join(work, "usr"))
		cmd.Env = append(slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "PYTHON") }), "PYTHONHASHSEED=0")
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = io.Discard, &stderr
		// Exit status 1: a module that does not compile (Debian ships a few, such as Python 2 examples);
		// it has no bytecode, as under Debian, and fails the same way if imported.
		if err := cmd.Run(); err != nil {
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				return nil, fmt.Errorf("compileall: %w: %s", err, stderr.String())
			}
		}
		for _, m := range todo {
			pyc, err := os.ReadFile(filepath.Join(work, filepath.FromSlash(bytecodePath(m.name, tag))))
			if errors.Is(err, os.ErrNotExist) {
				pyc, err = nil, nil // kept empty: the module does not compile
			}
			if err != nil {
				return nil, err
			}
			// Atomic: images built side by side may compile the same module at once.
			if err := writeAtomic(key(m), pyc); err != nil {
				return nil, err
			}
		}
	}
	var entries []entry
	dirs := map[string]bool{}
	for _, m := range mods {
		pyc, err := os.ReadFile(key(m))
		if err != nil {
			return nil, err
		}
		if len(pyc) == 0 {
			continue
		}
		name := bytecodePath(m.name, tag)
		if d := path.Dir(name); !dirs[d] {
			dirs[d] = true
			entries = append(entries, entry{name: d, dir: true, mode: 0o755})
		}
		entries = append(entries, entry{name: name, mode: 0o644, data: pyc})
	}
	// In name order, so the layer is the same however the modules were found.
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	return tarOf(entries)
}
