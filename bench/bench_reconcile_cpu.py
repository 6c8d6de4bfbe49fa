"""In-process CPU of the reconciles one new PDDeployment costs, against the fake apiserver of
tests/unit/test_quiet_reconciles.py (no cluster): create, the first reconcile (9 applies, status), the
watches' echoes, then one status update of each of its 4 Deployments by the controller manager, each
followed by its reconcile, and one last reconcile. Prints the thread CPU per object of all reconciles,
of the 4 Deployment-status ones, and the renders made and skipped per object.

    PYTHONPATH=$PWD/operator:$PWD .venv/bin/python bench/bench_reconcile_cpu.py [N, default 300]

Compare two checkouts by putting the other one's ``operator`` first in PYTHONPATH; the numbers are
thread CPU, but on a shared machine still noisy: run them in turns (ABAB) and compare like with like.
"""

from __future__ import annotations

import sys
import time

from pdd_operator.controller import reconcile as reconciling
from pdd_operator.controller.cache import ClusterCache
from tests.unit import test_quiet_reconciles as fake

READY = {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1}


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    reconciling.QUIET = reconciling.QuietMemo()
    reconciling.PACER = reconciling.StatusPacer(window=0)
    cache = ClusterCache()
    cache.expect({})
    kube = fake.FakeApiserver(cache)
    spent = {"all": 0.0, "status": 0.0}

    def run(name: str, *, status: bool = False) -> None:
        started = time.thread_time()
        reconciling.reconcile(kube, fake.NS, name)
        took = time.thread_time() - started
        spent["all"] += took
        if status:
            spent["status"] += took

    def one(name: str) -> None:
        kube.create(fake.pdd(name))
        run(name)
        kube.deliver()
        run(name)
        for kind, child in list(kube.objects):
            if kind == "Deployment" and child.startswith(name + "-"):
                kube.edit("Deployment", child, lambda d: d.update(status=dict(READY)))
                run(name, status=True)
                kube.deliver()
        run(name)

    for i in range(20):  # warm up: imports, memos, the caches' dictionaries
        one(f"w{i}")
    spent.update(all=0.0, status=0.0)
    rendered, skipped = reconciling.RENDERS.rendered, reconciling.RENDERS.skipped
    for i in range(n):
        one(f"p{i}")
    print(f"{n} objects: reconciles {spent['all'] / n * 1e3:.2f} ms CPU per object, of them the 4 Deployment "
          f"status ones {spent['status'] / n * 1e3:.2f} ms; renders {(reconciling.RENDERS.rendered - rendered) / n:.2f},"
          f" skipped {(reconciling.RENDERS.skipped - skipped) / n:.2f} per object")


if __name__ == "__main__":
    main()
