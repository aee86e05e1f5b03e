package nova

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/activities/database"
	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/activities/messagebus"
	"github.com/stackflow/stackflow/activities/openstack"
	"github.com/stackflow/stackflow/api"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/workflows/object"
)

// Activities the family calls, named through nil receivers; the worker registers the real structs.
var (
	kubeActs *kube.Kube
	dbs      *database.Database
	buses    *messagebus.MessageBus
	osActs   *openstack.OpenStack
)

// Workflows lists the family's workflows by type name (the Kind each serves).
func Workflows() []object.Definition {
	// Every one auto-upgrades (see object.Definition): each lives as long as its object (a control
	// plane runs for years) and the chart replaces workers in place, so no build outlives its pods to
	// finish a pinned run.
	auto := workflow.VersioningBehaviorAutoUpgrade
	return []object.Definition{
		{Name: KindNova, Fn: NovaWorkflow, Versioning: auto},
		{Name: KindNovaCell, Fn: NovaCellWorkflow, Versioning: auto},
		{Name: KindNovaAPI, Fn: NovaAPIWorkflow, Versioning: auto},
		{Name: KindNovaScheduler, Fn: NovaSchedulerWorkflow, Versioning: auto},
		{Name: KindNovaConductor, Fn: NovaConductorWorkflow, Versioning: auto},
		{Name: KindNovaMetadata, Fn: NovaMetadataWorkflow, Versioning: auto},
		{Name: KindNovaNoVNCProxy, Fn: NovaNoVNCProxyWorkflow, Versioning: auto},
	}
}

// The kinds of the family.
const (
	KindNova           = "Nova"
	KindNovaCell       = "NovaCell"
	KindNovaAPI        = "NovaAPI"
	KindNovaScheduler  = "NovaScheduler"
	KindNovaConductor  = "NovaConductor"
	KindNovaMetadata   = "NovaMetadata"
	KindNovaNoVNCProxy = "NovaNoVNCProxy"
)

// novaRef names an object of the family.
func novaRef(kind, ns, name string) lifecycle.ObjectRef { return api.Ref(kind, ns, name) }

func deploymentRef(ns, name string) lifecycle.ObjectRef {
	return lifecycle.ObjectRef{Group: "apps", Version: "v1", Kind: "Deployment", Resource: "deployments", Namespace: ns, Name: name}
}

func serviceRef(ns, name string) lifecycle.ObjectRef {
	return lifecycle.ObjectRef{Version: "v1", Kind: "Service", Resource: "services", Namespace: ns, Name: name}
}

func jobRef(ns, name string) lifecycle.ObjectRef {
	return lifecycle.ObjectRef{Group: "batch", Version: "v1", Kind: "Job", Resource: "jobs", Namespace: ns, Name: name}
}

func configMapRef(ns, name string) lifecycle.ObjectRef {
	return lifecycle.ObjectRef{Version: "v1", Kind: "ConfigMap", Resource: "configmaps", Namespace: ns, Name: name}
}

// owner is the owner reference of what an object's workflow creates.
func owner(ref lifecycle.ObjectRef) *kube.Owner {
	return &kube.Owner{APIVersion: ref.APIVersion(), Kind: ref.Kind, Name: ref.Name, UID: ref.UID}
}

// Reasons of the family's conditions (besides the API's).
const (
	ReasonSecretMissing      = "SecretMissing"
	ReasonInvalidSpec        = "InvalidSpec"
	ReasonUnknownCell        = "UnknownCell"
	ReasonCellNameConflict   = "CellNameConflict"
	ReasonCellRemovalBlocked = "CellRemovalBlocked"
	ReasonJobFailed          = "JobFailed"
	ReasonWaiting            = "Waiting"
	ConditionInputsReady     = "InputsReady"
	ConditionDatabaseReady   = "DatabaseReady"
	ConditionMessageBusReady = "MessageBusReady"
	ConditionCellsReady      = "CellsReady"
	ConditionServicesReady   = "ServicesReady"
	ConditionFlavorsReady    = "FlavorsReady"
)

// specError is a spec the workflow refuses: the reconcile fails with it until the spec changes.
func specError(reason, msg string) error {
	return temporal.NewNonRetryableApplicationError(msg, reason, nil)
}

// waitActivity paces an activity that fails retryably until something is ready (a Job, a rollout),
// giving up after within.
func waitActivity(ctx workflow.Context, within time.Duration) workflow.Context {
	return object.OnKube(ctx, workflow.ActivityOptions{

		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: within,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 1.5,
			MaximumInterval:    5 * time.Second,
		},
	})
}

// ChangeShowPodTrouble is the GetVersion change after which a wait for a Deployment's rollout or a Job
// runs in rounds of waitRound and, between rounds, shows why it is not done, with the pod, container and
// reason its pods give (ErrImagePull, ImagePullBackOff, CrashLoopBackOff, …), in the waited-for
// condition and in Ready: a broken image is visible while the workflow waits, not only after 15 min.
const ChangeShowPodTrouble = "nova-show-pod-trouble"

