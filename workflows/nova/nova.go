package nova

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/activities/database"
	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/activities/messagebus"
	"github.com/stackflow/stackflow/activities/openstack"
	"github.com/stackflow/stackflow/api/lifecycle"
	novav1beta1 "github.com/stackflow/stackflow/api/nova/v1beta1"
	"github.com/stackflow/stackflow/workflows/object"
)

// NovaWorkflow serves a Nova: the whole control plane. It hands one Secret down (<nova>-secret: the
// service password copied from spec.secret, generated database and message-bus passwords), creates the
// databases and users (in the database server of every apiDatabase/cellDatabase naming an adminSecret)
// and vhosts and users (on the broker of every message bus naming one, writing its transportURLSecret),
// then cell0 (its superconductor migrates the API database), then the API, scheduler, global metadata
// service and the other cells side by side. The API and the scheduler are given the mapped cells
// (they read the mappings once, at start): a cell mapped or unmapped restarts them. A cell removed from
// cellTemplates is torn down once no NovaExternalCompute uses it (until then the Nova says which do):
// unmapped, the API and the scheduler restarted without it, then its database, user and vhost removed.
func NovaWorkflow(ctx workflow.Context, in object.Input) error {
	return object.Run(ctx, in, &novaReconciler{}, object.Options{})
}

// novaRecord is what a Nova created, for teardown: every database and vhost is recorded before it is
// created, so a crash in between leaves nothing the teardown does not know of.
type novaRecord struct {
	Cells []string `json:"cells,omitempty"`
	// Unmapped are cells removed from cellTemplates whose NovaCell is gone (so they are unmapped) and
	// whose database and vhost are still to be removed.
	Unmapped  []string                          `json:"unmapped,omitempty"`
	Services  []string                          `json:"services,omitempty"`
	Databases map[string]database.DatabaseInput `json:"databases,omitempty"`
	Vhosts    map[string]messagebus.VhostInput  `json:"vhosts,omitempty"`
	// ServiceUsers are the Keystone users the Nova made as keystoneAdminSecret's administrator, recorded
	// before they are made: the current one, and one the spec replaced until the services have moved
	// off it.
	ServiceUsers []openstack.ServiceUserInput `json:"serviceUsers,omitempty"`
}

type novaReconciler struct{}

// HandedDownSecret is the Secret a Nova gives its cells and services.
func HandedDownSecret(nova string) string { return nova + "-secret" }

// Keys of the handed-down Secret.
const (
	KeyService     = "NovaPassword"
	KeyAPIDatabase = "NovaAPIDatabasePassword"
	KeyMetadata    = "MetadataSecret"
)

// CellDatabaseKey is the key of a cell's database password in the handed-down Secret.
func CellDatabaseKey(cell string) string { return "NovaCellDatabasePassword-" + cell }

// NovaPlan is what a Nova spec resolves to. Pure (NovaPlanFor), so it is tested on tables.
type NovaPlan struct {
	Databases map[string]database.DatabaseInput
	// Copied are the database passwords that come from spec.secret (unmanaged databases): handed-down
	// key → key of spec.secret.
	Copied map[string]string
	Vhosts map[string]messagebus.VhostInput
	// Cells are the NovaCell specs by cell name; Services the other children by kind/name.
	Cells    map[string]novav1beta1.NovaCellSpec
	Services map[string]any
}

