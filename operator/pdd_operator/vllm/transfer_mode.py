"""The NIXL transfer mode an engine runs (pull or push), from its ``--kv-transfer-config`` and its vLLM release.

vLLM's NIXL connectors either pull (``NixlConnector``, ``NixlPullConnector``: the decode READs the prefill's KV
blocks) or push (``NixlPushConnector``: the prefill WRITEs into blocks the decode registered with it). From 0.34.0
the name ``NixlConnector`` also reads ``kv_connector_extra_config.transfer_mode``:
``KVConnectorFactory.get_connector_class`` (vllm/distributed/kv_transfer/kv_connector/factory.py, 0.34.0 sdist
lines 126-130) resolves ``"pull"`` (the default) to ``NixlPullConnector`` and ``"push"`` to ``NixlPushConnector``,
and raises ``ValueError("Invalid NixlConnector transfer_mode: ...")`` for any other value while the engine builds
its config; the explicit ``NixlPullConnector`` / ``NixlPushConnector`` names ignore the key
(docs/design/nixl_kv_push_connector.md, 0.34.0). Releases before it never read the key (the 0.33.0 sdist's
factory.py has no such branch): there ``NixlConnector`` pulls whatever the key says. Under ``MultiConnector`` the
key belongs to the NIXL child's extra config, which is the config this module is given.
"""

from __future__ import annotations

from typing import Literal

from pdd_operator.vllm.versions import Version

#: The first release that registers ``NixlPushConnector`` (``KVConnectorFactory.register_connector`` in
#: vllm/distributed/kv_transfer/kv_connector/factory.py: absent from the 0.23.0 sdist, lines 189-191 in 0.24.0).
PUSH_CONNECTOR_SINCE: Version = (0, 24, 0)
#: The first release whose NIXL connectors handle a pipeline-parallel prefill (``pp_size`` in
#: kv_connector/v1/nixl/base_worker.py and push_worker.py: none in the 0.24.0 / 0.25.0 sdists, from 0.26.0). Push with
#: prefill PP > 1 therefore needs this release, not just :data:`PUSH_CONNECTOR_SINCE`.
PUSH_PIPELINE_PARALLEL_SINCE: Version = (0, 26, 0)
#: The first release whose ``NixlConnector`` reads ``kv_connector_extra_config.transfer_mode`` (0.34.0 sdist).
TRANSFER_MODE_OPTION_SINCE: Version = (0, 34, 0)
#: The values 0.34.0's factory accepts (case-sensitive).
MODES = ("pull", "push")

Mode = Literal["pull", "push"]


def option(extra: dict) -> object | None:
    """The raw ``transfer_mode`` of a connector's ``kv_connector_extra_config`` (``None`` when absent)."""
    return extra.get("transfer_mode") if isinstance(extra, dict) else None


def transfer_mode(connector: str | None, extra: dict, version: Version | None) -> Mode | None:
    """The mode a NIXL connector runs: ``"push"``, ``"pull"``, or ``None`` when it cannot be told.

    connector: the (unwrapped) ``kv_connector`` name; extra: its ``kv_connector_extra_config``; version: the
    engine's vLLM release, ``None`` when unknown. ``None`` is returned for a connector that is not vLLM's NIXL
    one, for a ``NixlConnector`` whose ``transfer_mode`` 0.34+ refuses (:func:`invalid_option`), and for a
    ``NixlConnector`` with ``transfer_mode`` ``"push"`` on an unknown release (0.34+ pushes, older releases pull).
    """
    if connector == "NixlPushConnector":
        return "push"
    if connector == "NixlPullConnector":
        return "pull"
    if connector != "NixlConnector":
        return None
    value = option(extra)
    if value is None or value == "pull" or (version is not None and version < TRANSFER_MODE_OPTION_SINCE):
        return "pull"
    if version is None or value not in MODES:
        return None
    return "push"


def invalid_option(connector: str | None, extra: dict) -> object | None:
    """The ``transfer_mode`` value 0.34+'s factory refuses for this connector (any value but ``"pull"`` /
    ``"push"`` given to ``NixlConnector``), else ``None``."""
    value = option(extra)
    if connector != "NixlConnector" or value is None or value in MODES:
        return None
    return value


def ignored_option(connector: str | None, extra: dict, version: Version | None) -> bool:
    """``NixlConnector`` is given ``transfer_mode`` ``"push"`` on a release that does not read it (before 0.34.0):
    the engine pulls."""
    return (connector == "NixlConnector" and option(extra) == "push" and version is not None
            and version < TRANSFER_MODE_OPTION_SINCE)
