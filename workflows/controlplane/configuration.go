package controlplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/activities/helm"
	"github.com/stackflow/stackflow/activities/kube"
	kupenstackv1alpha1 "github.com/stackflow/stackflow/api/kupenstack/v1alpha1"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/workflows/object"
)

// DefaultReleaseNamespace holds the components' releases when the configuration names no namespace.
const DefaultReleaseNamespace = "openstack"

// UpdatePreview is the update that returns what a rollout would change, without applying anything.
const UpdatePreview = lifecycle.UpdatePreview

// ConditionComponentsReady is True when every enabled component's release is deployed and Ready.
const ConditionComponentsReady = "ComponentsReady"

// PreviewRequest optionally stands in a candidate spec for one profile, to preview an edit before
// making it; empty, it previews the profiles as they are.
type PreviewRequest struct {
	Profile *NamedProfile `json:"profile,omitempty"`
}

// MaxPreviewBytes bounds the diffs of one preview result: an update's result is one payload (2 MB at
// most), and each diff is already bounded by helm.MaxDiffBytes.
const MaxPreviewBytes = 1 << 20

// BoundPreview keeps diffs, in order, while their total stays within max; the diffs of the components
// after that keep their header (from, to, line count) and say they were left out.
func BoundPreview(diffs []helm.DiffResult, max int) []helm.DiffResult {
	out := make([]helm.DiffResult, len(diffs))
	total := 0
	for i, d := range diffs {
		if total+len(d.Diff) > max {
			d.Diff, d.Truncated = "(diff left out: the preview's diffs are bounded to "+fmt.Sprint(max>>10)+" KiB; preview this component alone)\n", true
		}
		total += len(d.Diff)
		out[i] = d
	}
	return out
}

// PreviewResult is the plan and, per component that would roll, the rendered manifest diff.
type PreviewResult struct {
	Plan  RolloutPlan       `json:"plan"`
	Diffs []helm.DiffResult `json:"diffs,omitempty"`
}

// KupenstackConfigurationWorkflow serves a KupenstackConfiguration: it gives every listed node its
// OpenstackNode spec (type, profile, disabled; the OpenstackNode's own workflow labels the Node), then
// rolls out the default profile's components, one Helm release each, in dependency order and in
// parallel where the graph allows, only those whose rendered values changed. status.components shows
// each release; the preview update shows what would change.
func KupenstackConfigurationWorkflow(ctx workflow.Context, in object.Input) error {
	r := &configReconciler{ref: in.ObjectRef, status: map[string]kupenstackv1alpha1.ComponentStatus{}}
	// An update, not a query: a preview reads the profiles and renders charts through activities.
	if err := workflow.SetUpdateHandler(ctx, UpdatePreview, r.preview); err != nil {
		return fmt.Errorf("preview update of %s: %w", in.ObjectRef, err)
	}
	return object.Run(ctx, in, r, object.Options{})
}

type configReconciler struct {
	ref    lifecycle.ObjectRef
	status map[string]kupenstackv1alpha1.ComponentStatus
}

// ComponentKeystone is the identity component: once it is deployed, the configuration writes the
// clouds.yaml of its administrator into the Secret CloudsSecret of the release namespace.
const (
	ComponentKeystone = "keystone"
	CloudsSecret      = "keystone-clouds"
)

// ChangeCloudsYAML is the GetVersion change after which a configuration writes CloudsSecret.
const ChangeCloudsYAML = "configuration-clouds-yaml"

// writeCloudsYAML writes CloudsSecret for the keystone release: its administrator (the release's Secret
// keystone-admin) at its API Service's address, the cloud named after the configuration. The Secret
// belongs to the configuration, and goes with it.
func writeCloudsYAML(ctx workflow.Context, ref lifecycle.ObjectRef, namespace string, keystone RenderedComponent) error {
	service := "keystone-api"
	if endpoints, ok := keystone.Values["endpoints"].(map[string]any); ok {
		if identity, ok := endpoints["identity"].(map[string]any); ok {
			if hosts, ok := identity["hosts"].(map[string]any); ok {
				if h, ok := hosts["default"].(string); ok && h != "" {
					service = h
				}
			}
		}
	}
	in := kube.CloudsYAMLInput{Namespace: namespace, AdminSecret: ComponentKeystone + "-admin", Service: service,
		Secret: CloudsSecret, Cloud: ref.Name,
		Owner: &kube.Owner{APIVersion: ref.APIVersion(), Kind: ref.Kind, Name: ref.Name, UID: ref.UID}}
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.WriteCloudsYAML, in).Get(ctx, nil); err != nil {
		return fmt.Errorf("write the clouds.yaml of %s/%s: %w", namespace, CloudsSecret, err)
	}
	return nil
}

