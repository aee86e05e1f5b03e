// Package helm holds the activities that roll out OpenStack-Helm components as Helm releases (through
// Helm's library, against the API server): install or upgrade, wait until ready, roll back to the last
// revision seen Ready, recover stuck releases, uninstall, diff, and the rendered values stored by
// reference in ConfigMaps. Helm's failures are classified beside them.
package helm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/stackflow/stackflow/activities/internal/heartbeat"

	"github.com/stackflow/stackflow/activities/kube"

	"github.com/pmezard/go-difflib/difflib"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/getter"
	helmkube "helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/repo"
	"helm.sh/helm/v3/pkg/storage/driver"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	sigsyaml "sigs.k8s.io/yaml"
)

// Helm holds the Helm activities: one release per OpenStack component, installed or upgraded through
// the Helm SDK with charts downloaded from chart repositories into a cache directory. They run on
// lifecycle.KubeQueue.
type Helm struct {
	config   *rest.Config
	core     kubernetes.Interface
	disc     discovery.CachedDiscoveryInterface
	cacheDir string
	settings *cli.EnvSettings
	// PollInterval paces readiness checks (default 1s).
	PollInterval time.Duration

	mu sync.Mutex // serialises chart downloads into the cache

	// configFor and chartFor, when set (unit tests), give the release storage and Kubernetes client of
	// a namespace (Helm's in-memory driver and fake client) and the charts, instead of the cluster and
	// the chart repositories.
	configFor func(namespace string) (*action.Configuration, error)
	chartFor  func(ref ChartRef) (*chart.Chart, error)
}

// NewHelm builds the Helm activities from the worker's REST config; charts are cached under cacheDir.
func NewHelm(cfg *rest.Config, cacheDir string) (*Helm, error) {
	core, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, fmt.Errorf("chart cache %s: %w", cacheDir, err)
	}
	return &Helm{config: cfg, core: core, disc: memory.NewMemCacheClient(dc), cacheDir: cacheDir, settings: cli.New(), PollInterval: time.Second}, nil
}

// Error types of Helm activities.
const (
	// ErrChartNotFound: the repository answers but has no such chart version.
	ErrChartNotFound = "HelmChartNotFound"
	// ErrChartRepository: the repository cannot be reached or read (retried a few times first).
	ErrChartRepository = "HelmChartRepositoryUnreachable"
	// ErrRender: the chart does not render with these values.
	ErrRender = "HelmRenderFailed"
	// ErrUpgradeFailed: Helm refused or failed the install or upgrade; the message is Helm's.
	ErrUpgradeFailed = "HelmUpgradeFailed"
	// ErrNotReady: the release's workloads did not become Ready in time.
	ErrNotReady = "HelmNotReady"
	// ErrPending: the release is in a pending state; recover it first.
	ErrPending = "HelmReleasePending"
)

// Release labels stackflow records on every release it installs, so a later run can tell that the
// deployed release already has the wanted values without rendering anything.
const (
	ReleaseLabelValuesHash = "stackflow.io/values-hash"
	ReleaseLabelComponent  = "stackflow.io/component"
	// ReleaseLabelReady marks a revision WaitReady saw Ready: the only revisions rollbacks return to.
	ReleaseLabelReady = "stackflow.io/ready"
)

// ReleaseDeployed is Helm's status of a release that is in place.
const ReleaseDeployed = string(release.StatusDeployed)

// ChartRef names a chart in a chart repository.
type ChartRef struct {
	Repository string `json:"repository"`
	Name       string `json:"name"`
	Version    string `json:"version"`
}

// String is repository/name@version.
func (c ChartRef) String() string {
	return fmt.Sprintf("%s/%s@%s", strings.TrimSuffix(c.Repository, "/"), c.Name, c.Version)
}

// ReleaseInfo is what Helm reports of one release.
type ReleaseInfo struct {
	Name         string `json:"name"`
	Exists       bool   `json:"exists"`
	Revision     int    `json:"revision,omitempty"`
	Status       string `json:"status,omitempty"`
	ChartVersion string `json:"chartVersion,omitempty"`
	ValuesHash   string `json:"valuesHash,omitempty"`
	Description  string `json:"description,omitempty"`
	// LastGood is the newest revision that was deployed (now or before), 0 when none ever was.
	LastGood int `json:"lastGood,omitempty"`
}

