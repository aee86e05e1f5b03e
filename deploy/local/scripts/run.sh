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

STACKFLOW_KNOWN_HOSTS="$state/hosts/known_hosts" bin/stackflow-worker --kubeconfig "$KUBECONFIG" --temporal-address "$TEMPORAL_ADDRESS" --temporal-ui "$ui" \
  >"$state/logs/worker.log" 2>&1 &
worker=$!
bin/stackflow-bridge --kubeconfig "$KUBECONFIG" --temporal-address "$TEMPORAL_ADDRESS" \
  >"$state/logs/bridge.log" 2>&1 &
bridge=$!
trap 'echo; echo "stopping worker and bridge (the stack keeps running; make down stops it)"; kill $worker $bridge 2>/dev/null; wait' INT TERM EXIT

if compgen -G "deploy/samples/*.yaml" >/dev/null; then
  "$kubectl" apply -f deploy/samples/ || echo "some samples were refused (see above)"
fi

cat <<MSG

stackflow is running.
  Temporal UI     $ui   (search: StackflowKind="OpenstackNode")
  kubeconfig      export KUBECONFIG=$KUBECONFIG
  logs            $state/logs/{worker,bridge}.log and one per stack process

Try:
  $kubectl get osknodes
  $kubectl get nodes --show-labels
  $kubectl get openstackdataplanenodes,novaexternalcomputes,openstackservers -A
  temporal workflow list --address $TEMPORAL_ADDRESS --query 'StackflowKind="OpenstackNode"'
  temporal workflow query  --address $TEMPORAL_ADDRESS --workflow-id '<id from status.workflowID>' --name status
  temporal workflow signal --address $TEMPORAL_ADDRESS --workflow-id '<id>' --name pause   (then resume)
  (the temporal CLI is at $state/bin/temporal)

Ctrl-C to stop the worker and the bridge.
MSG
wait
