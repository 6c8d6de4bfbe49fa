"""``pdd router``: run the router with static endpoints or Kubernetes discovery until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from typing import TYPE_CHECKING

from pdd_operator.api.constants import ROUTER_RETRY_ATTEMPTS, ROUTER_RETRY_DEADLINE_SECONDS
from pdd_operator.router.endpoints import Registry, parse_static

if TYPE_CHECKING:
    from pdd_operator.router.proxy import Router

log = logging.getLogger("pdd_operator.router")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``pdd router`` flags."""
    p.add_argument("--host", default=None,
                   help="address to listen on (default: every address of the pod, IPv4 and IPv6: asyncio opens one "
                   "socket per family the kernel supports, so the router serves IPv4-only, IPv6-only and "
                   "dual-stack clusters alike)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    p.add_argument("--static-prefill", metavar="URL,...", default="",
                   help="prefill endpoints, comma separated: http://HOST:PORT (push mode: "
                   "?kv_host=H&kv_port=P&tp=N&pp=N; the engine id is learned from prefill's answers)")
    p.add_argument("--static-decode", metavar="URL,...", default="", help="decode endpoints, comma separated")
    p.add_argument("--pddeployment", metavar="NAME", help="discover the engine pods of this PDDeployment")
    p.add_argument("--namespace", default="default", help="namespace of --pddeployment (default: default)")
    p.add_argument("--kv-mode", choices=["pull", "push"], default="pull",
                   help="pull: NixlConnector (default); push: NixlPushConnector")
    p.add_argument("--fallback", action=argparse.BooleanOptionalAction, default=True,
                   help="when one role has no usable endpoint (none Ready, or every one refuses connections), "
                   "serve requests with an engine of the other role alone, as plain requests without KV "
                   "transfer (default); --no-fallback answers 503 instead")
    p.add_argument("--prefill-retries", type=int, default=2,
                   help="other prefill endpoints to try when a prefill leg fails, and other decode "
                        "endpoints when a decode cannot be connected to (default 2)")
    p.add_argument("--retries", type=int, default=ROUTER_RETRY_ATTEMPTS,
                   help="times a request is sent again as a whole (a new prefill leg) when its decode failed before "
                   "the client got a byte (connection reset or closed, 502-504), also whether a prefill that failed "
                   f"so with no other left falls back to decode alone (default {ROUTER_RETRY_ATTEMPTS}; 0: off; "
                   "spec.router.retries.attempts)")
    p.add_argument("--retry-deadline", type=float, default=float(ROUTER_RETRY_DEADLINE_SECONDS),
                   help="seconds after a request arrived past which it is not retried "
                   f"(default {ROUTER_RETRY_DEADLINE_SECONDS}; spec.router.retries.deadlineSeconds)")
    p.add_argument("--resume", action=argparse.BooleanOptionalAction, default=True,
                   help="continue a streamed answer whose decode failed after the client got tokens from another "
                   "decode, in the same stream (prompt + generated text; one of the --retries; default); "
                   "--no-resume ends such a stream with an error event (engines without continue_final_message)")
    p.add_argument("--max-body-bytes", type=int, default=16 * 1024 * 1024, help="largest request body (16 MiB)")
    p.add_argument("--connect-timeout", type=float, default=5.0, help="seconds to connect to an engine")
    p.add_argument("--prefill-timeout", type=float, default=600.0, help="seconds for a whole prefill leg")
    p.add_argument("--decode-timeout", type=float, default=600.0,
                   help="seconds without a byte from decode before the request fails")
    p.add_argument("--unreachable-seconds", type=float, default=5.0,
                   help="seconds an endpoint that could not be connected to is chosen last (default 5)")
    p.add_argument("--log-level", default="INFO")


def build(args: argparse.Namespace) -> tuple[Router, Registry]:
    """The router and its registry from the flags (static endpoints filled in). Raises ``ValueError``."""
    from pdd_operator.router.proxy import Router, RouterConfig

    static = bool(args.static_prefill or args.static_decode)
    if static == bool(args.pddeployment):
        raise ValueError("give either --static-prefill and --static-decode, or --pddeployment")
    registry = Registry()
    if static:
        for role, value in (("prefill", args.static_prefill), ("decode", args.static_decode)):
            eps = [parse_static(role, s) for s in value.split(",") if s.strip()]
            if not eps:
                raise ValueError(f"--static-{role}: no endpoint given")
            registry.replace(role, eps)
    config = RouterConfig(
        mode=args.kv_mode, fallback=args.fallback, prefill_retries=args.prefill_retries, max_body_bytes=args.max_body_bytes,
        connect_timeout=args.connect_timeout, prefill_timeout=args.prefill_timeout,
        decode_timeout=args.decode_timeout, unreachable_seconds=args.unreachable_seconds,
        retries=args.retries, retry_deadline=args.retry_deadline, resume=args.resume,
    )
    return Router(registry, config), registry


async def serve(args: argparse.Namespace) -> None:
    """Serve until a termination signal."""
    from pdd_operator.router.proxy import start

    router, registry = build(args)
    loop = asyncio.get_running_loop()
    discovery = None
    if args.pddeployment:
        from pdd_operator.router.discovery import KubeDiscovery

        def changed() -> None:
            log.info("endpoints: prefill %d, decode %d, pairs %d", len(registry.endpoints("prefill")),
                     len(registry.endpoints("decode")), registry.pairs())

        discovery = KubeDiscovery(registry, args.pddeployment, args.namespace, loop, on_change=changed)
        router.synced = discovery.synced.is_set
        discovery.start()
    runner = await start(router, args.host, args.port)
    log.info("router (%s mode) listening on %s:%d", args.kv_mode, args.host or "*", args.port)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        if discovery is not None:
            discovery.stop()
        await runner.cleanup()


def run(args: argparse.Namespace) -> int:
    """Entry point of ``pdd router``."""
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        build(args)
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from exc
    try:
        import uvloop  # optional: about twice the requests per CPU second
    except ImportError:
        asyncio.run(serve(args))
    else:
        uvloop.run(serve(args))
    return 0
