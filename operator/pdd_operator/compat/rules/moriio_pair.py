"""What a pair of vLLM ``MoRIIOConnector`` engines (AMD's MORI-IO, ROCm) must agree on for the KV cache to reach the
decode.

MoRIIOConnector (``vllm/distributed/kv_transfer/kv_connector/v1/moriio/``, registered in ``kv_connector/factory.py``
from 0.14.0, lines 183-185; read in every release from 0.14.0 to 0.34.0) has no compatibility hash: a consumer rank
handshakes over ZMQ with a producer rank (``_moriio_handshake``), registers the peer's memory and then reads (READ
mode) or is written (WRITE mode, the default) whole KV blocks by RDMA at byte offsets computed from its *own* cache
geometry (``_compute_block_transfer_offsets``; 0.14.0 moriio_connector.py lines 1423-1476). So the roles must agree
on the TP layout (the peer rank and the heads it holds), the block size, the KV cache dtype (the bytes are copied as
they are), the transfer mode and the model; the NIXL rules (handshake hash, side channel, NIXL package) describe
another connector (``Rule.moriio``, ``compat.engine``).

Read and left without a rule: the handshake and notify ports (``kv_connector_extra_config`` ``handshake_port`` /
``notify_port``, defaults filled by moriio_connector.py 0.28.0 lines 254-257: each engine binds its own and the proxy
forwards them, so two values need not match), ``proxy_ip`` / ``proxy_ping_port`` (the toy proxy's registration),
hybrid SSM models before 0.31.0 (moriio_connector.py reads no Mamba state before 0.31.0) and data parallelism
across pods. Within one pod the workers' own listener ports must differ (``moriio-listener-port-collision``).
"""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.compat.rules.block_size import one_block_size
from pdd_operator.vllm.moriio_ports import moriio_bind_collision
from pdd_operator.vllm.versions import Version, fmt

MORIIO = "MoRIIOConnector"
#: The first release whose connector factory registers MoRIIOConnector (factory.py 0.14.0 lines 183-185; 0.13.0's
#: has none: kv-connector-unregistered).
MORIIO_SINCE: Version = (0, 14, 0)
#: The newest release whose ``moriio/`` package these rules were read from (inclusive): newer ones are "not checked".
MORIIO_READ_THROUGH: Version = (0, 34, 0)
#: From 0.25.0 a rank maps its peer by the two TP sizes (``get_moriio_remote_tp_rank``, ValueError unless one divides
#: the other, moriio_connector.py 0.25.0 lines 103-126, 0.28.0 lines 106-129, 0.34.0 lines 173-197, called by the
#: handshake, 0.25.0 lines 1257-1259 and 1324-1325) and heads are split only where every rank of the smaller side
#: holds whole heads (``validate_moriio_heterogeneous_tp_kv_heads``, NotImplementedError, 0.25.0 lines 129-145, 0.28.0
#: lines 132-148, 0.34.0 lines 212-228, called for each transfer, 0.25.0 lines 1910-1916, 0.34.0 lines 3631-3639).
#: Before, each rank dials the peer's port + its own rank and notifies ``range(own TP)`` (0.14.0 lines 382-385 and
#: 948, 0.24.0 lines 438-439, 510-511 and 1164) with offsets from its own heads: the TP sizes must be equal.
HETERO_TP_SINCE: Version = (0, 25, 0)
#: From 0.31.0 a hybrid (Mamba / KDA) model's state is transferred, and only between equal TP sizes
#: (``_mamba_tp_ratio``: NotImplementedError "heterogeneous-TP mamba/KDA transfer is not supported yet", 0.31.0 line
#: 3352, 0.32.0 line 3410, 0.34.0 line 3843).
HYBRID_SINCE: Version = (0, 31, 0)
#: From 0.23.0 the mode is ``kv_connector_extra_config.read_mode`` ("true"/"1", moriio_common.py 0.23.0 lines
#: 165-170, 0.28.0 lines 179-184, 0.34.0 lines 225-230) and ``VLLM_MORIIO_CONNECTOR_READ_MODE`` is "deprecated and
#: ignored" (0.23.0 lines 180-197, 0.34.0 lines 271-288); before, that variable alone sets it (envs.py 0.22.0 lines
#: 1646-1648, moriio_common.py 0.14.0 lines 161-167, 0.22.0 lines 165-171).
READ_MODE_KEY_SINCE: Version = (0, 23, 0)
READ_MODE_ENV = "VLLM_MORIIO_CONNECTOR_READ_MODE"


