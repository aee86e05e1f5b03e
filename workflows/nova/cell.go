package nova

import (
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/api/lifecycle"
	novav1beta1 "github.com/stackflow/stackflow/api/nova/v1beta1"
	"github.com/stackflow/stackflow/workflows/object"
)

// NovaCellWorkflow serves a NovaCell: its conductor (a NovaConductor, which migrates the cell's
// database), then, when the cell reaches the API database, its mapping in Nova's cell mappings (a Job
// running nova-manage, which refuses a cell name already mapped to another database) and the discovery
// of its hosts, then its metadata service and console proxy when enabled. Deleting it unmaps the cell
// (Nova refuses while hosts or instances remain) before its services go.
func NovaCellWorkflow(ctx workflow.Context, in object.Input) error {
	return object.Run(ctx, in, &cellReconciler{}, object.Options{})
}

type cellRecord struct {
	Mapped   bool   `json:"mapped,omitempty"`
	CellUUID string `json:"cellUUID,omitempty"`
	// Children are the service CRs created, by kind/name.
	Children []string `json:"children,omitempty"`
}

type cellReconciler struct{}

// cellJobs is the instance a NovaCell's Jobs run as: the cell's database, its message bus and, when the
// cell reaches it, the API database.
func cellJobs(ref lifecycle.ObjectRef, s novav1beta1.NovaCellSpec) Instance {
	in := Instance{Service: Cell, Name: ref.Name, Namespace: ref.Namespace, Owner: *owner(ref), CellName: s.CellName, Replicas: 1}
	resolveAuth(&in, s.ConductorServiceTemplate, s.NovaServiceAuth)
	in.Image = firstNonEmpty(s.ConductorServiceTemplate.ContainerImage, DefaultImages[Cell])
	in.CustomServiceConfig = ""
	in.APIDatabase = apiDB(s.NovaServiceAuth, s.DatabaseNames, s.APIDatabaseHostname, s.APIDatabaseUser)
	in.CellDatabase = cellDB(s.NovaServiceAuth, s.DatabaseNames, s.CellName, s.CellDatabaseHostname, s.CellDatabaseUser)
	in.TransportURLSecret = s.TransportURLSecret
	if s.CellName == novav1beta1.Cell0Name {
		// cell0 has no message bus of its own: its mapping says none:///.
		in.TransportURLSecret = ""
	}
	return in
}

// CellChildren are the service CRs of a cell, named after the NovaCell: conductor always, metadata
// when enabled (never in cell0), console proxy unless disabled (never in cell0). Pure.
func CellChildren(name string, s novav1beta1.NovaCellSpec) map[string]any {
	auth, names := s.NovaServiceAuth, s.DatabaseNames
	out := map[string]any{}
	cond := novav1beta1.NovaConductorSpec{NovaServiceBase: s.ConductorServiceTemplate, NovaServiceAuth: auth, DatabaseNames: names,
		CellName: s.CellName, CellDatabaseHostname: s.CellDatabaseHostname, CellDatabaseUser: s.CellDatabaseUser, TransportURLSecret: s.TransportURLSecret}
	if s.CellName == novav1beta1.Cell0Name || s.HasAPIAccess {
		cond.APIDatabaseHostname, cond.APIDatabaseUser = s.APIDatabaseHostname, s.APIDatabaseUser
	}
	out[KindNovaConductor+"/"+name+"-conductor"] = cond
	if s.CellName == novav1beta1.Cell0Name {
		return out
	}
	if m := s.MetadataServiceTemplate; m.Enabled != nil && *m.Enabled {
		out[KindNovaMetadata+"/"+name+"-metadata"] = novav1beta1.NovaMetadataSpec{NovaServiceBase: m.NovaServiceBase, NovaServiceAuth: auth, DatabaseNames: names,
			CellName: s.CellName, CellDatabaseHostname: s.CellDatabaseHostname, CellDatabaseUser: s.CellDatabaseUser, TransportURLSecret: s.TransportURLSecret}
	}
	if v := s.NoVNCProxyServiceTemplate; v.Enabled == nil || *v.Enabled {
		out[KindNovaNoVNCProxy+"/"+name+"-novncproxy"] = novav1beta1.NovaNoVNCProxySpec{NovaServiceBase: v.NovaServiceBase, NovaServiceAuth: auth, DatabaseNames: names,
			CellName: s.CellName, CellDatabaseHostname: s.CellDatabaseHostname, CellDatabaseUser: s.CellDatabaseUser, TransportURLSecret: s.TransportURLSecret}
	}
	return out
}