// NovaPlanFor resolves a Nova's spec; it refuses specs it cannot serve (two managed databases of one
// server sharing a user).
func NovaPlanFor(ref lifecycle.ObjectRef, s novav1beta1.NovaSpec) (*NovaPlan, error) {
	ns, name := ref.Namespace, ref.Name
	secret := HandedDownSecret(name)
	p := &NovaPlan{Databases: map[string]database.DatabaseInput{}, Copied: map[string]string{}, Vhosts: map[string]messagebus.VhostInput{},
		Cells: map[string]novav1beta1.NovaCellSpec{}, Services: map[string]any{}}
	sel := s.PasswordSelectors
	addDB := func(id string, a novav1beta1.DatabaseAccess, defDB, key, userKey string) string {
		db := firstNonEmpty(a.Database, defDB)
		user := firstNonEmpty(a.User, db)
		if a.AdminSecret == "" {
			p.Copied[key] = userKey
		} else {
			p.Databases[id] = database.DatabaseInput{
				Server:   database.DatabaseServer{Host: a.Hostname, Port: a.Port, Namespace: ns, AdminSecret: a.AdminSecret},
				Database: db, User: user, Password: kube.SecretKeyRef{Namespace: ns, Name: secret, Key: key},
				Owner: owner(ref)}
		}
		return db
	}
	apiDBName := addDB("api", s.APIDatabase, "nova_api", KeyAPIDatabase, firstNonEmpty(sel.APIDatabase, "NovaAPIDatabasePassword"))
	addBus := func(id string, b novav1beta1.MessageBusAccess) {
		if b.AdminSecret == "" {
			return
		}
		vhost := ns + "-" + name + "-" + id
		p.Vhosts[id] = messagebus.VhostInput{Server: messagebus.MessageBusServer{Namespace: ns, AdminSecret: b.AdminSecret}, Vhost: vhost, User: vhost,
			Password:     kube.SecretKeyRef{Namespace: ns, Name: secret, Key: "MessageBusPassword-" + id},
			TransportURL: kube.SecretKeyRef{Namespace: ns, Name: b.TransportURLSecret, Key: "transport_url"}, Owner: owner(ref)}
	}
	addBus("api", s.APIMessageBus)
	auth := s.NovaServiceAuth
	auth.Secret = secret
	// A template's own placement and image win; the Nova's fill what it leaves unset.
	withDefaults := func(base novav1beta1.NovaServiceBase) novav1beta1.NovaServiceBase {
		if len(base.NodeSelector) == 0 {
			base.NodeSelector = s.NodeSelector
		}
		if len(base.Tolerations) == 0 {
			base.Tolerations = s.Tolerations
		}
		if base.ContainerImage == "" {
			base.ContainerImage = s.ContainerImage
		}
		return base
	}
	apiUser := firstNonEmpty(s.APIDatabase.User, apiDBName)
	for _, cell := range slices.Sorted(func(yield func(string) bool) {
		//workflowcheck:ignore -- reviewed: the result does not depend on the map's order
		for c := range s.CellTemplates {
			if !yield(c) {
				return
			}
		}
	}) {
		t := s.CellTemplates[cell]
		key := CellDatabaseKey(cell)
		// Unmanaged cells all read the one cell password key of spec.secret.
		db := addDB("cell-"+cell, t.CellDatabase, CellDatabaseName(cell), key, firstNonEmpty(sel.CellDatabase, "NovaCellDatabasePassword"))
		transport := s.APIMessageBus.TransportURLSecret
		if cell != novav1beta1.Cell0Name && t.CellMessageBus != nil {
			transport = t.CellMessageBus.TransportURLSecret
			addBus(cell, *t.CellMessageBus)
		}
		cauth := auth
		cauth.PasswordSelectors = novav1beta1.PasswordSelectors{Service: KeyService, APIDatabase: KeyAPIDatabase, CellDatabase: key, MetadataSecret: KeyMetadata}
		p.Cells[cell] = novav1beta1.NovaCellSpec{
			NovaServiceAuth: cauth, DatabaseNames: novav1beta1.DatabaseNames{APIDatabaseName: apiDBName, CellDatabaseName: db},
			CellName: cell, CellDatabaseHostname: t.CellDatabase.Hostname, CellDatabaseUser: firstNonEmpty(t.CellDatabase.User, db),
			// Every cell gets the API database's address for its mapping Job; hasAPIAccess alone gives
			// its services upcalls.
			APIDatabaseHostname: s.APIDatabase.Hostname, APIDatabaseUser: apiUser, HasAPIAccess: t.HasAPIAccess,
			TransportURLSecret: transport, ConductorServiceTemplate: withDefaults(t.ConductorServiceTemplate),
			MetadataServiceTemplate:   novav1beta1.NovaMetadataTemplate{Enabled: t.MetadataServiceTemplate.Enabled, NovaServiceBase: withDefaults(t.MetadataServiceTemplate.NovaServiceBase)},
			NoVNCProxyServiceTemplate: novav1beta1.NovaNoVNCProxyTemplate{Enabled: t.NoVNCProxyServiceTemplate.Enabled, NovaServiceBase: withDefaults(t.NoVNCProxyServiceTemplate.NovaServiceBase)},
		}
	}
	// Two managed databases of one server cannot share a user: each has its own password.
	users := map[string]string{}
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		//workflowcheck:ignore -- reviewed: the result does not depend on the map's order
		for k := range p.Databases {
			if !yield(k) {
				return
			}
		}
	}) {
		d := p.Databases[id]
		k := d.Server.Host + "/" + d.User
		if other, ok := users[k]; ok {
			return nil, specError(ReasonInvalidSpec, fmt.Sprintf("databases %s and %s on %s both name user %s: give each its own user", other, id, d.Server.Host, d.User))
		}
		users[k] = id
	}
	// The top-level services reach the API database and cell0's (their service records).
	cell0 := p.Cells[novav1beta1.Cell0Name]
	apiAuth := auth
	apiAuth.PasswordSelectors = novav1beta1.PasswordSelectors{Service: KeyService, APIDatabase: KeyAPIDatabase,
		CellDatabase: CellDatabaseKey(novav1beta1.Cell0Name), MetadataSecret: KeyMetadata}
	names := novav1beta1.DatabaseNames{APIDatabaseName: apiDBName, CellDatabaseName: cell0.CellDatabaseName}
	cell0DB := novav1beta1.Cell0Database{Cell0DatabaseHostname: cell0.CellDatabaseHostname, Cell0DatabaseUser: cell0.CellDatabaseUser}
	p.Services[KindNovaAPI+"/"+name+"-api"] = novav1beta1.NovaAPISpec{NovaServiceBase: withDefaults(s.APIServiceTemplate), NovaServiceAuth: apiAuth, DatabaseNames: names,
		APIDatabaseHostname: s.APIDatabase.Hostname, APIDatabaseUser: apiUser, Cell0Database: cell0DB, TransportURLSecret: s.APIMessageBus.TransportURLSecret}
	p.Services[KindNovaScheduler+"/"+name+"-scheduler"] = novav1beta1.NovaSchedulerSpec{NovaServiceBase: withDefaults(s.SchedulerServiceTemplate), NovaServiceAuth: apiAuth, DatabaseNames: names,
		APIDatabaseHostname: s.APIDatabase.Hostname, APIDatabaseUser: apiUser, Cell0Database: cell0DB, TransportURLSecret: s.APIMessageBus.TransportURLSecret}
	if m := s.MetadataServiceTemplate; m.Enabled == nil || *m.Enabled {
		p.Services[KindNovaMetadata+"/"+name+"-metadata"] = novav1beta1.NovaMetadataSpec{NovaServiceBase: withDefaults(m.NovaServiceBase), NovaServiceAuth: apiAuth, DatabaseNames: names,
			APIDatabaseHostname: s.APIDatabase.Hostname, APIDatabaseUser: apiUser, CellDatabaseHostname: cell0.CellDatabaseHostname, CellDatabaseUser: cell0.CellDatabaseUser,
			TransportURLSecret: s.APIMessageBus.TransportURLSecret}
	}
	return p, nil
}

