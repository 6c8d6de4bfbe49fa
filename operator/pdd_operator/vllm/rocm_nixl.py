"""Whether a ROCm vLLM image holds the NIXL package vLLM's NixlConnector imports on ROCm (issue 9, set 71).

On ROCm vLLM imports NIXL's Python API under its own name: ``rixl._api`` from 0.14.0 to 0.26.x (AMD's RIXL fork:
``kv_connector/v1/nixl_connector.py`` 0.17.1 l.111, 0.18.0 l.120; ``vllm/distributed/nixl_utils.py`` 0.20.1 l.30,
0.21.0 and 0.26.0 l.40), ``nixl_rocm._api`` from 0.27.0 (upstream NIXL built for ROCm: ``nixl_utils.py`` 0.27.0
l.25-26), and ``nixl._api`` before 0.14.0 (no ROCm package: ``nixl_connector.py`` 0.9.1 l.44). Where the import
fails the connector's worker raises ``RuntimeError("NIXL is not available")`` as the engine starts (0.9.1
``nixl_connector.py`` l.322-323, 0.17.1 l.862-863, 0.20.1 ``nixl/worker.py`` l.90-91, 0.21.0 l.203-204).

What the images hold, from ``docker/Dockerfile.rocm`` of each release read (its ``vllm-openai`` target is built
``FROM final``; ``docker/Dockerfile.rocm_base``, the base image, holds no RIXL or NIXL in any release read):

* 0.9.0-0.13.0: no NIXL or RIXL in any stage (0 mentions);
* 0.14.0-0.20.2: RIXL is built (stage ``build_rixl``) but its wheel is installed only in the ``test`` stage (0.17.1:
  test l.290, install l.304-306, final l.353; 0.18.0: l.318, l.334, l.386; 0.20.1 and 0.20.2: l.372, l.391-393,
  l.467), so ``vllm/vllm-openai-rocm`` images lack it (vllm-project/vllm#37941, #41637: ``ModuleNotFoundError: No
  module named 'rixl'`` on v0.20.1);
* 0.21.0-0.26.0: the final stage installs the RIXL wheel too (vllm-project/vllm#41634; 0.21.0 final l.475, install
  l.510-512; 0.25.0 l.668, l.705-706; 0.26.0 l.763, l.801);
* 0.27.0 on: upstream NIXL is built for ROCm (stage ``build_nixl``) and installed in the final stage (0.27.0 l.788,
  l.825-826; 0.28.0 l.828, l.865-866; 0.34.0 ``runtime`` stage l.248, l.322).

``vllm/vllm-openai-rocm`` is built from that Dockerfile, so its tag settles it. AMD's ``rocm/vllm`` and
``rocm/vllm-dev`` images are built from ROCm/vllm's copy of it: for a release whose Dockerfile builds no RIXL at all
(before 0.14.0), and whose connector imports ``nixl._api`` (whose CUDA wheel does not load on ROCm), the import fails
there too (llm-d/llm-d#139: ``NIXL is not available`` on ``rocm/vllm:rocm6.4.1_vllm_0.9.1_20250715``); from 0.14.0
to 0.20.x AMD's build may add what vLLM's final stage leaves out, which these files do not show.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pdd_operator.vllm.versions import ROCM_IMAGE_REPOSITORIES, Version, image_repository

#: A command that installs NIXL's Python package itself: ``pip install`` (``pip3``, ``uv pip``) of rixl, nixl, nixl_rocm
#: or a wheel of theirs.
_INSTALLS_NIXL = re.compile(r"\b(?:pip3?|uv\s+pip)\s+install\b[^\n;&|]*\b(?:rixl|nixl)", re.IGNORECASE)

#: vLLM's own ROCm image repository (built from docker/Dockerfile.rocm's ``vllm-openai`` target).
VLLM_ROCM_IMAGE_REPOSITORY = "vllm/vllm-openai-rocm"
#: The first release whose Dockerfile.rocm builds RIXL at all (stage ``build_rixl``; none in 0.13.0).
ROCM_RIXL_BUILT_SINCE: Version = (0, 14, 0)
#: The first release whose Dockerfile.rocm installs the NIXL package vLLM imports on ROCm in the final stage.
ROCM_IMAGE_NIXL_SINCE: Version = (0, 21, 0)


@dataclass(frozen=True)
class RocmNixlBuild:
    """The NIXL package a range of releases' ``docker/Dockerfile.rocm`` builds (``build_rixl`` / ``build_nixl``).

    Attributes:
        since, until: the vLLM releases whose Dockerfile.rocm sets it (``until`` exclusive).
        package: the Python package vLLM imports on ROCm (``rixl``: AMD's fork ROCm/RIXL; ``nixl_rocm``: upstream
            ai-dynamo/nixl built for ROCm).
        commit: the ``RIXL_BRANCH`` / ``NIXL_BRANCH`` commit it is built from.
        nixl: the NIXL release that commit is, in NIXL's numbering; ``None`` where it is none (RIXL numbers its own
            releases; an upstream commit between releases).
        where: the Dockerfile lines read.
    """

    since: Version
    until: Version
    package: str
    commit: str
    nixl: Version | None
    where: str


#: What vLLM's ROCm image of each release builds for NIXL, from ``docker/Dockerfile.rocm`` (``ARG RIXL_BRANCH`` /
#: ``ARG NIXL_BRANCH``), read in every release from 0.14.0 to 0.34.0; the ROCm images install no NIXL wheel from
#: ``requirements/kv_connectors.txt`` (whose ``nixl`` pin is the CUDA build), so that pin says nothing about them.
#: No row names a NIXL release: RIXL (0.14.0-0.26.x) is AMD's fork with its own numbering, and the upstream commits
#: of 0.27.0 on are not release tags (231d5675 is ``v1.3.1-30-g231d56753`` on NIXL's main branch, meson version
#: 1.4.0 in progress, not on the 1.3.2 release branch: ``git describe`` in ai-dynamo/nixl; 1683cf3b is not in the
#: ai-dynamo/nixl snapshot read, which ends at v1.4.0), so whether a NIXL release's known fault is in them is unknown.
ROCM_IMAGE_NIXL_BUILDS: tuple[RocmNixlBuild, ...] = (
    RocmNixlBuild((0, 14, 0), (0, 20, 0), "rixl", "f33a5599", None,
                  "Dockerfile.rocm RIXL_BRANCH 0.14.0 l.120, 0.17.1 l.118, 0.19.0 l.121"),
    RocmNixlBuild((0, 20, 0), (0, 21, 0), "rixl", "bf4a7214", None, "Dockerfile.rocm RIXL_BRANCH 0.20.0-0.20.2 l.127"),
    RocmNixlBuild((0, 21, 0), (0, 27, 0), "rixl", "39be1de8", None,
                  "Dockerfile.rocm RIXL_BRANCH 0.21.0 l.127, 0.24.0 l.241, 0.26.0 l.344"),
    RocmNixlBuild((0, 27, 0), (0, 33, 0), "nixl_rocm", "231d56753047c989062a5cb2ac703a1ad761c7d2", None,
                  "Dockerfile.rocm NIXL_BRANCH 0.27.0 l.344, 0.28.0 l.374, 0.32.0 l.385"),
    RocmNixlBuild((0, 33, 0), (0, 35, 0), "nixl_rocm", "1683cf3b7f3d11674c03c5e861cea22339876c96", None,
                  "Dockerfile.rocm NIXL_BRANCH 0.33.0 l.407, 0.34.0 l.38"),
)


def is_rocm_vllm_image(image: str) -> bool:
    """Whether ``image`` is a ROCm build of vLLM: vLLM's own ``vllm/vllm-openai-rocm`` or AMD's ``rocm/vllm`` /
    ``rocm/vllm-dev``."""
    repository = image_repository(image)
    return repository == VLLM_ROCM_IMAGE_REPOSITORY or repository in ROCM_IMAGE_REPOSITORIES


def rocm_image_nixl_version(image: str, version: Version | None) -> tuple[Version | None, str]:
    """The NIXL release the ROCm vLLM image ``image`` (of vLLM ``version``) loads and where that was read, as
    :func:`pdd_operator.vllm.known_bad.nixl_version` returns it: from :data:`ROCM_IMAGE_NIXL_BUILDS` for
    ``vllm/vllm-openai-rocm``; ``(None, "")`` where that is no NIXL release, for AMD's images (built from ROCm/vllm's
    own Dockerfile, not read), an unknown ``version`` or a release outside the table. Never vLLM's requirements pin.
    Raises nothing."""
    if version is None or image_repository(image) != VLLM_ROCM_IMAGE_REPOSITORY:
        return None, ""
    build = next((b for b in ROCM_IMAGE_NIXL_BUILDS if b.since <= version < b.until), None)
    if build is None or build.nixl is None:
        return None, ""
    return build.nixl, (f"vLLM {'.'.join(map(str, version))}'s ROCm image builds {build.package} from "
                        f"{build.commit[:8]} ({build.where})")


def rocm_image_nixl_missing(image: str, version: Version | None) -> Literal["error", "warning"] | None:
    """How sure it is that the ROCm vLLM image ``image`` (of vLLM ``version``) lacks the NIXL package the
    NixlConnector imports on ROCm (see the module docstring): ``"error"`` where the release's Dockerfile.rocm settles
    it (``vllm/vllm-openai-rocm`` before 0.21.0; AMD's ``rocm/vllm``/``rocm/vllm-dev`` before 0.14.0, when no stage
    built RIXL), ``"warning"`` for AMD's images of 0.14.0-0.20.x (their build may add it), ``None`` for any other
    image, a release that installs it, or an unknown ``version``."""
    if version is None or version >= ROCM_IMAGE_NIXL_SINCE:
        return None
    repository = image_repository(image)
    if repository == VLLM_ROCM_IMAGE_REPOSITORY:
        return "error"
    if repository in ROCM_IMAGE_REPOSITORIES:
        return "error" if version < ROCM_RIXL_BUILT_SINCE else "warning"
    return None


def installs_nixl(command_text: str) -> bool:
    """Whether the container command ``command_text`` (its command and args joined) installs NIXL's Python package
    itself (``pip install rixl``, ``uv pip install /wheels/nixl_rocm-....whl``): the engine then imports what it
    installed, whatever its image holds."""
    return bool(_INSTALLS_NIXL.search(command_text or ""))
