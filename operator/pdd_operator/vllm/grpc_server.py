"""The flags of ``vllm serve``'s HTTP front end that vLLM's gRPC server refuses, read release by release.

vLLM's gRPC server (``python -m vllm.entrypoints.grpc_server``, 0.14.0 on; from 0.30.0 a re-export of
``vllm.entrypoints.launchers.grpc_server``) builds its own ``FlexibleArgumentParser``: ``--host`` and ``--port`` (and
``--disable-log-stats-server`` on 0.14.0-0.17.1), then ``AsyncEngineArgs.add_cli_args`` (grpc_server.py ``main``:
0.14.0 l.492-520, 0.18.0 l.140-161, 0.25.0 l.168-189; launchers/grpc_server.py 0.30.0 l.168-189, 0.34.0 l.289-310).
It never calls ``make_arg_parser``, so the HTTP front end's own flags (the ``FrontendArgs``/``BaseFrontendArgs`` fields
and ``make_arg_parser``'s ``--headless``, ``--api-server-count``, ``--grpc``: vllm/entrypoints/openai/cli_args.py
0.14.0-0.28.0, launchers/cli_args.py 0.29.0-0.32.0, common/cli_args.py 0.33.0-0.34.0) are unknown to it and argparse
stops with 'unrecognized arguments' (exit 2). A front-end flag that is a prefix of one the gRPC parser defines
(``--config``: argparse's abbreviations, and FlexibleArgumentParser reads ``--config`` itself) is not listed.

Read in every sdist from 0.14.0 to 0.34.0 that has a gRPC server (0.14.0, 0.14.1, 0.16.0-0.34.0, patch releases
included; 0.15.x not read) with dev/gen_vllm_grpc_flags.py.
"""

from __future__ import annotations

from pdd_operator.vllm.versions import Version

#: The first release with vLLM's gRPC server module (vllm/entrypoints/grpc_server.py, absent from 0.13.0).
GRPC_SERVER_SINCE: Version = (0, 14, 0)

#: Modules whose ``python -m`` runs vLLM's gRPC server (its own parser, not ``vllm serve``'s).
GRPC_SERVER_MODULES: tuple[str, ...] = ("vllm.entrypoints.grpc_server", "vllm.entrypoints.launchers.grpc_server")

#: Long flag -> (the first release read whose gRPC server refuses it while ``vllm serve`` defines it, the last such
#: release read, ``None``: every release read up to 0.34.0).
GRPC_REFUSED: dict[str, tuple[Version, Version | None]] = {
    "--allow-credentials": ((0, 14, 0), None),
    "--allowed-headers": ((0, 14, 0), None),
    "--allowed-methods": ((0, 14, 0), None),
    "--allowed-origins": ((0, 14, 0), None),
    "--anthropic-disabled-thinking-effort": ((0, 31, 0), None),
    "--api-key": ((0, 14, 0), None),
    "--api-server-count": ((0, 14, 0), None),
    "--chat-template": ((0, 14, 0), None),
    "--chat-template-content-format": ((0, 14, 0), None),
    "--cohere-format": ((0, 27, 0), None),
    "--cohere-is-reasoning-model": ((0, 27, 0), None),
    "--data-parallel-supervisor-port": ((0, 22, 0), None),
    "--default-chat-template-kwargs": ((0, 14, 0), None),
    "--disable-access-log-for-endpoints": ((0, 16, 0), None),
    "--disable-fastapi-docs": ((0, 14, 0), None),
    "--disable-frontend-multiprocessing": ((0, 14, 0), (0, 18, 1)),
    "--disable-uvicorn-access-log": ((0, 14, 0), None),
    "--dp-supervisor-probe-failure-threshold": ((0, 22, 0), None),
    "--dp-supervisor-probe-interval-s": ((0, 22, 0), None),
    "--dp-supervisor-probe-timeout-s": ((0, 22, 0), None),
    "--enable-auto-tool-choice": ((0, 14, 0), None),
    "--enable-flash-late-interaction": ((0, 20, 0), None),
    "--enable-force-include-usage": ((0, 14, 0), None),
    "--enable-log-deltas": ((0, 14, 0), None),
    "--enable-log-outputs": ((0, 14, 0), None),
    "--enable-offline-docs": ((0, 14, 0), None),
    "--enable-per-request-metrics": ((0, 25, 0), None),
    "--enable-prompt-tokens-details": ((0, 14, 0), None),
    "--enable-request-id-headers": ((0, 14, 0), None),
    "--enable-scale-out": ((0, 30, 0), None),
    "--enable-server-load-tracking": ((0, 14, 0), None),
    "--enable-ssl-refresh": ((0, 14, 0), None),
    "--enable-tokenizer-info-endpoint": ((0, 14, 0), None),
    "--exclude-tools-when-tool-choice-none": ((0, 14, 0), None),
    "--fingerprint-mode": ((0, 21, 0), None),
    "--fingerprint-value": ((0, 21, 0), None),
    "--grpc": ((0, 20, 0), None),
    "--grpc-port": ((0, 32, 0), None),
    "--h11-max-header-count": ((0, 14, 0), None),
    "--h11-max-incomplete-event-size": ((0, 14, 0), None),
    "--headless": ((0, 14, 0), None),
    "--headless-client-handshake-address": ((0, 34, 0), None),
    "--log-config-file": ((0, 14, 0), (0, 30, 0)),
    "--log-error-stack": ((0, 14, 0), None),
    "--lora-modules": ((0, 14, 0), None),
    "--max-log-len": ((0, 14, 0), None),
    "--middleware": ((0, 14, 0), None),
    "--reasoning-effort-map": ((0, 33, 0), None),
    "--response-role": ((0, 14, 0), None),
    "--return-tokens-as-token-ids": ((0, 14, 0), None),
    "--root-path": ((0, 14, 0), None),
    "--sse-keep-alive-interval": ((0, 29, 0), None),
    "--ssl-ca-certs": ((0, 14, 0), None),
    "--ssl-cert-reqs": ((0, 14, 0), None),
    "--ssl-certfile": ((0, 14, 0), None),
    "--ssl-ciphers": ((0, 16, 0), None),
    "--ssl-keyfile": ((0, 14, 0), None),
    "--tokens-only": ((0, 14, 0), None),
    "--tool-call-parser": ((0, 14, 0), None),
    "--tool-parser-plugin": ((0, 14, 0), None),
    "--tool-server": ((0, 14, 0), None),
    "--tool-strict-level": ((0, 31, 0), None),
    "--trust-request-chat-template": ((0, 14, 0), None),
    "--trust-request-mm-kwargs": ((0, 31, 0), None),
    "--uds": ((0, 14, 0), None),
    "--use-gpu-for-pooling-score": ((0, 17, 0), (0, 17, 1)),
    "--uvicorn-log-level": ((0, 14, 0), None),
}


def grpc_refused(flag: str, version: Version | None) -> bool | None:
    """Whether vLLM's gRPC server of release ``version`` refuses ``flag`` (a long flag as written, ``--api-key``) that
    ``vllm serve``'s HTTP front end defines: ``True``/``False`` for a known release, ``None`` for an unknown one
    (``version`` ``None``) where some release read refuses it, ``False`` where none does."""
    span = GRPC_REFUSED.get(flag)
    if span is None:
        return False
    if version is None:
        return None
    first, last = span
    return first <= version and (last is None or version <= last)