// waitRound is one round of such a wait: what becomes ready within it adds nothing to the history.
const waitRound = 20 * time.Second

// ReasonPodsNotReady is the reason of the waited-for condition and of Ready while pods are not ready.
const ReasonPodsNotReady = "PodsNotReady"

// waitShowing runs activity (one that fails retryably with type retryType, saying why, until what it
// waits for is done) for up to within, and returns its last error as waitActivity does. From
// ChangeShowPodTrouble on, it shows that why in condition cond and in Ready after each round.
func waitShowing(ctx workflow.Context, lc *object.Lifecycle, cond, retryType string, within time.Duration, result, activity any, args ...any) error {
	if workflow.GetVersion(ctx, ChangeShowPodTrouble, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return workflow.ExecuteActivity(waitActivity(ctx, within), activity, args...).Get(ctx, result)
	}
	deadline := workflow.Now(ctx).Add(within)
	for {
		round := min(waitRound, deadline.Sub(workflow.Now(ctx)))
		err := workflow.ExecuteActivity(waitActivity(ctx, round), activity, args...).Get(ctx, result)
		if err == nil || object.IsPermanent(err) || object.Interrupted(err) || !workflow.Now(ctx).Add(time.Second).Before(deadline) {
			return err
		}
		var app *temporal.ApplicationError
		if errors.As(err, &app) && app.Type() == retryType && app.Message() != "" {
			lc.SetCondition(ctx, metav1.Condition{Type: cond, Status: metav1.ConditionFalse, Reason: ReasonPodsNotReady, Message: app.Message()})
			lc.SetCondition(ctx, metav1.Condition{Type: lifecycle.ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonPodsNotReady, Message: app.Message()})
		}
	}
}

// computesGoneActivity waits for the computes of a Nova being deleted, with no deadline (a person
// decides when they go), polling at most every 30 s.
func computesGoneActivity(ctx workflow.Context) workflow.Context {
	return object.OnKube(ctx, workflow.ActivityOptions{

		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    2 * time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
		},
	})
}

// ChangeServiceClouds is the GetVersion change after which a Nova writes its service user's clouds.yaml
// into the handed-down Secret.
const ChangeServiceClouds = "nova-service-clouds"

// ChangeWaitAdminSecret is the GetVersion change after which a Nova waits for its keystoneAdminSecret to
// hold a clouds.yaml before it makes its service user (runs recorded before it failed at once).
const ChangeWaitAdminSecret = "nova-wait-admin-secret"

// ChangeFlavors is the GetVersion change after which a Nova creates the flavors of its spec.
const ChangeFlavors = "nova-flavors"

// ChangeMetadataEndpoint is the GetVersion change after which a metadata service reports where it
// answers (status.endpoint), for the OVN metadata agents that forward to it.
const ChangeMetadataEndpoint = "nova-metadata-endpoint"

// ChangeServiceAddress is the GetVersion change after which a service that listens gets a ClusterIP
// Service, and its catalog endpoints and status.endpoint name that address instead of its pod's.
const ChangeServiceAddress = "nova-service-address"

// ChangeTeardownService is the GetVersion change after which a service's teardown deletes its Service.
const ChangeTeardownService = "nova-teardown-service"

// ChangeTeardownWaitsForComputes is the GetVersion change after which a Nova deleted while its cells have
// computes waits for them to go (runs recorded before it failed, waiting for a retry signal).
const ChangeTeardownWaitsForComputes = "nova-teardown-waits-for-computes"

// ChangeTeardownWaitsForAgents is the GetVersion change after which a Nova being deleted also waits for the
// OVN metadata agents that name one of its metadata services: they deregister from Neutron with its
// service user's clouds.yaml, which goes with the Nova (runs recorded before it waited for computes only).
const ChangeTeardownWaitsForAgents = "nova-teardown-waits-for-agents"

// infraActivity routes database, message-bus and Keystone work to the OpenStack queue: retried with
// backoff for as long as the server needs to come back, within 15 minutes. Each call is short, so a
// worker that dies in one is replaced within 30 seconds.
func infraActivity(ctx workflow.Context) workflow.Context {
	return object.OnOpenStack(ctx, workflow.ActivityOptions{

		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: 15 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    20 * time.Second,
		},
	})
}

