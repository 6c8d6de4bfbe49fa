#!/usr/bin/env bash
# Build the local control plane's binaries from the Go module proxy, once, into a cache outside
# the repository: kube-apiserver, kube-controller-manager, kube-scheduler, kubectl (Kubernetes),
# etcd, and kwok. Re-running is cheap: a binary that already exists in the cache is kept.
#
# Environment:
#   PDD_CACHE        cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/pdd-operator)
#   K8S_VERSION      Kubernetes release to build (default v1.37.2)
#   ETCD_VERSION     etcd release (default v3.6.16)
#   KWOK_VERSION     kwok release (default v0.8.0)
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
PDD_CACHE="${PDD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pdd-operator}"
BIN="$PDD_CACHE/bin/k8s-$K8S_VERSION"
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0
mkdir -p "$BIN"

log() { printf '[build-binaries] %s\n' "$*" >&2; }

need() { for b in "$@"; do [[ -x "$BIN/$b" || -f "$BIN/$b" ]] || return 0; done; return 1; }

build_kubernetes() {
  need kube-apiserver kube-controller-manager kube-scheduler kubectl || { log "kubernetes $K8S_VERSION: cached"; return; }
  local work; work="$(mktemp -d)"; trap 'rm -rf "$work"' RETURN
  local dir; dir="$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
  local staging_tag="v0.${K8S_VERSION#v1.}"
  log "kubernetes $K8S_VERSION: wrapper module (staging modules at $staging_tag)"
  (
    cd "$work"
    go mod init pdd.local/k8s-build >/dev/null 2>&1
    {
      echo "require k8s.io/kubernetes $K8S_VERSION"
      # Every `k8s.io/X => ./staging/src/k8s.io/X` replace in kubernetes' go.mod becomes a replace
      # to the published tag of that staging module.
      grep -E '^\s*k8s.io/[^ ]+ => ./staging/' "$dir/go.mod" | awk -v tag="$staging_tag" '{print "replace " $1 " => " $1 " " tag}'
    } >> go.mod
    cat > tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
    go mod tidy -e >/dev/null 2>&1 || true
    go get "k8s.io/kubernetes@$K8S_VERSION" >&2
    local minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
    local now; now="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    local ld=""
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ld+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
      ld+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$now"
    done
    for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
      log "go build $cmd"
      go build -trimpath -ldflags "-s -w $ld" -o "$BIN/$cmd" "k8s.io/kubernetes/cmd/$cmd"
    done
  )
}

build_etcd() {
  need etcd || { log "etcd $ETCD_VERSION: cached"; return; }
  local work; work="$(mktemp -d)"; trap 'rm -rf "$work"' RETURN
  log "etcd $ETCD_VERSION"
  (
    cd "$work"
    go mod init pdd.local/etcd-build >/dev/null 2>&1
    go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2
    go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3
  )
}

build_kwok() {
  # kwok-stages is checked too: a kwok binary without its stage files is useless to cluster.sh.
  need kwok kwok-stages/pod/fast/pod-ready.yaml || { log "kwok $KWOK_VERSION: cached"; return; }
  log "kwok $KWOK_VERSION"
  GOBIN="$BIN" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  # kwok's stage definitions (node-initialize, pod-ready, ...) ship in its module source.
  local dir; dir="$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
  rm -rf "$BIN/kwok-stages"; mkdir -p "$BIN/kwok-stages"
  cp -r "$dir/kustomize/stage/." "$BIN/kwok-stages/"
  chmod -R u+w "$BIN/kwok-stages"
}

start=$(date +%s)
build_etcd
build_kwok
build_kubernetes
log "done in $(( $(date +%s) - start ))s: $BIN"
echo "$BIN"
