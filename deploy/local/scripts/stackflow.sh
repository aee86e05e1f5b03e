#!/usr/bin/env bash
# Sourced by run.sh and delete-samples.sh: starts stackflow's worker and bridge on the local stack as
# `make run` runs them (the stack's Temporal namespace, one build ID for every checkout), logging to
# $state/logs/<name>-worker.log and <name>-bridge.log, and stops them when the script exits.
# Needs: $root (the checkout), the stack up, bin/ built.
eval "$("$root/bin/stackflow-local" env)"
state=${STACKFLOW_STATE:-$root/.stackflow}
mkdir -p "$state/logs"
ui=$("$root/bin/stackflow-local" status | sed -n 's/.*UI \(http[^ ]*\).*/\1/p')

# start_stackflow LOGPREFIX: one build ID for every checkout (--build-id local): a worker of an older
# checkout started after a newer one would not become current (see the README's upgrade section) and the
# samples would wait for the newer one.
start_stackflow() {
  STACKFLOW_KNOWN_HOSTS="$state/hosts/known_hosts" "$root/bin/stackflow-worker" --kubeconfig "$KUBECONFIG" \
    --temporal-address "$TEMPORAL_ADDRESS" --temporal-ui "$ui" --build-id local >"$state/logs/$1worker.log" 2>&1 &
  sf_worker=$!
  "$root/bin/stackflow-bridge" --kubeconfig "$KUBECONFIG" --temporal-address "$TEMPORAL_ADDRESS" \
    >"$state/logs/$1bridge.log" 2>&1 &
  sf_bridge=$!
  trap 'stop_stackflow' INT TERM EXIT
}

stop_stackflow() {
  trap - INT TERM EXIT
  kill "$sf_worker" "$sf_bridge" 2>/dev/null || true
  wait "$sf_worker" "$sf_bridge" 2>/dev/null || true
}
