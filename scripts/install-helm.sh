#!/usr/bin/env bash
# Build helm from the Go module proxy into the project's binary cache (outside the repository) and
# print its path. No-op when the cached binary is already there. Tests that need helm call this.
#
#   HELM_VERSION   module version to build (default v3.22.0; v4.3.1 builds with HELM_MAJOR=4)
#   HELM_MAJOR     3 or 4 (default: from HELM_VERSION)
#   PDD_CACHE      cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/pdd-operator)
#
# Cost (measured on the 2-core test machines): about 190 CPU-seconds for v3.22.0, 270 for v4.3.1.
# A lock keeps two callers from building the same version at once; the second one waits and then
# finds the binary.
set -euo pipefail
HELM_VERSION="${HELM_VERSION:-v3.22.0}"
HELM_MAJOR="${HELM_MAJOR:-${HELM_VERSION:1:1}}"
PDD_CACHE="${PDD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pdd-operator}"
DEST="$PDD_CACHE/bin/helm-$HELM_VERSION"
BIN="$DEST/helm"

if [[ -x "$BIN" ]]; then
  echo "$BIN"
  exit 0
fi
command -v go >/dev/null || { echo "install-helm: needs the Go toolchain (go) on PATH" >&2; exit 1; }
mkdir -p "$DEST"
exec 9>"$DEST/.lock"
flock 9
if [[ ! -x "$BIN" ]]; then
  echo "install-helm: building helm $HELM_VERSION from the Go module proxy (a few CPU-minutes)..." >&2
  tmp="$(mktemp -d "$DEST/.build.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  GOBIN="$tmp" CGO_ENABLED=0 go install "helm.sh/helm/v$HELM_MAJOR/cmd/helm@$HELM_VERSION"
  mv "$tmp/helm" "$BIN"
fi
echo "$BIN"
