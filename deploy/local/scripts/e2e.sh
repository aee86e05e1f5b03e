#!/usr/bin/env bash
# `make e2e`'s packages, as `go test -p 1` runs them, but with each package's test binary linked ahead,
# while the package before it runs: go test links a package's test binary again on every run (about 14 s
# of CPU for an e2e package here), serial with the tests, while a package's run leaves part of the CPU
# idle. Prints go test's lines (ok|FAIL <package> <seconds>s; a failing package's output first), which
# make test's table reads; each package's verbose output stays in bin/e2e-tests/<name>.out.
#
# E2E_BESIDE="<anchor>:<package>..." runs those packages one after another beside the anchor package (a
# second lane), with the variables of E2E_BESIDE_ENV ("NAME=value ..."), and the package after the anchor
# starts once both lanes are done. Only packages that share nothing with the anchor belong there: no
# kind served by both packages' bridges in one namespace, no test host (STACKFLOW_HOST_BASE moves a
# package to other hosts), no kwok node the other relabels. Packages of the list not given to the
# script run in the main lane.
#
# usage: e2e.sh <timeout per package> <package>...   (packages as ./tests/<name>/)
set -uo pipefail
timeout=$1
shift
root=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$root"
module=$(go list -m)
dir=bin/e2e-tests
rm -rf "$dir"
mkdir -p "$dir"

norm() { local p=${1%/}; echo "${p#./}"; }

# The side lane: its anchor and its packages, those of them this run was given.
anchor="" side=()
if [ -n "${E2E_BESIDE:-}" ]; then
  anchor=$(norm "${E2E_BESIDE%%:*}")
  for s in ${E2E_BESIDE#*:}; do
    for p in "$@"; do
      [ "$(norm "$p")" = "$(norm "$s")" ] && side+=("$(norm "$s")")
    done
  done
  found=""
  for p in "$@"; do [ "$(norm "$p")" = "$anchor" ] && found=1; done
  [ -n "$found" ] || side=() # no anchor in this run: its side packages run in the main lane
fi
is_side() { local s; for s in "${side[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }

# The main lane, and every package in the order the links are made (a side lane's packages right after
# its anchor's).
main=() order=()
for p in "$@"; do
  p=$(norm "$p")
  is_side "$p" && continue
  main+=("$p")
  order+=("$p")
  [ "$p" = "$anchor" ] && order+=("${side[@]}")
done

# The links; <name>.test appears when it is linked, <name>.fail when not.
(
  for p in "${order[@]}"; do
    n=$(basename "$p")
    if go test -c -o "$dir/$n.test.tmp" "./$p" >"$dir/$n.build.log" 2>&1; then
      mv "$dir/$n.test.tmp" "$dir/$n.test"
    else
      touch "$dir/$n.fail"
    fi
  done
) &
linker=$!
trap 'pkill -P $linker 2>/dev/null; kill $linker 2>/dev/null' EXIT

# run <package>: waits for its test binary, runs it and prints go test's line; 0 when it passed.
run() {
  local p=$1 n pkg out t0 code secs
  n=$(basename "$p")
  pkg="$module/$p"
  while [ ! -e "$dir/$n.test" ] && [ ! -e "$dir/$n.fail" ]; do
    sleep 0.5
  done
  if [ -e "$dir/$n.fail" ]; then
    cat "$dir/$n.build.log"
    printf 'FAIL\t%s [build failed]\n' "$pkg"
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
    printf 'ok  \t%s\t%ss\n' "$pkg" "$secs"
  else
    cat "$out"
    printf 'FAIL\t%s\t%ss\n' "$pkg" "$secs"
  fi
  return "$code"
}

rc=0
for p in "${main[@]}"; do
  if [ "$p" = "$anchor" ] && [ ${#side[@]} -gt 0 ]; then
    (
      for v in ${E2E_BESIDE_ENV:-}; do export "${v?}"; done
      r=0
      for s in "${side[@]}"; do run "$s" || r=1; done
      exit "$r"
    ) &
    lane=$!
    run "$p" || rc=1
    wait "$lane" || rc=1
    continue
  fi
  run "$p" || rc=1
done
exit "$rc"
