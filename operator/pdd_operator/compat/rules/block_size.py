"""Block sizes: which prefill/decode block sizes the NIXL transfer supports.

A role without ``--block-size`` is judged at the size vLLM's code gives it where the manifest pins it
(:func:`~pdd_operator.vllm.block_size.default_block_size`); where it depends on the GPU, the head size or the image's
AITER package, ``block-size-partial`` warns with the likely size and whether it would pair."""

from __future__ import annotations

from dataclasses import replace

from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import REGISTRY, Violation, fix_for, rule
from pdd_operator.vllm.block_size import JUDGED_RELEASES, LikelyBlockSize, default_block_size, likely_block_size
from pdd_operator.vllm.gaudi import HETERO_SINCE, hetero_saved_block_size
from pdd_operator.vllm.nixl_devices import nixl_device_type
from pdd_operator.vllm.versions import fmt, is_cpu_image

#: The fix of every rule here that needs equal block sizes, naming the PDDeployment fields to change; for a hand-written
#: manifest it reads "Set --block-size on the prefill and decode containers to the same value"
#: (:data:`~pdd_operator.compat.rules.base.MANIFEST_TERMS`).
SAME_BLOCK_SIZE = "Set spec.prefill.blockSize and spec.decode.blockSize to the same value"


def one_block_size(pair: PDPair, differ: str, one_sided: str) -> list[Violation]:
    """Findings of a connector that copies whole blocks and so needs one block size on both roles (vLLM's
    P2pNcclConnector, MoRIIOConnector; the NIXL rules judge heterogeneous sizes on their own).

    Sizes are ``--block-size`` where given, else vLLM's default where its code pins it (:func:`engine_block_sizes`).
    Two known sizes that differ: an error whose message is ``differ`` formatted with ``p`` and ``d`` (the prefill's and
    the decode's size); a size set on one role only whose other size is not pinned: a warning ending in ``one_sided``
    (what the connector needs); otherwise none. Returns ``[]``, or one finding tuple with the same-size fix."""
    p, d = engine_block_sizes(pair)
    fix = fix_for(pair, SAME_BLOCK_SIZE + ".", "Set --block-size to the same value on both engines.")
    if p is not None and d is not None:
        return [] if p == d else [(differ.format(p=p, d=d), fix)]
    if (pair.prefill.block_size is None) == (pair.decode.block_size is None):
        return []  # neither set and neither pinned: one image's default on both
    given = pair.prefill if pair.prefill.block_size is not None else pair.decode
    return [(f"--block-size is set on the {given.role} only ({given.block_size}) and the other engine's default is "
             f"not known here; {one_sided}", fix, "warning")]


def _default(pair: PDPair, role: RoleConfig) -> int | None:
    """The block size vLLM gives ``role`` when it sets none, where its code pins it
    (:func:`~pdd_operator.vllm.block_size.default_block_size`)."""
    return default_block_size(role.version, role.image, role.resources, pair.model.kv_family, role.env,
                              role.attention_backend, pair.model.head_size)


def _likely(pair: PDPair, role: RoleConfig) -> LikelyBlockSize:
    """The block size ``role`` most likely runs with when it sets none, and what else decides it
    (:func:`~pdd_operator.vllm.block_size.likely_block_size`)."""
    return likely_block_size(role.version, role.image, role.resources, pair.model.kv_family, role.env,
                             role.attention_backend, pair.model.head_size)


def engine_block_sizes(pair: PDPair) -> tuple[int | None, int | None]:
    """(prefill, decode) block sizes the engines run with: ``--block-size`` where given, else vLLM's default where
    its code pins it for that engine, else ``None``."""
    return tuple(r.block_size if r.block_size is not None else _default(pair, r) for r in pair.roles)


def _block_pair(pair: PDPair) -> tuple[int, int] | None:
    p, d = engine_block_sizes(pair)
    if p is None or d is None or p == d:
        return None
    return p, d


