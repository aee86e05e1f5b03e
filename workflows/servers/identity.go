package servers

import (
	"fmt"

	"go.temporal.io/sdk/workflow"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/activities/openstack"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/workflows/object"
)

// ChangeWaitIdentitySecret is the GetVersion change after which a server, machine or bastion waits for
// its identity Secret before its first OpenStack call; before it, one applied ahead of its Secret (with
// it, or with the control plane that writes it) failed for good with "identity Secret … not found".
const ChangeWaitIdentitySecret = "servers-wait-identity-secret"

// ReasonSecretMissing says a server waits for its identity Secret (or for clouds.yaml in it).
const ReasonSecretMissing = "SecretMissing"

// waitIdentitySecret waits, visibly in Ready (reason SecretMissing, naming the Secret), until the
// identity Secret holds clouds.yaml; then Ready says again that generation gen is acted on.
func waitIdentitySecret(ctx workflow.Context, lc *object.Lifecycle, gen int64, id openstack.Identity) error {
	if workflow.GetVersion(ctx, ChangeWaitIdentitySecret, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	name := id.Namespace + "/" + id.SecretName
	waited, err := object.WaitUntil(ctx, lc, gen, lifecycle.ConditionReady, func(ctx workflow.Context) (bool, string, string, error) {
		var p kube.SecretPresence
		in := kube.SecretCheck{Namespace: id.Namespace, Name: id.SecretName, Keys: []string{openstack.CloudsYAMLKey}}
		if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.CheckSecret, in).Get(ctx, &p); err != nil {
			return false, "", "", fmt.Errorf("check identity Secret %s: %w", name, err)
		}
		switch {
		case !p.Exists:
			return false, ReasonSecretMissing, fmt.Sprintf("waiting for identity Secret %s (it does not exist)", name), nil
		case len(p.Missing) > 0:
			return false, ReasonSecretMissing, fmt.Sprintf("waiting for identity Secret %s to hold key(s) %v", name, p.Missing), nil
		}
		return true, "", "", nil
	}, nil)
	if err != nil {
		return err
	}
	if waited {
		lc.SetCondition(ctx, metav1.Condition{Type: lifecycle.ConditionReady, Status: metav1.ConditionFalse,
			Reason: lifecycle.ReasonReconciling, Message: fmt.Sprintf("acting on generation %d", gen)})
	}
	return nil
}
