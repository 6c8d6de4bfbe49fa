"""What vLLM accepts inside its JSON-valued config flags: the fields of the config classes they build, by release.

Two flags are read here:

- ``--attention-config`` (``-ac``): ``EngineArgs.__post_init__`` builds ``AttentionConfig(**attention_config)``
  (``vllm/engine/arg_utils.py``; the CLI type is ``TypeAdapter(AttentionConfig).validate_json``).
  ``AttentionConfig`` (``vllm/config/attention.py``) is a pydantic dataclass; from 0.16.0 every ``@config`` class
  forbids extra fields (``vllm/config/utils.py`` ``config()``: ``ConfigDict(extra="forbid")``). Up to 0.14.x
  ``config`` only marks the class and pydantic's default (``extra="ignore"``) drops unknown keys silently (a
  pydantic 2 dataclass built with an unknown keyword keeps only its own fields). 0.15.x was not read.
- ``--compilation-config``'s ``pass_config`` object: ``CompilationConfig`` builds ``PassConfig(**pass_config)``
  (``__post_init__`` in 0.10-0.11, ``validate_pass_config_before`` from 0.12.0; ``vllm/config/compilation.py``).
  ``PassConfig`` forbids extra fields from 0.13.0 (``@dataclass(config=ConfigDict(extra="forbid"))`` in 0.13.0 and
  0.14.x, ``@config`` from 0.16.0); up to 0.12.0 unknown keys are dropped.

A key the release does not define then raises a ``ValidationError`` ("Unexpected keyword argument") while the engine
arguments are read: the server never starts. Each table lists every field with the first and the last release read
that has it (:class:`FieldTable`); no field left a gap between the two. A removed field leaves no trace in the
release that dropped it (no alias or "before" validator mentions it, read in the trees of the release after).
"""

from __future__ import annotations

from dataclasses import dataclass

from pdd_operator.vllm.versions import Version, fmt


@dataclass(frozen=True)
class FieldTable:
    """The fields of one vLLM config class across the releases read.

    Attributes:
        name: where the keys go (``AttentionConfig``; ``pass_config`` of ``--compilation-config``), for messages.
        read: the releases read, oldest first.
        fields: field -> (first release read with it, last release read with it).
        forbids_extra_since: the first release read that refuses an unknown key.
        ignores_extra_until: the newest release read that drops unknown keys.
    """

    name: str
    read: tuple[Version, ...]
    fields: dict[str, tuple[Version, Version]]
    forbids_extra_since: Version
    ignores_extra_until: Version

    def has(self, key: str, release: Version) -> bool:
        span = self.fields.get(key)
        return span is not None and span[0] <= release <= span[1]

    def refuses(self, key: str, release: Version) -> bool:
        return release >= self.forbids_extra_since and not self.has(key, release)

    def history(self, key: str) -> str:
        """Which releases read have ``key``, in words."""
        first_read, last_read = self.read[0], self.read[-1]
        span = self.fields.get(key)
        if span is None:
            return f"no {self.name} read ({fmt(first_read)} to {fmt(last_read)}) has it"
        first, last = span
        have = (f"{self.name} has it from {fmt(first)}" if first > first_read
                else f"{self.name} has it in {fmt(first_read)}")
        if last < last_read:
            return f"{have} to {fmt(last)}; {fmt(self.read[self.read.index(last) + 1])} removed it"
        if first > first_read:
            return f"{have}, not in {fmt(self.read[self.read.index(first) - 1])}"
        return have


_A_FIRST, _A_LAST = (0, 13, 0), (0, 34, 0)