def moriio_unjudged(pair: PDPair) -> str | None:
    """``None`` where both roles name ``MoRIIOConnector`` (no wrapper, vLLM's own class: no
    ``kv_connector_module_path`` outside vLLM) on known releases whose ``moriio/`` was read
    (0.14.0-0.34.0, :data:`MORIIO_SINCE` .. :data:`MORIIO_READ_THROUGH`), or run from a host install that pins no
    release (a shell script's ``vllm serve`` with no image and no ``pip install vllm==X``): the pair is judged by the
    rules marked ``moriio`` and the engine-alone ones, for an unknown release on every release read from 0.14.0 on
    (the connector's first, :func:`~pdd_operator.compat.unknown_version.connector_floor`; an error only where every
    one refuses it, as the NIXL rules judge an unknown release). Else ``""`` for a pair that is not two MoRIIO
    engines, or why a MoRIIO pair stays "not checked": a known release outside those read (before 0.14.0
    ``kv-connector-unregistered`` refuses it on its own), or an image whose tag names no release (a nightly, a fork
    build, a placeholder: it may hold MoRIIO code past 0.34.0 or patched, which these per-release rules do not
    describe)."""
    if any(r.connector != MORIIO or r.wrapper or r.third_party_connector for r in pair.roles):
        return ""
    versions = [r.version for r in pair.roles]
    if None in versions and any(r.image for r in pair.roles if r.version is None):
        return ("MoRIIOConnector pairs are judged on a known vLLM release whose connector was read (0.14.0-"
                f"{fmt(MORIIO_READ_THROUGH)}), and this pair's image names none (a nightly, a fork or a placeholder tag "
                "may hold MoRIIO code newer than the releases read, or patched): what the two engines must agree on "
                "changes with the release (heterogeneous TP from 0.25.0, the read-mode setting from 0.23.0)")
    if None in versions:
        # a host install that pins no release: judged on every release read from the connector's first on
        # (compat.unknown_version: the connector floor), an error only where each of them refuses it
        return None
    if any(not MORIIO_SINCE <= v <= MORIIO_READ_THROUGH for v in versions):
        return (f"MoRIIOConnector pairs are judged on the vLLM releases whose connector was read (0.14.0-"
                f"{fmt(MORIIO_READ_THROUGH)}), not on {' / '.join(sorted({fmt(v) for v in versions}))}")
    return None


def _both(pair: PDPair) -> bool:
    return all(r.connector == MORIIO and not r.wrapper and not r.third_party_connector for r in pair.roles)


