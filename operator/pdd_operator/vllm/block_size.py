"""The KV cache block size vLLM gives an engine that sets no ``--block-size``, where vLLM's code pins it.

vLLM's ``CacheConfig.block_size`` defaults to ``None`` (config/cache.py) and the platform fills it in at startup
(``check_and_update_config``). Read in the 0.8.5, 0.10.2 and 0.11.0 wheels: ``vllm/platforms/cuda.py`` and
``vllm/platforms/rocm.py`` set ``cache_config.block_size = 16`` when it is ``None``; then only MLA backends
(FlashMLA 64, CUTLASS MLA 128, FlashInfer MLA 64, sparse MLA 64, same file) and hybrid attention + Mamba models
(``HybridAttentionMambaModelConfig`` in model_executor/models/config.py raises it to fit the Mamba page) change
it. Other platforms pick their own (``xpu.py`` 64, ``cpu.py`` 128 with IPEX else 16, ``tpu.py`` the Pallas page
size), so only a CUDA or ROCm engine of a plain-attention model is pinned. From 0.11.1 on this is left unset
here: later releases choose the size per attention backend, which these files do not name.
"""

from __future__ import annotations

from collections.abc import Mapping

from pdd_operator.vllm.architectures import Architecture
from pdd_operator.vllm.versions import Version, image_repository

#: Device-plugin resources of the CUDA and ROCm platforms (NVIDIA's and AMD's GPU device plugins).
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")

#: Image repositories (``owner/name``) that run vLLM on CUDA or ROCm: vLLM's CUDA and ROCm images, AMD's ROCm
#: build, LMCache's CUDA image and Dynamo's vLLM runtime (ai-dynamo/dynamo container/Dockerfile.vllm, CUDA).
GPU_IMAGE_REPOSITORIES = {"vllm/vllm-openai", "vllm/vllm-openai-rocm", "rocm/vllm", "lmcache/vllm-openai",
                          "ai-dynamo/vllm-runtime"}

#: The first release this module does not describe (the defaults above were read up to 0.11.0).
PINNED_UNTIL: Version = (0, 11, 1)

#: Model families whose attention is plain (per-head K/V, no MLA latent, no Mamba state): the platform default
#: stands for them.
PLAIN_ATTENTION = (Architecture.DENSE, Architecture.MOE)

#: The CUDA/ROCm platform default (vllm/platforms/cuda.py, rocm.py ``check_and_update_config``).
GPU_DEFAULT = 16


def on_gpu_platform(image: str, resources: Mapping[str, str]) -> bool:
    """True when the engine runs vLLM's CUDA or ROCm platform: the container asks for an NVIDIA or AMD GPU
    (:data:`GPU_RESOURCES`) or its image is one of :data:`GPU_IMAGE_REPOSITORIES`."""
    return any(resources.get(r) for r in GPU_RESOURCES) or image_repository(image) in GPU_IMAGE_REPOSITORIES


def default_block_size(
    version: Version | None, image: str, resources: Mapping[str, str], family: Architecture | None
) -> int | None:
    """The block size in tokens an engine without ``--block-size`` runs with, or ``None`` where vLLM's code does
    not pin it from what is known here (a version from 0.11.1 on or unknown, another platform, an MLA, hybrid,
    multimodal or unknown model).

    version: the engine's vLLM version; image: its container image; resources: the container's resource limits
    (names to quantities); family: the model's family (:class:`~pdd_operator.vllm.architectures.Architecture`).
    """
    if version is None or version >= PINNED_UNTIL or family not in PLAIN_ATTENTION:
        return None
    return GPU_DEFAULT if on_gpu_platform(image, resources) else None
