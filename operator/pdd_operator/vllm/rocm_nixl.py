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
