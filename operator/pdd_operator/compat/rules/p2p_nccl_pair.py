"""What a pair of vLLM ``P2pNcclConnector`` engines must agree on for the KV cache to reach the decode.

P2pNcclConnector (kv_connector/v1/p2p, 0.9.2-0.23.x) has no handshake or compatibility hash: each prefill worker
sends every attention layer's blocks of a request to the decode worker of its own rank (``kv_port + rank``, parsed
from the request id the proxy builds) over NCCL, keyed ``request_id + "#" + layer name``; the decode worker waits
for that key (PUT, PUT_ASYNC) or asks the prefill for it (GET), and copies the tensor into its own blocks after
``check_tensors_except_dim`` compared the shapes. So the roles must agree on the request id, the worker ranks, the
send type and the KV tensor's shape and dtype; the NIXL rules (handshake hash, side channel, block mapping) do not
apply (``Rule.p2p_nccl``, ``compat.engine``).

Read and left without a rule: ``nccl_num_channels`` (each engine sets NCCL_MAX/MIN_NCHANNELS for its own
communicator init only, p2p_nccl_engine.py 0.21.0 lines 38-58, 223 and 382; vLLM compares nothing, and no failure
from two counts was found in its code); the decode's ``kv_buffer_size`` (a pushed tensor over it goes to the
pinned TensorMemoryPool, 0.21.0 lines 404-411); ports (``p2p-nccl-kv-port-conflict``, ``p2p-nccl-http-port-missing``
in :mod:`~pdd_operator.compat.rules.p2p_nccl`, ``pod-port-conflict``).

Lines cited are of ``vllm/distributed/kv_transfer/kv_connector/v1/p2p/`` in the sdists named; 0.15.x's sdists
were not read (see :data:`REQUEST_ID_OPT_OUT_SINCE`).
"""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.compat.rules.block_size import engine_block_sizes, one_block_size
from pdd_operator.compat.rules.p2p_nccl import P2P_NCCL_SINCE, P2P_NCCL_UNTIL
from pdd_operator.vllm.dtype import dtype_name
from pdd_operator.vllm.versions import Version, fmt

P2P_NCCL = "P2pNcclConnector"

#: From 0.14.0 ``InputProcessor.assign_request_id`` replaces each request id with ``<id>-<8 random characters>``
#: in every engine on its own (vllm#27987; v1/engine/input_processor.py 0.14.0 lines 433-444, 0.16.0 lines
#: 508-519), called by ``AsyncLLM.add_request`` for each request.
REQUEST_ID_RANDOMIZED_SINCE: Version = (0, 14, 0)
#: ``VLLM_DISABLE_REQUEST_ID_RANDOMIZATION`` (envs.py 0.17.0 lines 176 and 1270, ``bool(int(value))``) keeps the
#: external id (input_processor.py 0.17.0 lines 195-213, 0.21.0 lines 215-235, 0.23.0 lines 223-243); vllm#34415,
#: merged 2026-02-12. Not in 0.14.0, 0.14.1 or 0.16.0's envs.py (0.15.x, released between 0.14.1 and 0.16.0 and
#: before that merge, is read as they are).
REQUEST_ID_OPT_OUT_SINCE: Version = (0, 17, 0)
REQUEST_ID_ENV = "VLLM_DISABLE_REQUEST_ID_RANDOMIZATION"


