package worker

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
)

// DefaultDeployment is the worker deployment stackflow's workflow workers belong to.
const DefaultDeployment = "stackflow"

// BuildIDFromBinary is the build ID of this binary: the VCS revision it was built from (12 hex digits),
// with "-dirty" when the tree had uncommitted changes; empty when the binary carries no VCS information
// (go run, tests).
func BuildIDFromBinary() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	return buildIDFromSettings(info.Settings)
}

func buildIDFromSettings(settings []debug.BuildSetting) string {
	var rev, modified string
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
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

// promote makes this worker's version current in its deployment when it is the newer build (see
// shouldPromote), retrying until the server has seen this worker's pollers (it refuses a version without
// them) or ctx ends. It returns the version that is current when it is done.
func promote(ctx context.Context, c client.Client, cfg Config) (string, error) {
	h := c.WorkerDeploymentClient().GetHandle(cfg.Deployment)
	var last error
	for {
		desc, err := h.Describe(ctx, client.WorkerDeploymentDescribeOptions{})
		if err == nil {
			var ok bool
			if ok, err = shouldPromote(desc.Info, cfg.BuildID); err == nil {
				if !ok {
					return desc.Info.RoutingConfig.CurrentVersion.BuildID, nil
				}
				_, err = h.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{
					BuildID:       cfg.BuildID,
					ConflictToken: desc.ConflictToken,
					Identity:      cfg.Identity,
				})
				if err == nil {
					return cfg.BuildID, nil
				}
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("make build %s current in worker deployment %s: %w", cfg.BuildID, cfg.Deployment, errors.Join(ctx.Err(), last))
		case <-time.After(500 * time.Millisecond):
		}
	}
}
