"""vLLM's attention backends as the rules read them: which model attention each one serves, and which one vLLM picks
by itself on a given NVIDIA GPU.

Read in vLLM 0.18.0, 0.19.1, 0.21.0, 0.24.0 and 0.32.0:

- ``vllm/v1/attention/backend.py`` ``AttentionBackend.validate_configuration`` lists a backend as invalid for a model
  whose MLA-ness or sparseness differs from its own (``use_mla != cls.is_mla()``: "MLA not supported" /
  "non-MLA not supported"; ``use_sparse != cls.is_sparse()``: "sparse not supported" / "non-sparse not supported").
- ``vllm/platforms/cuda.py`` ``CudaPlatform.get_attn_backend_cls``: a backend the user selected
  (``--attention-backend`` or ``--attention-config '{"backend": ...}'``) is validated alone and, if invalid, raises
  ``ValueError('Selected backend ... is not valid for this configuration. Reason: [...]')`` at model load; it is
  never replaced by another one.
- ``_get_backend_priorities``: with no backend selected, a non-MLA model gets the first valid backend of
  ``[FLASHINFER, FLASH_ATTN, TRITON_ATTN, FLEX_ATTENTION]`` on compute capability 10.x and of
  ``[FLASH_ATTN, FLASHINFER, TRITON_ATTN, FLEX_ATTENTION]`` on every other GPU.

Backend names are ``AttentionBackendEnum`` members (``vllm/v1/attention/backends/registry.py``); the flag's value is
looked up upper-cased (``vllm/config/attention.py``). Names not listed here (newer or model-specific backends) are
not judged.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path

from pdd_operator.vllm.env_vars import read_by, unread
from pdd_operator.vllm.flag_choices import ChoiceRefusal, ChoiceTable, refusal
from pdd_operator.vllm.versions import Version, parse_version

#: Backends for MLA models without a sparse indexer (``is_mla()`` true, ``is_sparse()`` false).
MLA_DENSE_BACKENDS = frozenset({
    "FLASHMLA", "FLASH_ATTN_MLA", "FLASHINFER_MLA", "CUTLASS_MLA", "TRITON_MLA", "ROCM_AITER_MLA",
    "ROCM_AITER_TRITON_MLA", "TOKENSPEED_MLA",
})
#: Backends for sparse MLA models (DeepSeek-V3.2's indexer: ``is_mla()`` and ``is_sparse()`` true).
MLA_SPARSE_BACKENDS = frozenset({
    "FLASHMLA_SPARSE", "FLASHINFER_MLA_SPARSE", "FLASHINFER_MLA_SPARSE_SM90", "FLASHINFER_MLA_SPARSE_SM120",
    "ROCM_AITER_MLA_SPARSE", "XPU_MLA_SPARSE", "FLASH_ATTN_MLA_SPARSE",
})
#: Backends for models without MLA (``is_mla()`` and ``is_sparse()`` false).
NON_MLA_BACKENDS = frozenset({
    "FLASH_ATTN", "FLASH_ATTN_DIFFKV", "TRITON_ATTN", "TRITON_ATTN_DIFFKV", "TRITON_FLASH_ATTN", "ROCM_ATTN",
    "ROCM_SEGMENTED_ATTN", "ROCM_AITER_FA", "ROCM_AITER_UNIFIED_ATTN", "TORCH_SDPA", "FLASHINFER",
    "TRITON_FLASHINFER", "FLEX_ATTENTION", "TREE_ATTN", "CPU_ATTN",
})

#: What each model attention family needs of a backend: ``(is_mla, is_sparse)``. Families whose layers differ
#: (hybrid, multimodal) are left out: their attention may be either.
_FAMILY_NEEDS = {"mla": (True, False), "sparse-mla": (True, True), "dense": (False, False), "moe": (False, False)}

#: First release whose backend validation was read (the explicit backend is refused, never replaced).
EXPLICIT_BACKEND_VALIDATED_SINCE = (0, 18, 0)


def backend_kind(name: str) -> tuple[bool, bool] | None:
    """``(is_mla, is_sparse)`` of the backend ``name`` (any case), ``None`` for a name not listed here."""
    upper = name.upper()
    if upper in MLA_DENSE_BACKENDS:
        return True, False
    if upper in MLA_SPARSE_BACKENDS:
        return True, True
    if upper in NON_MLA_BACKENDS:
        return False, False
    return None


def backend_refusal(name: str, family: str | None) -> str | None:
    """vLLM's reason for refusing the explicitly selected backend ``name`` for a model of ``family``
    (:class:`pdd_operator.api.spec.Architecture` value), worded as ``validate_configuration`` words it
    (``"MLA not supported"``); ``None`` when the backend fits or cannot be judged here."""
    kind, needs = backend_kind(name), _FAMILY_NEEDS.get(family or "")
    if kind is None or needs is None or kind == needs:
        return None
    if kind[0] != needs[0]:
        return "MLA not supported" if needs[0] else "non-MLA not supported"
    return "sparse not supported" if needs[1] else "non-sparse not supported"


#: The environment variable that chose the attention backend up to vLLM 0.14.1:
#:
#: - 0.9.0-0.12.0: ``vllm/attention/selector.py`` reads ``envs.VLLM_ATTENTION_BACKEND`` (0.12.0 lines 126-150, the
#:   ``_VLLM_V1`` suffix stripped) and selects that backend; these releases have no ``--attention-backend`` flag
#:   (absent from their ``vllm/engine/arg_utils.py``).
#: - 0.13.0-0.14.1: ``AttentionConfig.__post_init__`` copies it into ``backend`` with a deprecation warning
#:   (``vllm/config/attention.py`` 0.14.1 lines 73-93, ``_set_from_env_if_set``); ``vllm/envs.py`` still defines it
#:   (0.14.1 lines 50, 687-688). The flag and the variable both set make ``create_engine_config`` raise
#:   "attention_backend and attention_config.backend are mutually exclusive" (arg_utils.py 0.14.1 lines 1691-1697).
#: - 0.16.0-0.34.0: no file of the package mentions it (``vllm/envs.py``, ``vllm/config/attention.py`` and the
#:   selector read in 0.16.0, 0.17.0, 0.17.1 and 0.18.0; the env_vars.json table for all releases): the engine runs
#:   as if it were unset, whatever the value (vllm#32812 "Remove deprecated environment variables" dropped it after
#:   0.14; vllm#50292 reports it silently ignored in 0.26.0). 0.15.x sdists were not found, so 0.15.x is unknown.
BACKEND_ENV = "VLLM_ATTENTION_BACKEND"


def backend_env_read(version: Version | None) -> bool | None:
    """Whether vLLM ``version`` chooses its attention backend by :data:`BACKEND_ENV`: ``True`` for 0.9.0-0.14.1 (the
    releases read, or a version both of whose neighbours read it), ``False`` where every release read around it
    ignores it (0.16.0-0.34.0), ``None`` where that is not known (an unknown version, 0.15.x between 0.14.1 and
    0.16.0, one outside the releases read). The release table is :mod:`pdd_operator.vllm.env_vars`'s."""
    if read_by(BACKEND_ENV, version):
        return True
    return False if version is not None and unread(BACKEND_ENV, version) else None