def p2p_nccl_unjudged(pair: PDPair) -> str | None:
    """``None`` where both roles name ``P2pNcclConnector`` (no wrapper, vLLM's own class: no
    ``kv_connector_module_path`` outside vLLM) on known releases that ship it (0.9.2-0.23.x,
    :data:`~pdd_operator.compat.rules.p2p_nccl.P2P_NCCL_SINCE` .. ``P2P_NCCL_UNTIL``), or run from a host install
    that pins no release (a shell script's ``vllm serve`` with no image and no ``pip install vllm==X``): the pair is
    judged by the rules marked ``p2p_nccl`` and the engine-alone ones, for an unknown release on every release that
    ships the connector (:func:`~pdd_operator.compat.unknown_version.connector_floor` ..
    :func:`~pdd_operator.compat.unknown_version.connector_until`: from 0.24.0 the factory refuses it at startup), an
    error only where every one refuses it and a ``p2p_nccl`` rule refusing some of them a warning naming them
    (``compat.engine._unknown_version``). Else ``""`` for a pair that is not two P2pNccl engines, or why a P2pNccl
    pair stays "not checked": another known release, or an image whose tag names no release (a nightly, a fork
    build, a placeholder: it may hold other P2pNccl code, or none)."""
    if any(r.connector != P2P_NCCL or r.wrapper or r.third_party_connector for r in pair.roles):
        return ""
    versions = [r.version for r in pair.roles]
    if None in versions and any(r.image for r in pair.roles if r.version is None):
        return ("P2pNcclConnector pairs are judged on a known vLLM release that ships it (0.9.2-0.23.x), and this "
                "pair's image names none (a nightly, a fork or a placeholder tag may hold another P2pNccl code, or "
                "none: 0.24.0 dropped it): from 0.14.0 each engine randomizes the request id the connector keys its "
                f"tensors by (p2p-nccl-request-id-randomized, {REQUEST_ID_ENV} from 0.17.0), so the verdict depends on "
                "the release")
    if None in versions:
        # a host install that pins no release: judged on every release that ships the connector (compat.unknown_version:
        # the connector floor, 0.9.2), an error only where each of them refuses it
        return None
    if any(not P2P_NCCL_SINCE <= v < P2P_NCCL_UNTIL for v in versions):
        return (f"P2pNcclConnector pairs are judged on the vLLM releases that ship it (0.9.2-0.23.x), not on "
                f"{' / '.join(sorted({fmt(v) for v in versions}))}")
    return None


def _both(pair: PDPair) -> bool:
    return all(r.connector == P2P_NCCL and not r.wrapper and not r.third_party_connector for r in pair.roles)


def _opts_out(r: RoleConfig) -> bool:
    """The engine keeps the external request id: ``VLLM_DISABLE_REQUEST_ID_RANDOMIZATION`` parses as a non-zero
    integer (``bool(int(os.getenv(...)))``, envs.py 0.17.0-0.23.0) on a release that reads it."""
    if r.version is None or r.version < REQUEST_ID_OPT_OUT_SINCE:
        return False
    try:
        return bool(int(r.env.get(REQUEST_ID_ENV, "0")))
    except ValueError:
        return False


