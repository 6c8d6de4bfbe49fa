"""Variants of what the eighty-first public-report set (tests/unit/data/public_reports_81) taught, with negative
controls: the P/D proxy in front of a NixlConnector pair speaks NixlConnector's request protocol.

vLLM's NixlConnector (pull) moves KV only for requests that carry ``kv_transfer_params`` (0.9.0-0.34.0); llm-d's
routing sidecar with ``-connector=nixl`` (its v1 protocol, fields at the top level of the body) or ``lmcache`` (no
params at all), vLLM's ``disagg_proxy_demo.py`` (a ``max_tokens`` 1 prefill, then the decode) and the P2P NCCL
example's proxy (peers in the request id, only engines a P2pNcclConnector registered) move no KV through NIXL:
``pd-proxy-protocol``, a warning (requests succeed by recomputing, or fail at the proxy; vLLM itself fails nothing).
Proxies that pass ``kv_transfer_params`` (``nixlv2``, ``toy_proxy_server.py``), a protocol that drives another
connector of a MultiConnector, a push pair and proxies whose protocol is not read are not judged.
"""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from pdd_operator.compat.pd_proxy import command_proxy, sidecar_proxy
from tests.unit.test_llmd_values import _check as check_values
from tests.unit.test_llmd_values import _values as llmd_values
from tests.unit.test_turn2_variants import check, container, rules, workload

NIXL = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})
RULE = "pd-proxy-protocol"


def _sidecar(args, image="ghcr.io/llm-d/llm-d-routing-sidecar:v0.2.0", native=True):
    c = {"name": "routing-proxy", "image": image, "args": list(args), "ports": [{"containerPort": 8000}]}
    return {**c, "restartPolicy": "Always"} if native else c


def _pair(sidecar, model="meta-llama/Llama-3.1-8B-Instruct", image="vllm/vllm-openai:v0.20.0", kv=NIXL, native=True):
    """A prefill Deployment and a decode Deployment whose pod runs ``sidecar`` beside the engine (as a native sidecar
    init container, or a second container)."""
    decode = container([model, "--port", "8200", "--kv-transfer-config", kv], image=image)
    pod = ({"initContainers": [sidecar]} if native else {}) if sidecar else {}
    d = workload("m-decode", "decode", decode, pod=pod, app="m")
    if sidecar and not native:
        d["spec"]["template"]["spec"]["containers"].append(sidecar)
    p = workload("m-prefill", "prefill", container([model, "--kv-transfer-config", kv], image=image), app="m")
    return [p, d]


# --- the sidecar's protocol, as a pure function --------------------------------------------------------------------


@pytest.mark.parametrize(("args", "image", "protocol"), [
    (["-connector=nixlv2"], "ghcr.io/llm-d/llm-d-routing-sidecar:v0.2.0", "kv_transfer_params"),
    (["--connector", "nixl"], "ghcr.io/llm-d/llm-d-routing-sidecar:v0.3.0", "nixl-v1"),
    (["-vllm-port=8200", "-connector=lmcache"], "routing-proxy", "prefill-then-decode"),  # the e2e image name
    (["--kv-connector=nixlv2"], "ghcr.io/llm-d/llm-d-inference-scheduler/pd-sidecar:v0.5.0", "kv_transfer_params"),
    ([], "ghcr.io/llm-d/llm-d-routing-sidecar:0.0.8", "nixl-v1"),         # default nixl up to v0.2.x (main.go)
    ([], "ghcr.io/llm-d/llm-d-routing-sidecar:v0.2.0", "nixl-v1"),
    ([], "ghcr.io/llm-d/llm-d-routing-sidecar:v0.3.0", "kv_transfer_params"),  # nixlv2 by default from v0.3.0
    ([], "ghcr.io/llm-d/llm-d-routing-sidecar:latest", None),             # not a release: default not known
    (["-port=8000", "-vllm-port=8200"], "quay.io/me/proxy:dev", None),     # no connector, unknown image
    (["-vllm-port=8200", "-connector=nixl"], "quay.io/me/proxy:dev", "nixl-v1"),  # known by its -vllm-port flag
    (["--kv-connector=shared-storage"], "ghcr.io/llm-d/llm-d-routing-sidecar:v0.4.0", None),  # protocol not read
])
def test_the_sidecar_protocol(args, image, protocol):
    proxy = sidecar_proxy({"name": "routing-proxy", "image": image, "args": args})
    assert (proxy.protocol if proxy else None) == protocol