def _by_release(pair: PDPair, check) -> list[Violation] | None:
    """``check`` (a block-size rule below) judged on every release of
    :data:`~pdd_operator.vllm.block_size.JUDGED_RELEASES` for a pair where a role without ``--block-size`` runs an
    unknown vLLM version whose default block size the releases disagree on (16 up to 0.33, 64 from 0.34.0 on CUDA:
    ``CacheConfig.DEFAULT_BLOCK_SIZE``, vllm/config/cache.py): ``None`` where that is not so (``check`` judges the
    pair as it is). Else the newest refusing release's violations as errors where every release whose default is
    pinned refuses and none leaves it unpinned, as warnings where some releases refuse, ``[]`` where none does.
    """
    unset = [i for i, r in enumerate(pair.roles) if r.block_size is None and r.version is None]
    if not unset or any(_default(pair, pair.roles[i]) is not None for i in unset):
        return None
    found: dict = {}
    for v in JUDGED_RELEASES:
        at = replace(pair, prefill=replace(pair.prefill, version=pair.prefill.version or v),
                     decode=replace(pair.decode, version=pair.decode.version or v))
        found[v] = None if None in engine_block_sizes(at) else (check(at), {_default(at, at.roles[i]) for i in unset})
    refusing = [(v, got[0]) for v, got in found.items() if got is not None and got[0]]
    if not refusing:
        return []
    sizes = " or ".join(map(str, sorted(set().union(*(got[1] for got in found.values() if got is not None)))))
    roles = " and ".join(pair.roles[i].role for i in unset)
    certain = len(refusing) == len(found)
    which = ("every release refuses the pair" if certain else
             f"some releases refuse the pair ({fmt(refusing[0][0])} to {fmt(refusing[-1][0])} among them)")
    lead = (f"With the vLLM version unknown, the {roles}'s default block size depends on the release ({sizes}: 16 up "
            f"to 0.33 and 64 from 0.34.0 on CUDA, CacheConfig.DEFAULT_BLOCK_SIZE), and {which}: ")
    return [(lead + v[0], v[1], "error" if certain else "warning") for v in refusing[-1][1]]


def _said(pair: PDPair, bp: tuple[int, int]) -> str:
    """``prefill 16, decode 32``, with the size of a role that sets none marked as vLLM's default."""
    return ", ".join(f"{r.role} {size}" + ("" if r.block_size is not None else " (vLLM's default: no --block-size)")
                     for r, size in zip(pair.roles, bp, strict=True))


@rule(
    id="block-size-partial", family="block-size-mismatch", severity="warning",
    fields=("spec.prefill.blockSize", "spec.decode.blockSize"),
    source=("compat-rules.md section 9; the size vLLM picks for a role without --block-size, read per version in "
            "vllm/platforms (cuda.py, rocm.py, interface.py update_block_size_for_backend) and the attention "
            "backends' get_preferred_block_size (pdd_operator.vllm.block_size)"),
)
def check_block_partial(pair: PDPair) -> list[Violation]:
    """Block size is set on both roles or neither, or vLLM's default for the unset one is known."""
    p, d = pair.prefill, pair.decode
    if (p.block_size is None) == (d.block_size is None) or None not in engine_block_sizes(pair):
        return []
    given, unset = (p, d) if d.block_size is None else (d, p)
    likely = _likely(pair, unset)
    if likely.size is None:
        picks = "vLLM picks its size itself (the platform's or attention backend's default)"
    else:
        pair_ok = _pairs(pair, *((given.block_size, likely.size) if given is p else (likely.size, given.block_size)))
        picks = (f"{unset.role} most likely runs with {likely.size}, which "
                 f"{'pairs' if pair_ok else 'does not pair'} with {given.role}'s {given.block_size}; not certain: "
                 f"{likely.depends_on}")
    return [(f"--block-size is set on one role only ({given.role} {given.block_size}, {unset.role} not set); "
             f"{picks}.", "Set spec.prefill.blockSize and spec.decode.blockSize, equal unless you need them to differ.")]


def _pairs(pair: PDPair, p: int, d: int) -> bool:
    """Whether prefill block size ``p`` and decode block size ``d`` pass the block-size rules that apply to the
    pair's version and mode (the checks below, run on the pair with these sizes set)."""
    sized = replace(pair, prefill=replace(pair.prefill, block_size=p), decode=replace(pair.decode, block_size=d))
    checks = (check_block_equal_old, check_block_pull_direction, check_block_push_equal, check_block_tp_shrink,
              check_block_hma_old, check_block_host_buffer)
    rules = {r.check: r for r in REGISTRY}
    return not any(rules[c].applies_to(pair.version) and c(sized) for c in checks)