@rule(
    id="p2p-nccl-request-id-randomized", family="p2p-nccl-kv-path", severity="error",
    fields=("spec.engine.env",),
    needs=(REQUEST_ID_ENV,),
    source=("vllm v1/engine/input_processor.py InputProcessor.assign_request_id appends '-' + 8 random characters to "
            "every request id in each engine (0.14.0 lines 433-444, 0.16.0 lines 508-519; vllm#27987) unless "
            "VLLM_DISABLE_REQUEST_ID_RANDOMIZATION (envs.py from 0.17.0; input_processor.py 0.17.0 lines 195-213, "
            "0.21.0 lines 215-235, 0.23.0 lines 223-243; vllm#34415); P2pNcclConnector sends and waits for "
            "request_id + '#' + layer name (p2p_nccl_connector.py 0.14.0-0.22.1 lines 220 and 306, 0.23.0 lines 198 "
            "and 253) and the PUT receiver waits without a timeout (p2p_nccl_engine.py 0.14.0-0.23.0 lines 313-317): "
            "vllm#42839, vllm#42931"),
    example="two P2pNcclConnector engines of vllm/vllm-openai:v0.21.0 without VLLM_DISABLE_REQUEST_ID_RANDOMIZATION=1",
    since=REQUEST_ID_RANDOMIZED_SINCE, until=P2P_NCCL_UNTIL, p2p_nccl=True,
)
def check_p2p_nccl_request_id(pair: PDPair) -> list[Violation]:
    """P2pNcclConnector engines key the KV tensors by one request id: on 0.14.0-0.23.x both keep the proxy's id.

    From 0.14.0 each engine appends its own random suffix to the request id the proxy sent (the same
    ``X-Request-Id`` to both), so the prefill sends ``<id>-<a>#<layer>`` and the decode waits for ``<id>-<b>#<layer>``:
    with PUT / PUT_ASYNC (the default) it waits forever, with GET the prefill answers "not found" and the decode runs
    on blocks nothing wrote. ``VLLM_DISABLE_REQUEST_ID_RANDOMIZATION=1`` on both engines (read from 0.17.0) keeps the
    proxy's id; 0.14.0-0.16.x have no way out."""
    if not _both(pair):
        return []
    random = [r for r in pair.roles if not _opts_out(r)]
    if not random:
        return []
    version = pair.version
    if version is not None and version >= REQUEST_ID_OPT_OUT_SINCE:
        fix = fix_for(pair, f"Set {REQUEST_ID_ENV}=1 in spec.engine.env.",
                      f"Set {REQUEST_ID_ENV}=1 in the environment of both engines (prefill and decode).")
        way_out = f"; {REQUEST_ID_ENV}=1 keeps it, and is not set to a non-zero integer on the " + \
            " and ".join(r.role for r in random)
    else:
        fix = ("Use vLLM 0.17.0-0.23.x with VLLM_DISABLE_REQUEST_ID_RANDOMIZATION=1 on both engines, vLLM <= 0.13 with "
               "P2pNcclConnector, or NixlConnector.")
        way_out = f"; vLLM {fmt(version)} has no setting that keeps it ({REQUEST_ID_ENV} is read from 0.17.0)"
    return [(
        f"P2pNcclConnector keys the KV tensors by request_id + '#' + layer name, and vLLM {fmt(version)} replaces the "
        f"proxy's request id with '<id>-<8 random characters>' in each engine on its own{way_out}: the decode waits "
        "for tensors the prefill sent under another id, so every request hangs (PUT, PUT_ASYNC) or decodes from "
        "blocks nothing wrote (GET) (vllm#42839, vllm#42931).",
        fix,
    )]


@rule(
    id="p2p-nccl-parallel-mismatch", family="p2p-nccl-kv-path", severity="error",
    fields=("spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize", "spec.prefill.pipelineParallelSize",
            "spec.decode.pipelineParallelSize"),
    needs=("--tensor-parallel-size", "--pipeline-parallel-size"),
    source=("vllm p2p_nccl_connector.py: each worker sends to and receives from the other engine's kv_port + its own "
            "world rank (save_kv_layer 0.9.2 line 263, 0.10.0 line 245, 0.11.1-0.22.1 line 302, 0.23.0 line 249; "
            "start_load_kv 0.11.1-0.22.1 line 206), only its own layers and heads; shapes other than the block count "
            "must match (check_tensors_except_dim, NotImplementedError 'only symmetric TP is supported', 0.9.2 line "
            "484, 0.11.1-0.22.1 line 529, 0.23.0 line 476); the NCCL pair is created by ncclCommInitRank, which waits "
            "for the peer rank (p2p_nccl_engine.py 0.11.1-0.23.0 lines 224-227 and 383-388)"),
    example="P2pNcclConnector prefill --tensor-parallel-size 2, decode --tensor-parallel-size 1 on v0.10.1.1",
    since=P2P_NCCL_SINCE, until=P2P_NCCL_UNTIL, p2p_nccl=True,
)
def check_p2p_nccl_parallel(pair: PDPair) -> list[Violation]:
    """P2pNcclConnector engines run the same tensor and pipeline parallel sizes (rank i sends to rank i only).

    A worker of rank i on one side talks to the worker of rank i on the other (``kv_port + rank``): a rank without a
    peer waits for its tensors (or for ``ncclCommInitRank``) forever, and peers holding other heads or layers
    send tensors whose shapes ``check_tensors_except_dim`` refuses or keys the peer never asks for."""
    if not _both(pair):
        return []
    p, d = pair.roles
    if (p.tp, p.pp) == (d.tp, d.pp):
        return []
    return [(
        f"P2pNcclConnector pairs prefill rank i with decode rank i (kv_port + rank) and supports only symmetric "
        f"parallelism: prefill TP {p.tp} x PP {p.pp}, decode TP {d.tp} x PP {d.pp}. Ranks without a peer wait "
        "forever for their KV (or for the NCCL pair), and peers holding other heads or layers get tensors vLLM "
        "refuses ('Currently, only symmetric TP is supported') or never sent, so the first request fails or hangs.",
        fix_for(pair, "Give spec.prefill and spec.decode the same tensorParallelSize and pipelineParallelSize.",
                "Give both engines the same --tensor-parallel-size and --pipeline-parallel-size."),
    )]


