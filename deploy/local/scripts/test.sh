#!/usr/bin/env bash
# `make test`: every step of the suite (packages beside tools, then build, lint, unit, e2e), each timed; it
# ends, pass or fail, with a table of wall time per step and per end-to-end package and the total,
# against the budget: a warm `make test` (packages installed, tools cached) should take at most 35 minutes (reported, never asserted: machines differ by up to 2x).
set -uo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$root"
mkdir -p bin
steps=bin/test-steps.txt
e2elog=bin/e2e.log
: >"$steps"
rm -f "$e2elog"
start=$(date +%s)
budget=$((35 * 60))
# The machine's speed at the start (speed.sh): the suite's times vary with it from day to day.
read -r speed0 steal0 ticks0 sync0 < <(bash deploy/local/scripts/speed.sh) || speed0=""

# acct is the e2e step's process-accounting file while accounting is on ("" otherwise).
acct=""

fmt() { printf '%d min %02d s' $(($1 / 60)) $(($1 % 60)); }

# cpu_per_command prints the e2e step's CPU by command name (sa's lines: calls, real and CPU minutes).
cpu_per_command() {
  [ -n "$acct" ] && [ -s "$acct" ] || return 0
  sa -f "$acct" -a 2>/dev/null | awk '
    NR == 1 { total = $3 + 0; printf "    CPU of the e2e step: %.1f CPU-min in %d processes (sa, process accounting); by command:\n", total, $1; next }
    n < 14 { n++; printf "      %-20s %7.1f CPU-min %5.1f %%  %7d processes\n", $NF, $3 + 0, (total > 0 ? 100 * ($3 + 0) / total : 0), $1 }'
}

summary() {
  local name secs rc result total over
  echo
  echo "make test: wall time per step (end-to-end packages in the order they ended, their lanes ran side by side)"
  printf '  %-34s %14s  %s\n' STEP TIME RESULT
  while read -r name secs rc; do
    result=ok; [ "$rc" = 0 ] || result="FAILED ($rc)"
    printf '  %-34s %14s  %s\n' "$name" "$(fmt "$secs")" "$result"
    if [ "$name" = e2e ] && [ -f "$e2elog" ]; then
      # go test's summary lines: ok|FAIL <package> <seconds>s
      sed -nE 's#^(ok|FAIL)[[:space:]]+github.com/stackflow/stackflow/(tests/[^[:space:]]+)[[:space:]]+([0-9]+)(\.[0-9]+)?s.*#\2 \3 \1#p' "$e2elog" |
        while read -r pkg s r; do printf '    %-32s %14s  %s\n' "$pkg" "$(fmt "$s")" "$r"; done
      # the lanes (phase.lane; a phase's lanes ran side by side, e2e.sh), each phase with the share of
      # the cores it kept busy, then the critical path: the e2e packages' wall time
      grep -E $'^(lane [0-9.]+|phase [0-9]+|critical path)\t' "$e2elog" |
        while IFS=$'\t' read -r what s rest; do printf '    %-32s %14s  %s\n' "$what" "$(fmt "${s%s}")" "$rest"; done
      # the slowest top-level tests, from the packages' verbose output (deploy/local/scripts/e2e.sh)
      ls bin/e2e-tests/*.out >/dev/null 2>&1 && echo "    slowest tests:"
      grep -H -E '^--- (PASS|FAIL): [^ ]+ \([0-9.]+s\)' bin/e2e-tests/*.out 2>/dev/null |
        sed -E 's#^bin/e2e-tests/([^.]+)\.out:--- (PASS|FAIL): ([^ ]+) \(([0-9]+)(\.[0-9]+)?s\)#\4 tests/\1 \3#' |
        sort -rn | head -8 |
        while read -r s pkg name; do printf '      %-54s %10s\n' "$pkg $name" "$(fmt "$s")"; done
      cpu_per_command
    fi
  done <"$steps"
  total=$(($(date +%s) - start))
  over=""; [ "$total" -le "$budget" ] || over="  OVER the budget"
  printf '  %-34s %14s  (budget for a warm run: %s)%s\n' total "$(fmt "$total")" "$(fmt "$budget")" "$over"
  local speed1 steal1 ticks1 sync1
  if [ -n "$speed0" ] && read -r speed1 steal1 ticks1 sync1 < <(bash deploy/local/scripts/speed.sh); then
    printf '  machine (deploy/local/scripts/speed.sh): a fixed one-core workload %s s at the start, %s s at the end; a synced 4 KiB write %s ms, %s ms; %s %% of the CPU stolen by the hypervisor during the run\n' \
      "$speed0" "$speed1" "$sync0" "$sync1" "$(awk -v s=$((steal1 - steal0)) -v t=$((ticks1 - ticks0)) 'BEGIN { printf "%.1f", (t > 0 ? 100 * s / t : 0) }')"
  fi
}

step() {
  local name=$1 t0 rc
  shift
  t0=$(date +%s)
  "$@"
  rc=$?
  [ "$name" != e2e ] || [ -z "$acct" ] || accton off >/dev/null || true
  echo "$name $(($(date +%s) - t0)) $rc" >>"$steps"
  if [ "$rc" != 0 ]; then
    summary
    exit "$rc"
  fi
}

# packages (apt: about one core's work, much of it waiting on the archive and the disk) and tools (Go
# builds on every core) need nothing of each other: on a fresh machine they overlap. controller-gen is
# left to make generate; make test does not run it.
t0=$(date +%s)
make --no-print-directory packages >bin/packages.log 2>&1 &
packages=$!
trap 'kill $packages 2>/dev/null' EXIT
step tools make --no-print-directory tools TOOLS="etcd kube kwok temporal tctl workflowcheck crd-ref-docs mockgen"
wait "$packages"
rc=$?
trap - EXIT
cat bin/packages.log
echo "packages $(($(date +%s) - t0)) $rc" >>"$steps"
if [ "$rc" != 0 ]; then
  summary
  exit "$rc"
fi
for s in build lint unit; do
  step "$s" make --no-print-directory "$s"
done
# The end-to-end packages' CPU per command, from the kernel's process accounting (every process that
# ends during the step, the stack's services included: its teardown ends them): what the cores went to,
# which wall time alone cannot say on a machine kept busy.
if command -v accton >/dev/null && command -v sa >/dev/null; then
  acct=$root/bin/e2e-acct
  : >"$acct" && accton "$acct" >/dev/null || acct=""
  # Accounting is the whole machine's: an interrupted run must not leave it on.
  [ -z "$acct" ] || trap 'accton off >/dev/null 2>&1' EXIT
fi
step e2e make --no-print-directory e2e
summary