def selected_backend(flag: str | None, env: Mapping[str, str], version: Version | None, *,
                     unknown_reads: bool = True) -> str | None:
    """The attention backend a role names, as vLLM ``version`` takes it: ``--attention-backend`` (or
    ``--attention-config``'s ``backend``) ``flag``, else ``env``'s :data:`BACKEND_ENV` where the release reads it
    (:func:`backend_env_read`; where that is unknown only with ``unknown_reads``). ``None`` where neither names one.
    The name is returned as written (callers compare it upper-cased)."""
    if flag:
        return flag
    value = env.get(BACKEND_ENV)
    if not value:
        return None
    read = backend_env_read(version)
    return value if read or (read is None and unknown_reads) else None


#: ``nvidia.com/gpu.product`` label values (GPU feature discovery: the product name, spaces as dashes) -> the
#: compute capability ``(major, minor)`` of the GPU; only the GPUs whose default backend is decided here.
_GPU_CAPABILITY = (
    (re.compile(r"(^|-)G?B300(-|$)", re.I), (10, 3)),
    (re.compile(r"(^|-)G?B200(-|$)", re.I), (10, 0)),
    (re.compile(r"(^|-)G?H(100|200|800|20)(-|$)", re.I), (9, 0)),
    (re.compile(r"(^|-)A(100|800|30)(-|$)", re.I), (8, 0)),
    (re.compile(r"(^|-)A(10G?|40)(-|$)", re.I), (8, 6)),
    (re.compile(r"(^|-)L(4|40S?|20)(-|$)", re.I), (8, 9)),
    (re.compile(r"(^|-)T4(-|$)", re.I), (7, 5)),
    (re.compile(r"(^|-)V100(S)?(-|$)", re.I), (7, 0)),
)

