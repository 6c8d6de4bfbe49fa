"""What vLLM accepts inside ``--attention-config``: the fields of its ``AttentionConfig``, by release.

``--attention-config`` (``-ac``) takes a JSON object that ``EngineArgs.__post_init__`` turns into
``AttentionConfig(**attention_config)`` (``vllm/engine/arg_utils.py``; the CLI type is
``TypeAdapter(AttentionConfig).validate_json``). ``AttentionConfig`` (``vllm/config/attention.py``) is a pydantic
dataclass, and from 0.16.0 every ``@config`` class forbids extra fields (``vllm/config/utils.py``
``config()``: ``ConfigDict(extra="forbid")``), so a key the release does not define raises a ``ValidationError``
("Unexpected keyword argument") while the engine arguments are read: the server never starts. Up to 0.14.x
``config`` only marks the class and pydantic's default (``extra="ignore"``) drops unknown keys silently
(checked: a pydantic 2 dataclass built with an unknown keyword keeps only its own fields). 0.15.x was not read.

The fields below were read from ``class AttentionConfig`` in the sdists/wheels of 0.13.0, 0.14.0, 0.14.1, 0.16.0,
0.17.0, 0.18.0, 0.19.1, 0.20.0, 0.21.0, 0.22.0, 0.23.0, 0.24.0, 0.25.0 and 0.26.0 to 0.34.0 (:data:`READ`); no
field left a gap between the first and the last release read with it. A removed field leaves no trace in the
release that dropped it (no alias or "before" validator mentions it: ``use_trtllm_ragged_deepseek_prefill``,
``disable_flashinfer_prefill`` and ``use_cudnn_prefill`` in the 0.22.0 tree, ``use_prefill_decode_attention`` in
0.29.0, ``use_fp4_indexer_cache`` in 0.30.0).
"""

from __future__ import annotations

from dataclasses import dataclass

from pdd_operator.vllm.versions import Version, fmt

#: The releases whose ``AttentionConfig`` was read, oldest first.
READ: tuple[Version, ...] = (
    (0, 13, 0), (0, 14, 0), (0, 14, 1), (0, 16, 0), (0, 17, 0), (0, 18, 0), (0, 19, 1), (0, 20, 0), (0, 21, 0),
    (0, 22, 0), (0, 23, 0), (0, 24, 0), (0, 25, 0), (0, 26, 0), (0, 27, 0), (0, 28, 0), (0, 29, 0), (0, 30, 0),
    (0, 31, 0), (0, 32, 0), (0, 33, 0), (0, 34, 0),
)
#: The first release read whose ``@config`` classes forbid extra fields (0.14.1 read without; 0.15.x not read).
FORBIDS_EXTRA_SINCE: Version = (0, 16, 0)
#: The newest release read that ignores unknown keys.
IGNORES_EXTRA_UNTIL: Version = (0, 14, 1)

_FIRST, _LAST = READ[0], READ[-1]