// ReleasesInput names releases in a namespace.
type ReleasesInput struct {
	Namespace string   `json:"namespace"`
	Names     []string `json:"names"`
}

// Releases reports the named releases (missing ones with Exists false).
func (h *Helm) Releases(ctx context.Context, in ReleasesInput) (map[string]ReleaseInfo, error) {
	cfg, err := h.actionConfig(in.Namespace)
	if err != nil {
		return nil, err
	}
	// One list of the namespace's releases, not one query per name: a rollout waits for this read.
	all, err := cfg.Releases.ListReleases()
	if err != nil {
		return nil, kube.Classify("list releases in "+in.Namespace, err)
	}
	hists := map[string][]*release.Release{}
	for _, r := range all {
		hists[r.Name] = append(hists[r.Name], r)
	}
	out := map[string]ReleaseInfo{}
	for _, name := range in.Names {
		out[name] = infoOf(name, hists[name])
	}
	return out, nil
}

// releaseInfo reads a release's history: its newest revision and the newest good one.
func releaseInfo(cfg *action.Configuration, name string) (ReleaseInfo, []*release.Release, error) {
	hist, err := cfg.Releases.History(name)
	if errors.Is(err, driver.ErrReleaseNotFound) || err == nil && len(hist) == 0 {
		return ReleaseInfo{Name: name}, nil, nil
	}
	if err != nil {
		return ReleaseInfo{}, nil, fmt.Errorf("history of release %s: %w", name, err)
	}
	return infoOf(name, hist), hist, nil
}

// infoOf is what a release's history (any order; sorted by revision here) says of it; no history is a
// release that does not exist.
func infoOf(name string, hist []*release.Release) ReleaseInfo {
	if len(hist) == 0 {
		return ReleaseInfo{Name: name}
	}
	releaseutil.SortByRevision(hist)
	last := hist[len(hist)-1]
	info := ReleaseInfo{Name: name, Exists: true, Revision: last.Version, Status: last.Info.Status.String(),
		ValuesHash: last.Labels[ReleaseLabelValuesHash], Description: last.Info.Description}
	if last.Chart != nil && last.Chart.Metadata != nil {
		info.ChartVersion = last.Chart.Metadata.Version
	}
	// The last good revision is the newest one seen Ready. Helm marks a revision rolled back from as
	// superseded too, so the status alone cannot tell; for releases stackflow never saw Ready (installed
	// by other means), the newest deployed or superseded revision stands in.
	for _, ready := range []bool{true, false} {
		for i := len(hist) - 1; i >= 0 && info.LastGood == 0; i-- {
			s := hist[i].Info.Status
			if (s == release.StatusDeployed || s == release.StatusSuperseded) && (!ready || hist[i].Labels[ReleaseLabelReady] == "true") {
				info.LastGood = hist[i].Version
			}
		}
	}
	return info
}

// ReleaseInput is one component's wanted release: its chart and its stored values (by reference).
type ReleaseInput struct {
	Component  string    `json:"component"`
	Release    string    `json:"release"`
	Namespace  string    `json:"namespace"`
	Chart      ChartRef  `json:"chart"`
	Values     ValuesRef `json:"values"`
	ValuesHash string    `json:"valuesHash"`
}

// UpgradeResult says what UpgradeOrInstall did.
type UpgradeResult struct {
	// Action is install, upgrade or none (already deployed with this chart version and values hash).
	Action   string `json:"action"`
	Revision int    `json:"revision"`
	// Previous is the revision that was deployed before, the one to roll back to (0 after an install).
	Previous int `json:"previous,omitempty"`
}

