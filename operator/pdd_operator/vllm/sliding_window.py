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
"""

from __future__ import annotations

#: transformers model types whose config class has ``use_sliding_window`` with default ``False`` and drops the size
#: unless it is true (transformers 5.19 configuration_*.py; the same assignment in the 4.5x ``__init__``).
USE_SLIDING_WINDOW_TYPES = frozenset({"qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen2_5_omni", "smollm3"})


def has_sliding_window(text: dict, model_type: str | None = None) -> bool:
    """True when vLLM runs some attention layer of this config windowed (see the module docstring).

    ``text``: the config.json dict, or its text model's part (``text_config``) merged with the top level;
    ``model_type``: the config's ``model_type`` where ``text`` lacks it. Pure; unknown shapes of values count as absent.
    """
    kind = str(text.get("model_type") or model_type or "")
    gated = "use_sliding_window" in text or kind in USE_SLIDING_WINDOW_TYPES
    window = text.get("sliding_window") and not (gated and not text.get("use_sliding_window"))
    types = text.get("layer_types") or text.get("layers_block_type")
    layer_types = [str(t).lower() for t in types] if isinstance(types, list) else []
    return bool(window or text.get("attention_chunk_size") or text.get("sliding_window_size")
                or any("sliding" in t or "chunked" in t for t in layer_types))
