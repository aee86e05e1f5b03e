package controlplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/api"
	kupenstackv1alpha1 "github.com/stackflow/stackflow/api/kupenstack/v1alpha1"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/workflows/object"
)

// ProfileRef names an OpenStackCloudConfigurationProfile (cluster scoped).
func ProfileRef(name string) lifecycle.ObjectRef {
	return api.Ref("OpenStackCloudConfigurationProfile", "", name)
}

// KupenstackConfigurationRef names a KupenstackConfiguration (cluster scoped).
func KupenstackConfigurationRef(name string) lifecycle.ObjectRef {
	return api.Ref("KupenstackConfiguration", "", name)
}

// loadProfile reads a profile and its ancestors and merges them. override, when set, stands in for the
// profile of that name (a preview of an edit). Errors a person must fix (a missing profile, a cycle) are
// non-retryable application errors whose type is the condition reason.
func loadProfile(ctx workflow.Context, name string, override *NamedProfile) (chain []string, merged map[string]ComponentProfile, err error) {
	read := map[string]ProfileSpec{}
	if override != nil {
		read[override.Name] = override.Spec
	}
	for {
		chain, next, err := ProfileChain(name, read)
		if err != nil {
			return nil, nil, profileFailure(err)
		}
		if next == "" {
			specs := make([]ProfileSpec, len(chain))
			for i, n := range chain {
				specs[i] = read[n]
			}
			return chain, MergeProfiles(specs), nil
		}
		var obj kube.Object
		if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.GetObject, ProfileRef(next)).Get(ctx, &obj); err != nil {
			return nil, nil, fmt.Errorf("read profile %s: %w", next, err)
		}
		if !obj.Exists {
			msg := fmt.Sprintf("profile %s does not exist", next)
			if next != name {
				msg = fmt.Sprintf("profile %s inherits from %s, which does not exist", chain[len(chain)-1], next)
			}
			return nil, nil, temporal.NewNonRetryableApplicationError(msg, ReasonProfileMissing, nil)
		}
		var spec ProfileSpec
		if len(obj.Spec) > 0 {
			if err := json.Unmarshal(obj.Spec, &spec); err != nil {
				return nil, nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("spec of profile %s: %v", next, err), lifecycle.ReasonInvalidSpec, err)
			}
		}
		read[next] = spec
	}
}

// renderProfile loads, merges and renders a profile over the control-plane graph.
func renderProfile(ctx workflow.Context, name string, override *NamedProfile) ([]string, map[string]RenderedComponent, error) {
	chain, merged, err := loadProfile(ctx, name, override)
	if err != nil {
		return nil, nil, err
	}
	rendered, err := RenderComponents(ControlPlane, merged)
	if err != nil {
		return nil, nil, profileFailure(fmt.Errorf("profile %s: %w", name, err))
	}
	return chain, rendered, nil
}

// profileFailure turns a ProfileError into a non-retryable application error whose type is its reason,
// so the object's Ready condition carries it.
func profileFailure(err error) error {
	var pe *ProfileError
	if errors.As(err, &pe) {
		return temporal.NewNonRetryableApplicationError(err.Error(), pe.Reason, nil)
	}
	return err
}

// ProfileWorkflow serves an OpenStackCloudConfigurationProfile: it validates the profile with its
// ancestors (a cycle, an unknown component or a snippet that does not parse is a condition, never a
// crash), reports how many nodes follow it, and when what it renders to changes it asks every
// KupenstackConfiguration and OpenstackNode to reconcile again (lifecycle.SignalRefresh), which rolls out only
// what changed.
func ProfileWorkflow(ctx workflow.Context, in object.Input) error {
	return object.Run(ctx, in, &profileReconciler{}, object.Options{})
}

type profileReconciler struct{}

// profileRecord is what a profile workflow remembers: the hashes it last announced.
type profileRecord struct {
	Hashes map[string]string `json:"hashes,omitempty"`
}

