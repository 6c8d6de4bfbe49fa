"""What ``--dtype auto`` and ``--kv-cache-dtype auto`` become in vLLM, from the model's config.json.

Read in the wheels 0.9.0, 0.10.0, 0.10.2, 0.11.0, 0.14.0, 0.33.0 and 0.34.0 (``vllm/config.py`` before 0.11,
``vllm/config/model.py`` after; ``vllm/platforms/cuda.py`` and ``cpu.py``; ``vllm/utils/torch_utils.py``):

* ``_get_and_verify_dtype``: the config's dtype is ``torch_dtype`` (``dtype`` in newer transformers; the text or
  vision config's where the top level has none), ``float32`` where none is given. ``auto`` then gives:

  - 0.9.x: ``float32`` -> ``float16`` ("Following common practice, we use float16 for float32 models"; PLaMo2 gets
    ``bfloat16``); a dtype the platform does not support falls back to ``supported_dtypes[0]``;
  - 0.10.0 on (``_resolve_auto_dtype``): ``float32`` -> the platform's preferred dtype, ``supported_dtypes[0]``
    (``float16`` for pooling models); a dtype the platform does not support -> that preferred dtype. CUDA's
    ``supported_dtypes`` are ``[bfloat16, float16, float32]`` from compute capability 8.0 (Ampere) and
    ``[float16, float32]`` from 6.0; x86/aarch64 CPUs ``[bfloat16, float16, float32]``.

  So a ``bfloat16`` or ``float32`` checkpoint runs ``bfloat16`` on Ampere and newer and ``float16`` on older GPUs; a
  ``float16`` checkpoint runs ``float16``. An explicit ``--dtype bfloat16`` on a GPU without bfloat16 fails that
  engine at startup, so beside it only the bfloat16 platforms matter.
* ``--kv-cache-dtype``: hashed by the NIXL handshake as ``str(cache_config.cache_dtype)``. ``auto`` stays ``"auto"``
  (it is not the model dtype) except, from 0.14.0, for a ModelOpt checkpoint whose ``quantization_config`` names a KV
  cache quantization (``resolve_kv_cache_dtype_string`` / ``get_kv_cache_quant_algo_string``: FP8 -> ``fp8``, NVFP4
  -> ``nvfp4``), which ``auto`` then becomes.
"""

from __future__ import annotations

import re

from pdd_operator.vllm.versions import Version

#: ``--dtype`` spellings vLLM maps to one torch dtype (``_STR_DTYPE_TO_TORCH_DTYPE``).
DTYPE_ALIASES = {"half": "float16", "float": "float32"}
_FLOATS = ("float16", "bfloat16", "float32")

#: The first release whose ``auto`` takes a float32 checkpoint to the platform's preferred dtype (``_resolve_auto_dtype``).
AUTO_PREFERRED_SINCE: Version = (0, 10, 0)
#: The first release whose ``--kv-cache-dtype auto`` becomes a ModelOpt checkpoint's KV quantization.
KV_AUTO_FROM_CHECKPOINT_SINCE: Version = (0, 14, 0)


def dtype_name(value: str | None) -> str:
    """A ``--dtype`` value with vLLM's aliases resolved, lower case (``auto`` when not given)."""
    text = (value or "auto").lower()
    return DTYPE_ALIASES.get(text, text)


def config_dtype(config: dict | None) -> str | None:
    """The checkpoint's dtype as vLLM reads it from config.json: ``torch_dtype`` or ``dtype``, else the text or
    vision config's, else ``float32`` (a config that names none); ``None`` for no config or a value that is not one
    of float16, bfloat16, float32."""
    if not config:
        return None
    for part in (config, config.get("text_config"), config.get("vision_config")):
        if isinstance(part, dict):
            value = part.get("torch_dtype", part.get("dtype"))
            if isinstance(value, str):
                value = DTYPE_ALIASES.get(value.removeprefix("torch.").lower(), value.removeprefix("torch.").lower())
                return value if value in _FLOATS else None
    return "float32"


#: ``torch_dtype`` in the config.json of well-known Hugging Face checkpoints, whose config the checker then does not
#: need to be given (as :data:`pdd_operator.vllm.architectures._HEAD_SIZES` for head sizes): DeepSeek-V2-Lite and
#: its chat model, the dense Qwen3 models, Llama 3.1/3.2/3.3 (bfloat16; tests/unit/data/public_reports/model_configs/
#: llama-3.2-1b.json is Llama 3.2 1B's), and OPT (float16).
_CHECKPOINT_DTYPES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^deepseek-ai/deepseek-v2-lite(-chat)?$", re.I), "bfloat16"),
    (re.compile(r"^qwen/qwen3-(0\.6|1\.7|4|8|14|32)b$", re.I), "bfloat16"),
    (re.compile(r"^meta-llama/(meta-)?llama-3\.[123]-\d+b(-instruct)?$", re.I), "bfloat16"),
    (re.compile(r"^facebook/opt-(125m|350m|1\.3b|2\.7b|6\.7b|13b|30b|66b)$", re.I), "float16"),
]