// poll calls check until it reports done, sleeping 1 s doubling to 5 s between calls (what it waits for
// takes seconds to minutes, and a parent waiting on children should not add a long sleep to each level)
// and, after 5 minutes, the limits' poll interval (what waits that long waits for a person), and shows
// what it waits for in condition cond (reason ReasonWaiting) while it is not done. A delete ends it
// (ErrDeleted); so does a due history (ErrContinueAsNew: the next run reconciles again and looks again).
func poll(ctx workflow.Context, lc *object.Lifecycle, cond string, check func(ctx workflow.Context) (bool, string, error)) error {
	delay := time.Second
	since := workflow.Now(ctx)
	shown := ""
	if c, ok := lc.Condition(cond); ok && c.Status == metav1.ConditionFalse && c.Reason == ReasonWaiting {
		// A resumed wait already shows why it waits.
		shown = c.Message
	}
	for {
		done, why, err := check(ctx)
		if err != nil || done {
			return err
		}
		if why != shown {
			lc.SetCondition(ctx, metav1.Condition{Type: cond, Status: metav1.ConditionFalse, Reason: ReasonWaiting, Message: why})
			shown = why
		}
		if lc.Deleting() {
			return object.ErrDeleted
		}
		if lc.ContinueAsNewDue(ctx) {
			return object.ErrContinueAsNew
		}
		if err := workflow.Sleep(ctx, delay); err != nil {
			return err
		}
		delay = min(2*delay, 5*time.Second)
		if workflow.Now(ctx).Sub(since) > 5*time.Minute {
			delay = max(delay, lc.Limits().PollInterval)
		}
	}
}

// applyChild creates or updates a child CR of the workflow's object.
func applyChild(ctx workflow.Context, lc *object.Lifecycle, kind, name string, spec any) error {
	raw, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("spec of %s %s: %w", kind, name, err)
	}
	in := kube.ChildInput{Ref: novaRef(kind, lc.Ref.Namespace, name), Spec: raw, Owner: owner(lc.Ref),
		Labels: map[string]string{"app.kubernetes.io/managed-by": "stackflow", "nova.openstack.org/owner": lc.Ref.Name}}
	return workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.ApplyChild, in).Get(ctx, nil)
}

// childStatus reads a child's status and its readyCount.
func childStatus(ctx workflow.Context, ref lifecycle.ObjectRef) (*kube.ObjectStatus, error) {
	var st kube.ObjectStatus
	in := kube.StatusInput{Ref: ref, Fields: []string{"readyCount"}}
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.GetObjectStatus, in).Get(ctx, &st); err != nil {
		return nil, fmt.Errorf("status of %s: %w", ref, err)
	}
	return &st, nil
}

// waitChildren waits until every child is Ready, showing in cond which are not (and why, from their
// own Ready condition). A child that failed fails the wait with its message.
func waitChildren(ctx workflow.Context, lc *object.Lifecycle, cond string, refs []lifecycle.ObjectRef) (map[string]*kube.ObjectStatus, error) {
	out := map[string]*kube.ObjectStatus{}
	err := poll(ctx, lc, cond, func(ctx workflow.Context) (bool, string, error) {
		var waiting []string
		for _, r := range refs {
			st, err := childStatus(ctx, r)
			if err != nil {
				return false, "", err
			}
			out[r.Name] = st
			if st.Ready() {
				continue
			}
			why := "not yet acting"
			for _, c := range st.Conditions {
				if c.Type == lifecycle.ConditionReady {
					why = c.Reason + ": " + c.Message
				}
			}
			if st.Phase == lifecycle.PhaseFailed && st.ObservedGeneration < st.Generation {
				return false, "", specError(ReasonServiceFailed, fmt.Sprintf("%s %s failed: %s", r.Kind, r.Name, why))
			}
			waiting = append(waiting, fmt.Sprintf("%s %s (%s)", r.Kind, r.Name, why))
		}
		if len(waiting) == 0 {
			return true, "", nil
		}
		return false, "waiting for " + strings.Join(waiting, "; "), nil
	})
	if err == nil {
		lc.SetCondition(ctx, metav1.Condition{Type: cond, Status: metav1.ConditionTrue, Reason: "Ready", Message: fmt.Sprintf("%d ready", len(refs))})
	}
	return out, err
}

// ReasonServiceFailed is a child whose own reconcile failed.
const ReasonServiceFailed = "ServiceFailed"

// deleteAll deletes objects and waits until they are gone (their workflows tore them down).
func deleteAll(ctx workflow.Context, refs ...lifecycle.ObjectRef) error {
	for _, r := range refs {
		if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.DeleteObject, r).Get(ctx, nil); err != nil {
			return fmt.Errorf("delete %s: %w", r, err)
		}
	}
	for _, r := range refs {
		if err := workflow.ExecuteActivity(waitActivity(ctx, 30*time.Minute), kubeActs.WaitDeleted, r).Get(ctx, nil); err != nil {
			return fmt.Errorf("wait for %s to go: %w", r, err)
		}
	}
	return nil
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// CellDatabaseName is the default database of a cell: nova_<cell> with hyphens as underscores.
func CellDatabaseName(cell string) string { return "nova_" + strings.ReplaceAll(cell, "-", "_") }
