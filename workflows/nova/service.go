package nova

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/activities/openstack"
	"github.com/stackflow/stackflow/api/lifecycle"
	novav1beta1 "github.com/stackflow/stackflow/api/nova/v1beta1"
	"github.com/stackflow/stackflow/api/oslo"
	"github.com/stackflow/stackflow/workflows/object"
)

// NovaAPIWorkflow serves a NovaAPI, NovaSchedulerWorkflow a NovaScheduler, and so on: each service CR is
// deployable on its own from its Secrets (service passwords, transport URL). Its workflow renders
// <name>-config-data and <name>-scripts, checks the Secrets, runs the conductor's database migration Job,
// rolls the Deployment whenever the hash of any input changed (saying which), and reports ready replicas.
func NovaAPIWorkflow(ctx workflow.Context, in object.Input) error {
	return object.Run(ctx, in, &serviceReconciler{}, object.Options{})
}

// NovaSchedulerWorkflow serves a NovaScheduler (see NovaAPIWorkflow).
func NovaSchedulerWorkflow(ctx workflow.Context, in object.Input) error {
	return object.Run(ctx, in, &serviceReconciler{}, object.Options{})
}

// NovaConductorWorkflow serves a NovaConductor (see NovaAPIWorkflow); its db-sync Job migrates the cell's
// database (and, for cell0's superconductor, the API database) before the conductor starts.
func NovaConductorWorkflow(ctx workflow.Context, in object.Input) error {
	return object.Run(ctx, in, &serviceReconciler{}, object.Options{})
}

// NovaMetadataWorkflow serves a NovaMetadata, global or for one cell (which must exist).
func NovaMetadataWorkflow(ctx workflow.Context, in object.Input) error {
	return object.Run(ctx, in, &serviceReconciler{}, object.Options{})
}

// NovaNoVNCProxyWorkflow serves a NovaNoVNCProxy (see NovaAPIWorkflow).
func NovaNoVNCProxyWorkflow(ctx workflow.Context, in object.Input) error {
	return object.Run(ctx, in, &serviceReconciler{}, object.Options{})
}

// serviceRecord is what a service workflow keeps: the inputs' hashes in place and, for the API, the
// Keystone endpoints it registered (and as whom, for their removal).
type serviceRecord struct {
	Inputs    map[string]string      `json:"inputs,omitempty"`
	Endpoints map[string]string      `json:"endpoints,omitempty"`
	Keystone  *openstack.ServiceUser `json:"keystone,omitempty"`
}

type serviceReconciler struct{}

// resolveAuth fills what every instance takes from NovaServiceAuth and NovaServiceBase.
func resolveAuth(in *Instance, base novav1beta1.NovaServiceBase, auth novav1beta1.NovaServiceAuth) {
	in.Image = firstNonEmpty(base.ContainerImage, DefaultImages[in.Service])
	in.Replicas = 1
	if base.Replicas != nil {
		in.Replicas = *base.Replicas
	}
	in.NodeSelector = base.NodeSelector
	in.Tolerations = base.Tolerations
	in.CustomServiceConfig = base.CustomServiceConfig
	in.Secret = auth.Secret
	in.ServicePasswordKey = SecretKey(firstNonEmpty(auth.PasswordSelectors.Service, "NovaPassword"))
	in.ServiceUser = firstNonEmpty(auth.ServiceUser, "nova")
	in.KeystoneAuthURL = auth.KeystoneAuthURL
	in.Region = firstNonEmpty(auth.Region, DefaultRegion)
}

// DefaultRegion is the Keystone region of a Nova that names none.
const DefaultRegion = "RegionOne"

func apiDB(auth novav1beta1.NovaServiceAuth, names novav1beta1.DatabaseNames, host, user string) *DB {
	if host == "" {
		return nil
	}
	return &DB{Host: host, User: firstNonEmpty(user, "nova_api"), Database: firstNonEmpty(names.APIDatabaseName, "nova_api"),
		PasswordKey: SecretKey(firstNonEmpty(auth.PasswordSelectors.APIDatabase, "NovaAPIDatabasePassword"))}
}

