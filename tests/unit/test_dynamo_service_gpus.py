"""GPUs a Dynamo v1alpha1 service asks for in its own ``resources`` (``limits.gpu``, ``gpuType``, ``custom``), which
Dynamo's operator puts on the main container (controller_common.GetResourcesConfig): the parallelism rules count
them as they count a container's ``nvidia.com/gpu``. Where Dynamo's releases disagree (a ``requests.gpu`` only, or a
main container that asks for another count, or a multinode service whose launch Dynamo rewrites to span its pods)
the count is not read, so nothing is judged on it."""

from __future__ import annotations

import pytest

from pdd_operator.compat.dynamo_resources import UNKNOWN_PREFIX, service_resources, with_service_resources
from tests.unit.test_turn2_variants import KV, check, rules

MODEL = "Qwen/Qwen3-8B"


def _graph(resources: dict, args: tuple[str, ...] = ("--tensor-parallel-size", "2"), main_resources: dict | None = None,
           runtime: str = "1.2.1") -> dict:
    def worker(sub: str) -> dict:
        main = {"image": f"nvcr.io/nvidia/ai-dynamo/vllm-runtime:{runtime}", "command": ["python3", "-m", "dynamo.vllm"],
                "args": ["--model", MODEL, "--disaggregation-mode", sub, "--kv-transfer-config", KV, *args]}
        if main_resources is not None:
            main["resources"] = main_resources
        return {"componentType": "worker", "subComponentType": sub, "replicas": 1, "resources": resources,
                "extraPodSpec": {"mainContainer": main}}
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
            "spec": {"services": {"VllmPrefillWorker": worker("prefill"), "VllmDecodeWorker": worker("decode")}}}


def _gpu_errors(out: dict) -> list[str]:
    return [f["message"] for r in out["results"] for f in r["findings"]
            if f["rule"] == "parallelism-gpu-count" and f["severity"] == "error"]


@pytest.mark.parametrize("limits", [{"gpu": "1"}, {"gpu": "1", "gpuType": "amd.com/gpu"}])
def test_tp_past_the_service_gpus_is_refused(tmp_path, capsys, limits):
    code, out = check(tmp_path, capsys, _graph({"limits": limits}))
    errors = _gpu_errors(out)
    assert code == 1 and len(errors) == 2 and "requests 1 GPU(s)" in errors[0]


@pytest.mark.parametrize("args", [("--tensor-parallel-size", "2"), ("--data-parallel-size", "2")])
def test_ranks_within_the_service_gpus_pass(tmp_path, capsys, args):
    code, out = check(tmp_path, capsys, _graph({"limits": {"gpu": "2"}}, args))
    assert not _gpu_errors(out) and "parallelism-gpu-count" not in rules(out)


def test_data_parallel_past_the_service_gpus_is_refused(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _graph({"limits": {"gpu": "2"}}, ("--tensor-parallel-size", "2",
                                                                          "--data-parallel-size", "2")))
    assert code == 1 and "ranks (TP 2 x PP 1 x DP-local 2)" in _gpu_errors(out)[0]


def test_the_same_count_on_the_main_container_is_read_once(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _graph({"limits": {"gpu": "1"}},
                                               main_resources={"limits": {"nvidia.com/gpu": "1"}}))
    assert code == 1 and len(_gpu_errors(out)) == 2


@pytest.mark.parametrize("resources, main", [
    ({"requests": {"gpu": "1"}}, None),  # resource.go's GetResourcesConfig does not copy requests.gpu
    ({"limits": {"gpu": "1"}}, {"limits": {"nvidia.com/gpu": "4"}}),  # which wins differs between releases
])
def test_counts_dynamo_releases_disagree_on_are_not_judged(tmp_path, capsys, resources, main):
    code, out = check(tmp_path, capsys, _graph(resources, main_resources=main))
    assert not _gpu_errors(out)


def test_service_resources_in_kubernetes_names():
    res = {"requests": {"cpu": "8", "memory": "64Gi", "gpu": "2"}, "limits": {"gpu": "2", "custom": {"rdma/ib": "1"}}}
    assert service_resources(res) == {"requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "2"},
                                      "limits": {"nvidia.com/gpu": "2", "rdma/ib": "1"}}
    assert service_resources({"requests": {"gpu": "2"}})["requests"]["nvidia.com/gpu"].startswith(UNKNOWN_PREFIX)
    assert service_resources("4") == {} and service_resources({}) == {}
    main = {"name": "main", "resources": {"limits": {"nvidia.com/gpu": "2"}}}
    assert with_service_resources(main, {}) is main
    merged = with_service_resources(main, service_resources({"limits": {"gpu": "4", "custom": {"rdma/ib": "1"}}}))
    assert merged["resources"]["limits"]["rdma/ib"] == "1"
    assert merged["resources"]["limits"]["nvidia.com/gpu"].startswith(UNKNOWN_PREFIX)
    assert main["resources"]["limits"] == {"nvidia.com/gpu": "2"}  # the manifest is not changed


@pytest.mark.parametrize("main", [None, {"limits": {"nvidia.com/gpu": "8"}}])
def test_a_multinode_service_spreads_its_ranks_over_its_nodes(tmp_path, capsys, main):
    # TP 16 over 2 nodes of 8 GPUs: Dynamo's operator rewrites the launch to span the pods (Ray or mp multi-node)
    doc = _graph({"limits": {"gpu": "8"}}, ("--tensor-parallel-size", "16"), main_resources=main)
    for service in doc["spec"]["services"].values():
        service["multinode"] = {"nodeCount": 2}
    code, out = check(tmp_path, capsys, doc)
    assert not _gpu_errors(out)
    # the control: one node of 8 GPUs cannot hold TP 16
    del doc["spec"]["services"]["VllmDecodeWorker"]["multinode"]
    code, out = check(tmp_path, capsys, doc)
    assert code == 1 and len(_gpu_errors(out)) == 1 and _gpu_errors(out)[0].startswith("decode")