def gpu_compute_capability(product: str) -> tuple[int, int] | None:
    """The compute capability ``(major, minor)`` of the GPU named by an ``nvidia.com/gpu.product`` value
    (``Tesla-V100-SXM2-16GB`` -> ``(7, 0)``, ``NVIDIA-H100-80GB-HBM3`` -> ``(9, 0)``), ``None`` if not known."""
    for pattern, capability in _GPU_CAPABILITY:
        if pattern.search(product):
            return capability
    return None


def gpu_capability(product: str) -> int | None:
    """The compute capability major of the GPU named by an ``nvidia.com/gpu.product`` value, ``None`` if not known."""
    capability = gpu_compute_capability(product)
    return capability[0] if capability else None


#: The compute capabilities vLLM's CUDA platform runs on, one per class its default backend choice tells apart:
#: Volta 7.0 (V100), Turing 7.5 (T4), Ampere / Ada 8.x, Hopper 9.0, Blackwell 10.x, consumer Blackwell 12.x.
CUDA_CAPABILITIES: tuple[tuple[int, int], ...] = ((7, 0), (7, 5), (8, 0), (9, 0), (10, 0), (12, 0))
#: The first release whose FlashInfer backend refuses compute capability 7.5 ("currently broken on SM75 (Turing)",
#: floor raised to 8.0: v1/attention/backends/flashinfer.py 0.24.0 lines 426-433, 0.26.0 line 461, 0.34.0 line 698);
#: 0.18.0-0.23.0 accept 7.5 to 12.1 (0.18.0 line 365, 0.22.0 line 408, 0.23.0 line 407).
FLASHINFER_SM80_SINCE = (0, 24, 0)


#: KV cache dtypes FlashAttention takes only with FA3 on compute capability 9.x (``flash_attn_supports_fp8``: FA3 and
#: the 9.0 family; v1/attention/backends/fa_utils.py 0.18.0 and 0.19.0 lines 157-161, flash_attn.py
#: ``supports_kv_cache_dtype`` 0.18.0 lines 167-172, 0.19.0 lines 165-170, 0.20.0 lines 188-193, 0.24.0 lines 183-193;
#: ``flash_attn_supports_kv_cache_dtype`` 0.30.0 and 0.34.0 fa_utils.py lines 282-308, which adds FA4 on 10.x, where
#: FLASHINFER comes first anyway). FlashInfer lists both in ``supported_kv_cache_dtypes`` (flashinfer.py 0.19.0 lines
#: 320-326, 0.20.0 lines 328-335, 0.34.0 lines 575-584), so on 8.x and 12.x vLLM takes FLASHINFER for them.
FA3_ONLY_KV_DTYPES = frozenset({"fp8", "fp8_e4m3"})