func cellDB(auth novav1beta1.NovaServiceAuth, names novav1beta1.DatabaseNames, cell, host, user string) *DB {
	if host == "" {
		return nil
	}
	return &DB{Host: host, User: firstNonEmpty(user, "nova_cell"), Database: firstNonEmpty(names.CellDatabaseName, CellDatabaseName(cell)),
		PasswordKey: SecretKey(firstNonEmpty(auth.PasswordSelectors.CellDatabase, "NovaCellDatabasePassword"))}
}

// ServiceInstance resolves a service CR's spec into the instance it runs. Pure.
func ServiceInstance(ref lifecycle.ObjectRef, raw json.RawMessage) (Instance, error) {
	in := Instance{Name: ref.Name, Namespace: ref.Namespace, Owner: *owner(ref)}
	decode := func(v any) error {
		if err := json.Unmarshal(raw, v); err != nil {
			return specError(ReasonInvalidSpec, fmt.Sprintf("spec of %s: %v", ref, err))
		}
		return nil
	}
	switch ref.Kind {
	case KindNovaAPI:
		var s novav1beta1.NovaAPISpec
		if err := decode(&s); err != nil {
			return in, err
		}
		in.Service = API
		resolveAuth(&in, s.NovaServiceBase, s.NovaServiceAuth)
		in.APIDatabase = apiDB(s.NovaServiceAuth, s.DatabaseNames, s.APIDatabaseHostname, s.APIDatabaseUser)
		in.CellDatabase = cellDB(s.NovaServiceAuth, s.DatabaseNames, novav1beta1.Cell0Name, s.Cell0DatabaseHostname, firstNonEmpty(s.Cell0DatabaseUser, "nova_cell0"))
		in.TransportURLSecret = s.TransportURLSecret
		in.Port = listenPort(s.CustomServiceConfig, "DEFAULT", "osapi_compute_listen_port", DefaultAPIPort)
		in.Cells = s.Cells
	case KindNovaScheduler:
		var s novav1beta1.NovaSchedulerSpec
		if err := decode(&s); err != nil {
			return in, err
		}
		in.Service = Scheduler
		resolveAuth(&in, s.NovaServiceBase, s.NovaServiceAuth)
		in.APIDatabase = apiDB(s.NovaServiceAuth, s.DatabaseNames, s.APIDatabaseHostname, s.APIDatabaseUser)
		in.CellDatabase = cellDB(s.NovaServiceAuth, s.DatabaseNames, novav1beta1.Cell0Name, s.Cell0DatabaseHostname, firstNonEmpty(s.Cell0DatabaseUser, "nova_cell0"))
		in.TransportURLSecret = s.TransportURLSecret
		in.Cells = s.Cells
	case KindNovaConductor:
		var s novav1beta1.NovaConductorSpec
		if err := decode(&s); err != nil {
			return in, err
		}
		in.Service = Conductor
		resolveAuth(&in, s.NovaServiceBase, s.NovaServiceAuth)
		in.CellName = s.CellName
		in.APIDatabase = apiDB(s.NovaServiceAuth, s.DatabaseNames, s.APIDatabaseHostname, s.APIDatabaseUser)
		in.CellDatabase = cellDB(s.NovaServiceAuth, s.DatabaseNames, s.CellName, s.CellDatabaseHostname, s.CellDatabaseUser)
		in.TransportURLSecret = s.TransportURLSecret
	case KindNovaMetadata:
		var s novav1beta1.NovaMetadataSpec
		if err := decode(&s); err != nil {
			return in, err
		}
		in.Service = Metadata
		resolveAuth(&in, s.NovaServiceBase, s.NovaServiceAuth)
		in.CellName = s.CellName
		in.MetadataSecretKey = SecretKey(firstNonEmpty(s.PasswordSelectors.MetadataSecret, "MetadataSecret"))
		// The global service reaches the API database and cell0's (its service record), a per-cell one
		// its cell's.
		cell := firstNonEmpty(s.CellName, novav1beta1.Cell0Name)
		in.CellDatabase = cellDB(s.NovaServiceAuth, s.DatabaseNames, cell, s.CellDatabaseHostname, s.CellDatabaseUser)
		if s.CellName == "" {
			in.APIDatabase = apiDB(s.NovaServiceAuth, s.DatabaseNames, s.APIDatabaseHostname, s.APIDatabaseUser)
		}
		in.TransportURLSecret = s.TransportURLSecret
		in.Port = listenPort(s.CustomServiceConfig, "DEFAULT", "metadata_listen_port", DefaultMetadataPort)
	case KindNovaNoVNCProxy:
		var s novav1beta1.NovaNoVNCProxySpec
		if err := decode(&s); err != nil {
			return in, err
		}
		in.Service = NoVNCProxy
		resolveAuth(&in, s.NovaServiceBase, s.NovaServiceAuth)
		in.CellName = s.CellName
		in.CellDatabase = cellDB(s.NovaServiceAuth, s.DatabaseNames, s.CellName, s.CellDatabaseHostname, s.CellDatabaseUser)
		in.TransportURLSecret = s.TransportURLSecret
		in.Port = listenPort(s.CustomServiceConfig, "vnc", "novncproxy_port", DefaultNoVNCProxyPort)
	default:
		return in, specError(ReasonInvalidSpec, "not a Nova service kind: "+ref.Kind)
	}
	if in.CustomServiceConfig != "" {
		if _, err := oslo.ParseServiceConfig(in.CustomServiceConfig); err != nil {
			return in, specError(ReasonInvalidSpec, fmt.Sprintf("customServiceConfig is not an oslo.config INI snippet: %v", err))
		}
	}
	return in, nil
}

