// Command stackflow-images builds stackflow's container images into OCI image layouts, without a
// container engine or a registry (`make images`):
//
//	stackflow-bridge  the bridge, on a base of CA certificates and netbase;
//	stackflow-worker  the worker (its playbooks are embedded in the binary), on a base of python3,
//	                  ansible-core, openssh-client and coreutils with their dependencies;
//	stackflow-pause   the sandbox image of the local stack's real node (built by the stack itself);
//	stackflow-nova    Debian's Nova services and nova-manage, no binary of ours (the pods name the
//	                  commands);
//	stackflow-keystone Debian's Keystone and keystone-manage under uwsgi, for the keystone chart (its
//	                  pods name the commands);
//	stackflow-placement Debian's Placement and placement-manage under uwsgi, for the placement chart;
//	stackflow-glance  Debian's Glance and glance-manage under uwsgi, for the glance chart;
//	stackflow-neutron Debian's Neutron (neutron-server's eventlet service, ML2/OVN) and
//	                  neutron-db-manage, for the neutron chart;
//	stackflow-ovn     Debian's ovn-central (OVN's databases and ovn-northd), for the ovn chart.
//
// Why this and not ko, buildah or apko: ko and buildah start FROM a base image pulled from a registry, and
// apko assembles Alpine/Wolfi packages; the machines that build stackflow reach Debian's package archive
// and the Go module proxy only. go-containerregistry (from the Go proxy) writes OCI layouts and images
// from tar layers we make ourselves, so the base is built here from Debian's .deb files: unpacked with
// dpkg-deb (no maintainer scripts run; what they would make, like the CA bundle, users and the Python
// modules' bytecode, is written explicitly), documentation pruned, /bin, /lib and /sbin merged into /usr
// as on Debian.
//
// Builds are reproducible: binaries are built with -trimpath and no build ID, every tar entry has a fixed
// time and owner and a sorted place, and the image config a fixed creation time; the same sources and
// .deb versions give the same digests. The .deb versions used are listed in the image, in
// /usr/share/stackflow/packages.txt. Images run as 65532:65532 and need no writable root filesystem
// (HOME and caches under /tmp, an emptyDir in the chart).
package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// buildTags are the Go build tags of the binaries (-tags).
var buildTags string

// epoch is the time of every file and of the images (SOURCE_DATE_EPOCH overrides it).
var epoch = time.Unix(1700000000, 0).UTC()

// spec describes one image.
type spec struct {
	name    string
	pkg     string   // Go package of the binary, relative to the repository root
	debs    []string // Debian packages of the base
	closure bool     // with their dependencies
	// omit are dependencies left out of the closure, with what only they need: features of the service
	// the image does not use (apt takes them as installed).
	omit  []string
	shell bool     // provide /usr/bin/sh (dash)
	env   []string // extra environment
	// vcs stamps the binary with the VCS revision even where GOFLAGS turns it off (-buildvcs=false): the
	// worker's build ID, which versions its workflows in Temporal, is that revision.
	vcs bool
	// bytecode adds the bytecode of the image's Python modules (bytecode.go).
	bytecode bool
}