def checkpoint_dtype_of(model_name: str | None) -> str | None:
    """The ``torch_dtype`` of a well-known checkpoint named by its Hugging Face id (:data:`_CHECKPOINT_DTYPES`), else
    ``None``."""
    return next((d for pattern, d in _CHECKPOINT_DTYPES if pattern.search(model_name or "")), None)


def auto_dtype(checkpoint: str | None, version: Version | None) -> str | None:
    """What ``--dtype auto`` resolves to for a ``checkpoint`` dtype (:func:`config_dtype`, :func:`checkpoint_dtype_of`)
    on vLLM ``version`` (``None``: unknown), on a GPU or CPU with bfloat16 (CUDA compute capability 8.0 and newer:
    A100, L4, H100, ...; x86/aarch64 CPUs); ``None`` where the checkpoint's dtype is not known. On older GPUs
    (compute capability 6.0-7.5) a bfloat16 or float32 checkpoint runs float16 instead (:data:`BF16_CAVEAT`)."""
    if checkpoint is None:
        return None
    if checkpoint == "float16" or (checkpoint == "float32" and version is not None and version < AUTO_PREFERRED_SINCE):
        return "float16"
    return "bfloat16"


#: The first release whose ``DeepseekV32ForCausalLM`` config hook no longer turns ``fp8*`` into ``fp8_ds_mla``
#: (vllm/model_executor/models/config.py: 0.11.0 l.419-421, 0.11.1 l.478-479, 0.16.0 l.557-558, 0.17.1 l.597-598
#: rewrite them; 0.18.0 l.39-41 keeps only bfloat16 -> auto).
DSV32_FP8_KEPT_SINCE: Version = (0, 18, 0)
#: The first release whose ``DeepseekV32ForCausalLM`` hook leaves ``auto`` as it is: 0.11.0 turns ``auto`` into
#: ``fp8_ds_mla`` too (l.419-421: ``cache_dtype == "auto" or cache_dtype.startswith("fp8")``), 0.11.1 tests only
#: ``startswith("fp8")`` (l.478-479; so do 0.11.2 l.478, 0.12.0 l.485, 0.13.0 l.485, 0.14.1 l.522, 0.16.0 l.557).
DSV32_AUTO_KEPT_SINCE: Version = (0, 11, 1)
#: The first release with the ``DeepseekV32ForCausalLM`` hook (DeepSeek-V3.2-Exp support, 0.11.0).
DSV32_HOOK_SINCE: Version = (0, 11, 0)
#: The first release whose ``MistralLarge4ForCausalLM`` hook maps ``bfloat16`` to ``auto`` (0.34.0 l.151-152).
MISTRAL_LARGE4_HOOK_SINCE: Version = (0, 34, 0)


