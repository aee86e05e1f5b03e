package openstack

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// gophercloudServices is the import path of gophercloud's OpenStack packages: the client factory
// (openstack) and the service packages under it.
const gophercloudServices = "github.com/gophercloud/gophercloud/v2/openstack"

// TestServiceCallsBehindClients: calls into gophercloud's OpenStack packages are made only by the
// client implementations (*_client.go) and the factory (clients.go), so every decision an activity takes
// is made against a narrow client a unit test can give. Types of those packages may appear anywhere (they
// are the clients' vocabulary); calls may not.
func TestServiceCallsBehindClients(t *testing.T) {
	root := ".."
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if strings.HasSuffix(rel, "_client.go") || rel == "openstack/clients.go" {
			return nil
		}
		calls, err := serviceCalls(path)
		if err != nil {
			return err
		}
		if len(calls) > 0 {
			t.Errorf("%s calls gophercloud outside a client implementation: %s (put the calls behind the service's client)", rel, strings.Join(calls, ", "))
		}
		return nil
	})
	require.NoError(t, err)
}

// TestServiceTypesBehindClients: no file of activities/ (tests included) but the client implementations
// (*_client.go, their tests, the factory clients.go) and the generated mocks imports a gophercloud
// service package; the types the activities use are declared in the client files under stackflow's
// names (Server, Port, Node, …), so what the activities depend on of gophercloud is stated in one place
// per service. The clouds.yaml parser (openstack/config) is no service.
func TestServiceTypesBehindClients(t *testing.T) {
	root := ".."
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if clientFile(rel) {
			return nil
		}
		imps, err := serviceImports(path)
		if err != nil {
			return err
		}
		if len(imps) > 0 {
			t.Errorf("%s imports gophercloud's service packages outside a client implementation: %s (name the types in the service's *_client.go)",
				rel, strings.Join(imps, ", "))
		}
		return nil
	})
	require.NoError(t, err)
}

// clientFile says whether a file of activities/ (slash-separated, relative) belongs to a client
// implementation: the only files that may import gophercloud's service packages.
func clientFile(rel string) bool {
	base := filepath.Base(rel)
	return strings.HasSuffix(base, "_client.go") || strings.HasSuffix(base, "_client_test.go") ||
		rel == "openstack/clients.go" || rel == "openstack/client_calls_test.go" || strings.Contains(rel, "/mock/")
}

// serviceImports lists the gophercloud service packages a file imports.
func serviceImports(path string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		rest, ok := strings.CutPrefix(p, gophercloudServices+"/")
		if ok && rest != "config" && !strings.HasPrefix(rest, "config/") {
			out = append(out, rest)
		}
	}
	return out, nil
}

func TestServiceImportsFound(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "x_test.go")
	require.NoError(t, os.WriteFile(src, []byte(`package x
import (
	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	nets "github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
)
var _ gophercloud.ErrResourceNotFound
var _ clouds.Clouds
var _ nets.Network
`), 0o644))
	imps, err := serviceImports(src)
	require.NoError(t, err)
	require.Equal(t, []string{"networking/v2/networks"}, imps, "a renamed service import is found; gophercloud's core and the clouds.yaml parser are not services")
	for rel, want := range map[string]bool{"openstack/compute.go": false, "openstack/compute_client.go": true, "openstack/network_client_test.go": true,
		"baremetal/ironic_client.go": true, "openstack/mock/compute.go": true, "openstack/compute_test.go": false, "openstack/clients.go": true} {
		require.Equal(t, want, clientFile(rel), rel)
	}
}

// serviceCalls lists the calls a file makes into gophercloud's OpenStack packages (pkg.Func); a
// conversion to one of their types (nodes.ProvisionState(s)) is not a call. The packages' sources tell
// the two apart.
func serviceCalls(path string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	pkgs := map[string]map[string]bool{}
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if p != gophercloudServices && !strings.HasPrefix(p, gophercloudServices+"/") {
			continue
		}
		pkg, funcs, err := packageFuncs(p)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		name := pkg
		if imp.Name != nil {
			name = imp.Name.Name
		}
		pkgs[name] = funcs
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && pkgs[x.Name] != nil {
				if pkgs[x.Name][sel.Sel.Name] {
					out = append(out, x.Name+"."+sel.Sel.Name)
				}
			}
		}
		return true
	})
	return out, nil
}

var (
	funcsMu sync.Mutex
	funcsOf = map[string]map[string]bool{}
	nameOf  = map[string]string{}
)

// packageFuncs is a package's name and its exported functions (not methods), read from its source in the
// module cache, once each.
func packageFuncs(path string) (string, map[string]bool, error) {
	funcsMu.Lock()
	defer funcsMu.Unlock()
	if f, ok := funcsOf[path]; ok {
		return nameOf[path], f, nil
	}
	bp, err := build.Import(path, ".", 0)
	if err != nil {
		return "", nil, err
	}
	funcs := map[string]bool{}
	for _, name := range bp.GoFiles {
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(bp.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return "", nil, err
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.IsExported() {
				funcs[fd.Name.Name] = true
			}
		}
	}
	funcsOf[path], nameOf[path] = funcs, bp.Name
	return bp.Name, funcs, nil
}

func TestServiceCallsFound(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "x.go")
	require.NoError(t, os.WriteFile(src, []byte(`package x
import (
	"context"
	srv "github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
)
var _ ports.ListOpts
func f(ctx context.Context) { _ = srv.Get(ctx, nil, "id"); _ = srv.ServerPage{} }
func g(s string) { _ = ports.IP(ports.IP{IPAddress: s}) }
`), 0o644))
	calls, err := serviceCalls(src)
	require.NoError(t, err)
	require.Equal(t, []string{"srv.Get"}, calls, "a renamed import's call is found; a type or a conversion is not a call")
}
