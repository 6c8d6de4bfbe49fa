"""Whether vLLM gives a model's attention layers a sliding window, read from its config.json as vLLM reads it.

vLLM turns the config's ``sliding_window`` into a non-full KV cache spec (``SlidingWindowSpec``), which is what the
hybrid KV cache manager (HMA) and its NIXL rules follow:

* ``ModelConfig.get_sliding_window`` (vllm/config/model.py 0.11.1-0.34.0, vllm/config/__init__.py 0.10.1.1) returns
  ``hf_text_config.sliding_window``; ``CacheConfig.sliding_window`` takes it, and ``Attention`` uses it for every
  layer the model gives no per-layer window (vllm/attention/layer.py 0.10.1.1,
  model_executor/layers/attention/attention.py 0.32.0: ``per_layer_sliding_window`` else
  ``cache_config.sliding_window``). So a Mistral-7B-v0.1 config (``"sliding_window": 4096``) or Phi-3-mini-4k's
  (2047) runs every layer windowed; Mistral-7B v0.2/v0.3 (``null``) none.
* Qwen2-style configs carry ``use_sliding_window`` beside the size. vLLM 0.9.0-0.10.0 check it themselves
  (``ModelConfig.get_hf_config_sliding_window``, vllm/config.py of the 0.9.0, 0.9.1, 0.9.2, 0.10.0 wheels: "Some models,
  like Qwen2 and Qwen1.5, use `use_sliding_window` ... if it's False, return None"); from 0.10.1 transformers' config
  class does (``Qwen2Config``: ``self.sliding_window = sliding_window if self.use_sliding_window else None``, in the
  4.5x ``__init__`` and transformers 5.19's ``__post_init__``, the same in qwen2_moe, qwen3, qwen3_moe, qwen2_5_omni,
  smollm3). A config of those model types that omits ``use_sliding_window`` takes the class default, ``False``. So
  Qwen2.5's ``"sliding_window": 32768, "use_sliding_window": false`` means no window, in every release read.
* ``layer_types`` naming ``sliding_attention`` / chunked layers, ``attention_chunk_size`` (Llama 4's chunked local
  attention) and ``sliding_window_size`` (MiMo-V2-Flash's SWA layers) give windowed layers as well.

Per architecture, without a config.json, that leaves three cases (:func:`window_depends`):

* windowed by the model's code (Gemma 2/3, gpt-oss, Cohere2, Llama 4, ...:
  :data:`pdd_operator.vllm.architectures.SLIDING_WINDOW_ARCHITECTURES`);
* windowed or not as the checkpoint's config.json says (:data:`CONFIG_WINDOW_ARCHITECTURES`): the model file hands
  its ``cache_config`` to every ``Attention`` layer, which takes ``cache_config.sliding_window`` where the layer has
  no window of its own (attention.py: vllm/attention/layer.py 0.9.0 l.64, 0.10.1.1 l.97, 0.11.0 l.115, 0.13.0 l.157;
  model_executor/layers/attention/attention.py 0.18.0 l.217, 0.22.0 l.219, 0.27.0 l.266, 0.32.0 l.271, 0.34.0
  l.287), and ``EngineArgs.create_engine_config`` sets that from ``ModelConfig.get_sliding_window()`` for a model
  whose layers are not interleaved (arg_utils.py 0.9.0 l.1028, 0.13.0 l.1347, 0.18.0 l.1524, 0.22.0 l.1743, 0.27.0
  l.1943, 0.32.0 l.2254, 0.34.0 l.2327). The transformers config class of these model types declares
  ``sliding_window`` (transformers 5.19 configuration_*.py: mistral 4096 by default, ministral 4096, mixtral, phi3,
  phimoe, starcoder2 ``None``; qwen2, qwen2_moe, qwen3, qwen3_moe, smollm3 gated by ``use_sliding_window``), and
  their public checkpoints differ: Mistral-7B-v0.1 4096 and v0.3 ``null``, Phi-3.5-mini 262144, Qwen2.5 gated off.
  So a checkpoint of one of them that neither a config.json nor the table of public checkpoints
  (:mod:`pdd_operator.vllm.known_models`) describes may or may not run windowed layers;
* never windowed: every other architecture, whose config class declares no ``sliding_window`` (Llama, Gemma 1,
  DeepSeek, GPT-NeoX, ...).
"""

from __future__ import annotations

import re

#: transformers model types whose config class has ``use_sliding_window`` with default ``False`` and drops the size
#: unless it is true (transformers 5.19 configuration_*.py; the same assignment in the 4.5x ``__init__``).
USE_SLIDING_WINDOW_TYPES = frozenset({"qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen2_5_omni", "smollm3"})