// configRecord is what the workflow remembers for teardown: the releases it installed and the nodes
// whose OpenstackNode spec it set.
type configRecord struct {
	Namespace string   `json:"namespace"`
	Releases  []string `json:"releases,omitempty"`
	Nodes     []string `json:"nodes,omitempty"`
}

// ChangeReleaseNodes is the GetVersion change after which a configuration clears the OpenstackNode spec
// of a node it no longer lists, and of every node it listed when it is deleted (their workflows then
// give the Nodes back their site's labels).
const ChangeReleaseNodes = "configuration-release-nodes"

// releaseNodes clears the type, profile and disabled flag of the named nodes' OpenstackNodes, side by
// side; a missing OpenstackNode stays missing.
func releaseNodes(ctx workflow.Context, names []string) error {
	var futures []workflow.Future
	for _, name := range names {
		futures = append(futures, workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.ApplySpec, kube.EnsureInput{
			Ref:          OpenstackNodeRef(name),
			Spec:         json.RawMessage(`{"type":null,"profile":null,"disabled":null}`),
			ExistingOnly: true,
		}))
	}
	var errs []error
	for i, f := range futures {
		if err := f.Get(ctx, nil); err != nil {
			errs = append(errs, fmt.Errorf("release OpenstackNode %s: %w", names[i], err))
		}
	}
	return errors.Join(errs...)
}

func parseConfigSpec(ref lifecycle.ObjectRef, raw json.RawMessage) (kupenstackv1alpha1.KupenstackConfigurationSpec, error) {
	var spec kupenstackv1alpha1.KupenstackConfigurationSpec
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &spec); err != nil {
			return spec, temporal.NewNonRetryableApplicationError(fmt.Sprintf("spec of %s: %v", ref, err), lifecycle.ReasonInvalidSpec, err)
		}
	}
	if spec.DefaultProfile == "" {
		return spec, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: spec.defaultProfile is required", ref), lifecycle.ReasonInvalidSpec, nil)
	}
	if spec.ReleaseNamespace == "" {
		spec.ReleaseNamespace = DefaultReleaseNamespace
	}
	for _, n := range spec.Nodes {
		if n.Type != "" && n.Type != RoleControl && n.Type != RoleCompute {
			return spec, temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: node %s: type %q is not control or compute", ref, n.Name, n.Type), lifecycle.ReasonInvalidSpec, nil)
		}
	}
	return spec, nil
}

// ChangePrepareSideBySide guards the reconcile path that prepares a rollout side by side (prepare):
// runs recorded before it replay the serial path (prepareSerially).
const ChangePrepareSideBySide = "rollout-prepare-side-by-side"

