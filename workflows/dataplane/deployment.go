package dataplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/activities/ansible"
	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/api"
	dataplanev1beta1 "github.com/stackflow/stackflow/api/dataplane/v1beta1"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/workflows/object"
)

// An OpenStackDataPlaneDeployment is a limited run: chosen steps of chosen nodes of a data plane, with
// Ansible tags, once. It resolves its nodes and their steps when it starts (RunMembers), then runs the
// nodes side by side (at most maxParallel), each node's steps in pipeline order, and reports every step
// in status.nodeStates.
//
// Each playbook runs exactly as the owning workflow would run it for the object as it is: a phase-0 step
// with the node's effective configuration (ResolveEDPMNode), a service with the configuration its kind
// renders (servicePlaybook). It runs only on a settled owner: the node (or the service) Ready at its
// newest generation. A node that is being deployed, failed, or holds an edit its own workflow has not
// deployed yet belongs to that workflow, and the run fails it with NodeNotSettled instead of racing it.
// The owners' records are not touched: a run changes the host, not what the node's workflow believes
// it deployed, so a run with the configuration already deployed (the only one it can run) agrees with it.
//
// The spec is immutable; retry re-runs the failed steps of the failed nodes (a retry naming hosts or
// steps re-runs only those). Cancelling or deleting it stops between steps: the playbooks are
// idempotent and a run installs nothing its owners did not deploy, so there is nothing to undo.

// OpenStackDataPlaneDeploymentWorkflow serves an OpenStackDataPlaneDeployment.
func OpenStackDataPlaneDeploymentWorkflow(ctx workflow.Context, in object.Input) error {
	return object.Run(ctx, in, &runReconciler{}, object.Options{})
}

// runRecord is a limited run's state, carried across continue-as-new.
type runRecord struct {
	// Resolved is set once the nodes and their steps were chosen.
	Resolved bool                            `json:"resolved,omitempty"`
	Nodes    []dataplanev1beta1.RunNodeState `json:"nodes,omitempty"`
	// Playbooks is the version of the playbooks the last step ran with.
	Playbooks string `json:"playbooks,omitempty"`
}

type runReconciler struct {
	rec  runRecord
	spec dataplanev1beta1.OpenStackDataPlaneDeploymentSpec
}

func (r *runReconciler) Detail() any { return r.rec }

// Restore reads the record the previous run carried.
func (r *runReconciler) Restore(lc *object.Lifecycle) error { return lc.Load(&r.rec) }

// Teardown has nothing to remove: a run leaves only what the owners deployed.
func (r *runReconciler) Teardown(workflow.Context, *object.Lifecycle) error { return nil }

// Compensate undoes nothing: see the file comment.
func (r *runReconciler) Compensate(workflow.Context, *object.Lifecycle) error { return nil }

func (r *runReconciler) Reconcile(ctx workflow.Context, lc *object.Lifecycle, obj *kube.Object) error {
	if err := lc.Load(&r.rec); err != nil {
		return err
	}
	if err := json.Unmarshal(obj.Spec, &r.spec); err != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("spec of %s: %v", lc.Ref, err), lifecycle.ReasonInvalidSpec, err)
	}
	defer func() { _ = lc.Save(r.rec) }()
	if !r.rec.Resolved {
		if err := lc.Step(ctx, "resolve the nodes and steps of data plane "+r.spec.DataPlane); err != nil {
			return err
		}
		if err := r.resolve(ctx, lc, obj.Generation); err != nil {
			lc.SetCondition(ctx, metav1.Condition{Type: dataplanev1beta1.ConditionRan, Status: metav1.ConditionFalse, Reason: object.FailureReason(err), Message: object.FailureMessage(err)})
			return err
		}
	}
	if retry := lc.Retry(); retry != nil {
		SelectRunRetry(r.rec.Nodes, *retry)
	}
	lc.SetPhase(ctx, "Running")
	r.writeStatus(ctx, lc)
	if err := r.runNodes(ctx, lc); err != nil {
		return err
	}
	return r.finish(ctx, lc)
}

