package object

import (
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/api/lifecycle"
)

// This file is what an object workflow shows: its phase, conditions and kind-specific fields, mirrored
// into the object's status by one writer; the status query; and the kind's own recorded state.

// SetPhase sets the phase, upserting the phase search attribute.
func (lc *Lifecycle) SetPhase(ctx workflow.Context, phase string) {
	if lc.state.Phase != phase {
		lc.state.Phase = phase
		_ = workflow.UpsertTypedSearchAttributes(ctx, lifecycle.SAPhase.ValueSet(phase))
		lc.markDirty(ctx)
	}
}

// SetCondition sets a condition by type (its transition time is stamped when its status changes).
// Setting what is already there changes nothing, so nothing is written.
func (lc *Lifecycle) SetCondition(ctx workflow.Context, c metav1.Condition) {
	c.ObservedGeneration = lc.state.Desired
	for i, old := range lc.state.Conditions {
		if old.Type == c.Type {
			if old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			} else {
				c.LastTransitionTime = metav1.NewTime(workflow.Now(ctx).Truncate(time.Second))
			}
			if !sameCondition(c, old) {
				lc.state.Conditions[i] = c
				lc.markDirty(ctx)
			}
			return
		}
	}
	c.LastTransitionTime = metav1.NewTime(workflow.Now(ctx).Truncate(time.Second))
	lc.state.Conditions = append(lc.state.Conditions, c)
	lc.markDirty(ctx)
}

// sameCondition compares conditions field by field, times as instants (a carried time has lost its zone).
func sameCondition(a, b metav1.Condition) bool {
	return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message &&
		a.ObservedGeneration == b.ObservedGeneration && a.LastTransitionTime.Equal(&b.LastTransitionTime)
}

// Condition returns the condition of type t, if set.
func (lc *Lifecycle) Condition(t string) (metav1.Condition, bool) {
	for _, c := range lc.state.Conditions {
		if c.Type == t {
			return c, true
		}
	}
	return metav1.Condition{}, false
}

// BoolCondition is the condition status for b.
func BoolCondition(b bool) metav1.ConditionStatus {
	if b {
		return metav1.ConditionTrue
	}
	return metav1.ConditionFalse
}

// SetField sets a kind-specific status field (nil removes it).
func (lc *Lifecycle) SetField(ctx workflow.Context, key string, value any) error {
	b, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("status field %s: %w", key, err)
	}
	if lc.state.Fields == nil {
		lc.state.Fields = map[string]json.RawMessage{}
	}
	if string(lc.state.Fields[key]) != string(b) {
		lc.state.Fields[key] = b
		lc.markDirty(ctx)
	}
	return nil
}

// Field reads back a kind-specific status field set with SetField; ok is false when it is not set.
func (lc *Lifecycle) Field(key string, into any) (ok bool, err error) {
	raw, ok := lc.state.Fields[key]
	if !ok || string(raw) == "null" {
		return false, nil
	}
	return true, json.Unmarshal(raw, into)
}

// Save records the kind's own state (what it created) so it survives continue-as-new.
func (lc *Lifecycle) Save(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	lc.state.Data = b
	return nil
}

// Load reads back what Save recorded; it leaves v alone when nothing was saved.
func (lc *Lifecycle) Load(v any) error {
	if len(lc.state.Data) == 0 {
		return nil
	}
	return json.Unmarshal(lc.state.Data, v)
}

// Status is what the status query answers.
func (lc *Lifecycle) Status() lifecycle.Status {
	st := lifecycle.Status{
		Object:             lc.Ref.String(),
		Phase:              lc.state.Phase,
		Step:               lc.state.Step,
		Paused:             lc.state.Paused,
		Deleting:           lc.state.Deleting,
		DesiredGeneration:  lc.state.Desired,
		ObservedGeneration: lc.state.Observed,
		Conditions:         lc.state.Conditions,
	}
	if lc.detailer != nil {
		st.Detail = lc.detailer.Detail()
	}
	return st
}

