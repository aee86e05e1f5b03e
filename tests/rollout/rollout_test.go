package rollout

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stackflow/stackflow/activities/helm"
	"github.com/stackflow/stackflow/activities/kube"
	"github.com/stackflow/stackflow/api/lifecycle"
	"github.com/stackflow/stackflow/workflows/controlplane"
)

// TestRollout is the control-plane story on 3 control and 2 compute kwok nodes: a KupenstackConfiguration
// gives every node its OpenstackNode and labels and rolls out every component in graph order; a nova
// profile change, previewed first, upgrades only nova; a nova chart version that never becomes Ready is
// rolled back with a failed condition, and so is one whose rollout is cancelled while it waits;
// disabling a node removes its labels; a node the configuration drops, or every node once it is
// deleted, gets back the role labels its site had set.
func TestRollout(t *testing.T) {
	t.Cleanup(func() { restoreNodes(t) })
	startBridge(t, "bridge", servedKinds)
	startWorker(t, "worker", t.TempDir())
	nodesGivenBack(t)
	ns := releaseNamespace(t, "cloud")
	base, child, cfgName := env.Run+"-base", env.Run+"-cloud", env.Run+"-cloud"

	createObject(t, gvrProfile, "OpenStackCloudConfigurationProfile", base, baseProfileSpec("2m"))
	createObject(t, gvrProfile, "OpenStackCloudConfigurationProfile", child, map[string]any{
		"from": base,
		"components": map[string]any{"nova": map[string]any{
			"config": map[string]any{"nova.conf": "[DEFAULT]\ndebug = false\n"},
		}},
	})
	start := time.Now()
	createObject(t, gvrConfig, "KupenstackConfiguration", cfgName, map[string]any{
		"defaultProfile": child, "releaseNamespace": ns, "nodes": nodeSpecs,
	})
	t.Cleanup(func() { deleteAndWait(t, gvrConfig, cfgName, 3*time.Minute) })
	t.Cleanup(func() {
		deleteAndWait(t, gvrProfile, child, time.Minute)
		deleteAndWait(t, gvrProfile, base, time.Minute)
	})

	var parentID string
	t.Run("full rollout in graph order", func(t *testing.T) {
		s := waitConfig(t, cfgName, 5*time.Minute, "every component Deployed", allDeployed)
		t.Logf("full rollout of %d components Ready in %s", len(components), time.Since(start).Round(100*time.Millisecond))
		parentID = s.WorkflowID
		require.NotEmpty(t, parentID)

		// Every release is deployed at revision 1 with the rendered values hash, and its Deployments
		// are available.
		rels := releases(t, ns)
		for _, c := range components {
			require.True(t, rels[c].Exists, c)
			require.Equal(t, helm.ReleaseDeployed, rels[c].Status, c)
			require.Equal(t, 1, rels[c].Revision, c)
			require.Equal(t, s.component(c).ValuesHash, rels[c].ValuesHash, c)
		}
		deps, err := env.Kube.AppsV1().Deployments(ns).List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(deps.Items), 11)
		for _, d := range deps.Items {
			require.True(t, available(d), "deployment %s available", d.Name)
		}

		// Graph order, from the parent's history: every component started only after each of its
		// dependencies' rollouts completed, or, for one it installs beside, once that one signalled its
		// release applied; the independent infrastructure started together. Which of such a pair
		// completes first is the charts' (kwok's pods here are Ready at once; neutron's chart needs
		// nothing of placement's), not the rollout's, so it is not asserted.
		started, closed, applied := childEvents(t, parentID)
		for _, c := range components {
			comp, _ := controlplane.ControlPlane.Get(c)
			require.Contains(t, started, c)
			for _, d := range comp.DependsOn {
				if slices.Contains(comp.InstallsBeside, d) {
					require.Contains(t, applied, d, "%s's release was signalled applied", d)
					require.Less(t, applied[d], started[c], "%s started before its dependency %s's release was applied", c, d)
					require.Contains(t, closed, d)
					continue
				}
				require.Less(t, closed[d], started[c], "%s started before its dependency %s completed", c, d)
			}
		}
		firstDone := min(closed["mariadb"], closed["rabbitmq"], closed["memcached"])
		for _, c := range []string{"mariadb", "rabbitmq", "memcached"} {
			require.Less(t, started[c], firstDone, "%s started in parallel with the other infrastructure", c)
		}

		// OpenstackNodes: roles, profile, desired configuration; Kubernetes Nodes labelled.
		for _, n := range nodeSpecs {
			name, typ := n["name"].(string), n["type"].(string)
			var osk struct {
				Status struct {
					Status                   string                         `json:"status"`
					Roles                    []string                       `json:"roles"`
					Profile                  string                         `json:"profile"`
					DesiredNodeConfiguration controlplane.NodeConfiguration `json:"desiredNodeConfiguration"`
				} `json:"status"`
			}
			require.Eventually(t, func() bool {
				raw, _ := json.Marshal(getObject(t, gvrOSKNode, name).Object)
				_ = json.Unmarshal(raw, &osk)
				return osk.Status.Profile == child && len(osk.Status.DesiredNodeConfiguration.Components) > 0
			}, time.Minute, 500*time.Millisecond, "OpenstackNode %s gets profile and desired configuration", name)
			require.Equal(t, []string{typ}, osk.Status.Roles)
			require.Equal(t, "Ready", osk.Status.Status)
			if typ == "compute" {
				require.Contains(t, osk.Status.DesiredNodeConfiguration.Components, "nova")
				require.NotContains(t, osk.Status.DesiredNodeConfiguration.Components, "keystone")
			} else {
				require.Contains(t, osk.Status.DesiredNodeConfiguration.Components, "keystone")
			}
			node, err := env.Kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
			require.NoError(t, err)
			require.Equal(t, "enabled", node.Labels[controlplane.RoleLabels[typ]], "node %s labelled", name)
		}
	})

	t.Run("preview then a nova change upgrades only nova", func(t *testing.T) {
		require.NotEmpty(t, parentID)
		newNova := map[string]any{"config": map[string]any{"nova.conf": "[DEFAULT]\ndebug = true\n"}}
		candidate := controlplane.PreviewRequest{Profile: &controlplane.NamedProfile{Name: child, Spec: controlplane.ProfileSpec{
			From: base, Components: map[string]controlplane.ComponentProfile{"nova": {Config: map[string]string{"nova.conf": "[DEFAULT]\ndebug = true\n"}}},
		}}}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		h, err := env.Temporal.UpdateWorkflow(ctx, clientUpdate(parentID, candidate))
		require.NoError(t, err)
		var preview controlplane.PreviewResult
		require.NoError(t, h.Get(ctx, &preview))
		require.Equal(t, [][]string{{"nova"}}, preview.Plan.Waves)
		require.Len(t, preview.Diffs, 1)
		require.Contains(t, preview.Diffs[0].Diff, "-    debug = false")
		require.Contains(t, preview.Diffs[0].Diff, "+    debug = true")
		t.Logf("preview of nova:\n%s", preview.Diffs[0].Diff)
		require.Equal(t, 1, releases(t, ns)["nova"].Revision, "the preview applied nothing")

		mergePatch(t, gvrProfile, child, map[string]any{"spec": map[string]any{"components": map[string]any{"nova": newNova}}})
		s := waitConfig(t, cfgName, 3*time.Minute, "nova at revision 2", func(s configStatus, gen int64) bool {
			return allDeployed(s, gen) && s.component("nova").Revision == 2
		})
		rels := releases(t, ns)
		for _, c := range components {
			want := 1
			if c == "nova" {
				want = 2
			}
			require.Equal(t, want, rels[c].Revision, "revision of %s", c)
		}
		require.Equal(t, s.component("nova").ValuesHash, rels["nova"].ValuesHash)
		runs := childRuns(t, parentID)
		require.Equal(t, 2, runs["nova"], "nova rolled out twice in all")
		require.Equal(t, 1, runs["keystone"], "keystone rolled out once in all")
	})

	t.Run("a never-ready chart version is rolled back", func(t *testing.T) {
		mergePatch(t, gvrProfile, child, map[string]any{"spec": map[string]any{"components": map[string]any{"nova": map[string]any{
			"chart": map[string]any{"repository": charts.URL, "name": "nova", "version": "0.9.0"}, "readinessTimeout": "15s",
		}}}})
		s := waitConfig(t, cfgName, 3*time.Minute, "nova failed and rolled back", func(s configStatus, _ int64) bool {
			return s.component("nova").State == controlplane.ComponentFailed
		})
		cond := s.condition(controlplane.ConditionComponentsReady)
		require.Equal(t, metav1.ConditionFalse, cond.Status)
		require.Equal(t, helm.ErrNotReady, cond.Reason)
		require.Contains(t, cond.Message, "nova failed")
		require.Contains(t, cond.Message, "Deployment/nova-api")
		require.Contains(t, cond.Message, "rolled back to revision 2")
		require.Contains(t, cond.Message, "Helm: Rollback to 2")
		ready := s.condition("Ready")
		require.Equal(t, metav1.ConditionFalse, ready.Status)
		require.Equal(t, helm.ErrNotReady, ready.Reason)
		t.Logf("failed condition: %s", cond.Message)

		// The previous revision runs again: deployed, chart 0.1.0, nova-api available.
		rels := releases(t, ns)
		require.Equal(t, helm.ReleaseDeployed, rels["nova"].Status)
		require.Equal(t, "0.1.0", rels["nova"].ChartVersion)
		require.Equal(t, 4, rels["nova"].Revision)
		require.Eventually(t, func() bool {
			d, err := env.Kube.AppsV1().Deployments(ns).Get(context.Background(), "nova-api", metav1.GetOptions{})
			return err == nil && available(*d) && d.Spec.Template.Spec.NodeSelector["stackflow.io/never-scheduled"] == ""
		}, time.Minute, time.Second, "nova-api of the good revision is available")
		for _, c := range components {
			if c != "nova" {
				require.Equal(t, 1, rels[c].Revision, "%s untouched", c)
			}
		}

		// Back to the good version: nothing to upgrade, the rollback already deployed those values.
		mergePatch(t, gvrProfile, child, map[string]any{"spec": map[string]any{"components": map[string]any{"nova": map[string]any{
			"chart": map[string]any{"repository": charts.URL, "name": "nova", "version": "0.1.0"}, "readinessTimeout": "2m",
		}}}})
		waitConfig(t, cfgName, 2*time.Minute, "Ready again", func(s configStatus, gen int64) bool {
			return allDeployed(s, gen) && s.component("nova").Revision == 4
		})
		require.Equal(t, 4, releases(t, ns)["nova"].Revision)
	})

	t.Run("a rollout cancelled while it waits for readiness rolls back", func(t *testing.T) {
		mergePatch(t, gvrProfile, child, map[string]any{"spec": map[string]any{"components": map[string]any{"nova": map[string]any{
			"chart": map[string]any{"repository": charts.URL, "name": "nova", "version": "0.9.0"}, "readinessTimeout": "10m",
		}}}})
		// Held there: revision 5 never becomes Ready, and its wait lasts ten minutes. The component
		// says its release is applied once its rollout has scheduled the wait (the same workflow task).
		s := waitConfig(t, cfgName, 2*time.Minute, "nova's revision 5 applied and waited on", func(s configStatus, _ int64) bool {
			st := s.component("nova")
			return st.State == controlplane.ComponentDeploying && strings.Contains(st.Message, "release applied")
		})
		rels := releases(t, ns)
		require.Equal(t, 5, rels["nova"].Revision)
		require.Equal(t, "0.9.0", rels["nova"].ChartVersion)
		require.NoError(t, env.Temporal.CancelWorkflow(context.Background(), s.WorkflowID, ""))

		s = waitConfig(t, cfgName, 3*time.Minute, "the configuration cancelled", func(s configStatus, _ int64) bool {
			return s.Phase == "Cancelled"
		})
		ready := s.condition(lifecycle.ConditionReady)
		require.Equal(t, metav1.ConditionFalse, ready.Status)
		require.Equal(t, "Cancelled", ready.Reason)
		// The component's rollout put the release back before it ended: the cancellation does not leave
		// a revision that never became Ready running.
		d, err := env.Temporal.DescribeWorkflowExecution(context.Background(), controlplane.ComponentWorkflowID(s.WorkflowID, "nova"), "")
		require.NoError(t, err)
		require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, d.WorkflowExecutionInfo.Status, "nova's rollout")
		rels = releases(t, ns)
		require.Equal(t, helm.ReleaseDeployed, rels["nova"].Status)
		require.Equal(t, "0.1.0", rels["nova"].ChartVersion)
		require.Equal(t, 6, rels["nova"].Revision, "revision 4 again, as revision 6")
		require.Eventually(t, func() bool {
			d, err := env.Kube.AppsV1().Deployments(ns).Get(context.Background(), "nova-api", metav1.GetOptions{})
			return err == nil && available(*d) && d.Spec.Template.Spec.NodeSelector["stackflow.io/never-scheduled"] == ""
		}, time.Minute, time.Second, "nova-api of the good revision is available")

		// Back to the good version: the configuration stays Cancelled until its next change (the next
		// subtest's), whose run finds nothing to upgrade, as the rollback deployed those values.
		mergePatch(t, gvrProfile, child, map[string]any{"spec": map[string]any{"components": map[string]any{"nova": map[string]any{
			"chart": map[string]any{"repository": charts.URL, "name": "nova", "version": "0.1.0"}, "readinessTimeout": "2m",
		}}}})
	})

	t.Run("disabling a node removes its labels", func(t *testing.T) {
		nodes := slices.Clone(nodeSpecs)
		nodes[4] = map[string]any{"name": "compute-1", "type": "compute", "disabled": true}
		mergePatch(t, gvrConfig, cfgName, map[string]any{"spec": map[string]any{"nodes": nodes}})
		require.Eventually(t, func() bool {
			n, err := env.Kube.CoreV1().Nodes().Get(context.Background(), "compute-1", metav1.GetOptions{})
			if err != nil {
				return false
			}
			_, labelled := n.Labels[controlplane.LabelCompute]
			st, _ := getObject(t, gvrOSKNode, "compute-1").Object["status"].(map[string]any)
			dnc, _ := st["desiredNodeConfiguration"].(map[string]any)
			// A disabled node wants nothing.
			return !labelled && st["status"] == "Disabled" && dnc != nil && dnc["components"] == nil
		}, 2*time.Minute, 500*time.Millisecond, "compute-1 unlabelled, its OpenstackNode Disabled and wanting nothing")
		n0, err := env.Kube.CoreV1().Nodes().Get(context.Background(), "compute-0", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, "enabled", n0.Labels[controlplane.LabelCompute], "the other compute keeps its label")
		s := waitConfig(t, cfgName, 2*time.Minute, "configuration Ready at the new generation", allDeployed)
		require.Equal(t, int32(6), s.component("nova").Revision, "nova as the cancelled rollout's rollback left it")
		require.Equal(t, 6, releases(t, ns)["nova"].Revision)

		// Enabled again, it gets its label back.
		mergePatch(t, gvrConfig, cfgName, map[string]any{"spec": map[string]any{"nodes": nodeSpecs}})
		require.Eventually(t, func() bool {
			n, err := env.Kube.CoreV1().Nodes().Get(context.Background(), "compute-1", metav1.GetOptions{})
			return err == nil && n.Labels[controlplane.LabelCompute] == "enabled"
		}, 2*time.Minute, 500*time.Millisecond, "compute-1 labelled again")
	})

	// The bug this guards: a role stackflow gave a node outlived the configuration, read back from the
	// label stackflow itself had set.
	t.Run("a node the configuration drops gets its site's labels back", func(t *testing.T) {
		nodes := slices.Clone(nodeSpecs)
		nodes[4] = map[string]any{"name": "compute-1", "type": "control"}
		mergePatch(t, gvrConfig, cfgName, map[string]any{"spec": map[string]any{"nodes": nodes}})
		waitNode(t, "compute-1", "a control node", func(n *corev1.Node, roles []string) bool {
			_, compute := n.Labels[controlplane.LabelCompute]
			return n.Labels[controlplane.LabelControlPlane] == "enabled" && !compute && slices.Equal(roles, []string{"control"})
		})
		n, err := env.Kube.CoreV1().Nodes().Get(context.Background(), "compute-1", metav1.GetOptions{})
		require.NoError(t, err)
		require.JSONEq(t, `{"openstack-compute-node":"enabled"}`, n.Annotations[kube.AnnotationSiteRoleLabels], "what the site had is recorded")

		mergePatch(t, gvrConfig, cfgName, map[string]any{"spec": map[string]any{"nodes": nodeSpecs[:4]}})
		waitNode(t, "compute-1", "the site's compute node again, its OpenstackNode without a spec", func(n *corev1.Node, roles []string) bool {
			_, control := n.Labels[controlplane.LabelControlPlane]
			_, recorded := n.Annotations[kube.AnnotationSiteRoleLabels]
			spec, _ := getObject(t, gvrOSKNode, "compute-1").Object["spec"].(map[string]any)
			return n.Labels[controlplane.LabelCompute] == "enabled" && !control && !recorded && len(spec) == 0 &&
				slices.Equal(roles, []string{"compute"})
		})
		waitConfig(t, cfgName, 2*time.Minute, "configuration Ready without compute-1", allDeployed)
	})
}

