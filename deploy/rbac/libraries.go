package rbac

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/stackflow/stackflow/api"
	"github.com/stackflow/stackflow/bridge"
	"github.com/stackflow/stackflow/deploy/charts"
)

// Kind is a resource the code addresses without a typed client.
type Kind struct {
	Group, Resource string
	ClusterScoped   bool
	// Status is true when stackflow owns the kind's status subresource.
	Status bool
}

func (k Kind) scope() Scope {
	if k.ClusterScoped {
		return Cluster
	}
	return Watched
}

func union(a, b []Kind) []Kind {
	out := slices.Clone(a)
	for _, k := range b {
		if !slices.ContainsFunc(out, func(x Kind) bool { return x.Group == k.Group && x.Resource == k.Resource }) {
			out = append(out, k)
		}
	}
	return out
}

// Resources are the resource sets of the calls whose resource is a value, not a type.
type Resources struct {
	// Served are the kinds the bridge can watch (bridge.Served): its metadata informers and patches, and
	// the objects the workflows read.
	Served []Kind
	// Own are stackflow's custom resource kinds (api.Kinds), which workflows create, update, delete and
	// report status on.
	Own []Kind
	// Releases are the kinds the OpenStack Helm releases are made of: those the charts in deploy/charts
	// render. A cluster whose charts hold more kinds adds them in the chart's values.
	Releases []Kind
}

// CodeResources reads the resource sets from the code's tables and the charts under chartsDir.
func CodeResources(chartsDir string) (Resources, error) {
	var r Resources
	for _, k := range bridge.Served {
		r.Served = append(r.Served, Kind{Group: k.GVR.Group, Resource: k.GVR.Resource, ClusterScoped: k.ClusterScoped})
	}
	for _, k := range api.Kinds {
		r.Own = append(r.Own, Kind{Group: k.GVK.Group, Resource: k.Resource, ClusterScoped: k.ClusterScoped, Status: true})
	}
	rel, err := chartKinds(chartsDir)
	if err != nil {
		return r, err
	}
	r.Releases = rel
	return r, nil
}

// chartKinds renders every chart in dir with its default values and returns the kinds of what they make.
func chartKinds(dir string) ([]Kind, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []Kind
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		ch, err := charts.Load(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("chart %s: %w", e.Name(), err)
		}
		vals, err := chartutil.ToRenderValues(ch, map[string]any{}, chartutil.ReleaseOptions{Name: e.Name(), Namespace: "openstack"}, chartutil.DefaultCapabilities)
		if err != nil {
			return nil, fmt.Errorf("chart %s: %w", e.Name(), err)
		}
		files, err := engine.Render(ch, vals)
		if err != nil {
			return nil, fmt.Errorf("render chart %s: %w", e.Name(), err)
		}
		for name, body := range files {
			if !strings.HasSuffix(name, ".yaml") {
				continue
			}
			for _, doc := range releaseutil.SplitManifests(body) {
				var head struct {
					APIVersion string `json:"apiVersion"`
					Kind       string `json:"kind"`
				}
				if err := yaml.Unmarshal([]byte(doc), &head); err != nil || head.Kind == "" {
					continue
				}
				gv, err := schema.ParseGroupVersion(head.APIVersion)
				if err != nil {
					return nil, fmt.Errorf("chart %s %s: %w", e.Name(), name, err)
				}
				plural, _ := meta.UnsafeGuessKindToResource(gv.WithKind(head.Kind))
				out = union(out, []Kind{{Group: gv.Group, Resource: plural.Resource}})
			}
		}
	}
	return out, nil
}

// library describes the API requests a library makes on the code's behalf when the code uses symbol.
type library struct {
	why   string
	rules func(Resources, rules)
}

