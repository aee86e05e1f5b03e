package helm

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	helmtime "helm.sh/helm/v3/pkg/time"
	"k8s.io/client-go/kubernetes/fake"
)

// The install, upgrade, rollback and recovery decisions against Helm's own in-memory release storage
// and fake Kubernetes client (what Helm's action tests use), with a chart made in memory: what each
// release history leads to.

// releases is a namespace's release storage, and the Helm activities on it.
func releases(t *testing.T, kube *kubefake.FailingKubeClient) (*Helm, *storage.Storage) {
	store := storage.Init(driver.NewMemory())
	if kube == nil {
		kube = &kubefake.FailingKubeClient{PrintingKubeClient: kubefake.PrintingKubeClient{Out: io.Discard}}
	}
	cfg := &action.Configuration{Releases: store, KubeClient: kube, Capabilities: chartutil.DefaultCapabilities, Log: func(string, ...any) {}}
	h := &Helm{core: fake.NewClientset(),
		configFor: func(string) (*action.Configuration, error) { return cfg, nil },
		chartFor: func(ref ChartRef) (*chart.Chart, error) {
			tpl := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  replicas: {{ .Values.replicas | quote }}\n"
			if ref.Version == "0.0.0-broken" {
				tpl = "{{ .Values.nope.nope }"
			}
			return &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: ref.Name, Version: ref.Version},
				Templates: []*chart.File{{Name: "templates/cm.yaml", Data: []byte(tpl)}}}, nil
		}}
	require.NoError(t, h.StoreValues(context.Background(), StoreValuesInput{Ref: ValuesRef{Namespace: "openstack", Component: "keystone", Hash: "h2"}, Values: map[string]any{"replicas": 2}}))
	return h, store
}

// revision stores a release revision as an earlier operation left it.
func revision(t *testing.T, store *storage.Storage, version int, status release.Status, chartVersion, hash string, ready bool) {
	labels := map[string]string{ReleaseLabelValuesHash: hash}
	if ready {
		labels[ReleaseLabelReady] = "true"
	}
	require.NoError(t, store.Create(&release.Release{Name: "keystone", Namespace: "openstack", Version: version, Labels: labels,
		Info:  &release.Info{Status: status, Description: string(status), LastDeployed: helmTime(version)},
		Chart: &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: "keystone", Version: chartVersion}, Templates: []*chart.File{}}}))
}

func want(version, hash string) ReleaseInput {
	return ReleaseInput{Component: "keystone", Release: "keystone", Namespace: "openstack",
		Chart: ChartRef{Repository: "http://charts", Name: "keystone", Version: version}, Values: ValuesRef{Namespace: "openstack", Component: "keystone", Hash: hash}, ValuesHash: hash}
}

func permanent(t *testing.T, err error, errType string) {
	t.Helper()
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app) && app.NonRetryable(), "permanent: %v", err)
	require.Equal(t, errType, app.Type(), "%v", err)
}

func TestUpgradeOrInstall(t *testing.T) {
	for _, tc := range []struct {
		name    string
		history func(t *testing.T, s *storage.Storage)
		in      ReleaseInput
		want    UpgradeResult
		errType string
	}{
		{"none yet: installed", func(*testing.T, *storage.Storage) {}, want("1.0.0", "h2"), UpgradeResult{Action: "install", Revision: 1}, ""},
		{"deployed with this chart and values: nothing to do (a retry, a second rollout)", func(t *testing.T, s *storage.Storage) {
			revision(t, s, 1, release.StatusSuperseded, "1.0.0", "h1", true)
			revision(t, s, 2, release.StatusDeployed, "1.0.0", "h2", true)
		}, want("1.0.0", "h2"), UpgradeResult{Action: "none", Revision: 2, Previous: 2}, ""},
		{"new values: upgraded, the last Ready revision to go back to", func(t *testing.T, s *storage.Storage) {
			revision(t, s, 1, release.StatusDeployed, "1.0.0", "h1", true)
		}, want("1.0.0", "h2"), UpgradeResult{Action: "upgrade", Revision: 2, Previous: 1}, ""},
		{"the last upgrade failed: upgraded again, back to the last Ready one", func(t *testing.T, s *storage.Storage) {
			revision(t, s, 1, release.StatusSuperseded, "1.0.0", "h1", true)
			revision(t, s, 2, release.StatusFailed, "1.1.0", "h1", false)
		}, want("1.1.0", "h2"), UpgradeResult{Action: "upgrade", Revision: 3, Previous: 1}, ""},
		{"a failed first install: removed and installed again", func(t *testing.T, s *storage.Storage) {
			revision(t, s, 1, release.StatusFailed, "1.0.0", "h1", false)
		}, want("1.0.0", "h2"), UpgradeResult{Action: "install", Revision: 1}, ""},
		{"an operation that died midway: recover first", func(t *testing.T, s *storage.Storage) {
			revision(t, s, 1, release.StatusDeployed, "1.0.0", "h1", true)
			revision(t, s, 2, release.StatusPendingUpgrade, "1.0.0", "h2", false)
		}, want("1.0.0", "h2"), UpgradeResult{}, ErrPending},
		{"a chart that does not render: permanent, with Helm's message", func(*testing.T, *storage.Storage) {}, want("0.0.0-broken", "h2"), UpgradeResult{}, ErrRender},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, store := releases(t, nil)
			tc.history(t, store)
			got, err := h.UpgradeOrInstall(context.Background(), tc.in)
			if tc.errType != "" {
				permanent(t, err, tc.errType)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, *got)
			last, err := store.Last("keystone")
			require.NoError(t, err)
			require.Equal(t, release.StatusDeployed, last.Info.Status)
			require.Equal(t, "h2", last.Labels[ReleaseLabelValuesHash], "the revision carries its values hash")
			if tc.want.Action != "none" {
				require.Empty(t, last.Labels[ReleaseLabelReady], "a new revision has yet to earn its Ready mark")
				require.Equal(t, tc.want.Revision, last.Version)
			}
		})
	}
}

