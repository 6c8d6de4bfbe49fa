"""How many bytes of weights a vLLM engine holds per GPU: a lower bound from the model's config.json.

vLLM loads the whole checkpoint before it sizes the KV cache, and the KV cache gets only what is left of
``gpu_memory_utilization`` x the GPU's memory (vllm/v1/worker/gpu_worker.py ``determine_available_memory``; where
nothing is left ``check_enough_kv_cache_memory`` raises "No available memory for the cache blocks": 0.9.0-0.28.0
vllm/v1/core/kv_cache_utils.py, 0.11.0 lines 678-699; 0.34.0 vllm/v1/core/kv_cache_planning.py lines 106-108), and a
checkpoint larger than the GPU fails earlier, with torch.OutOfMemoryError while the layers are created. So an engine
whose weights per GPU exceed that budget never starts, in every release.

The count here is a lower bound, so that a refusal is a promise: only the large matrices (attention projections, MLP
and expert projections, embeddings and the LM head) are counted, norms, biases, router gates, attention sinks,
quantization scales and multi-token-prediction layers (not loaded without a speculative config) are not, and each
parallel split is taken at its most favourable (a pipeline stage holds at least the average of the stages). Shapes as
vLLM builds them (vllm/model_executor/models/*.py, 0.11.0 and 0.34.0):

- attention of a GQA model: q and o ``hidden x heads x head_dim``, k and v ``hidden x kv_heads x head_dim``
  (``head_dim`` where the config names one, else ``hidden / heads``);
- MLA (DeepSeek-V2/V3, Kimi-K2 which is DeepSeek-V3's shape): ``q_a_proj`` ``hidden x q_lora_rank`` (replicated on
  every TP rank, ``ReplicatedLinear``; 0.11.0 deepseek_v2.py line 336) and ``q_b_proj`` ``q_lora_rank x heads x
  (qk_nope + qk_rope)`` (or one ``q_proj`` without a q LoRA rank), ``kv_a_proj_with_mqa`` ``hidden x (kv_lora_rank +
  qk_rope)`` (replicated, line 357), ``kv_b_proj`` ``kv_lora_rank x heads x (qk_nope + v_head_dim)``, ``o_proj``
  ``heads x v_head_dim x hidden``;
- a gated MLP or expert: three ``hidden x intermediate`` matrices (gpt-oss fuses gate and up: the same count);
- the MoE layers (:data:`GQA_MOE_ARCHITECTURES`, :data:`MLA_ARCHITECTURES`), with GQA attention unless MLA:
  DeepSeek and GLM-4.5/4.6 (glm4_moe.py 0.11.0 lines 363-364) make their first ``first_k_dense_replace`` layers dense
  (``intermediate_size``) and the others MoE: ``n_routed_experts`` routed and ``n_shared_experts`` shared experts of
  ``moe_intermediate_size``; Qwen3-MoE (qwen3_moe.py 0.11.0 lines 324-338) makes a layer MoE (``num_experts`` of
  ``moe_intermediate_size``) unless it is in ``mlp_only_layers`` or ``(layer + 1) % decoder_sparse_step`` is not 0
  (the config's defaults: none and 1), else dense; Mixtral (mixtral.py), gpt-oss (gpt_oss.py 0.11.0 lines 150-159)
  and MiniMax-M2 (minimax_m2.py 0.12.0 lines 100-108) make every layer MoE, ``num_local_experts`` experts of
  ``intermediate_size``;
- embeddings and LM head ``vocab x hidden`` each (one when ``tie_word_embeddings``), vocab-parallel over TP.

Bytes per parameter: the checkpoint's dtype (bfloat16/float16: 2; where config.json names none, vLLM's ``auto``
takes float32 and downcasts it to a 16-bit dtype: 0.11.0 vllm/config/model.py lines 1641-1667, so 2) unquantized;
with an ``fp8`` quantization_config the linear and expert layers take 1 byte and the embeddings and LM head keep the
dtype (vllm/model_executor/layers/quantization/fp8.py quantizes ``LinearBase`` and ``FusedMoE`` only); with
``mxfp4`` (gpt-oss) the experts take at least half a byte (4-bit values, their scales not counted) and the linear
layers keep the dtype (quantization/mxfp4.py 0.11.0 ``Mxfp4Config.get_quant_method`` lines 138-149:
``UnquantizedLinearMethod`` for ``LinearBase``, ``Mxfp4MoEMethod`` for ``FusedMoE``). Any other quantization, or a
family not listed, is not counted (``None``).
"""

from __future__ import annotations

from dataclasses import dataclass

#: The Hugging Face architectures counted as dense GQA decoders (one attention and one gated MLP per layer).
DENSE_ARCHITECTURES = frozenset({"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"})
#: The architectures counted as DeepSeek MLA decoders (MoE after the first ``first_k_dense_replace`` layers).
MLA_ARCHITECTURES = frozenset({"DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM"})
#: GQA decoders with MoE layers: architecture -> (the config field of the routed expert count, that of the expert
#: intermediate size).
GQA_MOE_ARCHITECTURES = {
    "Qwen3MoeForCausalLM": ("num_experts", "moe_intermediate_size"),
    "Glm4MoeForCausalLM": ("n_routed_experts", "moe_intermediate_size"),
    "MixtralForCausalLM": ("num_local_experts", "intermediate_size"),
    "GptOssForCausalLM": ("num_local_experts", "intermediate_size"),
    "MiniMaxM2ForCausalLM": ("num_local_experts", "intermediate_size"),
}
#: Bytes per parameter of an unquantized checkpoint's dtype.
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2}
#: Bytes per expert parameter of an MXFP4 checkpoint, a lower bound (4-bit values; the shared scales not counted).
MXFP4_BYTES = 0.5