// libraries are the libraries that call the API server themselves, keyed by the symbol whose use brings
// their requests in, with what their own code does (read there, client-go v0.34 and Helm v3.19).
var libraries = map[string]library{
	"k8s.io/client-go/tools/leaderelection/resourcelock.LeaseLock": {
		why: "LeaseLock Get, Create and Update the leader-election Lease (resourcelock/leaselock.go)",
		rules: func(_ Resources, rs rules) {
			rs.add(Release, "coordination.k8s.io", "leases", "get", "create", "update")
		},
	},
	"k8s.io/client-go/tools/record.NewBroadcaster": {
		why: "the event recorder creates Events and patches repeated ones (record/event.go recordEvent)",
		rules: func(_ Resources, rs rules) {
			rs.add(Watched, "", "events", "create", "patch")
		},
	},
	"k8s.io/client-go/tools/record.NewBroadcasterWithCorrelatorOptions": {
		why: "the event recorder creates Events and patches repeated ones (record/event.go recordEvent)",
		rules: func(_ Resources, rs rules) {
			rs.add(Watched, "", "events", "create", "patch")
		},
	},
	"k8s.io/client-go/metadata/metadatainformer.NewSharedInformerFactory":              informers,
	"k8s.io/client-go/metadata/metadatainformer.NewFilteredSharedInformerFactory":      informers,
	"k8s.io/client-go/dynamic/dynamicinformer.NewDynamicSharedInformerFactory":         informers,
	"k8s.io/client-go/dynamic/dynamicinformer.NewFilteredDynamicSharedInformerFactory": informers,
	"(*helm.sh/helm/v3/pkg/action.Configuration).Init": {
		why: "Helm's Secret storage driver gets, lists, creates, updates and deletes release records (storage/driver/secrets.go)",
		rules: func(_ Resources, rs rules) {
			rs.add(HelmReleases, "", "secrets", "get", "list", "create", "update", "delete")
		},
	},
	"helm.sh/helm/v3/pkg/action.NewInstall": {
		why: "install checks for existing objects, creates them, creates the namespace when asked, and runs the chart's hooks (action/install.go, kube/client.go)",
		rules: func(res Resources, rs rules) {
			for _, k := range res.Releases {
				rs.add(HelmReleases, k.Group, k.Resource, "get", "create")
			}
			rs.add(Cluster, "", "namespaces", "create")
			hooks(res, rs)
		},
	},
	"helm.sh/helm/v3/pkg/action.NewUpgrade": {
		why: "upgrade gets each object, creates new ones, patches changed ones and deletes dropped ones (kube/client.go Update)",
		rules: func(res Resources, rs rules) {
			for _, k := range res.Releases {
				rs.add(HelmReleases, k.Group, k.Resource, "get", "create", "patch", "delete")
			}
			hooks(res, rs)
		},
	},
	"helm.sh/helm/v3/pkg/action.NewRollback": {
		why: "rollback updates to an earlier revision like an upgrade (action/rollback.go)",
		rules: func(res Resources, rs rules) {
			for _, k := range res.Releases {
				rs.add(HelmReleases, k.Group, k.Resource, "get", "create", "patch", "delete")
			}
			hooks(res, rs)
		},
	},
	"helm.sh/helm/v3/pkg/action.NewUninstall": {
		why: "uninstall deletes the release's objects (kube/client.go Delete)",
		rules: func(res Resources, rs rules) {
			for _, k := range res.Releases {
				rs.add(HelmReleases, k.Group, k.Resource, "delete")
			}
			hooks(res, rs)
		},
	},
	"helm.sh/helm/v3/pkg/kube.NewReadyChecker": {
		why: "the ready checker gets each object and lists a Deployment's ReplicaSets (kube/ready.go)",
		rules: func(res Resources, rs rules) {
			for _, k := range res.Releases {
				rs.add(HelmReleases, k.Group, k.Resource, "get")
				if k.Group == "apps" && k.Resource == "deployments" {
					rs.add(HelmReleases, "apps", "replicasets", "list")
				}
			}
		},
	},
}

// hooks: every Helm action runs the chart's hooks of its kind, creating each hook object and, for a Job or
// a Pod, waiting for it with a list-watch on its name (action/hooks.go execHook, kube/client.go
// watchUntilReady); the hook objects' create and delete come with the action's own rules.
func hooks(res Resources, rs rules) {
	for _, k := range res.Releases {
		if (k.Group == "batch" && k.Resource == "jobs") || (k.Group == "" && k.Resource == "pods") {
			rs.add(HelmReleases, k.Group, k.Resource, "list", "watch")
		}
	}
}

// informers: metadata and dynamic informers list and watch each resource they are asked for
// (metadatainformer/informer.go, dynamicinformer/informer.go); the bridge asks for the served kinds.
var informers = library{
	why: "metadata informers list and watch each resource they are asked for",
	rules: func(res Resources, rs rules) {
		for _, k := range res.Served {
			rs.add(k.scope(), k.Group, k.Resource, "list", "watch")
		}
	},
}

// bestEffort are functions whose API calls the chart does not grant on purpose: the code goes on
// without them. Each must still exist and make calls, or the entry is stale.
var bestEffort = map[string]string{
	"(*" + Module + "/bridge.Bridge).ensureLeaseNamespace": "creates the Lease's namespace for `make run`; the chart's namespace exists and the bridge goes on without the right",
}
