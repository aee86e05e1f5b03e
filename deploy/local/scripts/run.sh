#!/usr/bin/env bash
# `make run`: with the local stack up, runs stackflow as pods of the stack's release (the bridge and the
# workers, from this checkout's images), applies the samples and prints where to look. Ctrl-C scales the
# release back to no pods; `make down` stops the stack.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$root"
# shellcheck source=stackflow.sh
source "$root/deploy/local/scripts/stackflow.sh"
start_stackflow
sleeper=""
trap 'echo; echo "stopping the bridge and the workers (the stack keeps running; make down stops it)"; [ -z "$sleeper" ] || kill "$sleeper" 2>/dev/null; stop_stackflow' INT TERM EXIT

cat <<MSG
stackflow is running: its bridge and workers are pods of release stackflow in namespace stackflow-system.
Applying deploy/samples — a small cloud on the local stack — and showing each object until all are Ready:
MSG
if ! bin/stackflow-local samples -timeout "${STACKFLOW_SAMPLES_TIMEOUT:-30m}"; then
  echo "not every sample became Ready: see DETAIL above, the Temporal UI and the logs below"
fi

echo
bash "$root/deploy/local/scripts/hints.sh"
echo "Ctrl-C stops the bridge and the workers; make down stops the stack; make delete-samples removes the samples."
# In the foreground until Ctrl-C: a wait, unlike a plain sleep, lets the trap run at once.
sleep infinity &
sleeper=$!
wait "$sleeper"