def _send_type(r: RoleConfig) -> str:
    """``kv_connector_extra_config['send_type']`` with the release's default: ``PUT`` in 0.9.2
    (p2p_nccl_engine.py line 122), ``PUT_ASYNC`` from 0.10.0 (line 130-131; 0.11.1-0.23.0 line 150)."""
    default = "PUT" if r.version is not None and r.version < (0, 10, 0) else "PUT_ASYNC"
    return str(r.extra.get("send_type", default))


@rule(
    id="p2p-nccl-send-type-mismatch", family="p2p-nccl-kv-path", severity="error",
    fields=("spec.kvTransfer.extraConfig",),
    source=("vllm p2p_nccl_engine.py: only a GET engine has send_store (0.9.2 lines 122-125, 0.10.0 lines 130-134, "
            "0.11.1-0.23.0 lines 150-153) and keeps the prefill's tensors there until the decode asks (GET command, "
            "0.9.2 line 216, 0.11.1-0.23.0 line 277); a PUT / PUT_ASYNC prefill pushes them and has no send_store, "
            "and a PUT / PUT_ASYNC decode waits for pushed tensors without a timeout (recv_tensor, 0.11.1-0.23.0 "
            "lines 313-317)"),
    example='prefill "send_type":"PUT_ASYNC", decode "send_type":"GET" in kv_connector_extra_config',
    since=P2P_NCCL_SINCE, until=P2P_NCCL_UNTIL, p2p_nccl=True,
)
def check_p2p_nccl_send_type(pair: PDPair) -> list[Violation]:
    """P2pNcclConnector engines both pull (send_type GET) or both push (PUT, PUT_ASYNC: the default from 0.10.0).

    A GET prefill keeps the tensors until asked while a PUT decode waits for them to be pushed (forever); a PUT
    prefill pushes while a GET decode asks it, whose listener has no ``send_store`` (AttributeError in its thread),
    and waits for the answer forever."""
    if not _both(pair):
        return []
    p, d = (_send_type(r) for r in pair.roles)
    if (p == "GET") == (d == "GET"):
        return []
    return [(
        f"P2pNcclConnector send_type differs: prefill {p}, decode {d}. A GET engine pulls (the prefill keeps the "
        "tensors until the decode asks), PUT / PUT_ASYNC push; with one of each the decode's first request waits "
        "forever for KV that is never sent or never answered.",
        fix_for(pair, "Use the same send_type (GET, or PUT / PUT_ASYNC) in both roles' kv_connector_extra_config.",
                "Use the same send_type (GET, or PUT / PUT_ASYNC) in both engines' kv_connector_extra_config."),
    )]


