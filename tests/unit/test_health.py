"""Nothing ends for good: kopf's backoff never runs out, the resync survives every error, liveness
sees a stuck watch. (tests/e2e/test_outage.py stops the real apiserver.)"""

from __future__ import annotations

import asyncio
import itertools

import pytest
import urllib3

from pdd_operator.controller import handlers
from pdd_operator.controller.health import CappedBackoff, WatchHealth


def test_backoff_is_unbounded_capped_and_reiterable():
    backoff = CappedBackoff(first=1, cap=30)
    first = list(itertools.islice(backoff, 10))
    assert first == [1, 2, 4, 8, 16, 30, 30, 30, 30, 30]
    assert list(itertools.islice(backoff, 3)) == [1, 2, 4]  # every request starts over
    assert not hasattr(backoff, "__len__")  # kopf treats a sized sequence as a retry limit
    with pytest.raises(ValueError):
        CappedBackoff(first=0)


def test_kopf_retries_past_the_old_18_seconds():
    """kopf's own retry loop with our backoff: 12 failed attempts (over 18 s of backoff in all) and
    the request still succeeds; with the old finite list it escalated after the 5th attempt."""
    import aiohttp
    from kopf._cogs.clients import api
    from kopf._cogs.configs.configuration import OperatorSettings

    attempts: list[int] = []
    slept: list[float] = []

    class Session:
        closed = False

        async def request(self, **_):
            attempts.append(1)
            if len(attempts) <= 12:
                raise aiohttp.ClientConnectionError("connection refused")
            return "response"

    class Context:
        server = "https://apiserver"
        session = Session()

    async def fake_sleep(delay):
        slept.append(delay)

    async def go(backoffs):
        attempts.clear()
        slept.clear()
        settings = OperatorSettings()
        settings.networking.error_backoffs = backoffs
        real_sleep, real_check = asyncio.sleep, api.errors.check_response
        api.asyncio.sleep = fake_sleep

        async def ok(response):
            return None

        api.errors.check_response = ok
        try:
            return await api.request.__wrapped__("get", "/x", settings=settings, context=Context(), logger=_Quiet())
        finally:
            api.asyncio.sleep, api.errors.check_response = real_sleep, real_check

    assert asyncio.run(go(CappedBackoff(1, 30))) == "response"
    assert sum(slept) > 18 and max(slept) == 30
    with pytest.raises(aiohttp.ClientConnectionError):
        asyncio.run(go([1, 2, 5, 10]))


class _Quiet:
    def debug(self, *a, **k): ...
    def error(self, *a, **k): ...


def test_watch_health_reports_a_watch_that_stopped_delivering():
    h = WatchHealth(stuck_after=100)
    key = ("ns", "a")
    h.watched(key, "5", now=0)
    h.resync_ran(now=10)
    h.listed([(key, "5")], now=10)
    assert h.problem(now=20) is None
    h.resync_ran(now=70)
    h.listed([(key, "9")], now=70)  # the apiserver has 9, the watch never delivered it
    assert h.problem(now=150) is None  # within the grace period
    h.resync_ran(now=130)
    h.listed([(key, "9")], now=130)
    assert "ns/a" in h.problem(now=171)
    h.watched(key, "9", now=172)  # the watch catches up
    assert h.problem(now=173) is None


def test_watch_health_reports_a_resync_that_stopped():
    h = WatchHealth(stuck_after=100)
    h.resync_ran(now=0)
    assert h.problem(now=99) is None
    assert "resync" in h.problem(now=101)


def test_deleted_and_unlisted_objects_are_not_behind():
    h = WatchHealth(stuck_after=10)
    h.resync_ran(now=0)
    h.listed([(("ns", "gone"), "3")], now=0)
    h.listed([], now=1)
    h.resync_ran(now=20)
    assert h.problem(now=20) is None


@pytest.mark.parametrize("error", [
    urllib3.exceptions.MaxRetryError(None, "/apis", reason=ConnectionRefusedError(111, "refused")),
    RecursionError("maximum recursion depth exceeded"),
    KeyError("metadata"),
])
def test_resync_survives_any_error(monkeypatch, error):
    calls = {"n": 0}

    class Kube:
        def list_metadata(self, kind, namespaces=(), label_selector=None):
            calls["n"] += 1
            if calls["n"] == 2:
                raise error
            return {}, 1

    monkeypatch.setitem(handlers._state, "kube", Kube())
    monkeypatch.setattr(handlers, "RESYNC_SECONDS", 0.01)

    async def main():
        monkeypatch.setitem(handlers._state, "wake", asyncio.Event())
        task = asyncio.create_task(handlers._resync_forever())
        deadline = asyncio.get_running_loop().time() + 30
        while calls["n"] < 5 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        alive = not task.done()
        task.cancel()
        return alive

    assert asyncio.run(main())
    assert calls["n"] >= 5


def test_liveness_endpoint_fails_when_the_watch_is_stuck(monkeypatch):
    """kopf's own liveness activity over our probe handler: results while live, ActivityError (HTTP
    500 at ``--liveness``) once the resync has not run for longer than allowed."""
    import time

    import kopf
    from kopf._core.actions import lifecycles
    from kopf._core.engines import activities
    from kopf._core.intents import causes

    health = WatchHealth(stuck_after=100)
    monkeypatch.setattr(handlers, "HEALTH", health)

    async def probe():
        return await activities.run_activity(
            lifecycle=lifecycles.all_at_once, registry=kopf.get_default_registry(),
            settings=kopf.OperatorSettings(), activity=causes.Activity.PROBE, indices={}, memo=kopf.Memo())

    answers = {"now": True}
    monkeypatch.setattr(handlers, "apiserver_answers", lambda: answers["now"])
    health.resync_ran(time.monotonic())
    assert "ok" in asyncio.run(probe()).values()
    health.resync_ran(time.monotonic() - 1000)
    with pytest.raises(activities.ActivityError):
        asyncio.run(probe())
    # The apiserver hung or away: the same stuck resync stays live (a restart would not help).
    answers["now"] = False
    assert any(str(v).startswith("waiting for the apiserver: the periodic resync has not run")
               for v in asyncio.run(probe()).values())


def test_liveness_fails_only_while_the_apiserver_answers():
    from pdd_operator.controller.health import liveness_failure

    asked = []
    assert liveness_failure(None, lambda: asked.append(1) or True) is None
    assert asked == []  # no problem: the apiserver is not even asked
    assert liveness_failure("the watch is behind", lambda: True) == "the watch is behind, though the apiserver answers"
    assert liveness_failure("the watch is behind", lambda: False) is None


def test_the_apiserver_probe_gives_up_on_a_listener_that_never_answers():
    """A socket that accepts connections (the kernel's backlog) but never answers, as a SIGSTOPped
    apiserver does: ``ready`` is False after its timeout; an apiserver answering /readyz 500 (etcd
    away) is not ready either; 200 is."""
    import socket
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from kubernetes import client

    from pdd_operator.controller.kube import Kube

    def kube(port: int) -> Kube:
        conf = client.Configuration()
        conf.host = f"http://127.0.0.1:{port}"
        return Kube(client.ApiClient(conf))

    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(8)
        assert kube(hung.getsockname()[1]).ready(0.5) is False

    codes = {"/readyz": 500}

    class Readyz(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802  (http.server's name)
            self.send_response(codes.get(self.path, 404))
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Readyz)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        assert kube(server.server_address[1]).ready(5) is False  # etcd away: [-]etcd failed
        codes["/readyz"] = 200
        assert kube(server.server_address[1]).ready(5) is True
    finally:
        server.shutdown()
