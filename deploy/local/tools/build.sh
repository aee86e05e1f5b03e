#!/usr/bin/env bash
# Builds the pinned tool binaries of the local stack into a cache outside the checkout, keyed by version.
# Re-running is cheap: a binary that already exists for its version is not rebuilt.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../versions.env
source "$here/../versions.env"
cache=${STACKFLOW_CACHE:-$HOME/.cache/stackflow}
bin=$cache/bin
mkdir -p "$bin"
export GOFLAGS=-mod=mod
# The tools build with Go's default cgo setting, whatever the Makefile sets for stackflow's own binaries.
unset CGO_ENABLED

want() { # want NAME VERSION: true when the binary is missing
  [ -x "$bin/$1-$2" ] && return 1
  echo ">> building $1 $2 (first build only; cached in $bin)" >&2
  return 0
}

build_kube() {
  local v=$KUBERNETES_VERSION minor=${KUBERNETES_VERSION#v1.}
  minor=${minor%%.*}
  local ld="-s -w -X k8s.io/component-base/version.gitVersion=$v -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/client-go/pkg/version.gitVersion=$v -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
  local c missing=()
  for c in kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy; do
    want "$c" "$v" && missing+=("$c")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  # One go build for all of them: their shared packages compile once, and links run side by side.
  local tmp
  tmp=$(mktemp -d "$bin/kube-$v.XXXXXX")
  (cd "$here/kubernetes" && go build -trimpath -ldflags "$ld" -o "$tmp/" "${missing[@]/#/k8s.io/kubernetes/cmd/}")
  for c in "${missing[@]}"; do
    mv "$tmp/$c" "$bin/$c-$v"
  done
  rmdir "$tmp"
}

build_etcd() {
  if want etcd "$ETCD_VERSION"; then
    # The etcd main package is the root of the server module (the repository root is a library stub).
    (cd "$here/etcd" && go build -trimpath -ldflags "-s -w" -o "$bin/etcd-$ETCD_VERSION.tmp" go.etcd.io/etcd/server/v3)
    mv "$bin/etcd-$ETCD_VERSION.tmp" "$bin/etcd-$ETCD_VERSION"
  fi
}

build_temporal() {
  # Built from a module (tools/temporal) that pins a newer SQLite driver than the CLI's own; the binary's
  # name says both versions, so a machine with the older build builds this one.
  if want temporal "$TEMPORAL_CLI_BUILD"; then
    (cd "$here/temporal" && go build -trimpath -ldflags "-s -w" -o "$bin/temporal-$TEMPORAL_CLI_BUILD.tmp" github.com/temporalio/cli/cmd/temporal)
    mv "$bin/temporal-$TEMPORAL_CLI_BUILD.tmp" "$bin/temporal-$TEMPORAL_CLI_BUILD"
  fi
}

build_tctl() {
  # tctl v1.18.0 cannot be go-installed here (the proxy refuses the version list it reads for deprecation
  # notices); a module that requires it builds it.
  if want tctl "$TCTL_VERSION"; then
    (cd "$here/tctl" && go build -trimpath -ldflags "-s -w" -o "$bin/tctl-$TCTL_VERSION.tmp" github.com/temporalio/tctl/cmd/tctl)
    mv "$bin/tctl-$TCTL_VERSION.tmp" "$bin/tctl-$TCTL_VERSION"
  fi
}

goinstall() { # goinstall NAME VERSION PACKAGE
  if want "$1" "$2"; then
    local tmp
    tmp=$(mktemp -d)
    GOBIN=$tmp GOFLAGS= go install -trimpath -ldflags "-s -w" "$3@$2"
    mv "$tmp/$1" "$bin/$1-$2"
    rmdir "$tmp"
  fi
}

kwok_stages() { # the kwok module ships the node and pod stages the stack applies, and the Stage CRD
  local dst=$cache/share/kwok-$KWOK_VERSION
  [ -d "$dst/stage" ] && [ -d "$dst/crd" ] && return 0
  local dir
  dir=$(cd "$here/etcd" && GOFLAGS= go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  mkdir -p "$dst"
  local d
  for d in stage crd; do
    [ -d "$dst/$d" ] && continue
    rm -rf "$dst/$d.tmp"
    if [ $d = crd ]; then
      mkdir -p "$dst/crd.tmp" && cp "$dir/kustomize/crd/bases/kwok.x-k8s.io_stages.yaml" "$dst/crd.tmp/"
    else
      cp -r "$dir/kustomize/stage" "$dst/stage.tmp"
    fi
    chmod -R u+w "$dst/$d.tmp"
    mv "$dst/$d.tmp" "$dst/$d"
  done
}

targets=${*:-etcd kube kwok temporal tctl controller-gen workflowcheck crd-ref-docs mockgen}
# Kubernetes, by far the largest, builds beside the others: one go build at a time leaves a core idle
# during its links and the narrow ends of its package graph (a fresh machine builds for minutes).
kube=
if [[ " $targets " == *" kube "* ]]; then
  build_kube &
  kube=$!
  trap 'kill $kube 2>/dev/null' EXIT
fi
for t in $targets; do
  case $t in
    etcd) build_etcd ;;
    kube) ;;
    kwok) goinstall kwok "$KWOK_VERSION" sigs.k8s.io/kwok/cmd/kwok; kwok_stages ;;
    temporal) build_temporal ;;
    tctl) build_tctl ;;
    controller-gen) goinstall controller-gen "$CONTROLLER_GEN_VERSION" sigs.k8s.io/controller-tools/cmd/controller-gen ;;
    workflowcheck) goinstall workflowcheck "$WORKFLOWCHECK_VERSION" go.temporal.io/sdk/contrib/tools/workflowcheck ;;
    crd-ref-docs) goinstall crd-ref-docs "$CRD_REF_DOCS_VERSION" github.com/elastic/crd-ref-docs ;;
    mockgen) goinstall mockgen "$MOCKGEN_VERSION" go.uber.org/mock/mockgen ;;
    *) echo "unknown tool $t" >&2; exit 2 ;;
  esac
done
if [ -n "$kube" ]; then
  wait "$kube"
  trap - EXIT
fi