var specs = map[string]spec{
	"stackflow-bridge": {
		name: "stackflow-bridge", pkg: "./bridge/cmd/stackflow-bridge",
		// A static Go binary needs only trust roots and /etc/services and friends.
		debs: []string{"ca-certificates", "netbase"},
	},
	"stackflow-worker": {
		name: "stackflow-worker", pkg: "./worker/cmd/stackflow-worker",
		// ansible-playbook and its SSH client for the data plane; coreutils for nice, which runs playbooks
		// at a lower priority than the worker's own orchestration.
		debs: []string{"python3", "ansible-core", "openssh-client", "coreutils", "ca-certificates", "netbase", "dash", "libc-bin"}, closure: true, shell: true, vcs: true, bytecode: true,
		env: []string{"ANSIBLE_LOCAL_TEMP=/tmp/ansible", "ANSIBLE_HOME=/tmp/ansible", "PYTHONDONTWRITEBYTECODE=1"},
	},
	"stackflow-pause": {
		name: "stackflow-pause", pkg: "./deploy/local/cmd/stackflow-pause",
	},
	// The Nova control plane's services (API, metadata, scheduler, conductor, console proxy) and
	// nova-manage for its Jobs: Debian's packages of them, bash for their scripts, PyMySQL for the
	// databases. The pods name the commands; the image has no entrypoint. nova-api's dependencies bring
	// uwsgi-core and its python3 plugin, which serve the compute API and metadata pods.
	"stackflow-nova": {
		name:    "stackflow-nova",
		debs:    []string{"nova-api", "nova-conductor", "nova-scheduler", "nova-consoleproxy", "python3-pymysql", "bash", "coreutils", "dash", "libc-bin", "grep", "sed", "findutils"},
		closure: true, shell: true, bytecode: true,
		env: []string{"PYTHONDONTWRITEBYTECODE=1"},
	},
	// Keystone for the keystone chart: Debian's Keystone (keystone-manage for its Jobs) served by uwsgi,
	// PyMySQL for the database. The chart's pods name the commands; the image has no entrypoint.
	"stackflow-keystone": {
		name:    "stackflow-keystone",
		debs:    append([]string{"python3-keystone"}, apiDebs...),
		closure: true, shell: true, bytecode: true,
		env: []string{"PYTHONDONTWRITEBYTECODE=1"},
	},
	// Placement for the placement chart: Debian's Placement (placement-manage for its Job, keystoneauth for
	// the Keystone registration) served by uwsgi, PyMySQL for the database.
	"stackflow-placement": {
		name:    "stackflow-placement",
		debs:    append([]string{"python3-placement"}, apiDebs...),
		closure: true, shell: true, bytecode: true,
		env: []string{"PYTHONDONTWRITEBYTECODE=1"},
	},
	// Glance for the glance chart: Debian's glance-common (the API's WSGI script, glance-manage and the
	// paste pipeline, /usr/share/glance-common) served by uwsgi, PyMySQL for the database.
	"stackflow-glance": {
		name:    "stackflow-glance",
		debs:    append([]string{"glance-common"}, apiDebs...),
		closure: true, shell: true, bytecode: true,
		// The Cinder store (os-brick, with open-iscsi, udev and sudo) and PostgreSQL, qemu-img (image
		// conversion and import introspection, not the upload the chart serves), Graphviz (taskflow's graph
		// rendering) and C headers python3-glance names. boto3 stays: glance_store loads every store's
		// options at start and logs an error for the S3 store without it.
		omit: []string{"python3-os-brick", "python3-psycopg2", "qemu-utils", "graphviz", "libxml2-dev", "libxslt-dev"},
		env:  []string{"PYTHONDONTWRITEBYTECODE=1"},
	},
	// Neutron for the neutron chart: Debian's python3-neutron (the server runs as its eventlet service,
	// which forks the workers ML2/OVN needs, as the local stack's does), PyMySQL for the database.
	"stackflow-neutron": {
		name: "stackflow-neutron",
		// ovsdb-client: ML2/OVN runs it to delete a removed router interface's MAC bindings.
		debs:    []string{"python3-neutron", "openvswitch-common", "python3-pymysql", "bash", "coreutils", "dash", "libc-bin", "grep"},
		closure: true, shell: true, bytecode: true,
		// Tools of Neutron's agents only (conntrack, ipset): the server runs no agent.
		omit: []string{"conntrack", "ipset"},
		env:  []string{"PYTHONDONTWRITEBYTECODE=1"},
	},
	// OVN's central services for the ovn chart: the northbound and southbound ovsdb-servers and
	// ovn-northd, from Debian's ovn-central.
	"stackflow-ovn": {
		name:    "stackflow-ovn",
		debs:    []string{"ovn-central", "ca-certificates", "bash", "coreutils", "dash", "libc-bin"},
		closure: true, shell: true,
	},
}

// apiDebs are what every OpenStack API image adds to its service's package: uwsgi to serve it, PyMySQL for
// its database, and the shell and tools of the charts' scripts.
var apiDebs = []string{"uwsgi-core", "uwsgi-plugin-python3", "python3-pymysql", "bash", "coreutils", "dash", "libc-bin", "grep"}