func childRef(ns, key string) lifecycle.ObjectRef {
	kind, name, _ := strings.Cut(key, "/")
	return novaRef(kind, ns, name)
}

func (r *cellReconciler) Reconcile(ctx workflow.Context, lc *object.Lifecycle, obj *kube.Object) error {
	var s novav1beta1.NovaCellSpec
	if err := json.Unmarshal(obj.Spec, &s); err != nil {
		return specError(ReasonInvalidSpec, fmt.Sprintf("spec of %s: %v", lc.Ref, err))
	}
	_ = workflow.UpsertTypedSearchAttributes(ctx, lifecycle.SACell.ValueSet(s.CellName))
	c := &cellRun{lc: lc, spec: s, ns: lc.Ref.Namespace, children: CellChildren(lc.Ref.Name, s), conductor: KindNovaConductor + "/" + lc.Ref.Name + "-conductor"}
	if err := lc.Load(&c.rec); err != nil {
		return err
	}
	if err := c.refuseDuplicate(ctx); err != nil {
		return err
	}
	// The conductor first: its Job migrates the cell's database, which the mapping needs.
	if err := lc.Step(ctx, "conductor"); err != nil {
		return err
	}
	if err := c.deployConductor(ctx); err != nil {
		return err
	}
	if err := c.mapCell(ctx); err != nil {
		return err
	}
	return c.deployServices(ctx)
}

// cellRun is one reconcile of a NovaCell.
type cellRun struct {
	lc        *object.Lifecycle
	spec      novav1beta1.NovaCellSpec
	rec       cellRecord
	ns        string
	children  map[string]any
	conductor string
}

// refuseDuplicate refuses, before anything runs, a second NovaCell claiming the cell name on the same API
// database (another Nova's cell, one applied on its own), saying which NovaCell has it: a cell name is
// mapped once per API database.
func (c *cellRun) refuseDuplicate(ctx workflow.Context) error {
	var cells []kube.ListedObject
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.ListObjects, kube.ListInput{Ref: novaRef(KindNovaCell, c.ns, "")}).Get(ctx, &cells); err != nil {
		return fmt.Errorf("list NovaCells: %w", err)
	}
	if other := ClaimedBy(c.lc.Ref.Name, c.spec, cells); other != "" {
		msg := fmt.Sprintf("cell %s of API database %s is already served by NovaCell %s: a cell name is mapped once per API database", c.spec.CellName, apiDatabaseKey(c.spec), other)
		c.lc.SetCondition(ctx, metav1.Condition{Type: novav1beta1.ConditionCellMapped, Status: metav1.ConditionFalse, Reason: ReasonDuplicateCell, Message: msg})
		return specError(ReasonDuplicateCell, msg)
	}
	return nil
}

// deployConductor applies the cell's conductor and waits until it is Ready.
func (c *cellRun) deployConductor(ctx workflow.Context) error {
	lc := c.lc
	c.rec.Children = addOnce(c.rec.Children, c.conductor)
	if err := lc.Save(c.rec); err != nil {
		return err
	}
	if err := applyChild(ctx, lc, KindNovaConductor, lc.Ref.Name+"-conductor", c.children[c.conductor]); err != nil {
		return err
	}
	sts, err := waitChildren(ctx, lc, ConditionServicesReady, []lifecycle.ObjectRef{childRef(c.ns, c.conductor)})
	if err != nil {
		return err
	}
	_ = lc.SetField(ctx, "conductorReady", readyCount(sts[lc.Ref.Name+"-conductor"]))
	return nil
}