func cellCR(nova, cell string) string { return nova + "-" + cell }

func (r *novaReconciler) Reconcile(ctx workflow.Context, lc *object.Lifecycle, obj *kube.Object) error {
	var s novav1beta1.NovaSpec
	if err := json.Unmarshal(obj.Spec, &s); err != nil {
		return specError(ReasonInvalidSpec, fmt.Sprintf("spec of %s: %v", lc.Ref, err))
	}
	plan, err := NovaPlanFor(lc.Ref, s)
	if err != nil {
		lc.SetCondition(ctx, metav1.Condition{Type: ConditionInputsReady, Status: metav1.ConditionFalse, Reason: ReasonInvalidSpec, Message: object.FailureMessage(err)})
		return err
	}
	n := &novaRun{lc: lc, spec: s, plan: plan, ns: lc.Ref.Namespace, name: lc.Ref.Name, secret: HandedDownSecret(lc.Ref.Name)}
	if err := lc.Load(&n.rec); err != nil {
		return err
	}
	if n.rec.Databases == nil {
		n.rec.Databases, n.rec.Vhosts = map[string]database.DatabaseInput{}, map[string]messagebus.VhostInput{}
	}
	// The steps in order, each named as the status shows it. Only a spec naming keystoneAdminSecret (a
	// field newer than the runs recorded before it) has the service-user step.
	type step struct {
		name string
		run  func(workflow.Context) error
	}
	steps := []step{{"secrets", n.handDownSecrets}}
	if s.KeystoneAdminSecret != "" {
		steps = append(steps, step{"service user", n.ensureServiceUser})
	}
	steps = append(steps, step{"databases", n.ensureDatabases}, step{"message buses", n.ensureMessageBuses},
		step{"cell0", n.deployCell0}, step{"cells, then services", n.deployCellsThenServices})
	for _, step := range steps {
		if err := lc.Step(ctx, step.name); err != nil {
			return err
		}
		if err := step.run(ctx); err != nil {
			return err
		}
	}
	if err := n.removeDroppedCells(ctx); err != nil {
		return err
	}
	if err := n.removeReplacedServiceUsers(ctx); err != nil {
		return err
	}
	s = n.spec
	// Only a spec with flavors (a field newer than the runs recorded before it) takes this path.
	if len(s.Flavors) > 0 && workflow.GetVersion(ctx, ChangeFlavors, workflow.DefaultVersion, 1) == 1 {
		if err := lc.Step(ctx, "flavors"); err != nil {
			return err
		}
		if err := n.ensureFlavors(ctx); err != nil {
			return err
		}
	}
	var cells []novav1beta1.CellSummary
	for _, cell := range workflow.DeterministicKeys(n.plan.Cells) {
		cells = append(cells, novav1beta1.CellSummary{Name: cell, NovaCell: cellCR(n.name, cell), Ready: true})
	}
	_ = lc.SetField(ctx, "cells", cells)
	lc.SetCondition(ctx, metav1.Condition{Type: ConditionCellsReady, Status: metav1.ConditionTrue, Reason: "Ready", Message: fmt.Sprintf("%d cell(s) ready", len(cells))})
	return nil
}

// novaRun is one reconcile of a Nova: its spec, the plan made of it and what the workflow recorded.
type novaRun struct {
	lc               *object.Lifecycle
	spec             novav1beta1.NovaSpec
	plan             *NovaPlan
	rec              novaRecord
	ns, name, secret string
}