#: Field -> (first release read with it, last release read with it). Fields of every release read are
#: listed too, so that a key missing here is one no release read defines.
FIELDS: dict[str, tuple[Version, Version]] = {
    **{name: (_FIRST, _LAST) for name in (
        "backend", "flash_attn_version", "flash_attn_max_num_splits_for_cuda_graph", "use_trtllm_attention",
        "disable_flashinfer_q_quantization")},
    "use_trtllm_ragged_deepseek_prefill": (_FIRST, (0, 21, 0)),
    "disable_flashinfer_prefill": (_FIRST, (0, 21, 0)),
    "use_cudnn_prefill": (_FIRST, (0, 21, 0)),
    "use_prefill_decode_attention": (_FIRST, (0, 28, 0)),
    "use_prefill_query_quantization": ((0, 17, 0), _LAST),
    "tq_max_kv_splits_for_cuda_graph": ((0, 20, 0), _LAST),
    "use_fp4_indexer_cache": ((0, 20, 0), (0, 29, 0)),
    "mla_prefill_backend": ((0, 21, 0), _LAST),
    "use_non_causal": ((0, 21, 0), _LAST),
    **{name: ((0, 22, 0), _LAST) for name in (
        "flex_attn_block_m", "flex_attn_block_n", "flex_attn_q_block_size", "flex_attn_kv_block_size")},
    "indexer_kv_dtype": ((0, 24, 0), _LAST),
    "backend_per_kind": ((0, 26, 0), _LAST),
    "sparse_mla_force_mqa": ((0, 26, 0), _LAST),
    "minimax_m3_msa_decode_backend": ((0, 27, 0), _LAST),
    "hisparse_config": ((0, 30, 0), _LAST),
    "indexer_sparse_logits": ((0, 31, 0), _LAST),
    "tokenspeed_mla_min_split_kv": ((0, 32, 0), _LAST),
    "sparse_mla_prefill_workspace_factor": ((0, 32, 0), _LAST),
    "trtllm_ragged_backend": ((0, 33, 0), _LAST),
    "indexer_tp_shard_min_rows": ((0, 33, 0), _LAST),
    "minimax_m3_indexer_cp": ((0, 33, 0), _LAST),
    **{name: ((0, 34, 0), _LAST) for name in (
        "indexer_decode_cp", "indexer_logits_dtype", "sparse_mla_shard_q", "sparse_mla_shard_q_min_tokens")},
}


@dataclass(frozen=True)
class FieldRefusal:
    """One ``--attention-config`` key a release refuses.

    Attributes:
        key: the key as written.
        certain: the release refuses it by what was read (an error); ``False``: only some of the releases it may be
            refuse it (a warning).
        why: the releases read with and without the key, for the message.
    """

    key: str
    certain: bool
    why: str


def _has(key: str, release: Version) -> bool:
    span = FIELDS.get(key)
    return span is not None and span[0] <= release <= span[1]


def _refuses(key: str, release: Version) -> bool:
    return release >= FORBIDS_EXTRA_SINCE and not _has(key, release)


def _history(key: str) -> str:
    span = FIELDS.get(key)
    if span is None:
        return f"no AttentionConfig read ({fmt(_FIRST)} to {fmt(_LAST)}) has it"
    first, last = span
    have = f"AttentionConfig has it from {fmt(first)}" if first > _FIRST else f"AttentionConfig has it in {fmt(_FIRST)}"
    if last < _LAST:
        after = READ[READ.index(last) + 1]
        return f"{have} to {fmt(last)}; {fmt(after)} removed it"
    if first > _FIRST:
        before = READ[READ.index(first) - 1]
        return f"{have}, not in {fmt(before)}"
    return have


def refusals(config: dict, version: Version | None) -> list[FieldRefusal]:
    """The keys of one parsed ``--attention-config`` object that vLLM ``version`` refuses, in written order; ``[]``
    when none or ``config`` is no object.

    A known version between two releases read is judged by both: refused by both (or by the release read itself) is
    certain; by one only, a warning. Before :data:`IGNORES_EXTRA_UNTIL` nothing is refused; after the newest release
    read, a removed field is taken as still removed (certain) and a field no release read has as possibly added
    (a warning). An unknown version (``None``): a warning for a key that recent releases refuse (removed, or never
    read), nothing for a key the newest release read has."""
    if not isinstance(config, dict):
        return []
    out: list[FieldRefusal] = []
    for key in config:
        key = str(key)
        if version is None:
            if _refuses(key, _LAST):
                out.append(FieldRefusal(key, False, _history(key)))
            continue
        if version <= IGNORES_EXTRA_UNTIL:
            continue
        if version > _LAST:
            if _refuses(key, _LAST):
                out.append(FieldRefusal(key, key in FIELDS, _history(key)))
            continue
        lower = max(r for r in READ if r <= version)
        upper = min(r for r in READ if r >= version)
        verdicts = {_refuses(key, lower), _refuses(key, upper)}
        if verdicts == {True}:
            out.append(FieldRefusal(key, True, _history(key)))
        elif True in verdicts:
            out.append(FieldRefusal(key, False, _history(key)))
    return out
