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
# one mock file per service client: package directory and client name; the interface is declared in
# <name>_client.go. Source mode: mockgen parses that declaration (the interfaces embed nothing from other
# files), where reflect mode would build and run a program per interface, about 12 s of CPU each.
for m in activities/openstack:network activities/openstack:compute activities/openstack:volume \
  activities/openstack:image activities/openstack:placement activities/openstack:identity \
  activities/baremetal:ironic; do
  IFS=: read -r dir file <<<"$m"
  mkdir -p "$out/$dir/mock"
  "$tool" -package mock -self_package "github.com/stackflow/stackflow/$dir/mock" -destination "$out/$dir/mock/$file.go" \
    -write_source_comment=false -write_generate_directive=false -write_command_comment=false \
    -source "$dir/${file}_client.go"
done
