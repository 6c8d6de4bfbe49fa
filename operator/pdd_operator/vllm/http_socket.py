"""Whether vLLM's HTTP (OpenAI API) listening socket sets ``SO_REUSEPORT``, per release and launch.

Linux lets a second TCP socket bind and listen on a port another socket already listens on only when both set
``SO_REUSEPORT`` before ``bind`` and were created by the same effective UID (net/ipv4/inet_connection_sock.c
``inet_csk_bind_conflict`` / ``sk_reuseport_match``, Linux 4.6 to 6.x); the kernel then spreads incoming
connections over both listeners. ``SO_REUSEADDR`` alone never lets two sockets listen on one port (the conflict
check skips only a socket that is not yet listening, so the second ``listen`` fails with EADDRINUSE).

- **0.9.0-0.24.0**: ``create_server_socket`` sets ``SO_REUSEADDR`` and ``SO_REUSEPORT`` unconditionally
  (vllm/entrypoints/openai/api_server.py: 0.9.0 lines 1275-1285, 0.11.0 lines 1801-1812, 0.20.0 lines 496-507,
  0.24.0 lines 482-493), and every TCP launch binds through it: ``vllm serve`` (``run_server`` / ``setup_server``),
  ``--api-server-count`` > 1 (cli/serve.py ``run_multi_api_server``) and ``python -m
  vllm.entrypoints.openai.api_server``. Two such engines of one user in one network namespace both listen on one
  ``--port``.
- **0.25.0-0.34.0**: ``create_server_socket(addr, *, reuse_port)`` sets ``SO_REUSEPORT`` only when asked
  (api_server.py 0.25.0 lines 512-527; entrypoints/launchers/launcher.py 0.29.0 lines 207-220, 0.34.0 lines
  343-356), and only ``run_multi_api_server`` asks, with ``reuse_port=num_api_servers > 1`` (cli/serve.py 0.25.0
  line 284, 0.34.0 line 303); a single API server (``run_server``: api_server.py 0.25.0 line 697,
  launchers/api_server/entry.py 0.34.0 line 175) and ``vllm launch`` (cli/launch.py 0.25.0 line 123) pass
  ``False``. The API server count defaults to the data-parallel size, to the local one with hybrid load balancing,
  and to 1 with external or multi-port load balancing or the Rust front end (cli/serve.py 0.25.0 lines 99-127).
- ``--uds`` binds a Unix socket instead (0.11.0+ ``create_server_unix_socket``): no TCP port at all.
"""

from __future__ import annotations

#: The last release whose HTTP socket always sets SO_REUSEPORT (see the module docstring).
ALWAYS_REUSE_PORT_UNTIL = (0, 24, 99)
#: The releases of each behaviour, for messages.
ALWAYS_RELEASES = "0.9.0-0.24.x"
GATED_SINCE_TEXT = "0.25.0"


def api_server_count(serve: bool, flags: dict, dp: int | None, dp_local: int | None, env: dict) -> int | None:
    """How many API server processes the engine's launch starts on its HTTP port (vLLM 0.25.0+ cli/serve.py lines
    99-127): 1 for an entry point other than ``vllm serve`` (``python -m vllm.entrypoints.openai.api_server``);
    else ``--api-server-count`` where written, 1 with external or multi-port load balancing (``--data-parallel-rank``,
    ``--data-parallel-external-lb``, ``--data-parallel-multi-port-external-lb``) or ``VLLM_RUST_FRONTEND_PATH``, the
    local DP size with hybrid load balancing (``--data-parallel-start-rank``, ``--data-parallel-hybrid-lb``), else the
    DP size. ``None`` where a value it needs is not in the files. ``flags`` maps flag names to parsed values."""
    if not serve:
        return 1
    raw = flags.get("--api-server-count")
    if raw is not None:
        return int(raw) if str(raw).isdigit() else None
    if "VLLM_RUST_FRONTEND_PATH" in env:
        return 1
    if any(flags.get(f) is True or str(flags.get(f)).lower() == "true"
           for f in ("--data-parallel-external-lb", "--data-parallel-multi-port-external-lb")) \
            or "--data-parallel-rank" in flags:
        return 1
    if "--data-parallel-start-rank" in flags or flags.get("--data-parallel-hybrid-lb") is True:
        return dp_local
    return dp


def http_reuse_port(version: tuple[int, ...] | None, api_servers: int | None) -> bool | None:
    """Whether the engine's HTTP socket sets SO_REUSEPORT: always on 0.9.0-0.24.x, only with more than one API server
    (``api_servers``, :func:`api_server_count`) from 0.25.0. ``None`` where it depends on what is not known (the
    release, or the count from 0.25.0 on)."""
    if version is not None and version <= ALWAYS_REUSE_PORT_UNTIL:
        return True
    if api_servers is not None and api_servers > 1:
        return True  # SO_REUSEPORT on every release
    if version is None or api_servers is None:
        return None
    return False
