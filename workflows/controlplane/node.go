package controlplane

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/api"
	kupenstackv1alpha1 "github.com/stackflow/stackflow/api/kupenstack/v1alpha1"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/workflows/object"
)

// Kubernetes Node labels OpenStack-Helm schedules by; a node's roles follow them until a
// KupenstackConfiguration assigns roles.
const (
	LabelControlPlane = "openstack-control-plane"
	LabelCompute      = "openstack-compute-node"
	LabelEnabled      = "enabled"
)

// Roles of an OpenstackNode: the node types of the API.
const (
	RoleControl = kupenstackv1alpha1.NodeTypeControl
	RoleCompute = kupenstackv1alpha1.NodeTypeCompute
)

// OpenstackNodeRef names the OpenstackNode that belongs to a Kubernetes Node (same name, cluster scoped).
func OpenstackNodeRef(name string) lifecycle.ObjectRef {
	return api.Ref("OpenstackNode", "", name)
}

// NodeWorkflow serves a Kubernetes Node: it makes sure an OpenstackNode of the same name exists, tells it
// when the Node changed (a new derived generation: see lifecycle.AnnotationGeneration) and, when the Node
// is deleted, deletes that OpenstackNode and waits until it is gone before releasing the
// Node.
func NodeWorkflow(ctx workflow.Context, in object.Input) error {
	return object.Run(ctx, in, &nodeReconciler{}, object.Options{NoStatus: true})
}

type nodeReconciler struct{}

// nodeRecord is what the Node workflow remembers: the OpenstackNode it created or adopted.
type nodeRecord struct {
	OpenstackNodeUID string `json:"openstackNodeUID,omitempty"`
}

func (nodeReconciler) Reconcile(ctx workflow.Context, lc *object.Lifecycle, obj *kube.Object) error {
	if err := lc.Step(ctx, "ensure OpenstackNode"); err != nil {
		return err
	}
	var rec nodeRecord
	if err := lc.Load(&rec); err != nil {
		return err
	}
	ref := OpenstackNodeRef(lc.Ref.Name)
	var uid string
	err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.EnsureObject, kube.EnsureInput{
		Ref:    ref,
		Labels: map[string]string{"app.kubernetes.io/managed-by": "stackflow"},
	}).Get(ctx, &uid)
	if err != nil {
		return fmt.Errorf("ensure OpenstackNode %s: %w", ref.Name, err)
	}
	rec.OpenstackNodeUID = uid
	// This Node changed in what its OpenstackNode reports (labels, taints, readiness: the bridge derives
	// the Node's generation from them), so the OpenstackNode reconciles again. Before the OpenstackNode's
	// own workflow first started there is nobody to tell, and nothing to lose.
	ref.UID = uid
	_ = workflow.SignalExternalWorkflow(ctx, lifecycle.WorkflowID(ref), "", lifecycle.SignalRefresh, nil).Get(ctx, nil)
	return lc.Save(rec)
}

func (nodeReconciler) Teardown(ctx workflow.Context, lc *object.Lifecycle) error {
	var rec nodeRecord
	if err := lc.Load(&rec); err != nil {
		return err
	}
	ref := OpenstackNodeRef(lc.Ref.Name)
	// Only the OpenstackNode this workflow created or adopted; an unrecorded one is looked up by name,
	// because the Node may be deleted before its first reconcile finished.
	ref.UID = rec.OpenstackNodeUID
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.DeleteObject, ref).Get(ctx, nil); err != nil {
		return fmt.Errorf("delete OpenstackNode %s: %w", ref.Name, err)
	}
	// The OpenstackNode's own workflow removes its finalizer; wait for that, paced by the retry policy.
	wctx := object.OnKube(ctx, workflow.ActivityOptions{

		StartToCloseTimeout:    15 * time.Second,
		ScheduleToCloseTimeout: 10 * time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: 250 * time.Millisecond, BackoffCoefficient: 1.5, MaximumInterval: 5 * time.Second},
	})
	if err := workflow.ExecuteActivity(wctx, kubeActs.WaitDeleted, ref).Get(ctx, nil); err != nil {
		return fmt.Errorf("wait for OpenstackNode %s to go: %w", ref.Name, err)
	}
	return nil
}

// Values of an OpenstackNode's status.status column, as the API declares them.
const (
	NodeStatusReady    = kupenstackv1alpha1.NodeStatusReady
	NodeStatusNotReady = kupenstackv1alpha1.NodeStatusNotReady
	NodeStatusMissing  = kupenstackv1alpha1.NodeStatusMissing
	NodeStatusDisabled = kupenstackv1alpha1.NodeStatusDisabled
)