@rule(
    id="moriio-tp-mismatch", family="moriio-kv-path", severity="error",
    fields=("spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize", "spec.model.numKvHeads"),
    needs=("--tensor-parallel-size",),
    source=("vllm kv_connector/v1/moriio/moriio_connector.py: 0.14.0-0.24.x each rank handshakes with the peer's port + "
            "its own rank and notifies range(own TP) (0.14.0 lines 382-385 and 948, 0.24.0 lines 438-439, 510-511 and "
            "1164), offsets from its own heads (0.14.0 lines 1423-1476); from 0.25.0 get_moriio_remote_tp_rank raises "
            "ValueError unless one TP divides the other (0.25.0 lines 103-126, 0.34.0 lines 173-197) and "
            "validate_moriio_heterogeneous_tp_kv_heads raises NotImplementedError unless the model is MLA or min(TP) "
            ">= the KV heads (0.25.0 lines 129-145 and 1910-1916, 0.28.0 lines 132-148, 0.34.0 lines 212-228 and "
            "3631-3639); hybrid models need equal TP (0.31.0 line 3352, 0.34.0 line 3843)"),
    example="MoRIIOConnector prefill --tensor-parallel-size 4, decode --tensor-parallel-size 8 on v0.20.2",
    since=MORIIO_SINCE, moriio=True,
)
def check_moriio_tp(pair: PDPair) -> list[Violation]:
    """MoRIIOConnector engines run TP sizes their release can pair: equal before 0.25.0; from 0.25.0 one a multiple of
    the other, and for a non-MLA model the smaller at least the number of KV heads (hybrid models: equal).

    A different TP size before 0.25.0 leaves ranks dialing ports no peer binds and transfers computed from the other
    side's heads; from 0.25.0 vLLM refuses what it cannot map at the first request (ValueError in the handshake,
    NotImplementedError for each transfer). Where the model's KV heads or architecture are not known, a warning."""
    if not _both(pair) or not pair.hetero_tp:
        return []
    p, d = pair.tps or (1, 1)
    version = pair.version
    fix = fix_for(pair, "Give spec.prefill and spec.decode the same tensorParallelSize.",
                  "Give both engines the same --tensor-parallel-size.")
    head = f"MoRIIOConnector prefill TP {p}, decode TP {d} on vLLM {fmt(version)}"
    if version is not None and version < HETERO_TP_SINCE:
        return [(f"{head}: before 0.25.0 each rank handshakes with the peer rank of its own index and computes the "
                 "transfer offsets from its own KV heads, so ranks without a peer wait forever and the others copy "
                 "blocks laid out for another head split: the first request hangs or decodes from the wrong KV.", fix)]
    small, large = min(p, d), max(p, d)
    if large % small:
        return [(f"{head}: vLLM maps each rank to its peer only when one TP size divides the other "
                 "(get_moriio_remote_tp_rank raises ValueError in the first request's handshake).", fix)]
    if pair.hybrid_ssm and pair.at_least(HYBRID_SINCE):
        return [(f"{head}: the model is a hybrid (Mamba/KDA) one, whose state MoRIIO moves only between equal TP "
                 "sizes (NotImplementedError 'heterogeneous-TP mamba/KDA transfer is not supported yet').", fix)]
    if pair.mla:
        return []
    heads = pair.num_kv_heads
    if heads is None or pair.model.architecture is None:
        return [(f"{head}: from 0.25.0 vLLM splits no KV heads across different TP sizes and refuses the transfer "
                 "(NotImplementedError 'MoRIIO heterogeneous TP requires replicated KV heads') unless the model is MLA "
                 f"or the smaller TP ({small}) is at least its number of KV heads, which is not known here.",
                 fix, "warning")]
    if small >= heads:
        return []
    return [(f"{head}: the model has {heads} KV heads and the smaller TP ({small}) holds more than one per rank; "
             "vLLM splits no KV heads across different TP sizes and raises NotImplementedError ('MoRIIO heterogeneous "
             "TP requires replicated KV heads on both prefill and decode') for every transfer.", fix)]


@rule(
    id="moriio-block-size-mismatch", family="moriio-kv-path", severity="error",
    fields=("spec.prefill.blockSize", "spec.decode.blockSize"),
    needs=("--block-size",),
    source=("vllm moriio_connector.py: 0.14.0-0.32.x compute the peer's block offsets from the local block size "
            "(0.14.0 lines 1440-1476: block_stride of the local kv_cache_shape; 0.28.0 compute_block_transfer_offsets "
            "with the local geometry); from 0.33.0 _check_peer_block_size raises MoRIIOError for a peer with another "
            "block size (moriio_connector.py 0.33.0 lines 3614-3627, 0.34.0 lines 3673-3686; moriio_engine.py 0.33.0 "
            "line 443)"),
    example="MoRIIOConnector prefill --block-size 16, decode --block-size 64",
    since=MORIIO_SINCE, moriio=True,
)
def check_moriio_block_size(pair: PDPair) -> list[Violation]:
    """MoRIIOConnector engines run one block size (blocks are copied whole, at offsets of the local block size).

    Sizes are ``--block-size`` where given, else vLLM's default where its code pins it; a size set on one role only
    whose other size is not pinned is a warning."""
    if not _both(pair):
        return []
    what = ("raises MoRIIOError ('pass the same --block-size to both instances') on the first transfer"
            if pair.at_least((0, 33, 0)) else
            "reads and writes the peer's blocks at offsets of its own block size, so the decode gets other "
            "requests' tokens or RDMA errors")
    return one_block_size(pair, f"MoRIIOConnector block sizes differ: prefill {{p}}, decode {{d}}. vLLM "
                          f"{fmt(pair.version)} {what}.",
                          "MoRIIOConnector copies whole blocks and needs one block size on both.")


