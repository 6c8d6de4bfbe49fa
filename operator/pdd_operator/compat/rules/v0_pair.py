"""A pair of V0 KV connectors under the V0 engine (``VLLM_USE_V1=0``) of vLLM 0.9.0-0.10.0.

``VLLM_USE_V1=0`` runs the V0 engine, whose workers build the connector with ``KVConnectorFactory.create_connector_v0``
(kv_transfer_state.py 0.9.0 line 66, factory.py lines 37-48): ``PyNcclConnector`` and ``MooncakeConnector`` are the V0
``simple_connector.SimpleConnector``, ``MooncakeStoreConnector`` the V0 ``mooncake_store_connector``. 0.10.1 removed the
V0 engine and these names (``kv-connector-unregistered`` judges them there; on the V1 engine ``kv-connector-v0-only``).

A pair whose roles both run the V0 engine with the same such connector (no wrapper), on a known release, the same
model, --dtype, --block-size and TP, is judged (:func:`judged_v0_pair`) by the engine-alone rules, these among them:

- ``v0-pynccl-kv-rank``: ``PyNcclPipe`` joins a ``StatelessProcessGroup`` of ``kv_parallel_size`` ranks at
  ``kv_ip:kv_port + 2 * rank (+1)`` as ``kv_rank`` (kv_pipe/pynccl_pipe.py 0.9.0 lines 47-76, simple_connector.py
  lines 72-110; the same in 0.9.1, 0.9.2, 0.10.0). Only rank 0 listens (distributed/utils.py 0.9.0
  ``StatelessProcessGroup.create``, ``launch_server = rank == 0``, lines 372-402): two roles with the same
  ``kv_rank`` both bind the store (the second fails, or on another host cannot bind the first's ``kv_ip``) or,
  neither being 0 (``kv_rank`` unset is ``None``), nobody listens and the store connect times out; the group's
  ``barrier`` never completes either way. The same before 0.9.0 (:data:`PYNCCL_RANK_RELEASES`): the 0.7.0 sdist's
  pynccl_pipe.py lines 61-68 (``StatelessProcessGroup.create(host=kv_ip, port=kv_port + port_offset, rank=kv_rank,
  world_size=kv_parallel_size)`` then ``barrier()``) over distributed/utils.py lines 216-220 (``TCPStore(...,
  is_master=(rank == 0))``), and the 0.8.0 and 0.8.5 wheels' pynccl_pipe.py lines 63-71 over utils.py line 242
  (0.8.0 ``is_master=(rank == 0)``; 0.8.5 ``launch_server = rank == 0``, lines 242-258). On 0.7.x the V0 engine is
  the default (envs.py 0.7.0 lines 476-477, ``VLLM_USE_V1`` "0"): only ``VLLM_USE_V1=1`` leaves it. From 0.8.0 V1
  is the default and whether a ``--kv-transfer-config`` falls back to V0 depends on the release
  (``_is_v1_supported_oracle``: 0.8.0's arg_utils.py lines 1560-1564 falls back, 0.8.5's no longer tests it), so
  there, as on 0.9.0-0.10.0, only ``VLLM_USE_V1=0`` is read as the V0 engine.
- ``v0-mooncake-config-path``: ``MooncakeStoreConnector`` (mooncake_store_connector.py 0.9.0 lines 40-47) and the
  ``MooncakeConnector`` ``SimpleConnector`` (simple_connector.py 0.9.0 lines 48-57) raise ``ValueError`` where
  ``MOONCAKE_CONFIG_PATH`` is not in the engine's environment.
"""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.compat.rules.v0_connector import V0_NAMES_RELEASES
from pdd_operator.vllm.versions import UPSTREAM_REPOSITORIES, Version, image_repository

#: The V0 connectors whose pair :func:`judged_v0_pair` judges (read in 0.9.0, 0.9.1, 0.9.2, 0.10.0).
V0_JUDGED = ("PyNcclConnector", "MooncakeStoreConnector", "MooncakeConnector")
#: What must be equal in both roles for a judged pair: what neither connector checks nor these rules compare.
_SAME = ("model", "dtype", "block_size", "tp")
_MOONCAKE_V0 = ("MooncakeStoreConnector", "MooncakeConnector")


def _v0_engine(r: RoleConfig) -> bool:
    """The role runs vLLM 0.9.0-0.10.0's V0 engine (``VLLM_USE_V1=0``, envs.py)."""
    version = r.version
    return (version is not None and V0_NAMES_RELEASES[0] <= version < V0_NAMES_RELEASES[1]
            and str(r.env.get("VLLM_USE_V1", "")).strip() == "0")


def judged_v0_pair(pair: PDPair) -> bool:
    """Both roles run the V0 engine of a known 0.9.0-0.10.0 release with the same :data:`V0_JUDGED` connector (no
    wrapper), the same model, --dtype, --block-size and TP: such a pair is judged (ok where no rule fails)."""
    names = {r.connector for r in pair.roles}
    return (len(names) == 1 and names <= set(V0_JUDGED) and all(_v0_engine(r) and not r.wrapper for r in pair.roles)
            and all(getattr(pair.prefill, k) == getattr(pair.decode, k) for k in _SAME))


#: The releases whose V0 PyNcclPipe joins its group as ``kv_rank``, rank 0 alone listening: 0.7.0 (the first read)
#: until 0.10.1, which removed the V0 engine.
PYNCCL_RANK_RELEASES: tuple[Version, Version] = ((0, 7, 0), V0_NAMES_RELEASES[1])
#: The first release whose V0 engine is not the default (``VLLM_USE_V1`` "1" in envs.py 0.8.0 lines 522-523).
V1_DEFAULT_SINCE: Version = (0, 8, 0)