// OpenstackNodeWorkflow serves an OpenstackNode: it reports the state of its Kubernetes Node, its roles
// and its profile in the object's status.
func OpenstackNodeWorkflow(ctx workflow.Context, in object.Input) error {
	return object.Run(ctx, in, &openstackNodeReconciler{}, object.Options{})
}

type openstackNodeReconciler struct{}

func (openstackNodeReconciler) Reconcile(ctx workflow.Context, lc *object.Lifecycle, obj *kube.Object) error {
	var spec kupenstackv1alpha1.OpenstackNodeSpec
	if len(obj.Spec) > 0 {
		if err := json.Unmarshal(obj.Spec, &spec); err != nil {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("spec of %s: %v", lc.Ref, err), lifecycle.ReasonInvalidSpec, err)
		}
	}
	if err := lc.Step(ctx, "read Kubernetes Node"); err != nil {
		return err
	}
	var node kube.NodeInfo
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.GetNode, lc.Ref.Name).Get(ctx, &node); err != nil {
		return fmt.Errorf("read node %s: %w", lc.Ref.Name, err)
	}
	st := PlanOpenstackNodeStatus(spec, node)
	for _, f := range []struct {
		key   string
		value any
	}{{"status", st.Status}, {"roles", st.Roles}, {"roleNames", strings.Join(st.Roles, ",")}, {"profile", st.Profile}} {
		if err := lc.SetField(ctx, f.key, f.value); err != nil {
			return err
		}
	}
	lc.SetCondition(ctx, metav1.Condition{Type: "NodeReady", Status: object.BoolCondition(st.Status == NodeStatusReady), Reason: st.Status, Message: st.Message})
	// Control-plane rollouts: a node given a type or disabled by a KupenstackConfiguration gets its
	// OpenStack-Helm labels (all removed when disabled), and a node with a profile its desired
	// configuration (see profile.go and configuration.go).
	return configureNode(ctx, lc, spec, st, node)
}

// ChangeReleaseNodeLabels is the GetVersion change after which a deleted OpenstackNode gives its Node back
// the role labels the site had set (kube.AnnotationSiteRoleLabels).
const ChangeReleaseNodeLabels = "openstacknode-release-labels"

func (openstackNodeReconciler) Teardown(ctx workflow.Context, lc *object.Lifecycle) error {
	if workflow.GetVersion(ctx, ChangeReleaseNodeLabels, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	// A teardown shows its step (lc.Step refuses during deletion).
	lc.ShowStep(ctx, stepRestoreLabels)
	return restoreNodeLabels(ctx, lc)
}

const stepRestoreLabels = "give Kubernetes Node its site's labels back"

// restoreNodeLabels gives the Node back the role labels its site had set, when stackflow changed them.
func restoreNodeLabels(ctx workflow.Context, lc *object.Lifecycle) error {
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.SetNodeLabels,
		kube.NodeLabelsInput{Node: lc.Ref.Name, Remove: ManagedNodeLabels(), Restore: true}).Get(ctx, nil); err != nil {
		return fmt.Errorf("restore the labels of node %s: %w", lc.Ref.Name, err)
	}
	return nil
}

// OpenstackNodeStatus is the kind-specific status of an OpenstackNode.
type OpenstackNodeStatus struct {
	Status  string
	Roles   []string
	Profile string
	Message string
}

// PlanOpenstackNodeStatus derives an OpenstackNode's status from its spec and its Kubernetes Node: a
// type in the spec wins; otherwise the roles follow the OpenStack-Helm labels the site gave the Node.
func PlanOpenstackNodeStatus(spec kupenstackv1alpha1.OpenstackNodeSpec, node kube.NodeInfo) OpenstackNodeStatus {
	st := OpenstackNodeStatus{Profile: spec.Profile, Roles: []string{}}
	switch {
	case spec.Type != "":
		st.Roles = append(st.Roles, spec.Type)
	default:
		// The site's labels: those stackflow set for a configuration that no longer types this node
		// are not roles (they are being removed).
		labels := node.Labels
		if node.RoleLabelsManaged {
			labels = node.SiteRoleLabels
		}
		if labels[LabelControlPlane] == LabelEnabled {
			st.Roles = append(st.Roles, RoleControl)
		}
		if labels[LabelCompute] == LabelEnabled {
			st.Roles = append(st.Roles, RoleCompute)
		}
	}
	slices.Sort(st.Roles)
	switch {
	case spec.Disabled:
		st.Status, st.Message = NodeStatusDisabled, "disabled by configuration"
	case !node.Exists:
		st.Status, st.Message = NodeStatusMissing, "no Kubernetes Node of this name"
	case !node.Ready:
		st.Status, st.Message = NodeStatusNotReady, "the Kubernetes Node is not Ready"
	default:
		st.Status, st.Message = NodeStatusReady, "the Kubernetes Node is Ready"
	}
	return st
}