func main() {
	repo := flag.String("repo", "../..", "repository root (the binaries are built there)")
	out := flag.String("out", "../../bin/images", "directory of the OCI layouts (one per image)")
	cache := flag.String("cache", filepath.Join(cacheDir(), "images"), "download cache of .deb files")
	version := flag.String("version", "dev", "image tag (the ref name annotation of the layout)")
	flag.StringVar(&buildTags, "tags", "", "Go build tags of the binaries (a build with other code, such as tests/install's upgraded worker)")
	flag.Parse()
	if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
		var s int64
		if _, err := fmt.Sscan(v, &s); err == nil {
			epoch = time.Unix(s, 0).UTC()
		}
	}
	names := flag.Args()
	if len(names) == 0 {
		names = []string{"stackflow-bridge", "stackflow-worker", "stackflow-nova", "stackflow-keystone", "stackflow-placement", "stackflow-glance", "stackflow-neutron", "stackflow-ovn"}
	}
	for _, n := range names {
		if _, ok := specs[n]; !ok {
			fail(fmt.Errorf("unknown image %s", n))
		}
	}
	// Images side by side, as many as there are cores: each one is mostly one process at a time (go
	// build, dpkg-deb, compression) and none depends on another. Each line prints when its image is done.
	var (
		mu     sync.Mutex
		failed []error
		wg     sync.WaitGroup
		slots  = make(chan struct{}, max(1, min(runtime.NumCPU(), len(names))))
	)
	for _, n := range names {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			t0 := time.Now()
			res, err := build(specs[n], *repo, *out, *cache, *version)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				failed = append(failed, fmt.Errorf("%s: %w", n, err))
			case res.cached:
				fmt.Printf("%-18s %s  unchanged inputs, not rebuilt, %d Debian packages, %s  (%s)\n", n, res.digest,
					res.packages, filepath.Join(*out, n), time.Since(t0).Round(time.Second))
			default:
				fmt.Printf("%-18s %s  %s compressed, %s unpacked, %d Debian packages, %s  (%s)\n", n, res.digest,
					mib(res.compressed), mib(res.unpacked), res.packages, filepath.Join(*out, n), time.Since(t0).Round(time.Second))
			}
		}()
	}
	wg.Wait()
	if len(failed) > 0 {
		fail(errors.Join(failed...))
	}
}

