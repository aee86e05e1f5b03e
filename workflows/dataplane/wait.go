package dataplane

import (
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/api"
	dataplanev1beta1 "github.com/stackflow/stackflow/api/dataplane/v1beta1"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/workflows/object"
)

// Reasons of the data-plane conditions (besides the API's).
const (
	ReasonWaitingForSecret     = "WaitingForSecret"
	ReasonWaitingForRole       = "WaitingForRole"
	ReasonWaitingForDataPlane  = "WaitingForDataPlane"
	ReasonWaitingForServices   = "WaitingForServices"
	ReasonWaitingForCompute    = "WaitingForComputeRegistration"
	ReasonWaitingForComputeAPI = "WaitingForComputeAPI"
	ReasonWaitingForInstances  = "WaitingForInstances"
	ReasonDeployHeld           = "DeployHeld"
	ReasonSuperseded           = object.ReasonSuperseded
	ReasonStepFailed           = "StepFailed"
	ReasonNodesFailed          = "NodesFailed"
	ReasonCustomServiceConfig  = "InvalidCustomServiceConfig"
	ConditionDeployed          = "Deployed"
	ConditionSSHKeyReady       = "SSHKeyReady"
	ConditionAgentDeployed     = "AgentDeployed"
	conditionDataPlaneAdmitted = "DataPlaneAdmitted"
)

// AnsibleActivity routes a playbook run to the Ansible queue: heartbeats every few seconds let a crashed
// worker's run be retried elsewhere within the heartbeat timeout; an unreachable host is retried with
// backoff a few times, then the step fails with Ansible's message.
func AnsibleActivity(ctx workflow.Context) workflow.Context {
	return object.OnAnsible(ctx, workflow.ActivityOptions{

		StartToCloseTimeout: 30 * time.Minute,
		HeartbeatTimeout:    30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    5 * time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
			MaximumAttempts:    5,
		},
	})
}

// BaremetalActivity routes Ironic provisioning to the OpenStack queue; it heartbeats while it waits.
func BaremetalActivity(ctx workflow.Context) workflow.Context {
	return object.OnOpenStack(ctx, workflow.ActivityOptions{

		StartToCloseTimeout: time.Hour,
		HeartbeatTimeout:    30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    2 * time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
			MaximumAttempts:    10,
		},
	})
}

// registrationActivity paces the wait for a compute service to show up in Nova through the retry
// policy; after within it gives up.
func registrationActivity(ctx workflow.Context, within time.Duration) workflow.Context {
	return object.OnOpenStack(ctx, workflow.ActivityOptions{

		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: within,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    2 * time.Second,
			BackoffCoefficient: 1.5,
			MaximumInterval:    10 * time.Second,
		},
	})
}

// computeAPIActivity waits for the compute API with no deadline (the control plane may come up much
// later), polling at most every 30 s; the retries add nothing to the history.
func computeAPIActivity(ctx workflow.Context) workflow.Context {
	return object.OnOpenStack(ctx, workflow.ActivityOptions{

		StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    2 * time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
		},
	})
}

// errSuperseded ends a reconcile whose generation a newer one replaced while it waited.
func errSuperseded(gen, desired int64) error { return object.Superseded(gen, desired) }

// waitUntil is object.WaitUntil for the data plane's waits, which a preview never does: it returns what
// is missing instead.
func waitUntil(ctx workflow.Context, lc *object.Lifecycle, gen int64, condType string, check object.WaitCheck) error {
	_, err := object.WaitUntil(ctx, lc, gen, condType, check, func(ctx workflow.Context, msg string) error {
		if isPreview(ctx) {
			return fmt.Errorf("not ready: %s", msg)
		}
		return nil
	})
	return err
}

// waitSecret waits until the Secret exists with keys, naming it in the condition while it does not.
func waitSecret(ctx workflow.Context, lc *object.Lifecycle, gen int64, condType, namespace, name string, keys ...string) error {
	return waitSecretFrom(ctx, lc, gen, condType, namespace, name, nil, keys...)
}