// listenPort is the port a customServiceConfig sets for option, or def.
func listenPort(custom, section, option string, def int32) int32 {
	ini, err := oslo.ParseServiceConfig(custom)
	if err != nil {
		return def
	}
	var p int32
	if _, err := fmt.Sscanf(ini[section][option], "%d", &p); err == nil && p > 0 {
		return p
	}
	return def
}

// secretKeys are the keys the instance reads, by Secret.
func (in Instance) secretKeys() map[string][]string {
	out := map[string][]string{}
	add := func(secret, key string) {
		if secret != "" && key != "" && !slices.Contains(out[secret], key) {
			out[secret] = append(out[secret], key)
		}
	}
	_, c := in.Config()
	//workflowcheck:ignore -- the keys are sorted below
	for _, opts := range c {
		for _, v := range opts {
			for _, ref := range templateRefs(v) {
				add(ref[0], ref[1])
			}
		}
	}
	//workflowcheck:ignore -- sorts each list in place
	for _, keys := range out {
		slices.Sort(keys)
	}
	return out
}

// prepare renders the instance's ConfigMaps and returns the hash of its inputs, waiting (visibly) for
// the Secrets it reads. It records the new inputs and says in ServiceConfigReady which changed.
func prepare(ctx workflow.Context, lc *object.Lifecycle, in Instance, rec *serviceRecord) (string, error) {
	var hashes kube.SecretHashes
	err := poll(ctx, lc, ConditionInputsReady, func(ctx workflow.Context) (bool, string, error) {
		if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.HashSecrets,
			kube.SecretHashesInput{Namespace: in.Namespace, Keys: in.secretKeys()}).Get(ctx, &hashes); err != nil {
			return false, "", err
		}
		if len(hashes.Missing) > 0 {
			lc.SetCondition(ctx, metav1.Condition{Type: ConditionInputsReady, Status: metav1.ConditionFalse, Reason: ReasonSecretMissing,
				Message: "waiting for Secret(s) " + strings.Join(hashes.Missing, ", ") + " in " + in.Namespace})
			return false, "", nil
		}
		return true, "", nil
	})
	if err != nil {
		return "", err
	}
	lc.SetCondition(ctx, metav1.Condition{Type: ConditionInputsReady, Status: metav1.ConditionTrue, Reason: "SecretsPresent",
		Message: fmt.Sprintf("%d Secret(s) present", len(hashes.Hashes))})
	configData, scripts := in.ConfigData(), in.Scripts()
	labels := in.labels()
	// In a fixed order: a replay pairs these two activities of one type with the history by position
	// alone, so an order that changed between runs would skip one ConfigMap (a map's range did).
	for _, cm := range []struct {
		name string
		data map[string]string
	}{{ConfigDataName(in.Name), configData}, {ScriptsName(in.Name), scripts}} {
		if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.ApplyConfigMap,
			kube.ConfigMapInput{Namespace: in.Namespace, Name: cm.name, Data: cm.data, Labels: labels, Owner: &in.Owner}).Get(ctx, nil); err != nil {
			return "", fmt.Errorf("ConfigMap %s: %w", cm.name, err)
		}
	}
	hash, inputs := ConfigHash(configData, scripts, hashes.Hashes)
	msg := "configuration " + hash + " rendered"
	if changed := ChangedInputs(rec.Inputs, inputs); len(rec.Inputs) > 0 && len(changed) > 0 {
		msg = fmt.Sprintf("configuration %s: changed %s", hash, strings.Join(changed, ", "))
	}
	lc.SetCondition(ctx, metav1.Condition{Type: novav1beta1.ConditionServiceConfigured, Status: metav1.ConditionTrue, Reason: "Rendered", Message: msg})
	rec.Inputs = inputs
	_ = lc.SetField(ctx, "hash", hash)
	_ = lc.SetField(ctx, "inputHashes", inputs)
	_ = lc.SetField(ctx, "configMaps", []string{ConfigDataName(in.Name), ScriptsName(in.Name)})
	return hash, nil
}