func cacheDir() string {
	if d := os.Getenv("STACKFLOW_CACHE"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "stackflow")
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func fail(err error) {
	fmt.Fprintln(os.Stderr, "stackflow-images:", err)
	os.Exit(1)
}

type result struct {
	digest               v1.Hash
	cached               bool
	compressed, unpacked int64
	packages             int
}

func build(s spec, repo, outDir, cache, version string) (result, error) {
	var res result
	work, err := os.MkdirTemp("", "stackflow-image-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(work)

	// The inputs first (the binary, the exact .deb files): an image whose inputs did not change is not
	// built again, which keeps a warm `make images` to seconds.
	var bin string
	if s.pkg != "" {
		bin = filepath.Join(work, s.name)
		args := []string{"build", "-trimpath", "-ldflags", "-s -w -buildid=", "-o", bin}
		if buildTags != "" {
			args = append(args, "-tags", buildTags)
		}
		if s.vcs {
			args = append(args, "-buildvcs=auto")
		}
		cmd := exec.Command("go", append(args, s.pkg)...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return res, fmt.Errorf("build %s: %w", s.pkg, err)
		}
	}
	debs, err := download(s, filepath.Join(cache, "debs"))
	if err != nil {
		return res, err
	}
	res.packages = len(debs)
	python := ""
	if s.bytecode {
		if _, _, python, err = pythonID(); err != nil {
			return res, err
		}
	}
	key, err := inputsKey(s, bin, debs, version, python)
	if err != nil {
		return res, err
	}
	dst := filepath.Join(outDir, s.name)
	if d, ok := built(dst, key); ok {
		res.digest, res.cached = d, true
		return res, nil
	}
	// A fresh checkout finds the image of the same inputs in the cache, built by an earlier checkout.
	kept := filepath.Join(cache, "layouts", s.name+"@"+version)
	if d, ok := built(kept, key); ok {
		if err := copyTree(kept, dst); err != nil {
			return res, err
		}
		res.digest, res.cached = d, true
		return res, nil
	}

	base, list, err := baseLayer(debs)
	if err != nil {
		return res, err
	}
	etc, err := systemLayer(base, list, s.shell)
	if err != nil {
		return res, err
	}
	layers := [][]byte{base.data, etc}
	if s.bytecode {
		pyc, err := bytecodeLayer(base, cache)
		if err != nil {
			return res, fmt.Errorf("bytecode: %w", err)
		}
		if pyc != nil {
			layers = append(layers, pyc)
		}
	}
	if bin != "" {
		app, err := tarOf([]entry{{name: "usr/local/bin/" + s.name, mode: 0o755, file: bin}})
		if err != nil {
			return res, err
		}
		layers = append(layers, app)
	}

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, b := range layers {
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }, tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return res, err
		}
		if img, err = mutate.Append(img, mutate.Addendum{Layer: l, History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "stackflow-images"}}); err != nil {
			return res, err
		}
		res.unpacked += int64(len(b))
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return res, err
	}
	cf = cf.DeepCopy()
	cf.Created = v1.Time{Time: epoch}
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Config.User = "65532:65532"
	cf.Config.WorkingDir = "/tmp"
	if bin != "" {
		cf.Config.Entrypoint = []string{"/usr/local/bin/" + s.name}
	}
	cf.Config.Env = append([]string{"PATH=/usr/local/bin:/usr/bin", "HOME=/tmp", "LANG=C.UTF-8", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}, s.env...)
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.title":   s.name,
		"org.opencontainers.image.version": version,
		"org.opencontainers.image.source":  "https://github.com/stackflow/stackflow",
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return res, err
	}
	if res.digest, err = img.Digest(); err != nil {
		return res, err
	}
	m, err := img.Manifest()
	if err != nil {
		return res, err
	}
	for _, l := range m.Layers {
		res.compressed += l.Size
	}

	if err := os.RemoveAll(dst); err != nil {
		return res, err
	}
	p, err := layout.Write(dst, empty.Index)
	if err != nil {
		return res, err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": version, inputsAnnotation: key})); err != nil {
		return res, err
	}
	// The cache keeps the last build of each image only, so it does not grow with every change.
	return res, copyTree(dst, kept)
}