// UpgradeOrInstall installs the release when none was ever deployed and upgrades it otherwise. It is
// idempotent: a release already deployed with the same chart version and values hash is left alone, so
// a retry after a lost response, or a second rollout, never upgrades twice. It does not wait for
// readiness (WaitReady does, heartbeating).
func (h *Helm) UpgradeOrInstall(ctx context.Context, in ReleaseInput) (*UpgradeResult, error) {
	cfg, err := h.actionConfig(in.Namespace)
	if err != nil {
		return nil, err
	}
	info, _, err := releaseInfo(cfg, in.Release)
	if err != nil {
		return nil, err
	}
	if info.Exists && info.Status == ReleaseDeployed && info.ChartVersion == in.Chart.Version && info.ValuesHash == in.ValuesHash {
		return &UpgradeResult{Action: "none", Revision: info.Revision, Previous: info.Revision}, nil
	}
	if info.Exists && strings.HasPrefix(info.Status, "pending-") {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("release %s/%s is %s at revision %d; recover it first", in.Namespace, in.Release, info.Status, info.Revision), ErrPending, nil)
	}
	ch, err := h.loadChart(ctx, in.Chart)
	if err != nil {
		return nil, err
	}
	values, err := h.values(ctx, in.Values)
	if err != nil {
		return nil, err
	}
	lbls := map[string]string{ReleaseLabelValuesHash: in.ValuesHash, ReleaseLabelComponent: in.Component}
	stop := heartbeat.Every(ctx, 3*time.Second, func() any { return "helm " + in.Release })
	defer stop()

	if info.LastGood == 0 {
		// Never deployed: a failed first install leaves a release Helm will not upgrade; remove it.
		if info.Exists {
			un := action.NewUninstall(cfg)
			un.Timeout = 2 * time.Minute
			if _, err := un.Run(in.Release); err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
				return nil, fmt.Errorf("uninstall failed first install of %s: %w", in.Release, err)
			}
		}
		inst := action.NewInstall(cfg)
		inst.ReleaseName = in.Release
		inst.Namespace = in.Namespace
		inst.CreateNamespace = true
		inst.Labels = lbls
		inst.Timeout = 5 * time.Minute
		rel, err := inst.RunWithContext(ctx, ch, values)
		if err != nil {
			return nil, helmFailure("install", in, err)
		}
		return &UpgradeResult{Action: "install", Revision: rel.Version}, nil
	}
	up := action.NewUpgrade(cfg)
	up.Namespace = in.Namespace
	up.ResetValues = true
	// Helm copies the previous revision's labels; "null" drops the Ready mark, which this revision has
	// yet to earn.
	up.Labels = map[string]string{ReleaseLabelValuesHash: in.ValuesHash, ReleaseLabelComponent: in.Component, ReleaseLabelReady: "null"}
	up.MaxHistory = 20
	up.Timeout = 5 * time.Minute
	rel, err := up.RunWithContext(ctx, in.Release, ch, values)
	if err != nil {
		return nil, helmFailure("upgrade", in, err)
	}
	return &UpgradeResult{Action: "upgrade", Revision: rel.Version, Previous: info.LastGood}, nil
}

// helmFailure classifies a failed install or upgrade: render errors and refusals by the API server are
// permanent and carry Helm's message; connection trouble is retried.
func helmFailure(op string, in ReleaseInput, err error) error {
	msg := fmt.Sprintf("%s of release %s/%s (chart %s-%s): %v", op, in.Namespace, in.Release, in.Chart.Name, in.Chart.Version, err)
	s := err.Error()
	switch {
	case strings.Contains(s, "parse error") || strings.Contains(s, "template:") || strings.Contains(s, "unable to build kubernetes objects") || strings.Contains(s, "execution error"):
		return temporal.NewNonRetryableApplicationError(msg, ErrRender, err)
	case strings.Contains(s, "connection refused") || strings.Contains(s, "i/o timeout") || strings.Contains(s, "TLS handshake"):
		return fmt.Errorf("%s: %w", msg, err)
	}
	return temporal.NewNonRetryableApplicationError(msg, ErrUpgradeFailed, err)
}

// WaitInput names a release to wait for.
type WaitInput struct {
	Release   string        `json:"release"`
	Namespace string        `json:"namespace"`
	Revision  int           `json:"revision"`
	Timeout   time.Duration `json:"timeout"`
}

