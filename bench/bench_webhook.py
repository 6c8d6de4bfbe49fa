"""Admission latency of PDDeployment creates with and without the validating webhook.

Runs on its own local control plane (dev/cluster/cluster.sh with a separate state dir and ports,
started and stopped here). Load: server-side dry-run creates of compatible PDDeployments from 50
concurrent clients (nothing is stored, so every request does the same work), N per mode.
Baseline: the same load with no webhook registered: the API server's own schema and CEL
validation. Then the operator runs with ``--webhook-port`` (real TLS on 127.0.0.1) and the load is
repeated. Reported: p50/p99 of both, the latency the webhook adds (p50 and p99 differences) and the
ratio of p99s. Target: the webhook adds under 10 ms at p99.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from _cluster import cluster_env, free_port
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("PDD_CACHE", Path.home() / ".cache" / "pdd-operator"))
ENV = {**os.environ, "PDD_CLUSTER_DIR": str(CACHE / "cluster-bench"), "PDD_APISERVER_PORT": os.environ.get(
    "PDD_BENCH_APISERVER_PORT", "19443")}
CONCURRENCY = 50
REQUESTS = int(os.environ.get("PDD_BENCH_REQUESTS", "1000"))
SERIAL = 200
GROUP, VERSION, PLURAL = "pdd-operator.dev", "v1alpha1", "pddeployments"


def body(i: int) -> dict:
    doc = yaml.safe_load((ROOT / "examples" / "llama-dense-pd.yaml").read_text())
    doc["metadata"] = {"name": f"bench-{i}", "namespace": "default"}
    return doc


def load(api: client.CustomObjectsApi, n: int, concurrency: int = CONCURRENCY) -> list[float]:
    """Latency in ms of ``n`` dry-run creates from ``concurrency`` threads."""
    def one(i: int) -> float:
        start = time.perf_counter()
        api.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, body(i), dry_run="All")
        return (time.perf_counter() - start) * 1000
    with cf.ThreadPoolExecutor(concurrency) as pool:
        return list(pool.map(one, range(n)))


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1]


def main() -> int:
    subprocess.run(["bash", "dev/cluster/cluster.sh", "up"], cwd=ROOT, env=ENV, check=True, stdout=subprocess.DEVNULL)
    env = cluster_env(ENV)
    operator = None
    try:
        subprocess.run(["bash", "dev/cluster/cluster.sh", "crd"], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["kubectl", "delete", "validatingwebhookconfiguration", "pdd-operator.dev", "--ignore-not-found"],
                       cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
        cfg = client.Configuration()
        config.load_kube_config(env["KUBECONFIG"], client_configuration=cfg)
        cfg.connection_pool_maxsize = CONCURRENCY * 2
        api = client.CustomObjectsApi(client.ApiClient(cfg))
        load(api, 100)  # warm-up
        baseline = load(api, REQUESTS)
        baseline1 = load(api, SERIAL, 1)

        cert_dir = tempfile.mkdtemp(prefix="pdd-bench-certs-")
        port = free_port()
        log = open(Path(cert_dir) / "operator.log", "w")
        operator = subprocess.Popen(
            [str(ROOT / ".venv" / "bin" / "pdd"), "run", "--webhook-port", str(port), "--webhook-host", "127.0.0.1",
             "--webhook-listen", "127.0.0.1", "--webhook-cert-dir", cert_dir], cwd=ROOT, env=env, stdout=log,
            stderr=subprocess.STDOUT)
        bad = body(0)
        bad["spec"]["kvCache"] = {"ssmConvStateLayout": "SD"}
        bad["spec"]["model"]["hfArchitecture"] = "NemotronHForCausalLM"
        deadline = time.monotonic() + 90
        while True:  # wait until the webhook itself refuses a bad object
            try:
                api.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, bad, dry_run="All")
            except ApiException as exc:
                if "ssm-conv-layout-ds" in str(exc.body):
                    break
            if time.monotonic() > deadline:
                print("the webhook did not become active; see", log.name, file=sys.stderr)
                return 1
            time.sleep(0.5)
        load(api, 100)  # warm-up
        webhook = load(api, REQUESTS)
        webhook1 = load(api, SERIAL, 1)
    finally:
        if operator is not None:
            operator.terminate()
            operator.wait(30)
        subprocess.run(["kubectl", "delete", "validatingwebhookconfiguration", "pdd-operator.dev", "--ignore-not-found"],
                       cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
        subprocess.run(["bash", "dev/cluster/cluster.sh", "down", "--purge"], cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL)

    for title, base, hook, n, c in (("concurrent", baseline, webhook, REQUESTS, CONCURRENCY),
                                     ("one at a time", baseline1, webhook1, SERIAL, 1)):
        b50, b99, w50, w99 = pct(base, 50), pct(base, 99), pct(hook, 50), pct(hook, 99)
        print(f"{title}: {n} server-side dry-run creates per mode, {c} client(s), cores: {os.cpu_count()}")
        print(f"  schema+CEL only (baseline): p50 {b50:7.2f} ms   p99 {b99:7.2f} ms")
        print(f"  with the webhook:           p50 {w50:7.2f} ms   p99 {w99:7.2f} ms")
        print(f"  added by the webhook:       p50 {w50 - b50:7.2f} ms   p99 {w99 - b99:7.2f} ms   (target: p99 < 10 ms)")
        print(f"  ratio webhook/baseline:     p50 {w50 / b50:7.2f}x     p99 {w99 / b99:7.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