// copyTree replaces dst with a copy of the directory src (a layout: regular files only), written beside
// dst first so an interrupted copy never looks like a layout.
func copyTree(src, dst string) error {
	tmp := dst + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(tmp, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		// A hard link where the file system allows it: the blobs are never written again in place.
		if os.Link(path, to) == nil {
			return nil
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(to)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		return fmt.Errorf("copy image layout %s: %w", src, err)
	}
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// inputsAnnotation records, in the layout's index, the digest of what the image was built from.
const inputsAnnotation = "io.stackflow.image.inputs"

// inputsKey digests everything an image is made of: this program (its layering rules), the spec, the
// binary, the .deb files by name (name_version_arch: Debian never reuses one for other contents), the
// time, the tag and the Python that compiles the bytecode (pythonID; "" for an image without).
func inputsKey(s spec, bin string, debs []string, version, python string) (string, error) {
	h := sha256.New()
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	for _, f := range []string{self, bin} {
		if f == "" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	fmt.Fprintf(h, "%q %q %v %v %q %d %s %v %q\n", s.name, s.pkg, s.closure, s.shell, s.env, epoch.Unix(), version, s.bytecode, python)
	for _, d := range debs {
		fmt.Fprintln(h, filepath.Base(d))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// built returns the digest of the image in the layout dir when it was built from inputs key and its
// manifest is still there.
func built(dir, key string) (v1.Hash, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		return v1.Hash{}, false
	}
	var idx v1.IndexManifest
	if json.Unmarshal(b, &idx) != nil || len(idx.Manifests) != 1 || idx.Manifests[0].Annotations[inputsAnnotation] != key {
		return v1.Hash{}, false
	}
	d := idx.Manifests[0].Digest
	if _, err := os.Stat(filepath.Join(dir, "blobs", d.Algorithm, d.Hex)); err != nil {
		return v1.Hash{}, false
	}
	return d, true
}

// download fetches the .deb files of the spec (with their dependencies when closure) into dir and returns
// their paths, sorted. apt resolves against a package status that holds only the spec's omitted packages,
// so nothing installed on the building machine is assumed present in the image. apt resolves first (from
// the cache of resolutions while the machine's package lists are unchanged) and downloads only when a
// file is missing: a warm `make images` runs no apt at all.
func download(s spec, dir string) ([]string, error) {
	if len(s.debs) == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(filepath.Join(dir, "partial"), 0o755); err != nil {
		return nil, err
	}
	var st strings.Builder
	for _, p := range s.omit {
		// Installed at a version above any, so every versioned dependency on it is met.
		fmt.Fprintf(&st, "Package: %s\nStatus: install ok installed\nVersion: 999:0\nArchitecture: all\nMaintainer: none\nDescription: omitted\n\n", p)
	}
	status := filepath.Join(dir, "status-"+s.name)
	if err := os.WriteFile(status, []byte(st.String()), 0o644); err != nil {
		return nil, err
	}
	paths := func(names []string) (debs []string, missing bool) {
		for _, w := range names {
			p := filepath.Join(dir, w)
			if _, err := os.Stat(p); err != nil {
				missing = true
			}
			debs = append(debs, p)
		}
		slices.Sort(debs)
		return debs, missing
	}
	want, err := resolveCached(s, status, st.String(), filepath.Join(dir, "resolved"))
	if err != nil {
		// A fresh machine may have no package lists yet.
		if uerr := exec.Command("apt-get", "update", "-q").Run(); uerr != nil {
			return nil, err
		}
		if want, err = resolveCached(s, status, st.String(), filepath.Join(dir, "resolved")); err != nil {
			return nil, err
		}
	}
	if debs, missing := paths(want); !missing {
		return debs, nil
	}
	args := []string{"-q", "-y", "--no-install-recommends", "-o", "Dir::State::status=" + status, "-o", "Dir::Cache::archives=" + dir,
		"-o", "Debug::NoLocking=1", "--download-only", "install"}
	if !s.closure {
		// Only these packages' files: apt-get download fetches them alone.
		args = []string{"-q", "-o", "Dir::Cache::archives=" + dir, "download"}
	}
	// One download at a time: apt writes the shared partial/ directory, unlocked.
	downloading.Lock()
	defer downloading.Unlock()
	cmd := exec.Command("apt-get", append(args, s.debs...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("apt-get: %w\n%s", err, out)
	}
	debs, _ := paths(want)
	for _, d := range debs {
		if _, err := os.Stat(d); err != nil {
			return nil, fmt.Errorf("package file %s missing after download: %w", filepath.Base(d), err)
		}
	}
	return debs, nil
}

// downloading serializes apt's downloads into the shared cache.
var downloading sync.Mutex

// resolveCached is resolve, kept in dir under a key of everything apt's answer depends on: the spec's
// packages and omitted status, and the machine's apt configuration and package lists (aptState). The
// same question on the same lists gets the same answer, so it is not asked again.
func resolveCached(s spec, status, statusText, dir string) ([]string, error) {
	state, err := aptState()
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%v\x00%q\x00%s\x00%s", s.closure, s.debs, statusText, state)
	file := filepath.Join(dir, hex.EncodeToString(h.Sum(nil)))
	if b, err := os.ReadFile(file); err == nil && len(b) > 0 {
		return strings.Fields(string(b)), nil
	}
	names, err := resolve(s, status)
	if err != nil {
		return nil, err
	}
	if err := writeAtomic(file, []byte(strings.Join(names, "\n")+"\n")); err != nil {
		return nil, err
	}
	return names, nil
}

// aptRoots are what apt reads to resolve: its configuration and the package lists apt-get update wrote.
var aptRoots = []string{"/etc/apt", "/var/lib/apt/lists"}

// aptState digests the files under aptRoots by name, size and modification time (apt-get update rewrites
// the lists it changes), the architecture apt resolves for, and this machine's apt version.
func aptState() (string, error) {
	h := sha256.New()
	for _, root := range aptRoots {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
					return nil
				}
				return err
			}
			if d.IsDir() {
				if d.Name() == "partial" || d.Name() == "auxfiles" {
					return filepath.SkipDir
				}
				return nil
			}
			if d.Name() == "lock" {
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				return nil // removed under us: the next run sees the new state
			}
			fmt.Fprintf(h, "%s %d %d\n", p, fi.Size(), fi.ModTime().UnixNano())
			return nil
		})
		if err != nil {
			return "", fmt.Errorf("apt state %s: %w", root, err)
		}
	}
	// Architectures and apt itself: the same lists resolve differently for another architecture or apt.
	for _, argv := range [][]string{{"dpkg", "--print-architecture"}, {"dpkg-query", "-W", "-f", "${Version}", "apt"}} {
		out, err := exec.Command(argv[0], argv[1:]...).Output()
		if err != nil {
			return "", fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
		}
		fmt.Fprintf(h, "%s\n", out)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeAtomic writes b to file through a temporary file beside it, so builds running side by side (or an
// interrupted one) never leave a half-written file under the final name.
func writeAtomic(file string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(file), filepath.Base(file)+".tmp*")
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), file); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}

// resolve lists the .deb file names apt picks for the spec.
func resolve(s spec, status string) ([]string, error) {
	var names []string
	if s.closure {
		cmd := exec.Command("apt-get", append([]string{"-q", "-y", "--no-install-recommends", "-o", "Dir::State::status=" + status,
			"-o", "Debug::NoLocking=1", "--print-uris", "install"}, s.debs...)...)
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("apt-get --print-uris: %w", err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && strings.HasPrefix(f[0], "'") && strings.HasSuffix(f[1], ".deb") {
				names = append(names, f[1])
			}
		}
	} else {
		cmd := exec.Command("apt-get", append([]string{"-q", "--print-uris", "download"}, s.debs...)...)
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("apt-get --print-uris: %w", err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && strings.HasSuffix(f[1], ".deb") {
				names = append(names, f[1])
			}
		}
	}
	if len(names) == 0 {
		return nil, errors.New("apt resolved no package")
	}
	return names, nil
}

// layer is a tar layer in memory and the paths it holds.
type layer struct {
	data  []byte
	paths map[string]bool
}

// pruned are paths no container needs: documentation, manuals, translations, lintian data.
var pruned = []string{"usr/share/doc/", "usr/share/man/", "usr/share/info/", "usr/share/locale/", "usr/share/lintian/", "usr/share/bug/"}

// merged are the top-level directories Debian merges into /usr.
var merged = []string{"bin", "sbin", "lib", "lib64"}

// baseLayer unpacks the packages' files (dpkg-deb --fsys-tarfile) into one normalised layer and returns
// it with the list of packages ("name version" lines).
func baseLayer(debs []string) (layer, []string, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	l := layer{paths: map[string]bool{}}
	var list []string
	// usrmerge: /bin, /sbin, /lib, /lib64 are links into /usr.
	for _, d := range merged {
		if err := tw.WriteHeader(header(&tar.Header{Typeflag: tar.TypeSymlink, Name: d, Linkname: "usr/" + d, Mode: 0o777})); err != nil {
			return l, nil, err
		}
		l.paths[d] = true
	}
	for _, deb := range debs {
		info, err := exec.Command("dpkg-deb", "--showformat", "${Package} ${Version}", "--show", deb).Output()
		if err != nil {
			return l, nil, fmt.Errorf("dpkg-deb --show %s: %w", deb, err)
		}
		list = append(list, string(info))
		data, err := exec.Command("dpkg-deb", "--fsys-tarfile", deb).Output()
		if err != nil {
			return l, nil, fmt.Errorf("dpkg-deb --fsys-tarfile %s: %w", deb, err)
		}
		tr := tar.NewReader(bytes.NewReader(data))
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return l, nil, fmt.Errorf("%s: %w", deb, err)
			}
			name := usrMerged(h.Name)
			if name == "" || slices.ContainsFunc(pruned, func(p string) bool { return strings.HasPrefix(name+"/", p) }) || l.paths[name] {
				continue
			}
			h.Name = name
			if h.Typeflag == tar.TypeLink {
				h.Linkname = usrMerged(h.Linkname)
			}
			if err := tw.WriteHeader(header(h)); err != nil {
				return l, nil, err
			}
			if h.Typeflag == tar.TypeReg {
				if _, err := io.Copy(tw, tr); err != nil {
					return l, nil, err
				}
			}
			l.paths[name] = true
		}
	}
	if err := tw.Close(); err != nil {
		return l, nil, err
	}
	l.data = buf.Bytes()
	slices.Sort(list)
	return l, list, nil
}

