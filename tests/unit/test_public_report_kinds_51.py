"""Variants of what the fifty-first public-report set (tests/unit/data/public_reports_51) taught, with negative
controls.

1. A Dynamo multinode vLLM worker whose TP x PP exceeds one pod's GPUs has its ranks spread over the pods by
   Dynamo's operator (backend_vllm.go ``updateVLLMMultinodeArgs``): a Ray cluster, or an ``mp`` launch with
   ``--nnodes``, which vLLM has only from 0.11.1. Before 0.11.1 every rank binds its own NIXL handshake listener on
   ``VLLM_NIXL_SIDE_CHANNEL_HOST``, which dynamo.vllm sets to the leader pod's IP and Ray copies to the ranks on the
   other pods (vllm/ray/ray_env.py): those ranks cannot bind it and the engine never serves
   (``side-channel-host-per-node``, ai-dynamo/dynamo#3724 on vllm-runtime 0.6.x). DP ranks per pod are not such a
   launch; from 0.11.1 one listener runs in the scheduler.
2. A script (or Compose file) of ``python -m dynamo.vllm`` workers whose P/D role is only Dynamo's own flag
   (``--is-prefill-worker``) names no KV connector: Dynamo before 1.0 builds NixlConnector itself. Such files are
   P/D topologies (ai-dynamo/dynamo#3046), and with the Dynamo release unknown the side-channel port each worker
   uses (reserved in etcd by some releases, vLLM's default in later ones) is not known, so two workers on one host
   are not refused for sharing vLLM's default port.
"""

from __future__ import annotations

import json

from tests.unit.test_turn2_variants import check, rules

KV = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})


def _service(image: str, args: str, gpus: int, nodes: int = 1) -> dict:
    service = {"dynamoNamespace": "d", "componentType": "worker", "replicas": 1,
               "resources": {"limits": {"gpu": str(gpus)}},
               "extraPodSpec": {"mainContainer": {"image": image, "workingDir": "/workspace/components/backends/vllm",
                                                  "command": ["/bin/sh", "-c"],
                                                  "args": [f"python3 -m dynamo.vllm {args}"]}}}
    if nodes > 1:
        service["multinode"] = {"nodeCount": nodes}
    return service


def _graph(prefill: dict, decode: dict, name: str = "vllm-disagg") -> dict:
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": name},
            "spec": {"services": {"decode": decode, "prefill": prefill}}}


def _qwen(runtime: str, d_args: str = "--tensor-parallel-size 2", d_gpus: int = 1, d_nodes: int = 2,
          p_args: str = "--is-prefill-worker") -> dict:
    image = f"nvcr.io/nvidia/ai-dynamo/vllm-runtime:{runtime}"
    return _graph(_service(image, f"--model Qwen/Qwen3-0.6B {p_args}", 1),
                  _service(image, f"--model Qwen/Qwen3-0.6B {d_args}", d_gpus, d_nodes))


def _messages(out: dict, rule: str) -> list[str]:
    return [f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == rule]


# --- 1. a Dynamo multinode TP launch before vLLM 0.11.1 -------------------------------------------------------------


def test_a_two_pod_tp_decode_on_vllm_0_11_0_never_serves(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _qwen("0.6.1"))   # vllm-runtime 0.6.1 ships vLLM 0.11.0
    assert code == 1 and "side-channel-host-per-node" in rules(out, "error"), out
    message = _messages(out, "side-channel-host-per-node")[0]
    assert message.startswith("decode:") and "Ray" in message and "--nnodes" in message
    fix = [f["fix"] for r in out["results"] for f in r["findings"] if f["rule"] == "side-channel-host-per-node"][0]
    assert "vllm-runtime" in fix and "resources.limits.gpu" in fix and "spec." not in fix


def test_a_spread_prefill_of_another_model_and_release_too(tmp_path, capsys):
    # Llama-3.1-8B, prefill TP 4 over two pods of 2 GPUs, on vllm-runtime 0.6.0 (vLLM 0.11.0); the decode on one pod
    image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.0"
    model = "--model meta-llama/Llama-3.1-8B-Instruct"
    graph = _graph(_service(image, f"{model} --is-prefill-worker --tensor-parallel-size 4", 2, nodes=2),
                   _service(image, f"{model} --tensor-parallel-size 4", 4))
    code, out = check(tmp_path, capsys, graph)
    assert code == 1 and "side-channel-host-per-node" in rules(out, "error"), out
    assert all(m.startswith("prefill:") for m in _messages(out, "side-channel-host-per-node"))


def test_a_v1beta1_component_spread_over_pods(tmp_path, capsys):
    image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1"

    def component(name, kind, args, nodes):
        main = {"name": "main", "image": image, "command": ["python3", "-m", "dynamo.vllm"],
                "args": ["--model", "Qwen/Qwen3-8B", *args], "resources": {"limits": {"nvidia.com/gpu": "1"}}}
        out = {"name": name, "type": kind, "replicas": 1, "podTemplate": {"spec": {"containers": [main]}}}
        if nodes > 1:
            out["multinode"] = {"nodeCount": nodes}
        return out

    dgd = {"apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeployment", "metadata": {"name": "q"},
           "spec": {"backendFramework": "vllm", "components": [
               component("Prefill", "prefill", ["--is-prefill-worker"], 1),
               component("Decode", "decode", ["--tensor-parallel-size", "2"], 2)]}}
    code, out = check(tmp_path, capsys, dgd)
    assert code == 1 and "side-channel-host-per-node" in rules(out, "error"), out


