#!/usr/bin/env bash
# `make run`: with the local stack up, runs the worker and the bridge in the foreground, applies the
# samples and prints where to look. Ctrl-C stops the worker and the bridge; `make down` stops the stack.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$root"
# shellcheck source=stackflow.sh
source "$root/deploy/local/scripts/stackflow.sh"
start_stackflow ""
trap 'echo; echo "stopping worker and bridge (the stack keeps running; make down stops it)"; stop_stackflow' INT TERM EXIT

cat <<MSG
stackflow is running: worker and bridge started (logs in $state/logs/{worker,bridge}.log).
Applying deploy/samples — a small cloud on the local stack — and showing each object until all are Ready:
MSG
if ! bin/stackflow-local samples -timeout "${STACKFLOW_SAMPLES_TIMEOUT:-30m}"; then
  echo "not every sample became Ready: see DETAIL above, the Temporal UI and the logs below"
fi

echo
bash "$root/deploy/local/scripts/hints.sh"
echo "Ctrl-C stops the worker and the bridge; make down stops the stack; make delete-samples removes the samples."
wait