@rule(
    id="p2p-nccl-block-size-mismatch", family="p2p-nccl-kv-path", severity="error",
    fields=("spec.prefill.blockSize", "spec.decode.blockSize"),
    needs=("--block-size",),
    source=("vllm p2p_nccl_connector.py start_load_kv inject_kv_into_layer: check_tensors_except_dim compares every "
            "dimension of the received blocks but their count with the decode's KV cache layer (block size among "
            "them) and raises NotImplementedError in the decode's worker (0.9.2 line 484, 0.10.0 line 460, 0.11.1-0.22.1 "
            "line 529, 0.23.0 line 476); block sizes as pdd_operator.vllm.block_size reads each release's default"),
    example="P2pNcclConnector prefill --block-size 16, decode --block-size 32",
    since=P2P_NCCL_SINCE, until=P2P_NCCL_UNTIL, p2p_nccl=True,
)
def check_p2p_nccl_block_size(pair: PDPair) -> list[Violation]:
    """P2pNcclConnector engines run one block size (the decode compares the received blocks' shape with its own).

    Sizes are ``--block-size`` where given, else vLLM's default where its code pins it
    (:func:`~pdd_operator.compat.rules.block_size.engine_block_sizes`); a size set on one role only whose other
    size is not pinned is a warning."""
    if not _both(pair):
        return []
    return one_block_size(pair, "P2pNcclConnector block sizes differ: prefill {p}, decode {d}. The decode checks that "
                          "the received blocks have its own shape but for their count and raises NotImplementedError "
                          "('only symmetric TP is supported') on the first request, which kills its engine.",
                          "P2pNcclConnector fails the first request (NotImplementedError in the decode) unless both "
                          "run one block size.")


def _kv_dtype(r: RoleConfig) -> str | None:
    """The dtype of the KV tensors the engine sends or receives: ``fp8`` for any fp8 ``--kv-cache-dtype``, else the
    model's ``--dtype`` (aliases resolved), ``None`` where that is ``auto`` (config.json decides)."""
    kv = (r.kv_cache_dtype or "auto").lower()
    if kv.startswith("fp8"):
        return kv if kv != "fp8" else "fp8_e4m3"
    if kv not in ("auto",):
        return dtype_name(kv)
    model = dtype_name(r.dtype)
    return None if model == "auto" else model


@rule(
    id="p2p-nccl-kv-dtype-mismatch", family="p2p-nccl-kv-path", severity="error",
    fields=("spec.kvCache.dtype", "spec.model.dtype"),
    needs=("--kv-cache-dtype", "--dtype"),
    source=("vllm p2p_nccl_engine.py: the receiver allocates each tensor with the sender's dtype (torch.empty(shape, "
            "dtype=getattr(torch, data['dtype'])), listener 0.11.1-0.23.0 lines 396-401) and p2p_nccl_connector.py "
            "copies it into the decode's KV layer by index (layer[block_ids, ...] = kv_cache, 0.11.1-0.22.1 lines "
            "163-193, 0.23.0 lines 159-171), which PyTorch's index_put_ refuses for another dtype ('Index put "
            "requires the source and destination dtypes match', by design: pytorch/pytorch#63935, #96177)"),
    example="P2pNcclConnector prefill --kv-cache-dtype fp8, decode without it",
    since=P2P_NCCL_SINCE, until=P2P_NCCL_UNTIL, p2p_nccl=True,
)
def check_p2p_nccl_kv_dtype(pair: PDPair) -> list[Violation]:
    """P2pNcclConnector engines hold their KV caches in one dtype (``--kv-cache-dtype``, else the model's ``--dtype``).

    Both read: a difference fails the decode's first request (two fp8 formats, which older releases store alike as
    uint8, are a warning). One fp8 cache against ``auto`` (the model's 16- or
    32-bit dtype unless a ModelOpt checkpoint names fp8) is a warning, as is ``auto`` against an explicit dtype."""
    if not _both(pair):
        return []
    p, d = (_kv_dtype(r) for r in pair.roles)
    fix = fix_for(pair, "Use the same kvCacheDtype and dtype on both roles.",
                  "Use the same --kv-cache-dtype and --dtype on both engines.")
    if p is not None and d is not None:
        if p == d:
            return []
        if p.startswith("fp8") and d.startswith("fp8"):
            return [(f"P2pNcclConnector KV caches are different fp8 formats: prefill {p}, decode {d}. Where vLLM stores "
                     "both as uint8 the copy passes and the decode reads the bytes in the other format; where it stores "
                     "them as their float8 types the copy is refused. Either way the KV is not the prefill's.", fix,
                     "warning")]
        return [(f"P2pNcclConnector KV caches differ in dtype: prefill {p}, decode {d}. The decode copies each received "
                 "tensor into its own KV layer by block index, which PyTorch refuses for another dtype ('Index put "
                 "requires the source and destination dtypes match'), so the decode's first request kills its engine.",
                 fix)]
    if p is None and d is None:
        return []
    known = pair.prefill if p is not None else pair.decode
    return [(f"The {known.role}'s KV cache dtype is {p or d}; the other engine's is the model's own (--dtype auto, "
             "from config.json) and not known here. P2pNcclConnector fails the decode's first request unless both "
             "hold one dtype.", fix, "warning")]


