"""The KV cache block size vLLM gives an engine that sets no ``--block-size``, where vLLM's code pins it.

Read in the wheels of 0.8.5, 0.10.2, 0.11.0 ... 0.33.0 and the 0.34.0 sdist (``vllm/platforms``, ``vllm/config/cache.py``,
``vllm/v1/attention/backends``). Only plain-attention models (dense or MoE: per-head K/V, no MLA latent, no Mamba
state) are described: MLA backends force their own sizes (FlashMLA 64, CUTLASS MLA 128, ... in
``platforms/cuda.py``) and hybrid attention + Mamba models raise the size to fit the Mamba page
(``HybridAttentionMambaModelConfig``, later ``Platform._align_hybrid_block_size``), both per GPU and model.

- **Before 0.18.0, CUDA and ROCm**: ``CacheConfig.block_size`` defaults to ``None`` and the platform's
  ``check_and_update_config`` sets 16 (``platforms/cuda.py``, ``platforms/rocm.py``). From 0.13.0 ROCm sets 64
  instead when ``VLLM_ROCM_USE_AITER`` and ``VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION`` are both on (``"1"`` or
  ``"true"``, vllm/envs.py), a choice the container's env makes (0.18.0's rocm.py still makes it).
- **From 0.18.0, CUDA**: ``CacheConfig.DEFAULT_BLOCK_SIZE`` 16 is filled in at construction and
  ``Platform.update_block_size_for_backend`` (called by the executors) replaces it with the attention backend's
  ``get_preferred_block_size(16)``: the default of ``AttentionBackend`` keeps 16 when the backend supports it, and
  every CUDA backend of a plain-attention model does (FLASH_ATTN, TRITON_ATTN, FLEX_ATTENTION, TREE_ATTN:
  multiples of 16; FLASHINFER: 16, 32, 64, more on Blackwell; TURBOQUANT: 16 ... 128). Until 0.29 no CUDA backend
  overrides it, so the size is 16 whatever backend is chosen.
- **From 0.29.0, CUDA**: FLASH_ATTN's ``get_preferred_block_size`` returns 128 (``FA4_HD256_PAGE_SIZE``) for a head
  size of 256 when FlashAttention 4 runs it, which ``fa_utils.uses_fa4_hd256_kernel`` allows on compute capability
  10.x/11.x only; from 0.31.0 also 64 for an fp8 KV cache with head size 512 on 9.x (0.32.0 flash_attn.py
  ``_get_fa4_hd256_block_size``, ``_get_sm90_fa4_fp8_kv_block_size``). The GPU is not in a manifest, so the size
  is pinned where the model's head size is known and neither 256 nor 512 (every other head size keeps 16 on every
  GPU), or where ``--attention-backend`` names a backend that keeps 16 (FLASHINFER, TRITON_ATTN, FLEX_ATTENTION,
  TREE_ATTN, TURBOQUANT); otherwise 16 is only the likely size.
- **From 0.19.0, ROCm**: rocm.py picks the backend by priority, and ROCM_AITER_UNIFIED_ATTN (preferred size 64) is
  among them when the AITER package is found and supports the GPU (``_aiter_ops.is_aiter_found_and_supported``), a
  fact of the image and hardware: 16 only likely.
- **From 0.11.1, CPU** (vLLM's CPU images): ``platforms/cpu.py`` ``check_and_update_config`` sets 128 when none is
  given (0.11.1 ... 0.32; 0.10.2's ``128 if ipex_available else 16`` is gone), and from 0.33.0
  ``update_block_size_for_backend`` asks the backends for their preference from 128; a plain-attention model runs
  CPU_ATTN on the CPU (``get_attn_backend_cls``), which accepts multiples of 32, so 128 stays.
- **From 0.34.0, CUDA and ROCm**: ``CacheConfig.DEFAULT_BLOCK_SIZE`` is 64 (``vllm/config/cache.py`` line 185 of the
  0.34.0 sdist; 16 in 0.33.0), and ``Platform.update_block_size_for_backend`` (platforms/interface.py lines 760-790)
  asks the backends from 64: FLASH_ATTN, TRITON_ATTN, FLEX_ATTENTION (multiples of 16), FLASHINFER (16, 32, 64, ...)
  and TURBOQUANT (16 ... 128) keep 64, and FLASH_ATTN's FA4 head-size-256 page (128) is ``max(64, 128)``. On ROCm
  with a KV connector (``_get_backend_priorities``: ROCM_ATTN is left out) ROCM_AITER_FA (16, 32: 16) comes first
  when AITER's MHA is on, else ROCM_AITER_UNIFIED_ATTN or TRITON_ATTN (64): 64 only likely.
- Other platforms pick their own (``xpu.py`` 64, ``tpu.py`` the Pallas page size): not described.

A multimodal checkpoint is described when its config.json was read and shows a plain-attention language model: the
rules pass its ``ModelTraits.kv_family`` (dense) as ``family``. Only the language model's layers hold KV cache (the
vision encoder's ``MMEncoderAttention`` has none and is no ``AttentionLayerBase``), so ``update_block_size_for_backend``
asks the language model's backend (``_find_non_ssm_backend``, platforms/interface.py 0.30.0 lines 589-640).

With the version unknown, the size is the one every release from 0.9.0 to 0.34 gives, where they all agree (16 on
CUDA for a plain-attention model whose head size is known and not 256 or 512).

:func:`default_block_size` gives the pinned size (what an error may rest on), :func:`likely_block_size` the size most
engines get and what else it depends on (what a warning says).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from pdd_operator.vllm.architectures import Architecture
from pdd_operator.vllm.versions import NEWEST_KNOWN, OLDEST_KNOWN, Version, image_repository, is_cpu_image

#: Device-plugin resources of the CUDA and ROCm platforms (NVIDIA's and AMD's GPU device plugins).
CUDA_RESOURCES = ("nvidia.com/gpu",)
ROCM_RESOURCES = ("amd.com/gpu",)

#: Image repositories (``owner/name``) that run vLLM on CUDA: vLLM's CUDA image, LMCache's CUDA image and Dynamo's
#: vLLM runtime (ai-dynamo/dynamo container/Dockerfile.vllm, CUDA).
CUDA_IMAGE_REPOSITORIES = {"vllm/vllm-openai", "lmcache/vllm-openai", "ai-dynamo/vllm-runtime"}
#: Image repositories that run vLLM on ROCm: vLLM's ROCm image and AMD's ROCm build.
ROCM_IMAGE_REPOSITORIES = {"vllm/vllm-openai-rocm", "rocm/vllm"}

#: Model families whose attention is plain (per-head K/V, no MLA latent, no Mamba state).
PLAIN_ATTENTION = (Architecture.DENSE, Architecture.MOE)

#: ``CacheConfig.DEFAULT_BLOCK_SIZE`` and the CUDA/ROCm platform default before it (platforms/cuda.py, rocm.py).
GPU_DEFAULT = 16

#: The first release whose ROCm platform chooses the size by backend priority (ROCM_AITER_UNIFIED_ATTN: 64).
ROCM_BACKEND_SINCE: Version = (0, 19, 0)
#: The first release where ROCm's AITER unified-attention env switches the default to 64 (platforms/rocm.py).
ROCM_AITER_ENV_SINCE: Version = (0, 13, 0)
#: The first release where FLASH_ATTN prefers 128 for head size 256 under FlashAttention 4 (flash_attn.py).
FA4_PAGE_SINCE: Version = (0, 29, 0)
#: The first release whose ``CacheConfig.DEFAULT_BLOCK_SIZE`` is 64 (vllm/config/cache.py line 185, 0.34.0 sdist).
DEFAULT_64_SINCE: Version = (0, 34, 0)
#: ``CacheConfig.DEFAULT_BLOCK_SIZE`` from :data:`DEFAULT_64_SINCE`.
GPU_DEFAULT_64 = 64
#: ROCm's AITER unified attention block size (platforms/rocm.py; rocm_aiter_unified_attn.py from 0.19).
ROCM_AITER_UNIFIED = 64
#: The CPU platform's default (platforms/cpu.py) and the first release read where it no longer depends on IPEX.
CPU_DEFAULT = 128
CPU_DEFAULT_SINCE: Version = (0, 11, 1)

#: CUDA backends whose preferred size for a plain-attention model is the default in every release read (no override of
#: ``get_preferred_block_size`` and the default among their supported kernel block sizes: 16 up to 0.33, 64 from
#: 0.34). FLASH_ATTN is one before 0.29.
SIXTEEN_BACKENDS = frozenset({"FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION", "TREE_ATTN", "TURBOQUANT"})

#: Head sizes for which FLASH_ATTN prefers another size than 16 on some GPUs (0.29+: 256 under FA4 on 10.x/11.x;
#: 0.31+: 512 with an fp8 KV cache on 9.x).
FA4_HEAD_SIZES = frozenset({256, 512})

_CUDA, _ROCM, _CPU = "cuda", "rocm", "cpu"

#: The releases an unknown version is judged over: every release line, and each threshold above.
_RELEASES: tuple[Version, ...] = tuple(sorted(
    {(0, m, 0) for m in range(OLDEST_KNOWN[1], NEWEST_KNOWN[1] + 1)}
    | {CPU_DEFAULT_SINCE, ROCM_AITER_ENV_SINCE, ROCM_BACKEND_SINCE, FA4_PAGE_SINCE, DEFAULT_64_SINCE}))


#: The releases whose defaults :func:`likely_block_size` compares for an unknown version (every release line and
#: each threshold of this module), ascending.
JUDGED_RELEASES: tuple[Version, ...] = _RELEASES


@dataclass(frozen=True)
class LikelyBlockSize:
    """The block size an engine without ``--block-size`` most likely runs with, and what else decides it.

    Attributes:
        size: the size in tokens (16, 64 or 128), or ``None`` when not even a likely one is known (another platform, an MLA,
            hybrid, multimodal or unknown model, an unknown version).
        depends_on: what would make vLLM pick another size, for a warning; ``""`` when the size is pinned.
    """

    size: int | None
    depends_on: str = ""


def gpu_platform(image: str, resources: Mapping[str, str]) -> str | None:
    """``"cuda"`` or ``"rocm"``: the vLLM platform the engine runs, from the GPU its container asks for
    (:data:`CUDA_RESOURCES`, :data:`ROCM_RESOURCES`) or else its image (:data:`CUDA_IMAGE_REPOSITORIES`,
    :data:`ROCM_IMAGE_REPOSITORIES`); ``None`` when neither tells, or they disagree."""
    asked = {p for p, names in ((_CUDA, CUDA_RESOURCES), (_ROCM, ROCM_RESOURCES)) if any(resources.get(r) for r in names)}
    repo = image_repository(image)
    by_image = _CUDA if repo in CUDA_IMAGE_REPOSITORIES else _ROCM if repo in ROCM_IMAGE_REPOSITORIES else None
    if len(asked) == 1:
        platform = next(iter(asked))
        return platform if by_image in (None, platform) else None
    return None if asked else by_image


#: What in a shell or Slurm script shows a host with NVIDIA GPUs: ``nvidia-smi`` reads NVML, the library vLLM's
#: ``cuda_platform_plugin`` counts devices with (vllm/platforms/__init__.py: ``pynvml.nvmlDeviceGetCount() > 0`` selects
#: CUDA; 0.11.0, 0.20.0, 0.32.0 sdists), ``pip install vllm`` installs PyPI's wheels, which are CUDA builds, and
#: Apptainer's (Singularity's) ``--nv``, which binds the host's NVIDIA driver libraries and GPU devices into the
#: container (its ``--rocm`` does so for AMD's); the option may sit lines below ``apptainer exec`` in a bash array
#: the script splices in (``APPTAINER_BASE=(apptainer exec --nv ...)``).
#: ``CUDA_VISIBLE_DEVICES`` is no such sign: ROCm honours it too (platforms/rocm.py compares it with
#: ``HIP_VISIBLE_DEVICES``).
_CUDA_HOST = re.compile(r"(?<![\w-])nvidia-smi(?![\w-])|\bpip3?\s+install\b[^\n]*?(?<![\w-])vllm(?![\w-])|"
                        r"(?<![\w-])(?:apptainer|singularity)\s+(?:exec|run|shell|instance\s+start)\b[^#;&|]{0,300}?"
                        r"(?<![\w-])--nv(?![\w-])")
#: What shows another platform: ROCm (``rocm_platform_plugin`` counts amdsmi's processor handles: AMD's tools, ROCm's
#: own device variables, a ROCm path, index or image) or a build for another target (``VLLM_TARGET_DEVICE``, a
#: ``+cpu`` wheel). Any of them leaves the platform unknown.
_OTHER_HOST = re.compile(r"rocm|amd-smi|amdsmi|\bHIP_VISIBLE_DEVICES\b|\bROCR_VISIBLE_DEVICES\b|VLLM_TARGET_DEVICE|\+cpu",
                         re.IGNORECASE)


#: What shows a ROCm host in particular (a subset of :data:`_OTHER_HOST`): AMD's tools, ROCm's own device variables
#: (vllm/platforms/rocm.py reads ``HIP_VISIBLE_DEVICES``/``ROCR_VISIBLE_DEVICES``), a ROCm path, index or image.
_ROCM_HOST = re.compile(r"rocm|amd-smi|amdsmi|\bHIP_VISIBLE_DEVICES\b|\bROCR_VISIBLE_DEVICES\b", re.IGNORECASE)


#: What shows a host of another accelerator than a GPU in a shell or Slurm script, and the device-plugin resource
#: that stands for it there (the one :func:`pdd_operator.vllm.nixl_devices.nixl_device_type` and the platform-plugin
#: reading of :mod:`pdd_operator.compat.manifests` know):
#:
#: * Intel Gaudi (vllm-gaudi's HPU platform): the Habana driver's libraries (``/usr/lib/habanalabs``), ``hl-smi``,
#:   ``HABANA_VISIBLE_DEVICES``/``HABANA_VISIBLE_MODULES``, PyTorch's HPU bridge (``PT_HPU_*``), vllm-gaudi's own
#:   variables (``VLLM_HPU_*``, vllm_gaudi/envs.py), UCX's ``gaudi_gdr`` transport, ``kv_buffer_device`` "hpu"
#:   (vllm-gaudi examples/nixl/run_hpu_disagg_*.sh);
#: * Huawei Ascend (vllm-ascend's NPU platform): ``ASCEND_RT_VISIBLE_DEVICES``, ``/dev/davinci*``, ``npu-smi``,
#:   ``kv_buffer_device`` "npu" (vllm-ascend's Mooncake guides);
#: * AWS Trainium/Inferentia (vllm-neuron): ``NEURON_RT_VISIBLE_CORES``, ``neuron-ls``;
#: * Google TPU (vLLM's TPU platform, tpu-inference): ``TPU_VISIBLE_CHIPS``, ``TPU_CHIPS_PER_PROCESS_BOUNDS``,
#:   ``TPU_PROCESS_BOUNDS``, ``libtpu`` (tpu-inference examples/disagg/run_disagg_single_host.sh).
#:
#: HCCL is no sign: Habana's and Huawei's collective libraries share the name.
_ACCELERATOR_HOSTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"habanalabs|(?<![\w-])hl-smi(?![\w-])|\bHABANA_VISIBLE_(?:DEVICES|MODULES)\b|\bPT_HPU_\w+|"
                r"\bVLLM_HPU_\w+|\bgaudi_gdr\b|kv_buffer_device\W{1,6}hpu\b"), "habana.ai/gaudi"),
    (re.compile(r"\bASCEND_RT_VISIBLE_DEVICES\b|/dev/davinci|(?<![\w-])npu-smi(?![\w-])|"
                r"kv_buffer_device\W{1,6}npu\b"), "huawei.com/Ascend910"),
    (re.compile(r"\bNEURON_RT_VISIBLE_CORES\b|(?<![\w-])neuron-ls(?![\w-])"), "aws.amazon.com/neuron"),
    (re.compile(r"\bTPU_VISIBLE_CHIPS\b|\bTPU_(?:CHIPS_PER_)?PROCESS_BOUNDS\b|\blibtpu\b"), "google.com/tpu"),
)


def _uncommented(text: str) -> str:
    """``text`` without its shell comment lines (a line whose first word starts with ``#``): a commented-out
    ``#SMI_BIN=$(which nvidia-smi || which rocm-smi)`` runs nothing and shows no host."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def script_accelerator_resource(text: str) -> str | None:
    """The device-plugin resource of the non-GPU accelerator the shell or Slurm script ``text`` shows a host of
    (:data:`_ACCELERATOR_HOSTS`, read outside comment lines), or ``None`` where it shows none, shows two kinds, or also
    shows an NVIDIA or ROCm host (:data:`_CUDA_HOST`, :data:`_ROCM_HOST`)."""
    live = _uncommented(text)
    found = {resource for sign, resource in _ACCELERATOR_HOSTS if sign.search(live)}
    if len(found) != 1 or _CUDA_HOST.search(live) or _ROCM_HOST.search(live):
        return None
    return found.pop()


def script_shows_other_accelerator(text: str) -> bool:
    """The shell or Slurm script ``text`` shows (outside comment lines) the host of an accelerator other than a GPU
    (:data:`_ACCELERATOR_HOSTS`: Gaudi, Ascend, Neuron, TPU), whether or not it also shows an NVIDIA one. Pure."""
    live = _uncommented(text)
    return any(sign.search(live) for sign, _ in _ACCELERATOR_HOSTS)


def script_gpu_resource(text: str) -> str:
    """The device-plugin resource a shell or Slurm script's GPU request (``--gres=gpu:N``, ``--gpus-per-node``, a
    ``CUDA_VISIBLE_DEVICES`` count) stands for: the accelerator's where the script shows the host of one other than a
    GPU and no GPU host (:func:`script_accelerator_resource`: ``habana.ai/gaudi``, ``huawei.com/Ascend910``,
    ``aws.amazon.com/neuron``, ``google.com/tpu``), ``amd.com/gpu`` (:data:`ROCM_RESOURCES`, vLLM's ROCm platform)
    where it shows a ROCm host (:data:`_ROCM_HOST`) and no NVIDIA one (:data:`_CUDA_HOST`), else ``nvidia.com/gpu``
    (Slurm's ``gpu`` gres names no vendor). A script that shows both (``nvidia-smi || rocm-smi``) stays NVIDIA's."""
    accelerator = script_accelerator_resource(text)
    if accelerator:
        return accelerator
    return ROCM_RESOURCES[0] if _ROCM_HOST.search(text) and not _CUDA_HOST.search(text) else CUDA_RESOURCES[0]


def script_platform_hint(text: str) -> str:
    """Why the engines of the shell or Slurm script ``text`` likely run vLLM's CUDA platform (:data:`_CUDA_HOST`,
    as a clause: ``"the script runs nvidia-smi"``), or ``""`` when nothing says so or something shows ROCm
    (:data:`_OTHER_HOST`: a script that looks for ``nvidia-smi || rocm-smi`` runs on either) or another accelerator
    (:func:`script_accelerator_resource`: Gaudi, Ascend, Neuron, TPU). A likely platform is
    never a certain one: what rests on it is a warning (:func:`gpu_platform` stays ``None``)."""
    if _OTHER_HOST.search(text) or script_accelerator_resource(text):
        return ""
    found = _CUDA_HOST.search(text)
    if not found:
        return ""
    if "nvidia-smi" in found.group(0):
        return "the script runs nvidia-smi (NVML, which vLLM's CUDA platform detection reads)"
    if found.group(0).rstrip().endswith("--nv"):
        return "the script runs its engines under Apptainer with --nv (the host's NVIDIA driver and GPUs)"
    return "the script installs vLLM from PyPI (CUDA wheels)"


def vllm_platform(image: str, resources: Mapping[str, str]) -> str | None:
    """``"cpu"`` for vLLM's CPU images (:func:`~pdd_operator.vllm.versions.is_cpu_image`: built for the CPU platform
    whatever the pod asks for), else :func:`gpu_platform`."""
    return _CPU if is_cpu_image(image) else gpu_platform(image, resources)


def _env_on(env: Mapping[str, str], name: str) -> bool:
    """vLLM's reading of a boolean env flag (vllm/envs.py: ``os.getenv(name, "False").lower() in ("true", "1")``)."""
    return str(env.get(name, "False")).lower() in ("true", "1")


def likely_block_size(
    version: Version | None, image: str, resources: Mapping[str, str], family: Architecture | None,
    env: Mapping[str, str] | None = None, attention_backend: str | None = None, head_size: int | None = None,
) -> LikelyBlockSize:
    """The block size in tokens an engine without ``--block-size`` runs with (module docstring), and what would
    change it where vLLM's code does not pin it from the manifest.

    version: the engine's vLLM version (``None``: unknown, judged over every release, module docstring); image:
    its container image; resources: the container's resource limits (names to quantities); family: the model's
    family; env: the container's literal environment; attention_backend: ``--attention-backend`` (or ``backend``
    of ``--attention-config``), if given; head_size: the model's attention head size, if known.
    """
    if version is None:
        found = {likely_block_size(v, image, resources, family, env, attention_backend, head_size) for v in _RELEASES}
        return found.pop() if len(found) == 1 else LikelyBlockSize(None)
    env = env or {}
    platform = vllm_platform(image, resources)
    if family not in PLAIN_ATTENTION or platform is None:
        return LikelyBlockSize(None)
    if platform == _CPU:
        return LikelyBlockSize(CPU_DEFAULT if version >= CPU_DEFAULT_SINCE else None)
    backend = attention_backend.upper() if attention_backend else None
    if platform == _ROCM:
        if version >= DEFAULT_64_SINCE:
            return LikelyBlockSize(GPU_DEFAULT_64, (
                "on ROCm vLLM 0.34+ picks it from the attention backend, asked from 64: ROCM_AITER_FA (16) comes "
                "first for a KV-connector engine when AITER's MHA is on (VLLM_ROCM_USE_AITER), else "
                "ROCM_AITER_UNIFIED_ATTN or TRITON_ATTN keep 64 (platforms/rocm.py _get_backend_priorities)"))
        if version >= ROCM_BACKEND_SINCE:
            return LikelyBlockSize(GPU_DEFAULT, (
                "on ROCm vLLM picks it from the attention backend: ROCM_AITER_UNIFIED_ATTN prefers 64 and is chosen "
                "when the image's AITER package supports the GPU (platforms/rocm.py _get_backend_priorities)"))
        aiter = version >= ROCM_AITER_ENV_SINCE and _env_on(env, "VLLM_ROCM_USE_AITER") and _env_on(
            env, "VLLM_ROCM_USE_AITER_UNIFIED_ATTENTION")
        return LikelyBlockSize(ROCM_AITER_UNIFIED if aiter else GPU_DEFAULT)
    default = GPU_DEFAULT_64 if version >= DEFAULT_64_SINCE else GPU_DEFAULT
    if version < FA4_PAGE_SINCE or backend in SIXTEEN_BACKENDS or (
            head_size is not None and head_size not in FA4_HEAD_SIZES):
        return LikelyBlockSize(default)
    return LikelyBlockSize(default, (
        "vLLM picks it from the attention backend: FLASH_ATTN prefers 128 for a head size of 256 under "
        "FlashAttention 4 on compute capability 10.x/11.x (vllm 0.29+ flash_attn.py get_preferred_block_size), "
        "and 64 for an fp8 KV cache with head size 512 on 9.x (0.31+); the GPU and head size are not in the "
        "manifest"))


def default_block_size(
    version: Version | None, image: str, resources: Mapping[str, str], family: Architecture | None,
    env: Mapping[str, str] | None = None, attention_backend: str | None = None, head_size: int | None = None,
) -> int | None:
    """The block size in tokens an engine without ``--block-size`` runs with where vLLM's code pins it from what
    the manifest says (:func:`likely_block_size` with nothing else deciding it), else ``None``. Arguments as for
    :func:`likely_block_size`."""
    likely = likely_block_size(version, image, resources, family, env, attention_backend, head_size)
    return likely.size if not likely.depends_on else None
