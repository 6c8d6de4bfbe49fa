"""Heterogeneous tensor parallelism: which prefill/decode TP sizes vLLM can map onto each other."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, rule
from pdd_operator.compat.rules.heads import indivisible
from pdd_operator.vllm.kv_replication import KV_REPLICATED_AT_HEADS, kv_replicated, replicated_at_heads
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


#: The first release that maps a prefill TP above the decode's (vLLM PR #27274) and asserts instead that such a
#: larger-TP remote holds no replicated KV heads (``assert not (tp_ratio < 0 and is_kv_replicated(remote))``:
#: v1/nixl_connector.py 0.14.0 and 0.14.1 line 1693, 0.16.0 line 1750, 0.17.x line 1768, 0.18.x line 2034, 0.19.x
#: line 2086; 0.20.0 v1/nixl/worker.py lines 1406-1411). 0.9.2-0.13.0 refuse any prefill TP above the decode's
#: (``assert tp_ratio > 0, "Decode TP cannot be smaller than prefill TP"``: 0.9.2 line 743, 0.11.0 line 968, 0.13.0
#: line 1577; hetero-tp-p-gt-d-unsupported), so there TP == heads decides nothing of this assert.
REPLICATED_REMOTE_ASSERT_SINCE = (0, 14, 0)


def _remote_assert_at_heads(version: tuple[int, ...] | None) -> bool:
    """The larger-TP-remote assert of vLLM ``version`` fires at TP == KV heads: the assert exists
    (:data:`REPLICATED_REMOTE_ASSERT_SINCE`) and counts that TP as replicated
    (:func:`~pdd_operator.vllm.kv_replication.replicated_at_heads`: 0.9.2-0.19.1, so 0.14.0-0.19.1 here)."""
    return replicated_at_heads(version) and version is not None and version >= REPLICATED_REMOTE_ASSERT_SINCE


#: From 0.26.0 a push decode's handshake to its prefill is notif-only (``notif_agents_only=True`` in push_worker.py
#: ``_send_registration_to_p``, 0.26.0 base_worker.py lines 694-695, 0.34.0 lines 1315-1317), so it no longer
#: validates the prefill's KV layout; 0.24.0-0.25.1 ran the full ``add_remote_agent`` there (0.25.0 push_worker.py
#: lines 278-283, base_worker.py line 1517).
_PUSH_DECODE_NOTIF_ONLY_SINCE = (0, 26, 0)


def kv_heads_tp_failure(p: int, d: int, heads: int, push: bool, version: tuple[int, ...] | None) -> str | None:
    """Which NIXL handshake assert a prefill TP ``p`` / decode TP ``d`` pair of a model with ``heads`` KV heads
    (config.json ``num_key_value_heads``; not MLA, not hybrid SSM) hits, or ``None`` where none does.

    vLLM's ``_validate_remote_agent_handshake`` asserts ``not (tp_ratio < 0 and is_kv_replicated(remote))``: the
    engine that validates (the local one) has the smaller TP and the remote one holds replicated KV heads (0.14.0
    v1/nixl_connector.py lines 1692-1693; 0.20.0 v1/nixl/worker.py lines 1406-1411, not for Mamba; 0.21.0-0.23.0
    worker.py lines 1408-1414 and 0.24.0-0.34.0 nixl/base_worker.py, 0.24.0 lines 1613-1619, 0.28.0 lines 1725-1731,
    0.34.0 lines 2782-2788, not for MLA nor Mamba). Which engine validates which follows the transfer mode: in pull
    mode decode validates the prefill it reads (prefill TP > decode TP past the heads fails); in push mode prefill
    validates the decode it writes (decode TP > prefill TP past the heads fails), and on 0.24.0-0.25.1 the push decode
    also validates its prefill (:data:`_PUSH_DECODE_NOTIF_ONLY_SINCE`). "Past the heads" is TP >= heads on
    0.14.0-0.19.1 and TP > heads from 0.20.0 (:func:`_remote_assert_at_heads`). Before 0.14.0 a prefill TP above the
    decode's is refused whatever the heads (hetero-tp-p-gt-d-unsupported), so the pull reading holds there too.
    ``version`` ``None`` (unknown): only what fails on every release (TP > heads) is returned.
    Returns the text of the failure (which engine's handshake asserts), for the rule's message.
    """
    at_heads = _remote_assert_at_heads(version)

    def past(tp: int) -> bool:
        return tp > heads or (at_heads and tp == heads)
    if push:
        if d > p and past(d):
            return (f"decode TP {d} > prefill TP {p} with decode TP past the model's {heads} KV heads: in push mode the "
                    "prefill validates the decode it writes to and asserts that a larger remote TP holds no "
                    "replicated KV heads (AssertionError at the first request's handshake)")
        if p > d and past(p) and version is not None and version < _PUSH_DECODE_NOTIF_ONLY_SINCE:
            return (f"prefill TP {p} > decode TP {d} with prefill TP past the model's {heads} KV heads: vLLM "
                    f"{fmt(version)}'s push decode still validates its prefill in full at the handshake and asserts "
                    "that a larger remote TP holds no replicated KV heads (fixed in 0.26.0: notif-only handshake)")
        return None
    if p > d and past(p):
        return (f"prefill TP {p} > decode TP {d} with prefill TP {'at or above' if at_heads else 'above'} the model's "
                f"{heads} KV heads: prefill replicates KV heads and decode's handshake asserts that a larger remote "
                "TP holds no replicated heads (AssertionError at the first request)")
    return None


@rule(
    id="tp-exceeds-kv-heads", family="hetero-tp", severity="error",
    fields=("spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize", "spec.model.numKvHeads"),
    source=("vllm nixl _validate_remote_agent_handshake 'assert not (tp_ratio < 0 and is_kv_replicated(remote))': "
            "0.14.0 v1/nixl_connector.py l.1692-1693, 0.20.0 v1/nixl/worker.py l.1406-1411, 0.34.0 "
            "v1/nixl/base_worker.py l.2782-2788; is_kv_replicated kv_connector/utils.py (tp // heads >= 1 on "
            "0.14.0-0.19.1, tp > heads from 0.20.0); the validating engine per transfer mode (push_worker.py)"),
)
def check_tp_kv_heads(pair: PDPair) -> list[Violation]:
    """The larger-TP engine holds no replicated KV heads where the other validates it (pull: prefill, push: decode).

    The validating engine and the bound per release: :func:`kv_heads_tp_failure`."""
    if pair.tps is None or pair.mla or pair.hybrid_ssm or pair.num_kv_heads is None:
        return []
    p, d = pair.tps
    heads = pair.num_kv_heads
    why = kv_heads_tp_failure(p, d, heads, pair.push, pair.version)
    if why is None:
        larger = d if pair.push else p
        if pair.version is None and larger == heads and larger > (p if pair.push else d):
            return [(
                f"{'Decode' if pair.push else 'Prefill'} TP {larger} > {'prefill' if pair.push else 'decode'} TP "
                f"{p if pair.push else d} with the larger TP equal to the model's {heads} KV heads: vLLM "
                "0.14.0-0.19.1 count that engine's KV as replicated (tp_size // kv_heads >= 1) and the NIXL handshake "
                "asserts 'Num kv_heads > tp_size and P TP > D TP case, not supported'; from 0.20.0 only a TP above "
                "the KV heads counts. The release is not known here, so it decides.",
                f"Pin a vLLM >= 0.20 engine image on both roles, or use a TP below {heads} on the larger side.",
                "warning",
            )]
        return []
    bound = heads - 1 if _remote_assert_at_heads(pair.version) else heads
    if d > p:  # push: the prefill asserts on its decode
        fix = f"Use decode TP <= {bound} (or <= prefill TP), or pull mode (NixlConnector without transfer_mode push)."
    elif pair.push:
        fix = f"Use prefill TP <= {bound} or decode TP >= prefill TP, or a vLLM >= 0.26 engine image."
    else:
        fix = f"Use prefill TP <= {bound}, or decode TP >= prefill TP."
    return [(f"{why[0].upper()}{why[1:]}.", fix)]


@rule(
    id="tp-kv-heads-unknown", family="hetero-tp", severity="warning",
    fields=("spec.model.numKvHeads",),
    source="compat-rules.md section 9",
)
def check_tp_kv_heads_unknown(pair: PDPair) -> list[Violation]:
    """KV heads are known where they decide the pair (tp-exceeds-kv-heads, hetero-tp-kv-replicated).

    That is prefill TP > decode TP in pull mode (and in push mode before vLLM 0.26), decode TP > prefill TP in push
    mode, and decode TP > prefill TP before vLLM 0.24 (:func:`kv_heads_tp_failure`)."""
    if pair.tps is None or pair.mla or pair.hybrid_ssm or pair.num_kv_heads is not None:
        return []
    if pair.tps[0] == pair.tps[1] or (pair.model.architecture is None and pair.tps[0] < pair.tps[1]):
        return []
    p, d = pair.tps
    if pair.push and (d > p or (pair.version is not None and pair.version >= _PUSH_DECODE_NOTIF_ONLY_SINCE)):
        if d < p:
            return []  # a push decode's handshake to a larger-TP prefill validates nothing of its KV from 0.26.0
        return [(
            f"Decode TP {d} > prefill TP {p} in push mode is valid only while decode TP <= the model's KV heads (the "
            "prefill's handshake asserts that a larger remote TP holds no replicated heads: tp-exceeds-kv-heads); "
            "the KV heads are not given.",
            "Set spec.model.numKvHeads (config.json num_key_value_heads) so this can be checked.",
        )]
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
    until=REPLICATED_REMOTE_ASSERT_SINCE,
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
#: replicated (:mod:`pdd_operator.vllm.kv_replication`) and only block counts are compared, which pass; a prefill below the KV
#: heads asserts.
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
    replicated_case = pair.version >= KV_REPLICATED_AT_HEADS[0]
    if certain and replicated_case and kv_replicated(p, heads, pair.version):
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