// ChangeRerunFailedJobs is the GetVersion change after which each run of a Job deletes the Job of the
// same name when it failed, so a retry runs it again.
const ChangeRerunFailedJobs = "nova-rerun-failed-jobs"

// runJob runs one of the instance's Jobs to its end, reporting it in cond; a failed Job fails the
// reconcile with the Job's own message.
func runJob(ctx workflow.Context, lc *object.Lifecycle, in Instance, job, script, hash, cond string, env map[string]string) (*kube.JobState, error) {
	// A teardown's Job (unmapping a cell) runs while the object is being deleted: it shows its step
	// without holding for a pause or refusing.
	if lc.Deleting() {
		lc.ShowStep(ctx, "job "+in.Name+"-"+job)
	} else if err := lc.Step(ctx, "job "+in.Name+"-"+job); err != nil {
		return nil, err
	}
	lc.SetCondition(ctx, metav1.Condition{Type: cond, Status: metav1.ConditionFalse, Reason: "Running", Message: "Job " + in.Name + "-" + job + " running"})
	spec := in.Job(job, script, hash, env)
	if workflow.GetVersion(ctx, ChangeRerunFailedJobs, workflow.DefaultVersion, 1) == 1 {
		// Each run of a Job (the first, or a retry of what failed) starts it afresh if it failed before.
		ref := kube.JobRef{Namespace: spec.Namespace, Name: spec.Name}
		if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.DeleteFailedJob, ref).Get(ctx, nil); err != nil {
			return nil, fmt.Errorf("delete the failed Job %s: %w", spec.Name, err)
		}
	}
	var st kube.JobState
	if err := waitShowing(ctx, lc, cond, kube.ErrJobRunning, 20*time.Minute, &st, kubeActs.RunJob, kube.JobInput{Job: spec}); err != nil {
		msg := object.FailureMessage(err)
		lc.SetCondition(ctx, metav1.Condition{Type: cond, Status: metav1.ConditionFalse, Reason: ReasonJobFailed, Message: msg})
		return nil, temporal.NewNonRetryableApplicationError(msg, ReasonJobFailed, err)
	}
	if st.Failed {
		msg := fmt.Sprintf("Job %s-%s failed: %s", in.Name, job, st.Message)
		lc.SetCondition(ctx, metav1.Condition{Type: cond, Status: metav1.ConditionFalse, Reason: ReasonJobFailed, Message: msg})
		return &st, temporal.NewNonRetryableApplicationError(msg, ReasonJobFailed, nil)
	}
	lc.SetCondition(ctx, metav1.Condition{Type: cond, Status: metav1.ConditionTrue, Reason: "Completed", Message: "Job " + in.Name + "-" + job + " completed"})
	return &st, nil
}