def _kv_dtype(r: RoleConfig) -> str:
    kv = (r.kv_cache_dtype or "auto").lower()
    return "fp8_e4m3" if kv == "fp8" else kv


@rule(
    id="moriio-kv-dtype-mismatch", family="moriio-kv-path", severity="error",
    fields=("spec.kvCache.dtype",),
    needs=("--kv-cache-dtype",),
    source=("vllm moriio_connector.py: the KV blocks are moved as bytes, block length and offsets from the local "
            "cache's element size and shape (register_kv_caches, 0.14.0 lines 1063-1098; offsets 0.14.0 lines "
            "1440-1476; 0.28.0 moriio_layout.py); no dtype is exchanged in the handshake (MoRIIOAgentMetadata)"),
    example="MoRIIOConnector prefill --kv-cache-dtype fp8, decode --kv-cache-dtype auto",
    since=MORIIO_SINCE, moriio=True,
)
def check_moriio_kv_dtype(pair: PDPair) -> list[Violation]:
    """MoRIIOConnector engines hold their KV caches in one dtype (``--kv-cache-dtype``): the bytes are copied as they
    are. Two explicit dtypes that differ are an error; ``auto`` (the model's dtype) against an explicit one, or two
    fp8 formats, a warning."""
    if not _both(pair):
        return []
    p, d = (_kv_dtype(r) for r in pair.roles)
    if p == d:
        return []
    fix = fix_for(pair, "Use the same kvCache.dtype on both roles.", "Use the same --kv-cache-dtype on both engines.")
    message = (f"MoRIIOConnector KV cache dtypes differ: prefill {p}, decode {d}. MoRIIO copies the KV blocks as bytes "
               "at offsets of the local element size and exchanges no dtype, so the decode reads the prefill's bytes "
               "as its own format")
    if "auto" in (p, d) or (p.startswith("fp8") and d.startswith("fp8")):
        return [(message + " unless both resolve to one dtype (auto is the model's).", fix, "warning")]
    return [(message + ": every request decodes from corrupt KV.", fix)]


def read_mode(r: RoleConfig) -> bool | None:
    """Whether the engine runs MoRIIO in READ mode (the decode pulls) rather than WRITE (the prefill pushes, the
    default), as its release reads it (:data:`READ_MODE_KEY_SINCE`); ``None`` for an unknown release."""
    if r.version is None:
        return None
    if r.version >= READ_MODE_KEY_SINCE:
        return str(r.extra.get("read_mode", "false")).lower().strip() in ("true", "1")
    return r.env.get(READ_MODE_ENV, "False").lower() in ("true", "1")


@rule(
    id="moriio-mode-mismatch", family="moriio-kv-path", severity="warning",
    fields=("spec.kvTransfer.extraConfig", "spec.engine.env"),
    source=("vllm moriio_common.py get_moriio_mode: VLLM_MORIIO_CONNECTOR_READ_MODE before 0.23.0 (0.14.0 lines "
            "161-167, envs.py 0.22.0 lines 1646-1648), kv_connector_extra_config read_mode from 0.23.0 (0.23.0 lines "
            "165-170, 0.34.0 lines 225-230); READ: the decode reads the prefill's blocks after the prefill finishes, "
            "WRITE: the prefill writes into blocks the decode announced (moriio_connector.py 0.28.0 request_finished "
            "lines 898-990)"),
    example='MoRIIOConnector prefill "read_mode":"true", decode without it on v0.28.0',
    since=MORIIO_SINCE, moriio=True,
)
def check_moriio_mode(pair: PDPair) -> list[Violation]:
    """MoRIIOConnector engines run one transfer mode (both READ or both WRITE)."""
    if not _both(pair):
        return []
    p, d = (read_mode(r) for r in pair.roles)
    if p is None or d is None or p == d:
        return []
    where = ("kv_connector_extra_config read_mode" if pair.at_least(READ_MODE_KEY_SINCE) else READ_MODE_ENV)
    return [(f"MoRIIOConnector modes differ ({where}): prefill {'READ' if p else 'WRITE'}, decode "
             f"{'READ' if d else 'WRITE'}. In READ mode the decode pulls the prefill's blocks, in WRITE mode the "
             "prefill pushes into blocks the decode announces; one of each follows two protocols, and KV may never "
             "move.",
             fix_for(pair, f"Set the same {where} on both roles.", f"Set the same {where} on both engines."))]


