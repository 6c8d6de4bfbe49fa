#!/usr/bin/env bash
# Build (and optionally push) the engine and operator images with the pins in
# operator/pdd_operator/pins.json. Uses docker buildx when present, else podman.
#   images/build.sh            # build both, tags from the pins
#   PUSH=1 images/build.sh     # build and push
#   REGISTRY=my.registry/team images/build.sh   # other repositories, same tags
set -euo pipefail
cd "$(dirname "$0")/.."

pin() { python3 -c 'import json,sys; print(json.load(open("operator/pdd_operator/pins.json"))[sys.argv[1]])' "$1"; }
version="$(python3 -c 'import re; print(re.search(r"^version = \"(.+)\"", open("pyproject.toml").read(), re.M).group(1))')"
engine_repo="$(pin engineImage)"; operator_repo="$(pin operatorImage)"
if [[ -n "${REGISTRY:-}" ]]; then
  engine_repo="$REGISTRY/${engine_repo##*/}"; operator_repo="$REGISTRY/${operator_repo##*/}"
fi
engine_tag="$engine_repo:v$(pin vllm)"
operator_tag="$operator_repo:v$version"

if command -v docker >/dev/null && docker buildx version >/dev/null 2>&1; then
  build=(docker buildx build --load); push=(docker push)
elif command -v podman >/dev/null; then
  build=(podman build); push=(podman push)
else
  echo "images/build.sh: needs docker buildx or podman" >&2; exit 1
fi

"${build[@]}" -f images/engine/Dockerfile -t "$engine_tag" \
  --build-arg VLLM_VERSION="$(pin vllm)" --build-arg NIXL_PACKAGE="$(pin nixlPackage)" \
  --build-arg NIXL_VERSION="$(pin nixl)" .
"${build[@]}" -f images/operator/Dockerfile -t "$operator_tag" --build-arg PYTHON_VERSION="$(pin operatorPython)" .

if [[ -n "${PUSH:-}" ]]; then "${push[@]}" "$engine_tag"; "${push[@]}" "$operator_tag"; fi
echo "$engine_tag"
echo "$operator_tag"
