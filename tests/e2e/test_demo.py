"""The README's first command, scripts/demo.sh, end to end on the test cluster."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import ROOT, wait_for

pytestmark = pytest.mark.cluster


def test_demo_reaches_ready_on_gpu_nodes(cluster):
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "demo.sh")], capture_output=True, text=True,
                          env=cluster.env, timeout=600)
    state = Path(cluster.kubeconfig).parent
    pid_file = state / "operator.pid"
    try:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        lines = proc.stdout.splitlines()
        row = next(line.split() for line in lines if line.startswith("nemotron-nano "))
        assert row[1:5] == ["True", "1/1", "1/1", "True"]
        pods = [line.split() for line in lines if line.startswith("nemotron-nano-")
                and "Running" in line and not line.startswith("nemotron-nano-router-")]
        assert len(pods) == 2 and all(p[6].startswith("gpu-") for p in pods)
        assert "--no-disable-hybrid-kv-cache-manager" in proc.stdout
    finally:
        if pid_file.exists():
            pid = int(pid_file.read_text())
            try:
                os.kill(pid, signal.SIGTERM)
                wait_for(lambda: subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode != 0,
                         30, what="demo operator stopped")
            except ProcessLookupError:
                pass
            pid_file.unlink()
        cluster.kubectl("delete", "pdd/nemotron-nano", "--ignore-not-found", "--wait=true")