@dataclass(frozen=True)
class WeightShape:
    """A model's counted parameters, by how vLLM splits them over GPUs.

    Attributes:
        split: parameters every TP rank holds a 1/TP share of (column/row-parallel layers, vocab-parallel
            embeddings), in bytes.
        replicated: bytes every TP rank holds whole (MLA's ``q_a_proj`` and ``kv_a_proj_with_mqa``).
        experts: bytes of the routed experts: split over the MoE group, TP x DP (x PCP) ranks, whole experts with
            ``--enable-expert-parallel`` and a slice of each without it (``FusedMoEParallelConfig.make``
            ``flatten_tp_across_dp``: 0.9.0 fused_moe/layer.py lines 146-150, 0.11.0 fused_moe/config.py lines
            695-717, 0.34.0 ``flatten_tp_across_dp_and_pcp`` lines 1143-1154).
    """

    split: float
    replicated: float
    experts: float

    def per_gpu(self, tp: int, pp: int, ep: int | None) -> float:
        """A lower bound of the bytes of weights on one GPU: TP size ``tp``, pipeline stages ``pp``, the MoE group
        size ``ep`` the routed experts are split over (TP x DP x PCP; ``None``: TP alone). Pure."""
        experts = self.experts / (ep if ep else tp)
        return (self.split / tp + self.replicated + experts) / pp


def _int(config: dict, key: str) -> int | None:
    value = config.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _bytes_per_param(config: dict, dtype: str | None) -> tuple[float, float, float] | None:
    """``(linear, experts, embedding)`` bytes per parameter for a config.json read with ``--dtype`` ``dtype``
    (``None`` or ``auto``: the checkpoint's; none named: 2, vLLM's downcast of float32), or ``None`` where the storage
    is not known."""
    wanted = dtype if dtype not in (None, "auto") else (config.get("torch_dtype") or config.get("dtype"))
    element = DTYPE_BYTES.get(str(wanted)) if wanted is not None else 2
    if element is None:
        return None
    quant = config.get("quantization_config")
    method = quant.get("quant_method") if isinstance(quant, dict) else None
    if not quant:
        return float(element), float(element), float(element)
    if method == "fp8":
        return 1.0, 1.0, float(element)
    if method == "mxfp4":
        return float(element), MXFP4_BYTES, float(element)
    return None


def _gqa_attention(config: dict, hidden: int, heads: int) -> int:
    """Parameters of one GQA attention layer's q, k, v and o projections."""
    kv_heads = _int(config, "num_key_value_heads") or heads
    head_dim = _int(config, "head_dim") or hidden // heads
    return 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim


def _dense_layers(config: dict, arch: str, layers: int) -> int | None:
    """How many of ``layers`` decoder layers of MoE family ``arch`` are dense MLPs rather than MoE; ``None`` where
    the config's fields for it are not readable."""
    if arch == "Glm4MoeForCausalLM":
        first = _int(config, "first_k_dense_replace")
        return min(first or 0, layers)
    if arch == "Qwen3MoeForCausalLM":
        only = config.get("mlp_only_layers") or []
        step = config.get("decoder_sparse_step", 1)
        if not isinstance(only, list) or not isinstance(step, int) or isinstance(step, bool) or step < 1:
            return None
        return sum(1 for i in range(layers) if i in only or (i + 1) % step)
    return 0


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
    linear, expert_bytes, embedding = sizes
    embeddings = vocab * hidden * (1 if config.get("tie_word_embeddings") else 2) * embedding
    inter = _int(config, "intermediate_size")
    if archs & DENSE_ARCHITECTURES:
        if not inter or _int(config, "num_local_experts") or _int(config, "num_experts"):
            return None
        per_layer = _gqa_attention(config, hidden, heads) + 3 * hidden * inter
        return WeightShape(split=layers * per_layer * linear + embeddings, replicated=0.0, experts=0.0)
    moe_arch = next((a for a in GQA_MOE_ARCHITECTURES if a in archs), None)
    if moe_arch:
        count_key, size_key = GQA_MOE_ARCHITECTURES[moe_arch]
        experts, expert_inter = _int(config, count_key), _int(config, size_key)
        dense = _dense_layers(config, moe_arch, layers)
        if not experts or not expert_inter or dense is None or (dense and not inter):
            return None
        shared = 3 * hidden * expert_inter * (_int(config, "n_shared_experts") or 0)
        split = layers * _gqa_attention(config, hidden, heads) + dense * 3 * hidden * (inter or 0) \
            + (layers - dense) * shared
        routed = (layers - dense) * experts * 3 * hidden * expert_inter
        return WeightShape(split=split * linear + embeddings, replicated=0.0, experts=routed * expert_bytes)
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
                           experts=moe * routed * expert_bytes)
    return None
