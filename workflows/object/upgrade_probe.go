//go:build upgradeprobe

package object

import (
	"fmt"

	"go.temporal.io/sdk/workflow"
)

// This file is compiled only into the upgrade test's build B (TestUpgradeMidFlight in tests/servers,
// `go build -tags upgradeprobe`): the same tree as build A with one more step at the start of every
// reconcile, guarded by GetVersion as docs/operations/upgrade.md says. A run that reconciled on build
// A replays on B without it; a reconcile that starts on B takes it, and its history shows it.

// ProbeChangeID is the change ID of build B's extra step, and ProbeMarker what the step records.
const (
	ProbeChangeID = probeChange
	ProbeMarker   = "reconciled on the upgraded build"
)

func init() { reconcileStep = probeStep }

// probeStep is build B's extra step: a side effect recording that the reconcile ran on B.
func probeStep(ctx workflow.Context, lc *Lifecycle) error {
	if workflow.GetVersion(ctx, ProbeChangeID, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil
	}
	var got string
	if err := workflow.SideEffect(ctx, func(workflow.Context) any { return ProbeMarker }).Get(&got); err != nil {
		return fmt.Errorf("upgrade probe of %s: %w", lc.Ref, err)
	}
	return nil
}
