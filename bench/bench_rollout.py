"""Requests through every kind of rollout: sent, failed, p99 latency during the rollout against steady
state in the same run, and the time each rollout takes.

Runs the measurement of ``tests/e2e/test_rollout_load.py`` (one definition of it) on its own local
control plane (``PDD_CLUSTER_DIR`` / ``PDD_APISERVER_PORT`` when set, else
``~/.cache/pdd-operator/cluster-bench-rollout`` on port 19543; stopped at the end unless it was already
running): the operator as a local process, the dev node agent running the router and fake engines as
pods, 4 concurrent streaming clients (16 tokens, 10 ms apart). Per change kind it prints requests sent
and failed, cross-revision P/D pairs, the p99 latency of requests started in the 5 s before the change
(steady) and of those started during the rollout, their ratio, and the rollout time (from the change to
the status saying Ready for the new generation, the pods' counts and hash agreeing). Target: 0 failed, 0 cross-revision.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("PDD_CACHE", Path.home() / ".cache" / "pdd-operator"))


def main() -> int:
    env = {**os.environ}
    env.setdefault("PDD_CLUSTER_DIR", str(CACHE / "cluster-bench-rollout"))
    env.setdefault("PDD_APISERVER_PORT", "19543")
    was_up = subprocess.run(["bash", "dev/cluster/cluster.sh", "status"], cwd=ROOT, env=env,
                            capture_output=True).returncode == 0
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "rollout.json"
        env["PDD_ROLLOUT_RESULTS"] = str(results)
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                              "tests/e2e/test_rollout_load.py"], cwd=ROOT, env=env)
        if not was_up:
            subprocess.run(["bash", "dev/cluster/cluster.sh", "down"], cwd=ROOT, env=env, check=False)
        if not results.exists():
            print("no results: the measurement did not finish (its output is above)", file=sys.stderr)
            return 1
        data = json.loads(results.read_text())
    print(f"\n{'change':<50} {'sent':>5} {'failed':>6} {'cross':>5} {'p99 steady':>11} {'p99 rollout':>12} "
          f"{'ratio':>6} {'rollout':>8}")
    for label, r in data.items():
        steady, during = r["p99_steady_ms"], r["p99_rollout_ms"]
        ratio = f"{during / steady:.2f}x" if steady and during else "-"
        print(f"{label:<50} {r['sent']:>5} {r['failed']:>6} {r['cross_revision']:>5} {steady or '-':>9} ms "
              f"{during or '-':>9} ms {ratio:>6} {r['rollout_s']:>6} s")
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