func (r *serviceReconciler) Reconcile(ctx workflow.Context, lc *object.Lifecycle, obj *kube.Object) error {
	in, err := ServiceInstance(lc.Ref, obj.Spec)
	if err != nil {
		return err
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, lifecycle.SAComponent.ValueSet(string(in.Service)))
	if in.CellName != "" {
		_ = workflow.UpsertTypedSearchAttributes(ctx, lifecycle.SACell.ValueSet(in.CellName))
	}
	if in.Service == Metadata && in.CellName != "" {
		if err := requireCell(ctx, lc, in.CellName); err != nil {
			return err
		}
	}
	var rec serviceRecord
	if err := lc.Load(&rec); err != nil {
		return err
	}
	if err := lc.Step(ctx, "configuration"); err != nil {
		return err
	}
	hash, err := prepare(ctx, lc, in, &rec)
	if err != nil {
		return err
	}
	if err := lc.Save(rec); err != nil {
		return err
	}
	if in.Service == Conductor {
		if _, err := runJob(ctx, lc, in, "db-sync", "db-sync.sh", hash, novav1beta1.ConditionDBSynced, nil); err != nil {
			return err
		}
	}
	if err := lc.Step(ctx, "deployment "+in.Name+" ("+hash+")"); err != nil {
		return err
	}
	var address string // where the service answers: its Service's ClusterIP, or before that change its pod's
	if in.Listens() && workflow.GetVersion(ctx, ChangeServiceAddress, workflow.DefaultVersion, 1) == 1 {
		var svc kube.ServiceState
		if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.ApplyService, kube.ServiceInput{Service: in.KubeService()}).Get(ctx, &svc); err != nil {
			return fmt.Errorf("Service %s: %w", in.Name, err)
		}
		address = svc.ClusterIP
	}
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.ApplyDeployment, kube.DeploymentInput{Deployment: in.Deployment(hash)}).Get(ctx, nil); err != nil {
		return fmt.Errorf("Deployment %s: %w", in.Name, err)
	}
	lc.SetCondition(ctx, metav1.Condition{Type: novav1beta1.ConditionDeploymentReady, Status: metav1.ConditionFalse, Reason: "RollingOut",
		Message: fmt.Sprintf("rolling out %d replica(s) with configuration %s", in.Replicas, hash)})
	var dep kube.DeploymentState
	if err := waitShowing(ctx, lc, novav1beta1.ConditionDeploymentReady, kube.ErrNotRolledOut, 15*time.Minute, &dep, kubeActs.WaitDeployment, in.Namespace, in.Name); err != nil {
		msg := object.FailureMessage(err)
		lc.SetCondition(ctx, metav1.Condition{Type: novav1beta1.ConditionDeploymentReady, Status: metav1.ConditionFalse, Reason: "NotReady", Message: msg})
		return temporal.NewNonRetryableApplicationError(msg, "DeploymentNotReady", err)
	}
	_ = lc.SetField(ctx, "readyCount", dep.Ready)
	lc.SetCondition(ctx, metav1.Condition{Type: novav1beta1.ConditionDeploymentReady, Status: metav1.ConditionTrue, Reason: "RolledOut",
		Message: fmt.Sprintf("%d/%d replica(s) ready with configuration %s", dep.Ready, dep.Replicas, hash)})
	if address == "" && len(dep.PodIPs) > 0 {
		address = dep.PodIPs[0]
	}
	if in.Service == Metadata && address != "" && workflow.GetVersion(ctx, ChangeMetadataEndpoint, workflow.DefaultVersion, 1) == 1 {
		_ = lc.SetField(ctx, "endpoint", fmt.Sprintf("http://%s", net.JoinHostPort(address, strconv.Itoa(int(in.Port)))))
	}
	if in.Service == API {
		if err := registerEndpoints(ctx, lc, in, address, &rec); err != nil {
			return err
		}
	}
	return nil
}

