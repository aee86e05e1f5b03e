package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/action"
	helmchart "helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/stackflow/stackflow/deploy/chart"
)

// The local stack installs stackflow's own chart, so its ServiceAccounts and least-privilege RBAC exist
// and the end-to-end tests run the bridge and the workers as those ServiceAccounts (by impersonation).
// The chart's Deployments get no replicas: the processes run on this machine, from the tree under test.
const (
	ChartRelease   = "stackflow"
	ChartNamespace = "stackflow-system"
)

// ServiceAccount is the Kubernetes user of the chart's account ("bridge", "worker-kube", …).
func ServiceAccount(account string) string {
	return "system:serviceaccount:" + ChartNamespace + ":" + ChartRelease + "-" + account
}

// installChart installs or upgrades the chart with no replicas (see above) when the release does not
// hold this tree's chart yet. The CRDs and admission policies the stack applied itself are adopted (the
// chart holds the same), and CRDs are left to the stack's own apply. A release `make run` scaled up
// stays as it is while its chart is this tree's.
func (s *Stack) installChart(ctx context.Context) error {
	return s.upgradeChart(ctx, idleReleaseValues(), false)
}

// idleReleaseValues are the values of the stack's release at rest: accounts and rules, no pods.
func idleReleaseValues() map[string]any {
	return map[string]any{
		"bridge": map[string]any{"replicas": 0},
		"workers": map[string]any{
			"stackflow": map[string]any{"replicas": 0}, "stackflow-kube": map[string]any{"replicas": 0},
			"stackflow-ansible": map[string]any{"replicas": 0}, "stackflow-openstack": map[string]any{"replicas": 0},
		},
	}
}

// upgradeChart installs the chart as the stack's release, or upgrades it to values (reset to the
// chart's defaults first), and returns once every Deployment is available. Unless always is set, a
// release that holds this tree's chart is left alone.
func (s *Stack) upgradeChart(ctx context.Context, values map[string]any, always bool) error {
	// One release operation at a time across the processes sharing the stack: packages side by side
	// bring the stack up (the idle release) while another serves its namespaces (ServeRelease); Helm
	// refuses an upgrade while another is pending ("another operation is in progress"), and a check made
	// during one would see it pending and start a second.
	return s.locked("release", func() error { return s.upgradeChartLocked(ctx, values, always) })
}

func (s *Stack) upgradeChartLocked(ctx context.Context, values map[string]any, always bool) error {
	t0 := time.Now()
	ch, err := chart.Load(s.RepoRoot)
	if err != nil {
		return err
	}
	ns, kubeconfig := ChartNamespace, s.Kubeconfig
	flags := &genericclioptions.ConfigFlags{KubeConfig: &kubeconfig, Namespace: &ns}
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, ns, "secret", func(string, ...any) {}); err != nil {
		return fmt.Errorf("helm: %w", err)
	}
	hash := chartHash(ch)
	what := "upgraded"
	hist, err := action.NewHistory(cfg).Run(ChartRelease)
	if !always && err == nil && len(hist) > 0 && hist[len(hist)-1].Labels[chartHashLabel] == hash && hist[len(hist)-1].Info.Status == release.StatusDeployed {
		return nil // what is installed is this tree's chart
	}
	labels := map[string]string{chartHashLabel: hash}
	switch {
	case errors.Is(err, driver.ErrReleaseNotFound):
		inst := action.NewInstall(cfg)
		inst.ReleaseName, inst.Namespace = ChartRelease, ns
		inst.CreateNamespace, inst.TakeOwnership, inst.SkipCRDs = true, true, true
		inst.Timeout, inst.Labels, inst.Wait = releaseTimeout, labels, true
		_, err = inst.RunWithContext(ctx, ch, values)
		what = "installed"
	case err == nil:
		up := action.NewUpgrade(cfg)
		up.Namespace, up.TakeOwnership, up.SkipCRDs, up.ResetValues = ns, true, true, true
		up.MaxHistory, up.Timeout, up.Labels, up.Wait = 3, releaseTimeout, labels, true
		_, err = up.RunWithContext(ctx, ChartRelease, ch, values)
	}
	if err != nil {
		return fmt.Errorf("helm release %s/%s of %s: %w", ns, ChartRelease, chart.Path, err)
	}
	s.Logf("kubernetes: %s stackflow's chart as release %s/%s (%s)", what, ns, ChartRelease, time.Since(t0).Round(100*time.Millisecond))
	return nil
}

// releaseTimeout bounds an install or upgrade of the stack's release, its rollout included.
const releaseTimeout = 4 * time.Minute

// chartHashLabel records on the release which chart content it holds, so an unchanged chart is not
// upgraded again on every `up`.
const chartHashLabel = "stackflow.io/chart-hash"

// chartHash hashes the chart's templates, files and values.
func chartHash(ch *helmchart.Chart) string {
	files := append(slices.Clone(ch.Templates), ch.Files...)
	slices.SortFunc(files, func(a, b *helmchart.File) int { return strings.Compare(a.Name, b.Name) })
	h := sha256.New()
	for _, f := range append(files, ch.Raw...) {
		h.Write([]byte(f.Name))
		h.Write(f.Data)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
