#!/usr/bin/env bash
# Prints where to look once `make run`'s samples are Ready: commands that work pasted into a new shell as
# printed (the eval line first puts kubectl, temporal, tctl and kubectl-stackflow of the pinned versions on
# the PATH and points them at the stack, Temporal through its TLS front with the codec). tests/samples runs
# every command line of the "In a new shell" block, in order.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
state=${STACKFLOW_STATE:-$root/.stackflow}
ui=$("$root/bin/stackflow-local" status | sed -n 's/.*UI \(http[^ ]*\).*/\1/p')
node="kubectl get osdpnode -n openstack edpm-compute-0 -o jsonpath='{.status.workflowID}'"
cat <<MSG
Where to look:
  Temporal UI     $ui   (search: StackflowKind="OpenStackDataPlaneNode", StackflowPhase="Failed")
  logs            kubectl logs -n stackflow-system deploy/stackflow-worker (-bridge, -worker-kube, -worker-ansible,
                  -worker-openstack); the stack's own processes log to $state/logs

In a new shell:
  cd $root && eval "\$(bin/stackflow-local env)"
  kubectl stackflow describe -A
  kubectl get pods -n stackflow-system -o wide
  kubectl get osknodes
  kubectl get pods -n openstack -o wide
  (umask 077; kubectl get secret -n openstack keystone-clouds -o jsonpath='{.data.clouds\.yaml}' | base64 -d > $state/kupenstack-clouds.yaml) && OS_CLIENT_CONFIG_FILE=$state/kupenstack-clouds.yaml openstack --os-cloud kupenstack catalog list
  kubectl get openstackdataplanenodes,novaexternalcomputes,ovnmetadataagents,openstackservers -A
  kubectl describe openstackdataplanenode -n openstack edpm-compute-0
  OS_CLIENT_CONFIG_FILE=$state/kupenstack-clouds.yaml openstack --os-cloud kupenstack network agent list --host edpm-compute-0
  OS_CLIENT_CONFIG_FILE=$state/kupenstack-clouds.yaml openstack --os-cloud kupenstack server list --long
  temporal workflow list --query 'StackflowKind="OpenStackDataPlaneNode"'
  tctl workflow list --query 'StackflowKind="OpenStackDataPlaneNode"'
  temporal workflow query --workflow-id "\$($node)" --name status
  tctl workflow query --workflow_id "\$($node)" --query_type status
  temporal workflow signal --workflow-id "\$($node)" --name pause
  tctl workflow signal --workflow_id "\$($node)" --name resume

Day 2: kubectl apply -f deploy/samples/day2 updates the sample computes to release "2".
MSG
