"""The operator's memory after a restart with N PDDeployments present, per memory setting, in one run.

The restart is where RSS peaks (bench/README.md): kopf lists every watched object at once and runs
a worker per object. This creates ``PDD_BENCH_N`` (300) PDDeployments as ``bench_scale.py`` does (same
spec, same cluster variables, namespace ``bench-scale``), lets the operator reconcile them, then
restarts it once per variant of :data:`VARIANTS` (its environment) and prints, after every object was
reconciled and the queue is empty, and ``SETTLE_SECONDS`` later: ``VmRSS`` and ``VmHWM`` (peak) in MB, the seconds it took,
the process's CPU seconds until then, its writes (applies, patches, Events: 0 when nothing changed), the load average, and,
for the traced variant (``PDD_TRACEMALLOC``, :mod:`pdd_operator.controller.memory`), the live Python
memory by package and the largest allocation sites.

Cluster: ``PDD_CLUSTER_DIR`` / ``PDD_BENCH_APISERVER_PORT`` as for ``bench_scale.py``; left running
(``cluster.sh down`` is yours) unless ``PDD_BENCH_PURGE=1``.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import signal
import subprocess
import time
from pathlib import Path

from _cluster import cluster_env
from bench_scale import (
    ENV,
    GROUP,
    NS,
    PLURAL,
    ROOT,
    VERSION,
    WORKERS,
    ChildWatch,
    Operator,
    create,
    load,
    log,
    prepare,
    wait,
)
from kubernetes import client

N = int(os.environ.get("PDD_BENCH_N", "300"))
#: Restart variants by key: (name, extra environment of ``pdd run``). Python's own small-object
#: allocator or glibc malloc (``PYTHONMALLOC``; bench_scale's Operator sets ``malloc`` as the chart
#: does), without and with the release of freed heap (``PDD_MALLOC_TRIM``,
#: :func:`pdd_operator.controller.memory.release`); kopf's initial list in one response or in pages
#: (``PDD_LIST_CHUNK``) and its per-object workers kept 5 s or less after their last event
#: (``PDD_WORKER_IDLE_SECONDS``, :mod:`pdd_operator.controller.handlers`); traced (``PDD_TRACEMALLOC``,
#: several times slower).
VARIANTS = {
    "pymalloc": ("pymalloc, no release", {"PYTHONMALLOC": "pymalloc", "PDD_MALLOC_TRIM": "0"}),
    "pymalloc-release": ("pymalloc, freed heap released", {"PYTHONMALLOC": "pymalloc"}),
    "kopf-defaults": ("malloc, released, kopf's defaults (one list per kind, workers idle 5 s)",
                      {"PDD_LIST_CHUNK": "0", "PDD_WORKER_IDLE_SECONDS": "5"}),
    "pages": ("... + lists in pages of 200", {"PDD_LIST_CHUNK": "200", "PDD_WORKER_IDLE_SECONDS": "5"}),
    "idle": ("... + workers idle 0.5 s", {"PDD_LIST_CHUNK": "0", "PDD_WORKER_IDLE_SECONDS": "0.5"}),
    "pages-idle": ("... + both", {"PDD_LIST_CHUNK": "200", "PDD_WORKER_IDLE_SECONDS": "0.5"}),
    "arenas-2": ("... + glibc malloc arenas at most 2 (MALLOC_ARENA_MAX; the chart's 2026-12-06 to 12-07)",
                 {"MALLOC_ARENA_MAX": "2", "MALLOC_MMAP_THRESHOLD_": None}),
    "arenas-glibc": ("glibc's own arena limit (8 per core; before 2026-12-06)",
                     {"MALLOC_ARENA_MAX": str(8 * (os.cpu_count() or 1)), "MALLOC_MMAP_THRESHOLD_": None}),
    "idle-arenas-2": ("... + workers idle 0.5 s, at most 2 arenas",
                      {"PDD_WORKER_IDLE_SECONDS": "0.5", "MALLOC_ARENA_MAX": "2", "MALLOC_MMAP_THRESHOLD_": None}),
    # memory.ALLOCATOR_ENV's two settings of 2026-12-07 (the operator's defaults since), one at a time
    "arenas-1": ("one glibc malloc arena (MALLOC_ARENA_MAX=1), glibc's mmap threshold",
                 {"MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_THRESHOLD_": None}),
    "mmap-128k": ("2 arenas, glibc's mmap threshold fixed at 128 KiB (MALLOC_MMAP_THRESHOLD_; its default rises "
                  "with each large block freed, up to 32 MiB, and later large blocks then stay in the heap)",
                  {"MALLOC_ARENA_MAX": "2", "MALLOC_MMAP_THRESHOLD_": "131072"}),
    "operator": ("the operator's defaults", {}),
    "traced": ("traced (PDD_TRACEMALLOC=3)", {"PDD_TRACEMALLOC": "3"}),
}
#: ``PDD_BENCH_BEFORE_SRC``: the ``operator`` folder of another checkout (e.g. main's, from ``git worktree
#: add``), run as variant ``before`` (its ``pdd_operator`` first on ``PYTHONPATH``): old code and new in one run.
BEFORE_SRC = os.environ.get("PDD_BENCH_BEFORE_SRC")
if BEFORE_SRC:
    VARIANTS["before"] = (f"before: {BEFORE_SRC}", {"PYTHONPATH": BEFORE_SRC})
#: The variants run, in order (``PDD_BENCH_VARIANTS``, comma-separated keys of :data:`VARIANTS`).
RUN = os.environ.get("PDD_BENCH_VARIANTS", "kopf-defaults,operator").split(",")
#: Seconds after the last reconcile before RSS is read: the operator releases freed memory once its
#: queue was idle for 10 s (``handlers.RELEASE_AFTER_SECONDS``).
SETTLE_SECONDS = 15


def restart(op: Operator, extra: dict[str, str], total: int, trace_out: Path | None) -> dict:
    op.stop()
    started = op.start(extra)
    # Traced, reconciles are several times slower and the 30 s resync may keep the queue from emptying.
    wait(lambda: (s := op.sums())["reconciles"] >= total and (trace_out is not None or s["queue"] == 0), 900,
         "every object reconciled", interval=0.2)
    seconds = time.monotonic() - started
    cpu = (op.metrics() or {}).get("process_cpu_seconds_total", 0.0)
    average = load()
    time.sleep(SETTLE_SECONDS)
    rss, peak = op.rss_mb()
    out = {"seconds": seconds, "rss": rss, "peak": peak, "cpu": cpu, "writes": op.sums()["writes"], "load": average}
    if trace_out is not None:
        op.proc.send_signal(signal.SIGUSR1)
        out["traced"] = json.loads(wait(lambda: trace_out.exists() and trace_out.stat().st_size
                                        and trace_out.read_text(), 600, "the tracemalloc report"))
        peak_out = trace_out.with_suffix(".peak.json")
        if peak_out.exists():
            out["traced at the peak"] = json.loads(peak_out.read_text())
    return out


def main() -> int:
    subprocess.run(["bash", "dev/cluster/cluster.sh", "up"], cwd=ROOT, env=ENV, check=True, stdout=subprocess.DEVNULL)
    env = cluster_env(ENV)
    workdir = Path(ENV["PDD_CLUSTER_DIR"] + "-bench")
    workdir.mkdir(parents=True, exist_ok=True)
    api_client, _, _ = prepare(env, 2 * N, (NS,))
    custom = client.CustomObjectsApi(api_client)
    op = Operator(env, workdir / "operator-memory.log")
    try:
        op.start()
        watch = ChildWatch(api_client, NS)
        names = [f"pdd-{i}" for i in range(N)]
        with cf.ThreadPoolExecutor(WORKERS) as pool:
            list(pool.map(lambda n: create(custom, n), names))
        watch.wait_complete(names, 9, 1800)
        watch.stopping = True
        time.sleep(5)
        log(f"{N} PDDeployments with all children; RSS after creating them {op.rss_mb()[0]:.0f} MB")
        total = len(custom.list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL)["items"])  # others left there
        print(f"\nbench_memory: restart with {total} PDDeployments present ({9 * total} children, {2 * total} pods)")
        first = None
        for key in RUN:
            name, extra = VARIANTS[key]
            trace_out = None
            if "PDD_TRACEMALLOC" in extra:
                trace_out = workdir / "tracemalloc.json"
                trace_out.unlink(missing_ok=True)
                trace_out.with_suffix(".peak.json").unlink(missing_ok=True)
                extra = {**extra, "PDD_TRACEMALLOC_OUT": str(trace_out),
                         "PDD_TRACEMALLOC_PEAK_OUT": str(trace_out.with_suffix(".peak.json"))}
            r = restart(op, extra, total, trace_out)
            first = first or r
            print(f"  {name}: RSS {r['rss']:.0f} MB (peak {r['peak']:.0f}) after {r['seconds']:.1f}s; "
                  f"x {RUN[0]}: RSS {r['rss'] / first['rss']:.2f}, peak {r['peak'] / first['peak']:.2f}; "
                  f"process CPU {r['cpu']:.1f}s to the last reconcile; {r['writes']:.0f} writes "
                  f"{SETTLE_SECONDS} s later; {r['load']}", flush=True)
            for when in ("traced", "traced at the peak"):
                if when not in r:
                    continue
                t = r[when]
                print(f"    {when}: {t['traced_bytes'] / 2**20:.1f} MiB (peak {(t.get('peak_bytes') or 0) / 2**20:.1f}): "
                      + ", ".join(f"{k} {v / 2**20:.1f}" for k, v in t["by_package"].items()))
                for where, size in t["top"]:
                    print(f"    {size / 2**20:6.2f} MiB {where}")
    finally:
        op.stop()
        if os.environ.get("PDD_BENCH_PURGE") == "1":
            subprocess.run(["bash", "dev/cluster/cluster.sh", "down", "--purge"], cwd=ROOT, env=ENV,
                           stdout=subprocess.DEVNULL)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