// handDownSecrets waits for the user's Secret, then hands its keys down into the Secret every service
// reads, with a generated metadata secret.
func (n *novaRun) handDownSecrets(ctx workflow.Context) error {
	lc, s, plan, ns, secret := n.lc, n.spec, n.plan, n.ns, n.secret
	svcKey := firstNonEmpty(s.PasswordSelectors.Service, "NovaPassword")
	err := poll(ctx, lc, ConditionInputsReady, func(ctx workflow.Context) (bool, string, error) {
		var p kube.SecretPresence
		keys := []string{svcKey}
		//workflowcheck:ignore -- reviewed: the result does not depend on the map's order
		for _, k := range plan.Copied {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.CheckSecret, kube.SecretCheck{Namespace: ns, Name: s.Secret, Keys: keys}).Get(ctx, &p); err != nil {
			return false, "", err
		}
		if !p.Ready() {
			lc.SetCondition(ctx, metav1.Condition{Type: ConditionInputsReady, Status: metav1.ConditionFalse, Reason: ReasonSecretMissing,
				Message: fmt.Sprintf("waiting for Secret %s/%s with key(s) %s", ns, s.Secret, strings.Join(keys, ", "))})
			return false, "", nil
		}
		return true, "", nil
	})
	if err != nil {
		return err
	}
	copyKeys := map[string]string{KeyService: svcKey, KeyMetadata: firstNonEmpty(s.PasswordSelectors.MetadataSecret, "MetadataSecret")}
	//workflowcheck:ignore -- reviewed: the result does not depend on the map's order
	for k, v := range plan.Copied {
		copyKeys[k] = v
	}
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.CopySecretKeys, kube.CopySecretKeysInput{
		From: kube.SecretKeyRef{Namespace: ns, Name: s.Secret}, Keys: copyKeys, Optional: []string{KeyMetadata},
		To: kube.SecretKeyRef{Namespace: ns, Name: secret}, Owner: owner(lc.Ref)}).Get(ctx, nil); err != nil {
		return fmt.Errorf("hand down Secret %s: %w", secret, err)
	}
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.GenerateSecretKey, kube.SecretKeyRef{Namespace: ns, Name: secret, Key: KeyMetadata}, owner(lc.Ref)).Get(ctx, nil); err != nil {
		return fmt.Errorf("metadata secret: %w", err)
	}
	lc.SetCondition(ctx, metav1.Condition{Type: ConditionInputsReady, Status: metav1.ConditionTrue, Reason: "SecretsPresent", Message: "Secret " + secret + " handed down"})
	if s.KeystoneAdminSecret == "" {
		// Keystone's endpoint is the spec's; a service-user step resolves it otherwise, and writes then.
		return n.writeServiceClouds(ctx)
	}
	return nil
}

// writeServiceClouds writes a clouds.yaml of the service user into the handed-down Secret (keys
// clouds.yaml and cloud, the cloud named after the Nova): the data-plane services of its cells reach
// this Nova's cloud with it (openstack.ServiceCloud). Runs recorded before it wrote none.
func (n *novaRun) writeServiceClouds(ctx workflow.Context) error {
	if workflow.GetVersion(ctx, ChangeServiceClouds, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	in := kube.ServiceCloudsInput{Password: kube.SecretKeyRef{Namespace: n.ns, Name: n.secret, Key: KeyService}, Cloud: n.name,
		AuthURL: n.spec.KeystoneAuthURL, User: firstNonEmpty(n.spec.ServiceUser, "nova"), Owner: owner(n.lc.Ref)}
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.WriteServiceCloudsYAML, in).Get(ctx, nil); err != nil {
		return fmt.Errorf("write the service user's clouds.yaml into Secret %s: %w", n.secret, err)
	}
	return nil
}

// serviceUser is the Keystone user the spec asks the Nova to make.
func (n *novaRun) serviceUser() openstack.ServiceUserInput {
	return openstack.ServiceUserInput{Admin: openstack.CloudSecret{Namespace: n.ns, Name: n.spec.KeystoneAdminSecret},
		User: firstNonEmpty(n.spec.ServiceUser, "nova"), Password: kube.SecretKeyRef{Namespace: n.ns, Name: n.secret, Key: KeyService},
		Owner: owner(n.lc.Ref)}
}

// ensureServiceUser makes the service user as Keystone's administrator (recorded first, so a teardown
// finds it), and takes Keystone's endpoint from the administrator's clouds.yaml when the spec names
// none: the plan is made again with it, so the cells and services are given it.
func (n *novaRun) ensureServiceUser(ctx workflow.Context) error {
	u := n.serviceUser()
	if !slices.ContainsFunc(n.rec.ServiceUsers, u.Same) {
		n.rec.ServiceUsers = append(n.rec.ServiceUsers, u)
		if err := n.lc.Save(n.rec); err != nil {
			return err
		}
	}
	// Applied with the configuration that deploys Keystone, the Nova waits for the Secret it writes.
	if workflow.GetVersion(ctx, ChangeWaitAdminSecret, workflow.DefaultVersion, 1) == 1 {
		admin := kube.SecretCheck{Namespace: n.ns, Name: n.spec.KeystoneAdminSecret, Keys: []string{openstack.CloudsYAMLKey}}
		err := poll(ctx, n.lc, ConditionInputsReady, func(ctx workflow.Context) (bool, string, error) {
			var p kube.SecretPresence
			if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.CheckSecret, admin).Get(ctx, &p); err != nil {
				return false, "", err
			}
			if !p.Ready() {
				n.lc.SetCondition(ctx, metav1.Condition{Type: ConditionInputsReady, Status: metav1.ConditionFalse, Reason: ReasonSecretMissing,
					Message: fmt.Sprintf("waiting for Secret %s/%s with key %s: the clouds.yaml of Keystone's administrator (keystoneAdminSecret)", admin.Namespace, admin.Name, openstack.CloudsYAMLKey)})
				return false, "", nil
			}
			return true, "", nil
		})
		if err != nil {
			return err
		}
	}
	var res openstack.ServiceUserResult
	if err := workflow.ExecuteActivity(infraActivity(ctx), osActs.EnsureServiceUser, u).Get(ctx, &res); err != nil {
		n.lc.SetCondition(ctx, metav1.Condition{Type: ConditionInputsReady, Status: metav1.ConditionFalse, Reason: object.FailureReason(err), Message: object.FailureMessage(err)})
		return fmt.Errorf("service user %s: %w", u.User, err)
	}
	if n.spec.KeystoneAuthURL == "" {
		n.spec.KeystoneAuthURL = res.AuthURL
		plan, err := NovaPlanFor(n.lc.Ref, n.spec)
		if err != nil {
			return err
		}
		n.plan = plan
	}
	if err := n.writeServiceClouds(ctx); err != nil {
		return err
	}
	how := "adopted (it was there before: the Nova leaves it when it goes)"
	if res.Owned {
		how = "created by this Nova"
	}
	n.lc.SetCondition(ctx, metav1.Condition{Type: ConditionInputsReady, Status: metav1.ConditionTrue, Reason: "ServiceUserReady",
		Message: fmt.Sprintf("Secret %s handed down; Keystone user %s at %s %s, with roles admin and service in project service", n.secret, u.User, res.AuthURL, how)})
	return nil
}

