"""What the cluster benchmarks share: the environment of a local control plane of dev/cluster, and a
free loopback port. Imported by ``bench_scale.py`` and ``bench_webhook.py`` (run as scripts, so this
directory is on ``sys.path``)."""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cluster_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` plus the exports of ``dev/cluster/cluster.sh env`` for the cluster that ``env`` selects
    (``PDD_CLUSTER_DIR``, ``PDD_APISERVER_PORT``): ``KUBECONFIG`` and the matching kubectl on ``PATH``.
    Raises ``subprocess.CalledProcessError`` when the script fails."""
    out = subprocess.run(["bash", "dev/cluster/cluster.sh", "env"], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True).stdout
    result = dict(env)
    for line in out.splitlines():
        if line.startswith("export "):
            key, _, value = line[len("export "):].partition("=")
            result[key] = shlex.split(value)[0].replace("$PATH", os.environ["PATH"])
    return result


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
