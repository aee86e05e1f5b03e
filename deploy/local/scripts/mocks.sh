#!/usr/bin/env bash
# Writes the mocks of the OpenStack service clients (activities/openstack's NetworkClient, …) with the
# pinned mockgen into activities/openstack/mock, or the directory given. make generate writes them; make
# lint diffs them against the tree.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
# shellcheck source=../versions.env
source "$root/deploy/local/versions.env"
out=${1:-$root/activities/openstack/mock}
bash "$root/deploy/local/tools/build.sh" mockgen
tool=${STACKFLOW_CACHE:-$HOME/.cache/stackflow}/bin/mockgen-$MOCKGEN_VERSION
mkdir -p "$out"
cd "$root"
# one file per service client: name, interface
for m in network:NetworkClient compute:ComputeClient volume:VolumeClient image:ImageClient placement:PlacementClient baremetal:BaremetalClient identity:IdentityClient; do
  file=${m%%:*} iface=${m#*:}
  "$tool" -package mock -self_package github.com/stackflow/stackflow/activities/openstack/mock -destination "$out/$file.go" \
    -write_source_comment=false -write_generate_directive=false -write_command_comment=false \
    github.com/stackflow/stackflow/activities/openstack "$iface"
done
