//go:build retireall

package object

// This file is compiled only into the upgrade test's build B (TestUpgradeMidFlight in tests/servers,
// `go build -tags upgradeprobe,retireall`): the release without any old branch. Every change but the
// upgrade probe's is retired (retire.go), so a run of build A that still needed an old branch would
// fail its workflow task on B; A's runs in flight must not. (The corpus replays on upgradeprobe alone:
// its older runs predate changes, as TestRetirementRefusesOnlyOldBranches shows.)

func init() { retireAll = true }