// resolve waits for the data plane, then chooses the nodes and steps (RunMembers).
func (r *runReconciler) resolve(ctx workflow.Context, lc *object.Lifecycle, gen int64) error {
	ns := lc.Ref.Namespace
	ref := DataPlaneRef(ns, r.spec.DataPlane)
	var dp kube.Object
	err := waitUntil(ctx, lc, gen, dataplanev1beta1.ConditionRan, func(ctx workflow.Context) (bool, string, string, error) {
		if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.GetObject, ref).Get(ctx, &dp); err != nil {
			return false, "", "", fmt.Errorf("read %s: %w", ref, err)
		}
		if !dp.Exists {
			return false, ReasonWaitingForDataPlane, fmt.Sprintf("waiting for OpenStackDataPlane %s/%s (it does not exist)", ns, r.spec.DataPlane), nil
		}
		return true, "", "", nil
	})
	if err != nil {
		return err
	}
	var dpSpec dataplanev1beta1.OpenStackDataPlaneSpec
	if err := json.Unmarshal(dp.Spec, &dpSpec); err != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("spec of data plane %s: %v", r.spec.DataPlane, err), lifecycle.ReasonInvalidSpec, err)
	}
	members, err := listMembers(ctx, ns, dpSpec, r.spec.Nodes, r.spec.Services)
	if err != nil {
		if errors.As(err, new(*EDPMSpecError)) {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: data plane %s: %v", lc.Ref, r.spec.DataPlane, err), lifecycle.ReasonInvalidSpec, nil)
		}
		return err
	}
	r.rec.Nodes = members
	r.rec.Resolved = true
	return nil
}

// listMembers lists the namespace's nodes and roles and chooses from them (RunMembers); a choice that
// cannot be made is an *EDPMSpecError.
func listMembers(ctx workflow.Context, ns string, dp dataplanev1beta1.OpenStackDataPlaneSpec, only, services []string) ([]dataplanev1beta1.RunNodeState, error) {
	nodesF := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.ListObjects, kube.ListInput{Ref: DataPlaneNodeRef(ns, "")})
	rolesF := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.ListObjects, kube.ListInput{Ref: DataPlaneRoleRef(ns, "")})
	var nodes, roles []kube.ListedObject
	if err := nodesF.Get(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("list nodes in %s: %w", ns, err)
	}
	if err := rolesF.Get(ctx, &roles); err != nil {
		return nil, fmt.Errorf("list roles in %s: %w", ns, err)
	}
	members, err := RunMembers(dp, nodes, roles, only, services)
	if err != nil {
		return nil, &EDPMSpecError{err.Error()}
	}
	return members, nil
}

// RunMembers chooses what a limited run covers: the data plane's member nodes (by role or by name; not
// being deleted), restricted to and ordered as only when given, each with its steps in pipeline order
// (phase-0 playbooks, then its services) restricted to services when given. A name in only that is not a
// member, or a named node with none of the services, is an error; an unnamed node with none of them is
// left out. Provisioning (phase -1) is never part of a run.
func RunMembers(dp dataplanev1beta1.OpenStackDataPlaneSpec, nodes, roles []kube.ListedObject, only, services []string) ([]dataplanev1beta1.RunNodeState, error) {
	roleOf := map[string]*dataplanev1beta1.OpenStackDataPlaneRole{}
	for _, o := range roles {
		role := &dataplanev1beta1.OpenStackDataPlaneRole{}
		if o.Deleting || json.Unmarshal(o.Spec, &role.Spec) != nil {
			continue
		}
		role.Name, role.Namespace, role.Annotations = o.Ref.Name, o.Ref.Namespace, o.Annotations
		roleOf[o.Ref.Name] = role
	}
	byName := map[string]dataplanev1beta1.RunNodeState{}
	var order []string
	for _, o := range nodes {
		node := &dataplanev1beta1.OpenStackDataPlaneNode{}
		if o.Deleting || json.Unmarshal(o.Spec, &node.Spec) != nil {
			continue
		}
		if !slices.Contains(dp.Roles, node.Spec.Role) && !slices.Contains(dp.Nodes, o.Ref.Name) {
			continue
		}
		node.Name, node.Namespace, node.Annotations = o.Ref.Name, o.Ref.Namespace, o.Annotations
		role := roleOf[node.Spec.Role]
		if role == nil {
			role = &dataplanev1beta1.OpenStackDataPlaneRole{}
			role.Name, role.Namespace = node.Spec.Role, o.Ref.Namespace
		}
		cfg, err := ResolveEDPMNode(node, role)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", o.Ref.Name, err)
		}
		n := dataplanev1beta1.RunNodeState{Name: o.Ref.Name, Host: cfg.HostName, State: dataplanev1beta1.RunPending}
		for _, step := range nodeStepNames(cfg) {
			if len(services) == 0 || slices.Contains(services, step) {
				n.Steps = append(n.Steps, dataplanev1beta1.RunStepState{Name: step, State: dataplanev1beta1.RunPending})
			}
		}
		byName[o.Ref.Name] = n
		order = append(order, o.Ref.Name)
	}
	slices.Sort(order)
	var out []dataplanev1beta1.RunNodeState
	if len(only) > 0 {
		for _, name := range only {
			n, ok := byName[name]
			if !ok {
				return nil, fmt.Errorf("node %s is not a member (by the data plane's roles or nodes)", name)
			}
			if len(n.Steps) == 0 {
				return nil, fmt.Errorf("node %s has none of the steps %s", name, strings.Join(services, ", "))
			}
			out = append(out, n)
		}
		return out, nil
	}
	for _, name := range order {
		if n := byName[name]; len(n.Steps) > 0 {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		if len(order) == 0 {
			return nil, errors.New("the data plane has no member node")
		}
		return nil, fmt.Errorf("no member node of the data plane has any of the steps %s", strings.Join(services, ", "))
	}
	return out, nil
}