// usrMerged cleans a package path ("./bin/ls" → "usr/bin/ls"); "" for the root.
func usrMerged(name string) string {
	name = strings.TrimPrefix(path.Clean("/"+name), "/")
	if name == "" {
		return ""
	}
	first, rest, _ := strings.Cut(name, "/")
	if slices.Contains(merged, first) {
		return path.Join("usr", first, rest)
	}
	return name
}

// header normalises what would make a layer differ between builds or machines.
func header(h *tar.Header) *tar.Header {
	h.ModTime, h.AccessTime, h.ChangeTime = epoch, time.Time{}, time.Time{}
	h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
	h.Format = tar.FormatPAX
	h.PAXRecords = nil
	if h.Typeflag == tar.TypeDir && !strings.HasSuffix(h.Name, "/") {
		h.Name += "/"
	}
	return h
}

// entry is a file, link or directory of a layer made here.
type entry struct {
	name, link string
	mode       int64
	dir        bool
	data       []byte
	file       string
}

// tarOf writes entries, in the given order, as a normalised tar.
func tarOf(entries []entry) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode}
		switch {
		case e.dir:
			h.Typeflag = tar.TypeDir
		case e.link != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.link
		default:
			h.Typeflag = tar.TypeReg
			if e.file != "" {
				b, err := os.ReadFile(e.file)
				if err != nil {
					return nil, err
				}
				e.data = b
			}
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(header(h)); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(e.data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// systemLayer writes what maintainer scripts would have made: users, the CA bundle, /tmp, the shell link,
// and the package list.
func systemLayer(base layer, packages []string, shell bool) ([]byte, error) {
	entries := []entry{
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/usr/sbin/nologin\nnonroot:x:65532:65532:nonroot:/tmp:/usr/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{name: "etc/nsswitch.conf", mode: 0o644, data: []byte("passwd: files\ngroup: files\nhosts: files dns\n")},
		{name: "tmp", dir: true, mode: 0o1777},
		{name: "usr/local/bin", dir: true, mode: 0o755},
		{name: "usr/share/stackflow", dir: true, mode: 0o755},
		{name: "usr/share/stackflow/packages.txt", mode: 0o644, data: []byte(strings.Join(packages, "\n") + "\n")},
	}
	if len(packages) > 0 {
		// An image without Debian packages (the pause image) talks to nobody over TLS.
		bundle, err := caBundle(base)
		if err != nil {
			return nil, err
		}
		entries = append(entries, entry{name: "etc/ssl/certs", dir: true, mode: 0o755},
			entry{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: bundle})
	}
	if shell {
		entries = append(entries, entry{name: "usr/bin/sh", link: "dash", mode: 0o777})
	}
	return tarOf(entries)
}

// caBundle concatenates the certificates the ca-certificates package ships (update-ca-certificates'
// result), in name order.
func caBundle(base layer) ([]byte, error) {
	var names []string
	for p := range base.paths {
		if strings.HasPrefix(p, "usr/share/ca-certificates/") && strings.HasSuffix(p, ".crt") {
			names = append(names, p)
		}
	}
	if len(names) == 0 {
		return nil, errors.New("no CA certificates in the base (ca-certificates missing?)")
	}
	slices.Sort(names)
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	got := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(base.data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if want[h.Name] {
			b, err := io.ReadAll(tr)
			if err != nil {
				return nil, err
			}
			got[h.Name] = b
		}
	}
	var out bytes.Buffer
	for _, n := range names {
		out.Write(bytes.TrimSpace(got[n]))
		out.WriteByte('\n')
	}
	return out.Bytes(), nil
}
