#!/usr/bin/env bash
# `make delete-samples`: removes what `make run` left on the local stack (deploy/samples, and
# deploy/samples/day2 if applied) the way a user would: stackflow's bridge and workers (the stack's
# release, as make run runs them) serve the samples' workflows while every object is deleted at once
# (kubectl delete -f), and each workflow tears down what it made (nova-compute on the hosts, servers, the
# Nova's databases, Helm releases) before it removes its finalizer. Nothing to do when no sample exists.
# `make e2e` runs it first: the suite uses the same hosts.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$root"
# Without bin/ (make build), make run never ran in this checkout.
[ -x bin/stackflow-local ] || exit 0
rc=0
found=$(bin/stackflow-local samples -present) || rc=$?
case $rc in
  0) ;;
  3) exit 0 ;; # none
  *) echo "$found" >&2; exit "$rc" ;;
esac
echo "removing make run's samples from the stack (their workflows tear down what they made):"
echo "$found" | sed 's/^/  /'
# shellcheck source=stackflow.sh
source "$root/deploy/local/scripts/stackflow.sh"
# The samples live in namespace openstack (tests/samples proves it); serving only it leaves other
# namespaces to whoever serves them (tests/samples runs this beside packages with bridges of their own).
start_stackflow -serve-namespaces openstack
bin/stackflow-local samples -delete -timeout "${STACKFLOW_DELETE_TIMEOUT:-20m}"
