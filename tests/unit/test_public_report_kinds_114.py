"""Variants of what the hundred-and-fourteenth public-report set (tests/unit/data/public_reports_114) taught, with
negative controls.

Dynamo's Motif-3 recipe starts each vLLM worker as ``python3 /motif-runtime/launch_motif_disagg.py <engine args>``,
a launcher mounted from a ConfigMap of the same file that ends in ``os.execv(sys.executable, [sys.executable, "-m",
"dynamo.vllm", *sys.argv[1:]])``. The checker followed mounted shell scripts only, so the whole graph was "not as
container commands" and not checked: silent on an MTP mismatch, four ranks on two GPUs and a decode without a
connector. A mounted Python launcher that hands its own arguments to one fixed command is now read as that command
(:func:`pdd_operator.compat.mounted_scripts.python_launcher_target`); any other launcher is left as written.

The same recipe's aggregated graph (one ``dynamo.vllm`` worker with no role flag and no ``--kv-transfer-config``, no
prefill worker anywhere in the graph) was "not checked: its prefill workers are not in these files", although a graph
holds all its workers: Dynamo registers such a worker as the backend component, which serves every request whole. It
is now aggregated serving, nothing to check (:func:`pdd_operator.compat.manifests.aggregated_alone`).
"""

from __future__ import annotations

from pdd_operator.compat.mounted_scripts import python_launcher_target
from tests.unit.test_public_report_kinds_32 import _graph, _worker
from tests.unit.test_turn2_variants import check, container, rules, workload

KV_P = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
KV_D = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'

EXECVP_VLLM_SERVE = '''#!/usr/bin/env python3
import os
import sys

def patch():
    print("site-specific setup before the engine starts")

if __name__ == "__main__":
    patch()
    os.execvp("vllm", ["vllm", "serve", *sys.argv[1:]])
'''
SUBPROCESS_API_SERVER = '''import subprocess, sys
subprocess.run([sys.executable, "-m", "vllm.entrypoints.openai.api_server", *sys.argv[1:]], check=True)
'''
TWO_TARGETS = '''import os, sys
if os.environ.get("ROLE") == "prefill":
    os.execvp("vllm", ["vllm", "serve", *sys.argv[1:]])
else:
    os.execv(sys.executable, [sys.executable, "-m", "vllm.entrypoints.openai.api_server", *sys.argv[1:]])
'''
ARGS_REBUILT = '''import os, sys
os.execvp("vllm", ["vllm", "serve"] + sys.argv[2:])
'''


def _launched(script, p_args, d_args, kind="Deployment", model="Qwen/Qwen3-8B", image="vllm/vllm-openai:v0.24.0",
              with_cm=True, path="/launch/start.py", model_flag=False):
    docs = []
    for role, args in (("prefill", p_args), ("decode", d_args)):
        words = (["--model", model] if model_flag else [model]) + list(args)
        c = container([path, *words], image=image, command=["python3"],
                      volumeMounts=[{"name": "launcher", "mountPath": path.rsplit("/", 1)[0]}])
        doc = workload(f"qwen-{role}", role, c, kind=kind,
                       pod={"volumes": [{"name": "launcher", "configMap": {"name": "qwen-launcher"}}]})
        docs.append(doc)
    if with_cm:
        docs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "qwen-launcher", "namespace": "default"},
                     "data": {path.rsplit("/", 1)[1]: script}})
    return docs


def test_the_motif_launcher_hands_its_arguments_to_dynamo_vllm():
    source = ('import os, sys\nif __name__ == "__main__":\n'
              '    os.execv(sys.executable, [sys.executable, "-m", "dynamo.vllm", *sys.argv[1:]])\n')
    assert python_launcher_target(source) == ["python3", "-m", "dynamo.vllm"]
    assert python_launcher_target(EXECVP_VLLM_SERVE) == ["vllm", "serve"]
    assert python_launcher_target(TWO_TARGETS) is None and python_launcher_target(ARGS_REBUILT) is None
    assert python_launcher_target("def broken(:\n") is None


def test_a_deployment_pair_started_by_an_execvp_launcher_is_judged(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_launched(EXECVP_VLLM_SERVE, ["--kv-transfer-config", KV_P],
                                                   ["--kv-transfer-config", KV_D, "--kv-cache-dtype", "fp8"]))
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error")
    code, out = check(tmp_path, capsys, *_launched(EXECVP_VLLM_SERVE, ["--kv-transfer-config", KV_P],
                                                   ["--kv-transfer-config", KV_D]))
    assert code == 0 and not rules(out, "error") and not out.get("notChecked")