@rule(
    id="p2p-nccl-kv-role", family="p2p-nccl-kv-path", severity="error",
    fields=("spec.kvTransfer",),
    source=("vllm p2p_nccl_connector.py: is_producer = kv_role in (kv_producer, kv_both) (0.9.2 line 83, 0.11.1 "
            "line 88, 0.23.0 line 87); a producer asks for no external tokens (get_num_new_matched_tokens, "
            "0.11.1-0.22.1 line 355) and sends its KV in save_kv_layer to the decode address of the request id "
            "(0.11.1-0.22.1 lines 300-306); a consumer prefill sends nothing and waits for its own prompt's KV "
            "(0.20.0 p2p_nccl_connector.py lines 261, 355; p2p_nccl_engine.py lines 313-317, no timeout in PUT mode)"),
    example='P2pNcclConnector decode "kv_role":"kv_both"',
    since=P2P_NCCL_SINCE, until=P2P_NCCL_UNTIL, p2p_nccl=True,
)
def check_p2p_nccl_kv_role(pair: PDPair) -> list[Violation]:
    """A P2pNcclConnector decode only consumes (kv_consumer): a producing decode loads no KV from its prefill.

    A decode with kv_role kv_both or kv_producer is a producer to P2pNcclConnector: it loads nothing (the prefill's
    work is lost, every prompt recomputed) and sends its own KV to the decode address of the request id, its own.
    What that costs is not a start failure: a warning.

    A prefill (by its deployment's flags, labels or name) with kv_role kv_consumer is no producer: it sends nothing
    (save_kv_layer returns, 0.20.0 p2p_nccl_connector.py line 261) and asks for the whole prompt as external tokens
    (line 355), which it waits for from its own address, without a timeout in PUT mode (p2p_nccl_engine.py 0.20.0
    lines 313-317): no KV moves and requests hang: an error."""
    if not _both(pair):
        return []
    out: list[Violation] = []
    if pair.prefill.kv_transfer.get("kv_role") == "kv_consumer":
        out.append((
            "The P2pNcclConnector prefill has kv_role kv_consumer: it is no producer, so it sends no KV to the decode "
            "(save_kv_layer returns) and instead waits to load the whole prompt from the prefill address of the "
            "request id, its own, which nothing sends to: requests hang (PUT waits without a timeout) and the decode "
            "gets no KV.",
            fix_for(pair, "Set the prefill's kv_role to kv_producer.",
                    "Set kv_role kv_producer in the prefill's --kv-transfer-config.")))
    role = pair.decode.kv_transfer.get("kv_role")
    if role not in ("kv_producer", "kv_both"):
        return out
    return out + [(
        f"The P2pNcclConnector decode has kv_role {role}: a producer loads no KV (get_num_new_matched_tokens returns "
        "0), so the decode recomputes every prompt, and it sends its own KV to the decode address of the request id, "
        "which is its own.",
        fix_for(pair, "Set the decode's kv_role to kv_consumer.",
                "Set kv_role kv_consumer in the decode's --kv-transfer-config."), "warning",
    )]


