package rollout

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"

	"github.com/stackflow/stackflow/activities/helm"
	"github.com/stackflow/stackflow/workflows/controlplane"
)

// TestHelmActivities drives the Helm activities directly against the real API server: install, an
// idempotent repeat, readiness, a never-ready upgrade rolled back, a release stuck in pending-upgrade
// recovered, and a preview diff.
func TestHelmActivities(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	ns := releaseNamespace(t, "helm")
	rc, err := env.RESTAs("worker-kube") // the Helm activities act as the kube workers' ServiceAccount
	require.NoError(t, err)
	h, err := helm.NewHelm(rc, t.TempDir())
	require.NoError(t, err)
	h.PollInterval = 500 * time.Millisecond

	// Values go by reference: stored once, read by the Helm activities.
	in := func(version string, values map[string]any) helm.ReleaseInput {
		chart := helm.ChartRef{Repository: charts.URL, Name: "nova", Version: version}
		ref := helm.ValuesRef{Namespace: ns, Component: "nova", Hash: controlplane.ValuesHash(chart, values)}
		require.NoError(t, h.StoreValues(ctx, helm.StoreValuesInput{Ref: ref, Values: values}))
		return helm.ReleaseInput{Component: "nova", Release: "nova", Namespace: ns, Chart: chart, Values: ref, ValuesHash: ref.Hash}
	}
	good := in("0.1.0", map[string]any{"conf": map[string]any{"nova": map[string]any{"DEFAULT": map[string]any{"debug": "true"}}}})

	up, err := h.UpgradeOrInstall(ctx, good)
	require.NoError(t, err)
	require.Equal(t, "install", up.Action)
	require.Equal(t, 1, up.Revision)
	start := time.Now()
	require.NoError(t, h.WaitReady(ctx, helm.WaitInput{Release: "nova", Namespace: ns, Revision: 1, Timeout: 2 * time.Minute}))
	t.Logf("nova installed and Ready in %s", time.Since(start).Round(time.Millisecond))

	again, err := h.UpgradeOrInstall(ctx, good)
	require.NoError(t, err)
	require.Equal(t, "none", again.Action, "same chart version and values hash: nothing to do")
	require.Equal(t, 1, again.Revision)

	// Preview of a change: a diff of the rendered manifests, nothing applied.
	changed := in("0.1.0", map[string]any{"conf": map[string]any{"nova": map[string]any{"DEFAULT": map[string]any{"debug": "false"}}}})
	d, err := h.Diff(ctx, changed)
	require.NoError(t, err)
	require.Contains(t, d.Diff, "-    debug = true")
	require.Contains(t, d.Diff, "+    debug = false")
	rels, err := h.Releases(ctx, helm.ReleasesInput{Namespace: ns, Names: []string{"nova", "glance"}})
	require.NoError(t, err)
	require.Equal(t, 1, rels["nova"].Revision, "the preview applied nothing")
	require.False(t, rels["glance"].Exists)

	// A version that never becomes Ready: the wait fails naming why; rollback returns to revision 1.
	goodValues := map[string]any{"conf": map[string]any{"nova": map[string]any{"DEFAULT": map[string]any{"debug": "true"}}}}
	broken := in("0.9.0", goodValues)
	up, err = h.UpgradeOrInstall(ctx, broken)
	require.NoError(t, err)
	require.Equal(t, "upgrade", up.Action)
	require.Equal(t, 2, up.Revision)
	require.Equal(t, 1, up.Previous)
	err = h.WaitReady(ctx, helm.WaitInput{Release: "nova", Namespace: ns, Revision: 2, Timeout: 5 * time.Second})
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	require.Equal(t, helm.ErrNotReady, app.Type())
	require.Contains(t, app.Message(), "Deployment/nova-api")
	t.Logf("never-ready: %s", app.Message())
	rb, err := h.Rollback(ctx, helm.RollbackInput{Release: "nova", Namespace: ns, To: 1, Failed: 2})
	require.NoError(t, err)
	require.Equal(t, 3, rb.Revision)
	require.Contains(t, rb.Description, "Rollback to 1")
	rb2, err := h.Rollback(ctx, helm.RollbackInput{Release: "nova", Namespace: ns, To: 1, Failed: 2})
	require.NoError(t, err)
	require.Equal(t, 3, rb2.Revision, "a repeated rollback does nothing")
	require.NoError(t, h.WaitReady(ctx, helm.WaitInput{Release: "nova", Namespace: ns, Revision: 3, Timeout: time.Minute}))
	rels, err = h.Releases(ctx, helm.ReleasesInput{Namespace: ns, Names: []string{"nova"}})
	require.NoError(t, err)
	require.Equal(t, "0.1.0", rels["nova"].ChartVersion)
	require.Equal(t, good.ValuesHash, rels["nova"].ValuesHash, "the rollback carries the good revision's values hash")

	// A release left pending by a dead operation is detected and rolled back.
	cfg := actionConfig(t, ns)
	last, err := cfg.Releases.Last("nova")
	require.NoError(t, err)
	last.Info.Status = release.StatusPendingUpgrade
	require.NoError(t, cfg.Releases.Update(last))
	_, err = h.UpgradeOrInstall(ctx, changed)
	require.ErrorAs(t, err, &app)
	require.Equal(t, helm.ErrPending, app.Type())
	rec, err := h.Recover(ctx, helm.RecoverInput{Release: "nova", Namespace: ns})
	require.NoError(t, err)
	require.Equal(t, "rollback", rec.Action)
	require.Equal(t, "pending-upgrade", rec.Status)
	require.Contains(t, rec.Message, "rolled back to revision 1", "the last revision seen Ready, not the never-ready one")
	t.Logf("recover: %s", rec.Message)
	up, err = h.UpgradeOrInstall(ctx, changed)
	require.NoError(t, err)
	require.Equal(t, "upgrade", up.Action)
	require.NoError(t, h.WaitReady(ctx, helm.WaitInput{Release: "nova", Namespace: ns, Revision: up.Revision, Timeout: 2 * time.Minute}))

	// A chart version the repository does not have is a permanent, named failure.
	_, err = h.UpgradeOrInstall(ctx, in("7.7.7", nil))
	require.ErrorAs(t, err, &app)
	require.Equal(t, helm.ErrChartNotFound, app.Type())
	require.True(t, app.NonRetryable())

	require.NoError(t, h.Uninstall(ctx, helm.UninstallInput{Release: "nova", Namespace: ns}))
	rels, err = h.Releases(ctx, helm.ReleasesInput{Namespace: ns, Names: []string{"nova"}})
	require.NoError(t, err)
	require.False(t, rels["nova"].Exists)
}

// actionConfig is a Helm configuration of the test's own, to tamper with release records.
func actionConfig(t *testing.T, ns string) *action.Configuration {
	t.Helper()
	cfg := new(action.Configuration)
	getter := &restClientGetter{ns: ns}
	require.NoError(t, cfg.Init(getter, ns, "secret", func(string, ...any) {}))
	return cfg
}