// removeReplacedServiceUsers deletes the service users the spec no longer names, once the services use
// the current one.
func (n *novaRun) removeReplacedServiceUsers(ctx workflow.Context) error {
	var current *openstack.ServiceUserInput
	if n.spec.KeystoneAdminSecret != "" {
		u := n.serviceUser()
		current = &u
	}
	remove, keep := replacedServiceUsers(n.rec.ServiceUsers, current, firstNonEmpty(n.spec.ServiceUser, "nova"))
	if len(remove) == 0 {
		return nil
	}
	for _, u := range remove {
		if err := workflow.ExecuteActivity(infraActivity(ctx), osActs.DeleteServiceUser, u).Get(ctx, nil); err != nil {
			return fmt.Errorf("delete replaced service user %s: %w", u.User, err)
		}
	}
	n.rec.ServiceUsers = keep
	return n.lc.Save(n.rec)
}

// replacedServiceUsers splits the recorded service users into those to delete now and those to keep:
// the current one (nil when the spec makes none), and any of the name the services use now (the spec
// dropped keystoneAdminSecret or named another administrator's Secret, but the services still log in as
// that user: it goes with the Nova, not while they use it).
func replacedServiceUsers(recorded []openstack.ServiceUserInput, current *openstack.ServiceUserInput, inUse string) (remove, keep []openstack.ServiceUserInput) {
	for _, u := range recorded {
		if (current != nil && u.Same(*current)) || u.User == inUse {
			keep = append(keep, u)
		} else {
			remove = append(remove, u)
		}
	}
	return remove, keep
}

// ensureDatabases records the databases and message buses first (a teardown finds them), then creates
// the databases and their users.
func (n *novaRun) ensureDatabases(ctx workflow.Context) error {
	lc, plan := n.lc, n.plan
	for _, id := range workflow.DeterministicKeys(plan.Databases) {
		n.rec.Databases[id] = plan.Databases[id]
	}
	for _, id := range workflow.DeterministicKeys(plan.Vhosts) {
		n.rec.Vhosts[id] = plan.Vhosts[id]
	}
	if err := lc.Save(n.rec); err != nil {
		return err
	}
	for _, id := range workflow.DeterministicKeys(plan.Databases) {
		d := plan.Databases[id]
		if err := workflow.ExecuteActivity(infraActivity(ctx), dbs.EnsureDatabase, d).Get(ctx, nil); err != nil {
			lc.SetCondition(ctx, metav1.Condition{Type: ConditionDatabaseReady, Status: metav1.ConditionFalse, Reason: object.FailureReason(err), Message: object.FailureMessage(err)})
			return fmt.Errorf("database %s: %w", d.Database, err)
		}
	}
	lc.SetCondition(ctx, metav1.Condition{Type: ConditionDatabaseReady, Status: metav1.ConditionTrue, Reason: "Created", Message: fmt.Sprintf("%d database(s) and user(s) in place", len(plan.Databases))})
	return nil
}

// ensureMessageBuses creates the vhosts and their users.
func (n *novaRun) ensureMessageBuses(ctx workflow.Context) error {
	for _, id := range workflow.DeterministicKeys(n.plan.Vhosts) {
		v := n.plan.Vhosts[id]
		if err := workflow.ExecuteActivity(infraActivity(ctx), buses.EnsureVhost, v).Get(ctx, nil); err != nil {
			n.lc.SetCondition(ctx, metav1.Condition{Type: ConditionMessageBusReady, Status: metav1.ConditionFalse, Reason: object.FailureReason(err), Message: object.FailureMessage(err)})
			return fmt.Errorf("vhost %s: %w", v.Vhost, err)
		}
	}
	n.lc.SetCondition(ctx, metav1.Condition{Type: ConditionMessageBusReady, Status: metav1.ConditionTrue, Reason: "Created", Message: fmt.Sprintf("%d vhost(s) in place", len(n.plan.Vhosts))})
	return nil
}

// deployCell0 comes first: its superconductor migrates the API database everything else needs.
func (n *novaRun) deployCell0(ctx workflow.Context) error {
	n.rec.Cells = addOnce(n.rec.Cells, novav1beta1.Cell0Name)
	if err := n.lc.Save(n.rec); err != nil {
		return err
	}
	if err := applyChild(ctx, n.lc, KindNovaCell, cellCR(n.name, novav1beta1.Cell0Name), n.plan.Cells[novav1beta1.Cell0Name]); err != nil {
		return err
	}
	_, err := waitChildren(ctx, n.lc, ConditionCellsReady, []lifecycle.ObjectRef{novaRef(KindNovaCell, n.ns, cellCR(n.name, novav1beta1.Cell0Name))})
	return err
}