def default_backend_at(capability: tuple[int, int], head_size: int | None, version: tuple[int, ...] | None,
                       kv_cache_dtype: str | None = None) -> str | None:
    """The backend vLLM ``version`` picks by itself on a GPU of compute ``capability`` for a plain non-MLA model (no
    sinks, no sliding window, no multimodal prefix) of ``head_size`` with ``kv_cache_dtype`` (``None`` or ``auto``:
    the model's dtype; ``fp8`` / ``fp8_e4m3``: :data:`FA3_ONLY_KV_DTYPES`; any other: ``None``): the first valid
    backend of ``_get_backend_priorities`` (vllm/platforms/cuda.py 0.18.0 lines 83-97, 0.34.0 lines 148-173:
    FLASHINFER first on 10.x, FLASH_ATTN first elsewhere, then TRITON_ATTN, FLEX_ATTENTION), each valid by its
    ``supports_compute_capability`` and head sizes (0.18.0-0.34.0): FLASH_ATTN from 8.0, head sizes multiples of 8 up
    to 256; FLASHINFER 7.5-12.1 (8.0-12.1 from :data:`FLASHINFER_SM80_SINCE`), head sizes 64, 128, 256;
    TRITON_ATTN every capability, head sizes from 32.

    ``None`` where not decided here: a head size not a multiple of 8 between 32 and 256 or not known (outside
    capabilities 8.x-9.x and 12.x, where FLASH_ATTN serves every standard head size), a 7.5 GPU on a version not
    known where FLASHINFER would serve the head size, an fp8 KV cache off 9.x for a head size FlashInfer does not
    serve or on capability 7.x, or another KV cache dtype."""
    major, _ = capability
    standard = head_size is not None and head_size % 8 == 0 and 32 <= head_size <= 256
    if kv_cache_dtype not in (None, "auto"):
        if kv_cache_dtype not in FA3_ONLY_KV_DTYPES or not standard:
            return None
        if major == 9:
            return "FLASH_ATTN"
        if major in (8, 10, 12) and head_size in (64, 128, 256):
            return "FLASHINFER"  # FLASH_ATTN refuses the dtype off 9.x (before FA4 on 10.x, 0.30.0); FlashInfer takes it
        return None
    if major in (8, 9, 12) and (head_size is None or standard):
        return "FLASH_ATTN"
    if not standard:
        return None
    flashinfer = head_size in (64, 128, 256)
    if major == 10:
        return "FLASHINFER" if flashinfer else "FLASH_ATTN"
    if capability == (7, 5) and flashinfer:
        if version is None:
            return None
        return "TRITON_ATTN" if version >= FLASHINFER_SM80_SINCE else "FLASHINFER"
    if major == 7:
        return "TRITON_ATTN"
    return None


_NAMES_TABLE = Path(__file__).with_name("attention_backend_names.json")


@cache
def backend_name_table() -> ChoiceTable:
    """The ``AttentionBackendEnum`` member names of the releases read (0.18.0-0.34.0, ``attention_backend_names.json``
    from ``dev/gen_vllm_attention_backends.py``) as a :class:`~pdd_operator.vllm.flag_choices.ChoiceTable`: each name
    from the first to the last release read that has it (``TREE_ATTN`` ends with 0.20.2, ``TURBOQUANT`` arrives in
    0.20.0, ``KIMI_K3_KV_BALANCED_MLA`` in 0.34.0; no name leaves a gap, a unit test checks it)."""
    data = json.loads(_NAMES_TABLE.read_text())
    return ChoiceTable(flag="--attention-backend", literal="AttentionBackendEnum",
                       read=tuple(parse_version(v) for v in data["releases"]),  # type: ignore[misc]
                       values={n: (parse_version(f[0]), parse_version(f[-1]))  # type: ignore[misc]
                               for n, f in data["backend"].items()})


def backend_name_refusal(name: str, version: Version) -> ChoiceRefusal | None:
    """Whether vLLM ``version`` has no attention backend ``name`` (``--attention-backend`` or ``--attention-config``'s
    ``backend``). vLLM looks it up as ``AttentionBackendEnum[name.upper()]`` (``auto`` is no backend:
    vllm/config/attention.py ``validate_backend_before``, 0.18.0 l.65-75, 0.26.0 l.116-126, 0.34.0 l.280-290; the flag
    goes through it in ``EngineArgs.create_engine_config``, vllm/engine/arg_utils.py 0.26.0 l.2250-2259), whose
    metaclass raises ``ValueError("Unknown attention backend: ...")`` for a missing member
    (vllm/v1/attention/backends/registry.py 0.26.0 l.18-31) while the engine config is built. ``None`` where the
    release has it or nothing read bounds it (before 0.18.0); else a refusal whose verdict is ``"error"`` or
    ``"warning"`` (:func:`~pdd_operator.vllm.flag_choices.refusal`). Pure."""
    if name.lower() == "auto":
        return None
    return refusal(backend_name_table(), name.upper(), version)
