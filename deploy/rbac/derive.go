package rbac

import (
	"errors"
	"fmt"
	"go/ast"
	"go/constant"
	"go/types"
	"slices"
	"strings"

	"golang.org/x/tools/go/packages"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

// Module is the import path of stackflow's module.
const Module = "github.com/stackflow/stackflow"

// Client-go packages whose calls are API requests.
const (
	typedPrefix = "k8s.io/client-go/kubernetes/typed/"
	dynamicPkg  = "k8s.io/client-go/dynamic"
	metadataPkg = "k8s.io/client-go/metadata"
)

// verbs maps a client method to the RBAC verb of its request and the subresource it addresses.
var verbs = map[string][2]string{
	"Get": {"get", ""}, "List": {"list", ""}, "Watch": {"watch", ""},
	"Create": {"create", ""}, "Update": {"update", ""}, "UpdateStatus": {"update", "status"},
	"Patch": {"patch", ""}, "Apply": {"patch", ""}, "ApplyStatus": {"patch", "status"},
	"Delete": {"delete", ""}, "DeleteCollection": {"deletecollection", ""},
}

// Derive analyses the module whose root is dir and returns the chart's accounts with the rules their code
// needs. Resources inputs the resource sets the code addresses through dynamic clients and libraries.
func Derive(dir string, res Resources) ([]Account, error) {
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo | packages.NeedImports,
		Dir:  dir,
	}
	pkgs, err := packages.Load(cfg, Module+"/bridge/...", Module+"/worker/...", Module+"/activities/...", Module+"/api/...", Module+"/deploy/ansible/...")
	if err != nil {
		return nil, fmt.Errorf("load packages: %w", err)
	}
	var errs []error
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		for _, e := range p.Errors {
			errs = append(errs, e)
		}
	})
	if len(errs) > 0 {
		return nil, fmt.Errorf("load packages: %w", errors.Join(errs...))
	}
	a := &analysis{res: res, funcs: map[string]*funcInfo{}}
	for _, p := range pkgs {
		a.index(p)
	}
	for key := range bestEffort {
		if f, ok := a.funcs[key]; !ok || len(f.calls) == 0 {
			return nil, fmt.Errorf("deploy/rbac: best-effort function %s is gone or makes no API call: drop it from bestEffort", key)
		}
	}

	var accounts []Account
	// The bridge: everything in its packages.
	var bridgeRoots []string
	for key, f := range a.funcs {
		if f.pkg == Module+"/bridge" || strings.HasPrefix(f.pkg, Module+"/bridge/") {
			bridgeRoots = append(bridgeRoots, key)
		}
	}
	rs, err := a.reach(bridgeRoots)
	if err != nil {
		return nil, fmt.Errorf("bridge: %w", err)
	}
	accounts = append(accounts, Account{Name: "bridge", Rules: rs.list()})

	// The workers: per task queue, the methods of the activity structs worker.register puts on it.
	queues, err := a.queues()
	if err != nil {
		return nil, err
	}
	for _, q := range queues {
		var roots []string
		for key, f := range a.funcs {
			if slices.Contains(q.types, f.recv) {
				roots = append(roots, key)
			}
		}
		rs, err := a.reach(roots)
		if err != nil {
			return nil, fmt.Errorf("task queue %s: %w", q.name, err)
		}
		accounts = append(accounts, Account{Name: WorkerAccount(q.name), Rules: rs.list()})
	}
	return accounts, nil
}

// WorkerAccount names the account of a task queue's workers: "worker" for stackflow, "worker-kube" for
// stackflow-kube, and so on.
func WorkerAccount(queue string) string {
	return "worker" + strings.TrimPrefix(queue, "stackflow")
}

// funcInfo is one function of the module: what it references and the API calls it makes.
type funcInfo struct {
	pkg  string
	recv string // receiver's named type (pkg.Name) for methods
	refs []string
	// calls are client calls: kind (typed, dynamic, metadata), group, resource, namespaced, verb, sub.
	calls []clientCall
	decl  *ast.FuncDecl
	info  *types.Info
}

type clientCall struct {
	client     string // "typed", "dynamic", "metadata"
	group      string
	resource   string
	namespaced bool
	verb       string
	sub        string
	where      string
}

type analysis struct {
	res   Resources
	funcs map[string]*funcInfo
	errs  []error
}

// index records every function declared in p.
func (a *analysis) index(p *packages.Package) {
	for _, file := range p.Syntax {
		for _, d := range file.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			obj, ok := p.TypesInfo.Defs[fd.Name].(*types.Func)
			if !ok {
				continue
			}
			f := &funcInfo{pkg: p.PkgPath, decl: fd, info: p.TypesInfo}
			if recv := obj.Signature().Recv(); recv != nil {
				f.recv = namedKey(recv.Type())
			}
			a.scan(p, f)
			a.funcs[obj.FullName()] = f
		}
	}
}