// deployCellsThenServices deploys the other cells side by side, then, once every cell is mapped, the
// API, the scheduler and the metadata service (a metadata service the spec disabled goes).
func (n *novaRun) deployCellsThenServices(ctx workflow.Context) error {
	lc, plan, ns, name := n.lc, n.plan, n.ns, n.name
	var refs []lifecycle.ObjectRef
	for _, cell := range workflow.DeterministicKeys(plan.Cells) {
		if cell == novav1beta1.Cell0Name {
			continue
		}
		n.rec.Cells = addOnce(n.rec.Cells, cell)
		if err := lc.Save(n.rec); err != nil {
			return err
		}
		if err := applyChild(ctx, lc, KindNovaCell, cellCR(name, cell), plan.Cells[cell]); err != nil {
			return err
		}
		refs = append(refs, novaRef(KindNovaCell, ns, cellCR(name, cell)))
	}
	// The top-level services start once every cell is mapped: nova-api and nova-scheduler read the
	// cell mappings once, when they start, and would never see a cell mapped after them.
	if _, err := waitChildren(ctx, lc, ConditionCellsReady, refs); err != nil {
		return err
	}
	for _, k := range workflow.DeterministicKeys(plan.Services) {
		kind, child, _ := strings.Cut(k, "/")
		n.rec.Services = addOnce(n.rec.Services, k)
		if err := lc.Save(n.rec); err != nil {
			return err
		}
		if err := applyChild(ctx, lc, kind, child, withMappedCells(plan.Services[k], mappedCells(n.rec))); err != nil {
			return err
		}
		refs = append(refs, childRef(ns, k))
	}
	var kept []string
	for _, k := range n.rec.Services {
		if _, ok := plan.Services[k]; ok {
			kept = append(kept, k)
		} else if err := deleteAll(ctx, childRef(ns, k)); err != nil {
			return err
		}
	}
	n.rec.Services = kept
	if err := lc.Save(n.rec); err != nil {
		return err
	}
	sts, err := waitChildren(ctx, lc, ConditionServicesReady, refs)
	if err != nil {
		return err
	}
	_ = lc.SetField(ctx, "apiReady", readyCount(sts[name+"-api"]))
	_ = lc.SetField(ctx, "schedulerReady", readyCount(sts[name+"-scheduler"]))
	_ = lc.SetField(ctx, "metadataReady", readyCount(sts[name+"-metadata"]))
	return nil
}

// ensureFlavors creates the spec's flavors through this Nova's own API, as its service user (admin in
// the service project), once the API answers.
func (n *novaRun) ensureFlavors(ctx workflow.Context) error {
	s := n.spec
	in := openstack.FlavorsInput{
		Auth: openstack.ServiceUser{AuthURL: s.KeystoneAuthURL, User: firstNonEmpty(s.ServiceUser, "nova"),
			Password: kube.SecretKeyRef{Namespace: n.ns, Name: n.secret, Key: KeyService}},
		Region: firstNonEmpty(s.Region, DefaultRegion),
	}
	for _, f := range s.Flavors {
		in.Flavors = append(in.Flavors, openstack.Flavor{Name: f.Name, ID: f.ID, VCPUs: int(f.VCPUs), RAM: int(f.RAM), Disk: int(f.Disk)})
	}
	var res openstack.FlavorsResult
	if err := workflow.ExecuteActivity(infraActivity(ctx), osActs.EnsureFlavors, in).Get(ctx, &res); err != nil {
		n.lc.SetCondition(ctx, metav1.Condition{Type: ConditionFlavorsReady, Status: metav1.ConditionFalse, Reason: object.FailureReason(err), Message: object.FailureMessage(err)})
		return fmt.Errorf("flavors of %s: %w", n.lc.Ref, err)
	}
	names := make([]string, 0, len(s.Flavors))
	for _, f := range s.Flavors {
		names = append(names, f.Name)
	}
	_ = n.lc.SetField(ctx, "flavors", names)
	n.lc.SetCondition(ctx, metav1.Condition{Type: ConditionFlavorsReady, Status: metav1.ConditionTrue, Reason: "Created",
		Message: fmt.Sprintf("%d flavor(s) in region %s: %d created, %d already there", len(names), in.Region, len(res.Created), len(res.Adopted))})
	return nil
}