#: ``KVTransferConfig.kv_buffer_size``'s default (vllm/config.py 0.9.2 line 3764, vllm/config/__init__.py 0.10.1.1 line
#: 3157, vllm/config/kv_transfer.py 0.21.0 and 0.23.0 line 37).
KV_BUFFER_SIZE_DEFAULT = 1e9
#: From 0.11.0 a GET sender skips a tensor larger than kv_buffer_size with a warning (p2p_nccl_engine.py 0.11.0 line
#: 228, 0.11.1-0.23.0 lines 263-272); before, it evicts from an empty send_store: ``next(iter(self.send_store))``
#: raises StopIteration in the prefill's worker (0.9.2 line 215, 0.10.0 and 0.10.1.1 line 234, 0.10.2 line 228).
GET_SKIPS_OVERSIZED_SINCE: Version = (0, 11, 0)


def _buffer_size(r: RoleConfig) -> float | None:
    try:
        return float(r.kv_transfer.get("kv_buffer_size", KV_BUFFER_SIZE_DEFAULT))
    except (TypeError, ValueError):
        return None


@rule(
    id="p2p-nccl-get-buffer-too-small", family="p2p-nccl-kv-path", severity="error",
    fields=("spec.kvTransfer",),
    source=("vllm p2p_nccl_engine.py send_tensor, GET: a layer's KV of a request larger than kv_buffer_size evicts "
            "from an empty send_store (StopIteration: 0.9.2 line 215, 0.10.0 and 0.10.1.1 line 234, 0.10.2 line 228) "
            "or is skipped (0.11.0 line 228, 0.11.1-0.23.0 lines 263-272), and the decode's GET then returns None and "
            "start_load_kv leaves its blocks unwritten (p2p_nccl_connector.py 0.11.1-0.22.1 lines 223-225)"),
    example='P2pNcclConnector prefill "kv_buffer_size":"1e1" with "send_type":"GET"',
    since=P2P_NCCL_SINCE, until=P2P_NCCL_UNTIL, p2p_nccl=True,
)
def check_p2p_nccl_get_buffer(pair: PDPair) -> list[Violation]:
    """A P2pNcclConnector prefill that is pulled from (send_type GET) keeps at least one KV block per layer in
    kv_buffer_size bytes.

    Judged only where no layer's block can fit: kv_buffer_size below the block size in bytes (one token of one head of
    width 1 in one byte each: a bound below any model's). The doc script's prefill ``kv_buffer_size 1e1`` is meant for
    PUT_ASYNC (the prefill buffers nothing there); with GET it breaks every request."""
    if not _both(pair) or _send_type(pair.prefill) != "GET" or _send_type(pair.decode) != "GET":
        return []
    p = pair.prefill
    size, block = _buffer_size(p), engine_block_sizes(pair)[0] or 16
    if size is None or size >= block:
        return []
    what = ("raises StopIteration in the prefill's worker when it evicts from its empty send_store, so the prefill's "
            "first request kills its engine" if not pair.at_least(GET_SKIPS_OVERSIZED_SINCE) else
            "skips sending every layer ('is greater than buffer size threshold ... skip send'), so the decode's GET "
            "finds nothing and it decodes from KV blocks nothing wrote")
    return [(
        f"The P2pNcclConnector prefill keeps its KV for the decode's GET in kv_buffer_size {size:g} bytes, less than "
        f"one KV block of one layer ({block} tokens): vLLM {fmt(pair.version)} {what}.",
        fix_for(pair, "Raise the prefill's kv_buffer_size (bytes; default 1e9) or use send_type PUT_ASYNC on both.",
                "Raise kv_buffer_size in the prefill's --kv-transfer-config (bytes; default 1e9), or use send_type "
                "PUT_ASYNC on both engines."),
    )]