func (profileReconciler) Reconcile(ctx workflow.Context, lc *object.Lifecycle, obj *kube.Object) error {
	var spec ProfileSpec
	if len(obj.Spec) > 0 {
		if err := json.Unmarshal(obj.Spec, &spec); err != nil {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("spec of %s: %v", lc.Ref, err), lifecycle.ReasonInvalidSpec, err)
		}
	}
	if err := lc.Step(ctx, "validate profile"); err != nil {
		return err
	}
	chain, rendered, err := renderProfile(ctx, lc.Ref.Name, &NamedProfile{Name: lc.Ref.Name, Spec: spec})
	if err != nil {
		lc.SetCondition(ctx, metav1.Condition{Type: "Valid", Status: metav1.ConditionFalse, Reason: object.FailureReason(err), Message: object.FailureMessage(err)})
		return err
	}
	lc.SetCondition(ctx, metav1.Condition{Type: "Valid", Status: metav1.ConditionTrue, Reason: "Rendered",
		Message: fmt.Sprintf("inherits %v; %d components enabled", chain, countEnabled(rendered))})

	if err := lc.Step(ctx, "notify configurations and nodes"); err != nil {
		return err
	}
	var rec profileRecord
	if err := lc.Load(&rec); err != nil {
		return err
	}
	hashes := map[string]string{}
	//workflowcheck:ignore -- reviewed: the result does not depend on the map's order
	for name, r := range rendered {
		if r.Enabled {
			hashes[name] = r.ValuesHash
		}
	}
	var nodes []kube.ListedObject
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.ListObjects, kube.ListInput{Ref: OpenstackNodeRef("")}).Get(ctx, &nodes); err != nil {
		return fmt.Errorf("list OpenstackNodes: %w", err)
	}
	following := 0
	for _, n := range nodes {
		var ns kupenstackv1alpha1.OpenstackNodeSpec
		_ = json.Unmarshal(n.Spec, &ns)
		if ns.Profile == lc.Ref.Name {
			following++
		}
	}
	if err := lc.SetField(ctx, "nodes", following); err != nil {
		return err
	}
	if maps.Equal(hashes, rec.Hashes) {
		return nil
	}
	var configs []kube.ListedObject
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.ListObjects, kube.ListInput{Ref: KupenstackConfigurationRef("")}).Get(ctx, &configs); err != nil {
		return fmt.Errorf("list KupenstackConfigurations: %w", err)
	}
	// Every configuration and node is told; one that does not use this profile renders the same values
	// and does nothing. A workflow that does not run yet reads the profile when it starts.
	var futures []workflow.Future
	for _, o := range append(configs, nodes...) {
		futures = append(futures, workflow.SignalExternalWorkflow(ctx, lifecycle.WorkflowID(o.Ref), "", lifecycle.SignalRefresh, nil))
	}
	for _, f := range futures {
		_ = f.Get(ctx, nil)
	}
	rec.Hashes = hashes
	return lc.Save(rec)
}

func (profileReconciler) Teardown(workflow.Context, *object.Lifecycle) error { return nil }

func countEnabled(rendered map[string]RenderedComponent) int {
	n := 0
	for _, name := range workflow.DeterministicKeys(rendered) {
		if rendered[name].Enabled {
			n++
		}
	}
	return n
}

// configureNode labels a managed node for OpenStack-Helm scheduling and writes its
// status.desiredNodeConfiguration from its profile. A node is managed once a KupenstackConfiguration
// gave it a type or disabled it; an unmanaged node's labels are left as people set them, and a node no
// longer managed gets back those its site had set.
func configureNode(ctx workflow.Context, lc *object.Lifecycle, spec kupenstackv1alpha1.OpenstackNodeSpec, st OpenstackNodeStatus, node kube.NodeInfo) error {
	if (spec.Type != "" || spec.Disabled) && node.Exists {
		if err := lc.Step(ctx, "label Kubernetes Node"); err != nil {
			return err
		}
		set := map[string]string{}
		if !spec.Disabled {
			set = NodeLabels(st.Roles)
		}
		var remove []string
		for _, l := range ManagedNodeLabels() {
			if _, keep := set[l]; !keep {
				remove = append(remove, l)
			}
		}
		if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.SetNodeLabels,
			kube.NodeLabelsInput{Node: lc.Ref.Name, Set: set, Remove: remove, Manage: true}).Get(ctx, nil); err != nil {
			return fmt.Errorf("label node %s: %w", lc.Ref.Name, err)
		}
	} else if node.RoleLabelsManaged {
		// No configuration types or disables this node any more: the site's labels come back.
		if err := lc.Step(ctx, stepRestoreLabels); err != nil {
			return err
		}
		if err := restoreNodeLabels(ctx, lc); err != nil {
			return err
		}
	}
	if spec.Profile == "" {
		return lc.SetField(ctx, "desiredNodeConfiguration", nil)
	}
	if err := lc.Step(ctx, "render profile "+spec.Profile); err != nil {
		return err
	}
	_, rendered, err := renderProfile(ctx, spec.Profile, nil)
	if err != nil {
		lc.SetCondition(ctx, metav1.Condition{Type: "ProfileValid", Status: metav1.ConditionFalse, Reason: object.FailureReason(err), Message: object.FailureMessage(err)})
		return err
	}
	lc.SetCondition(ctx, metav1.Condition{Type: "ProfileValid", Status: metav1.ConditionTrue, Reason: "Rendered", Message: "profile " + spec.Profile + " renders"})
	return lc.SetField(ctx, "desiredNodeConfiguration", DesiredNodeConfiguration(ControlPlane, spec.Profile, st.Roles, spec.Disabled, rendered))
}