// WaitReady waits until every Deployment, StatefulSet, DaemonSet, Job and Pod of the release's revision
// is Ready (Deployments available with their new ReplicaSet, Jobs complete), heartbeating its progress.
// The deadline counts from the revision's deployment time, so a retried attempt on another worker does
// not start the clock again. Past it, it fails permanently naming what is not Ready and why.
func (h *Helm) WaitReady(ctx context.Context, in WaitInput) error {
	cfg, err := h.actionConfig(in.Namespace)
	if err != nil {
		return err
	}
	rel, err := cfg.Releases.Get(in.Release, in.Revision)
	if err != nil {
		return fmt.Errorf("get release %s revision %d: %w", in.Release, in.Revision, err)
	}
	resources, err := cfg.KubeClient.Build(bytes.NewBufferString(rel.Manifest), false)
	if err != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("objects of release %s: %v", in.Release, err), ErrRender, err)
	}
	checker := helmkube.NewReadyChecker(h.core, func(string, ...any) {}, helmkube.PausedAsReady(true), helmkube.CheckJobs(true))
	deadline := rel.Info.LastDeployed.Time.Add(in.Timeout)
	poll := h.PollInterval
	if poll == 0 {
		poll = time.Second
	}
	for {
		var waiting []string
		for _, r := range resources {
			ok, err := checker.IsReady(ctx, r)
			if err != nil {
				// A Job that failed for good will not become Ready: say why now instead of at the deadline.
				if r.Mapping.GroupVersionKind.Kind == "Job" {
					if why, failed := h.whyJobFailed(ctx, in.Namespace, r.Name); failed {
						return temporal.NewNonRetryableApplicationError(fmt.Sprintf("release %s/%s revision %d (chart %s): Job %s failed%s",
							in.Namespace, in.Release, in.Revision, rel.Chart.Metadata.Version, r.Name, why), ErrNotReady, err)
					}
				}
				return fmt.Errorf("readiness of %s %s: %w", r.Mapping.GroupVersionKind.Kind, r.Name, err)
			}
			if !ok {
				waiting = append(waiting, r.Mapping.GroupVersionKind.Kind+"/"+r.Name)
			}
		}
		if len(waiting) == 0 {
			return markReady(cfg, rel)
		}
		progress := fmt.Sprintf("%d of %d objects Ready; waiting for %s", len(resources)-len(waiting), len(resources), strings.Join(waiting, ", "))
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, progress)
		}
		if time.Now().After(deadline) {
			why := h.whyNotReady(ctx, in.Namespace, resources)
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("release %s/%s revision %d (chart %s) not Ready after %s: %s%s",
				in.Namespace, in.Release, in.Revision, rel.Chart.Metadata.Version, in.Timeout, strings.Join(waiting, ", "), why), ErrNotReady, nil)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

// markReady labels the release record of a revision seen Ready, so rollbacks know it is good.
func markReady(cfg *action.Configuration, rel *release.Release) error {
	if rel.Labels[ReleaseLabelReady] == "true" {
		return nil
	}
	if rel.Labels == nil {
		rel.Labels = map[string]string{}
	}
	rel.Labels[ReleaseLabelReady] = "true"
	if err := cfg.Releases.Update(rel); err != nil {
		return fmt.Errorf("mark release %s revision %d Ready: %w", rel.Name, rel.Version, err)
	}
	return nil
}

// whyJobFailed says whether the Job failed for good (its Failed condition) and why: the containers of its
// pods that exited with an error, with the last lines of their termination messages (a chart's containers
// fall back to their logs there).
func (h *Helm) whyJobFailed(ctx context.Context, ns, name string) (string, bool) {
	job, err := h.core.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", false
	}
	failed := false
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			failed = true
		}
	}
	if !failed {
		return "", false
	}
	pods, err := h.core.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + name})
	if err != nil {
		return "", true
	}
	var reasons []string
	for _, p := range pods.Items {
		for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			t := cs.State.Terminated
			if t == nil || t.ExitCode == 0 {
				continue
			}
			msg := fmt.Sprintf("pod %s container %s exited %d", p.Name, cs.Name, t.ExitCode)
			if m := strings.TrimSpace(t.Message); m != "" {
				msg += ": " + strings.ReplaceAll(kube.LastLines(m, 3), "\n", " | ")
			}
			reasons = append(reasons, msg)
		}
	}
	if len(reasons) == 0 {
		return "", true
	}
	// Every retry of a Job fails alike, as a rule: the last pod's reason is enough.
	return " (" + reasons[len(reasons)-1] + ")", true
}

