"""Variants of what the thirty-second public-report set (tests/unit/data/public_reports_32) taught, with negative
controls.

- A DynamoGraphDeployment whose ``dynamo.vllm`` workers pass no role flag (an NVIDIA Dynamo workshop's "disaggregated"
  graph with ``VllmPrefillWorker`` running the same command as ``VllmDecodeWorker``). Dynamo's worker takes its role
  from ``--is-prefill-worker`` / ``--disaggregation-mode prefill`` alone and registers every other worker as the
  decode/aggregated ``backend`` component (components/src/dynamo/vllm/args.py), so such a graph runs no prefill worker
  and no KV moves. The checker either left both workers "not checked" (a camel-case service name gave no role) or,
  with kebab-case names (``prefill-worker``), paired them by name and passed a P/D that never forms. Now the graph
  gets the ``dynamo-prefill-role-missing`` warning and its workers are not paired
  (:mod:`pdd_operator.compat.dynamo_roles`).
- Two engines of one ROCm container on one GPU behind a connector these rules do not describe (a P/D benchmark script
  launching PyNcclConnector producer and consumer with ``HIP_VISIBLE_DEVICES=6`` both, ``--gpu-memory-utilization
  0.9`` each, on ``rocm/vllm:latest``). The connector scope-out and the unknown release hid a fault that holds on
  every release (``Rule.any_release``), and ``engines-share-gpu`` read only ``CUDA_VISIBLE_DEVICES`` although vLLM's
  ROCm platform copies ``HIP_VISIBLE_DEVICES`` into it (vllm/platforms/rocm.py 0.11.0, 0.32.0).
"""

from __future__ import annotations

from tests.unit.test_turn2_variants import check, rules

RULE = "dynamo-prefill-role-missing"


def _worker(args: str, image: str, gpus: int = 1, sub: str | None = None) -> dict:
    service = {"dynamoNamespace": "g", "componentType": "worker", "replicas": 1, "resources": {"limits": {"gpu": str(gpus)}},
               "extraPodSpec": {"mainContainer": {"image": image, "command": ["/bin/sh", "-c"],
                                                  "args": [f"python3 -m dynamo.vllm {args}"]}}}
    if sub:
        service["subComponentType"] = sub
    return service


def _graph(services: dict, image: str) -> dict:
    frontend = {"dynamoNamespace": "g", "componentType": "frontend", "replicas": 1,
                "extraPodSpec": {"mainContainer": {"image": image}}}
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
            "spec": {"services": {"Frontend": frontend, **services}}}


def _pd_graph(model: str, image: str, prefill_name: str, decode_name: str, p_extra: str = "", d_extra: str = "",
              p_sub: str | None = None) -> dict:
    return _graph({prefill_name: _worker(f"--model {model} {p_extra}".strip(), image, sub=p_sub),
                   decode_name: _worker(f"--model {model} {d_extra}".strip(), image)}, image)


# --- a Dynamo graph with no prefill worker ------------------------------------------------------------------------


def test_a_camel_case_prefill_service_without_the_flag_is_warned_not_left_unchecked(tmp_path, capsys):
    doc = _pd_graph("meta-llama/Llama-3.2-3B-Instruct", "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1",
                    "VllmPrefillWorker", "VllmDecodeWorker")
    code, out = check(tmp_path, capsys, doc)
    assert code == 0 and rules(out, "warning") == {RULE} and not out["notChecked"]
    finding = out["results"][0]["findings"][0]
    assert finding["fields"] == ["DynamoGraphDeployment/g spec.services.VllmPrefillWorker.extraPodSpec.mainContainer.args"]
    assert "--is-prefill-worker" in finding["fix"] and "VllmPrefillWorker" in finding["fix"]


def test_kebab_case_names_no_longer_pair_two_decode_workers_as_prefill_and_decode(tmp_path, capsys):
    # Before, "prefill-worker" gave the role by name and the graph passed as a compatible P/D pair.
    doc = _pd_graph("mistralai/Mistral-7B-Instruct-v0.3", "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.8.0",
                    "prefill-worker", "decode-worker", p_extra="--block-size 32", d_extra="--block-size 16")
    code, out = check(tmp_path, capsys, doc)
    assert code == 0 and rules(out) == {RULE}
    assert all(" + " not in r["object"] for r in out["results"])  # nothing was paired


def test_the_prefill_flag_or_mode_makes_the_graph_a_pair_as_before(tmp_path, capsys):
    # --disaggregation-mode is a Dynamo >= 1.0 flag, whose workers name the connector in --kv-transfer-config (set 67)
    kv = "--kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'"
    for flag, image, d_extra in (("--is-prefill-worker", "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.7.1", ""),
                                 (f"--disaggregation-mode prefill {kv}", "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.0.1",
                                  f"--disaggregation-mode decode {kv}")):
        doc = _pd_graph("Qwen/Qwen2.5-1.5B-Instruct", image, "VllmPrefillWorker", "VllmDecodeWorker", p_extra=flag,
                        d_extra=d_extra)
        code, out = check(tmp_path, capsys, doc)
        assert code == 0 and RULE not in rules(out) and " + " in out["results"][0]["object"], flag


def test_an_aggregated_graph_whose_names_promise_no_prefill_is_not_warned(tmp_path, capsys):
    image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.8.0"
    doc = _graph({"VllmWorker": _worker("--model Qwen/Qwen2.5-1.5B-Instruct", image)}, image)
    code, out = check(tmp_path, capsys, doc)
    assert RULE not in rules(out)