// waitNode waits until the Kubernetes Node and its OpenstackNode's status.roles satisfy ok.
func waitNode(t *testing.T, name, what string, ok func(*corev1.Node, []string) bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		n, err := env.Kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		st, _ := getObject(t, gvrOSKNode, name).Object["status"].(map[string]any)
		var roles []string
		raw, _ := st["roles"].([]any)
		for _, r := range raw {
			s, _ := r.(string)
			roles = append(roles, s)
		}
		return ok(n, roles)
	}, 2*time.Minute, 250*time.Millisecond, "node %s: %s", name, what)
}

func available(d appsv1.Deployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == "True" {
			return d.Status.UpdatedReplicas == *d.Spec.Replicas && d.Status.ObservedGeneration >= d.Generation
		}
	}
	return false
}

// TestRolloutSurvivesWorkerKill kills the worker with SIGKILL in the middle of a full rollout; a new
// worker finishes it, and no component that had finished is upgraded a second time.
func TestRolloutSurvivesWorkerKill(t *testing.T) {
	// Nodes are not part of this story: only configurations and profiles are served.
	startBridge(t, "bridge-kill", "KupenstackConfiguration,OpenStackCloudConfigurationProfile")
	cache := t.TempDir()
	w := startWorker(t, "worker-kill-1", cache)
	ns := releaseNamespace(t, "crash")
	profile, cfgName := env.Run+"-crash", env.Run+"-crash"
	createObject(t, gvrProfile, "OpenStackCloudConfigurationProfile", profile, baseProfileSpec("2m"))
	createObject(t, gvrConfig, "KupenstackConfiguration", cfgName, map[string]any{
		"defaultProfile": profile, "releaseNamespace": ns,
	})
	cleanup := func() {
		deleteAndWait(t, gvrConfig, cfgName, 3*time.Minute)
		deleteAndWait(t, gvrProfile, profile, time.Minute)
	}
	t.Cleanup(cleanup)

	// Kill once some components are Deployed and others are not.
	s := waitConfig(t, cfgName, 3*time.Minute, "part of the rollout done", func(s configStatus, _ int64) bool {
		n := 0
		for _, c := range s.Components {
			if c.State == controlplane.ComponentDeployed {
				n++
			}
		}
		return n >= 3 && n < len(components)
	})
	var finished []string
	for _, c := range s.Components {
		if c.State == controlplane.ComponentDeployed {
			finished = append(finished, c.Name)
		}
	}
	w.Kill9()
	t.Logf("killed the worker with %s finished", strings.Join(finished, ", "))
	time.Sleep(2 * time.Second)
	startWorker(t, "worker-kill-2", cache)

	s = waitConfig(t, cfgName, 5*time.Minute, "every component Deployed after the crash", allDeployed)
	rels := releases(t, ns)
	for _, c := range finished {
		require.Equal(t, 1, rels[c].Revision, "%s finished before the crash and was not upgraded again", c)
	}
	for _, c := range components {
		require.Equal(t, helm.ReleaseDeployed, rels[c].Status, c)
	}
	runs := childRuns(t, s.WorkflowID)
	for _, c := range components {
		require.Equal(t, 1, runs[c], "one rollout run of %s", c)
	}
	// While the second worker still runs (cleanups run in reverse order, and it started last).
	cleanup()
}