// whyNotReady looks for the reason pods of the release's Deployments are not Ready (e.g. unschedulable).
func (h *Helm) whyNotReady(ctx context.Context, ns string, resources helmkube.ResourceList) string {
	var reasons []string
	for _, r := range resources {
		d, ok := helmkube.AsVersioned(r).(*appsv1.Deployment)
		if !ok || d.Spec.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil {
			continue
		}
		pods, err := h.core.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			continue
		}
		for _, p := range pods.Items {
			if why := podNotReady(p); why != "" {
				reasons = append(reasons, why)
			}
			if len(reasons) > 2 {
				break
			}
		}
	}
	if len(reasons) == 0 {
		return ""
	}
	return " (" + strings.Join(reasons, "; ") + ")"
}

// podNotReady says why a pod is not Ready ("" when nothing says): its first false condition with a
// message, then what its waiting containers wait on (a crash loop, a Secret that does not exist, an image
// that cannot be pulled), with the last lines a crashed container left.
func podNotReady(p corev1.Pod) string {
	var parts []string
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			parts = append(parts, fmt.Sprintf("pod %s %s: %s", p.Name, c.Type, c.Message))
			break
		}
	}
	for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		w := cs.State.Waiting
		if w == nil || w.Reason == "" || w.Reason == "PodInitializing" || w.Reason == "ContainerCreating" {
			continue
		}
		why := fmt.Sprintf("container %s %s", cs.Name, w.Reason)
		if m := strings.TrimSpace(w.Message); m != "" && w.Reason != "CrashLoopBackOff" {
			// A crash loop's message only repeats the back-off; the last exit says why.
			why += ": " + kube.LastLines(m, 1)
		}
		if t := cs.LastTerminationState.Terminated; t != nil && t.ExitCode != 0 {
			why += fmt.Sprintf(", last exited %d", t.ExitCode)
			if m := strings.TrimSpace(t.Message); m != "" {
				why += ": " + strings.ReplaceAll(kube.LastLines(m, 3), "\n", " | ")
			}
		}
		parts = append(parts, why)
	}
	return strings.Join(parts, "; ")
}

// RollbackInput names the release to roll back and the good revision to return to (0: uninstall, for a
// first install that never became Ready). Failed is the revision that failed.
type RollbackInput struct {
	Release   string `json:"release"`
	Namespace string `json:"namespace"`
	To        int    `json:"to"`
	Failed    int    `json:"failed"`
}

// RollbackResult is the revision now deployed (0 after an uninstall) and Helm's description of it.
type RollbackResult struct {
	Revision    int    `json:"revision"`
	Description string `json:"description"`
}

// Rollback returns the release to its last good revision. It is idempotent: when the newest revision
// is already a deployed rollback made after the failed one, it is reported and nothing is done.
func (h *Helm) Rollback(ctx context.Context, in RollbackInput) (*RollbackResult, error) {
	cfg, err := h.actionConfig(in.Namespace)
	if err != nil {
		return nil, err
	}
	info, _, err := releaseInfo(cfg, in.Release)
	if err != nil {
		return nil, err
	}
	stop := heartbeat.Every(ctx, 3*time.Second, func() any { return "helm rollback " + in.Release })
	defer stop()
	if in.To == 0 {
		if !info.Exists {
			return &RollbackResult{Description: "uninstalled"}, nil
		}
		un := action.NewUninstall(cfg)
		un.Timeout = 2 * time.Minute
		res, err := un.Run(in.Release)
		if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
			return nil, fmt.Errorf("uninstall %s/%s: %w", in.Namespace, in.Release, err)
		}
		desc := "uninstalled"
		if res != nil && res.Release != nil {
			desc = res.Release.Info.Description
		}
		return &RollbackResult{Description: desc}, nil
	}
	if info.Exists && info.Revision > in.Failed && info.Status == ReleaseDeployed {
		return &RollbackResult{Revision: info.Revision, Description: info.Description}, nil
	}
	rb := action.NewRollback(cfg)
	rb.Version = in.To
	rb.Timeout = 5 * time.Minute
	rb.MaxHistory = 20
	if err := rb.Run(in.Release); err != nil {
		return nil, fmt.Errorf("rollback %s/%s to revision %d: %w", in.Namespace, in.Release, in.To, err)
	}
	info, _, err = releaseInfo(cfg, in.Release)
	if err != nil {
		return nil, err
	}
	return &RollbackResult{Revision: info.Revision, Description: info.Description}, nil
}

