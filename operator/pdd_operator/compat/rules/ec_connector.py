"""The encoder-cache (EC) connector of vLLM's encoder/prefill/decode disaggregation: ``--ec-transfer-config``'s
``ec_connector`` must be a name the engine's release registers (:mod:`pdd_operator.vllm.ec_connectors`).

A prefill that consumes encoder outputs (``ec_role`` ``ec_consumer``) carries this config beside its KV connector; the
EC connector is not part of the KV transfer (no NIXL hash factor), but an engine whose EC connector the factory refuses
does not start, so no KV is ever produced. Judged role by role (an engine-alone rule), on upstream vLLM images of the
releases read (0.11.1-0.34.0); a name loaded from ``ec_connector_module_path`` is not judged.
"""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.ec_connectors import EC_REGISTERED, EC_RENAMED, ec_names, ec_registered
from pdd_operator.vllm.versions import UPSTREAM_REPOSITORIES, fmt, image_repository


@rule(
    id="ec-connector-unregistered", family="connector", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs"),
    source=("vllm distributed/ec_transfer/ec_connector/factory.py ECConnectorFactory.get_connector_class: "
            "ValueError('Unsupported connector type: ...') (line 71) for a name not registered and no "
            "ec_connector_module_path, raised as the scheduler builds the connector at start-up "
            "(v1/core/sched/scheduler.py 0.30.0 line 181); registries of the 0.11.1-0.14.1 and 0.16.0-0.34.0 sdists: "
            "ECSharedStorageConnector 0.11.1-0.12.0, ECExampleConnector from 0.13.0, ECCPUConnector from 0.26.0, "
            "ECMooncakeConnector from 0.30.0"),
    example='--ec-transfer-config {"ec_connector":"ECCPUConnector","ec_role":"ec_consumer"} on vllm/vllm-openai:v0.25.0',
    without_connector=True, one_engine=True,
)
def check_ec_connector_registered(pair: PDPair) -> list[Violation]:
    """An engine of an upstream vLLM image names an EC connector (``--ec-transfer-config`` ``ec_connector``) its
    release registers, or loads it from ``ec_connector_module_path``.

    An error per engine whose release (0.11.1-0.34.0, read) does not register the name: the engine raises
    'Unsupported connector type' while it starts. Not judged for an unknown release, a release outside those read,
    an image not built by vLLM (a fork may register more), or a config that cannot be read.
    """
    out: list[Violation] = []
    for r in pair.roles:
        ec = r.ec_transfer_written
        name = ec.get("ec_connector")
        if (not isinstance(name, str) or not name or ec.get("ec_connector_module_path") or r.version is None
                or image_repository(r.image) not in UPSTREAM_REPOSITORIES):
            continue
        if ec_registered(name, r.version) is not False:
            continue
        since = EC_REGISTERED.get(name, (None, None))[0]
        other = EC_RENAMED.get(name)
        why = (f"it is {other} in this release; the name changed in 0.13.0" if other and ec_registered(other, r.version)
               else f"it arrived in {fmt(since)}" if since and r.version < since
               else "no release from 0.11.1 to 0.34.0 registers it")
        registered = ", ".join(ec_names(r.version))
        out.append((
            f"{r.role}: vLLM {fmt(r.version)} ({r.image}) registers no EC connector named {name} ({why}; it registers "
            f"{registered}): ECConnectorFactory raises 'Unsupported connector type: {name}' when the scheduler builds "
            f"the EC connector, so the {r.role} does not start and no KV is produced for the pair.",
            fix_for(pair, f"Name an EC connector vLLM {fmt(r.version)} registers ({registered}).",
                    (f"Write \"ec_connector\":\"{other}\"" if other and ec_registered(other, r.version)
                     else f"Use an image of vLLM {fmt(since)} or later" if since and r.version < since
                     else f"Name one of {registered}")
                    + f" in the {r.role} container's --ec-transfer-config, or set ec_connector_module_path to the "
                    "module that defines it."),
        ))
    return out