// mapCell maps the cell in the API database once (a name mapped to another database is a conflict the
// user resolves) and discovers its hosts; a cell that names no API database cannot.
func (c *cellRun) mapCell(ctx workflow.Context) error {
	lc, s := c.lc, c.spec
	jobs := cellJobs(lc.Ref, s)
	if jobs.APIDatabase == nil {
		lc.SetCondition(ctx, metav1.Condition{Type: novav1beta1.ConditionCellMapped, Status: metav1.ConditionFalse, Reason: "NoAPIDatabase",
			Message: "the cell names no apiDatabaseHostname: it cannot map itself in the API database"})
		return nil
	}
	if err := lc.Step(ctx, "cell mapping"); err != nil {
		return err
	}
	var srec serviceRecord
	hash, err := prepare(ctx, lc, jobs, &srec)
	if err != nil {
		return err
	}
	st, err := runJob(ctx, lc, jobs, "cell-mapping", "cell-mapping.sh", hash, novav1beta1.ConditionCellMapped, map[string]string{"CELL_NAME": s.CellName})
	if err != nil {
		if st != nil && strings.Contains(st.Message, "already mapped to another database") {
			lc.SetCondition(ctx, metav1.Condition{Type: novav1beta1.ConditionCellMapped, Status: metav1.ConditionFalse, Reason: ReasonCellNameConflict, Message: st.Message})
			return specError(ReasonCellNameConflict, st.Message)
		}
		return err
	}
	uuid := ""
	for _, line := range strings.Split(st.Message, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "cell_uuid="); ok {
			uuid = v
		}
	}
	c.rec.Mapped, c.rec.CellUUID = true, uuid
	if err := lc.Save(c.rec); err != nil {
		return err
	}
	_ = lc.SetField(ctx, "cellUUID", uuid)
	lc.SetCondition(ctx, metav1.Condition{Type: novav1beta1.ConditionCellMapped, Status: metav1.ConditionTrue, Reason: "Mapped",
		Message: fmt.Sprintf("cell %s is mapped (uuid %s)", s.CellName, uuid)})
	if s.CellName != novav1beta1.Cell0Name && uuid != "" {
		if _, err := runJob(ctx, lc, jobs, "host-discovery", "host-discovery.sh", hash, "HostsDiscovered", map[string]string{"CELL_UUID": uuid}); err != nil {
			return err
		}
	}
	return nil
}

// deployServices applies the cell's other services (metadata, noVNC proxy), removes those a spec change
// disabled, and waits until all, the conductor too, are Ready.
func (c *cellRun) deployServices(ctx workflow.Context) error {
	lc, ns := c.lc, c.ns
	var refs []lifecycle.ObjectRef
	for _, k := range workflow.DeterministicKeys(c.children) {
		if k == c.conductor {
			continue
		}
		kind, name, _ := strings.Cut(k, "/")
		c.rec.Children = addOnce(c.rec.Children, k)
		if err := lc.Save(c.rec); err != nil {
			return err
		}
		if err := applyChild(ctx, lc, kind, name, c.children[k]); err != nil {
			return err
		}
		refs = append(refs, childRef(ns, k))
	}
	var gone []lifecycle.ObjectRef
	var kept []string
	for _, k := range c.rec.Children {
		if _, ok := c.children[k]; ok {
			kept = append(kept, k)
		} else {
			gone = append(gone, childRef(ns, k))
		}
	}
	if len(gone) > 0 {
		if err := deleteAll(ctx, gone...); err != nil {
			return err
		}
		c.rec.Children = kept
		if err := lc.Save(c.rec); err != nil {
			return err
		}
	}
	sts, err := waitChildren(ctx, lc, ConditionServicesReady, append(refs, childRef(ns, c.conductor)))
	if err != nil {
		return err
	}
	_ = lc.SetField(ctx, "metadataReady", readyCount(sts[lc.Ref.Name+"-metadata"]))
	_ = lc.SetField(ctx, "noVNCProxyReady", readyCount(sts[lc.Ref.Name+"-novncproxy"]))
	return nil
}

// ReasonDuplicateCell is a NovaCell claiming a cell name another NovaCell serves on the same API
// database.
const ReasonDuplicateCell = "DuplicateCell"

// apiDatabaseKey names the API database a cell is mapped in ("" when it reaches none).
func apiDatabaseKey(s novav1beta1.NovaCellSpec) string {
	if s.APIDatabaseHostname == "" {
		return "(none)"
	}
	return s.APIDatabaseHostname + "/" + firstNonEmpty(s.APIDatabaseName, "nova_api")
}