#: ``AttentionConfig`` (``class AttentionConfig`` in vllm/config/attention.py read in every release from 0.13.0 to
#: 0.34.0 but 0.15.x, patch releases included: 0.17.1, 0.18.1, 0.19.0, 0.20.1, 0.20.2, 0.22.1, 0.25.1 and 0.27.1 hold
#: the fields of the minor release before them; the flag is absent in 0.12.0's parser). A patch release left unread
#: between two releases that disagree is judged by both (a warning), so every release there is a sdist of is read.
ATTENTION_CONFIG = FieldTable(
    name="AttentionConfig",
    read=((0, 13, 0), (0, 14, 0), (0, 14, 1), (0, 16, 0), (0, 17, 0), (0, 17, 1), (0, 18, 0), (0, 18, 1),
          (0, 19, 0), (0, 19, 1), (0, 20, 0), (0, 20, 1), (0, 20, 2), (0, 21, 0), (0, 22, 0), (0, 22, 1),
          (0, 23, 0), (0, 24, 0), (0, 25, 0), (0, 25, 1), (0, 26, 0), (0, 27, 0), (0, 27, 1), (0, 28, 0),
          (0, 29, 0), (0, 30, 0), (0, 31, 0), (0, 32, 0), (0, 33, 0), (0, 34, 0)),
    fields={
        **{name: (_A_FIRST, _A_LAST) for name in (
            "backend", "flash_attn_version", "flash_attn_max_num_splits_for_cuda_graph", "use_trtllm_attention",
            "disable_flashinfer_q_quantization")},
        "use_trtllm_ragged_deepseek_prefill": (_A_FIRST, (0, 21, 0)),
        "disable_flashinfer_prefill": (_A_FIRST, (0, 21, 0)),
        "use_cudnn_prefill": (_A_FIRST, (0, 21, 0)),
        "use_prefill_decode_attention": (_A_FIRST, (0, 28, 0)),
        "use_prefill_query_quantization": ((0, 17, 0), _A_LAST),
        "tq_max_kv_splits_for_cuda_graph": ((0, 20, 0), _A_LAST),
        "use_fp4_indexer_cache": ((0, 20, 0), (0, 29, 0)),
        "mla_prefill_backend": ((0, 21, 0), _A_LAST),
        "use_non_causal": ((0, 21, 0), _A_LAST),
        **{name: ((0, 22, 0), _A_LAST) for name in (
            "flex_attn_block_m", "flex_attn_block_n", "flex_attn_q_block_size", "flex_attn_kv_block_size")},
        "indexer_kv_dtype": ((0, 24, 0), _A_LAST),
        "backend_per_kind": ((0, 26, 0), _A_LAST),
        "sparse_mla_force_mqa": ((0, 26, 0), _A_LAST),
        "minimax_m3_msa_decode_backend": ((0, 27, 0), _A_LAST),
        "hisparse_config": ((0, 30, 0), _A_LAST),
        "indexer_sparse_logits": ((0, 31, 0), _A_LAST),
        "tokenspeed_mla_min_split_kv": ((0, 32, 0), _A_LAST),
        "sparse_mla_prefill_workspace_factor": ((0, 32, 0), _A_LAST),
        "trtllm_ragged_backend": ((0, 33, 0), _A_LAST),
        "indexer_tp_shard_min_rows": ((0, 33, 0), _A_LAST),
        "minimax_m3_indexer_cp": ((0, 33, 0), _A_LAST),
        **{name: ((0, 34, 0), _A_LAST) for name in (
            "indexer_decode_cp", "indexer_logits_dtype", "sparse_mla_shard_q", "sparse_mla_shard_q_min_tokens")},
    },
    forbids_extra_since=(0, 16, 0),
    ignores_extra_until=(0, 14, 1),
)

_P_FIRST, _P_LAST = (0, 10, 1, 1), (0, 34, 0)

