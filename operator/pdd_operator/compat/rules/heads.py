"""Tensor parallelism against the model's attention and KV heads: a TP size the heads do not divide never starts.

vLLM shards attention by heads. ``ModelConfig.verify_with_parallel_config`` raises "Total number of attention heads
(H) must be divisible by tensor parallel size (T)" (vllm/config/model.py, every release: read in the 0.9.1 wheel and
the 0.11.0, 0.14.0 and 0.21.0 sdists), and the KV projection splits the KV heads (``QKVParallelLinear``:
``divide(total_num_kv_heads, tp_size)`` below the KV heads, ``divide(tp_size, total_num_kv_heads)`` at or above them,
vllm/model_executor/layers/linear.py; LlamaAttention asserts the same, vllm#16021: Phi-4's 10 KV heads at TP 4). MLA
models have no KV heads to split (the latent is replicated), so only the attention heads count there.
"""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, rule


def indivisible(tp: int, heads: int | None, kv_heads: int | None, mla: bool) -> str:
    """Why TP ``tp`` cannot shard a model of ``heads`` attention and ``kv_heads`` KV heads (``""``: it can, or the
    heads are not known). Pure."""
    if tp <= 1:
        return ""
    if heads and heads % tp:
        return f"its {heads} attention heads are not divisible by TP {tp}"
    if not mla and kv_heads:
        if kv_heads > tp and kv_heads % tp:
            return f"its {kv_heads} KV heads are not divisible by TP {tp}"
        if tp > kv_heads and tp % kv_heads:
            return f"TP {tp} is not a multiple of its {kv_heads} KV heads (each is replicated a whole number of times)"
    return ""


@rule(
    id="tp-heads-indivisible", family="parallelism", severity="error",
    fields=("spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize", "spec.model.numKvHeads"),
    source=("vllm/config/model.py verify_with_parallel_config 'Total number of attention heads ... must be divisible by "
            "tensor parallel size'; vllm/model_executor/layers/linear.py QKVParallelLinear divide() of the KV heads "
            "(all releases; vllm#16021)"),
    without_connector=True, one_engine=True, any_release=True,
    example="microsoft/phi-4 (10 KV heads) at TP 4",
)
def check_tp_heads(pair: PDPair) -> list[Violation]:
    """Each engine's TP divides the model's attention heads and splits or replicates its KV heads evenly."""
    out: list[Violation] = []
    for role in pair.roles:
        why = indivisible(role.tp or 1, pair.model.num_heads, pair.num_kv_heads, pair.mla)
        if why:
            out.append((
                f"{role.role}: the model cannot be sharded at tensor parallel size {role.tp}: {why}; vLLM stops at "
                "startup (ValueError in verify_with_parallel_config, or an AssertionError building the attention "
                "layers) and the engine never serves.",
                f"Use a {role.role} TP that divides the model's attention heads"
                + (f" ({pair.model.num_heads})" if pair.model.num_heads else "")
                + (f" and KV heads ({pair.num_kv_heads})" if pair.num_kv_heads and not pair.mla else "") + ".",
            ))
    return out
