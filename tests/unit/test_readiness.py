"""The readiness endpoint (controller/readiness.py) and the webhook's readiness check: a real HTTP server,
a real TLS listener with certificates from controller/tls.py."""

from __future__ import annotations

import asyncio
import ssl
import urllib.request

import pytest

from pdd_operator.controller import readiness, tls, webhook


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def tls_server(tmp_path, host: str):
    files = tls.ensure_serving_files(tmp_path, [host])
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(files.certfile, files.keyfile)

    async def handle(reader, writer):
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ctx)
    return server, server.sockets[0].getsockname()[1], files


def test_tls_handshake_verifies_ca_and_name(tmp_path):
    async def main():
        server, port, files = await tls_server(tmp_path, "127.0.0.1")
        async with server:
            assert await readiness.tls_handshake("127.0.0.1", port, "127.0.0.1", str(files.cafile)) is None
            other = tls.generate_ca()
            (tmp_path / "other.crt").write_bytes(other.cert_pem())
            wrong_ca = await readiness.tls_handshake("127.0.0.1", port, "127.0.0.1", str(tmp_path / "other.crt"))
            wrong_name = await readiness.tls_handshake("127.0.0.1", port, "pdd.ops.svc", str(files.cafile))
            closed = await readiness.tls_handshake("127.0.0.1", free_port(), "127.0.0.1", str(files.cafile))
        return wrong_ca, wrong_name, closed

    wrong_ca, wrong_name, closed = asyncio.run(main())
    assert "certificate verify failed" in wrong_ca
    assert "pdd.ops.svc" in wrong_name
    assert closed.startswith("TLS handshake with the webhook on 127.0.0.1:")


def test_readyz_is_503_with_reasons_until_every_check_passes():
    state = {"reason": "webhook not yet configured"}

    async def check():
        return state["reason"]

    async def main():
        port = free_port()
        runner = await readiness.serve("127.0.0.1", port, [check])
        loop = asyncio.get_running_loop()

        def get():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as resp:
                    return resp.status, resp.read().decode()
            except urllib.error.HTTPError as exc:
                return exc.code, exc.read().decode()

        try:
            first = await loop.run_in_executor(None, get)
            state["reason"] = None
            second = await loop.run_in_executor(None, get)
        finally:
            await runner.cleanup()
        return first, second

    first, second = asyncio.run(main())
    assert first == (503, "webhook not yet configured\n")
    assert second == (200, "ok\n")


def test_webhook_readiness_needs_configuration_then_a_verified_handshake(tmp_path, monkeypatch):
    import kopf

    async def main():
        server, port, files = await tls_server(tmp_path, "127.0.0.1")
        endpoint = webhook.Endpoint(server=kopf.WebhookServer(addr="127.0.0.1", port=port, host="127.0.0.1"),
                                    target={}, ca_file=files.cafile)
        monkeypatch.setitem(webhook._state, "endpoint", endpoint)
        monkeypatch.setitem(webhook._state, "configured", False)
        async with server:
            before = await webhook.readiness()
            webhook._state["configured"] = True
            after = await webhook.readiness()
        return before, after

    before, after = asyncio.run(main())
    assert before.startswith("ValidatingWebhookConfiguration pdd-operator.dev not yet in line")
    assert after is None


@pytest.mark.parametrize("addr", ["0.0.0.0", None])
def test_webhook_readiness_dials_loopback_for_a_wildcard_listener(tmp_path, monkeypatch, addr):
    import kopf

    async def main():
        server, port, files = await tls_server(tmp_path, "pdd.ops.svc")
        endpoint = webhook.Endpoint(server=kopf.WebhookServer(addr=addr, port=port, host="pdd.ops.svc"),
                                    target={}, ca_file=files.cafile)
        monkeypatch.setitem(webhook._state, "endpoint", endpoint)
        monkeypatch.setitem(webhook._state, "configured", True)
        async with server:
            return await webhook.readiness()

    assert asyncio.run(main()) is None
