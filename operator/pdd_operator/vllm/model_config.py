"""Facts the rules need, read from a model's Hugging Face ``config.json``.

A user can hand the operator the model's config.json (``spec.model.configMapRef``, a ConfigMap key)
or ``pdd check --model-config FILE``; it then knows the architecture family, the SSM kind, the
number of KV heads and Mamba2 ``n_groups`` without relying on name tables.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from pdd_operator.api.spec import Architecture, SSMKind
from pdd_operator.vllm.architectures import (
    HF_ARCHITECTURES,
    HYBRID_MLA_ARCHITECTURES,
    HYBRID_MLA_MODEL_TYPES,
    MODEL_TYPES,
    ModelTraits,
    traits,
)
from pdd_operator.vllm.dtype import checkpoint_dtype_of, checkpoint_kv_cache_dtype, config_dtype
from pdd_operator.vllm.fp8_block import fp8_expert_since
from pdd_operator.vllm.known_models import derived_config, known_config
from pdd_operator.vllm.max_model_len import LENGTH_KEYS, ContextLimit, context_limit
from pdd_operator.vllm.model_registry import registry_family, registry_since
from pdd_operator.vllm.sliding_window import has_sliding_window
from pdd_operator.vllm.versions import Version

#: Largest config.json accepted, in bytes (UTF-8): 1 MiB, the most a ConfigMap can hold (Kubernetes
#: "ConfigMaps": "The data stored in a ConfigMap cannot exceed 1 MiB"). Real config.json files are
#: a few KiB; the cap keeps a wrong file (weights, a tarball) from being read whole and parsed.
MAX_CONFIG_JSON_BYTES = 1024 * 1024

_JSON_TYPE = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean",
              type(None): "null"}


class ModelConfigError(ValueError):
    """A model's config.json text that cannot be used: too large, not UTF-8, not valid JSON, nested
    too deeply to parse, or not a JSON object. The message is a fragment that reads after a
    ``<where>: `` prefix, e.g. ``not valid JSON: Expecting value at line 1 column 1``."""


def parse_config_json(text: str | bytes) -> dict:
    """Parse a model's Hugging Face ``config.json`` text (``str``, or UTF-8 ``bytes``) into a dict.

    The one loader of config.json: ``pdd check --model-config``, ConfigMaps given to ``pdd check``
    and the operator's ``spec.model.configMapRef`` all read through it. Raises
    :class:`ModelConfigError` for input over :data:`MAX_CONFIG_JSON_BYTES`, bytes that are not UTF-8,
    malformed JSON, nesting deeper than the parser's recursion limit (``json.loads`` raises
    ``RecursionError``; the limit is about a thousand levels), an integer longer than Python converts
    (4,300 digits: ``json.loads`` raises a plain ``ValueError``), or a top level that is not an object.
    """
    size = len(text) if isinstance(text, bytes) else len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_CONFIG_JSON_BYTES:
        raise ModelConfigError(
            f"{size} bytes, over the {MAX_CONFIG_JSON_BYTES} byte limit for a config.json (a ConfigMap holds "
            "at most 1 MiB; a model's config.json is a few KiB)"
        )
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ModelConfigError(f"not UTF-8 text (byte {exc.start}); a config.json is JSON text") from exc
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ModelConfigError(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    except RecursionError as exc:
        raise ModelConfigError(
            "JSON nested too deeply to parse (over about a thousand levels); a model's config.json is a few "
            "levels deep"
        ) from exc
    except ValueError as exc:  # an integer of more digits than int() converts (sys.get_int_max_str_digits)
        raise ModelConfigError(f"a value JSON cannot be read as a number: {exc}") from exc
    if not isinstance(config, dict):
        raise ModelConfigError(f"not a JSON object: the top level is {_JSON_TYPE.get(type(config), 'not an object')}")
    return config


@dataclass(frozen=True)
class ModelFacts:
    """What a config.json says. Every field is ``None`` when the config does not tell."""

    hf_architecture: str | None = None
    architecture: Architecture | None = None
    ssm_kind: SSMKind | None = None
    num_kv_heads: int | None = None
    n_groups: int | None = None
    sliding_window: bool = False
    head_size: int | None = None
    num_attention_heads: int | None = None
    attention_chunk_size: int | None = None
    #: routed experts per MoE layer as vLLM counts them (:func:`_num_experts`): 0 for a config that names none.
    num_experts: int | None = None
    #: a block-quantized FP8 checkpoint's expert shape (:func:`_fp8_moe_shape`), else ``None``.
    fp8_moe_shape: tuple[int, int, int, int] | None = None
    #: the first release whose routed experts of that checkpoint are FP8 (DeepSeek V4 ``expert_dtype: fp8``:
    #: :func:`~pdd_operator.vllm.fp8_block.fp8_expert_since`); ``None``: every release.
    fp8_moe_since: Version | None = None
    #: a hybrid SSM model whose attention is MLA (:data:`~pdd_operator.vllm.architectures.HYBRID_MLA_MODEL_TYPES`,
    #: or ``kv_lora_rank`` beside the SSM layers).
    mla_attention: bool = False
    #: the longest ``--max-model-len`` vLLM accepts for the model (:func:`~pdd_operator.vllm.max_model_len.context_limit`).
    context_limit: ContextLimit | None = None


#: The config.json keys vLLM reads a model's expert count from (0.11.0 config/model.py
#: ``_verify_with_expert_parallelism``: Dbrx, Jamba/Qwen-MoE, DeepSeek, Mixtral).
EXPERT_COUNT_KEYS = ("moe_num_experts", "num_experts", "n_routed_experts", "num_local_experts")


def _num_experts(text: dict) -> int:
    """The first positive expert count of the (text) config under :data:`EXPERT_COUNT_KEYS`, else 0: what vLLM's
    ``ModelConfig`` takes as the number of experts (``is_moe`` is that count > 0). Pure."""
    return next((v for k in EXPERT_COUNT_KEYS if isinstance(v := text.get(k), int) and not isinstance(v, bool)
                 and v > 0), 0)


def _int_field(text: dict, key: str) -> int | None:
    """``text[key]`` where it is a positive int (not a bool), else ``None``."""
    value = text.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _head_size(text: dict) -> int | None:
    """The attention head size vLLM computes (``ModelConfig.get_head_size``: ``head_dim`` where the config gives
    one, else ``hidden_size // num_attention_heads``; GPT-2 and Bloom name them ``n_embd``/``n_head``), or
    ``None``."""
    if isinstance(text.get("head_dim"), int) and not isinstance(text.get("head_dim"), bool):
        return text["head_dim"]
    hidden = next((text[k] for k in ("hidden_size", "n_embd", "d_model") if isinstance(text.get(k), int)), None)
    heads = next((text[k] for k in ("num_attention_heads", "n_head", "num_heads") if isinstance(text.get(k), int)),
                 None)
    return hidden // heads if hidden and heads and hidden % heads == 0 else None


def _fp8_moe_shape(config: dict, text: dict) -> tuple[int, int, int, int] | None:
    """``(expert intermediate size, hidden size, block_n, block_k)`` of a checkpoint with experts whose
    ``quantization_config`` is ``quant_method`` ``fp8`` with a ``weight_block_size`` (DeepSeek-V3, Qwen3-MoE-FP8,
    MiniMax-M2, GLM-4.x-FP8), else ``None``; ``None`` too where vLLM's routed experts of the checkpoint are not FP8
    (DeepSeek V4 with ``expert_dtype`` fp4 or none: MXFP4, :func:`~pdd_operator.vllm.fp8_block.fp8_expert_since`).
    The expert size is ``moe_intermediate_size`` where the config names one
    (DeepSeek, Qwen-MoE, GLM-MoE), else ``intermediate_size`` (Mixtral, MiniMax-M2: their experts take it). Pure."""
    quant = config.get("quantization_config") or text.get("quantization_config")
    if not isinstance(quant, dict) or str(quant.get("quant_method", "")).lower() != "fp8" or not _num_experts(text):
        return None
    if fp8_expert_since(config, text) is False:
        return None
    block = quant.get("weight_block_size")
    size = _int_field(text, "moe_intermediate_size") or _int_field(text, "intermediate_size")
    hidden = _int_field(text, "hidden_size")
    if not (isinstance(block, list) and len(block) == 2 and all(isinstance(b, int) and b > 0 for b in block)
            and size and hidden):
        return None
    return size, hidden, block[0], block[1]


def _text_config(config: dict) -> dict:
    # Multimodal configs nest the language model's settings.
    for key in ("text_config", "llm_config", "language_config"):
        if isinstance(config.get(key), dict):
            return {**config[key], **{k: v for k, v in config.items() if k not in (key,)}}
    return config


def facts_from_config(config: dict) -> ModelFacts:
    """Derive :class:`ModelFacts` from a parsed config.json.

    Signals used: ``architectures[0]`` (through the well-known table), ``is_encoder_decoder``;
    vision settings (multimodal); ``kv_lora_rank`` (MLA) and ``index_topk`` (sparse MLA);
    ``hybrid_override_pattern`` with ``M`` (NemotronH: Mamba2), ``layer_types`` with
    ``linear_attention`` (Qwen3-Next / Qwen3.5: GDN), ``layers_block_type`` with ``mamba``
    (Jamba: Mamba1), ``mamba_n_groups``/``n_groups``; expert counts (MoE); ``num_key_value_heads``;
    ``model_type`` (:data:`~pdd_operator.vllm.architectures.MODEL_TYPES`) where ``architectures[0]`` is not in the
    table; the head size (:func:`_head_size`); a sliding window as vLLM reads it (Qwen2's ``use_sliding_window``
    included: :func:`~pdd_operator.vllm.sliding_window.has_sliding_window`).
    """
    archs = config.get("architectures")
    hf_arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    text = _text_config(config)
    table = HF_ARCHITECTURES.get(hf_arch or "") or registry_family(hf_arch)
    arch, kind = (table if table else (MODEL_TYPES.get(str(config.get("model_type") or "")), None))
    types = text.get("layer_types") or text.get("layers_block_type")
    layer_types = [str(t).lower() for t in types] if isinstance(types, list) else []
    pattern = str(text.get("hybrid_override_pattern") or "")
    if config.get("is_encoder_decoder"):
        arch, kind = Architecture.ENCODER_DECODER, None
    elif "M" in pattern or any("mamba" in t for t in layer_types) or "mamba_d_ssm" in text or "ssm_state_size" in text:
        arch = Architecture.HYBRID_SSM
        if kind is None:
            kind = SSMKind.MAMBA1 if any(t == "mamba" for t in layer_types) and "n_groups" not in text else SSMKind.MAMBA2
    elif any("linear_attention" in t for t in layer_types):
        arch, kind = Architecture.HYBRID_SSM, SSMKind.GDN
    elif arch == Architecture.HYBRID_SSM:
        pass  # the tables (or vLLM's registry) know a hybrid whose full-attention layers are MLA (Kimi-Linear, Kimi-K3)
    elif text.get("index_topk"):
        arch = Architecture.SPARSE_MLA
    elif text.get("kv_lora_rank"):
        arch = Architecture.MLA
    elif arch is None and (config.get("vision_config") or config.get("vision_tower")):
        arch = Architecture.MULTIMODAL
    elif arch is None and any(text.get(k) for k in ("num_local_experts", "num_experts", "n_routed_experts")):
        arch = Architecture.MOE
    elif arch is None and hf_arch and hf_arch.endswith("ForCausalLM"):
        arch = Architecture.DENSE
    heads = text.get("num_key_value_heads", text.get("num_attention_heads"))
    groups = text.get("mamba_n_groups", text.get("n_groups"))
    sliding = has_sliding_window(text, str(config.get("model_type") or ""))
    return ModelFacts(
        hf_architecture=hf_arch, architecture=arch, ssm_kind=kind, sliding_window=sliding, head_size=_head_size(text),
        num_kv_heads=int(heads) if isinstance(heads, int) else None,
        n_groups=int(groups) if isinstance(groups, int) else None,
        num_attention_heads=_int_field(text, "num_attention_heads"),
        attention_chunk_size=_int_field(text, "attention_chunk_size"),
        num_experts=_num_experts(text),
        fp8_moe_shape=_fp8_moe_shape(config, text),
        fp8_moe_since=since if isinstance(since := fp8_expert_since(config, text), tuple) else None,
        mla_attention=arch == Architecture.HYBRID_SSM and (
            bool(text.get("kv_lora_rank")) or hf_arch in HYBRID_MLA_ARCHITECTURES
            or any(isinstance(p, dict) and p.get("model_type") in HYBRID_MLA_MODEL_TYPES
                   for p in (config, config.get("text_config")))),
        context_limit=context_limit(text, str(text.get("model_type") or config.get("model_type") or "")),
    )


@dataclass(frozen=True)
class KVGeometry:
    """How a checkpoint's KV cache is laid out, as the NIXL handshake sees it: ``layers`` (config.json
    ``num_hidden_layers``: one KV region per layer, K and V split or not), and per layer either the MLA latent
    (``latent``: ``kv_lora_rank`` and ``qk_rope_head_dim``, one latent "head" whatever ``num_key_value_heads`` says)
    or ``kv_heads`` x ``head_size`` (:func:`_head_size`). Two checkpoints whose geometries differ have different
    per-layer block lengths or region counts."""

    layers: int
    kv_heads: int | None
    head_size: int | None
    latent: tuple[int, int] | None = None

    @property
    def width(self) -> int:
        """The per-layer KV width per token that a block length is made of (``kv_heads x head_size``, or the MLA
        latent's ``kv_lora_rank + qk_rope_head_dim``), before TP split and dtype."""
        return sum(self.latent) if self.latent else (self.kv_heads or 0) * (self.head_size or 0)

    def describe(self) -> str:
        """``36 layers, 8 KV heads x 128`` or ``61 layers, MLA latent 512+64``."""
        per_layer = (f"MLA latent {self.latent[0]}+{self.latent[1]}" if self.latent
                     else f"{self.kv_heads} KV heads x {self.head_size}")
        return f"{self.layers} layers, {per_layer}"


def kv_geometry(name: str | None) -> KVGeometry | None:
    """The :class:`KVGeometry` of the checkpoint ``name`` as the table of public config.json fields knows it
    (:func:`~pdd_operator.vllm.known_models.known_config`, or a quantized or re-published copy of a known checkpoint,
    :func:`~pdd_operator.vllm.known_models.derived_config`, which keeps the base's layers and attention geometry),
    else ``None``: a local path, a private or unlisted model, or a config.json without the layer count, KV heads or
    head size (an MLA one without its latent sizes), and a hybrid SSM or encoder-decoder model (whose layers are not
    all attention layers of one shape). Pure."""
    known = known_config(name)
    config = known[0] if known else ((derived := derived_config(name)) and derived[0])
    if not config or facts_from_config(config).architecture in (Architecture.HYBRID_SSM, Architecture.ENCODER_DECODER):
        return None
    text = _text_config(config)
    layers = _int_field(text, "num_hidden_layers")
    if layers is None:
        return None
    if text.get("kv_lora_rank"):
        rank, rope = _int_field(text, "kv_lora_rank"), _int_field(text, "qk_rope_head_dim")
        return KVGeometry(layers, None, None, (rank, rope)) if rank and rope else None
    heads = _int_field(text, "num_key_value_heads") or _int_field(text, "num_attention_heads")
    size = _head_size(text)
    return KVGeometry(layers, heads, size) if heads and size else None


def _names_dtype(config: dict | None) -> bool:
    """Whether ``config`` (or its text or vision config) names a ``torch_dtype`` / ``dtype``."""
    parts = (config or {}, (config or {}).get("text_config"), (config or {}).get("vision_config"))
    return any(isinstance(p, dict) and ("torch_dtype" in p or "dtype" in p) for p in parts)


def _context_missing(config: dict) -> str:
    """The config.json field a table copy ``config`` lacks for its context length (its text config's length keys,
    :data:`~pdd_operator.vllm.max_model_len.LENGTH_KEYS`, else its RoPE scaling, which
    :func:`~pdd_operator.vllm.max_model_len.context_limit` could not read). Pure."""
    text = _text_config(config)
    if not any(k in text for k in LENGTH_KEYS):
        return "max_position_embeddings"
    return "rope_parameters" if "rope_parameters" in text else "rope_scaling"


@dataclass(frozen=True)
class ResolvedModel:
    """The model as the operator and the rules see it: family, SSM kind, KV heads, Mamba2 n_groups, and from its
    config.json the checkpoint's dtype and what ``--kv-cache-dtype auto`` becomes (:mod:`pdd_operator.vllm.dtype`;
    ``None`` where no config.json is known). ``read_as``: the known base checkpoint whose config.json fields were
    taken for a quantized or re-published copy of it (:func:`~pdd_operator.vllm.known_models.derived_config`), and
    ``quantized`` whether the name marks a quantization (whose KV cache scheme the base's config.json cannot show)."""

    traits: ModelTraits
    num_kv_heads: int | None
    n_groups: int | None
    checkpoint_dtype: str | None = None
    checkpoint_kv_cache_dtype: str | None = None
    read_as: str | None = None
    quantized: bool = False
    #: config.json ``architectures[0]`` (or ``spec.model.hfArchitecture``), where known: vLLM picks the model's config
    #: hook by it (:func:`~pdd_operator.vllm.dtype.hooked_kv_cache_dtype`).
    hf_architecture: str | None = None


def resolve_model(model, model_config: dict | None = None) -> ResolvedModel:
    """Combine ``spec.model`` (a :class:`~pdd_operator.api.spec.ModelSpec`) with the model's config.json.

    Precedence per fact: the explicit spec field, then config.json, then the key fields of a well-known
    checkpoint's config.json (:func:`~pdd_operator.vllm.known_models.known_config`, by ``model.name``; only where no
    config.json is given; for a quantized or re-published copy of such a checkpoint, the base's fields less its dtype,
    quantization and context length, :func:`~pdd_operator.vllm.known_models.derived_config`), then the name tables
    (:func:`~pdd_operator.vllm.architectures.traits`). Rendering and the
    rules both call this, so the flags the operator renders always match what the rules assume.
    """
    label, read_as, quantized = "config.json", None, False
    if not model_config and (known := known_config(model.name)) is not None:
        model_config, label = known[0], f"known config.json of {model.name}"
    elif not model_config and (derived := derived_config(model.name)) is not None:
        model_config, read_as, quantized = derived
        label = f"{model.name} read as {read_as}"  # no "config.json": the copy's own KV quantization is not known
    facts = facts_from_config(model_config) if model_config else None
    if facts is not None and model.architecture is None and facts.architecture is not None:
        model_traits = ModelTraits(facts.architecture, model.ssm_kind or facts.ssm_kind, label,
                                   facts.sliding_window, facts.head_size, registry_since(facts.hf_architecture))
    else:
        hf = model.hf_architecture or (facts.hf_architecture if facts else None)
        model_traits = traits(model.architecture, model.ssm_kind, hf, model.name)
        if facts is not None and facts.sliding_window and not model_traits.sliding_window:
            model_traits = replace(model_traits, sliding_window=True)
        if facts is not None:  # the config.json read decides the window (ModelTraits.window_depends)
            model_traits = replace(model_traits, window_depends=False)
        if facts is not None and facts.head_size is not None:
            model_traits = replace(model_traits, head_size=facts.head_size)
    if facts is not None and facts.architecture == model_traits.architecture == Architecture.MULTIMODAL:
        model_traits = replace(model_traits, plain_language_model=True)
    if facts is not None:
        model_traits = replace(model_traits, num_heads=facts.num_attention_heads,
                               attention_chunk_size=facts.attention_chunk_size, num_experts=facts.num_experts,
                               fp8_moe_shape=facts.fp8_moe_shape, fp8_moe_since=facts.fp8_moe_since,
                               context_limit=facts.context_limit if facts.context_limit is None or label ==
                               "config.json" or _names_dtype(model_config) else replace(facts.context_limit, whole=False),
                               context_missing="" if facts.context_limit is not None or label == "config.json"
                               else _context_missing(model_config),
                               mla_attention=model_traits.mla_attention or (
                                   facts.mla_attention and model_traits.architecture == Architecture.HYBRID_SSM))
    return ResolvedModel(
        traits=model_traits,
        num_kv_heads=model.num_kv_heads or (facts.num_kv_heads if facts else None),
        n_groups=model.mamba_n_groups or (facts.n_groups if facts else None),
        # a table entry without torch_dtype may be a trimmed copy: its dtype is not taken as float32 (the default of
        # a whole config.json that names none)
        checkpoint_dtype=(config_dtype(model_config) if label == "config.json" or _names_dtype(model_config) else None)
        or checkpoint_dtype_of(model.name),
        checkpoint_kv_cache_dtype=checkpoint_kv_cache_dtype(model_config),
        read_as=read_as, quantized=quantized,
        hf_architecture=model.hf_architecture or (facts.hf_architecture if facts else None),
    )
