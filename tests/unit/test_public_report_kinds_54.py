"""Variants of what the fifty-fourth public-report set (tests/unit/data/public_reports_54) taught, with negative
controls. Three kinds, each decided by the cluster rather than by vLLM's flags:

- a NIXL agent whose only fabric is LIBFABRIC pinned to AWS EFA (``FI_PROVIDER=efa``) in a pod that gets no EFA
  device: NIXL's libfabric plugin finds no device, its backend constructor throws and the engine never starts
  (``efa-device-missing``);
- a ``kv_both`` engine beside ``kv_consumer`` decodes (or ``kv_producer`` prefills) of its deployment is their
  other side: vLLM's ``KVTransferConfig`` lets only it produce (or consume), so the pair is judged instead of "role
  cannot be told";
- two engines on one GPU whose ``--gpu-memory-utilization`` sums to exactly 1: the second one measures free memory
  after its own CUDA context is made and always finds less than it requests (``engines-share-gpu``).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from pdd_operator.cli import main
from tests.unit.test_turn2_variants import POD_IP, check

SET = Path(__file__).parent / "data" / "public_reports_54" / "inputs"
LIBFABRIC = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both",
                        "kv_connector_extra_config": {"backends": ["LIBFABRIC"]}})
UCX = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})
EFA = "vpc.amazonaws.com/efa"


def _findings(out: dict, rule: str) -> list[dict]:
    return [f for r in out["results"] for f in r["findings"] if f["rule"] == rule]


def _check_file(path: Path, capsys) -> tuple[int, dict]:
    code = main(["check", str(path), "-o", "json"])
    return code, json.loads(capsys.readouterr().out)


# --- efa-device-missing -----------------------------------------------------------------------------------------


def _efa_pair(kind="Deployment", image="vllm/vllm-openai:v0.26.0", kv=LIBFABRIC, fi_provider="efa",
              decode_efa=False, decode_privileged=False, host_network=False):
    """A Llama 8B TP 8 P/D pair on EFA nodes; the prefill requests 16 EFA devices, the decode as told."""
    docs = []
    for role in ("prefill", "decode"):
        env = [POD_IP, *([{"name": "FI_PROVIDER", "value": fi_provider}] if fi_provider else [])]
        limits = {"nvidia.com/gpu": "8", **({EFA: "16"} if role == "prefill" or decode_efa else {})}
        security = ({"privileged": True} if role == "decode" and decode_privileged
                    else {"capabilities": {"add": ["IPC_LOCK"]}})
        c = {"name": "vllm", "image": image, "command": ["vllm", "serve"],
             "args": ["meta-llama/Llama-3.1-8B-Instruct", "--tensor-parallel-size", "8", "--kv-transfer-config", kv],
             "env": env, "resources": {"limits": limits}, "securityContext": security}
        labels = {"app": "llama", "llm-d.ai/role": role}
        spec = {"containers": [c], **({"hostNetwork": True} if host_network else {})}
        docs.append({"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": f"llama-{role}", "labels": labels},
                     "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                              "template": {"metadata": {"labels": labels}, "spec": spec}}})
    return docs


def test_the_published_decode_without_its_efa_request_fails(capsys):
    code, out = _check_file(SET / "awsdoeks-llama8b-smoke-decode-no-efa-device.yaml", capsys)
    found = _findings(out, "efa-device-missing")
    assert code == 1 and [f["severity"] for f in found] == ["error"]
    assert "decode" in found[0]["message"] and "host network" in found[0]["message"]
    assert EFA in found[0]["fix"] and "spec." not in found[0]["fix"]


@pytest.mark.parametrize(("kw", "fails"), [
    ({}, True),                                           # pod network, no EFA device
    ({"host_network": True}, True),                       # the host network brings no verbs devices
    ({"kind": "StatefulSet"}, True),
    ({"image": "vllm/vllm-openai:v0.11.0"}, True),        # first release that passes backends to the agent
    ({"image": "vllm/vllm-openai:v0.34.0"}, True),
    ({"decode_efa": True}, False),                        # the device plugin hands it EFA devices
    ({"decode_privileged": True}, False),                 # a privileged container sees every host device
    ({"fi_provider": None}, False),                       # libfabric may fall back to its TCP provider
    ({"fi_provider": "efa,tcp"}, False),
    ({"fi_provider": "^efa"}, False),                     # EFA excluded
    ({"kv": UCX}, False),                                 # UCX backend: libfabric is never opened
    ({"image": "vllm/vllm-openai:v0.10.2"}, False),       # 0.10.x reads no backends: UCX only
])
def test_a_libfabric_efa_agent_needs_an_efa_device(tmp_path, capsys, kw, fails):
    code, out = check(tmp_path, capsys, *_efa_pair(**kw))
    found = _findings(out, "efa-device-missing")
    assert bool(found) == fails, out
    if fails:
        assert code == 1 and all(f["severity"] == "error" and "decode" in f["message"] for f in found)


def test_a_dynamo_graph_decode_without_its_custom_efa_resource_fails(tmp_path, capsys):
    docs = list(yaml.safe_load_all((SET / "awsdoeks-llama8b-smoke-dgd-stock-runtime-140efa.yaml").read_text()))
    dgd = next(d for d in docs if d and d.get("kind") == "DynamoGraphDeployment")
    assert not _findings(check(tmp_path, capsys, *docs)[1], "efa-device-missing")
    broken = copy.deepcopy(dgd)
    for part in ("requests", "limits"):
        broken["spec"]["services"]["VllmDecodeWorker"]["resources"][part].pop("custom")
    code, out = check(tmp_path, capsys, *[broken if d is dgd else d for d in docs])
    assert code == 1 and [f["severity"] for f in _findings(out, "efa-device-missing")] == ["error"]


def test_a_script_on_an_efa_host_is_not_judged_for_devices(tmp_path, capsys):
    script = tmp_path / "pd.sh"
    script.write_text(_script(("kv_both", "0", "0.8", "8100", "5600"), ("kv_both", "1", "0.8", "8200", "5601"),
                              env="FI_PROVIDER=efa", kv_extra=',"kv_connector_extra_config":{"backends":["LIBFABRIC"]}'))
    _, out = _check_file(script, capsys)
    assert not _findings(out, "efa-device-missing")


# --- a kv_both engine beside kv_consumer (kv_producer) engines of its deployment ------------------------------


def _script(*launches, env="", kv_extra=""):
    """A host script starting one ``vllm serve`` per ``(kv_role, gpu, utilization, port, side-channel port)``."""
    lines = ["#!/bin/bash", "set -e", "MODEL=facebook/opt-125m"]
    for kv_role, gpu, util, port, side in launches:
        kv = '{"kv_connector":"NixlConnector","kv_role":"' + kv_role + '"' + kv_extra + "}"
        lines.append(f"CUDA_VISIBLE_DEVICES={gpu} {env} VLLM_NIXL_SIDE_CHANNEL_PORT={side} vllm serve $MODEL "
                     f"--port {port} --enforce-eager --gpu-memory-utilization {util} --kv-transfer-config '{kv}' &")
    return "\n".join(lines + ["wait", ""])


def test_the_published_one_host_launchers_pair_and_share_gpu_0(capsys):
    code, out = _check_file(SET / "dlc-efa-nixl-opt125m-both-launchers-one-host.sh", capsys)
    assert code == 1 and len(out["results"]) == 1
    assert [f["severity"] for f in _findings(out, "engines-share-gpu")] == ["error"]


@pytest.mark.parametrize(("roles", "prefill_line"), [
    (("kv_both", "kv_consumer"), 4),    # the kv_both engine is the consumer's prefill
    (("kv_consumer", "kv_both"), 5),
    (("kv_producer", "kv_both"), 4),    # the kv_both engine is the producer's decode
])
def test_a_kv_both_engine_is_the_other_side_of_a_kv_role_engine(tmp_path, capsys, roles, prefill_line):
    script = tmp_path / "pd.sh"
    script.write_text(_script((roles[0], "0", "0.8", "8100", "5600"), (roles[1], "1", "0.8", "8200", "5601")))
    code, out = _check_file(script, capsys)
    assert code == 0 and not out.get("notChecked") and len(out["results"]) == 1, out
    assert out["results"][0]["object"].split(" + ")[0].endswith(f"line {prefill_line}")


def test_two_kv_both_engines_beside_a_consumer_stay_unpaired(tmp_path, capsys):
    script = tmp_path / "pd.sh"
    script.write_text(_script(("kv_both", "0", "0.8", "8100", "5600"), ("kv_both", "1", "0.8", "8200", "5601"),
                              ("kv_consumer", "2", "0.8", "8300", "5602")))
    code, out = _check_file(script, capsys)
    assert code == 3 and out["notChecked"] and not out["results"]


def test_deployments_of_a_kv_consumer_and_a_kv_both_engine_pair(tmp_path, capsys):
    docs = []
    for name, kv_role, gpus in (("opt-a", "kv_both", "1"), ("opt-b", "kv_consumer", "1")):
        labels = {"app": "opt"}  # one app: the two Deployments are one deployment, and no name or label says a role
        kv = json.dumps({"kv_connector": "NixlConnector", "kv_role": kv_role})
        c = {"name": "vllm", "image": "vllm/vllm-openai:v0.21.0", "command": ["vllm", "serve"],
             "args": ["facebook/opt-125m", "--kv-transfer-config", kv], "env": [POD_IP],
             "resources": {"limits": {"nvidia.com/gpu": gpus, "rdma/ib": "1"}}}
        docs.append({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": labels},
                     "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                              "template": {"metadata": {"labels": labels}, "spec": {"containers": [c]}}}})
    code, out = check(tmp_path, capsys, *docs)
    assert not out.get("notChecked") and len(out["results"]) == 1, out
    assert out["results"][0]["object"].startswith("Deployment/opt-a")


# --- engines-share-gpu at a utilization sum of exactly 1 --------------------------------------------------------


@pytest.mark.parametrize(("utils", "fails"), [
    (("0.5", "0.5"), True),      # the second engine's CUDA context is already out of the free memory
    (("0.6", "0.4"), True),
    (("0.7", "0.5"), True),
    (("0.45", "0.5"), False),
])
def test_two_engines_on_one_gpu_need_less_than_its_whole_memory(tmp_path, capsys, utils, fails):
    script = tmp_path / "pd.sh"
    script.write_text(_script(("kv_producer", "0", utils[0], "8100", "5600"),
                              ("kv_consumer", "0", utils[1], "8200", "5601")))
    code, out = _check_file(script, capsys)
    assert bool(_findings(out, "engines-share-gpu")) == fails, out
    assert (code == 1) == fails


# --- hybrid models keep prefix caching opt-in through 0.27.1 ----------------------------------------------------

QWEN35 = Path(__file__).parent / "data" / "public_reports_4"


@pytest.mark.parametrize(("tag", "decode_flag", "errors"), [
    ("v0.26.0", None, set()),        # engine/arg_utils.py: hybrid models opt-in (read as on before set 54)
    ("v0.27.1", None, set()),
    ("v0.28.0", None, {"hybrid-prefix-caching"}),     # default on: heterogeneous physical blocks refused
    ("v0.34.0", None, {"hybrid-prefix-caching"}),
    ("v0.26.0", "--enable-prefix-caching", {"hybrid-prefix-caching", "hybrid-ssm-prefix-caching"}),
    ("v0.27.0", "--enable-prefix-caching", {"hybrid-prefix-caching"}),
    ("v0.28.0", "--no-enable-prefix-caching", set()),
])
def test_a_hybrid_decode_without_a_prefix_caching_flag_caches_only_from_0_28(tmp_path, capsys, tag, decode_flag,
                                                                            errors):
    docs = list(yaml.safe_load_all((QWEN35 / "inputs" / "qwen35-gdn-p-tp1-d-tp4-block16-flashinfer.yaml").read_text()))
    for d in docs:
        c = d["spec"]["template"]["spec"]["containers"][0]
        c["image"] = f"vllm/vllm-openai:{tag}"
        if decode_flag and d["metadata"]["name"].endswith("decode"):
            c["args"].append(decode_flag)
    _, out = check(tmp_path, capsys, *docs,
                   extra=("--model-config", str(QWEN35 / "model_configs" / "qwen3.5-0.8b-two-kv-heads.json")))
    found = {f["rule"] for r in out["results"] for f in r["findings"] if f["severity"] == "error"}
    assert found & {"hybrid-prefix-caching", "hybrid-ssm-prefix-caching"} == errors, out