def hooked_kv_cache_dtype(cache_dtype: str, hf_architecture: str | None, version: Version | None) -> str:
    """The ``cache_config.cache_dtype`` an engine holds (and the NIXL compatibility hash reads) after its model's
    config hook ran: ``verify_and_update_config`` of the architecture's entry in ``MODELS_CONFIG_MAP``
    (vllm/model_executor/models/config.py), called from ``VllmConfig.__post_init__`` (config/vllm.py 0.34.0 l.1483,
    ``try_verify_and_update_config`` l.2816-2845) before any worker computes the hash.

    ``cache_dtype``: the written ``--kv-cache-dtype`` (``auto`` where none), after the checkpoint's own KV
    quantization (:func:`checkpoint_kv_cache_dtype`); ``hf_architecture``: config.json ``architectures[0]``
    (``None``: unknown, nothing is rewritten); ``version``: the engine's release (``None``: unknown, read as the newest
    code). Only rewrites that do not depend on the GPU are applied: ``DeepseekV32ForCausalLM`` (DeepSeek-V3.2,
    V3.2-Exp, V3.2-Speciale) maps ``bfloat16`` to ``auto`` from 0.11.0 (0.11.0 l.423-425, 0.16.0 l.560-562, 0.18.0
    l.39-41, 0.34.0 l.91-93), every ``fp8*`` to ``fp8_ds_mla`` before 0.18.0 (0.11.0 l.418-421, 0.16.0 l.557-558,
    0.17.1 l.597-598: :data:`DSV32_FP8_KEPT_SINCE`) and ``auto`` too in 0.11.0 only (:data:`DSV32_AUTO_KEPT_SINCE`);
    ``MistralLarge4ForCausalLM`` maps ``bfloat16`` to ``auto`` from 0.34.0 (l.151-152). Left out:
    ``GlmMoeDsaForCausalLM`` (``auto`` -> ``fp8_e4m3`` on SM10x only, 0.32.0 l.44-54, 0.34.0 l.163-181) and
    ``Glm5NextModelConfig`` (the same on SM100, 0.33.0 l.134), whose rewrite depends on the GPU
    (:func:`gpu_hooked_kv_cache_dtype`), and Mistral Large 4's ``fp8_kv_cache`` default (CUDA ``fp8_ds_mla``, ROCm
    ``fp8``). Pure; returns ``cache_dtype`` unchanged
    where no hook applies."""
    newest = version is None
    if hf_architecture == "DeepseekV32ForCausalLM" and (newest or version >= DSV32_HOOK_SINCE):
        if not newest and version < DSV32_FP8_KEPT_SINCE and cache_dtype.startswith("fp8"):
            return "fp8_ds_mla"
        if not newest and version < DSV32_AUTO_KEPT_SINCE and cache_dtype == "auto":
            return "fp8_ds_mla"
        return "auto" if cache_dtype == "bfloat16" else cache_dtype
    if hf_architecture == "MistralLarge4ForCausalLM" and (newest or version >= MISTRAL_LARGE4_HOOK_SINCE):
        return "auto" if cache_dtype == "bfloat16" else cache_dtype
    return cache_dtype


#: The config hooks that turn ``auto`` into an FP8 KV cache only on a CUDA GPU of the SM10x family (Blackwell B200/B300,
#: GB200/GB300: ``current_platform.is_device_capability_family(100)``): architecture -> (first release, the
#: ``cache_dtype`` it sets, whether the model must be sparse MLA). ``GlmMoeDsaForCausalLM`` (GLM-5, 5.1, 5.2):
#: ``fp8_e4m3`` from 0.32.0 (vllm/model_executor/models/config.py 0.32.0 l.43-55, 0.33.0 l.89-101, 0.34.0
#: l.163-175; 0.29.0-0.31.0 have the class without the rewrite); ``Glm5NextForCausalLM`` /
#: ``Glm5NextForConditionalGeneration`` (GLM-5.3-Flash, ``Glm5NextModelConfig``): ``fp8`` from 0.33.0 where the text
#: config has ``index_topk`` (0.33.0 l.119-136, 0.34.0 l.184-201; registered 0.33.0 l.1228-1229, 0.34.0 l.1560-1561).
GPU_HOOKED_AUTO: dict[str, tuple[Version, str, bool]] = {
    "GlmMoeDsaForCausalLM": ((0, 32, 0), "fp8_e4m3", False),
    "Glm5NextForCausalLM": ((0, 33, 0), "fp8", True),
    "Glm5NextForConditionalGeneration": ((0, 33, 0), "fp8", True),
}
#: The compute capability major of the GPUs those hooks rewrite on (SM 10.0 and 10.3).
GPU_HOOK_CAPABILITY = 10


def gpu_hooked_kv_cache_dtype(cache_dtype: str, hf_architecture: str | None, version: Version | None,
                              sparse_mla: bool | None) -> str | None:
    """What a GPU-dependent config hook (:data:`GPU_HOOKED_AUTO`) makes of ``cache_dtype`` on a CUDA GPU of compute
    capability 10.x, or ``None`` where no such hook applies (another architecture, a release before its hook, a
    written dtype other than ``auto``, or a Glm5Next model known not to be sparse MLA: ``sparse_mla`` ``False``;
    ``None`` where unknown). ``cache_dtype`` is the value after :func:`hooked_kv_cache_dtype`; ``version`` ``None``
    reads the newest code. On other GPUs (and on ROCm: the hooks also require ``current_platform.is_cuda()``) the
    value stays ``cache_dtype``. Pure."""
    hook = GPU_HOOKED_AUTO.get(hf_architecture or "")
    if hook is None or cache_dtype != "auto" or (version is not None and version < hook[0]):
        return None
    if hook[2] and sparse_mla is False:
        return None
    return hook[1]


#: Where :func:`auto_dtype`'s bfloat16 does not hold, for messages.
BF16_CAVEAT = "on GPUs without bfloat16 (compute capability below 8.0: V100, T4) it resolves to float16 instead"


