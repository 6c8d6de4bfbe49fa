"""The TCP ports a vLLM ``MoRIIOConnector`` engine listens on besides its HTTP ``--port`` (AMD's MORI-IO, ROCm).

Each worker (one per TP rank and data-parallel rank the engine runs) binds two ZeroMQ ROUTER sockets on every
interface (``tcp://*:<port>``), neither with SO_REUSEPORT:

* the handshake listener, on ``handshake_port + get_port_offset(dp_rank, tp_rank)``
  (``MoRIIOConnectorWorker.side_channel_port`` and ``_moriio_handshake_listener``: moriio_connector.py 0.14.0 lines
  673-675 and 902-904, 0.25.0 lines 967-969 and 1211-1213, 0.34.0 lines 1949-1951 and 2217-2219);
* the notify listener, on ``notify_port + get_port_offset(dp_rank, tp_rank)`` (``MoRIIOConfig.from_vllm_config``:
  moriio_common.py 0.14.0 lines 211 and 221, 0.25.0 lines 287 and 312, 0.34.0 lines 357 and 398; bound by
  ``async_wait_reqid``, moriio_engine.py 0.14.0 lines 489-490, 0.25.0 lines 691-692, 0.34.0 lines 1005-1006).

``get_port_offset(dp_rank, tp_rank)`` is ``dp_rank * 1 + tp_rank`` (its ``tp_size`` defaults to 1 and is not passed:
moriio_common.py 0.14.0 lines 170-171, 0.25.0 lines 190-191, 0.34.0 lines 236-237). Unset or empty ports take the
connector's defaults, ``handshake_port`` 6301 and ``notify_port`` 61005 (``MoRIIOConstants``: moriio_common.py
0.14.0 lines 240-241, 0.25.0 lines 339-340, 0.34.0 lines 429-430; filled in by ``MoRIIOConnector.__init__``,
moriio_connector.py 0.14.0 lines 134-138, 0.25.0 lines 237-241, 0.34.0 lines 347-351). The same in every release
that registers the connector (0.14.0-0.34.0 read).
"""

from __future__ import annotations

from collections.abc import Iterable

from pdd_operator.vllm.kv_transfer_config import multi_connector_children, third_party_module

MORIIO = "MoRIIOConnector"
#: ``MoRIIOConstants.DEFAULT_HANDSHAKE_PORT`` / ``DEFAULT_NOTIFY_PORT`` (strings in vLLM, read with ``int()``).
DEFAULT_HANDSHAKE_PORT = 6301
DEFAULT_NOTIFY_PORT = 61005


def _port(value: object, default: int) -> int | None:
    """A port as vLLM reads it (``int(extra_config[...])``; unset, ``None`` or ``""`` -> the default); ``None`` for
    a value that is no literal integer (a variable the files do not set)."""
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return None
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def moriio_listener_ports(kv_transfer: dict, tp: int | None, dp_ranks: Iterable[int]) -> tuple[int, ...]:
    """The handshake and notify ports a MoRIIOConnector engine binds (ascending, no repeats): for each of its
    data-parallel ranks ``dp_ranks`` and TP ranks ``range(tp)``, ``base + dp_rank + tp_rank`` of both bases.

    kv_transfer: the ``--kv-transfer-config`` object as written (``MoRIIOConnector`` at its top or as a
    ``MultiConnector`` child); tp: ``--tensor-parallel-size`` (``None``: not known, then rank 0 only).
    Returns ``()`` for another connector, a ``MoRIIOConnector`` class loaded from a module outside vLLM
    (``kv_connector_module_path``: that package's code, whose ports these are not) or a port that is no literal
    integer."""
    configs = [kv_transfer, *multi_connector_children(kv_transfer)]
    ports: set[int] = set()
    for config in configs:
        if config.get("kv_connector") != MORIIO or third_party_module(config):
            continue
        extra = config.get("kv_connector_extra_config")
        extra = extra if isinstance(extra, dict) else {}
        bases = (_port(extra.get("handshake_port"), DEFAULT_HANDSHAKE_PORT),
                 _port(extra.get("notify_port"), DEFAULT_NOTIFY_PORT))
        if None in bases:
            continue
        for base in bases:
            ports.update(base + dp + rank for dp in dp_ranks for rank in range(tp or 1))  # type: ignore[operator]
    return tuple(sorted(ports))