func (lc *Lifecycle) markDirty(ctx workflow.Context) {
	lc.dirty = true
	workflow.SetCurrentDetails(ctx, lc.details())
}

func (lc *Lifecycle) details() string {
	s := lc.state
	out := fmt.Sprintf("**%s** · phase **%s**", lc.Ref.String(), s.Phase)
	if s.Step != "" {
		out += " · step `" + s.Step + "`"
	}
	out += fmt.Sprintf(" · generation %d (observed %d)", s.Desired, s.Observed)
	if s.Paused {
		out += " · **paused**"
	}
	if s.Deleting {
		out += " · deleting"
	}
	for _, c := range s.Conditions {
		if c.Type == lifecycle.ConditionReady {
			out += fmt.Sprintf("\n\nReady=%s (%s): %s", c.Status, c.Reason, c.Message)
		}
	}
	return out
}

// written is the status as last written into the object, so a write sends only what changed.
type written struct {
	// workflowID is true once the workflow's ID (and UI link) is in the status.
	workflowID bool
	phase      string
	step       string
	observed   int64
	conditions map[string]metav1.Condition
	fields     map[string]string
}

// Unwritten names the parts of a status a run changed and left for the next run to write.
type Unwritten struct {
	WorkflowID bool     `json:"workflowID,omitempty"`
	Phase      bool     `json:"phase,omitempty"`
	Step       bool     `json:"step,omitempty"`
	Observed   bool     `json:"observed,omitempty"`
	Conditions []string `json:"conditions,omitempty"`
	Fields     []string `json:"fields,omitempty"`
}

// unwrittenOf names what a patch not yet written would write.
func unwrittenOf(p kube.StatusPatch) *Unwritten {
	u := &Unwritten{WorkflowID: p.WorkflowID != "", Phase: p.Phase != "", Step: p.CurrentStep != nil, Observed: p.ObservedGeneration != nil}
	for _, c := range p.Conditions {
		u.Conditions = append(u.Conditions, c.Type)
	}
	for _, k := range workflow.DeterministicKeys(p.Fields) {
		u.Fields = append(u.Fields, k)
	}
	return u
}

// writtenOf is the status a carried state stands for: written, except what u names.
func writtenOf(s State, u *Unwritten) written {
	w := written{workflowID: true, phase: s.Phase, step: s.Step, observed: s.Observed,
		conditions: map[string]metav1.Condition{}, fields: map[string]string{}}
	for _, c := range s.Conditions {
		w.conditions[c.Type] = c
	}
	//workflowcheck:ignore -- reviewed: the result does not depend on the map's order
	for k, v := range s.Fields {
		w.fields[k] = string(v)
	}
	if u == nil {
		return w
	}
	// A zero written value differs from the state's, so the next write sends it.
	if u.WorkflowID {
		w.workflowID = false
	}
	if u.Phase {
		w.phase = ""
	}
	if u.Step {
		w.step = "\x00"
	}
	if u.Observed {
		w.observed = -1
	}
	for _, t := range u.Conditions {
		delete(w.conditions, t)
	}
	for _, k := range u.Fields {
		w.fields[k] = "\x00"
	}
	return w
}

// ChangeLocalStatusWrites is the GetVersion change after which a run writes its object's status as a local
// activity of the workflow worker (kube.LocalKube): one marker event in the workflow task that asked
// for it. Runs recorded before it wrote through an activity on the Kubernetes queue.
const ChangeLocalStatusWrites = "local-status-writes"

// localActs is a nil receiver naming the workflow worker's local Kubernetes activities (status writes
// and reads); the workflow worker registers the real one.
var localActs *kube.LocalKube

// localKubeActivity runs a status write (a GET and an UPDATE) or a read on the workflow worker: retried
// locally for a few seconds only. Local retries past a workflow task's timeout would each cost the
// history a timer and a workflow task, so a call that still fails goes to the Kubernetes queue
// (onKubeLocally).
func localKubeActivity(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout:    10 * time.Second,
		ScheduleToCloseTimeout: 20 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    500 * time.Millisecond,
			BackoffCoefficient: 2,
			MaximumInterval:    5 * time.Second,
		},
	})
}