@rule(
    id="block-size-hetero-unsupported", family="block-size-mismatch", severity="error",
    fields=("spec.prefill.blockSize", "spec.decode.blockSize", "spec.engine"),
    source=("vllm v1/nixl_connector.py add_remote_agent: assert self.block_size == remote_block_size ('Remote P "
            "worker with different block size is not supported', 0.10.2; 'different page/block size', 0.11.0), read "
            "in the wheels; vllm#26759 (first in 0.11.1) maps block sizes through block_size_ratio; a role without "
            "--block-size runs the platform's default, 16 for a plain-attention model on CUDA/ROCm "
            "(vllm/platforms/cuda.py, rocm.py check_and_update_config; pdd_operator.vllm.block_size); 0.9.0 (sdist) "
            "asserts nothing but reads the prefill's blocks with the decode's block_len (add_remote_agent "
            "l.538-575)"),
    until=(0, 11, 1),
    example="prefill: {blockSize: 16}, decode: {blockSize: 32} on vLLM 0.11.0",
    needs=("--block-size",),
)
def check_block_equal_old(pair: PDPair) -> list[Violation]:
    """Before vLLM 0.11.1: equal block sizes."""
    bp = _block_pair(pair)
    if bp is None:
        return []
    if pair.version is not None and pair.version < _BLOCK_SIZE_IN_HANDSHAKE_SINCE:
        return [(f"vLLM {fmt(pair.version)} supports no different prefill and decode block sizes ({_said(pair, bp)}): "
                 "its NIXL handshake exchanges no block size and asserts none, and the decode reads the prefill's "
                 "blocks with its own block length (add_remote_agent), so each read takes another block's KV.",
                 f"{SAME_BLOCK_SIZE}, or run vLLM >= 0.11.1.")]
    return [(f"vLLM {fmt(pair.version)} supports no different prefill and decode block sizes ({_said(pair, bp)}): "
             f"decode's NIXL handshake asserts they are equal ('Remote P worker with different block size is "
             "not supported').",
             f"{SAME_BLOCK_SIZE}, or run vLLM >= 0.11.1.")]


#: The first release whose NIXL handshake carries the prefill's block length and asserts the block sizes equal
#: (v1/nixl_connector.py 0.9.1 add_remote_agent l.684-703); 0.9.0's NixlAgentMetadata has neither (l.47-55) and its
#: add_remote_agent registers the remote blocks with the decode's own block_len (l.538-575).
_BLOCK_SIZE_IN_HANDSHAKE_SINCE = (0, 9, 1)


@rule(
    id="block-size-direction", family="block-size-mismatch", severity="error",
    fields=("spec.prefill.blockSize", "spec.decode.blockSize"),
    source=("vllm TransferTopology.block_size_ratio (kv_connector/utils.py, 0.20+: assert "
            "local % remote == 0 on the decode); a role without --block-size is judged at the size vLLM pins for it "
            "(16 for a plain-attention model on CUDA before 0.29, pdd_operator.vllm.block_size); a vllm-gaudi prefill "
            "whose heterogeneous connector saves agreed_block_size blocks is a warning (vllm-gaudi d01a3ca "
            "hetero_hpu_nixl_connector.py if_postprocess_kvcache_on_save, pdd_operator.vllm.gaudi); vLLM docs/features/"
            "nixl_connector_compatibility.md footnote 3 (l.64 in 0.20.0, l.66 from 0.28.0); secondary: seed 000 "
            "footnote (c)"),
    example="prefill: {blockSize: 32}, decode: {blockSize: 16}",
    needs=("--block-size",),
)
def check_block_pull_direction(pair: PDPair) -> list[Violation]:
    """Pull: decode block size is a multiple of prefill's."""
    if (by_release := _by_release(pair, check_block_pull_direction)) is not None:
        return by_release
    bp = _block_pair(pair)
    if bp is None or pair.push or bp[1] % bp[0] == 0:
        return []
    saved = _gaudi_saved(pair.prefill)
    if saved is not None and bp[1] % saved == 0:
        return [(f"The decode block size is not a multiple of the prefill one ({_said(pair, bp)}), which upstream "
                 f"vLLM's pull path refuses, but the prefill runs vllm-gaudi's heterogeneous NIXL connector "
                 f"(VLLM_HPU_HETERO_KV_LAYOUT=true, enable_permute_local_kv, prefix caching off), which saves its "
                 f"KV in agreed_block_size {saved}-token blocks for the decode to read: that path is the plugin's "
                 f"code (vllm-gaudi v{fmt(HETERO_SINCE)} on), not checked here.",
                 f"Keep agreed_block_size at {saved} on both roles and a vllm-gaudi release with the heterogeneous "
                 f"connector (v{fmt(HETERO_SINCE)} or later), or use a decode block size that is a multiple of "
                 f"{bp[0]}.", "warning")]
    return [(f"Pull mode needs the decode block size to be a multiple of the prefill one ({_said(pair, bp)}); "
             f"otherwise every request fails at the first KV read.",
             f"{SAME_BLOCK_SIZE}, or spec.decode.blockSize to a multiple of {bp[0]}.")]


def _gaudi_saved(r: RoleConfig) -> int | None:
    """The block size a prefill saves its KV in through vllm-gaudi's heterogeneous connector
    (:func:`~pdd_operator.vllm.gaudi.hetero_saved_block_size`), for an engine not known to run an in-tree platform
    (:func:`~pdd_operator.vllm.nixl_devices.nixl_device_type` gives none: a Gaudi device or an unknown one; on a GPU
    the variable is inert and upstream's refusal stands); else ``None``."""
    if nixl_device_type(r.image, r.resources, r.env) is not None:
        return None
    return hetero_saved_block_size(r.env, r.kv_transfer, r.block_size, r.prefix_caching)