func (r *configReconciler) Reconcile(ctx workflow.Context, lc *object.Lifecycle, obj *kube.Object) error {
	spec, err := parseConfigSpec(lc.Ref, obj.Spec)
	if err != nil {
		return err
	}
	// changed in day 2: what comes before the first component's rollout is read and written side by side,
	// the values in one activity; it was the makespan's largest overhead.
	sideBySide := workflow.GetVersion(ctx, ChangePrepareSideBySide, workflow.DefaultVersion, 1) == 1
	var p *preparation
	if sideBySide {
		p, err = prepare(ctx, lc, spec, r.status)
	} else {
		p, err = prepareSerially(ctx, lc, spec)
	}
	if err != nil {
		return err
	}
	plan, rendered, deployed := p.plan, p.rendered, p.deployed
	r.status = initialStatus(plan, rendered, deployed)
	report := func() { _ = lc.SetField(ctx, "components", r.statusList()) }
	report()
	workflow.GetLogger(ctx).Info("rollout plan", "object", lc.Ref.String(), "waves", plan.Waves, "unchanged", plan.Unchanged, "remove", plan.Remove)

	var rec configRecord
	if err := lc.Load(&rec); err != nil {
		return err
	}
	rec.Namespace = spec.ReleaseNamespace
	for _, name := range plan.Components() {
		if !slices.Contains(rec.Releases, name) {
			rec.Releases = append(rec.Releases, name)
		}
	}
	// changed in day 2: the configuration remembers its nodes, and lets go of those it no longer lists
	// (other objects than the listed nodes' specs, which may still be in flight).
	var dropped []string
	if workflow.GetVersion(ctx, ChangeReleaseNodes, workflow.DefaultVersion, 1) == 1 {
		listed := make([]string, 0, len(spec.Nodes))
		for _, n := range spec.Nodes {
			listed = append(listed, n.Name)
		}
		for _, name := range rec.Nodes {
			if !slices.Contains(listed, name) {
				dropped = append(dropped, name)
			}
		}
		rec.Nodes = listed
	}
	if err := lc.Save(rec); err != nil {
		return err
	}
	if len(dropped) > 0 {
		if err := lc.Step(ctx, "release OpenstackNodes "+strings.Join(dropped, ", ")); err != nil {
			return err
		}
		if err := releaseNodes(ctx, dropped); err != nil {
			return err
		}
	}

	if len(plan.Waves) > 0 {
		lc.SetCondition(ctx, metav1.Condition{Type: ConditionComponentsReady, Status: metav1.ConditionFalse, Reason: "RollingOut",
			Message: "rolling out " + wavesText(plan.Waves)})
	}
	if sideBySide {
		if err := p.finish(ctx, spec.ReleaseNamespace); err != nil {
			return err
		}
	} else if len(plan.Waves) > 0 {
		if err := storeValues(ctx, spec.ReleaseNamespace, plan.Components(), rendered); err != nil {
			return err
		}
	}
	out := executeRollout(ctx, lc, lc.Ref.Kind, spec.ReleaseNamespace, plan, rendered, r.status, report)
	if out.err == nil {
		for i := len(plan.Remove) - 1; i >= 0; i-- {
			name := plan.Remove[i]
			if err := lc.Step(ctx, "uninstall "+name); err != nil {
				return err
			}
			if err := uninstall(ctx, name, spec.ReleaseNamespace); err != nil {
				return err
			}
			r.status[name] = kupenstackv1alpha1.ComponentStatus{Name: name, Release: name, State: ComponentDisabled, Message: "uninstalled: disabled in the profile"}
			report()
		}
	}
	if out.err != nil {
		reason := object.FailureReason(out.err)
		msg := object.FailureMessage(out.err)
		if len(out.failed) > 0 {
			msg = fmt.Sprintf("%s failed: %s", strings.Join(out.failed, ", "), msg)
		}
		lc.SetCondition(ctx, metav1.Condition{Type: ConditionComponentsReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg})
		if temporal.IsCanceledError(out.err) {
			return out.err
		}
		return temporal.NewNonRetryableApplicationError(msg, reason, nil)
	}
	// changed in day 2: a deployed Keystone gets a clouds.yaml of its administrator.
	if rendered[ComponentKeystone].Enabled && r.status[ComponentKeystone].State == ComponentDeployed &&
		workflow.GetVersion(ctx, ChangeCloudsYAML, workflow.DefaultVersion, 1) == 1 {
		if err := lc.Step(ctx, "write clouds.yaml"); err != nil {
			return err
		}
		if err := writeCloudsYAML(ctx, lc.Ref, spec.ReleaseNamespace, rendered[ComponentKeystone]); err != nil {
			return err
		}
	}
	var ready []string
	for _, st := range r.statusList() {
		if st.State == ComponentDeployed {
			ready = append(ready, st.Name)
		}
	}
	lc.SetCondition(ctx, metav1.Condition{Type: ConditionComponentsReady, Status: metav1.ConditionTrue, Reason: "Deployed",
		Message: fmt.Sprintf("%d components Ready (%s); rolled out this time: %s", len(ready), strings.Join(ready, ", "), orNone(strings.Join(plan.Components(), ", ")))})
	return nil
}

