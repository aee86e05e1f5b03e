#!/usr/bin/env bash
# `make run`: with the local stack up, runs the worker and the bridge in the foreground, applies the
# samples and prints where to look. Ctrl-C stops the worker and the bridge; `make down` stops the stack.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$root"
eval "$(bin/stackflow-local env)"
state=${STACKFLOW_STATE:-$root/.stackflow}
kubectl=$state/bin/kubectl
[ -x "$kubectl" ] || kubectl=kubectl
mkdir -p "$state/logs"
ui=$(bin/stackflow-local status | sed -n 's/.*UI \(http[^ ]*\).*/\1/p')

# One build ID for every checkout: a worker of an older checkout started after a newer one would not
# become current (see the README's upgrade section) and the samples would wait for the newer one.
STACKFLOW_KNOWN_HOSTS="$state/hosts/known_hosts" bin/stackflow-worker --kubeconfig "$KUBECONFIG" --temporal-address "$TEMPORAL_ADDRESS" --temporal-ui "$ui" \
  --build-id local >"$state/logs/worker.log" 2>&1 &
worker=$!
bin/stackflow-bridge --kubeconfig "$KUBECONFIG" --temporal-address "$TEMPORAL_ADDRESS" \
  >"$state/logs/bridge.log" 2>&1 &
bridge=$!
trap 'echo; echo "stopping worker and bridge (the stack keeps running; make down stops it)"; kill $worker $bridge 2>/dev/null; wait' INT TERM EXIT

cat <<MSG
stackflow is running: worker and bridge started (logs in $state/logs/{worker,bridge}.log).
Applying deploy/samples — a small cloud on the local stack — and showing each object until all are Ready:
MSG
if ! bin/stackflow-local samples -timeout "${STACKFLOW_SAMPLES_TIMEOUT:-30m}"; then
  echo "not every sample became Ready: see DETAIL above, the Temporal UI and the logs below"
fi

cat <<MSG

Where to look:
  Temporal UI     $ui   (search: StackflowKind="OpenStackDataPlaneNode", StackflowPhase="Failed")
  kubeconfig      export KUBECONFIG=$KUBECONFIG
  logs            $state/logs/{worker,bridge}.log and one per stack process

Try:
  $kubectl get osknodes
  $kubectl get openstackdataplanenodes,novaexternalcomputes,ovnmetadataagents,openstackservers -A
  $kubectl describe openstackdataplane -n openstack edpm
  temporal workflow list --address $TEMPORAL_ADDRESS --query 'StackflowKind="OpenStackDataPlaneNode"'
  temporal workflow query  --address $TEMPORAL_ADDRESS --workflow-id '<id from status.workflowID>' --name status
  temporal workflow signal --address $TEMPORAL_ADDRESS --workflow-id '<id>' --name pause   (then resume)
  (kubectl and temporal are in $state/bin)

Ctrl-C stops the worker and the bridge; make down stops the stack.
MSG
wait
