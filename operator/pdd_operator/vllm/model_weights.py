"""How many bytes of weights a vLLM engine holds per GPU: a lower bound from the model's config.json.

vLLM loads the whole checkpoint before it sizes the KV cache, and the KV cache gets only what is left of
``gpu_memory_utilization`` x the GPU's memory (vllm/v1/worker/gpu_worker.py ``determine_available_memory``; where
nothing is left ``check_enough_kv_cache_memory`` raises "No available memory for the cache blocks": 0.9.0-0.28.0
vllm/v1/core/kv_cache_utils.py, 0.11.0 lines 678-699; 0.34.0 vllm/v1/core/kv_cache_planning.py lines 106-108), and a
checkpoint larger than the GPU fails earlier, with torch.OutOfMemoryError while the layers are created. So an engine
whose weights per GPU exceed that budget never starts, in every release.

The count here is a lower bound, so that a refusal is a promise: only the large matrices (attention projections, MLP
and expert projections, embeddings and the LM head) are counted, norms, biases, router gates and quantization scales
are not, and each parallel split is taken at its most favourable (a pipeline stage holds at least the average of the
stages). Shapes as vLLM builds them (vllm/model_executor/models/llama.py and deepseek_v2.py, 0.11.0 and 0.34.0):

- attention of a GQA model: q and o ``hidden x heads x head_dim``, k and v ``hidden x kv_heads x head_dim``;
- MLA (DeepSeek-V2/V3): ``q_a_proj`` ``hidden x q_lora_rank`` (replicated on every TP rank, ``ReplicatedLinear``;
  0.11.0 deepseek_v2.py line 336) and ``q_b_proj`` ``q_lora_rank x heads x (qk_nope + qk_rope)`` (or one ``q_proj``
  without a q LoRA rank), ``kv_a_proj_with_mqa`` ``hidden x (kv_lora_rank + qk_rope)`` (replicated, line 357),
  ``kv_b_proj`` ``kv_lora_rank x heads x (qk_nope + v_head_dim)``, ``o_proj`` ``heads x v_head_dim x hidden``;
- a gated MLP: three ``hidden x intermediate`` matrices; DeepSeek's first ``first_k_dense_replace`` layers are dense
  (``intermediate_size``), the others MoE: ``n_routed_experts`` routed and ``n_shared_experts`` shared experts of
  ``moe_intermediate_size``;
- embeddings and LM head ``vocab x hidden`` each (one when ``tie_word_embeddings``), vocab-parallel over TP.

Bytes per parameter: the checkpoint's dtype (bfloat16/float16: 2) unquantized; with an ``fp8`` quantization_config
the linear layers take 1 byte and the embeddings and LM head keep the dtype (vllm/model_executor/layers/quantization/
fp8.py quantizes ``LinearBase`` and ``FusedMoE`` only). Any other quantization, or a family not listed, is not
counted (``None``).
"""

from __future__ import annotations

from dataclasses import dataclass

#: The Hugging Face architectures counted as dense GQA decoders (one attention and one gated MLP per layer).
DENSE_ARCHITECTURES = frozenset({"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"})
#: The architectures counted as DeepSeek MLA decoders (MoE after the first ``first_k_dense_replace`` layers).
MLA_ARCHITECTURES = frozenset({"DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM"})
#: Bytes per parameter of an unquantized checkpoint's dtype.
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2}


@dataclass(frozen=True)
class WeightShape:
    """A model's counted parameters, by how vLLM splits them over GPUs.

    Attributes:
        split: parameters every TP rank holds a 1/TP share of (column/row-parallel layers, vocab-parallel
            embeddings), in bytes.
        replicated: bytes every TP rank holds whole (MLA's ``q_a_proj`` and ``kv_a_proj_with_mqa``).
        experts: bytes of the routed experts: split over the expert-parallel group with
            ``--enable-expert-parallel``, else over TP like ``split``.
    """

    split: float
    replicated: float
    experts: float

    def per_gpu(self, tp: int, pp: int, ep: int | None) -> float:
        """A lower bound of the bytes of weights on one GPU: TP size ``tp``, pipeline stages ``pp``, expert-parallel
        group size ``ep`` (``None``: no expert parallelism, the experts split over TP). Pure."""
        experts = self.experts / (ep if ep else tp)
        return (self.split / tp + self.replicated + experts) / pp


def _int(config: dict, key: str) -> int | None:
    value = config.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _bytes_per_param(config: dict, dtype: str | None) -> tuple[float, float] | None:
    """``(linear, embedding)`` bytes per parameter for a config.json read with ``--dtype`` ``dtype`` (``None`` or
    ``auto``: the checkpoint's), or ``None`` where the storage is not known."""
    wanted = dtype if dtype not in (None, "auto") else (config.get("torch_dtype") or config.get("dtype"))
    element = DTYPE_BYTES.get(str(wanted))
    if element is None:
        return None
    quant = config.get("quantization_config")
    if not quant:
        return float(element), float(element)
    if isinstance(quant, dict) and quant.get("quant_method") == "fp8":
        return 1.0, float(element)
    return None


def weight_shape(config: dict, dtype: str | None = None) -> WeightShape | None:
    """The :class:`WeightShape` (bytes) of a model from its config.json fields (a dict; the table's key fields
    suffice), loaded with ``--dtype`` ``dtype``; ``None`` for a family, a storage or a config this module does not
    count (see the module docstring). Pure."""
    sizes = _bytes_per_param(config, dtype)
    archs = set(config.get("architectures") or ())
    hidden, layers, vocab = _int(config, "hidden_size"), _int(config, "num_hidden_layers"), _int(config, "vocab_size")
    heads = _int(config, "num_attention_heads")
    if sizes is None or not hidden or not layers or not vocab or not heads:
        return None
    linear, embedding = sizes
    embeddings = vocab * hidden * (1 if config.get("tie_word_embeddings") else 2) * embedding
    inter = _int(config, "intermediate_size")
    if archs & DENSE_ARCHITECTURES:
        kv_heads = _int(config, "num_key_value_heads") or heads
        head_dim = _int(config, "head_dim") or hidden // heads
        if not inter or _int(config, "num_local_experts") or _int(config, "num_experts"):
            return None
        per_layer = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim + 3 * hidden * inter
        return WeightShape(split=layers * per_layer * linear + embeddings, replicated=0.0, experts=0.0)
    if archs & MLA_ARCHITECTURES:
        fields = {k: _int(config, k) for k in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
                                               "moe_intermediate_size", "n_routed_experts")}
        if not inter or any(v is None for v in fields.values()):
            return None
        rank, nope, rope, v_dim = (fields[k] for k in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                                                        "v_head_dim"))
        q_rank = _int(config, "q_lora_rank")
        q_head = heads * (nope + rope)
        q_split = q_rank * q_head if q_rank else hidden * q_head
        q_replicated = hidden * q_rank if q_rank else 0
        attention_split = q_split + rank * heads * (nope + v_dim) + heads * v_dim * hidden
        attention_replicated = q_replicated + hidden * (rank + rope)
        dense = min(_int(config, "first_k_dense_replace") or 0, layers) if fields["n_routed_experts"] else layers
        moe = layers - dense
        moe_inter = fields["moe_intermediate_size"]
        shared = 3 * hidden * moe_inter * (_int(config, "n_shared_experts") or 0)
        routed = 3 * hidden * moe_inter * fields["n_routed_experts"]
        split = layers * attention_split + dense * 3 * hidden * inter + moe * shared
        return WeightShape(split=split * linear + embeddings, replicated=layers * attention_replicated * linear,
                           experts=moe * routed * linear)
    return None