// RecoverInput names a release that may be stuck.
type RecoverInput struct {
	Release   string `json:"release"`
	Namespace string `json:"namespace"`
}

// RecoverResult says what Recover found and did: Action is none, rollback or uninstall.
type RecoverResult struct {
	Action   string `json:"action"`
	Status   string `json:"status,omitempty"`
	Revision int    `json:"revision,omitempty"`
	// LastGood is the newest good revision after recovery (0 when the release was never deployed).
	LastGood int    `json:"lastGood,omitempty"`
	Message  string `json:"message,omitempty"`
}

// Recover detects a release stuck in pending-install, pending-upgrade or pending-rollback (Helm died
// mid-operation: a killed worker, a lost API server) and gets it out: a release never deployed is
// uninstalled, any other is rolled back to its last good revision. Only stackflow operates these
// releases, and one component's operations are serialised by its workflow, so a pending state seen here
// is always a dead operation, never one in flight.
func (h *Helm) Recover(ctx context.Context, in RecoverInput) (*RecoverResult, error) {
	cfg, err := h.actionConfig(in.Namespace)
	if err != nil {
		return nil, err
	}
	info, _, err := releaseInfo(cfg, in.Release)
	if err != nil {
		return nil, err
	}
	if !info.Exists || !strings.HasPrefix(info.Status, "pending-") {
		return &RecoverResult{Action: "none", Status: info.Status, Revision: info.Revision, LastGood: info.LastGood}, nil
	}
	if info.LastGood == 0 {
		res, err := h.Rollback(ctx, RollbackInput{Release: in.Release, Namespace: in.Namespace, Failed: info.Revision})
		if err != nil {
			return nil, err
		}
		return &RecoverResult{Action: "uninstall", Status: info.Status, Revision: info.Revision,
			Message: fmt.Sprintf("release %s was %s at revision %d and never deployed: %s", in.Release, info.Status, info.Revision, res.Description)}, nil
	}
	res, err := h.Rollback(ctx, RollbackInput{Release: in.Release, Namespace: in.Namespace, To: info.LastGood, Failed: info.Revision})
	if err != nil {
		return nil, err
	}
	return &RecoverResult{Action: "rollback", Status: info.Status, Revision: res.Revision, LastGood: res.Revision,
		Message: fmt.Sprintf("release %s was %s at revision %d: rolled back to revision %d (%s)", in.Release, info.Status, info.Revision, info.LastGood, res.Description)}, nil
}

// UninstallInput names a release to remove.
type UninstallInput struct {
	Release   string `json:"release"`
	Namespace string `json:"namespace"`
}

// Uninstall removes a release; a missing one is not an error.
func (h *Helm) Uninstall(ctx context.Context, in UninstallInput) error {
	_, err := h.Rollback(ctx, RollbackInput{Release: in.Release, Namespace: in.Namespace})
	return err
}

// DiffResult is a preview of one release: the unified diff between the deployed manifest and the one
// the wanted chart and values render to. Nothing is applied.
type DiffResult struct {
	Component string `json:"component"`
	// From and To are chart-version:values-hash of the deployed and the wanted release.
	From string `json:"from"`
	To   string `json:"to"`
	// Diff is at most MaxDiffBytes; Truncated says when it was cut (Lines counts the whole diff's).
	Diff      string `json:"diff"`
	Lines     int    `json:"lines"`
	Truncated bool   `json:"truncated,omitempty"`
}

// MaxDiffBytes bounds one release's preview diff: previews travel through workflow history, whose
// payloads are limited (2 MB), and a person reads the first screens anyway.
const MaxDiffBytes = 64 << 10

// boundDiff cuts d to at most max bytes at a line boundary.
func boundDiff(d string, max int) (string, bool) {
	if len(d) <= max {
		return d, false
	}
	cut := d[:max]
	if i := strings.LastIndexByte(cut, '\n'); i > 0 {
		cut = cut[:i+1]
	}
	return cut + "... (diff truncated)\n", true
}