def test_a_sub_component_type_or_an_unknown_mode_is_left_to_the_other_readers(tmp_path, capsys):
    image = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.7.1"
    typed = _pd_graph("Qwen/Qwen2.5-1.5B-Instruct", image, "VllmPrefillWorker", "VllmDecodeWorker", p_sub="prefill")
    code, out = check(tmp_path, capsys, typed)
    assert RULE not in rules(out)
    unknown = _pd_graph("Qwen/Qwen2.5-1.5B-Instruct", image, "VllmPrefillWorker", "VllmDecodeWorker",
                        p_extra="--disaggregation-mode $MODE")
    code, out = check(tmp_path, capsys, unknown)
    assert code == 3 and RULE not in rules(out)


def test_a_plain_deployment_named_prefill_is_not_a_dynamo_graph(tmp_path, capsys):
    from tests.unit.test_turn2_variants import pd
    kv = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
    code, out = check(tmp_path, capsys, *pd("qwen", ["--kv-transfer-config", kv], ["--kv-transfer-config", kv]))
    assert RULE not in rules(out)


# --- two engines on one GPU, whatever the connector and release ---------------------------------------------------


def _script_deployment(image: str, lines: list[str], resources: dict) -> dict:
    container = {"name": "vllm", "image": image, "command": ["/bin/bash", "-c"],
                 "args": ["\n".join([*(f"{line} &" for line in lines), "wait"])], "resources": {"limits": resources}}
    labels = {"app": "bench"}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "bench", "labels": labels},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}}}


def _launch(env: str, port: int, role: str, util: str, connector: str = "PyNcclConnector",
            model: str = "microsoft/Phi-3-mini-4k-instruct") -> str:
    kv = f'{{"kv_connector":"{connector}","kv_role":"{role}","kv_rank":{0 if role == "kv_producer" else 1},"kv_parallel_size":2}}'
    return (f"{env} python3 -m vllm.entrypoints.openai.api_server --model {model} --port {port} "
            f"--gpu-memory-utilization {util} --kv-transfer-config '{kv}'")


def test_rocm_engines_on_one_hip_device_behind_a_foreign_connector_on_an_unknown_release_are_refused(tmp_path, capsys):
    doc = _script_deployment("rocm/vllm:latest", [
        _launch("HIP_VISIBLE_DEVICES=3", 8100, "kv_producer", "0.6"),
        _launch("HIP_VISIBLE_DEVICES=3", 8200, "kv_consumer", "0.6")], {"amd.com/gpu": "8"})
    code, out = check(tmp_path, capsys, doc)
    assert code == 1 and rules(out, "error") == {"engines-share-gpu"}
    message = out["results"][0]["findings"][0]["message"]
    assert "HIP_VISIBLE_DEVICES=3" in message and "0.6 + 0.6 = 1.2" in message
    assert out["notChecked"]  # the KV path between them stays unchecked


def test_cuda_engines_on_one_device_behind_a_foreign_connector_on_an_unknown_release_are_refused(tmp_path, capsys):
    doc = _script_deployment("my-registry/vllm:custom", [
        _launch("CUDA_VISIBLE_DEVICES=0", 8100, "kv_producer", "0.8", connector="P2pNcclConnector",
                model="google/gemma-3-4b-it"),
        _launch("CUDA_VISIBLE_DEVICES=0", 8200, "kv_consumer", "0.8", connector="P2pNcclConnector",
                model="google/gemma-3-4b-it")], {"nvidia.com/gpu": "2"})
    code, out = check(tmp_path, capsys, doc)
    assert code == 1 and rules(out, "error") == {"engines-share-gpu"}


def test_hip_devices_that_differ_or_fit_stay_not_checked(tmp_path, capsys):
    apart = _script_deployment("rocm/vllm:latest", [
        _launch("HIP_VISIBLE_DEVICES=0", 8100, "kv_producer", "0.9"),
        _launch("HIP_VISIBLE_DEVICES=1", 8200, "kv_consumer", "0.9")], {"amd.com/gpu": "2"})
    code, out = check(tmp_path, capsys, apart)
    assert code == 3 and not rules(out)
    fits = _script_deployment("rocm/vllm:latest", [
        _launch("HIP_VISIBLE_DEVICES=0", 8100, "kv_producer", "0.45"),
        _launch("HIP_VISIBLE_DEVICES=0", 8200, "kv_consumer", "0.45")], {"amd.com/gpu": "2"})
    code, out = check(tmp_path, capsys, fits)
    assert code == 3 and not rules(out)


def test_hip_visible_devices_means_nothing_on_a_cuda_image(tmp_path, capsys):
    # CUDA ignores HIP_VISIBLE_DEVICES: both engines see every GPU and start on device 0, so they share it.
    doc = _script_deployment("vllm/vllm-openai:v0.11.0", [
        _launch("HIP_VISIBLE_DEVICES=0", 8100, "kv_producer", "0.9", connector="NixlConnector"),
        _launch("HIP_VISIBLE_DEVICES=1", 8200, "kv_consumer", "0.9", connector="NixlConnector")],
        {"nvidia.com/gpu": "2"})
    code, out = check(tmp_path, capsys, doc)
    assert code == 1 and "engines-share-gpu" in rules(out, "error")
    message = next(f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == "engines-share-gpu")
    assert "CUDA_VISIBLE_DEVICES=(unset)" in message
