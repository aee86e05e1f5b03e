#!/usr/bin/env bash
# Sourced by run.sh and delete-samples.sh: runs stackflow on the local stack as `make run` runs it, as
# pods of the stack's own release of the chart (stackflow-system/stackflow: the bridge and one worker
# Deployment per task queue on the real node, from this checkout's images, through Temporal's TLS front
# with the payload codec), and scales them back to no pods when the script exits.
# Needs: $root (the checkout), the stack up (make up imports the images), bin/ built; STACKFLOW_STATE
# when the stack is not the checkout's .stackflow (stackflow-local reads it).
# Arguments go to `stackflow-local release -serve` (-serve-namespaces openstack: serve the samples'
# namespace only).
start_stackflow() {
  trap 'stop_stackflow' INT TERM EXIT
  "$root/bin/stackflow-local" release -serve "$@"
}

stop_stackflow() {
  trap - INT TERM EXIT
  "$root/bin/stackflow-local" release -stop || true
}