// Diff renders the wanted release locally and diffs it against the deployed manifest.
func (h *Helm) Diff(ctx context.Context, in ReleaseInput) (*DiffResult, error) {
	cfg, err := h.actionConfig(in.Namespace)
	if err != nil {
		return nil, err
	}
	info, hist, err := releaseInfo(cfg, in.Release)
	if err != nil {
		return nil, err
	}
	var current string
	res := &DiffResult{Component: in.Component, From: "none", To: in.Chart.Version + ":" + in.ValuesHash}
	if info.Exists {
		current = hist[len(hist)-1].Manifest
		res.From = info.ChartVersion + ":" + info.ValuesHash
	}
	ch, err := h.loadChart(ctx, in.Chart)
	if err != nil {
		return nil, err
	}
	values, err := h.values(ctx, in.Values)
	if err != nil {
		return nil, err
	}
	var rel *release.Release
	if info.Exists {
		// Rendered as the upgrade would be, against the cluster, so that templates which look up what
		// they made before (generated passwords and keys) show no change where the upgrade makes none.
		up := action.NewUpgrade(cfg)
		up.Namespace = in.Namespace
		up.ResetValues = true
		up.DryRun = true
		up.DryRunOption = "server"
		rel, err = up.RunWithContext(ctx, in.Release, ch, values)
	}
	// A new release, or one Helm will not dry-run an upgrade of now (an operation in progress on it), is
	// rendered on its own.
	if !info.Exists || err != nil {
		inst := action.NewInstall(cfg)
		inst.ReleaseName = in.Release
		inst.Namespace = in.Namespace
		inst.DryRun = true
		inst.ClientOnly = true
		inst.Replace = true
		rel, err = inst.RunWithContext(ctx, ch, values)
	}
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("render %s (chart %s-%s): %v", in.Release, in.Chart.Name, in.Chart.Version, err), ErrRender, err)
	}
	res.Diff, err = difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(sortManifest(redactSecrets(current))), B: difflib.SplitLines(sortManifest(redactSecrets(rel.Manifest))),
		FromFile: in.Release + "@" + res.From, ToFile: in.Release + "@" + res.To, Context: 3,
	})
	if err != nil {
		return nil, fmt.Errorf("diff %s: %w", in.Release, err)
	}
	res.Lines = strings.Count(res.Diff, "\n")
	res.Diff, res.Truncated = boundDiff(res.Diff, MaxDiffBytes)
	return res, nil
}

// redactSecrets replaces every value of a Secret's data and stringData in a manifest by a digest of it:
// a preview travels through workflow history and is shown to people, so it may say that a secret value
// changes, never what it is. Documents that are not Secrets are left as they are.
func redactSecrets(m string) string {
	docs := releaseutil.SplitManifests(m)
	if len(docs) == 0 {
		return m
	}
	keys := make([]string, 0, len(docs))
	for k := range docs {
		keys = append(keys, k)
	}
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	var b strings.Builder
	for _, k := range keys {
		b.WriteString("---\n" + redactSecret(docs[k]) + "\n")
	}
	return b.String()
}

// redactSecret redacts one document if it is a Secret. A Secret that does not parse is replaced whole,
// since its values cannot be found to redact them.
func redactSecret(doc string) string {
	if !strings.Contains(doc, "Secret") {
		return doc
	}
	var obj map[string]any
	if err := sigsyaml.Unmarshal([]byte(doc), &obj); err != nil {
		return "# a document that does not parse, left out: it may hold secret values"
	}
	if obj["kind"] != "Secret" {
		return doc
	}
	for _, field := range []string{"data", "stringData"} {
		vals, _ := obj[field].(map[string]any)
		for k, v := range vals {
			sum := sha256.Sum256([]byte(fmt.Sprint(v)))
			vals[k] = "(redacted, sha256 " + hex.EncodeToString(sum[:6]) + ")"
		}
	}
	out, err := sigsyaml.Marshal(obj)
	if err != nil {
		return "# a Secret that cannot be shown redacted, left out"
	}
	// The source comment names the template, which the diff shows as context.
	if i := strings.Index(doc, "# Source: "); i >= 0 {
		if j := strings.IndexByte(doc[i:], '\n'); j > 0 {
			return doc[i:i+j] + "\n" + strings.TrimSpace(string(out))
		}
	}
	return strings.TrimSpace(string(out))
}