@rule(
    id="moriio-read-mode-env-ignored", family="moriio-kv-path", severity="warning",
    fields=("spec.engine.env",),
    source=("vllm moriio_common.py 0.23.0 lines 180-197, 0.34.0 lines 271-288: VLLM_MORIIO_CONNECTOR_READ_MODE is "
            "'deprecated and ignored'; get_moriio_mode reads kv_connector_extra_config read_mode (0.23.0 lines "
            "165-170)"),
    example="VLLM_MORIIO_CONNECTOR_READ_MODE=1 with MoRIIOConnector on v0.28.0",
    since=READ_MODE_KEY_SINCE, moriio=True,
)
def check_moriio_read_mode_env(pair: PDPair) -> list[Violation]:
    """From 0.23.0 MoRIIO's READ mode is set in kv_connector_extra_config, not by VLLM_MORIIO_CONNECTOR_READ_MODE."""
    if not _both(pair):
        return []
    asked = [r.role for r in pair.roles if r.env.get(READ_MODE_ENV, "").lower() in ("true", "1")
             and "read_mode" not in r.extra]
    if not asked:
        return []
    return [(f"{' and '.join(asked)}: {READ_MODE_ENV} asks for READ mode, but vLLM {fmt(pair.version)} ignores it "
             "('deprecated and ignored') and runs WRITE mode unless kv_connector_extra_config read_mode is true.",
             fix_for(pair, 'Set "read_mode": "true" in spec.kvTransfer.extraConfig instead.',
                     'Set "read_mode": "true" in kv_connector_extra_config of both engines\' --kv-transfer-config.'))]


@rule(
    id="moriio-model-mismatch", family="moriio-kv-path", severity="warning",
    fields=("spec.model.name",),
    needs=("--model",),
    source=("vllm moriio_connector.py: the handshake exchanges the peer's memory descriptors and layer names only "
            "(MoRIIOAgentMetadata, 0.14.0 lines 955-1003): no model identity is compared"),
    example="MoRIIOConnector prefill deepseek-ai/DeepSeek-V3, decode deepseek-ai/DeepSeek-R1",
    since=MORIIO_SINCE, moriio=True,
)
def check_moriio_model(pair: PDPair) -> list[Violation]:
    """MoRIIOConnector engines serve one model (nothing in the transfer compares them; the strings may also name one
    checkpoint two ways: a warning)."""
    if not _both(pair):
        return []
    p, d = pair.prefill.model, pair.decode.model
    if p is None or d is None or p == d:
        return []
    return [(f"MoRIIOConnector engines name different models: prefill {p!r}, decode {d!r}. MoRIIO compares no model "
             "identity: unless both are one checkpoint the decode reads another model's KV.",
             fix_for(pair, "Serve the same model on both roles.", "Serve the same --model on both engines."))]


#: ``kv_connector_extra_config`` keys ``MoRIIOConfig.from_vllm_config`` converts with ``int()`` and ``float()``, from
#: the release that reads them (moriio_common.py: 0.14.0 lines 208-220, 0.23.0 lines 258-294, 0.28.0 lines 306-344,
#: 0.34.0 lines 355-409).
_INT_KEYS_SINCE: dict[str, Version] = {
    "http_port": MORIIO_SINCE, "proxy_ping_port": MORIIO_SINCE, "handshake_port": MORIIO_SINCE,
    "notify_port": MORIIO_SINCE, "qp_per_transfer": READ_MODE_KEY_SINCE, "post_batch_size": READ_MODE_KEY_SINCE,
    "num_workers": READ_MODE_KEY_SINCE}