@rule(
    id="p2p-nccl-model-mismatch", family="p2p-nccl-kv-path", severity="warning",
    fields=("spec.model.name",),
    needs=("--model",),
    source=("vllm p2p_nccl_connector.py: tensors are keyed by request id and the layer name (0.11.1-0.22.1 lines 220 "
            "and 306) and copied after a shape check only (check_tensors_except_dim, 0.11.1-0.22.1 line 529): no "
            "model identity is exchanged"),
    example="P2pNcclConnector prefill Qwen/Qwen3-8B, decode Qwen/Qwen3-8B-FP8",
    since=P2P_NCCL_SINCE, until=P2P_NCCL_UNTIL, p2p_nccl=True,
)
def check_p2p_nccl_model(pair: PDPair) -> list[Violation]:
    """P2pNcclConnector engines serve one model (nothing in the transfer compares them).

    Other layer names leave the decode waiting, other shapes are refused, the same shapes of other weights are copied
    and decode wrong text; the strings may also name one model two ways (a path and a Hub id): a warning."""
    if not _both(pair):
        return []
    p, d = pair.prefill.model, pair.decode.model
    if p is None or d is None or p == d:
        return []
    return [(f"P2pNcclConnector engines name different models: prefill {p!r}, decode {d!r}. The connector exchanges "
             "no model identity: unless both are one checkpoint, the decode waits for layers never sent, refuses "
             "their shapes or decodes from another model's KV.",
             fix_for(pair, "Serve the same model on both roles.", "Serve the same --model on both engines."))]


#: From 0.11.0 the decode passes the prefill's address to ``recv_tensor`` (p2p_nccl_connector.py 0.11.0 lines
#: 183 and 196-197); before, it calls ``recv_tensor(request_id + "#" + layer)`` without one (0.9.2 line 200, 0.10.0
#: line 199, 0.10.1.1 line 207, 0.10.2 line 193), which in GET mode returns None (p2p_nccl_engine.py 0.9.2 lines
#: 266-267, 0.10.0 and 0.10.1.1 lines 284-285, 0.10.2 lines 278-279).
GET_ADDRESSED_SINCE: Version = (0, 11, 0)


@rule(
    id="p2p-nccl-get-unsupported", family="p2p-nccl-kv-path", severity="error",
    fields=("spec.kvTransfer",),
    source=("vllm p2p_nccl_connector.py start_load_kv: recv_tensor(request_id + '#' + layer) without the prefill's "
            "address (0.9.2 line 200, 0.10.0 line 199, 0.10.1.1 line 207, 0.10.2 line 193), which for send_type GET "
            "returns None at once (p2p_nccl_engine.py 0.9.2 lines 266-267, 0.10.0 and 0.10.1.1 lines 284-285, 0.10.2 "
            "lines 278-279); the layer is skipped ('src_kv_cache is None'). 0.11.0 passes the address (lines 183, "
            "196-197)"),
    example='P2pNcclConnector pair with "send_type":"GET" on vllm/vllm-openai:v0.10.1.1',
    since=P2P_NCCL_SINCE, until=GET_ADDRESSED_SINCE, p2p_nccl=True,
)
def check_p2p_nccl_get_unaddressed(pair: PDPair) -> list[Violation]:
    """Before 0.11.0 a P2pNcclConnector decode does not pull (send_type GET): it never asks the prefill.

    0.9.2-0.10.x's decode asks ``recv_tensor`` for each layer without the prefill's address, which in GET mode returns
    None: every layer is skipped and the decode runs on KV blocks nothing wrote, on every request."""
    if not _both(pair) or _send_type(pair.decode) != "GET":
        return []
    return [(
        f"The P2pNcclConnector decode uses send_type GET on vLLM {fmt(pair.version)}, whose decode asks for each layer "
        "without the prefill's address (recv_tensor returns None in GET mode before 0.11.0): no KV is ever pulled and "
        "every request decodes from KV blocks nothing wrote.",
        fix_for(pair, "Use send_type PUT_ASYNC (or PUT) on both roles, or vLLM >= 0.11.0 for GET.",
                "Use send_type PUT_ASYNC (or PUT) in both engines' kv_connector_extra_config, or vLLM >= 0.11.0 "
                "for GET."),
    )]