// registerEndpoints puts the compute API in Keystone's catalog, public and internal, in the instance's
// region, at address (its Service's), and records the endpoints for the teardown.
func registerEndpoints(ctx workflow.Context, lc *object.Lifecycle, in Instance, address string, rec *serviceRecord) error {
	if err := lc.Step(ctx, "keystone endpoints"); err != nil {
		return err
	}
	if address == "" {
		return specError("NoPodAddress", "the API's pods report no address to register in Keystone")
	}
	url := fmt.Sprintf("http://%s/v2.1", net.JoinHostPort(address, strconv.Itoa(int(in.Port))))
	auth := openstack.ServiceUser{AuthURL: in.KeystoneAuthURL, User: in.ServiceUser,
		Password: kube.SecretKeyRef{Namespace: in.Namespace, Name: in.Secret, Key: string(in.ServicePasswordKey)}}
	var owned []string
	for _, id := range workflow.DeterministicKeys(rec.Endpoints) {
		owned = append(owned, rec.Endpoints[id])
	}
	var res openstack.EndpointsResult
	err := workflow.ExecuteActivity(infraActivity(ctx), osActs.EnsureEndpoints, openstack.EndpointsInput{
		Auth: auth, ServiceType: "compute", ServiceName: "nova", Region: in.Region,
		URLs: map[string]string{"public": url, "internal": url}, Owned: owned,
	}).Get(ctx, &res)
	if err != nil {
		lc.SetCondition(ctx, metav1.Condition{Type: novav1beta1.ConditionEndpointRegistered, Status: metav1.ConditionFalse, Reason: object.FailureReason(err), Message: object.FailureMessage(err)})
		return fmt.Errorf("keystone endpoints of %s: %w", in.Name, err)
	}
	rec.Endpoints, rec.Keystone = res.IDs, &auth
	if err := lc.Save(*rec); err != nil {
		return err
	}
	_ = lc.SetField(ctx, "endpoint", url)
	lc.SetCondition(ctx, metav1.Condition{Type: novav1beta1.ConditionEndpointRegistered, Status: metav1.ConditionTrue, Reason: "Registered",
		Message: fmt.Sprintf("compute endpoints (public, internal) %s registered in region %s", url, in.Region)})
	return nil
}

// requireCell refuses a per-cell service of a cell no NovaCell of the namespace serves.
func requireCell(ctx workflow.Context, lc *object.Lifecycle, cell string) error {
	var cells []kube.ListedObject
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.ListObjects, kube.ListInput{Ref: novaRef(KindNovaCell, lc.Ref.Namespace, "")}).Get(ctx, &cells); err != nil {
		return fmt.Errorf("list NovaCells: %w", err)
	}
	for _, c := range cells {
		var spec novav1beta1.NovaCellSpec
		if json.Unmarshal(c.Spec, &spec) == nil && spec.CellName == cell && !c.Deleting {
			return nil
		}
	}
	msg := fmt.Sprintf("no NovaCell in %s serves cell %q", lc.Ref.Namespace, cell)
	lc.SetCondition(ctx, metav1.Condition{Type: ConditionInputsReady, Status: metav1.ConditionFalse, Reason: ReasonUnknownCell, Message: msg})
	return specError(ReasonUnknownCell, msg)
}

// Teardown removes the Deployment, the Jobs and the ConfigMaps (waiting for the Deployment to go, so its
// processes are gone before a parent drops their database).
func (r *serviceReconciler) Teardown(ctx workflow.Context, lc *object.Lifecycle) error {
	ns, name := lc.Ref.Namespace, lc.Ref.Name
	var rec serviceRecord
	if err := lc.Load(&rec); err != nil {
		return err
	}
	if len(rec.Endpoints) > 0 && rec.Keystone != nil {
		lc.ShowStep(ctx, "remove keystone endpoints")
		var ids []string
		for _, k := range workflow.DeterministicKeys(rec.Endpoints) {
			ids = append(ids, rec.Endpoints[k])
		}
		err := workflow.ExecuteActivity(infraActivity(ctx), osActs.DeleteEndpoints, openstack.DeleteEndpointsInput{Auth: *rec.Keystone, IDs: ids}).Get(ctx, nil)
		var app *temporal.ApplicationError
		if err != nil && !(errors.As(err, &app) && app.Type() == kube.ErrSecretMissing) {
			return fmt.Errorf("remove keystone endpoints of %s: %w", lc.Ref, err)
		}
		if err != nil {
			// The service user's Secret went first (its namespace is being deleted): the endpoints stay.
			workflow.GetLogger(ctx).Warn("keystone endpoints left: the service user's Secret is gone", "object", lc.Ref.String(), "endpoints", ids)
		}
		rec.Endpoints = nil
		if err := lc.Save(rec); err != nil {
			return err
		}
	}
	refs := []lifecycle.ObjectRef{deploymentRef(ns, name), jobRef(ns, name+"-db-sync"), configMapRef(ns, ConfigDataName(name)), configMapRef(ns, ScriptsName(name))}
	if workflow.GetVersion(ctx, ChangeTeardownService, workflow.DefaultVersion, 1) == 1 {
		// Every kind of service: deleting a Service that never existed is a no-op.
		refs = append(refs, serviceRef(ns, name))
	}
	return deleteAll(ctx, refs...)
}