// writeStatus writes p: as a local activity when local, falling back to the Kubernetes queue's activity
// when the local write fails (onKubeLocally).
func writeStatus(ctx workflow.Context, local bool, p kube.StatusPatch) error {
	return onKubeLocally(ctx, local, localActs.PatchStatus, kubeActs.PatchStatus, p, nil)
}

// statusWriter mirrors the state into the object whenever it changed, one write at a time, each sending
// only what differs from the status last written; writes that pile up while one is in flight coalesce
// into the next. Nothing changed, nothing is written.
func (lc *Lifecycle) statusWriter(ctx workflow.Context) {
	local := workflow.GetVersion(ctx, ChangeLocalStatusWrites, workflow.DefaultVersion, 1) > workflow.DefaultVersion
	for {
		if err := workflow.Await(ctx, func() bool { return lc.dirty && !lc.closing }); err != nil {
			return
		}
		lc.dirty = false
		if lc.opts.NoStatus {
			continue
		}
		p, ok := lc.statusPatch(ctx)
		if !ok {
			continue
		}
		lc.writing = true
		err := writeStatus(ctx, local, p)
		lc.writing = false
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			// What was not written stays in the difference for the next write; a next run writes it all.
			lc.state.StatusStale = true
			workflow.GetLogger(ctx).Warn("status write failed; will write again on the next change", "object", lc.Ref.String(), "error", err)
			continue
		}
		lc.wrote(p)
	}
}

// flush waits until the status in the object matches the workflow's state.
func (lc *Lifecycle) flush(ctx workflow.Context) error {
	return workflow.Await(ctx, func() bool { return !lc.dirty && !lc.writing })
}

// statusPatch is what differs between the state and the status last written; ok is false when nothing
// does.
func (lc *Lifecycle) statusPatch(ctx workflow.Context) (kube.StatusPatch, bool) {
	w := lc.written
	p := kube.StatusPatch{Ref: lc.Ref}
	changed := false
	if !w.workflowID {
		// The link names the workflow, not a run: it stays right across continue-as-new.
		p.WorkflowID, changed = workflow.GetInfo(ctx).WorkflowExecution.ID, true
	}
	if lc.state.Phase != w.phase {
		p.Phase, changed = lc.state.Phase, true
	}
	if lc.state.Step != w.step {
		step := lc.state.Step
		p.CurrentStep, changed = &step, true
	}
	if lc.state.Observed != w.observed && lc.state.Observed > 0 {
		g := lc.state.Observed
		p.ObservedGeneration, changed = &g, true
	}
	for _, c := range lc.state.Conditions {
		if old, ok := w.conditions[c.Type]; !ok || !sameCondition(old, c) {
			p.Conditions, changed = append(p.Conditions, c), true
		}
	}
	for _, k := range workflow.DeterministicKeys(lc.state.Fields) {
		if v := lc.state.Fields[k]; string(v) != w.fields[k] {
			if p.Fields == nil {
				p.Fields = map[string]json.RawMessage{}
			}
			p.Fields[k], changed = v, true
		}
	}
	return p, changed
}

// wrote records p as written.
func (lc *Lifecycle) wrote(p kube.StatusPatch) {
	w := &lc.written
	if w.conditions == nil {
		w.conditions, w.fields = map[string]metav1.Condition{}, map[string]string{}
	}
	if p.WorkflowID != "" {
		w.workflowID = true
	}
	if p.Phase != "" {
		w.phase = p.Phase
	}
	if p.CurrentStep != nil {
		w.step = *p.CurrentStep
	}
	if p.ObservedGeneration != nil {
		w.observed = *p.ObservedGeneration
	}
	for _, c := range p.Conditions {
		w.conditions[c.Type] = c
	}
	//workflowcheck:ignore -- reviewed: the result does not depend on the map's order
	for k, v := range p.Fields {
		w.fields[k] = string(v)
	}
}