// preparation is what a reconcile learned and started before its rollout.
type preparation struct {
	plan     RolloutPlan
	rendered map[string]RenderedComponent
	deployed map[string]helm.ReleaseInfo
	// nodes waits for the node specs sent (none on the serial path: it applied them).
	nodes func() error
	// ahead names the components whose values were sent to be stored before the plan was known; stored
	// settles once they are (nil when none were).
	ahead  []string
	stored workflow.Future
}

// prepare renders the default profile while it reads the deployed releases; once the profile renders,
// the listed nodes' OpenstackNode specs go, and the values of the components the recorded status does
// not show deployed as rendered (valuesAhead) are stored, while the releases are still read. finish
// waits for all of it. A profile that fails to render configures no node, as in prepareSerially.
func prepare(ctx workflow.Context, lc *object.Lifecycle, spec kupenstackv1alpha1.KupenstackConfigurationSpec,
	known map[string]kupenstackv1alpha1.ComponentStatus) (*preparation, error) {
	if err := lc.Step(ctx, "render profile "+spec.DefaultProfile+", read releases"); err != nil {
		return nil, err
	}
	releases := workflow.ExecuteActivity(helmActivity(ctx, 2*time.Minute), helmActs.Releases,
		helm.ReleasesInput{Namespace: spec.ReleaseNamespace, Names: ControlPlane.Names()})
	_, rendered, err := renderProfile(ctx, spec.DefaultProfile, nil)
	if err != nil {
		lc.SetCondition(ctx, metav1.Condition{Type: ConditionComponentsReady, Status: metav1.ConditionFalse, Reason: object.FailureReason(err), Message: object.FailureMessage(err)})
		return nil, err
	}
	if err := lc.Step(ctx, "configure OpenstackNodes, store values, plan rollout"); err != nil {
		return nil, err
	}
	p := &preparation{rendered: rendered, nodes: startNodeSpecs(ctx, spec), ahead: valuesAhead(rendered, known)}
	if len(p.ahead) > 0 {
		p.stored = storeAllValues(ctx, spec.ReleaseNamespace, p.ahead, rendered)
	}
	if err := releases.Get(ctx, &p.deployed); err != nil {
		return nil, errors.Join(p.wait(ctx), fmt.Errorf("read releases in %s: %w", spec.ReleaseNamespace, err))
	}
	if p.plan, err = PlanRollout(ControlPlane, rendered, p.deployed); err != nil {
		return nil, errors.Join(p.wait(ctx), profileFailure(err))
	}
	return p, nil
}

// valuesAhead names the enabled components whose rendered chart and values the recorded status does not
// show deployed: those a rollout is bound to roll, whose values can be stored before the releases are
// read. A reconcile that changes nothing stores nothing.
func valuesAhead(rendered map[string]RenderedComponent, known map[string]kupenstackv1alpha1.ComponentStatus) []string {
	var out []string
	for _, name := range ControlPlane.Names() {
		r := rendered[name]
		if !r.Enabled {
			continue
		}
		if st, ok := known[name]; ok && st.State == ComponentDeployed && st.ValuesHash == r.ValuesHash && st.ChartVersion == r.Chart.Version {
			continue
		}
		out = append(out, name)
	}
	return out
}

// finish stores the values of the components the plan rolls that were not stored ahead, and waits for
// everything prepare started; the first failure wins, the node specs' first.
func (p *preparation) finish(ctx workflow.Context, namespace string) error {
	var late []string
	for _, name := range p.plan.Components() {
		if !slices.Contains(p.ahead, name) {
			late = append(late, name)
		}
	}
	if len(late) > 0 {
		if err := errors.Join(p.wait(ctx), storeAllValues(ctx, namespace, late, p.rendered).Get(ctx, nil)); err != nil {
			return fmt.Errorf("prepare the rollout of %s: %w", strings.Join(p.plan.Components(), ", "), err)
		}
		return nil
	}
	return p.wait(ctx)
}