def test_a_statefulset_pair_started_through_subprocess_is_judged(tmp_path, capsys):
    docs = _launched(SUBPROCESS_API_SERVER, ["--kv-transfer-config", KV_P, "--block-size", "32"],
                     ["--kv-transfer-config", KV_D, "--block-size", "16"], kind="StatefulSet",
                     image="vllm/vllm-openai:v0.10.1.1", model="meta-llama/Llama-3.1-8B-Instruct", model_flag=True)
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and rules(out, "error") & {"block-size-hetero-unsupported", "block-size-direction"}


def test_a_launcher_that_is_not_unambiguous_or_not_in_the_files_is_not_followed(tmp_path, capsys):
    bad = ["--kv-transfer-config", KV_D, "--kv-cache-dtype", "fp8"]
    for script in (TWO_TARGETS, ARGS_REBUILT):
        code, out = check(tmp_path, capsys, *_launched(script, ["--kv-transfer-config", KV_P], bad))
        assert code == 4 and not rules(out, "error")
    code, out = check(tmp_path, capsys, *_launched(EXECVP_VLLM_SERVE, ["--kv-transfer-config", KV_P], bad, with_cm=False))
    assert code == 4 and not rules(out, "error")


# --- an aggregated Dynamo graph ------------------------------------------------------------------------------------


def _v1beta1(args: list[str], image: str) -> dict:
    worker = {"name": "Worker", "type": "worker", "replicas": 1,
              "podTemplate": {"spec": {"containers": [{"name": "main", "image": image,
                                                       "command": ["python3", "-m", "dynamo.vllm"], "args": args,
                                                       "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}}
    frontend = {"name": "Frontend", "type": "frontend", "replicas": 1,
                "podTemplate": {"spec": {"containers": [{"name": "main", "image": image,
                                                         "command": ["python3", "-m", "dynamo.frontend"]}]}}}
    return {"apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeployment", "metadata": {"name": "agg"},
            "spec": {"backendFramework": "vllm", "components": [frontend, worker]}}


def test_a_graph_whose_only_worker_has_no_role_and_no_connector_is_aggregated(tmp_path, capsys):
    dev = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.0-dev.1"  # a pre-release tag: the Dynamo release is not known
    for doc in (_graph({"VllmWorker": _worker("--model Qwen/Qwen3-8B --tensor-parallel-size 2", dev, gpus=2)}, dev),
                _v1beta1(["--model=deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "--tensor-parallel-size=2"], dev)):
        code, out = check(tmp_path, capsys, doc)
        assert code == 4 and not out["notChecked"] and not out["results"], out
        assert "backend component" in out["aggregated"][0]["reason"]
    # a 1.x release adds no connector: such a worker was never a P/D engine, and still is none
    known = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.0"
    code, out = check(tmp_path, capsys, _v1beta1(["--model=Qwen/Qwen3-8B"], known))
    assert code == 4 and not out["notChecked"]


def test_a_graph_with_a_prefill_worker_or_an_explicit_connector_is_not_called_aggregated(tmp_path, capsys):
    dev = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.0-dev.1"
    kv = "--kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'"
    pd = _graph({"VllmPrefillWorker": _worker(f"--model Qwen/Qwen3-8B --disaggregation-mode prefill {kv}", dev),
                 "VllmDecodeWorker": _worker(f"--model Qwen/Qwen3-8B --disaggregation-mode decode {kv}", dev)}, dev)
    code, out = check(tmp_path, capsys, pd)
    assert code == 0 and " + " in out["results"][0]["object"] and not out.get("aggregated")
    lone = _graph({"VllmWorker": _worker(f"--model Qwen/Qwen3-8B {kv}", dev)}, dev)
    code, out = check(tmp_path, capsys, lone)  # a connector of its own: its prefill workers may be another graph's
    assert code == 3 and not out.get("aggregated")
    plain = workload("q-decode", "decode", container(["-m", "dynamo.vllm", "--model", "Qwen/Qwen3-8B"], image=dev,
                                                     command=["python3"]))
    code, out = check(tmp_path, capsys, plain)  # not a graph: its prefill workers may run elsewhere
    assert code == 3 and not out.get("aggregated")