def test_a_vllm_container_is_no_sidecar():
    c = container(["Qwen/Qwen3-8B", "--kv-transfer-config", NIXL], image="vllm/vllm-openai:v0.20.0")
    assert sidecar_proxy(c) is None


@pytest.mark.parametrize(("words", "protocol"), [
    ("python3 toy_proxy_server.py --port 8192 --prefiller-ports 8100 --decoder-ports 8200", "kv_transfer_params"),
    ("python3 /opt/vllm/examples/disagg_proxy_p2p_nccl_xpyd.py", "p2p-request-id"),
    ("python3 disagg_proxy_demo.py --model m --prefill localhost:8100 --decode localhost:8200", "prefill-then-decode"),
    ("./bin/llm-d-routing-sidecar -port=8000 -vllm-port=8001 -connector=nixl", "nixl-v1"),
    ("./bin/llm-d-routing-sidecar -port=8000 -vllm-port=8001", None),  # a source build: default not known
    ("python3 disagg_proxy_server.py --prefiller-port 8100", None),     # a name several proxies share: not read
])
def test_the_script_proxy_protocol(words, protocol):
    proxy = command_proxy(words.split())
    assert (proxy.protocol if proxy else None) == protocol


# --- the rule on Deployments (another model and release than the set's) ---------------------------------------------


@pytest.mark.parametrize(("args", "image", "warned"), [
    (["--port=8000", "--vllm-port=8200", "--connector=nixl"], "ghcr.io/llm-d/llm-d-routing-sidecar:v0.2.0", True),
    (["--port=8000", "--vllm-port=8200", "--connector=lmcache"], "ghcr.io/llm-d/llm-d-routing-sidecar:v0.2.0", True),
    (["--port=8000", "--vllm-port=8200"], "ghcr.io/llm-d/llm-d-routing-sidecar:v0.2.0", True),   # its default: nixl
    (["--port=8000", "--vllm-port=8200"], "ghcr.io/llm-d/llm-d-routing-sidecar:v0.3.1", False),  # default nixlv2
    (["--port=8000", "--vllm-port=8200", "--connector=nixlv2"], "ghcr.io/llm-d/llm-d-routing-sidecar:v0.2.0", False),
    (["--port=8000", "--vllm-port=8200", "--kv-connector=shared-storage"], "ghcr.io/llm-d/pd-sidecar:v0.5.0", False),
])
@pytest.mark.parametrize("native", [True, False])
def test_a_routing_sidecar_in_front_of_a_nixl_pair(tmp_path, capsys, args, image, warned, native):
    code, out = check(tmp_path, capsys, *_pair(_sidecar(args, image, native), native=native))
    assert code == 0
    assert (RULE in rules(out, "warning")) is warned


def test_the_warning_names_the_sidecar_and_says_no_kv_moves(tmp_path, capsys):
    _, out = check(tmp_path, capsys, *_pair(_sidecar(["-connector=nixl"])))
    [message] = [f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == RULE]
    assert "routing-proxy" in message and "-connector=nixl" in message and "recomputes every prompt" in message


def test_a_multiconnector_whose_lmcache_child_the_lmcache_protocol_drives_is_not_warned(tmp_path, capsys):
    kv = json.dumps({"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {
        "connectors": [{"kv_connector": "NixlConnector", "kv_role": "kv_both"},
                       {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}]}})
    _, out = check(tmp_path, capsys, *_pair(_sidecar(["-connector=lmcache"]), kv=kv))
    assert RULE not in rules(out)
    _, out = check(tmp_path, capsys, *_pair(_sidecar(["-connector=nixl"]), kv=kv))  # control: v1 drives neither
    assert RULE in rules(out, "warning")


def test_a_push_pair_is_not_judged(tmp_path, capsys):
    kv = json.dumps({"kv_connector": "NixlPushConnector", "kv_role": "kv_both"})
    _, out = check(tmp_path, capsys, *_pair(_sidecar(["-connector=lmcache"]), image="vllm/vllm-openai:v0.24.0", kv=kv))
    assert RULE not in rules(out)


def test_without_a_proxy_nothing_is_said(tmp_path, capsys):
    _, out = check(tmp_path, capsys, *_pair(None))
    assert RULE not in rules(out)