// wait waits for the node specs and the values stored ahead.
func (p *preparation) wait(ctx workflow.Context) error {
	err := p.nodes()
	if p.stored != nil {
		if serr := p.stored.Get(ctx, nil); serr != nil && err == nil {
			err = fmt.Errorf("store the values of %s: %w", strings.Join(p.ahead, ", "), serr)
		}
	}
	return err
}

// prepareSerially is prepare as runs before ChangePrepareSideBySide took it: render, configure the
// nodes, read the releases and plan, one after the other.
func prepareSerially(ctx workflow.Context, lc *object.Lifecycle, spec kupenstackv1alpha1.KupenstackConfigurationSpec) (*preparation, error) {
	if err := lc.Step(ctx, "render profile "+spec.DefaultProfile); err != nil {
		return nil, err
	}
	_, rendered, err := renderProfile(ctx, spec.DefaultProfile, nil)
	if err != nil {
		lc.SetCondition(ctx, metav1.Condition{Type: ConditionComponentsReady, Status: metav1.ConditionFalse, Reason: object.FailureReason(err), Message: object.FailureMessage(err)})
		return nil, err
	}
	if err := lc.Step(ctx, "configure OpenstackNodes"); err != nil {
		return nil, err
	}
	if err := startNodeSpecs(ctx, spec)(); err != nil {
		return nil, err
	}
	if err := lc.Step(ctx, "plan rollout"); err != nil {
		return nil, err
	}
	p := &preparation{rendered: rendered}
	if err := workflow.ExecuteActivity(helmActivity(ctx, 2*time.Minute), helmActs.Releases,
		helm.ReleasesInput{Namespace: spec.ReleaseNamespace, Names: ControlPlane.Names()}).Get(ctx, &p.deployed); err != nil {
		return nil, fmt.Errorf("read releases in %s: %w", spec.ReleaseNamespace, err)
	}
	if p.plan, err = PlanRollout(ControlPlane, rendered, p.deployed); err != nil {
		return nil, profileFailure(err)
	}
	return p, nil
}

// startNodeSpecs gives every listed node's OpenstackNode its type, profile and disabled flag, creating
// the OpenstackNode when its Node's workflow has not yet, all side by side; the returned function waits
// for them and returns the first failure.
func startNodeSpecs(ctx workflow.Context, spec kupenstackv1alpha1.KupenstackConfigurationSpec) func() error {
	var futures []workflow.Future
	for _, n := range spec.Nodes {
		profile := n.Profile
		if profile == "" {
			profile = spec.DefaultProfile
		}
		// Every field explicit (no omitempty), so a merge patch also clears what the configuration dropped.
		b, _ := json.Marshal(struct {
			Type     *string `json:"type"`
			Profile  string  `json:"profile"`
			Disabled bool    `json:"disabled"`
		}{nilIfEmpty(n.Type), profile, n.Disabled})
		futures = append(futures, workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.ApplySpec, kube.EnsureInput{
			Ref:    OpenstackNodeRef(n.Name),
			Labels: map[string]string{"app.kubernetes.io/managed-by": "stackflow"},
			Spec:   b,
		}))
	}
	return func() error {
		for i, f := range futures {
			if err := f.Get(ctx, nil); err != nil {
				return fmt.Errorf("configure OpenstackNode %s: %w", spec.Nodes[i].Name, err)
			}
		}
		return nil
	}
}

func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// initialStatus is every component's status before the rollout: unchanged ones as Helm reports them,
// rolling ones Pending with the reason they roll.
func initialStatus(plan RolloutPlan, rendered map[string]RenderedComponent, deployed map[string]helm.ReleaseInfo) map[string]kupenstackv1alpha1.ComponentStatus {
	status := map[string]kupenstackv1alpha1.ComponentStatus{}
	for _, name := range plan.Unchanged {
		rel := deployed[name]
		status[name] = kupenstackv1alpha1.ComponentStatus{Name: name, Release: name, ChartVersion: rel.ChartVersion, Revision: int32(rel.Revision),
			ValuesHash: rel.ValuesHash, State: ComponentDeployed, Message: "unchanged"}
	}
	for _, name := range plan.Components() {
		rel := deployed[name]
		status[name] = kupenstackv1alpha1.ComponentStatus{Name: name, Release: name, ChartVersion: rel.ChartVersion, Revision: int32(rel.Revision),
			ValuesHash: rel.ValuesHash, State: ComponentPending, Message: "to roll out: " + plan.Reasons[name]}
	}
	for _, name := range plan.Remove {
		rel := deployed[name]
		status[name] = kupenstackv1alpha1.ComponentStatus{Name: name, Release: name, ChartVersion: rel.ChartVersion, Revision: int32(rel.Revision),
			State: ComponentPending, Message: "to uninstall: " + plan.Reasons[name]}
	}
	return status
}