#: ``MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP``'s values (vllm/utils/torch_utils.py) -> the first release read whose map
#: has it: ``fp8`` -> ``fp8_e4m3`` in 0.14.0 (l.57-61) to 0.34.0 (l.90-93); ``nvfp4`` -> ``nvfp4`` from 0.20.0 (absent
#: from the 0.14.0-0.19.1 maps, where ``get_kv_cache_quant_algo_string`` logs "Unknown kv_cache_quant_algo" and
#: returns ``auto``).
MODELOPT_KV_MAPPED_SINCE: dict[str, Version] = {"fp8_e4m3": KV_AUTO_FROM_CHECKPOINT_SINCE, "nvfp4": (0, 20, 0)}
#: ModelOpt ``quant_algo`` values (upper-cased) for which ``_normalize_quantization_config`` sets ``quant_method`` on a
#: config whose ``producer.name`` is ``modelopt`` (an ``hf_quant_config.json`` of ModelOpt 0.29 and older, which vLLM
#: reads as ``quantization_config``: transformers_utils/config.py 0.34.0 l.996-1008): ``modelopt`` /
#: ``modelopt_fp4`` / ``modelopt_mixed`` (transformers_utils/model_arch_config_convertor.py 0.14.0 l.140-170, 0.34.0
#: l.241-282, read in every release 0.14.0-0.34.0; it then lower-cases every ``quant_method``, in place, before
#: ``resolve_kv_cache_dtype_string`` reads it).
_MODELOPT_QUANT_ALGOS = frozenset({"FP8", "FP8_PER_CHANNEL_PER_TOKEN", "FP8_PB_WO", "NVFP4", "MIXED_PRECISION"})


def auto_kv_cache_dtype(checkpoint: str | None, version: Version | None) -> str | None:
    """What ``--kv-cache-dtype auto`` becomes on release ``version`` for a checkpoint whose
    :func:`checkpoint_kv_cache_dtype` is ``checkpoint``: that value where the release's map has it
    (:data:`MODELOPT_KV_MAPPED_SINCE`), else ``None`` (``auto`` stays ``"auto"``; also for an unknown version)."""
    since = MODELOPT_KV_MAPPED_SINCE.get(checkpoint or "")
    return checkpoint if since is not None and version is not None and version >= since else None


def checkpoint_kv_cache_dtype(config: dict | None) -> str | None:
    """What ``--kv-cache-dtype auto`` becomes (from :data:`KV_AUTO_FROM_CHECKPOINT_SINCE`; per release:
    :func:`auto_kv_cache_dtype`) for a ModelOpt checkpoint whose ``quantization_config`` names its KV cache
    quantization, else ``None`` (``auto`` stays ``"auto"``). As ``get_kv_cache_quant_algo_string`` reads it
    (vllm/utils/torch_utils.py 0.14.0 l.240-290, 0.34.0 l.463-515): a ``quant_method`` starting with ``modelopt`` in
    any case, or a ``producer.name`` of ``modelopt`` with a ModelOpt ``quant_algo`` (:data:`_MODELOPT_QUANT_ALGOS`);
    the algorithm in any case (``FP8``, ``fp8``); ``MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP``: ``fp8`` -> ``fp8_e4m3`` (so
    ``auto`` and an explicit ``fp8`` still hash apart, an explicit ``fp8_e4m3`` does not), ``nvfp4`` -> ``nvfp4``; a
    dict scheme of 8-bit static floats is fp8, of 4-bit floats nvfp4."""
    quant = (config or {}).get("quantization_config")
    if not isinstance(quant, dict):
        return None
    inner_cfg = quant.get("quantization")
    producer = quant.get("producer")
    by_producer = (isinstance(producer, dict) and producer.get("name") == "modelopt" and isinstance(inner_cfg, dict)
                   and str(inner_cfg.get("quant_algo")).upper() in _MODELOPT_QUANT_ALGOS)
    if not str(quant.get("quant_method") or "").lower().startswith("modelopt") and not by_producer:
        return None
    inner = quant.get("quantization") if isinstance(quant.get("quantization"), dict) else quant
    algo = (inner.get("kv_cache_scheme") or quant.get("kv_cache_scheme") or inner.get("kv_cache_quant_algo")
            or quant.get("kv_cache_quant_algo"))
    if isinstance(algo, dict) and algo.get("type") == "float":
        algo = "fp8" if algo.get("num_bits") == 8 and algo.get("dynamic") is False else \
            "nvfp4" if algo.get("num_bits") == 4 else None
    return {"fp8": "fp8_e4m3", "nvfp4": "nvfp4"}.get(algo.lower()) if isinstance(algo, str) else None