// waitSecretFrom is waitSecret whose first look is first (a checkSecret started earlier) when not nil.
func waitSecretFrom(ctx workflow.Context, lc *object.Lifecycle, gen int64, condType, namespace, name string, first workflow.Future, keys ...string) error {
	return waitUntil(ctx, lc, gen, condType, func(ctx workflow.Context) (bool, string, string, error) {
		look := take(&first)
		if look == nil {
			look = checkSecret(ctx, namespace, name, keys...)
		}
		var p kube.SecretPresence
		if err := look.Get(ctx, &p); err != nil {
			return false, "", "", fmt.Errorf("check Secret %s/%s: %w", namespace, name, err)
		}
		switch {
		case !p.Exists:
			return false, ReasonWaitingForSecret, fmt.Sprintf("waiting for Secret %s/%s (it does not exist)", namespace, name), nil
		case len(p.Missing) > 0:
			return false, ReasonWaitingForSecret, fmt.Sprintf("waiting for Secret %s/%s to hold key(s) %v", namespace, name, p.Missing), nil
		}
		return true, "", "", nil
	})
}

// checkSecret starts a look at whether a Secret exists with keys.
func checkSecret(ctx workflow.Context, namespace, name string, keys ...string) workflow.Future {
	return workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.CheckSecret, kube.SecretCheck{Namespace: namespace, Name: name, Keys: keys})
}

// DataPlaneNodeRef names an OpenStackDataPlaneNode (any UID).
func DataPlaneNodeRef(namespace, name string) lifecycle.ObjectRef {
	return api.Ref("OpenStackDataPlaneNode", namespace, name)
}

// DataPlaneRoleRef names an OpenStackDataPlaneRole (any UID).
func DataPlaneRoleRef(namespace, name string) lifecycle.ObjectRef {
	return api.Ref("OpenStackDataPlaneRole", namespace, name)
}

// DataPlaneRef names an OpenStackDataPlane (any UID).
func DataPlaneRef(namespace, name string) lifecycle.ObjectRef {
	return api.Ref("OpenStackDataPlane", namespace, name)
}

// NovaCellRef names a NovaCell (any UID).
func NovaCellRef(namespace, name string) lifecycle.ObjectRef {
	return api.Ref("NovaCell", namespace, name)
}

// waitNodeInfrastructure waits until the data-plane node finished phase 0 (InfrastructureReady), naming
// the node in the condition while it has not.
func waitNodeInfrastructure(ctx workflow.Context, lc *object.Lifecycle, gen int64, condType, namespace, node string) error {
	return waitUntil(ctx, lc, gen, condType, func(ctx workflow.Context) (bool, string, string, error) {
		var st kube.ObjectStatus
		ref := DataPlaneNodeRef(namespace, node)
		if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.GetObjectStatus, kube.StatusInput{Ref: ref}).Get(ctx, &st); err != nil {
			return false, "", "", fmt.Errorf("read %s: %w", ref, err)
		}
		if !st.Exists {
			return false, dataplanev1beta1.ReasonWaitingForPhase, fmt.Sprintf("waiting for OpenStackDataPlaneNode %s (it does not exist)", node), nil
		}
		for _, c := range st.Conditions {
			if c.Type == dataplanev1beta1.ConditionInfrastructureReady && c.Status == metav1.ConditionTrue {
				return true, "", "", nil
			}
		}
		return false, dataplanev1beta1.ReasonWaitingForPhase, fmt.Sprintf("waiting for OpenStackDataPlaneNode %s to finish phase 0 (condition %s)", node, dataplanev1beta1.ConditionInfrastructureReady), nil
	})
}

// isSpecError reports whether err is a refused specification (no retry can help until it changes).
func isSpecError(err error) bool {
	var se *EDPMSpecError
	return errors.As(err, &se)
}

// specError turns an EDPMSpecError into a non-retryable failure with reason.
func specError(reason string, err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), reason, err)
}

// previewKey marks the context of a preview, which never waits (waitUntil returns what is missing).
type previewKey struct{}

func previewing(ctx workflow.Context) workflow.Context {
	return workflow.WithValue(ctx, previewKey{}, true)
}

func isPreview(ctx workflow.Context) bool { v, _ := ctx.Value(previewKey{}).(bool); return v }