// removeDroppedCells handles the cells no longer in the templates: unmapped once no compute uses them,
// then the API and the scheduler restart without them (they hold the mappings they read at start: a
// request reaching a dropped cell's database fails), then their databases and vhosts go.
func (n *novaRun) removeDroppedCells(ctx workflow.Context) error {
	lc, plan, ns := n.lc, n.plan, n.ns
	var removed []string
	for _, cell := range n.rec.Cells {
		if _, ok := plan.Cells[cell]; !ok {
			removed = append(removed, cell)
		}
	}
	for _, cell := range removed {
		if slices.Contains(n.rec.Unmapped, cell) {
			continue
		}
		if err := lc.Step(ctx, "unmap cell "+cell); err != nil {
			return err
		}
		if err := unmapRemovedCell(ctx, lc, cell); err != nil {
			return err
		}
		n.rec.Unmapped = addOnce(n.rec.Unmapped, cell)
		if err := lc.Save(n.rec); err != nil {
			return err
		}
	}
	if len(removed) == 0 {
		return nil
	}
	if err := lc.Step(ctx, "restart the API and the scheduler"); err != nil {
		return err
	}
	var restarted []lifecycle.ObjectRef
	for _, k := range workflow.DeterministicKeys(plan.Services) {
		spec := withMappedCells(plan.Services[k], mappedCells(n.rec))
		if kind, child, _ := strings.Cut(k, "/"); kind == KindNovaAPI || kind == KindNovaScheduler {
			if err := applyChild(ctx, lc, kind, child, spec); err != nil {
				return err
			}
			restarted = append(restarted, childRef(ns, k))
		}
	}
	if _, err := waitChildren(ctx, lc, ConditionServicesReady, restarted); err != nil {
		return err
	}
	for _, cell := range removed {
		if err := lc.Step(ctx, "remove cell "+cell); err != nil {
			return err
		}
		if err := dropCell(ctx, lc, &n.rec, cell); err != nil {
			return err
		}
	}
	return nil
}

// unmapRemovedCell waits until no NovaExternalCompute of the namespace is in the cell (saying which are),
// then deletes its NovaCell, whose teardown unmaps it.
func unmapRemovedCell(ctx workflow.Context, lc *object.Lifecycle, cell string) error {
	ns := lc.Ref.Namespace
	err := poll(ctx, lc, ConditionCellsReady, func(ctx workflow.Context) (bool, string, error) {
		using, err := computesIn(ctx, ns, cell)
		if err != nil || len(using) == 0 {
			return err == nil, "", err
		}
		lc.SetCondition(ctx, metav1.Condition{Type: ConditionCellsReady, Status: metav1.ConditionFalse, Reason: ReasonCellRemovalBlocked,
			Message: fmt.Sprintf("cell %s was removed from cellTemplates but still has computes (NovaExternalCompute %s): it is torn down once they are gone", cell, strings.Join(using, ", "))})
		return false, "", nil
	})
	if err != nil {
		return err
	}
	return deleteAll(ctx, novaRef(KindNovaCell, ns, cellCR(lc.Ref.Name, cell)))
}

// dropCell removes an unmapped cell's database, user, vhost and handed-down keys, and forgets the cell.
func dropCell(ctx workflow.Context, lc *object.Lifecycle, rec *novaRecord, cell string) error {
	ns := lc.Ref.Namespace
	if d, ok := rec.Databases["cell-"+cell]; ok {
		if err := workflow.ExecuteActivity(infraActivity(ctx), dbs.DropDatabase, d).Get(ctx, nil); err != nil {
			return fmt.Errorf("drop database %s: %w", d.Database, err)
		}
		delete(rec.Databases, "cell-"+cell)
	}
	if v, ok := rec.Vhosts[cell]; ok {
		if err := workflow.ExecuteActivity(infraActivity(ctx), buses.DeleteVhost, v).Get(ctx, nil); err != nil {
			return fmt.Errorf("delete vhost %s: %w", v.Vhost, err)
		}
		delete(rec.Vhosts, cell)
	}
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.DeleteSecretKeys, ns, HandedDownSecret(lc.Ref.Name),
		[]string{CellDatabaseKey(cell), "MessageBusPassword-" + cell}).Get(ctx, nil); err != nil {
		return err
	}
	rec.Cells = slices.DeleteFunc(rec.Cells, func(c string) bool { return c == cell })
	rec.Unmapped = slices.DeleteFunc(rec.Unmapped, func(c string) bool { return c == cell })
	return lc.Save(*rec)
}