def _pynccl_v0_engine(r: RoleConfig) -> bool:
    """The role runs the V0 engine of a release of :data:`PYNCCL_RANK_RELEASES`: on 0.7.x unless ``VLLM_USE_V1=1``
    (V0 the default), from 0.8.0 only with ``VLLM_USE_V1=0``."""
    version = r.version
    if version is None or not PYNCCL_RANK_RELEASES[0] <= version < PYNCCL_RANK_RELEASES[1]:
        return False
    use_v1 = str(r.env.get("VLLM_USE_V1", "")).strip()
    return use_v1 == "0" or (version < V1_DEFAULT_SINCE and use_v1 in ("", "false", "False"))


def _kv_rank(r: RoleConfig) -> object:
    return r.kv_transfer_written.get("kv_rank") if isinstance(r.kv_transfer_written, dict) else None


@rule(
    id="v0-pynccl-kv-rank", family="connector", severity="error",
    fields=("spec.kvTransfer.connector",),
    source=("vllm distributed/kv_transfer/kv_pipe/pynccl_pipe.py PyNcclPipe.__init__ (0.9.0 lines 47-76), "
            "distributed/utils.py StatelessProcessGroup.create launch_server = rank == 0 (0.9.0 lines 372-402); "
            "the same in 0.9.1, 0.9.2, 0.10.0; before them pynccl_pipe.py 0.7.0 lines 61-68 over utils.py "
            "is_master=(rank == 0) lines 216-220, 0.8.0 and 0.8.5 lines 63-71 over utils.py line 242; V0 the "
            "default engine on 0.7.x (envs.py 0.7.0 lines 476-477)"),
    since=PYNCCL_RANK_RELEASES[0], until=PYNCCL_RANK_RELEASES[1], without_connector=True,
    example='both engines --kv-transfer-config {"kv_connector":"PyNcclConnector","kv_rank":0,...} with VLLM_USE_V1=0',
)
def check_v0_pynccl_kv_rank(pair: PDPair) -> list[Violation]:
    """Two V0-engine PyNcclConnector roles hold different ``kv_rank`` values (one of them 0, which listens)."""
    if not all(r.connector == "PyNcclConnector" and _pynccl_v0_engine(r) for r in pair.roles):
        return []
    ranks = [_kv_rank(r) for r in pair.roles]
    if ranks[0] != ranks[1] or (ranks[0] is not None and not isinstance(ranks[0], int)):
        return []
    what = (f"both set kv_rank {ranks[0]}" if ranks[0] is not None else "neither sets kv_rank")
    why = ("both bind the group's store at kv_ip:kv_port as its rank 0 (the second fails)" if ranks[0] == 0 else
           "neither is rank 0, which alone listens at kv_ip:kv_port: the store connect times out")
    return [(
        f"The prefill and decode PyNcclConnector engines (V0 engine) {what}: PyNcclPipe joins a StatelessProcessGroup "
        f"as kv_rank, and {why}; the group's barrier never completes and no engine starts.",
        fix_for(pair, "Set kv_rank 0 on the producer and 1 on the consumer, kv_parallel_size 2.",
                'Set "kv_rank":0 in the prefill\'s --kv-transfer-config and "kv_rank":1 in the decode\'s, both with '
                '"kv_parallel_size":2 and the prefill host\'s "kv_ip".'),
    )]


@rule(
    id="v0-mooncake-config-path", family="connector", severity="error",
    fields=("spec.kvTransfer.connector", "spec.engine.env"),
    source=("vllm distributed/kv_transfer/kv_connector/mooncake_store_connector.py (0.9.0 lines 40-47), "
            "simple_connector.py (0.9.0 lines 48-57); the same in 0.9.1, 0.9.2, 0.10.0"),
    since=V0_NAMES_RELEASES[0], until=V0_NAMES_RELEASES[1], without_connector=True,
    example='--kv-transfer-config {"kv_connector":"MooncakeStoreConnector",...} with VLLM_USE_V1=0 and no '
    "MOONCAKE_CONFIG_PATH",
)
def check_v0_mooncake_config_path(pair: PDPair) -> list[Violation]:
    """A V0-engine MooncakeStoreConnector / MooncakeConnector role has ``MOONCAKE_CONFIG_PATH`` in its environment.

    Only the environment the manifest or script sets is read: an error for vLLM's own images and host installs (no
    Dockerfile of theirs sets it), a warning on other images, whose Dockerfile may set it."""
    out: list[Violation] = []
    for r in pair.roles:
        if r.connector not in _MOONCAKE_V0 or r.wrapper or not _v0_engine(r) or "MOONCAKE_CONFIG_PATH" in r.env:
            continue
        own_image = bool(r.image) and image_repository(r.image) not in UPSTREAM_REPOSITORIES
        message = (f"{r.role}: {r.connector} on the V0 engine reads MOONCAKE_CONFIG_PATH, which the environment lacks: "
                   "ValueError as the connector is built, the engine never starts.")
        if own_image:
            message += (f" {r.image} is not one of vLLM's images and may set it itself (not read here), so this is a "
                        "warning.")
        fix = fix_for(pair, "Set MOONCAKE_CONFIG_PATH to the Mooncake config JSON in the engine's env.",
                      f"Set MOONCAKE_CONFIG_PATH=/path/to/mooncake_config.json in the {r.role} container's environment.")
        out.append((message, fix, "warning") if own_image else (message, fix))
    return out
