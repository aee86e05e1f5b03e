package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"k8s.io/apimachinery/pkg/util/wait"
)

// DefaultDeployment is the worker deployment stackflow's workflow workers belong to.
const DefaultDeployment = "stackflow"

// BuildIDFromBinary is the build ID of this binary: the VCS revision it was built from (12 hex digits),
// with "-dirty" when the tree had uncommitted changes and "-<tag>" per build tag (the same tree built
// with other tags holds other code); empty when the binary carries no VCS information (go run, tests).
func BuildIDFromBinary() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	return buildIDFromSettings(info.Settings)
}

func buildIDFromSettings(settings []debug.BuildSetting) string {
	var rev, modified, tags string
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		case "-tags":
			tags = s.Value
		}
	}
	if rev == "" {
		return ""
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified == "true" {
		rev += "-dirty"
	}
	for _, t := range strings.Split(tags, ",") {
		if t != "" {
			rev += "-" + t
		}
	}
	return rev
}

// deploymentOptions opts the workflow worker into worker versioning: it polls only for its own version
// (Deployment, BuildID), so a build's workflow tasks never reach another build's code unless the
// workflow's versioning behaviour moves it there. Behaviours are declared per workflow (every
// object.Definition has one), so no default is given: an undeclared one fails registration.
func (c Config) deploymentOptions() sdkworker.DeploymentOptions {
	if c.BuildID == "" {
		return sdkworker.DeploymentOptions{}
	}
	return sdkworker.DeploymentOptions{
		UseVersioning: true,
		Version:       sdkworker.WorkerDeploymentVersion{DeploymentName: c.Deployment, BuildID: c.BuildID},
	}
}

// shouldPromote decides whether the version mine becomes its deployment's current version: when there is
// none, or when the current one was first seen before mine (mine is the newer build). An older build that
// starts again (a crash-looping pod of the previous release) does not take the deployment back: rolling
// back is a person's decision (temporal worker deployment set-current-version).
func shouldPromote(info client.WorkerDeploymentInfo, mine string) (bool, error) {
	cur := info.RoutingConfig.CurrentVersion
	if cur == nil || cur.BuildID == "" {
		return true, nil
	}
	if cur.BuildID == mine {
		return false, nil
	}
	created := map[string]time.Time{}
	for _, v := range info.VersionSummaries {
		created[v.Version.BuildID] = v.CreateTime
	}
	mineAt, ok := created[mine]
	if !ok {
		return false, fmt.Errorf("version %s of deployment %s not known yet", mine, info.Name)
	}
	curAt, ok := created[cur.BuildID]
	return !ok || mineAt.After(curAt), nil
}

// promoteBackoff paces promotion attempts: quick at first (the server refuses a version until it has
// seen the worker's pollers), then slower, about five minutes in all.
var promoteBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 14}

// promoteAttempt bounds one attempt, so a call lost on a busy server is retried rather than waited on.
const promoteAttempt = 15 * time.Second

// promote makes this worker's version current in its deployment when it is the newer build (see
// shouldPromote), retrying with promoteBackoff until it is done or ctx ends. It returns the version that
// is current when it is done.
func promote(ctx context.Context, c client.Client, cfg Config, log *slog.Logger) (string, error) {
	h := c.WorkerDeploymentClient().GetHandle(cfg.Deployment)
	var current string
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, promoteBackoff, func(ctx context.Context) (bool, error) {
		actx, cancel := context.WithTimeout(ctx, promoteAttempt)
		defer cancel()
		current, last = promoteOnce(actx, h, cfg)
		if last != nil {
			log.Debug("promotion attempt", "deployment", cfg.Deployment, "buildID", cfg.BuildID, "error", last)
		}
		return last == nil, nil
	})
	if err != nil {
		return "", fmt.Errorf("make build %s current in worker deployment %s: %w", cfg.BuildID, cfg.Deployment, errors.Join(err, last))
	}
	return current, nil
}

// promoteOnce is one attempt of promote: the current version when this build should not or need not
// take over, or this build once the server made it current. A conflict (another worker changed the
// routing since the describe) is an error like any other: the next attempt describes again.
func promoteOnce(ctx context.Context, h client.WorkerDeploymentHandle, cfg Config) (string, error) {
	desc, err := h.Describe(ctx, client.WorkerDeploymentDescribeOptions{})
	if err != nil {
		return "", err
	}
	ok, err := shouldPromote(desc.Info, cfg.BuildID)
	if err != nil {
		return "", err
	}
	if !ok {
		return desc.Info.RoutingConfig.CurrentVersion.BuildID, nil
	}
	if _, err := h.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{
		BuildID:       cfg.BuildID,
		ConflictToken: desc.ConflictToken,
		Identity:      cfg.Identity,
	}); err != nil {
		return "", err
	}
	return cfg.BuildID, nil
}
