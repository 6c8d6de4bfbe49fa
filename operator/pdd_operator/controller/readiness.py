"""The operator's readiness endpoint (``pdd run --readiness-port``): ``GET /readyz``.

Ready means: kopf finished its startup handlers and, when the operator serves the admission webhook,
the webhook can answer the apiserver, i.e. the ValidatingWebhookConfiguration was brought in line
at least once (:func:`pdd_operator.controller.webhook.keep_once`) and a TLS handshake with the local
webhook listener succeeds, verifying the served certificate against the CA bundle the apiserver gets,
for the host name the apiserver dials. A Service sends webhook calls only to ready pods, so a replica
whose certificate or configuration is not in place takes no admission traffic.

Liveness is kopf's own endpoint (``pdd run --liveness``).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Awaitable, Callable

import aiohttp.web

log = logging.getLogger(__name__)

#: One readiness condition: an async callable returning ``None`` when fine, else the reason it is not.
Check = Callable[[], Awaitable[str | None]]


async def tls_handshake(address: str, port: int, server_hostname: str, cafile: str, timeout: float = 2.0) -> str | None:
    """``None`` when a TLS handshake with ``address:port`` verifies against ``cafile`` for
    ``server_hostname`` (an IP literal or DNS name, checked against the certificate's SANs), else why not."""
    try:
        ctx = ssl.create_default_context(cafile=cafile)
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(address, port, ssl=ctx, server_hostname=server_hostname), timeout)
    except (OSError, ssl.SSLError, TimeoutError) as exc:
        return f"TLS handshake with the webhook on {address}:{port} as {server_hostname} failed: {exc}"
    writer.close()
    try:
        await writer.wait_closed()
    except (OSError, ssl.SSLError):
        pass
    return None


async def serve(address: str, port: int, checks: list[Check]) -> aiohttp.web.AppRunner:
    """Start the HTTP server with ``GET /readyz``: 200 ``ok`` when every check passes, else 503 with
    the reasons, one per line. Returns the runner (``await runner.cleanup()`` stops it)."""
    async def readyz(_: aiohttp.web.Request) -> aiohttp.web.Response:
        reasons = [r for r in [await c() for c in checks] if r]
        if reasons:
            return aiohttp.web.Response(status=503, text="\n".join(reasons) + "\n")
        return aiohttp.web.Response(text="ok\n")

    app = aiohttp.web.Application()
    app.router.add_get("/readyz", readyz)
    runner = aiohttp.web.AppRunner(app, access_log=None)
    await runner.setup()
    await aiohttp.web.TCPSite(runner, address, port).start()
    log.info("readiness endpoint on http://%s:%d/readyz", address, port)
    return runner


_state: dict = {}


def enable(address: str, port: int, checks: list[Check]) -> None:
    """Register kopf startup and cleanup handlers that run the readiness server (before ``kopf.run``).

    The server starts after the other startup handlers (kopf runs them in registration order, and
    ``pdd run`` enables this last), so a 200 also means that kopf's startup is done.
    """
    import kopf

    async def start(**_: object) -> None:
        _state["runner"] = await serve(address, port, checks)

    async def stop(**_: object) -> None:
        runner = _state.pop("runner", None)
        if runner is not None:
            await runner.cleanup()

    kopf.on.startup(id="readiness-startup")(start)
    kopf.on.cleanup(id="readiness-cleanup")(stop)
