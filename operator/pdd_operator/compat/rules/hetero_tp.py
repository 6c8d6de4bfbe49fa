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


#: vLLM releases whose handshake block_len check ignores GQA replication: 0.20.x (the code read for
#: vllm-nixl-facts.md section 4) and 0.21.0 (vllm#45330) are known to assert; the fix (vllm#45879,
#: merged 2026-06-17) is in the 0.26.0 wheel's nixl/base_worker.py; 0.22-0.25 were not read.
_GQA_CHECK_KNOWN_BAD = ((0, 20, 0), (0, 22, 0))


@rule(
    id="hetero-tp-kv-replicated", family="hetero-tp", severity="error",
    fields=("spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize", "spec.model.numKvHeads"),
    source="vllm nixl _validate_remote_agent_handshake: 'Remote P worker KV layer cache must be of shape "
    "[2, N, local_kv_heads*tp_ratio, page_size, head_dim]' asserts remote block_len == local * tp_ratio, but GQA "
    "replication caps heads per rank at max(1, kv_heads // tp) (vllm#45330, seen on 0.21.0; same assert in 0.20.x); "
    "fixed by vllm#45879, whose per-rank head ratio is in 0.26.0's nixl/base_worker.py. An error for 0.20-0.21, "
    "a warning for 0.22-0.25 (not read)",
    until=(0, 26, 0),
    example="decode TP 16 > prefill TP 8 with an 8-KV-head model on vLLM 0.21",
)
def check_tp_kv_replicated(pair: PDPair) -> list[Violation]:
    """Decode TP > prefill TP past the KV heads (GQA replication) needs the handshake fix of vLLM 0.26."""
    if pair.tps is None or pair.mla or pair.hybrid_ssm or pair.num_kv_heads is None or pair.version is None:
        return []
    p, d = pair.tps
    heads = pair.num_kv_heads
    if d <= p or max(1, heads // p) * p == max(1, heads // d) * d:
        return []  # equal TP, P > D (other rules), or no capping: per-rank heads scale with the TP ratio
    certain = _GQA_CHECK_KNOWN_BAD[0] <= pair.version < _GQA_CHECK_KNOWN_BAD[1]
    return [(
        f"Decode TP {d} > prefill TP {p} with {heads} KV heads: decode holds {max(1, heads // d)} KV head(s) per rank "
        f"(replicated), prefill {max(1, heads // p)}, so the block lengths do not differ by the TP ratio {d // p} that "
        f"vLLM {fmt(pair.version)}'s NIXL handshake asserts"
        + (" (AssertionError at the first request, vllm#45330)." if certain else
           "; the fix (vllm#45879) is in 0.26.0, and whether this release has it was not read."),
        f"Use decode TP <= {heads} (the model's KV heads), equal TP on both roles, or a vLLM >= 0.26 engine image.",
        "error" if certain else "warning",
    )]