@rule(
    id="block-size-push-equal", family="block-size-mismatch", severity="error",
    fields=("spec.prefill.blockSize", "spec.decode.blockSize", "spec.kvTransfer.connector"),
    source=("vllm nixl/base_worker.py add_remote_agent: TransferTopology.block_size_ratio(remote) asserts local % "
            "remote == 0 (kv_connector/utils.py; facts section 4.3). Push: the prefill handshakes the decode before it "
            "writes (push_worker._do_start_push_kv), so P % D == 0; the decode handshakes the prefill to register "
            "(_send_registration_to_p), a full add_remote_agent in 0.24.0-0.26.0 (D % P == 0 there), notif-only "
            "from 0.27.0 (_add_notif_only_remote_agent), but from 0.27.0 the decode's get_finished / "
            "get_transfer_results still calls block_size_ratio(prefill's size) on every received request (D % P == 0 "
            "at the first completed push). Only equal sizes pass both; push_worker._xfer_blocks' block_size_ratio > "
            "1 branch is unreachable (read in 0.24.0-0.34.0)"),
    needs=("--block-size",),
)
def check_block_push_equal(pair: PDPair) -> list[Violation]:
    """Push: equal block sizes."""
    if (by_release := _by_release(pair, check_block_push_equal)) is not None:
        return by_release
    bp = _block_pair(pair)
    if bp is None or not pair.push:
        return []
    return [(f"NixlPushConnector needs equal block sizes ({_said(pair, bp)}).",
             f"{SAME_BLOCK_SIZE}.")]


@rule(
    id="block-size-tp-shrink", family="block-size-mismatch", severity="error",
    fields=("spec.prefill.blockSize", "spec.decode.blockSize", "spec.prefill.tensorParallelSize"),
    source="vllm nixl _validate_remote_agent_handshake (0.20-0.33)",
    needs=("--block-size",),
)
def check_block_tp_shrink(pair: PDPair) -> list[Violation]:
    """Prefill TP > decode TP: equal block sizes."""
    if (by_release := _by_release(pair, check_block_tp_shrink)) is not None:
        return by_release
    bp = _block_pair(pair)
    if bp is None or pair.tps is None or pair.tps[0] <= pair.tps[1] or pair.mla:
        return []
    return [(f"Prefill TP {pair.tps[0]} > decode TP {pair.tps[1]} needs equal block sizes ({_said(pair, bp)}).",
             f"{SAME_BLOCK_SIZE}.")]


@rule(
    id="block-size-hma", family="block-size-mismatch", severity="error",
    fields=("spec.prefill.blockSize", "spec.decode.blockSize", "spec.model.architecture"),
    source=("vllm nixl 'HMA does not support different remote block size yet' (0.18.0-0.26.x); vLLM docs/features/"
            "nixl_connector_compatibility.md footnote 6 (l.70 in 0.20.0-0.26.0); secondary: seed 000 footnote (f)"),
    until=(0, 27, 0),
    needs=("--block-size", "--disable-hybrid-kv-cache-manager"),
)
def check_block_hma_old(pair: PDPair) -> list[Violation]:
    """HMA models: equal block sizes before vLLM 0.27."""
    bp = _block_pair(pair)
    if bp is None or not pair.hma_required:
        return []
    return [(f"vLLM {fmt(pair.version)} does not support different block sizes with the hybrid KV cache manager "
             f"({_said(pair, bp)}): 'HMA does not support different remote block size yet'.",
             f"{SAME_BLOCK_SIZE}, or run vLLM >= 0.27.")]


@rule(
    id="block-size-host-buffer", family="block-size-mismatch", severity="error",
    fields=("spec.prefill.blockSize", "spec.decode.blockSize", "spec.kvTransfer.bufferDevice"),
    source=("vllm nixl/base_worker.py _validate_remote_agent_handshake: assert not self.use_host_buffer, "
            "'Heterogeneous block sizes are not supported with host buffer' (0.27.0+); use_host_buffer is "
            "kv_buffer_device == 'cpu' except on the CPU platform (device_type 'cpu': no host buffer), "
            "which docs/conformance.md block-size-accepted shows transferring"),
    since=(0, 27, 0),
    needs=("--block-size",),
)
def check_block_host_buffer(pair: PDPair) -> list[Violation]:
    """Host buffer (kv_buffer_device cpu on an accelerator): equal block sizes."""
    bp = _block_pair(pair)
    if bp is None or not any(r.buffer_device == "cpu" and not is_cpu_image(r.image) for r in pair.roles):
        return []
    return [(f"Different block sizes ({_said(pair, bp)}) are not supported with a host buffer "
             "(kv_buffer_device cpu).", f"{SAME_BLOCK_SIZE}.")]
