package describe

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/stackflow/stackflow/api"
)

// Scope says which objects a tree shows.
type Scope struct {
	// Namespace limits namespaced objects to one namespace; every namespace when All.
	Namespace string
	All       bool
	// Object, when set (KIND/NAME, kind case-insensitive, its plural or its short name), shows that
	// object's subtree only.
	Object string
}

// Read lists every stackflow object in scope from the API server (cluster-scoped ones always: the
// control plane serves every namespace) and builds the trees.
func Read(ctx context.Context, dyn dynamic.Interface, scope Scope, now time.Time) ([]*Node, error) {
	var objs []*unstructured.Unstructured
	for _, k := range api.Kinds {
		ri := dyn.Resource(k.GVR())
		var list *unstructured.UnstructuredList
		var err error
		switch {
		case k.ClusterScoped || scope.All:
			list, err = ri.List(ctx, metav1.ListOptions{})
		default:
			list, err = ri.Namespace(scope.Namespace).List(ctx, metav1.ListOptions{})
		}
		if apierrors.IsNotFound(err) {
			continue // a CRD not installed
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", k.Resource, err)
		}
		for i := range list.Items {
			objs = append(objs, &list.Items[i])
		}
	}
	roots := Build(objs, now)
	if scope.Object == "" {
		return roots, nil
	}
	kind, name, ok := strings.Cut(scope.Object, "/")
	if !ok {
		return nil, fmt.Errorf("%q: name an object as KIND/NAME (e.g. openstackdataplane/edpm)", scope.Object)
	}
	want, err := kindOf(kind)
	if err != nil {
		return nil, err
	}
	if n := find(roots, want, name); n != nil {
		return []*Node{n}, nil
	}
	return nil, fmt.Errorf("%s %s not found in %s", want, name, where(scope))
}

func where(s Scope) string {
	if s.All {
		return "any namespace"
	}
	return "namespace " + s.Namespace
}

// kindOf resolves a kind as kubectl users name it: the kind, its plural or a short name, any case.
func kindOf(s string) (string, error) {
	l := strings.ToLower(s)
	for _, k := range api.Kinds {
		if l == strings.ToLower(k.GVK.Kind) || l == k.Resource || l == strings.TrimSuffix(k.Resource, "s") {
			return k.GVK.Kind, nil
		}
	}
	if k, ok := shortNames[l]; ok {
		return k, nil
	}
	return "", fmt.Errorf("%q is no stackflow kind", s)
}

// shortNames are the CRDs' short names.
var shortNames = map[string]string{
	"osknode": "OpenstackNode", "osknodes": "OpenstackNode", "occp": "OpenStackCloudConfigurationProfile",
	"kscfg": "KupenstackConfiguration", "osdp": "OpenStackDataPlane", "osdprole": "OpenStackDataPlaneRole",
	"osdpnode": "OpenStackDataPlaneNode", "osdpupdate": "OpenStackDataPlaneUpdate", "osdpd": "OpenStackDataPlaneDeployment", "osdpdeployment": "OpenStackDataPlaneDeployment", "nec": "NovaExternalCompute",
	"ovnmeta": "OVNMetadataAgent", "oss": "OpenStackServer", "osm": "OpenStackMachine", "osc": "OpenStackCluster",
}

// find is the first line (not a reference) of kind and name in the trees.
func find(roots []*Node, kind, name string) *Node {
	for _, n := range roots {
		if n.Kind == kind && n.Name == name && !n.Ref {
			return n
		}
		if f := find(n.Children, kind, name); f != nil {
			return f
		}
	}
	return nil
}