# --- llm-d-modelservice values: the chart's routing proxy ----------------------------------------------------------


@pytest.mark.parametrize(("connector", "warned"), [("nixl", True), ("lmcache", True), ("nixlv2", False)])
def test_llmd_values_routing_proxy_connector(tmp_path, capsys, connector, warned):
    values = llmd_values(image="vllm/vllm-openai:v0.14.0")
    values["routing"]["proxy"]["connector"] = connector
    code, out = check_values(tmp_path, capsys, values)
    assert code == 0
    assert (RULE in rules(out, "warning")) is warned


# --- a script's proxy (one pod, one script: the set's P2P example and vLLM's proxy demo) -------------------------------


def _script_pod(proxy_line, kv=NIXL, image="vllm/vllm-openai:v0.11.0", model="Qwen/Qwen2.5-7B-Instruct"):
    def serve(gpu, port, side):
        return (f"CUDA_VISIBLE_DEVICES={gpu} VLLM_NIXL_SIDE_CHANNEL_PORT={side} vllm serve {model} --port {port} "
                f"--kv-transfer-config '{kv}' &")
    script = "\n".join([serve(0, 8100, 5600), serve(1, 8200, 5700), proxy_line, "wait"])
    c = {"name": "pd", "image": image, "command": ["bash", "-c"], "args": [script],
         "resources": {"limits": {"nvidia.com/gpu": "2"}}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pd"}, "spec": {"containers": [c]}}


@pytest.mark.parametrize(("proxy_line", "warned"), [
    ("python3 disagg_proxy_demo.py --model m --prefill localhost:8100 --decode localhost:8200 --port 8000 &", True),
    ("python3 toy_proxy_server.py --port 8192 --prefiller-ports 8100 --decoder-ports 8200 &", False),
    ("./bin/llm-d-routing-sidecar -port=8000 -vllm-port=8200 -connector=lmcache &", True),
])
def test_a_script_s_proxy_in_front_of_a_nixl_pair(tmp_path, capsys, proxy_line, warned):
    code, out = check(tmp_path, capsys, _script_pod(proxy_line))
    assert code == 0 and out["results"]
    assert (RULE in rules(out, "warning")) is warned


def test_the_p2p_proxy_in_front_of_nixl_engines_is_warned_and_in_front_of_p2p_engines_is_not(tmp_path, capsys):
    kv_roles = [("kv_producer", 8100), ("kv_consumer", 8200)]

    def pod(connector):
        lines = []
        for gpu, (role, port) in enumerate(kv_roles):
            kv = json.dumps({"kv_connector": connector, "kv_role": role, "kv_port": str(21001 + gpu),
                             "kv_connector_extra_config": {"proxy_ip": "0.0.0.0", "proxy_port": "30001",
                                                           "http_port": str(port)}})
            lines.append(f"CUDA_VISIBLE_DEVICES={gpu} VLLM_NIXL_SIDE_CHANNEL_PORT={5600 + 100 * gpu} vllm serve "
                         f"Qwen/Qwen2.5-7B-Instruct --port {port} --kv-transfer-config '{kv}' &")
        doc = _script_pod("python3 disagg_proxy_p2p_nccl_xpyd.py &")
        doc["spec"]["containers"][0]["args"] = ["python3 disagg_proxy_p2p_nccl_xpyd.py &\n" + "\n".join(lines) + "\nwait"]
        return doc

    _, out = check(tmp_path, capsys, pod("NixlConnector"))
    messages = [f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == RULE]
    assert messages and "serves nothing through this proxy" in messages[0]
    _, out = check(tmp_path, capsys, pod("P2pNcclConnector"))
    assert RULE not in rules(out)


def test_the_set_s_sidecar_pods_as_published_and_with_the_connector_changed(tmp_path, capsys):
    from pathlib import Path
    path = Path(__file__).parent / "data" / "public_reports_81" / "inputs" / "llmd-sidecar-qwen2-pods-nixlv2-v0100.yaml"
    docs = list(yaml.safe_load_all(path.read_text()))
    _, out = check(tmp_path, capsys, *docs)
    assert RULE not in rules(out)
    changed = copy.deepcopy(docs)
    changed[0]["spec"]["initContainers"][0]["args"][2] = "-connector=lmcache"
    _, out = check(tmp_path, capsys, *changed)
    assert RULE in rules(out, "warning")
