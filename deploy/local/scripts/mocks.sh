#!/usr/bin/env bash
# Writes the mocks of the OpenStack service clients with the pinned mockgen, each package's into its
# mock/ directory, under the tree or the directory given (which then mirrors the tree's paths). make
# generate writes them; make lint diffs them against the tree.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
# shellcheck source=../versions.env
source "$root/deploy/local/versions.env"
out=${1:-$root}
bash "$root/deploy/local/tools/build.sh" mockgen
tool=${STACKFLOW_CACHE:-$HOME/.cache/stackflow}/bin/mockgen-$MOCKGEN_VERSION
cd "$root"
# one file per service client: package directory, file, interface
for m in activities/openstack:network:NetworkClient activities/openstack:compute:ComputeClient \
  activities/openstack:volume:VolumeClient activities/openstack:image:ImageClient \
  activities/openstack:placement:PlacementClient activities/openstack:identity:IdentityClient \
  activities/baremetal:ironic:Client; do
  IFS=: read -r dir file iface <<<"$m"
  mkdir -p "$out/$dir/mock"
  "$tool" -package mock -self_package "github.com/stackflow/stackflow/$dir/mock" -destination "$out/$dir/mock/$file.go" \
    -write_source_comment=false -write_generate_directive=false -write_command_comment=false \
    "github.com/stackflow/stackflow/$dir" "$iface"
done
