"""The KV connector an engine really runs when its command line names another: ``--kv-offloading-size`` and a
repeated ``--kv-transfer-config``.

vLLM builds the engine's ``KVTransferConfig`` from ``--kv-transfer-config`` and then, in
``VllmConfig._post_init_kv_transfer_config`` (vllm/config/vllm.py; read in the 0.18.0 and 0.24.0 sdists and the
0.32.0 wheel), whenever ``--kv-offloading-size`` is set, overwrites it: ``kv_connector`` becomes
``OffloadingConnector`` (``--kv-offloading-backend native``, the default; ``SimpleCPUOffloadConnector`` with
``VLLM_USE_SIMPLE_KV_OFFLOAD`` from 0.24.0), ``LMCacheConnectorV1`` (0.18.0) or ``LMCacheMPConnector`` (0.24.0,
0.32.0) for ``lmcache``, and ``kv_role`` becomes ``kv_both``. A NixlConnector written beside the flag is gone.

A flag given twice keeps its last value: vLLM's ``FlexibleArgumentParser`` only logs ``Found duplicate keys``
(vllm/utils/argparse_utils.py 0.32.0) and argparse stores the last occurrence, which
:func:`pdd_operator.vllm.args.parse_flags` mirrors; :func:`repeated_connectors` names what was overridden.
"""

from __future__ import annotations

import json

from pdd_operator.vllm.versions import Version

#: The first release read here whose ``_post_init_kv_transfer_config`` overwrites the connector (0.18.0 sdist; the
#: flag is older, but no earlier release was read, so before it the rewrite is not claimed).
OFFLOADING_REWRITE_SINCE: Version = (0, 18, 0)

#: ``--kv-offloading-backend`` -> the connector vLLM substitutes (the lmcache name changed between 0.18 and 0.24).
_BACKEND_CONNECTOR = {"native": "OffloadingConnector", "lmcache": "LMCacheMPConnector"}


def offloading_connector(flags: dict, version: Version | None) -> tuple[dict, str] | None:
    """The ``--kv-transfer-config`` vLLM runs instead of the written one when ``--kv-offloading-size`` is set.

    flags: the parsed flags (:func:`~pdd_operator.vllm.args.parse_flags`, last value of a repeated flag).
    version: the engine's vLLM version, ``None`` when unknown (the rewrite is the same in every release read, so
        it is assumed). Returns ``(config, why)``, or ``None`` when the flag is absent, its value is not a literal
        number, or the release predates :data:`OFFLOADING_REWRITE_SINCE`.
    """
    size = flags.get("--kv-offloading-size")
    if size is None or size is True or (version is not None and version < OFFLOADING_REWRITE_SINCE):
        return None
    try:
        float(str(size))
    except ValueError:
        return None
    backend = flags.get("--kv-offloading-backend")
    backend = backend if isinstance(backend, str) else "native"
    connector = _BACKEND_CONNECTOR.get(backend, "OffloadingConnector")
    why = (f"--kv-offloading-size {size} makes vLLM replace the --kv-transfer-config with {connector} (kv_role "
           "kv_both) while it builds its config (vllm/config/vllm.py _post_init_kv_transfer_config, 0.18.0-0.32.0)")
    return {"kv_connector": connector, "kv_role": "kv_both"}, why


def repeated_connectors(argv: list[str]) -> list[str]:
    """The ``kv_connector`` of every ``--kv-transfer-config`` on one command line, in order (``"?"`` for one that is
    not a JSON object); a list of more than one means the earlier ones were overridden by the last."""
    out = []
    for i, arg in enumerate(argv):
        value = None
        if arg == "--kv-transfer-config" and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--kv-transfer-config="):
            value = arg.split("=", 1)[1]
        if value is None:
            continue
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        out.append(str(parsed.get("kv_connector")) if isinstance(parsed, dict) else "?")
    return out


#: The first release whose factory registers ``OffloadingConnector`` (kv_connector/factory.py 0.11.0; not in the
#: 0.10.2 sdist).
OFFLOADING_CONNECTOR_SINCE: Version = (0, 11, 0)
#: The first release whose ``CPUOffloadingSpec`` sizes its CPU pool by ``cpu_bytes_to_use`` instead of
#: ``num_cpu_blocks`` (vllm-project/vllm#24498): v1/kv_offload/cpu.py 0.11.0 lines 24-28 and 0.13.0 lines 24-28 raise
#: "num_cpu_blocks must be specified in kv_connector_extra_config"; 0.14.0 lines 25-29 (the same in 0.14.1, 0.16.0),
#: cpu/spec.py 0.20.0 lines 21-25, 0.24.0 lines 63-67, 0.28.0 line 83 and 0.34.0 lines 99-103 raise
#: "cpu_bytes_to_use must be specified in kv_connector_extra_config". Neither reads the other key.
CPU_BYTES_KEY_SINCE: Version = (0, 14, 0)


def cpu_size_key(version: Version) -> str:
    """The ``kv_connector_extra_config`` key vLLM ``version``'s ``CPUOffloadingSpec`` requires (truthy) when an
    ``OffloadingConnector`` starts: ``"num_cpu_blocks"`` (a block count) before :data:`CPU_BYTES_KEY_SINCE`,
    ``"cpu_bytes_to_use"`` (bytes, all workers together) from it."""
    return "cpu_bytes_to_use" if version >= CPU_BYTES_KEY_SINCE else "num_cpu_blocks"


def offloading_configs(kv_transfer: dict) -> list[dict]:
    """Every ``OffloadingConnector`` config in a ``--kv-transfer-config`` object: the object itself, or the children
    of a ``MultiConnector`` (recursively), each with its own ``kv_connector_extra_config`` as vLLM gives it to the
    child (multi_connector.py: ``KVTransferConfig(**ktc)`` per child dict)."""
    out: list[dict] = []
    if not isinstance(kv_transfer, dict):
        return out
    if kv_transfer.get("kv_connector") == "OffloadingConnector":
        out.append(kv_transfer)
    children = (kv_transfer.get("kv_connector_extra_config") or {})
    children = children.get("connectors") if isinstance(children, dict) else None
    for child in children if isinstance(children, list) else ():
        out += offloading_configs(child)
    return out