// statusList is status.components in graph order.
func (r *configReconciler) statusList() []kupenstackv1alpha1.ComponentStatus {
	out := []kupenstackv1alpha1.ComponentStatus{}
	for _, name := range ControlPlane.Names() {
		if st, ok := r.status[name]; ok {
			out = append(out, st)
		}
	}
	return out
}

// Detail is the per-component status, for the status query.
func (r *configReconciler) Detail() any { return r.statusList() }

// Restore takes the components' status the previous run wrote.
func (r *configReconciler) Restore(lc *object.Lifecycle) error {
	var list []kupenstackv1alpha1.ComponentStatus
	if _, err := lc.Field("components", &list); err != nil {
		return err
	}
	for _, st := range list {
		r.status[st.Name] = st
	}
	return nil
}

// Teardown clears the specs of the OpenstackNodes this workflow configured, then uninstalls the releases
// it installed, dependents first.
func (r *configReconciler) Teardown(ctx workflow.Context, lc *object.Lifecycle) error {
	var rec configRecord
	if err := lc.Load(&rec); err != nil {
		return err
	}
	waves, err := ControlPlane.Waves(rec.Releases)
	// changed in day 2: a configuration that recorded no release removes none (teardownWaves)
	if len(rec.Releases) == 0 && workflow.GetVersion(ctx, "teardown-recorded-only", workflow.DefaultVersion, 1) == 1 {
		waves, err = teardownWaves(rec)
	}
	if err != nil {
		return err
	}
	if len(rec.Nodes) > 0 {
		if err := releaseNodes(ctx, rec.Nodes); err != nil {
			return err
		}
	}
	if slices.Contains(rec.Releases, ComponentKeystone) &&
		workflow.GetVersion(ctx, ChangeTeardownWaitsForCloudUsers, workflow.DefaultVersion, 1) == 1 {
		if err := waitCloudUnused(ctx, lc, rec.Namespace); err != nil {
			return err
		}
	}
	for i := len(waves) - 1; i >= 0; i-- {
		var futures []workflow.Future
		for _, name := range waves[i] {
			f, settle := workflow.NewFuture(ctx)
			workflow.Go(ctx, func(ctx workflow.Context) { settle.Set(nil, uninstall(ctx, name, rec.Namespace)) })
			futures = append(futures, f)
		}
		for _, f := range futures {
			if err := f.Get(ctx, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// ChangeTeardownWaitsForCloudUsers is the GetVersion change after which a configuration being deleted
// keeps its releases while objects of its release namespace log in with CloudsSecret.
const ChangeTeardownWaitsForCloudUsers = "configuration-teardown-waits-for-cloud-users"

// ReasonCloudInUse is Ready's reason while a configuration being deleted waits for its cloud's users.
const ReasonCloudInUse = "CloudInUse"

// waitCloudUnused waits until no object of the namespace logs in with the configuration's cloud: a Nova
// or a server deleted together with it needs Keystone and Neutron for its own teardown. The wait has no
// deadline (a person may delete the users later) and adds nothing to the history while it lasts.
func waitCloudUnused(ctx workflow.Context, lc *object.Lifecycle, namespace string) error {
	in := kube.CloudInput{Namespace: namespace, Secret: CloudsSecret}
	var users []string
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.CloudUsers, in).Get(ctx, &users); err != nil {
		return fmt.Errorf("list the users of the cloud: %w", err)
	}
	if len(users) == 0 {
		return nil
	}
	msg := kube.CloudInUseMessage(in, users) + ": the releases go once they are gone"
	lc.SetCondition(ctx, metav1.Condition{Type: lifecycle.ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonCloudInUse, Message: msg})
	lc.ShowStep(ctx, "waiting: "+msg)
	actx := object.OnKube(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    2 * time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    10 * time.Second,
		},
	})
	if err := workflow.ExecuteActivity(actx, kubeActs.WaitCloudUnused, in).Get(ctx, nil); err != nil {
		return fmt.Errorf("wait for the users of the cloud to go: %w", err)
	}
	lc.SetCondition(ctx, metav1.Condition{Type: lifecycle.ConditionReady, Status: metav1.ConditionFalse, Reason: lifecycle.ReasonTearingDown,
		Message: "the cloud's users are gone: uninstalling the releases"})
	lc.ShowStep(ctx, "")
	return nil
}

// teardownWaves orders the releases a configuration recorded into waves (uninstalled last wave first).
// A configuration that never planned a rollout (its profile failed, say) recorded none and removes none.
func teardownWaves(rec configRecord) ([][]string, error) {
	if len(rec.Releases) == 0 {
		return nil, nil
	}
	return ControlPlane.Waves(rec.Releases)
}

// preview renders the configuration's default profile (or a candidate spec standing in for one
// profile), plans the rollout against the deployed releases and diffs each rolling component's manifest.
// Nothing is applied.
func (r *configReconciler) preview(ctx workflow.Context, req PreviewRequest) (*PreviewResult, error) {
	var obj kube.Object
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.GetObject, r.ref).Get(ctx, &obj); err != nil {
		return nil, fmt.Errorf("read %s: %w", r.ref, err)
	}
	spec, err := parseConfigSpec(r.ref, obj.Spec)
	if err != nil {
		return nil, err
	}
	_, rendered, err := renderProfile(ctx, spec.DefaultProfile, req.Profile)
	if err != nil {
		return nil, err
	}
	var deployed map[string]helm.ReleaseInfo
	if err := workflow.ExecuteActivity(helmActivity(ctx, 2*time.Minute), helmActs.Releases,
		helm.ReleasesInput{Namespace: spec.ReleaseNamespace, Names: ControlPlane.Names()}).Get(ctx, &deployed); err != nil {
		return nil, fmt.Errorf("read releases in %s: %w", spec.ReleaseNamespace, err)
	}
	plan, err := PlanRollout(ControlPlane, rendered, deployed)
	if err != nil {
		return nil, err
	}
	res := &PreviewResult{Plan: plan}
	var futures []workflow.Future
	names := plan.Components()
	if err := storeValues(ctx, spec.ReleaseNamespace, names, rendered); err != nil {
		return nil, err
	}
	for _, name := range names {
		c := rendered[name]
		futures = append(futures, workflow.ExecuteActivity(helmActivity(ctx, 2*time.Minute), helmActs.Diff, helm.ReleaseInput{
			Component: name, Release: name, Namespace: spec.ReleaseNamespace, Chart: c.Chart, Values: valuesRef(spec.ReleaseNamespace, c), ValuesHash: c.ValuesHash}))
	}
	diffs := make([]helm.DiffResult, len(futures))
	for i, f := range futures {
		if err := f.Get(ctx, &diffs[i]); err != nil {
			return nil, fmt.Errorf("diff %s: %w", names[i], err)
		}
	}
	res.Diffs = BoundPreview(diffs, MaxPreviewBytes)
	return res, nil
}

// uninstall removes a component's release and the values stored for it.
func uninstall(ctx workflow.Context, name, namespace string) error {
	if err := workflow.ExecuteActivity(helmActivity(ctx, 3*time.Minute), helmActs.Uninstall,
		helm.UninstallInput{Release: name, Namespace: namespace}).Get(ctx, nil); err != nil {
		return fmt.Errorf("uninstall %s: %w", name, err)
	}
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), helmActs.PruneValues, helm.ValuesRef{Namespace: namespace, Component: name}).Get(ctx, nil); err != nil {
		return fmt.Errorf("remove the stored values of %s: %w", name, err)
	}
	return nil
}

func wavesText(waves [][]string) string {
	parts := make([]string, len(waves))
	for i, w := range waves {
		parts[i] = "[" + strings.Join(w, " ") + "]"
	}
	return strings.Join(parts, " → ")
}
