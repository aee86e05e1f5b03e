package dataplane

import (
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/activities/ansible"
	"github.com/stackflow/stackflow/activities/kube"
	dataplanev1beta1 "github.com/stackflow/stackflow/api/dataplane/v1beta1"
	"github.com/stackflow/stackflow/workflows/object"
)

// Check mode beyond one service: a node's preview runs every step of its pipeline that has a playbook
// (phase 0, then its services) with --check --diff for the objects as the API holds them now, and a data
// plane's preview does so for every member node, a few at a time. Nothing on the hosts changes, and no
// status is written. A step that cannot be previewed (a dependency not ready, the host unreachable) says
// why in its entry; the others are still previewed.

// MaxPreviewBytes bounds the diffs of a data plane's preview: the answer travels in workflow history.
const MaxPreviewBytes = 512 << 10

// previewParallel is how many nodes a data plane previews at once.
const previewParallel = 5

// StepPreview is what a check-mode run of one step found on one host.
type StepPreview struct {
	Step     string `json:"step"`
	Playbook string `json:"playbook,omitempty"`
	// Changes are the tasks that would change the host, with diffs (Secret values redacted).
	Changes   []ansible.TaskChange `json:"changes"`
	Truncated bool                 `json:"truncated,omitempty"`
	// Error says why the step could not be previewed.
	Error string `json:"error,omitempty"`
}

// NodePreview is a node's preview, step by step in pipeline order.
type NodePreview struct {
	Node  string        `json:"node"`
	Host  string        `json:"host,omitempty"`
	Steps []StepPreview `json:"steps"`
	// Changed is true when a step would change the host; Failed when a step could not be previewed.
	Changed bool   `json:"changed"`
	Failed  bool   `json:"failed,omitempty"`
	Error   string `json:"error,omitempty"`
}

// DataPlanePreview is a data plane's preview: the nodes a deployment would change (or that could not
// be previewed) in full, the others by name.
type DataPlanePreview struct {
	Nodes     []NodePreview `json:"nodes"`
	Unchanged []string      `json:"unchanged"`
	// Truncated is set when diffs were left out to keep the answer within MaxPreviewBytes.
	Truncated bool `json:"truncated,omitempty"`
}

// previewNode runs the check mode of each of the node's steps.
func previewNode(ctx workflow.Context, lc *object.Lifecycle, name string) NodePreview {
	ctx = previewing(ctx)
	out := NodePreview{Node: name, Steps: []StepPreview{}}
	cfg, err := readNodeConfig(ctx, lc.Ref.Namespace, name)
	if err != nil {
		out.Failed, out.Error = true, object.FailureMessage(err)
		return out
	}
	out.Host = cfg.HostName
	for _, step := range nodeStepNames(cfg) {
		sp := StepPreview{Step: step, Changes: []ansible.TaskChange{}}
		in, err := stepInput(ctx, lc, cfg, step, false)
		if err == nil {
			sp.Playbook = in.Playbook
			in.Check = true
			var res ansible.PlaybookResult
			err = workflow.ExecuteActivity(previewAnsible(ctx), ansibleActs.RunPlaybook, in).Get(ctx, &res)
			if res.Changes != nil {
				sp.Changes = res.Changes
			}
			sp.Truncated = res.ChangesTruncated
		}
		if err != nil {
			sp.Error = object.FailureMessage(err)
			out.Failed = true
		}
		out.Changed = out.Changed || len(sp.Changes) > 0
		out.Steps = append(out.Steps, sp)
	}
	return out
}

// previewAnsible gives a check-mode run fewer attempts than a deployment: a person waits for it.
func previewAnsible(ctx workflow.Context) workflow.Context {
	opts := workflow.GetActivityOptions(AnsibleActivity(ctx))
	opts.RetryPolicy = &temporal.RetryPolicy{InitialInterval: 2 * time.Second, BackoffCoefficient: 2, MaximumAttempts: 2}
	return workflow.WithActivityOptions(ctx, opts)
}

// Preview answers the node's preview update: every step of its pipeline in check mode.
func (r *edpmNodeReconciler) Preview(ctx workflow.Context, lc *object.Lifecycle) (any, error) {
	return previewNode(ctx, lc, lc.Ref.Name), nil
}

// Preview answers the data plane's preview update: each member node's preview, a few nodes at a time.
func (r *dataPlaneReconciler) Preview(ctx workflow.Context, lc *object.Lifecycle) (any, error) {
	var dp kube.Object
	if err := workflow.ExecuteActivity(object.KubeActivity(ctx), kubeActs.GetObject, lc.Ref).Get(ctx, &dp); err != nil {
		return nil, fmt.Errorf("read %s: %w", lc.Ref, err)
	}
	var spec dataplanev1beta1.OpenStackDataPlaneSpec
	if err := json.Unmarshal(dp.Spec, &spec); err != nil {
		return nil, fmt.Errorf("spec of %s: %w", lc.Ref, err)
	}
	members, err := listMembers(ctx, lc.Ref.Namespace, spec, nil, nil)
	if err != nil {
		return nil, err
	}
	previews := make([]NodePreview, len(members))
	running := 0
	wg := workflow.NewWaitGroup(ctx)
	for i, m := range members {
		if err := workflow.Await(ctx, func() bool { return running < previewParallel }); err != nil {
			return nil, err
		}
		running++
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			defer func() { running-- }()
			previews[i] = previewNode(ctx, lc, m.Name)
		})
	}
	wg.Wait(ctx)
	return BoundDataPlanePreview(previews, MaxPreviewBytes), nil
}

// BoundDataPlanePreview lists the nodes with changes or errors in full and the others by name; once the
// diffs reach max bytes, later diffs are left out (the tasks stay named) and Truncated says so.
func BoundDataPlanePreview(nodes []NodePreview, max int) DataPlanePreview {
	out := DataPlanePreview{Nodes: []NodePreview{}, Unchanged: []string{}}
	used := 0
	for _, n := range nodes {
		if !n.Changed && !n.Failed {
			out.Unchanged = append(out.Unchanged, n.Node)
			continue
		}
		for i := range n.Steps {
			for j := range n.Steps[i].Changes {
				c := &n.Steps[i].Changes[j]
				if used+len(c.Diff) > max {
					c.Diff = ""
					n.Steps[i].Truncated, out.Truncated = true, true
				}
				used += len(c.Diff)
			}
		}
		out.Nodes = append(out.Nodes, n)
	}
	return out
}