// nodeStepNames are a node's steps a run can run, in pipeline order.
func nodeStepNames(cfg EDPMNodeConfig) []string {
	var out []string
	for _, st := range EDPMNodeSteps(cfg) {
		if st.Playbook != "" {
			out = append(out, st.Name)
		}
	}
	for _, svc := range EDPMServices(cfg) {
		out = append(out, svc.Step)
	}
	return out
}

// SelectRunRetry makes the failed steps of the failed nodes pending again (only the hosts and steps a
// retry names, when it names any) and returns the nodes it re-admitted.
func SelectRunRetry(nodes []dataplanev1beta1.RunNodeState, sig lifecycle.RetrySignal) []string {
	var out []string
	for i := range nodes {
		n := &nodes[i]
		if n.State != dataplanev1beta1.RunFailed {
			continue
		}
		if len(sig.Hosts) > 0 && !slices.Contains(sig.Hosts, n.Name) && !slices.Contains(sig.Hosts, n.Host) {
			continue
		}
		again := false
		for j := range n.Steps {
			s := &n.Steps[j]
			if s.State == dataplanev1beta1.RunSucceeded || (len(sig.Steps) > 0 && !slices.Contains(sig.Steps, s.Name)) {
				continue
			}
			s.State, s.Message = dataplanev1beta1.RunPending, ""
			again = true
		}
		if again {
			n.State, n.Message = dataplanev1beta1.RunPending, ""
			out = append(out, n.Name)
		}
	}
	return out
}

// runNodes runs the pending nodes, at most maxParallel at once.
func (r *runReconciler) runNodes(ctx workflow.Context, lc *object.Lifecycle) error {
	limit := 5
	if r.spec.MaxParallel != nil && *r.spec.MaxParallel > 0 {
		limit = int(*r.spec.MaxParallel)
	}
	running := 0
	var stepErr error
	wg := workflow.NewWaitGroup(ctx)
	for i := range r.rec.Nodes {
		if r.rec.Nodes[i].State != dataplanev1beta1.RunPending {
			continue
		}
		if err := workflow.Await(ctx, func() bool { return running < limit }); err != nil {
			return err
		}
		if stepErr != nil {
			break
		}
		running++
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			defer func() { running-- }()
			if err := r.runNode(ctx, lc, &r.rec.Nodes[i]); err != nil && stepErr == nil {
				stepErr = err
			}
		})
	}
	wg.Wait(ctx)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return stepErr
}

