package dataplane

import (
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/activities/kube"
	dataplanev1beta1 "github.com/stackflow/stackflow/api/dataplane/v1beta1"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/workflows/object"
)

// OpenStackDataPlaneRoleWorkflow serves an OpenStackDataPlaneRole. A role deploys nothing itself: on
// every later generation it asks its nodes' workflows to reconcile again (refresh), so a changed
// nodeTemplate reaches every node's inventory, service CRs and, when the effective configuration
// changed, phase 0; and it lists its nodes in status. (Annotations do not change a generation: the cell
// annotation cannot change anyway, and a changed agent annotation reaches a node with its next
// reconcile.)
func OpenStackDataPlaneRoleWorkflow(ctx workflow.Context, in object.Input) error {
	return object.Run(ctx, in, &edpmRoleReconciler{}, object.Options{})
}

type edpmRoleReconciler struct{}

func (edpmRoleReconciler) Reconcile(ctx workflow.Context, lc *object.Lifecycle, obj *kube.Object) error {
	if err := lc.Step(ctx, "refresh the role's nodes"); err != nil {
		return err
	}
	var all []kube.ListedObject
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.ListObjects, kube.ListInput{Ref: DataPlaneNodeRef(lc.Ref.Namespace, "")}).Get(ctx, &all); err != nil {
		return fmt.Errorf("list nodes of %s: %w", lc.Ref, err)
	}
	names := []string{}
	ready := 0
	for _, o := range all {
		var spec dataplanev1beta1.OpenStackDataPlaneNodeSpec
		if json.Unmarshal(o.Spec, &spec) != nil || spec.Role != lc.Ref.Name || o.Deleting {
			continue
		}
		names = append(names, o.Ref.Name)
		ref := DataPlaneNodeRef(lc.Ref.Namespace, o.Ref.Name)
		ref.UID = o.Ref.UID
		// A node reads its role when it reconciles: only a changed role (a later generation) has news
		// for nodes that already did. A node whose workflow is not running yet reads it when it starts.
		if obj.Generation > 1 {
			_ = workflow.SignalExternalWorkflow(ctx, lifecycle.WorkflowID(ref), "", lifecycle.SignalRefresh, nil).Get(ctx, nil)
		}
		var st kube.ObjectStatus
		if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.GetObjectStatus, kube.StatusInput{Ref: ref, Fields: []string{"deployed"}}).Get(ctx, &st); err == nil && string(st.Fields["deployed"]) == "true" {
			ready++
		}
	}
	_ = lc.SetField(ctx, "nodes", names)
	_ = lc.SetField(ctx, "readyNodes", ready)
	return nil
}

func (edpmRoleReconciler) Teardown(workflow.Context, *object.Lifecycle) error { return nil }