// mappedCells are the cells mapped in the API database, sorted: those the Nova created and has not
// unmapped.
func mappedCells(rec novaRecord) []string {
	var out []string
	for _, c := range rec.Cells {
		if !slices.Contains(rec.Unmapped, c) {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// withMappedCells gives the API's and the scheduler's spec the mapped cells (a change restarts them);
// other specs are returned as they are. Pure.
func withMappedCells(spec any, cells []string) any {
	switch s := spec.(type) {
	case novav1beta1.NovaAPISpec:
		s.Cells = cells
		return s
	case novav1beta1.NovaSchedulerSpec:
		s.Cells = cells
		return s
	}
	return spec
}

// computesIn lists the NovaExternalComputes of the namespace that are in one of the cells, sorted.
func computesIn(ctx workflow.Context, ns string, cells ...string) ([]string, error) {
	var necs []kube.ListedObject
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.ListObjects, kube.ListInput{Ref: novaRef("NovaExternalCompute", ns, "")}).Get(ctx, &necs); err != nil {
		return nil, err
	}
	var using []string
	for _, o := range necs {
		var spec novav1beta1.NovaExternalComputeSpec
		if json.Unmarshal(o.Spec, &spec) == nil && slices.Contains(cells, spec.CellName) {
			using = append(using, o.Ref.Name)
		}
	}
	slices.Sort(using)
	return using, nil
}

// metadataServicesOf names the NovaMetadata services a Nova made: its own (among its recorded services)
// and one per cell (made by the NovaCell, whether or not the cell enabled it). Sorted.
func metadataServicesOf(nova string, rec novaRecord) []string {
	var names []string
	for _, k := range rec.Services {
		if kind, name, _ := strings.Cut(k, "/"); kind == KindNovaMetadata {
			names = append(names, name)
		}
	}
	for _, c := range rec.Cells {
		names = append(names, cellCR(nova, c)+"-metadata")
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// agentsNaming lists the OVNMetadataAgents of the namespace whose novaMetadata is one of metadata, sorted.
func agentsNaming(ctx workflow.Context, ns string, metadata []string) ([]string, error) {
	if len(metadata) == 0 {
		return nil, nil
	}
	var listed []kube.ListedObject
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.ListObjects, kube.ListInput{Ref: novaRef("OVNMetadataAgent", ns, "")}).Get(ctx, &listed); err != nil {
		return nil, err
	}
	var names []string
	for _, o := range listed {
		var spec struct {
			NovaMetadata string `json:"novaMetadata"`
		}
		if json.Unmarshal(o.Spec, &spec) == nil && slices.Contains(metadata, spec.NovaMetadata) {
			names = append(names, o.Ref.Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// usersMessage says what still uses a Nova being deleted: computes in its cells, metadata agents naming
// its metadata services.
func usersMessage(computes, agents []string) string {
	var parts []string
	if len(computes) > 0 {
		parts = append(parts, "the cells still have computes (NovaExternalCompute "+strings.Join(computes, ", ")+")")
	}
	if len(agents) > 0 {
		parts = append(parts, "OVN metadata agents still name its metadata services (OVNMetadataAgent "+strings.Join(agents, ", ")+")")
	}
	return strings.Join(parts, "; ")
}

// Teardown removes the services, the cells (cell0 last), then every database, user and vhost recorded.
// While computes remain in its cells it removes nothing and fails, naming them: a cell with hosts cannot
// be unmapped, and the computes need the compute API to deregister (retry once they are gone).
func (r *novaReconciler) Teardown(ctx workflow.Context, lc *object.Lifecycle) error {
	var rec novaRecord
	if err := lc.Load(&rec); err != nil {
		return err
	}
	ns, name := lc.Ref.Namespace, lc.Ref.Name
	using, err := computesIn(ctx, ns, rec.Cells...)
	if err != nil {
		return err
	}
	var metadata, agents []string
	if workflow.GetVersion(ctx, ChangeTeardownWaitsForAgents, workflow.DefaultVersion, 1) > workflow.DefaultVersion {
		metadata = metadataServicesOf(name, rec)
		if agents, err = agentsNaming(ctx, ns, metadata); err != nil {
			return err
		}
	}
	if len(using) > 0 || len(agents) > 0 {
		msg := fmt.Sprintf("the cells still have computes (NovaExternalCompute %s): delete them first", strings.Join(using, ", "))
		if workflow.GetVersion(ctx, ChangeTeardownWaitsForComputes, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
			lc.SetCondition(ctx, metav1.Condition{Type: ConditionCellsReady, Status: metav1.ConditionFalse, Reason: ReasonCellRemovalBlocked, Message: msg})
			return specError(ReasonCellRemovalBlocked, msg)
		}
		// Deleted with its computes (a namespace, `kubectl delete -f` of a directory), the Nova goes once
		// they are gone instead of failing until someone sends retry; the wait adds nothing to the history.
		lc.SetCondition(ctx, metav1.Condition{Type: ConditionCellsReady, Status: metav1.ConditionFalse, Reason: ReasonCellRemovalBlocked,
			Message: usersMessage(using, agents) + ": the Nova goes once they are gone"})
		if err := workflow.ExecuteActivity(computesGoneActivity(ctx), kubeActs.WaitNoComputes, kube.CellsInput{Namespace: ns, Cells: rec.Cells, Metadata: metadata}).Get(ctx, nil); err != nil {
			return fmt.Errorf("wait for the computes to go: %w", err)
		}
	}
	var first []lifecycle.ObjectRef
	for _, k := range rec.Services {
		first = append(first, childRef(ns, k))
	}
	for _, c := range rec.Cells {
		if c != novav1beta1.Cell0Name {
			first = append(first, novaRef(KindNovaCell, ns, cellCR(name, c)))
		}
	}
	if err := deleteAll(ctx, first...); err != nil {
		return err
	}
	if err := deleteAll(ctx, novaRef(KindNovaCell, ns, cellCR(name, novav1beta1.Cell0Name))); err != nil {
		return err
	}
	for _, id := range workflow.DeterministicKeys(rec.Databases) {
		if err := workflow.ExecuteActivity(infraActivity(ctx), dbs.DropDatabase, rec.Databases[id]).Get(ctx, nil); err != nil {
			return fmt.Errorf("drop database %s: %w", rec.Databases[id].Database, err)
		}
	}
	for _, id := range workflow.DeterministicKeys(rec.Vhosts) {
		if err := workflow.ExecuteActivity(infraActivity(ctx), buses.DeleteVhost, rec.Vhosts[id]).Get(ctx, nil); err != nil {
			return fmt.Errorf("delete vhost %s: %w", rec.Vhosts[id].Vhost, err)
		}
	}
	// Last: the services deregistered their endpoints as this user.
	for _, u := range rec.ServiceUsers {
		if err := workflow.ExecuteActivity(infraActivity(ctx), osActs.DeleteServiceUser, u).Get(ctx, nil); err != nil {
			return fmt.Errorf("delete service user %s: %w", u.User, err)
		}
	}
	return nil
}