// runNode runs one node's pending steps in order; the first failure fails the node (its later steps
// stay pending: they would act on a host in an unknown state). It returns only what stops the run:
// a deletion, a cancel, a due history.
func (r *runReconciler) runNode(ctx workflow.Context, lc *object.Lifecycle, n *dataplanev1beta1.RunNodeState) error {
	n.State = dataplanev1beta1.RunRunning
	r.writeStatus(ctx, lc)
	fail := func(reason string, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		n.State, n.Message = dataplanev1beta1.RunFailed, fmt.Sprintf("%s: %s", reason, object.FailureMessage(err))
		r.writeStatus(ctx, lc)
		return nil
	}
	cfg, err := r.settledNode(ctx, lc, n.Name)
	if err == nil && workflow.GetVersion(ctx, ChangeRunWaitsForUpdates, workflow.DefaultVersion, 1) == 1 {
		err = r.noUpdateInFlight(ctx, lc)
	}
	if err != nil {
		return fail(object.FailureReason(err), err)
	}
	n.Host = cfg.HostName
	for j := range n.Steps {
		s := &n.Steps[j]
		if s.State == dataplanev1beta1.RunSucceeded {
			continue
		}
		if lc.ContinueAsNewDue(ctx) {
			n.State = dataplanev1beta1.RunPending
			return object.ErrContinueAsNew
		}
		if err := lc.Step(ctx, fmt.Sprintf("%s on %s (%s)", s.Name, n.Name, cfg.HostName)); err != nil {
			n.State = dataplanev1beta1.RunPending
			return err
		}
		in, err := stepInput(ctx, lc, cfg, s.Name, true)
		if err != nil {
			s.State, s.Message = dataplanev1beta1.RunFailed, object.FailureMessage(err)
			return fail(object.FailureReason(err), fmt.Errorf("step %s: %w", s.Name, err))
		}
		in.Tags, in.SkipTags = r.spec.Tags, r.spec.SkipTags
		s.State = dataplanev1beta1.RunRunning
		r.writeStatus(ctx, lc)
		var res ansible.PlaybookResult
		if err := workflow.ExecuteActivity(AnsibleActivity(ctx), ansibleActs.RunPlaybook, in).Get(ctx, &res); err != nil {
			if ctx.Err() != nil {
				s.State, n.State = dataplanev1beta1.RunPending, dataplanev1beta1.RunPending
				return ctx.Err()
			}
			s.State, s.Message = dataplanev1beta1.RunFailed, object.FailureMessage(err)
			return fail(object.FailureReason(err), fmt.Errorf("step %s: %w", s.Name, err))
		}
		s.State, s.Message = dataplanev1beta1.RunSucceeded, ""
		s.Ok, s.Changed, s.Skipped = int32(res.Ok), int32(res.Changed), int32(res.Skipped)
		r.rec.Playbooks = res.PlaybooksVersion
		r.writeStatus(ctx, lc)
	}
	n.State, n.Message = dataplanev1beta1.RunSucceeded, ""
	r.writeStatus(ctx, lc)
	return nil
}

// errNotSettled says why a node or service is left to its own workflow.
func errNotSettled(what string, st kube.ObjectStatus) error {
	msg := fmt.Sprintf("%s is not settled (phase %s, generation %d, observed %d): a limited run acts only on what its own workflow has deployed; let it finish, or retry it, then retry this run",
		what, firstNonEmpty(st.Phase, "unknown"), st.Generation, st.ObservedGeneration)
	if !st.Exists {
		msg = what + " does not exist"
	}
	return temporal.NewNonRetryableApplicationError(msg, dataplanev1beta1.ReasonNodeNotSettled, nil)
}

// settledNode reads the node, requires it settled (Ready at its newest generation), and resolves its
// effective configuration as its own workflow does.
func (r *runReconciler) settledNode(ctx workflow.Context, lc *object.Lifecycle, name string) (EDPMNodeConfig, error) {
	ref := DataPlaneNodeRef(lc.Ref.Namespace, name)
	var st kube.ObjectStatus
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.GetObjectStatus, kube.StatusInput{Ref: ref}).Get(ctx, &st); err != nil {
		return EDPMNodeConfig{}, fmt.Errorf("read %s: %w", ref, err)
	}
	if !st.Ready() || st.Deleting {
		return EDPMNodeConfig{}, errNotSettled("OpenStackDataPlaneNode "+name, st)
	}
	return readNodeConfig(ctx, lc.Ref.Namespace, name)
}

// ChangeRunWaitsForUpdates marks the limited run that refuses a node while an update of its data plane
// is in progress (runs recorded before it did not look).
const ChangeRunWaitsForUpdates = "run-refuses-during-update"

