"""A coordinated rollout's slot switch at the router: a prefill leg ran on the old revision, and then its
decodes were gone (issue 13).

Discovery drops a pod from the router's choice once it is Terminating; a request whose prefill leg runs on
the old revision's prefill while the old decode goes away found no decode of that compat hash, and the old
router served it with prefill alone (the fallback: no KV transfer). Now, while another revision has a full
pair, it runs again as a new P/D request there (reason ``pair_gone``, one of ``spec.router.retries``, a new
request id and prefill leg, never the first leg's ``kv_transfer_params``); the fallback serves it only when no
pair is left or the retry budget is spent. Fakes of :mod:`tests.unit.test_router`: each decode checks that it
got exactly the parameters a prefill issued for the same ``X-Request-Id``, and refuses KV of another revision
(``revision``: 409 "cross-revision pair").
"""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from pdd_operator.router.proxy import FALLBACK_HEADER, RouterConfig
from pdd_operator.router.retry import PAIR_GONE, RETRY_HEADER, RETRY_ON
from tests.unit.test_router import run, stack

pytestmark = pytest.mark.timeout(60)

OLD, NEW = "h-old", "h-new"


async def _switch(s, path: str, stream: bool, config: RouterConfig, pair_left: bool = True,
                  push: bool = False) -> tuple[int, dict, bytes]:
    """Old pair ``p-old``/``d-old`` (and, with ``pair_left``, new pair ``p-new``/``d-new``); the request's
    prefill leg goes to ``p-old`` and is held there while ``d-old`` leaves the registry (as discovery drops a
    Terminating pod); then the leg finishes. Returns the client's status, headers and body."""
    gate = asyncio.Event()
    await s.engine("p-old", "prefill", engine_id="old-engine", revision=OLD, gate=gate)
    await s.engine("d-old", "decode", revision=OLD, push=push)
    prefill, decode = [("p-old", OLD)], [("d-old", OLD)]
    if pair_left:
        await s.engine("p-new", "prefill", engine_id="new-engine", revision=NEW)
        await s.engine("d-new", "decode", revision=NEW, push=push)
        prefill.append(("p-new", NEW))
        decode.append(("d-new", NEW))
    await s.start_router(config, prefill=prefill, decode=decode)
    for ep in s.registry.endpoints("prefill"):  # the first choice is the old prefill (power of two choices)
        if ep.name != "p-old":
            ep.outstanding = 10**6
    body = {"model": "m", "max_tokens": 5, "stream": stream}
    body.update({"messages": [{"role": "user", "content": "hi"}]} if path.endswith("chat/completions")
                else {"prompt": "hello"})

    async def send() -> tuple[int, dict, bytes]:
        async with aiohttp.ClientSession() as c, c.post(s.url + path, json=body) as r:
            return r.status, r.headers.copy(), await r.read()

    client = asyncio.ensure_future(send())
    await s.wait_for(lambda: s.engines["p-old"].requests)
    s.registry.replace("decode", [ep for ep in s.registry.endpoints("decode") if ep.name != "d-old"])
    gate.set()
    return await client


CASES = [("/v1/completions", False), ("/v1/completions", True), ("/v1/chat/completions", False),
         ("/v1/chat/completions", True)]


@pytest.mark.parametrize(("path", "stream"), CASES)
@pytest.mark.parametrize("mode", ["pull", "push"])
def test_a_prefill_leg_whose_decodes_went_away_runs_again_on_the_pair_that_is_left(path, stream, mode):
    """In push mode a prefill whose engine id the router has not learned runs its leg first, too: the
    same shape (``Router._push`` hands it to ``Router._pull``)."""
    async def go():
        async with stack() as s:
            status, headers, raw = await _switch(s, path, stream, RouterConfig(mode=mode), push=mode == "push")
            assert status == 200, raw
            assert headers[RETRY_HEADER] == f"decode={PAIR_GONE}" and FALLBACK_HEADER not in headers
            p_old, p_new, d_old, d_new = (s.engines[n] for n in ("p-old", "p-new", "d-old", "d-new"))
            assert p_old.plain == 0 and d_new.plain == 0, "served as a plain request: no KV transfer"
            assert not d_old.requests
            (first,), (again,), (decoded,) = p_old.requests, p_new.requests, d_new.requests
            # a new P/D request: a new id, a new prefill leg on the new revision, its KV (and only its) to decode
            assert decoded[0]["X-Request-Id"] == again[0]["X-Request-Id"] != first[0]["X-Request-Id"]
            kv = decoded[1]["kv_transfer_params"]
            assert kv == s.issued[again[0]["X-Request-Id"]] != s.issued[first[0]["X-Request-Id"]]
            assert kv["remote_engine_id"] == "new-engine" and kv["fake_revision"] == NEW
            assert s.router.metrics.retries.labels("decode", PAIR_GONE)._value.get() == 1
            assert sum(c._value.get() for c in s.router.metrics.fallback._metrics.values()) == 0
            assert (raw.endswith(b"data: [DONE]\n\n") if stream else b"tok" in raw)
    run(go())


def test_with_no_pair_left_the_prefill_serves_the_request_alone():
    """The fallback stays for a revision with no pair anywhere (a decode lost in a fault, one pod per role)."""
    async def go():
        async with stack() as s:
            status, headers, raw = await _switch(s, "/v1/completions", False, RouterConfig(), pair_left=False)
            assert status == 200, raw
            assert headers[FALLBACK_HEADER] == "prefill-only" and RETRY_HEADER not in headers
            assert s.engines["p-old"].plain == 1
    run(go())


def test_with_the_retry_budget_spent_the_prefill_serves_the_request_alone():
    """``spec.router.retries: 0`` turns the rerun off: the request is served, by prefill alone."""
    async def go():
        async with stack() as s:
            status, headers, raw = await _switch(s, "/v1/completions", False, RouterConfig(retries=0))
            assert status == 200, raw
            # alone on a prefill of the revision that still has decodes (the pairing rule: pick_alone)
            assert headers[FALLBACK_HEADER] == "prefill-only" and RETRY_HEADER not in headers
            assert s.engines["p-new"].plain == 1 and not s.engines["d-new"].requests
            assert s.router.metrics.retries.labels("decode", PAIR_GONE)._value.get() == 0
    run(go())


def test_without_fallback_and_without_a_pair_the_client_gets_503():
    async def go():
        async with stack() as s:
            status, _, raw = await _switch(s, "/v1/completions", False, RouterConfig(fallback=False), pair_left=False)
            assert status == 503 and b"no ready decode endpoint with compat hash" in raw
    run(go())


def test_the_registry_tells_a_pair_of_another_revision():
    async def go():
        async with stack() as s:
            await s.start_router(prefill=[("p1", OLD), ("p2", NEW)], decode=[("d1", OLD)])
            assert not s.registry.paired_elsewhere(OLD)  # only the old revision has a pair
            assert s.registry.paired_elsewhere(NEW)
            s.registry.replace("decode", [])
            assert not s.registry.paired_elsewhere(NEW)
    run(go())
    assert PAIR_GONE in RETRY_ON
