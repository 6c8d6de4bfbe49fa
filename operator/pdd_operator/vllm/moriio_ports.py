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


def moriio_bind_collision(kv_transfer: dict, tp: int, pp: int, dp_local: int) -> tuple[int, str, str] | None:
    """The first port two workers of one MoRIIOConnector engine bind in one pod (one network namespace), as
    ``(port, first binder, second binder)``, else ``None``.

    Each worker binds ``handshake_port + dp_rank + tp_rank`` and ``notify_port + dp_rank + tp_rank`` (see the module
    docstring: ``get_port_offset`` is called without its ``tp_size``), where ``dp_rank`` is the engine core's
    data-parallel rank (global up to 0.27.x, moriio_common.py 0.14.0 l.207; folded to the pod-local rank from 0.28.0 by
    ``fold_local_rank``, 0.28.0 l.194-203, 0.34.0 l.240-248 and l.352-354: both shift every worker of the pod alike,
    so the collisions are the same) and ``tp_rank`` the rank within its TP group, which each pipeline stage has anew.
    So two local DP ranks at TP >= 2 (DP 0 x TP 1 and DP 1 x TP 0), two pipeline stages, or handshake and notify
    bases closer than the offsets reach give one port twice. ZeroMQ's ``bind`` of a ROUTER socket without
    SO_REUSEPORT then raises ``Address already in use``: for the handshake listener inside its thread, before
    ``ready_event.set()``, so the worker waits on ``ready_event.wait()`` (no timeout) for ever (moriio_connector.py
    0.14.0 l.902-908 and l.1155-1172, 0.34.0 l.2217-2223 and l.2826-2841).

    kv_transfer: the ``--kv-transfer-config`` object; tp, pp: the engine's TP and PP sizes; dp_local: the DP ranks
    (engine cores) it starts in this pod. ``None`` too where :func:`moriio_listener_ports` reads no MoRIIO ports."""
    configs = [kv_transfer, *multi_connector_children(kv_transfer)]
    for config in configs:
        if config.get("kv_connector") != MORIIO or third_party_module(config):
            continue
        extra = config.get("kv_connector_extra_config")
        extra = extra if isinstance(extra, dict) else {}
        bases = (("handshake", _port(extra.get("handshake_port"), DEFAULT_HANDSHAKE_PORT)),
                 ("notify", _port(extra.get("notify_port"), DEFAULT_NOTIFY_PORT)))
        if any(base is None for _, base in bases):
            return None
        seen: dict[int, str] = {}
        for dp in range(dp_local):
            for stage in range(pp):
                for rank in range(tp):
                    for name, base in bases:
                        port = base + dp + rank  # type: ignore[operator]
                        who = (f"the {name} listener of local DP rank {dp}"
                               + (f", pipeline stage {stage}" if pp > 1 else "") + f", TP rank {rank}")
                        if port in seen:
                            return port, seen[port], who
                        seen[port] = who
    return None