// noUpdateInFlight fails with NodeNotSettled while an OpenStackDataPlaneUpdate of the run's data plane is
// in progress (neither Ready nor Failed): it drains, restarts and rolls back the same hosts' nova-compute.
func (r *runReconciler) noUpdateInFlight(ctx workflow.Context, lc *object.Lifecycle) error {
	var updates []kube.ListedObject
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.ListObjects, kube.ListInput{Ref: api.Ref("OpenStackDataPlaneUpdate", lc.Ref.Namespace, "")}).Get(ctx, &updates); err != nil {
		return fmt.Errorf("list updates in %s: %w", lc.Ref.Namespace, err)
	}
	for _, u := range updates {
		var spec dataplanev1beta1.OpenStackDataPlaneUpdateSpec
		if json.Unmarshal(u.Spec, &spec) != nil || spec.DataPlane != r.spec.DataPlane {
			continue
		}
		var st kube.ObjectStatus
		if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.GetObjectStatus, kube.StatusInput{Ref: u.Ref}).Get(ctx, &st); err != nil {
			return fmt.Errorf("read %s: %w", u.Ref, err)
		}
		if st.Exists && !st.Ready() && st.Phase != lifecycle.PhaseFailed {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("OpenStackDataPlaneUpdate %s of data plane %s is in progress (phase %s): a limited run waits for it to end; retry this run then",
				u.Ref.Name, r.spec.DataPlane, firstNonEmpty(st.Phase, "not started")), dataplanev1beta1.ReasonNodeNotSettled, nil)
		}
	}
	return nil
}

// readNodeConfig reads a node and its role as the API holds them and resolves the node's effective
// configuration, as the node's workflow does (without waiting for a missing role: it resolves
// with an empty one).
func readNodeConfig(ctx workflow.Context, ns, name string) (EDPMNodeConfig, error) {
	ref := DataPlaneNodeRef(ns, name)
	var obj kube.Object
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.GetObject, ref).Get(ctx, &obj); err != nil {
		return EDPMNodeConfig{}, fmt.Errorf("read %s: %w", ref, err)
	}
	if !obj.Exists {
		return EDPMNodeConfig{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s does not exist", ref), lifecycle.ReasonInvalidSpec, nil)
	}
	node := &dataplanev1beta1.OpenStackDataPlaneNode{}
	if err := json.Unmarshal(obj.Spec, &node.Spec); err != nil {
		return EDPMNodeConfig{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("spec of %s: %v", ref, err), lifecycle.ReasonInvalidSpec, err)
	}
	node.Name, node.Namespace, node.Annotations = name, ns, obj.Annotations
	role := &dataplanev1beta1.OpenStackDataPlaneRole{}
	var ro kube.Object
	rref := DataPlaneRoleRef(ns, node.Spec.Role)
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.GetObject, rref).Get(ctx, &ro); err != nil {
		return EDPMNodeConfig{}, fmt.Errorf("read %s: %w", rref, err)
	}
	if ro.Exists {
		if err := json.Unmarshal(ro.Spec, &role.Spec); err != nil {
			return EDPMNodeConfig{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("spec of %s: %v", rref, err), lifecycle.ReasonInvalidSpec, err)
		}
	}
	role.Name, role.Namespace, role.Annotations = node.Spec.Role, ns, ro.Annotations
	cfg, err := ResolveEDPMNode(node, role)
	if err != nil {
		return EDPMNodeConfig{}, specError(lifecycle.ReasonInvalidSpec, err)
	}
	gateOVNStep(ctx, &cfg)
	return cfg, nil
}

// stepInput is the playbook run of one step, as the step's owner builds it. With settled, a service
// step needs its service CR settled and deployed (a run); without, it is built for the CR as the API
// holds it (a preview).
func stepInput(ctx workflow.Context, lc *object.Lifecycle, cfg EDPMNodeConfig, step string, settled bool) (ansible.PlaybookInput, error) {
	for _, st := range EDPMNodeSteps(cfg) {
		if st.Name == step && st.Playbook != "" {
			return ansible.PlaybookInput{Namespace: lc.Ref.Namespace, Host: cfg.HostName, Step: st.Name, Playbook: st.Playbook,
				HostVars: cfg.HostVars(), SSHKeySecret: cfg.SSHKeySecret}, nil
		}
	}
	for _, svc := range EDPMServices(cfg) {
		if svc.Step != step {
			continue
		}
		if settled {
			var st kube.ObjectStatus
			if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.GetObjectStatus, kube.StatusInput{Ref: svc.Ref, Fields: []string{"deployed"}}).Get(ctx, &st); err != nil {
				return ansible.PlaybookInput{}, fmt.Errorf("read %s: %w", svc.Ref, err)
			}
			if !st.Ready() || st.Deleting || string(st.Fields["deployed"]) != "true" {
				return ansible.PlaybookInput{}, errNotSettled(svc.Ref.Kind+" "+svc.Ref.Name, st)
			}
		}
		var obj kube.Object
		if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.GetObject, svc.Ref).Get(ctx, &obj); err != nil {
			return ansible.PlaybookInput{}, fmt.Errorf("read %s: %w", svc.Ref, err)
		}
		if !obj.Exists {
			return ansible.PlaybookInput{}, fmt.Errorf("%s %s does not exist yet", svc.Ref.Kind, svc.Ref.Name)
		}
		in, err := servicePlaybook(ctx, lc, serviceKind(step), &obj)
		if err != nil {
			return ansible.PlaybookInput{}, fmt.Errorf("%s %s: %w", svc.Ref.Kind, svc.Ref.Name, err)
		}
		return in, nil
	}
	return ansible.PlaybookInput{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("node %s no longer has the step %s", cfg.Name, step), lifecycle.ReasonInvalidSpec, nil)
}

