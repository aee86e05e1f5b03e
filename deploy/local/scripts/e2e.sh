#!/usr/bin/env bash
# `make e2e`'s packages in phases: the phases one after another; in a phase, lanes side by side (one
# package's run leaves about half of the two cores idle: it waits on pods, playbooks and OpenStack), the
# packages of a lane one after another. Packages side by side share nothing but the stack's
# infrastructure: each has its Temporal namespace, Kubernetes namespaces, run prefix and test hosts, and
# its bridges serve its own namespaces (the Makefile's E2E_PHASE_* say which package goes where and why).
# Each package's test binary is linked ahead, while packages run: go test would link it again on every
# run (about 14 s of CPU for an e2e package here), serial with the tests. Prints go test's lines
# (ok|FAIL <package> <seconds>s; a failing package's output first), one line per lane
# (lane <phase>.<n> <seconds>s <packages>), one per phase (phase <n> <seconds>s <share of the cores
# busy>) and the critical path, which make test's table reads; each
# package's verbose output stays in bin/e2e-tests/<name>.out.
#
# usage: e2e.sh <timeout per package> <phase>...
#   a phase is one argument: lanes separated by "|", a lane's packages (names under tests/) by spaces.
#   $E2E_ONLY, when set, lists the packages to run (as ./tests/<name>/): the others are left out, and
#   one of them that no phase names runs alone after the phases.
set -uo pipefail
timeout=$1
shift
only=()
for p in ${E2E_ONLY:-}; do
  p=${p%/}
  only+=("${p##*/}")
done
wanted() { [ -z "${E2E_ONLY:-}" ] || [[ " ${only[*]} " == *" $1 "* ]]; }
# phases[i] holds its lanes separated by "|", each lane's packages by spaces; named marks what a phase
# names.
phases=()
named=" "
for ph in "$@"; do
  IFS='|' read -ra ls <<<"$ph"
  kept=()
  for l in "${ls[@]}"; do
    lane=""
    for n in $l; do
      named+="$n "
      wanted "$n" && lane+="$n "
    done
    [ -n "$lane" ] && kept+=("$lane")
  done
  [ "${#kept[@]}" -gt 0 ] && phases+=("$(IFS='|'; echo "${kept[*]}")")
done
for n in "${only[@]}"; do
  [[ "$named" == *" $n "* ]] || phases+=("$n")
done
root=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$root"
module=$(go list -m)
dir=bin/e2e-tests
rm -rf "$dir"
mkdir -p "$dir"
lock="$dir/print.lock"

# The links, in the order the packages start: phase by phase, the lanes' first packages, their second
# ones, …. <name>.test appears when it is linked, <name>.fail when not.
order=()
for ph in "${phases[@]}"; do
  IFS='|' read -ra ls <<<"$ph"
  for ((i = 0; ; i++)); do
    more=0
    for l in "${ls[@]}"; do
      read -ra ps <<<"$l"
      if [ "$i" -lt "${#ps[@]}" ]; then
        order+=("./tests/${ps[$i]}")
        more=1
      fi
    done
    [ "$more" = 1 ] || break
  done
done
(
  for p in "${order[@]}"; do
    p=${p%/}
    n=$(basename "$p")
    if go test -c -o "$dir/$n.test.tmp" "$p" >"$dir/$n.build.log" 2>&1; then
      mv "$dir/$n.test.tmp" "$dir/$n.test"
    else
      touch "$dir/$n.fail"
    fi
  done
) &
linker=$!
lanepids=()
trap 'pkill -P $linker 2>/dev/null; kill $linker 2>/dev/null; for l in "${lanepids[@]}"; do pkill -P "$l" 2>/dev/null; done' EXIT

# say prints its arguments' lines whole: lanes print at the same time.
say() {
  {
    flock 9
    cat
  } 9>"$lock"
}

# run runs one package and prints its line; its status is the package's.
run() {
  local p=${1%/} n pkg out t0 code secs
  n=$(basename "$p")
  pkg="$module/${p#./}"
  while [ ! -e "$dir/$n.test" ] && [ ! -e "$dir/$n.fail" ]; do
    sleep 0.5
  done
  if [ -e "$dir/$n.fail" ]; then
    { cat "$dir/$n.build.log"; printf 'FAIL\t%s [build failed]\n' "$pkg"; } | say
    return 1
  fi
  out="$dir/$n.out"
  t0=$(date +%s.%N)
  # go test runs a test binary in its package's directory. Verbose: bin/e2e-tests/<name>.out keeps each
  # test's time (and a failing package's whole log is printed).
  (cd "$p" && "$root/$dir/$n.test" -test.paniconexit0 -test.v -test.count=1 -test.timeout="$timeout") >"$out" 2>&1
  code=$?
  secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
  if [ "$code" = 0 ]; then
    printf 'ok  \t%s\t%ss\n' "$pkg" "$secs" | say
  else
    { cat "$out"; printf 'FAIL\t%s\t%ss\n' "$pkg" "$secs"; } | say
  fi
  return "$code"
}

# lane runs its packages one after another (all of them, a failure too) and prints its wall time.
lane() {
  local num=$1 t0 rc=0 p names=()
  shift
  t0=$(date +%s)
  for p in "$@"; do
    run "$p" || rc=1
    names+=("$(basename "${p%/}")")
  done
  printf 'lane %s\t%ds\t%s\n' "$num" $(($(date +%s) - t0)) "${names[*]}" | say
  return "$rc"
}

# ticks prints the machine's busy and total CPU ticks so far (/proc/stat: idle and iowait are not busy).
ticks() {
  local _c u n s i w q sq st
  read -r _c u n s i w q sq st _ </proc/stat
  echo "$((u + n + s + q + sq + st)) $((u + n + s + i + w + q + sq + st))"
}

rc=0
t0=$(date +%s)
for k in "${!phases[@]}"; do
  IFS='|' read -ra ls <<<"${phases[$k]}"
  read -r busy0 all0 < <(ticks)
  p0=$(date +%s)
  lanepids=()
  for i in "${!ls[@]}"; do
    read -ra ps <<<"${ls[$i]}"
    lane "$((k + 1)).$((i + 1))" "${ps[@]/#/./tests/}" &
    lanepids+=($!)
  done
  for l in "${lanepids[@]}"; do
    wait "$l" || rc=1
  done
  # How much of the machine the phase used: lanes side by side are worth it while cores sit idle.
  read -r busy1 all1 < <(ticks)
  printf 'phase %d\t%ds\t%d %% of the %d cores busy\n' $((k + 1)) $(($(date +%s) - p0)) \
    $((100 * (busy1 - busy0) / (all1 - all0 > 0 ? all1 - all0 : 1))) "$(nproc)" | say
done
printf 'critical path\t%ds\t(%d phases, one after another, of lanes side by side)\n' $(($(date +%s) - t0)) "${#phases[@]}" | say
exit "$rc"