#: ``PassConfig`` (``class PassConfig`` in vllm/config/compilation.py read in 0.10.1.1, 0.10.2, 0.11.0, 0.11.1,
#: 0.11.2, 0.12.0 and the releases of :data:`ATTENTION_CONFIG`). 0.12.0 holds the old ``enable_*`` names next
#: to the ``fuse_*`` ones that replaced them; 0.13.0 dropped the old names (and refuses them).
PASS_CONFIG = FieldTable(
    name="PassConfig",
    read=((0, 10, 1, 1), (0, 10, 2), (0, 11, 0), (0, 11, 1), (0, 11, 2), (0, 12, 0), *ATTENTION_CONFIG.read),
    fields={
        **{name: (_P_FIRST, (0, 12, 0)) for name in (
            "enable_fusion", "enable_attn_fusion", "enable_noop", "enable_sequence_parallelism", "enable_async_tp",
            "enable_fi_allreduce_fusion")},
        "fi_allreduce_fusion_max_token_num": (_P_FIRST, (0, 11, 0)),
        "fi_allreduce_fusion_max_size_mb": ((0, 11, 1), _P_LAST),
        "enable_qk_norm_rope_fusion": ((0, 11, 1), _P_LAST),
        **{name: ((0, 12, 0), _P_LAST) for name in (
            "fuse_norm_quant", "fuse_act_quant", "fuse_attn_quant", "eliminate_noops", "fuse_allreduce_rms")},
        "enable_sp": ((0, 12, 0), (0, 31, 0)),
        "fuse_gemm_comms": ((0, 12, 0), (0, 31, 0)),
        "fuse_act_padding": ((0, 16, 0), _P_LAST),
        "fuse_rope_kvcache": ((0, 17, 0), _P_LAST),
        "rope_kvcache_fusion_max_token_num": ((0, 17, 0), _P_LAST),
        "sp_min_token_num": ((0, 17, 0), (0, 31, 0)),
        "fuse_minimax_qk_norm": ((0, 19, 1), (0, 23, 0)),
        "fuse_mla_dual_rms_norm": ((0, 20, 0), _P_LAST),
        "fuse_rope_kvcache_cat_mla": ((0, 22, 0), _P_LAST),
        "fuse_qk_norm_rope_kvcache": ((0, 26, 0), _P_LAST),
    },
    forbids_extra_since=(0, 13, 0),
    ignores_extra_until=(0, 12, 0),
)


@dataclass(frozen=True)
class FieldRefusal:
    """One key a release refuses.

    Attributes:
        key: the key as written.
        certain: the release refuses it by what was read (an error); ``False``: only some of the releases it may be
            refuse it (a warning).
        why: the releases read with and without the key, for the message.
    """

    key: str
    certain: bool
    why: str


def refusals(table: FieldTable, config: object, version: Version | None) -> list[FieldRefusal]:
    """The keys of one parsed JSON object (``config``) that vLLM ``version`` refuses for ``table``'s class, in
    written order; ``[]`` when none or ``config`` is no object.

    A known version between two releases read is judged by both: refused by both (or by the release read itself) is
    certain; by one only, a warning. Up to :attr:`FieldTable.ignores_extra_until` nothing is refused; after the newest
    release read, a removed field is taken as still removed (certain) and a field no release read has as possibly
    added (a warning). An unknown version (``None``): a warning for a key the newest release read refuses, nothing
    for one it has."""
    if not isinstance(config, dict):
        return []
    newest = table.read[-1]
    out: list[FieldRefusal] = []
    for key in map(str, config):
        if version is None:
            if table.refuses(key, newest):
                out.append(FieldRefusal(key, False, table.history(key)))
            continue
        if version <= table.ignores_extra_until:
            continue
        if version > newest:
            if table.refuses(key, newest):
                out.append(FieldRefusal(key, key in table.fields, table.history(key)))
            continue
        lower = max(r for r in table.read if r <= version)
        upper = min(r for r in table.read if r >= version)
        verdicts = {table.refuses(key, lower), table.refuses(key, upper)}
        if verdicts == {True}:
            out.append(FieldRefusal(key, True, table.history(key)))
        elif True in verdicts:
            out.append(FieldRefusal(key, False, table.history(key)))
    return out