// An upgrade the cluster refuses is permanent and names the release; the last good revision stays.
func TestUpgradeRefusedByTheCluster(t *testing.T) {
	h, store := releases(t, &kubefake.FailingKubeClient{PrintingKubeClient: kubefake.PrintingKubeClient{Out: io.Discard},
		UpdateError: errors.New(`admission webhook "validate.keystone" denied the request`)})
	revision(t, store, 1, release.StatusDeployed, "1.0.0", "h1", true)
	_, err := h.UpgradeOrInstall(context.Background(), want("1.0.0", "h2"))
	permanent(t, err, ErrUpgradeFailed)
	require.ErrorContains(t, err, "openstack/keystone")
	info, err := h.Releases(context.Background(), ReleasesInput{Namespace: "openstack", Names: []string{"keystone"}})
	require.NoError(t, err)
	require.Equal(t, 1, info["keystone"].LastGood)
}

func TestRollback(t *testing.T) {
	for _, tc := range []struct {
		name    string
		history func(t *testing.T, s *storage.Storage)
		in      RollbackInput
		want    int
	}{
		{"to the last good revision", func(t *testing.T, s *storage.Storage) {
			revision(t, s, 1, release.StatusSuperseded, "1.0.0", "h1", true)
			revision(t, s, 2, release.StatusFailed, "1.1.0", "h2", false)
		}, RollbackInput{To: 1, Failed: 2}, 3},
		{"already rolled back (a retry): reported, nothing done", func(t *testing.T, s *storage.Storage) {
			revision(t, s, 1, release.StatusSuperseded, "1.0.0", "h1", true)
			revision(t, s, 2, release.StatusSuperseded, "1.1.0", "h2", false)
			revision(t, s, 3, release.StatusDeployed, "1.0.0", "h1", false)
		}, RollbackInput{To: 1, Failed: 2}, 3},
		{"a first install that never became Ready: uninstalled", func(t *testing.T, s *storage.Storage) {
			revision(t, s, 1, release.StatusDeployed, "1.0.0", "h1", false)
		}, RollbackInput{To: 0, Failed: 1}, 0},
		{"nothing there to uninstall", func(*testing.T, *storage.Storage) {}, RollbackInput{To: 0}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, store := releases(t, nil)
			tc.history(t, store)
			tc.in.Release, tc.in.Namespace = "keystone", "openstack"
			got, err := h.Rollback(context.Background(), tc.in)
			require.NoError(t, err)
			require.Equal(t, tc.want, got.Revision)
			hist, _ := store.History("keystone")
			if tc.want == 0 {
				require.Empty(t, hist, "uninstalled")
				return
			}
			require.Len(t, hist, 3, "one rollback revision, never two")
		})
	}
}

func TestRecover(t *testing.T) {
	for _, tc := range []struct {
		name    string
		history func(t *testing.T, s *storage.Storage)
		action  string
		good    int
	}{
		{"deployed: nothing to do", func(t *testing.T, s *storage.Storage) {
			revision(t, s, 1, release.StatusDeployed, "1.0.0", "h1", true)
		}, "none", 1},
		{"died mid-upgrade: rolled back to the last good", func(t *testing.T, s *storage.Storage) {
			revision(t, s, 1, release.StatusDeployed, "1.0.0", "h1", true)
			revision(t, s, 2, release.StatusPendingUpgrade, "1.1.0", "h2", false)
		}, "rollback", 3},
		{"died mid-install: uninstalled", func(t *testing.T, s *storage.Storage) {
			revision(t, s, 1, release.StatusPendingInstall, "1.0.0", "h1", false)
		}, "uninstall", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, store := releases(t, nil)
			tc.history(t, store)
			got, err := h.Recover(context.Background(), RecoverInput{Release: "keystone", Namespace: "openstack"})
			require.NoError(t, err)
			require.Equal(t, tc.action, got.Action)
			require.Equal(t, tc.good, got.LastGood)
		})
	}
}

// helmTime is a deployment time per revision, in order.
func helmTime(version int) helmtime.Time {
	return helmtime.Time{Time: time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC).Add(time.Duration(version) * time.Minute)}
}
