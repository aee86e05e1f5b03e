package worker

import (
	"runtime/debug"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/stackflow/stackflow/workflows"
)

func TestBuildIDFromSettings(t *testing.T) {
	for _, tc := range []struct {
		name     string
		settings []debug.BuildSetting
		want     string
	}{
		{"no VCS information", nil, ""},
		{"clean tree", []debug.BuildSetting{{Key: "vcs.revision", Value: "f61b275c0ffee1234567"}, {Key: "vcs.modified", Value: "false"}}, "f61b275c0ffe"},
		{"uncommitted changes", []debug.BuildSetting{{Key: "vcs.revision", Value: "f61b275c0ffee1234567"}, {Key: "vcs.modified", Value: "true"}}, "f61b275c0ffe-dirty"},
		{"short revision", []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}}, "abc"},
		{"build tags", []debug.BuildSetting{{Key: "-tags", Value: "upgradeprobe,netgo"}, {Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.modified", Value: "true"}},
			"0123456789ab-dirty-upgradeprobe-netgo"},
		{"tags without VCS information", []debug.BuildSetting{{Key: "-tags", Value: "upgradeprobe"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := buildIDFromSettings(tc.settings); got != tc.want {
				t.Errorf("buildIDFromSettings = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestShouldPromote(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	version := func(build string, at time.Time) client.WorkerDeploymentVersionSummary {
		return client.WorkerDeploymentVersionSummary{Version: sdkworker.WorkerDeploymentVersion{DeploymentName: "stackflow", BuildID: build}, CreateTime: at}
	}
	current := func(build string) client.WorkerDeploymentRoutingConfig {
		return client.WorkerDeploymentRoutingConfig{CurrentVersion: &sdkworker.WorkerDeploymentVersion{DeploymentName: "stackflow", BuildID: build}}
	}
	for _, tc := range []struct {
		name    string
		info    client.WorkerDeploymentInfo
		mine    string
		want    bool
		wantErr bool
	}{
		{"first build of a deployment", client.WorkerDeploymentInfo{VersionSummaries: []client.WorkerDeploymentVersionSummary{version("b", t0)}}, "b", true, false},
		{"already current", client.WorkerDeploymentInfo{RoutingConfig: current("b"), VersionSummaries: []client.WorkerDeploymentVersionSummary{version("b", t0)}}, "b", false, false},
		{"newer build upgrades", client.WorkerDeploymentInfo{RoutingConfig: current("a"),
			VersionSummaries: []client.WorkerDeploymentVersionSummary{version("a", t0), version("b", t0.Add(time.Hour))}}, "b", true, false},
		{"older build restarting does not roll back", client.WorkerDeploymentInfo{RoutingConfig: current("b"),
			VersionSummaries: []client.WorkerDeploymentVersionSummary{version("a", t0), version("b", t0.Add(time.Hour))}}, "a", false, false},
		{"current version deleted from the summaries", client.WorkerDeploymentInfo{RoutingConfig: current("a"),
			VersionSummaries: []client.WorkerDeploymentVersionSummary{version("b", t0)}}, "b", true, false},
		{"own version not registered yet", client.WorkerDeploymentInfo{RoutingConfig: current("a"),
			VersionSummaries: []client.WorkerDeploymentVersionSummary{version("a", t0)}}, "b", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := shouldPromote(tc.info, tc.mine)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("shouldPromote = %v, %v; want %v, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// A versioned worker refuses to register a workflow without a versioning behaviour (no default is set on
// purpose): every workflow must say whether it is pinned or auto-upgrades.
func TestEveryWorkflowDeclaresVersioning(t *testing.T) {
	for _, d := range workflows.All() {
		if d.Versioning != workflow.VersioningBehaviorPinned && d.Versioning != workflow.VersioningBehaviorAutoUpgrade {
			t.Errorf("workflow %s declares no versioning behaviour", d.Name)
		}
	}
}

func TestDeploymentOptions(t *testing.T) {
	if o := (Config{Deployment: "stackflow"}).deploymentOptions(); o.UseVersioning {
		t.Errorf("a worker without a build ID is versioned: %+v", o)
	}
	o := (Config{Deployment: "stackflow", BuildID: "f61b275c0ffe"}).deploymentOptions()
	if !o.UseVersioning || o.Version.DeploymentName != "stackflow" || o.Version.BuildID != "f61b275c0ffe" {
		t.Errorf("deploymentOptions = %+v, want version stackflow:f61b275c0ffe", o)
	}
	if o.DefaultVersioningBehavior != workflow.VersioningBehaviorUnspecified {
		t.Errorf("a default behaviour would hide a workflow that declares none: %+v", o)
	}
}