#: EC connectors that hand encoder outputs over a directory (``ec_connector_extra_config.shared_storage_path``,
#: default ``/tmp``): ECSharedStorageConnector (0.11.1-0.12.0 ``shared_storage_connector.py`` line 56) and its 0.13.0
#: rename ECExampleConnector (0.34.0 ``example_connector.py`` lines 61-63).
_STORAGE_CONNECTORS = frozenset({"ECSharedStorageConnector", "ECExampleConnector"})


def _storage(ec: dict) -> str:
    extra = ec.get("ec_connector_extra_config")
    path = extra.get("shared_storage_path") if isinstance(extra, dict) else None
    return path if isinstance(path, str) and path else "/tmp"


@rule(
    id="ec-connector-pair-mismatch", family="connector", severity="warning",
    fields=("spec.prefill.extraArgs",),
    source=("vllm v1/core/sched/scheduler.py (0.34.0 lines 2239-2245; the same test from 0.11.1): the prefill's "
            "scheduler loads an encoder output only when its own EC connector's has_cache_item finds it and otherwise "
            "schedules the encoder itself; ECExampleConnector/ECSharedStorageConnector look in their own "
            "shared_storage_path (example_connector.py 0.34.0 lines 61-63, default /tmp); the connector is the class "
            "--ec-transfer-config's ec_connector names (ec_connector/factory.py)"),
    example=('encode: {"ec_connector":"ECExampleConnector","ec_role":"ec_producer"} and prefill: '
             '{"ec_connector":"ECCPUConnector","ec_role":"ec_consumer"}'),
)
def check_ec_connector_pair(pair: PDPair) -> list[Violation]:
    """The prefill reads encoder outputs through the EC connector its encode workers write them with.

    For each encode worker of the pair's deployment (:attr:`PDPair.encoders`) whose ``--ec-transfer-config`` is
    written: a prefill with no EC connector, one that is not a consumer (``ec_role`` ``ec_producer``), one that names
    another connector, or, for the directory connectors, another ``shared_storage_path``, never finds the worker's
    outputs. vLLM fails nothing: the prefill runs the vision encoder itself for every request, so the encode
    disaggregation does nothing (a warning). A prefill whose EC settings come from a launcher's own flags (Dynamo's
    ``--ec-consumer-mode`` / ``--ec-connector-backend``) or an ``ec_connector_module_path`` is not judged.
    """
    p = pair.prefill
    if any(name.startswith("--ec-") for name, _ in p.launcher_flags):
        return []
    out: list[Violation] = []
    mine = p.ec_transfer_written
    for where, enc in pair.encoders:
        ec = enc.ec_transfer_written
        name = ec.get("ec_connector")
        if not isinstance(name, str) or ec.get("ec_connector_module_path") or mine.get("ec_connector_module_path"):
            continue
        theirs = f"the encode worker {where} writes its encoder outputs through {name}"
        if not mine.get("ec_connector"):
            why = "the prefill has no --ec-transfer-config, so it never loads them"
            fix = (f"Give the prefill container --ec-transfer-config '{{\"ec_connector\":\"{name}\","
                   "\"ec_role\":\"ec_consumer\"}' (with the encoder's extra config).")
        elif mine.get("ec_role") == "ec_producer":
            why = "the prefill's --ec-transfer-config has ec_role ec_producer, so it never loads them"
            fix = "Set \"ec_role\":\"ec_consumer\" in the prefill container's --ec-transfer-config."
        elif mine["ec_connector"] != name:
            why = f"the prefill reads through {mine['ec_connector']}, which never sees them"
            fix = f"Name the same EC connector ({name}) in the prefill's and the encode worker's --ec-transfer-config."
        elif name in _STORAGE_CONNECTORS and _storage(mine) != _storage(ec):
            why = (f"into {_storage(ec)}, and the prefill looks in {_storage(mine)} (ec_connector_extra_config."
                   "shared_storage_path)")
            fix = ("Give both containers the same shared_storage_path in --ec-transfer-config, on a volume both "
                   "mount.")
        else:
            continue
        out.append((
            f"{theirs}, but {why}: vLLM's scheduler loads an encoder output only when its EC connector finds it "
            "(has_cache_item) and otherwise runs the encoder on the prefill, so every request is encoded again on "
            "the prefill and the encode worker's work is thrown away (nothing fails).",
            fix_for(pair, fix, fix),
        ))
    return out