// scan finds what a function references and the client calls it makes.
func (a *analysis) scan(p *packages.Package, f *funcInfo) {
	info := p.TypesInfo
	// Variables of another interface type holding a client (var ri interface{ Patch(…) } = meta.Resource(…))
	// keep the client's identity.
	aliases := map[types.Object]types.Type{}
	note := func(lhs ast.Expr, rhs ast.Expr) {
		id, ok := lhs.(*ast.Ident)
		if !ok {
			return
		}
		t := info.TypeOf(rhs)
		if t == nil || clientKind(t) == "" {
			return
		}
		if obj := info.ObjectOf(id); obj != nil && clientKind(obj.Type()) == "" {
			aliases[obj] = t
		}
	}
	ast.Inspect(f.decl.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.ValueSpec:
			for i, name := range n.Names {
				if i < len(n.Values) {
					note(name, n.Values[i])
				}
			}
		case *ast.AssignStmt:
			if len(n.Lhs) == len(n.Rhs) {
				for i := range n.Lhs {
					note(n.Lhs[i], n.Rhs[i])
				}
			}
		case *ast.Ident:
			switch obj := info.Uses[n].(type) {
			case *types.Func:
				f.refs = append(f.refs, obj.FullName())
			case *types.TypeName:
				if obj.Pkg() != nil {
					f.refs = append(f.refs, obj.Pkg().Path()+"."+obj.Name())
				}
			}
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			fn, ok := info.Uses[sel.Sel].(*types.Func)
			if !ok {
				return true
			}
			recvType := info.TypeOf(sel.X)
			if id, ok := sel.X.(*ast.Ident); ok {
				if t, ok := aliases[info.ObjectOf(id)]; ok {
					recvType = t
				}
			}
			if recvType == nil || clientKind(recvType) == "" {
				return true
			}
			if c, ok := a.clientCall(recvType, fn, n, p.Fset.Position(n.Pos()).String()); ok {
				f.calls = append(f.calls, c)
			}
		}
		return true
	})
}

// clientKind says which client-go client a type is: "typed", "dynamic", "metadata" or "".
func clientKind(t types.Type) string {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := t.(*types.Named)
	if !ok || n.Obj().Pkg() == nil {
		return ""
	}
	path, name := n.Obj().Pkg().Path(), n.Obj().Name()
	switch {
	case strings.HasPrefix(path, typedPrefix) && strings.HasSuffix(name, "Interface"):
		return "typed"
	case path == dynamicPkg && (name == "ResourceInterface" || name == "NamespaceableResourceInterface"):
		return "dynamic"
	case path == metadataPkg && (name == "ResourceInterface" || name == "Getter"):
		return "metadata"
	}
	return ""
}

// clientCall classifies a method call on a client: the verb, and for typed clients the resource.
func (a *analysis) clientCall(recv types.Type, fn *types.Func, call *ast.CallExpr, where string) (clientCall, bool) {
	v, isVerb := verbs[fn.Name()]
	kind := clientKind(recv)
	if !isVerb {
		// Getters (CoreV1(), Secrets(ns), Resource(gvr), Namespace(ns)) return clients: no request.
		if res := fn.Signature().Results(); res.Len() == 1 && clientKind(res.At(0).Type()) != "" {
			return clientCall{}, false
		}
		a.errs = append(a.errs, fmt.Errorf("%s: %s client method %s is not known to deploy/rbac: teach it the verb", where, kind, fn.Name()))
		return clientCall{}, false
	}
	c := clientCall{client: kind, verb: v[0], sub: v[1], where: where}
	if (fn.Name() == "Patch" || fn.Name() == "Apply") && len(call.Args) > 5 {
		a.errs = append(a.errs, fmt.Errorf("%s: %s with a subresource argument is not known to deploy/rbac", where, fn.Name()))
	}
	if kind != "typed" {
		return c, true
	}
	// Typed: the interface <Kind>Interface of package typed/<group>/<version>.
	n := namedOf(recv)
	path := n.Obj().Pkg().Path()
	groupDir, version, _ := strings.Cut(strings.TrimPrefix(path, typedPrefix), "/")
	k := strings.TrimSuffix(n.Obj().Name(), "Interface")
	gvk, ok := findGVK(groupDir, version, k)
	if !ok {
		a.errs = append(a.errs, fmt.Errorf("%s: no kind %s in %s/%s of client-go's scheme", where, k, groupDir, version))
		return clientCall{}, false
	}
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	c.group, c.resource = gvk.Group, plural.Resource
	c.namespaced = namespacedGetter(n.Obj().Pkg(), n)
	return c, true
}

func namedOf(t types.Type) *types.Named {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, _ := t.(*types.Named)
	return n
}

func namedKey(t types.Type) string {
	n := namedOf(t)
	if n == nil || n.Obj().Pkg() == nil {
		return ""
	}
	return n.Obj().Pkg().Path() + "." + n.Obj().Name()
}