_FLOAT_KEYS_SINCE: dict[str, Version] = {"transfer_timeout": READ_MODE_KEY_SINCE, "defer_timeout": READ_MODE_KEY_SINCE}
#: Keys the connector fills with its defaults where missing or empty (``not extra_config[key]``) before reading them.
_DEFAULTED = ("handshake_port", "notify_port")
#: The first release that reads ``proxy_ping_port`` with a default (``extra_config.get("proxy_ping_port", 0)``,
#: moriio_common.py 0.28.0 line 330); before, ``extra_config["proxy_ping_port"]`` (0.14.0 line 218, 0.25.0 line 309).
PROXY_PING_OPTIONAL_SINCE: Version = (0, 28, 0)


def _converts(value: object, kind: type) -> bool:
    """Python's ``int(value)`` / ``float(value)`` succeeds (what ``MoRIIOConfig`` calls on the value)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return False
    try:
        kind(value)
    except ValueError:
        return False
    return True


@rule(
    id="moriio-extra-config-port-invalid", family="connector", severity="error",
    fields=("spec.kvTransfer",),
    in_manifest=("args",),
    source=("vllm distributed/kv_transfer/kv_connector/v1/moriio/moriio_common.py MoRIIOConfig.from_vllm_config: "
            "int(extra_config['http_port']), int(extra_config['proxy_ping_port']) (a .get with default 0 from 0.28.0), "
            "int() of handshake_port / notify_port (defaults filled by moriio_connector.py 0.14.0 lines 134-137, 0.30.0 "
            "lines 260-264 only when missing or empty), from 0.23.0 int() of qp_per_transfer, post_batch_size, "
            "num_workers and float() of transfer_timeout, defer_timeout (0.14.0 lines 208-220, 0.30.0 lines 308-346, "
            "0.34.0 lines 355-409); called by MoRIIOConnectorWorker.__init__ (0.14.0 line 570, 0.30.0 line 1195, "
            "0.34.0 line 1805) as the engine starts"),
    example=('{"kv_connector":"MoRIIOConnector","kv_role":"kv_producer","kv_connector_extra_config":{"proxy_ip":'
             '"${NODE0_ADDR}","proxy_ping_port":"${PROXY_PING_PORT}","http_port":"${SERVER_PORT}"}} in single quotes'),
    since=MORIIO_SINCE, until=(0, 34, 1), without_connector=True, one_engine=True,
)
def check_moriio_extra_config_numbers(pair: PDPair) -> list[Violation]:
    """Each MoRIIOConnector engine gives ``http_port`` (and before 0.28.0 ``proxy_ping_port``) in
    ``kv_connector_extra_config``, and every numeric key it sets converts as vLLM converts it.

    The connector's worker builds its config with ``int()`` / ``float()`` of those values as the engine starts: a key
    missing raises ``KeyError``, a value that is no number (a shell placeholder such as ``"${SERVER_PORT}"`` that single
    quotes kept from being expanded, ``"8000.0"`` for an int) raises ``ValueError``, and the engine never serves."""
    out: list[Violation] = []
    for r in pair.roles:
        if r.connector != MORIIO or r.wrapper or r.third_party_connector or not isinstance(r.extra, dict):
            continue
        version = r.version
        required = ["http_port"] + (["proxy_ping_port"] if version is not None and version < PROXY_PING_OPTIONAL_SINCE
                                    else [])
        missing = [k for k in required if k not in r.extra]
        bad = [(k, r.extra[k]) for keys, kind in ((_INT_KEYS_SINCE, int), (_FLOAT_KEYS_SINCE, float))
               for k, since in keys.items()
               if k in r.extra and (version is None or version >= since)
               and not (k in _DEFAULTED and not r.extra[k]) and not _converts(r.extra[k], kind)]
        if not missing and not bad:
            continue
        said = "; ".join([*(f"{k} is missing (KeyError)" for k in missing),
                          *(f"{k} is {v!r}, which {('int' if k in _INT_KEYS_SINCE else 'float')}() refuses (ValueError)"
                            for k, v in bad)])
        placeholder = any(isinstance(v, str) and "$" in v for _, v in bad)
        out.append((
            f"{r.role}: MoRIIOConnector kv_connector_extra_config: {said}. vLLM {fmt(version)}'s MoRIIOConfig reads "
            "these numbers as the connector's worker starts, so the engine does not start."
            + (" A ${...} placeholder inside a single-quoted --kv-transfer-config is not expanded by the shell."
               if placeholder else ""),
            fix_for(pair, "Give MoRIIOConnector's numeric kv_connector_extra_config keys as numbers.",
                    f"Write the numbers themselves in the {r.role} container's --kv-transfer-config (or put the "
                    "JSON in double quotes with its inner quotes escaped so the shell expands the variables)"
                    + (f", and add {', '.join(missing)}" if missing else "") + "."),
        ))
    return out


@rule(
    id="moriio-listener-port-collision", family="connector", severity="error",
    fields=("spec.kvTransfer", "spec.prefill.tensorParallelSize", "spec.decode.tensorParallelSize"),
    in_manifest=("args",),
    source=("vllm distributed/kv_transfer/kv_connector/v1/moriio: each worker binds handshake_port + "
            "get_port_offset(dp_rank, tp_rank) and notify_port + the same offset, get_port_offset called without "
            "tp_size so the offset is dp_rank + tp_rank (moriio_common.py 0.14.0 l.170-171 and l.205-221, 0.28.0 "
            "l.190-203 and l.306-308 with the DP rank folded to the pod-local one, 0.34.0 l.236-248 and l.352-398; "
            "moriio_connector.py 0.14.0 l.673-675, 0.34.0 l.1949-1951); the handshake listener binds tcp://*:<port> "
            "in a thread before ready_event.set() and the worker waits on ready_event.wait() without a timeout "
            "(moriio_connector.py 0.14.0 l.902-908 and l.1155-1172, 0.34.0 l.2217-2223 and l.2826-2841); "
            "pdd_operator.vllm.moriio_ports"),
    example="vllm serve m --data-parallel-size 2 --tensor-parallel-size 2 --kv-transfer-config "
            "'{\"kv_connector\":\"MoRIIOConnector\",...}': DP 0 x TP 1 and DP 1 x TP 0 both bind 6302",
    since=MORIIO_SINCE, until=(0, 34, 1), without_connector=True, one_engine=True,
)
def check_moriio_listener_port_collision(pair: PDPair) -> list[Violation]:
    """No two workers of one MoRIIOConnector engine bind the same handshake or notify port in its pod.

    Judged where the engine's TP and PP sizes and its DP ranks in this pod are literals
    (:func:`~pdd_operator.vllm.moriio_ports.moriio_bind_collision`): every worker of those ranks shares the pod's
    network namespace, so the offsets ``dp_rank + tp_rank`` that vLLM adds to both bases must not meet. Where they do,
    the second bind fails with 'Address already in use' inside the handshake listener's thread and that worker waits
    for its listener for ever: the engine never serves."""
    out: list[Violation] = []
    for r in pair.roles:
        if r.connector != MORIIO or r.wrapper or r.third_party_connector:
            continue
        sizes = (r.tp, r.pp, r.dp_local)
        if any(not isinstance(s, int) or s < 1 for s in sizes):
            continue
        hit = moriio_bind_collision(r.kv_transfer, r.tp, r.pp, r.dp_local)  # type: ignore[arg-type]
        if hit is None:
            continue
        port, first, second = hit
        ways = [w for w, applies in (
            ("run one data-parallel rank per pod (--data-parallel-rank, external load balancing) or TP 1 with several",
             r.dp_local > 1 and r.tp > 1),
            ("run the pipeline stages in pods of their own (--nnodes with one stage a pod)", r.pp > 1),
            (f"set handshake_port and notify_port in kv_connector_extra_config more than {r.dp_local + r.tp - 1} "
             "apart", "handshake" in first and "notify" in second or "notify" in first and "handshake" in second),
        ) if applies] or ["run fewer workers in one pod"]
        out.append((
            f"{r.role}: MoRIIOConnector workers bind port {port} twice in one pod ({first}; {second}): vLLM "
            f"{fmt(r.version) + ' ' if r.version else ''}offsets both listener ports by DP rank + TP rank (not DP rank "
            "x TP size + TP rank), so the second ZeroMQ bind fails with 'Address already in use' in the handshake "
            "listener's thread and that worker waits for it for ever: the engine never serves.",
            f"In the {r.role} engine, {'; or '.join(ways)}."))
    return out


#: The first release read whose READ-mode decode sends the prefill a "release" for the blocks it read
#: (``_send_read_release``: moriio_connector.py 0.33.0 lines 3980-3984 and 4107-4118, 0.34.0 lines 4037-4045 and
#: 4167-4178; absent from 0.32.0), to ``remote_notify_port + get_port_offset(remote_dp_rank, tp_rank,
#: remote_tp_size)``: the prefill's global DP rank (``remote_dp_rank=self._global_dp_rank``, 0.34.0 line 1696) times
#: its TP size.
READ_RELEASE_SINCE: Version = (0, 33, 0)
#: How long a prefill keeps a READ request's blocks when no release comes (``MoRIIOConstants.
#: VLLM_MORI_READ_ABORT_REQUEST_TIMEOUT``, seconds: moriio_common.py 0.34.0 line 432; moriio_connector.py 0.34.0
#: lines 1671-1675).
READ_ABORT_TIMEOUT_S = 3600


@rule(
    id="moriio-read-release-port-offset", family="moriio-kv-path", severity="warning",
    fields=("spec.prefill.extraArgs", "spec.kvTransfer.extraConfig"),
    source=("vllm kv_connector/v1/moriio: the prefill's notify listener binds notify_port + get_port_offset("
            "fold_local_rank(dp_rank, data_parallel_size_local), tp_rank) = local DP rank + TP rank (moriio_common.py "
            "0.33.0 and 0.34.0 lines 354-357 and 236-237); the READ-mode decode's release goes to remote_notify_port "
            "+ global DP rank x remote TP size + TP rank on the request's remote_host (moriio_connector.py 0.33.0 "
            "lines 3980-3984, 0.34.0 lines 4037-4045); an unreleased READ request's blocks are held for "
            "VLLM_MORI_READ_ABORT_REQUEST_TIMEOUT, 3600 s (moriio_common.py 0.34.0 line 432)"),
    example="MoRIIOConnector read_mode true, prefill --data-parallel-size 4 --data-parallel-size-local 2 on v0.34.0",
    since=READ_RELEASE_SINCE, moriio=True,
)
def check_moriio_read_release_port(pair: PDPair) -> list[Violation]:
    """In MoRIIO's READ mode (0.33.0 on) the decode tells the prefill rank that computed a request to free its blocks
    on a port it computes from that rank's global DP rank times the prefill's TP size, while the rank listens on its
    pod-local DP rank plus its TP rank. The two agree where all the prefill's DP ranks run in one pod (where they
    would differ there, TP > 1 and DP > 1, the ranks' own ports collide first: ``moriio-listener-port-collision``).
    Where the prefill's DP ranks span pods (``--data-parallel-size-local`` below ``--data-parallel-size``, or one rank
    per pod with ``--data-parallel-rank``), the releases of requests served outside the first pod go to a port no
    rank of that pod binds: the transfers complete, but those blocks stay held for 3600 s and the prefill's KV cache
    fills. A warning: requests are served, slowly once the cache is full."""
    if not _both(pair) or read_mode(pair.prefill) is not True or read_mode(pair.decode) is not True:
        return []
    p = pair.prefill
    if not p.dp or p.dp <= 1 or p.dp_local is None or p.dp_local >= p.dp:
        return []
    tp = p.tp or 1
    return [(f"MoRIIOConnector READ mode on vLLM {fmt(pair.version)}: the prefill runs {p.dp} DP ranks, {p.dp_local} "
             f"per pod. Each rank listens for the decode's release on notify_port + its pod-local DP rank + its TP "
             f"rank, but the decode sends the release to notify_port + global DP rank x {tp} (the prefill's TP size) "
             "+ TP rank on that pod: for the ranks outside the first pod no listener is there, so the blocks those "
             f"ranks lent stay held until the {READ_ABORT_TIMEOUT_S} s read abort timeout and the prefill's KV cache "
             "fills with them.",
             fix_for(pair, "Run the prefill's DP ranks in one pod, or MoRIIO in WRITE mode (read_mode false).",
                     "Run all of the prefill's DP ranks in one pod (--data-parallel-size-local equal to "
                     "--data-parallel-size), or use MoRIIO's WRITE mode (\"read_mode\": \"false\" in both engines' "
                     "kv_connector_extra_config)."))]
