"""Variants of what the thirtieth public-report set (tests/unit/data/public_reports_30) taught, with negative controls.

A Dynamo ``nvidia.com/v1beta1`` component that spans several pods (``spec.components[].multinode.nodeCount``): its
main container names the GPUs of one pod (``nvidia.com/gpu`` under the container's ``resources.limits``), and
Dynamo's operator launches the worker's TP x PP x DP ranks over every pod of the group (backend_vllm.go
``updateVLLMMultinodeArgs``, the same launch as a v1alpha1 multinode service's). The checker read the v1alpha1
shape only, so NVIDIA's Kimi-K3 recipes (TP 16 over four 4-GPU GB200 pods, TP 8 over two 4-GPU GB300 pods) were
refused for ``parallelism-gpu-count`` (:func:`pdd_operator.compat.dynamo_resources.component_multinode`).
"""

from __future__ import annotations

from tests.unit.test_turn2_variants import check, rules

KV = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
RULE = "parallelism-gpu-count"


def _component(name, mode, args, gpus, nodes=None, image="nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.2.1", script=False):
    words = ["--model", "meta-llama/Llama-3.1-8B-Instruct", *args, "--disaggregation-mode", mode,
             "--kv-transfer-config", KV]
    if script:
        quoted = " ".join(f"'{w}'" if "{" in w else w for w in words)
        command, argv = ["/bin/sh", "-c"], [f"set -eu\nexec python3 -m dynamo.vllm {quoted}\n"]
    else:
        command, argv = ["python3", "-m", "dynamo.vllm"], words
    main = {"name": "main", "image": image, "command": command, "args": argv,
            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}, "requests": {"nvidia.com/gpu": str(gpus)}}}
    component = {"name": name, "type": mode, "replicas": 1, "podTemplate": {"spec": {"containers": [main]}}}
    if nodes:
        component["multinode"] = {"nodeCount": nodes}
    return component


def _graph(*components):
    frontend = {"name": "Frontend", "type": "frontend", "replicas": 1,
                "podTemplate": {"spec": {"containers": [{"name": "main",
                                                         "image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.2.1"}]}}}
    return {"apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeployment", "metadata": {"name": "llama-disagg"},
            "spec": {"backendFramework": "vllm", "components": [frontend, *components]}}


def test_tp8_over_two_four_gpu_pods_of_v1beta1_components_is_not_refused(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _graph(_component("Prefill", "prefill", ["--tensor-parallel-size", "8"], 4, 2),
                                               _component("Decode", "decode", ["--tensor-parallel-size", "8"], 4, 2)))
    assert RULE not in rules(out) and code == 0


def test_a_shell_script_worker_spanning_four_pods_with_tp16_is_not_refused(tmp_path, capsys):
    tp16 = ["--tensor-parallel-size", "16"]
    code, out = check(tmp_path, capsys, _graph(_component("Prefill", "prefill", tp16, 4, 4, script=True),
                                               _component("Decode", "decode", tp16, 4, 4, script=True)))
    assert RULE not in rules(out, "error")


def test_without_multinode_the_same_tp8_on_four_gpus_is_still_refused(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _graph(_component("Prefill", "prefill", ["--tensor-parallel-size", "8"], 4),
                                               _component("Decode", "decode", ["--tensor-parallel-size", "8"], 4)))
    assert code == 1 and RULE in rules(out, "error")


def test_a_group_with_fewer_gpus_than_ranks_is_still_refused(tmp_path, capsys):
    # TP 8 x PP 2 = 16 ranks over two pods of 4 GPUs (8 GPUs): the operator spreads them and half find no device.
    args = ["--tensor-parallel-size", "8", "--pipeline-parallel-size", "2"]
    code, out = check(tmp_path, capsys, _graph(_component("Prefill", "prefill", args, 4, 2),
                                               _component("Decode", "decode", args, 4, 2)))
    assert code == 1 and RULE in rules(out, "error")
