"""Heterogeneous tensor parallelism: which prefill/decode TP sizes vLLM can map onto each other."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, rule
from pdd_operator.vllm.versions import fmt


@rule(
    id="tp-divisibility", family="hetero-tp", severity="error",
    fields=("spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize"),
    source="vllm kv_connector/utils.py TransferTopology.tp_ratio (0.20-0.33)",
    example="prefill: {tensorParallelSize: 2}, decode: {tensorParallelSize: 3}",
)
def check_tp_divisible(pair: PDPair) -> list[Violation]:
    """One TP size is a multiple of the other."""
    if pair.tps is None:
        return []
    p, d = pair.tps
    if max(p, d) % min(p, d) == 0:
        return []
    return [(
        f"Prefill TP {p} and decode TP {d}: neither divides the other, so decode cannot map its ranks onto "
        "prefill's (TransferTopology.tp_ratio asserts at the first request).",
        "Choose tensor parallel sizes where one is a multiple of the other, e.g. 1/2, 2/4, 4/4, 8/2.",
    )]


@rule(
    id="tp-exceeds-kv-heads", family="hetero-tp", severity="error",
    fields=("spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize", "spec.model.numKvHeads"),
    source="vllm nixl _validate_remote_agent_handshake is_kv_replicated assert (0.20-0.33)",
)
def check_tp_kv_heads(pair: PDPair) -> list[Violation]:
    """Prefill TP > decode TP only while prefill TP <= KV heads."""
    if pair.tps is None or pair.mla or pair.hybrid_ssm or pair.num_kv_heads is None:
        return []
    p, d = pair.tps
    if p <= d or p <= pair.num_kv_heads:
        return []
    return [(
        f"Prefill TP {p} > decode TP {d} needs prefill TP <= the model's {pair.num_kv_heads} KV heads; beyond that "
        "prefill replicates KV heads and decode cannot read them (assert at the first request).",
        f"Use prefill TP <= {pair.num_kv_heads}, or decode TP >= prefill TP.",
    )]


@rule(
    id="tp-kv-heads-unknown", family="hetero-tp", severity="warning",
    fields=("spec.model.numKvHeads",),
    source="compat-rules.md section 9",
)
def check_tp_kv_heads_unknown(pair: PDPair) -> list[Violation]:
    """KV heads are known when prefill TP > decode TP."""
    if pair.tps is None or pair.mla or pair.hybrid_ssm or pair.num_kv_heads is not None:
        return []
    if pair.model.architecture is None or pair.tps[0] <= pair.tps[1]:
        return []
    return [(
        f"Prefill TP {pair.tps[0]} > decode TP {pair.tps[1]} is valid only while prefill TP <= the model's KV heads, "
        "which are not given.",
        "Set spec.model.numKvHeads (config.json num_key_value_heads) so this can be checked.",
    )]


@rule(
    id="hetero-tp-p-gt-d-unsupported", family="hetero-tp-unsupported-for-version", severity="error",
    fields=("spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize", "spec.engine"),
    source="vLLM PR #27274 (P TP > D TP), not in releases up to 0.11.0 [issue]",
    until=(0, 11, 1),
)
def check_p_gt_d_version(pair: PDPair) -> list[Violation]:
    """Prefill TP > decode TP needs a vLLM that supports it."""
    if pair.tps is None or pair.tps[0] <= pair.tps[1]:
        return []
    return [(
        f"Prefill TP {pair.tps[0]} > decode TP {pair.tps[1]} is not supported by vLLM {fmt(pair.version)}: "
        "KV transfer crashes (support landed after 0.11.0).",
        "Use decode TP >= prefill TP, or a vLLM >= 0.20 engine image.",
    )]