// findGVK finds kind in client-go's scheme, in the group whose client package is groupDir ("core" is the
// legacy group).
func findGVK(groupDir, version, kind string) (schema.GroupVersionKind, bool) {
	for gvk := range scheme.Scheme.AllKnownTypes() {
		if gvk.Kind != kind || gvk.Version != version {
			continue
		}
		first, _, _ := strings.Cut(gvk.Group, ".")
		if gvk.Group == "" && groupDir == "core" || first == groupDir || strings.ReplaceAll(gvk.Group, ".", "") == groupDir {
			return gvk, true
		}
	}
	return schema.GroupVersionKind{}, false
}

// namespacedGetter reports whether the group client's getter of the kind client takes a namespace.
func namespacedGetter(pkg *types.Package, kindClient *types.Named) bool {
	for _, name := range pkg.Scope().Names() {
		tn, ok := pkg.Scope().Lookup(name).(*types.TypeName)
		if !ok {
			continue
		}
		iface, ok := tn.Type().Underlying().(*types.Interface)
		if !ok {
			continue
		}
		for m := range iface.Methods() {
			sig := m.Signature()
			if sig.Results().Len() == 1 && types.Identical(sig.Results().At(0).Type(), kindClient) {
				return sig.Params().Len() == 1
			}
		}
	}
	return true
}

// reach collects the rules of every function reachable from roots.
func (a *analysis) reach(roots []string) (rules, error) {
	a.errs = nil
	seen := map[string]bool{}
	refs := map[string]bool{}
	stack := slices.Clone(roots)
	rs := rules{}
	for len(stack) > 0 {
		key := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[key] {
			continue
		}
		seen[key] = true
		f, ok := a.funcs[key]
		if !ok {
			continue
		}
		if _, skip := bestEffort[key]; !skip {
			for _, c := range f.calls {
				a.apply(rs, c, f.recv)
			}
		}
		for _, r := range f.refs {
			refs[r] = true
			if _, ok := a.funcs[r]; ok && !seen[r] {
				stack = append(stack, r)
			}
		}
	}
	for sym := range refs {
		if lib, ok := libraries[sym]; ok {
			lib.rules(a.res, rs)
		}
	}
	return rs, errors.Join(a.errs...)
}

// helmActivities is the Helm activities' type: their own namespaced requests (stored values, the pods of
// a release) are in the namespaces of the Helm releases, not in the namespaces stackflow serves.
const helmActivities = Module + "/activities/helm.Helm"

// apply adds the rules of one client call made in a function of receiver recv ("" for functions).
func (a *analysis) apply(rs rules, c clientCall, recv string) {
	resource := func(r string) string {
		if c.sub != "" {
			return r + "/" + c.sub
		}
		return r
	}
	switch c.client {
	case "typed":
		scope := Cluster
		switch {
		case c.namespaced && recv == helmActivities:
			scope = HelmReleases
		case c.namespaced:
			scope = Watched
		}
		rs.add(scope, c.group, resource(c.resource), c.verb)
	case "metadata":
		for _, k := range a.res.Served {
			rs.add(k.scope(), k.Group, resource(k.Resource), c.verb)
		}
	case "dynamic":
		// Workflows read and put the finalizer on every kind the bridge serves; they create, update,
		// delete and write the status of stackflow's own kinds only (core Nodes are read and labelled,
		// never written otherwise).
		kinds := a.res.Own
		if c.sub == "" && (c.verb == "get" || c.verb == "list" || c.verb == "watch" || c.verb == "patch") {
			kinds = union(a.res.Served, a.res.Own)
		}
		for _, k := range kinds {
			rs.add(k.scope(), k.Group, resource(k.Resource), c.verb)
		}
	}
}

// queue is one task queue and the activity struct types registered on it.
type queue struct {
	name  string
	types []string
}

// queues reads worker.register: each case of its switch is a task queue; the arguments of its
// RegisterActivity calls are the activity structs on that queue.
func (a *analysis) queues() ([]queue, error) {
	f, ok := a.funcs[Module+"/worker.register"]
	if !ok {
		return nil, errors.New("worker.register not found: deploy/rbac reads the task queues there")
	}
	var out []queue
	ast.Inspect(f.decl.Body, func(n ast.Node) bool {
		cc, ok := n.(*ast.CaseClause)
		if !ok {
			return true
		}
		for _, e := range cc.List {
			tv := f.info.Types[e]
			if tv.Value == nil || tv.Value.Kind() != constant.String {
				continue
			}
			q := queue{name: constant.StringVal(tv.Value)}
			for _, st := range cc.Body {
				ast.Inspect(st, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "RegisterActivity" && len(call.Args) == 1 {
						if k := namedKey(f.info.TypeOf(call.Args[0])); k != "" {
							q.types = append(q.types, k)
						}
					}
					return true
				})
			}
			out = append(out, q)
		}
		return false
	})
	if len(out) == 0 {
		return nil, errors.New("worker.register has no task queue cases")
	}
	return out, nil
}