def test_from_vllm_0_11_1_one_listener_serves_the_engine(tmp_path, capsys):
    # vllm-runtime 0.7.0.post2 ships vLLM 0.11.2; 1.2.0 ships 0.20.1 (and wants the connector and mode spelled out)
    code, out = check(tmp_path, capsys, _qwen("0.7.0.post2"))
    assert "side-channel-host-per-node" not in rules(out), out
    mode = f"--kv-transfer-config '{KV}'"
    graph = _qwen("1.2.0", d_args=f"--tensor-parallel-size 2 --disaggregation-mode decode {mode}",
                  p_args=f"--disaggregation-mode prefill {mode}")
    code, out = check(tmp_path, capsys, graph)
    assert code == 0 and "side-channel-host-per-node" not in rules(out), out


def test_tp_within_one_pod_and_dp_ranks_per_pod_are_no_ray_spread(tmp_path, capsys):
    # TP 2 on a 2-GPU pod: nothing spread; DP 2 over two 1-GPU pods: each pod runs its own engine core
    code, out = check(tmp_path, capsys, _qwen("0.6.1", d_gpus=2, d_nodes=1))
    assert code == 0 and "side-channel-host-per-node" not in rules(out), out
    code, out = check(tmp_path, capsys, _qwen("0.6.1", d_args="--data-parallel-size 2"))
    assert "side-channel-host-per-node" not in rules(out), out


def test_an_unknown_runtime_release_is_not_checked_for_it(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _qwen("0.5.1"))   # no page maps vllm-runtime 0.5.1 to a vLLM release
    assert code == 3 and not rules(out, "error"), out
    assert any("side-channel-host-per-node" in n["reason"] for n in out["notChecked"]), out


# --- 2. dynamo.vllm workers marked P/D by Dynamo's own role flags ---------------------------------------------------

_SCRIPT = """#!/bin/bash
MODEL=Qwen/Qwen3-32B
python -m dynamo.frontend --router-mode kv --http-port 8090 &
{env_d}CUDA_VISIBLE_DEVICES=0,1 python -m dynamo.vllm --model "$MODEL" --tensor-parallel-size 2 --block-size 64 &
{env_p}CUDA_VISIBLE_DEVICES=2,3 python -m dynamo.vllm --model "$MODEL" --tensor-parallel-size 2 --block-size 64 \\
  {flag} &
wait
"""


def _script(tmp_path, capsys, flag="--is-prefill-worker", env_d="", env_p="") -> tuple[int, dict]:
    path = tmp_path / "run.sh"
    path.write_text(_SCRIPT.format(flag=flag, env_d=env_d, env_p=env_p))
    from pdd_operator.cli import main
    code = main(["check", str(path), "-o", "json"])
    return code, json.loads(capsys.readouterr().out)


def test_a_script_of_dynamo_workers_is_a_pd_pair(tmp_path, capsys):
    code, out = _script(tmp_path, capsys)
    assert code == 0 and len(out["results"]) == 1, out
    assert not rules(out, "error") and "vllm-version-unknown" in rules(out, "warning"), out
    # the port each worker uses is Dynamo's (some releases reserve it in etcd): said, not refused
    assert "configure_ports_with_etcd" in " ".join(_messages(out, "side-channel-port-conflict"))


def test_ports_written_in_the_script_are_still_compared(tmp_path, capsys):
    same = "VLLM_NIXL_SIDE_CHANNEL_PORT=5600 "
    code, out = _script(tmp_path, capsys, env_d=same, env_p=same)
    assert code == 1 and "side-channel-port-conflict" in rules(out, "error"), out
    code, out = _script(tmp_path, capsys, env_d=same, env_p="VLLM_NIXL_SIDE_CHANNEL_PORT=5700 ")
    assert "side-channel-port-conflict" not in rules(out), out


def test_a_compose_file_of_dynamo_workers_is_a_pd_pair(tmp_path, capsys):
    def service(device, role_flag):
        return {"image": "my/dynamo-vllm:latest",
                "command": f"python3 -m dynamo.vllm --model Qwen/Qwen3-8B {role_flag}".strip(),
                "deploy": {"resources": {"reservations": {"devices": [
                    {"driver": "nvidia", "device_ids": [device], "capabilities": ["gpu"]}]}}}}

    compose = {"services": {"prefill": service("0", "--is-prefill-worker"), "decode": service("1", "")}}
    path = tmp_path / "compose.yaml"
    path.write_text(json.dumps(compose))
    from pdd_operator.cli import main
    code = main(["check", str(path), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and len(out["results"]) == 1 and not rules(out, "error"), out


def test_the_role_flags_alone_are_no_marker_without_dynamo_vllm(tmp_path, capsys):
    # an SGLang script's --disaggregation-mode is not Dynamo's vLLM worker: no vLLM engine is read from it; since
    # set 99 the SGLang P/D pair is named "not checked" (exit 3), as SGLang containers in manifests are
    path = tmp_path / "sglang.sh"
    path.write_text("python -m sglang.launch_server --model-path Qwen/Qwen3-8B --disaggregation-mode prefill &\n"
                    "python -m sglang.launch_server --model-path Qwen/Qwen3-8B --disaggregation-mode decode &\nwait\n")
    from pdd_operator.cli import main
    assert main(["check", str(path), "-o", "json"]) == 3
    out = json.loads(capsys.readouterr().out)
    assert not out["results"] and "SGLang" in out["notChecked"][0]["reason"], out
