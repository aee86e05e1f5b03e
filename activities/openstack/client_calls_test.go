package openstack

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// gophercloudServices is the import path of gophercloud's OpenStack packages: the client factory
// (openstack) and the service packages under it.
const gophercloudServices = "github.com/gophercloud/gophercloud/v2/openstack"

// callsNotBehindAClientYet are the files of activities/ that still call gophercloud's service
// packages outside a client implementation, each with the client it waits for. The list only
// shrinks: a file that no longer calls them fails the test until it is taken off.
var callsNotBehindAClientYet = map[string]string{
	"openstack/baremetal.go":      "a BaremetalClient (Ironic's own package)",
	"openstack/flavors.go":        "the factory making the service user's ComputeClient",
	"openstack/identity.go":       "an IdentityClient",
	"openstack/network_agents.go": "NetworkClient's agent calls",
	"openstack/service_user.go":   "an IdentityClient",
}

// TestServiceCallsBehindClients: calls into gophercloud's OpenStack packages are made only by the
// client implementations (*_client.go) and the factory (clients.go), so every decision an activity takes
// is made against a narrow client a unit test can give. Types of those packages may appear anywhere (they
// are the clients' vocabulary); calls may not.
func TestServiceCallsBehindClients(t *testing.T) {
	root := ".."
	var calling []string
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
			calling = append(calling, rel)
			if _, listed := callsNotBehindAClientYet[rel]; !listed {
				t.Errorf("%s calls gophercloud outside a client implementation: %s (put the calls behind the service's client)", rel, strings.Join(calls, ", "))
			}
		}
		return nil
	})
	require.NoError(t, err)
	for f := range callsNotBehindAClientYet {
		if !slices.Contains(calling, f) {
			t.Errorf("%s calls gophercloud no more: take it off callsNotBehindAClientYet", f)
		}
	}
}

// serviceCalls lists the calls a file makes into gophercloud's OpenStack packages (pkg.Func).
func serviceCalls(path string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	pkgs := map[string]bool{}
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if p != gophercloudServices && !strings.HasPrefix(p, gophercloudServices+"/") {
			continue
		}
		name := p[strings.LastIndex(p, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		pkgs[name] = true
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && pkgs[x.Name] {
				out = append(out, x.Name+"."+sel.Sel.Name)
			}
		}
		return true
	})
	return out, nil
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
func f(ctx context.Context) { _ = srv.Get(ctx, nil, "id") }
`), 0o644))
	calls, err := serviceCalls(src)
	require.NoError(t, err)
	require.Equal(t, []string{"srv.Get"}, calls, "a renamed import's call is found; a type is not a call")
}
