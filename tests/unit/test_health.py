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

    health.resync_ran(time.monotonic())
    assert "ok" in asyncio.run(probe()).values()
    health.resync_ran(time.monotonic() - 1000)
    with pytest.raises(activities.ActivityError):
        asyncio.run(probe())