// sortManifest orders a manifest's documents by their source template, so diffs compare like with like.
func sortManifest(m string) string {
	docs := releaseutil.SplitManifests(m)
	keys := make([]string, 0, len(docs))
	for k := range docs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return docs[keys[i]] < docs[keys[j]] })
	var b strings.Builder
	for _, k := range keys {
		b.WriteString("---\n" + strings.TrimSpace(docs[k]) + "\n")
	}
	return b.String()
}

// loadChart returns the chart, downloading it from its repository into the cache on first use. A chart
// version missing from the repository is permanent; an unreachable repository is retried.
func (h *Helm) loadChart(_ context.Context, ref ChartRef) (*chart.Chart, error) {
	if h.chartFor != nil {
		return h.chartFor(ref)
	}
	sum := sha256.Sum256([]byte(ref.Repository))
	path := filepath.Join(h.cacheDir, "charts", hex.EncodeToString(sum[:6]), ref.Name+"-"+ref.Version+".tgz")
	h.mu.Lock()
	defer h.mu.Unlock()
	if ch, err := loader.Load(path); err == nil {
		return ch, nil
	}
	getters := getter.All(h.settings)
	r, err := repo.NewChartRepository(&repo.Entry{Name: "sf-" + hex.EncodeToString(sum[:6]), URL: ref.Repository}, getters)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("chart repository %s: %v", ref.Repository, err), ErrChartRepository, err)
	}
	r.CachePath = filepath.Join(h.cacheDir, "repository")
	idxPath, err := r.DownloadIndexFile()
	if err != nil {
		return nil, temporal.NewApplicationError(fmt.Sprintf("chart repository %s cannot be read: %v", ref.Repository, err), ErrChartRepository)
	}
	idx, err := repo.LoadIndexFile(idxPath)
	if err != nil {
		return nil, temporal.NewApplicationError(fmt.Sprintf("index of chart repository %s: %v", ref.Repository, err), ErrChartRepository)
	}
	cv, err := idx.Get(ref.Name, ref.Version)
	if err != nil || len(cv.URLs) == 0 {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("chart %s version %s not found in repository %s", ref.Name, ref.Version, ref.Repository), ErrChartNotFound, err)
	}
	u, err := repo.ResolveReferenceURL(ref.Repository, cv.URLs[0])
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("chart %s URL %s: %v", ref.Name, cv.URLs[0], err), ErrChartNotFound, err)
	}
	g, err := getters.ByScheme(strings.SplitN(u, ":", 2)[0])
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("chart %s URL %s: %v", ref.Name, u, err), ErrChartRepository, err)
	}
	buf, err := g.Get(u)
	if err != nil {
		return nil, temporal.NewApplicationError(fmt.Sprintf("download chart %s from %s: %v", ref.Name, u, err), ErrChartRepository)
	}
	data := buf.Bytes()
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("chart %s from %s: %v", ref.Name, u, err), ErrChartNotFound, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
		tmp := path + ".tmp"
		if os.WriteFile(tmp, data, 0o644) == nil {
			_ = os.Rename(tmp, path)
		}
	}
	return ch, nil
}

// actionConfig is a Helm action configuration for one namespace, releases stored as Secrets.
func (h *Helm) actionConfig(namespace string) (*action.Configuration, error) {
	if h.configFor != nil {
		return h.configFor(namespace)
	}
	cfg := new(action.Configuration)
	if err := cfg.Init(&restGetter{h: h, namespace: namespace}, namespace, "secret", func(string, ...any) {}); err != nil {
		return nil, fmt.Errorf("helm configuration for namespace %s: %w", namespace, err)
	}
	return cfg, nil
}

// restGetter hands Helm the worker's REST config, a shared discovery cache and the release namespace.
type restGetter struct {
	h         *Helm
	namespace string
}

func (g *restGetter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.h.config), nil }

func (g *restGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	return g.h.disc, nil
}

func (g *restGetter) ToRESTMapper() (meta.RESTMapper, error) {
	m := restmapper.NewDeferredDiscoveryRESTMapper(g.h.disc)
	return restmapper.NewShortcutExpander(m, g.h.disc, func(string) {}), nil
}

func (g *restGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(&clientcmd.ClientConfigLoadingRules{},
		&clientcmd.ConfigOverrides{Context: clientcmdapi.Context{Namespace: g.namespace}})
}
