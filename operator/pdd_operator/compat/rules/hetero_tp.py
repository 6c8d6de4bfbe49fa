"""Heterogeneous tensor parallelism: which prefill/decode TP sizes vLLM can map onto each other."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, rule
from pdd_operator.compat.rules.heads import indivisible
from pdd_operator.vllm.versions import fmt


@rule(
    id="tp-divisibility", family="hetero-tp", severity="error",
    fields=("spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize"),
    source="vllm kv_connector/utils.py TransferTopology.tp_ratio (0.20-0.33)",
    example="prefill: {tensorParallelSize: 2}, decode: {tensorParallelSize: 3}",
)
def check_tp_divisible(pair: PDPair) -> list[Violation]:
    """One TP size is a multiple of the other."""
    if pair.tps is None or min(pair.tps) < 1:  # a size below 1 has no ranks to map: not judged here
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
    source=("vllm nixl _validate_remote_agent_handshake: assert not (tp_ratio < 0 and is_kv_replicated(remote)) "
            "('Num kv_heads > tp_size and P TP > D TP case, not supported'). is_kv_replicated is "
            "tp_size // total_num_kv_heads >= 1 in 0.9.2-0.19.1 (kv_connector/utils.py, 0.19.0 lines 456-462; the "
            "assert in v1/nixl_connector.py 0.14.0 line 1693, 0.19.0 line 2086) and remote_tp_size > "
            "total_num_kv_heads from 0.20.0 (0.20.0 utils.py line 598, nixl/worker.py line 1410; 0.26.0 utils.py "
            "lines 554-557, nixl/base_worker.py line 1695)"),
    example="prefill TP 8 > decode TP 4 with an 8-KV-head model (Llama-3.3-70B) on vLLM 0.19",
)
def check_tp_kv_heads(pair: PDPair) -> list[Violation]:
    """Prefill TP > decode TP only while vLLM does not count the prefill's KV as replicated: prefill TP < KV heads
    on vLLM 0.9.2-0.19.1 (a prefill at exactly the KV heads counts as replicated there), prefill TP <= KV heads
    from 0.20.0. A prefill at the KV heads on an unknown release is a warning (it depends on the release)."""
    if pair.tps is None or pair.mla or pair.hybrid_ssm or pair.num_kv_heads is None:
        return []
    p, d = pair.tps
    heads = pair.num_kv_heads
    if p <= d or p < heads:
        return []
    if p == heads:
        if pair.version is not None and not _GQA_REPLICATED_AT_HEADS[0] <= pair.version < _GQA_REPLICATED_AT_HEADS[1]:
            return []  # 0.20.0 on: a prefill at the KV heads holds one head per rank, not replicated
        known = pair.version is not None
        return [(
            f"Prefill TP {p} > decode TP {d} with prefill TP equal to the model's {heads} KV heads: "
            + (f"vLLM {fmt(pair.version)}" if known else "vLLM 0.9.2-0.19.1")
            + " counts the prefill's KV as replicated (tp_size // kv_heads >= 1) and its NIXL handshake asserts "
            "'Num kv_heads > tp_size and P TP > D TP case, not supported'"
            + (" (AssertionError at the first request)." if known else
               "; from 0.20.0 only a prefill above the KV heads counts as replicated, and the release is not known."),
            f"Use prefill TP < {heads} or decode TP >= prefill TP, or a vLLM >= 0.20 engine image on both roles.",
            "error" if known else "warning",
        )]
    return [(
        f"Prefill TP {p} > decode TP {d} needs prefill TP <= the model's {heads} KV heads; beyond that "
        "prefill replicates KV heads and decode cannot read them (assert at the first request).",
        f"Use prefill TP <= {heads}, or decode TP >= prefill TP.",
    )]


@rule(
    id="tp-kv-heads-unknown", family="hetero-tp", severity="warning",
    fields=("spec.model.numKvHeads",),
    source="compat-rules.md section 9",
)
def check_tp_kv_heads_unknown(pair: PDPair) -> list[Violation]:
    """KV heads are known when prefill TP > decode TP, or decode TP > prefill TP before vLLM 0.24."""
    if pair.tps is None or pair.mla or pair.hybrid_ssm or pair.num_kv_heads is not None:
        return []
    if pair.tps[0] == pair.tps[1] or (pair.model.architecture is None and pair.tps[0] < pair.tps[1]):
        return []
    p, d = pair.tps
    if d > p:
        if d % p or pair.version is None or not _LINEAR_ASSERT_SINCE <= pair.version < _GQA_CHECK_KNOWN_BAD[1]:
            return []
        return [(  # set 26 (vllm#19691): hetero-tp-kv-replicated cannot be judged without the heads
            f"Decode TP {d} > prefill TP {p}: vLLM {fmt(pair.version)}'s NIXL handshake asserts prefill's KV block is "
            f"{d // p}x decode's, which fails once decode TP exceeds the model's KV heads (decode then holds "
            "replicated heads: hetero-tp-kv-replicated); the KV heads are not given.",
            "Set spec.model.numKvHeads (config.json num_key_value_heads) so this can be checked.",
        )]
    unknown = (" (nor is the model's architecture: an MLA model, whose latent KV every rank holds whole, has no such "
               "bound)") if pair.model.architecture is None else ""
    return [(
        f"Prefill TP {pair.tps[0]} > decode TP {pair.tps[1]} is valid only while prefill TP <= the model's KV heads, "
        f"which are not given{unknown}.",
        "Set spec.model.numKvHeads (config.json num_key_value_heads) so this can be checked.",
    )]


@rule(
    id="hetero-tp-p-gt-d-unsupported", family="hetero-tp-unsupported-for-version", severity="error",
    fields=("spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize", "spec.engine"),
    source=("vllm v1/nixl_connector.py _validate_remote_agent_handshake: assert tp_ratio > 0, 'Decode TP cannot be "
            "smaller than prefill TP' (read in the 0.11.0, 0.11.1, 0.12.0 and 0.13.0 wheels); 0.14.0 maps P TP > D TP "
            "(tp_ratio < 0 branches, vLLM PR #27274)"),
    until=(0, 14, 0),
)
def check_p_gt_d_version(pair: PDPair) -> list[Violation]:
    """Prefill TP > decode TP needs a vLLM that supports it."""
    if pair.tps is None or pair.tps[0] <= pair.tps[1]:
        return []
    return [(
        f"Prefill TP {pair.tps[0]} > decode TP {pair.tps[1]} is not supported by vLLM {fmt(pair.version)}: the NIXL "
        "handshake asserts 'Decode TP cannot be smaller than prefill TP' (supported from 0.14.0).",
        "Use decode TP >= prefill TP, or a vLLM >= 0.14 engine image.",
    )]


#: vLLM releases whose handshake block_len check ignores GQA replication and treats a prefill at TP ==
#: KV heads as unreplicated (``is_kv_replicated``: ``remote_tp_size > total_num_kv_heads``; a prefill above
#: the KV heads is replicated, and its block lengths, compared as equal, are): read in the
#: 0.20.0, 0.21.0, 0.22.0 and 0.23.0 wheels (nixl/worker.py); the per-rank head ratio of the fix
#: (vllm#45879) is in 0.24.0's nixl/base_worker.py.
_GQA_CHECK_KNOWN_BAD = ((0, 20, 0), (0, 24, 0))
#: 0.9.2-0.19.1 (v1/nixl_connector.py, read in the 0.9.2, 0.10.0 and 0.14.0-0.19.1 wheels and the 0.10.1.1, 0.11.0,
#: 0.11.1, 0.12.0 and 0.13.0 sdists): the same linear assert, but a prefill whose TP reaches the KV heads counts as
#: replicated (``tp_size // total_num_kv_heads >= 1``, vllm#19691) and only block counts are compared, which pass; a
#: prefill below the KV heads asserts.
_GQA_REPLICATED_AT_HEADS = ((0, 9, 2), (0, 20, 0))
#: 0.9.1's add_remote_agent (read in the wheel) asserts ``block_len == self.block_len * tp_ratio`` with no replicated
#: case at all (vllm#19691 added it in 0.9.2): every decode past the KV heads asserts. 0.9.0 has no block-length
#: assert (read in its wheel): a warning there.
_LINEAR_ASSERT_SINCE = (0, 9, 1)


@rule(
    id="hetero-tp-kv-replicated", family="hetero-tp", severity="error",
    fields=("spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize", "spec.model.numKvHeads"),
    source="vllm nixl _validate_remote_agent_handshake: 'Remote P worker KV layer cache must be of shape "
    "[2, N, local_kv_heads*tp_ratio, page_size, head_dim]' asserts remote block_len == local * tp_ratio, but GQA "
    "replication caps heads per rank at max(1, kv_heads // tp) (vllm#45330, seen on 0.21.0). Read in the wheels: "
    "0.20.0-0.23.0 nixl/worker.py assert unless prefill TP > KV heads; 0.9.2-0.19.1 v1/nixl_connector.py assert "
    "unless prefill TP >= KV heads (vllm#19691); 0.9.1 asserts always; 0.24.0 nixl/base_worker.py compares per-rank "
    "heads (vllm#45879). A warning on 0.9.0 (no block-length assert)",
    until=(0, 24, 0),
    example="decode TP 16 > prefill TP 8 with an 8-KV-head model on vLLM 0.21",
)
def check_tp_kv_replicated(pair: PDPair) -> list[Violation]:
    """Decode TP > prefill TP past the KV heads (GQA replication) needs the handshake fix of vLLM 0.26."""
    if pair.tps is None or pair.mla or pair.hybrid_ssm or pair.num_kv_heads is None or pair.version is None:
        return []
    p, d = pair.tps
    heads = pair.num_kv_heads
    if d <= p or d % p:
        return []  # equal TP, P > D, or a TP ratio that is not an integer: tp-divisibility and other rules
    if indivisible(p, None, heads, False) or indivisible(d, None, heads, False):
        return []  # an engine that cannot shard the KV heads never starts: tp-heads-indivisible
    if max(1, heads // p) * p == max(1, heads // d) * d:
        return []  # equal TP, P > D (other rules), or no capping: per-rank heads scale with the TP ratio
    certain = pair.version >= _LINEAR_ASSERT_SINCE
    replicated_case = pair.version >= _GQA_REPLICATED_AT_HEADS[0]
    at_heads = _GQA_REPLICATED_AT_HEADS[0] <= pair.version < _GQA_REPLICATED_AT_HEADS[1]
    if certain and replicated_case and (p > heads or (at_heads and p == heads)):
        return []  # vLLM counts the prefill as replicated: it compares block lengths as equal, which they are
    return [(
        f"Decode TP {d} > prefill TP {p} with {heads} KV heads: decode holds {max(1, heads // d)} KV head(s) per rank "
        f"(replicated), prefill {max(1, heads // p)}, so the block lengths do not differ by the TP ratio {d // p} that "
        f"vLLM {fmt(pair.version)}'s NIXL handshake asserts"
        + (" (AssertionError at the first request, vllm#45330)." if certain else
           "; the fix (vllm#45879) is in 0.24.0, and this release's handshake has no block-length assert (0.9.0)."),
        f"Use decode TP <= {heads} (the model's KV heads), equal TP on both roles, or a vLLM >= 0.24 engine image.",
        "error" if certain else "warning",
    )]