// serviceKind is the kind that serves a phase-1 step.
func serviceKind(step string) edpmServiceKind {
	if step == StepOVNMetadataAgent {
		return &ovnMetadataKind{}
	}
	return &novaComputeKind{}
}

// finish reports how the run ended: Ran when every node succeeded, Failed naming each failed node.
func (r *runReconciler) finish(ctx workflow.Context, lc *object.Lifecycle) error {
	r.writeStatus(ctx, lc)
	var failed []string
	reason := ""
	for _, n := range r.rec.Nodes {
		if n.State == dataplanev1beta1.RunFailed {
			failed = append(failed, fmt.Sprintf("%s (%s)", n.Name, n.Message))
			if reason == "" {
				reason, _, _ = strings.Cut(n.Message, ":")
			}
		}
	}
	if len(failed) > 0 {
		msg := fmt.Sprintf("%d of %d node(s) failed: %s; send the retry signal to re-run their failed steps", len(failed), len(r.rec.Nodes), strings.Join(failed, "; "))
		lc.SetCondition(ctx, metav1.Condition{Type: dataplanev1beta1.ConditionRan, Status: metav1.ConditionFalse, Reason: reason, Message: msg})
		return temporal.NewNonRetryableApplicationError(msg, reason, nil)
	}
	steps := 0
	for _, n := range r.rec.Nodes {
		steps += len(n.Steps)
	}
	lc.SetCondition(ctx, metav1.Condition{Type: dataplanev1beta1.ConditionRan, Status: metav1.ConditionTrue, Reason: "Ran",
		Message: fmt.Sprintf("%d step(s) ran on %d node(s)", steps, len(r.rec.Nodes))})
	return nil
}

// writeStatus mirrors the record into status: counts, the services covered, and the nodes (bounded,
// the ones that need a look first).
func (r *runReconciler) writeStatus(ctx workflow.Context, lc *object.Lifecycle) {
	var ok, failed int32
	var services []string
	for _, n := range r.rec.Nodes {
		switch n.State {
		case dataplanev1beta1.RunSucceeded:
			ok++
		case dataplanev1beta1.RunFailed:
			failed++
		}
		for _, s := range n.Steps {
			if !slices.Contains(services, s.Name) {
				services = append(services, s.Name)
			}
		}
	}
	states, omitted := BoundRunNodeStates(r.rec.Nodes, dataplanev1beta1.MaxRunNodeStates)
	_ = lc.SetField(ctx, "nodes", len(r.rec.Nodes))
	_ = lc.SetField(ctx, "succeededNodes", ok)
	_ = lc.SetField(ctx, "failedNodes", failed)
	_ = lc.SetField(ctx, "services", services)
	_ = lc.SetField(ctx, "nodeStates", states)
	_ = lc.SetField(ctx, "nodeStatesOmitted", omitted)
	if r.rec.Playbooks != "" {
		_ = lc.SetField(ctx, "playbooksVersion", r.rec.Playbooks)
	}
}

// BoundRunNodeStates keeps at most max nodes: failed, then running, then pending, then succeeded ones,
// each group in run order; it returns how many it left out.
func BoundRunNodeStates(nodes []dataplanev1beta1.RunNodeState, max int) ([]dataplanev1beta1.RunNodeState, int) {
	if len(nodes) <= max {
		return nodes, 0
	}
	rank := map[string]int{dataplanev1beta1.RunFailed: 0, dataplanev1beta1.RunRunning: 1, dataplanev1beta1.RunPending: 2, dataplanev1beta1.RunSucceeded: 3}
	out := slices.Clone(nodes)
	slices.SortStableFunc(out, func(a, b dataplanev1beta1.RunNodeState) int { return rank[a.State] - rank[b.State] })
	return out[:max], len(nodes) - max
}