// ClaimedBy names the NovaCell that claimed s's cell name on the same API database before self (the
// older one, by creation time, then by name), or "" when self may serve it. Pure.
func ClaimedBy(self string, s novav1beta1.NovaCellSpec, cells []kube.ListedObject) string {
	created := ""
	for _, c := range cells {
		if c.Ref.Name == self {
			created = c.Created
		}
	}
	best := ""
	bestCreated := ""
	for _, c := range cells {
		if c.Ref.Name == self || c.Deleting {
			continue
		}
		var o novav1beta1.NovaCellSpec
		if json.Unmarshal(c.Spec, &o) != nil || o.CellName != s.CellName || apiDatabaseKey(o) != apiDatabaseKey(s) {
			continue
		}
		if c.Created > created || (c.Created == created && c.Ref.Name > self) {
			continue
		}
		if best == "" || c.Created < bestCreated || (c.Created == bestCreated && c.Ref.Name < best) {
			best, bestCreated = c.Ref.Name, c.Created
		}
	}
	return best
}

// unmapCell runs the Job that removes the cell's mapping (Nova refuses while hosts or live instances
// remain: the Job fails with Nova's message). Without the Secrets it reads (its namespace is being
// deleted), it cannot run: the mapping is left, and the teardown goes on.
func unmapCell(ctx workflow.Context, lc *object.Lifecycle, s novav1beta1.NovaCellSpec, uuid string) error {
	jobs := cellJobs(lc.Ref, s)
	var hashes kube.SecretHashes
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.HashSecrets,
		kube.SecretHashesInput{Namespace: jobs.Namespace, Keys: jobs.secretKeys()}).Get(ctx, &hashes); err != nil {
		return err
	}
	if len(hashes.Missing) > 0 {
		workflow.GetLogger(ctx).Warn("cell mapping left: its Secrets are gone", "object", lc.Ref.String(), "cell", s.CellName, "missing", hashes.Missing)
		return nil
	}
	var srec serviceRecord
	hash, err := prepare(ctx, lc, jobs, &srec)
	if err != nil {
		return err
	}
	_, err = runJob(ctx, lc, jobs, "cell-delete", "cell-delete.sh", hash, novav1beta1.ConditionCellMapped, map[string]string{"CELL_UUID": uuid})
	return err
}

func readyCount(st *kube.ObjectStatus) int32 {
	if st == nil {
		return 0
	}
	var n int32
	_ = json.Unmarshal(st.Fields["readyCount"], &n)
	return n
}

func addOnce(list []string, v string) []string {
	for _, x := range list {
		if x == v {
			return list
		}
	}
	return append(list, v)
}

// Teardown unmaps the cell (Nova refuses while hosts or instances remain: the teardown then fails with
// Nova's message and waits for a retry), then removes its services and Jobs.
func (r *cellReconciler) Teardown(ctx workflow.Context, lc *object.Lifecycle) error {
	var rec cellRecord
	if err := lc.Load(&rec); err != nil {
		return err
	}
	ns, name := lc.Ref.Namespace, lc.Ref.Name
	if rec.Mapped && rec.CellUUID != "" {
		obj, err := lc.GetObject(ctx)
		if err != nil {
			return err
		}
		var s novav1beta1.NovaCellSpec
		if obj.Exists {
			_ = json.Unmarshal(obj.Spec, &s)
		}
		if s.CellName != "" && s.CellName != novav1beta1.Cell0Name {
			if err := unmapCell(ctx, lc, s, rec.CellUUID); err != nil {
				return err
			}
		}
		rec.Mapped = false
		_ = lc.Save(rec)
	}
	var refs []lifecycle.ObjectRef
	for _, k := range rec.Children {
		refs = append(refs, childRef(ns, k))
	}
	for _, j := range []string{"cell-mapping", "host-discovery", "cell-delete"} {
		refs = append(refs, jobRef(ns, name+"-"+j))
	}
	return deleteAll(ctx, append(refs, configMapRef(ns, ConfigDataName(name)), configMapRef(ns, ScriptsName(name)))...)
}
