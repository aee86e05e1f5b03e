#!/usr/bin/env bash
# `make e2e`'s packages, one at a time, as `go test -p 1` runs them, but with each package's test binary
# linked ahead, while the package before it runs: go test links a package's test binary again on every
# run (about 14 s of CPU for an e2e package here), serial with the tests, while a package's run leaves
# about half the CPU idle. Prints go test's lines (ok|FAIL <package> <seconds>s; a failing package's
# output first), which make test's table reads; each package's verbose output stays in
# bin/e2e-tests/<name>.out.
#
# usage: e2e.sh <timeout per package> <package>...   (packages as ./tests/<name>)
set -uo pipefail
timeout=$1
shift
root=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$root"
module=$(go list -m)
dir=bin/e2e-tests
rm -rf "$dir"
mkdir -p "$dir"

# The links, in the order the packages run; <name>.test appears when it is linked, <name>.fail when not.
(
  for p in "$@"; do
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
trap 'pkill -P $linker 2>/dev/null; kill $linker 2>/dev/null' EXIT

rc=0
for p in "$@"; do
  p=${p%/}
  n=$(basename "$p")
  pkg="$module/${p#./}"
  while [ ! -e "$dir/$n.test" ] && [ ! -e "$dir/$n.fail" ]; do
    sleep 0.5
  done
  if [ -e "$dir/$n.fail" ]; then
    cat "$dir/$n.build.log"
    printf 'FAIL\t%s [build failed]\n' "$pkg"
    rc=1
    continue
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
    rc=1
  fi
done
exit "$rc"
