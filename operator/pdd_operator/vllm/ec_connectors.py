"""The encoder-cache (EC) connectors each vLLM release registers, for ``--ec-transfer-config``'s ``ec_connector``.

vLLM's encoder/prefill/decode disaggregation (``--ec-transfer-config``, first in 0.11.1: engine/arg_utils.py line 1146;
vllm/config/ec_transfer.py ``ECTransferConfig``) builds its EC connector with ``ECConnectorFactory``
(vllm/distributed/ec_transfer/ec_connector/factory.py): ``get_connector_class`` looks ``ec_connector`` up in the
registry and, when it is absent and ``ec_connector_module_path`` is unset, raises ``ValueError("Unsupported connector
type: <name>")`` (factory.py line 71 in every sdist read). The scheduler builds it while the engine starts
(v1/core/sched/scheduler.py: 0.12.0 line 126, 0.13.0 line 133, 0.25.0 line 160, 0.30.0 line 181), so such an engine
never starts.

The registries (``register_connector`` calls, factory.py lines 81-96) of the 0.11.1, 0.11.2, 0.12.0, 0.13.0, 0.14.0,
0.14.1, 0.16.0-0.34.0 sdists were read: ``ECSharedStorageConnector`` in 0.11.1-0.12.0 only (0.13.0 renamed it
``ECExampleConnector``, no alias: no ``ECSharedStorageConnector`` anywhere in 0.13.0's tree), ``ECCPUConnector`` from
0.26.0 (absent from 0.25.1), ``ECMooncakeConnector`` from 0.30.0 (absent from 0.29.0). 0.15.x was not read; the
releases around it (0.14.1, 0.16.0) register the same single name, so it is judged with them.
"""

from __future__ import annotations

from pdd_operator.vllm.versions import Version

#: The first release with ``--ec-transfer-config`` (and an EC connector registry), and the newest release read.
EC_SINCE: Version = (0, 11, 1)
EC_NEWEST_READ: Version = (0, 34, 0)

#: name -> (first release that registers it, first release that no longer does; ``None``: still registered in
#: :data:`EC_NEWEST_READ`), within :data:`EC_SINCE`-:data:`EC_NEWEST_READ`.
EC_REGISTERED: dict[str, tuple[Version, Version | None]] = {
    "ECSharedStorageConnector": ((0, 11, 1), (0, 13, 0)),
    "ECExampleConnector": ((0, 13, 0), None),
    "ECCPUConnector": ((0, 26, 0), None),
    "ECMooncakeConnector": ((0, 30, 0), None),
}

#: The other name of the renamed example connector (the fix).
EC_RENAMED = {"ECSharedStorageConnector": "ECExampleConnector", "ECExampleConnector": "ECSharedStorageConnector"}


def ec_registered(name: str, version: Version) -> bool | None:
    """Whether vLLM ``version`` registers the EC connector ``name``: ``True``/``False`` within the releases read
    (:data:`EC_SINCE`-:data:`EC_NEWEST_READ`), ``None`` outside them (before 0.11.1 the flag itself is refused:
    ``cli-flag-not-yet``; after 0.34.0 a later release may register it)."""
    if not EC_SINCE <= version <= EC_NEWEST_READ:
        return None
    since, until = EC_REGISTERED.get(name, (None, None))
    return since is not None and version >= since and (until is None or version < until)


def ec_names(version: Version) -> tuple[str, ...]:
    """The EC connector names vLLM ``version`` registers (within the releases read; ``()`` outside them), sorted."""
    return tuple(sorted(n for n in EC_REGISTERED if ec_registered(n, version)))
