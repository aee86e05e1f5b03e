#!/usr/bin/env bash
# `make bench`: the benchmarks of tests/bench against the real local stack (make up first), one after
# another. Each prints its figures and ratios against its baseline, run side by side; nothing asserts a
# time. The run is kept with what made it: bin/bench/<UTC time>.txt holds the commit (and whether the
# tree had changes), the machine line (speed.sh before and after: a fixed one-core workload, synced
# writes, stolen CPU, and the CPU model) and every result line; <UTC time>.log the whole output.
# usage: bench.sh    BENCH=<regexp> (default: every benchmark), BENCHTIME=<n>x (default 1x)
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$root"
bench=${BENCH:-.}
benchtime=${BENCHTIME:-1x}
out=bin/bench
mkdir -p "$out"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
log=$out/$stamp.log
summary=$out/$stamp.txt
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || commit="$commit (with uncommitted changes)"
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
machine() {
  read -r s st ticks sync < <(bash deploy/local/scripts/speed.sh)
  printf 'a fixed one-core workload %s s, a synced 4 KiB write %s ms, %s steal of %s ticks since boot' "$s" "$sync" "$st" "$ticks"
}
before=$(machine)
rc=0
go test -count=1 -p 1 -run '^$' -bench "$bench" -benchtime "$benchtime" -timeout 90m ./tests/bench/ 2>&1 | tee "$log" || rc=$?
after=$(machine)
{
  echo "commit $commit; BENCH=$bench BENCHTIME=$benchtime"
  echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $cpu"
  echo "  before: $before"
  echo "  after:  $after"
  grep -E '^(Benchmark|ok|FAIL|---)' "$log" || true
} >"$summary"
echo
cat "$summary"
echo "kept: $summary (whole output: $log)"
exit "$rc"