#: ``architectures[0]`` names whose windows come only from config.json (see the module docstring), with the vLLM
#: model file that passes ``cache_config`` to its attention layers (models/registry.py 0.10.1.1, 0.18.0, 0.34.0):
#: mistral.py (llama.py up to 0.14), mixtral.py, phi3.py and mimo.py (subclasses of llama.py / qwen2.py),
#: phimoe.py, qwen2.py, qwen2_moe.py, qwen3.py, qwen3_moe.py, starcoder2.py, qwen2_vl.py / qwen2_5_vl.py (a Qwen2
#: text model). StarCoder2 (from 0.25) and SmolLM3 run on the Transformers backend, which also passes ``cache_config``
#: and sets a per-layer window from ``layer_types`` (models/transformers/base.py 0.25.0 lines 550-557).
CONFIG_WINDOW_ARCHITECTURES = frozenset({
    "MistralForCausalLM", "Ministral3ForCausalLM", "Mistral3ForConditionalGeneration", "MixtralForCausalLM",
    "Phi3ForCausalLM", "PhiMoEForCausalLM",
    "Starcoder2ForCausalLM", "Qwen2ForCausalLM", "Qwen2MoeForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM",
    "Qwen2VLForConditionalGeneration", "Qwen2_5_VLForConditionalGeneration", "MiMoForCausalLM", "SmolLM3ForCausalLM",
})

#: Hugging Face model ids of those families, for a model named only by its id (no ``architectures`` entry known):
#: Mistral / Ministral / Mixtral, Qwen 1.5-3 (not Qwen3.5 / Qwen3.6 / Qwen3-Next, hybrid SSM models), Phi-3 / Phi-3.5
#: / Phi-4 (Phi3ForCausalLM), StarCoder2, SmolLM3, MiMo-7B.
CONFIG_WINDOW_NAMES = re.compile(
    r"mistral|ministral|mixtral|qwen(?!3[.-](5|6|next))|phi-?3|phi-?4|starcoder2|smollm-?3|mimo-7b", re.I)


def window_depends(hf_architecture: str | None, model_name: str | None) -> bool:
    """Whether a model's sliding window is decided by a config.json the caller has not read: ``hf_architecture`` (the
    config's ``architectures[0]``) is one of :data:`CONFIG_WINDOW_ARCHITECTURES`, or, where no architecture name is
    known, the repository part of the Hugging Face id ``model_name`` names one of their families
    (:data:`CONFIG_WINDOW_NAMES`; ``Qwen/`` alone names none). ``False`` for
    an architecture that never windows or windows by its code. Pure; the caller reads the table of public
    checkpoints and any config.json first (a known config decides the window)."""
    if hf_architecture:
        return hf_architecture in CONFIG_WINDOW_ARCHITECTURES
    return bool(CONFIG_WINDOW_NAMES.search((model_name or "").rstrip("/").rpartition("/")[2]))


#: transformers model types whose config class windows by default: a config.json without a ``sliding_window`` key
#: takes ``4096`` (``MistralConfig`` / ``MinistralConfig``: ``sliding_window: int | None = 4096``, transformers 5.19
#: configuration_mistral.py l.80 and configuration_ministral.py l.83; ``sliding_window=4096`` in the 4.x
#: ``__init__``), which vLLM then reads as every layer's window (``getattr(hf_text_config, "sliding_window")``).
DEFAULT_WINDOW_TYPES = frozenset({"mistral", "ministral"})


def has_sliding_window(text: dict, model_type: str | None = None) -> bool:
    """True when vLLM runs some attention layer of this config windowed (see the module docstring).

    ``text``: the config.json dict, or its text model's part (``text_config``) merged with the top level;
    ``model_type``: the config's ``model_type`` where ``text`` lacks it; a Mistral config without the key takes its
    class default (:data:`DEFAULT_WINDOW_TYPES`). Pure; unknown shapes of values count as absent.
    """
    kind = str(text.get("model_type") or model_type or "")
    gated = "use_sliding_window" in text or kind in USE_SLIDING_WINDOW_TYPES
    size = text.get("sliding_window", 4096 if kind in DEFAULT_WINDOW_TYPES else None)
    window = size and not (gated and not text.get("use_sliding_window"))
    types = text.get("layer_types") or text.get("layers_block_type")
    layer_types = [str(t).lower() for t in types] if isinstance(types, list) else []
    return bool(window or text.get("attention_chunk_size") or text.get("sliding_window_size")
                or any("sliding" in t or "chunked" in t for t in layer_types))
