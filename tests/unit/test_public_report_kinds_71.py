"""Variants of what the seventy-first public-report set (tests/unit/data/public_reports_71, P/D on AMD GPUs) taught,
with negative controls.

1. ``nixl-not-in-image``: on ROCm vLLM imports NIXL's API from RIXL (``rixl._api``, 0.14.0-0.26.x) or ``nixl_rocm``
   (0.27.0 on), and vLLM's ``docker/Dockerfile.rocm`` installs RIXL in the final image only from 0.21.0 (before that
   in the test stage only, and before 0.14.0 not at all): a NixlConnector engine on ``vllm/vllm-openai-rocm`` before
   0.21.0, or on AMD's ``rocm/vllm`` of a release before 0.14.0, raises ``RuntimeError("NIXL is not available")`` at
   startup (:mod:`pdd_operator.vllm.rocm_nixl`). AMD's images of 0.14.0-0.20.x are a warning.
2. A Slurm script that starts one container per node (``srun --nodelist=n1 docker run -e ... IMAGE vllm serve ...``,
   as InferenceX's and vLLM's .buildkite/amd-disagg jobs do) is read as that ``docker run``: its image (the vLLM
   release) and its ``-e`` environment (the side channel host), and each node's engines as their own pod.
"""

from __future__ import annotations

import pytest

from pdd_operator.vllm.rocm_nixl import rocm_image_nixl_missing
from pdd_operator.vllm.script import docker_run
from tests.unit.cli_check import check_text
from tests.unit.test_turn2_variants import POD_IP, check, rules, workload

KV_P = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
KV_D = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'


def _rocm_pair(model, p_image, d_image=None, tp=1, env=(), command=("vllm", "serve")):
    docs = []
    for role, image, kv in (("prefill", p_image, KV_P), ("decode", d_image or p_image, KV_D)):
        c = {"name": "vllm", "image": image, "command": list(command),
             "args": [model, f"--tensor-parallel-size={tp}", f"--kv-transfer-config={kv}"],
             "env": [POD_IP, *env], "resources": {"limits": {"amd.com/gpu": str(tp), "rdma/rdma_shared_device_a": "1"}},
             "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}}}
        docs.append(workload(f"m-{role}", role, c))
    return docs


def _findings(out, rule):
    return [f for r in out["results"] for f in r["findings"] if f["rule"] == rule]


# --- the image table, as a pure function --------------------------------------------------------------------------


@pytest.mark.parametrize(("image", "version", "expected"), [
    ("vllm/vllm-openai-rocm:v0.20.1", (0, 20, 1), "error"),     # RIXL in the test stage only
    ("vllm/vllm-openai-rocm:v0.20.2", (0, 20, 2), "error"),
    ("vllm/vllm-openai-rocm:v0.14.0", (0, 14, 0), "error"),
    ("docker.io/vllm/vllm-openai-rocm:v0.12.0", (0, 12, 0), "error"),  # no RIXL at all
    ("vllm/vllm-openai-rocm:v0.21.0", (0, 21, 0), None),         # the final stage installs it (vllm#41634)
    ("vllm/vllm-openai-rocm:v0.26.0", (0, 26, 0), None),
    ("vllm/vllm-openai-rocm:v0.27.0", (0, 27, 0), None),         # upstream NIXL built for ROCm (nixl_rocm)
    ("vllm/vllm-openai-rocm:latest", None, None),                # the release is not known
    ("rocm/vllm:rocm6.4.1_vllm_0.9.1_20250715", (0, 9, 1), "error"),   # no RIXL in any stage of 0.9.1
    ("rocm/vllm-dev:rocm6.4.1_vllm_0.10.1_20250801", (0, 10, 1), "error"),
    ("rocm/vllm:rocm7.0.0_vllm_0.17.1_20260301", (0, 17, 1), "warning"),  # AMD's build may add it
    ("rocm/vllm:rocm7.2.0_vllm_0.21.0_20260601", (0, 21, 0), None),
    ("vllm/vllm-openai:v0.17.1", (0, 17, 1), None),             # CUDA images ship nixl
    ("ghcr.io/llm-d/llm-d-rocm:v0.8.1", (0, 17, 1), None),        # other builders' images are not judged here
])
def test_which_rocm_images_lack_the_nixl_package(image, version, expected):
    assert rocm_image_nixl_missing(image, version) == expected


# --- the rule, across formats, models and releases -----------------------------------------------------------------


@pytest.mark.parametrize("image", ["vllm/vllm-openai-rocm:v0.20.1", "vllm/vllm-openai-rocm:v0.18.0",
                                   "vllm/vllm-openai-rocm:v0.14.1", "rocm/vllm:rocm6.4.1_vllm_0.9.1_20250715"])
@pytest.mark.parametrize("model", ["Qwen/Qwen3-8B", "meta-llama/Llama-3.1-8B-Instruct"])
def test_nixl_on_a_rocm_image_without_rixl_is_refused(tmp_path, capsys, image, model):
    code, out = check(tmp_path, capsys, *_rocm_pair(model, image))
    assert code == 1 and "nixl-not-in-image" in rules(out, "error"), out
    assert {f["message"].split(":", 1)[0] for f in _findings(out, "nixl-not-in-image")} == {"prefill", "decode"}


@pytest.mark.parametrize("image", ["vllm/vllm-openai-rocm:v0.21.0", "vllm/vllm-openai-rocm:v0.26.0",
                                   "vllm/vllm-openai-rocm:v0.27.0", "vllm/vllm-openai:v0.20.1"])
def test_nixl_on_an_image_that_ships_it_is_not_refused_for_it(tmp_path, capsys, image):
    code, out = check(tmp_path, capsys, *_rocm_pair("Qwen/Qwen3-8B", image))
    assert "nixl-not-in-image" not in rules(out), out


def test_only_the_role_on_the_old_rocm_image_is_named(tmp_path, capsys):
    # a v0.21.0 prefill and a v0.20.1 decode: the decode lacks RIXL (and the versions differ)
    code, out = check(tmp_path, capsys, *_rocm_pair("Qwen/Qwen3-8B", "vllm/vllm-openai-rocm:v0.21.0",
                                                    "vllm/vllm-openai-rocm:v0.20.1"))
    assert code == 1
    assert [f["message"].split(":", 1)[0] for f in _findings(out, "nixl-not-in-image")] == ["decode"], out


def test_amds_image_of_a_release_with_rixl_in_the_test_stage_is_a_warning(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_rocm_pair("Qwen/Qwen3-8B", "rocm/vllm:rocm7.0.0_vllm_0.17.1_20260301"))
    assert "nixl-not-in-image" in rules(out, "warning") and "nixl-not-in-image" not in rules(out, "error"), out


def test_a_container_that_installs_rixl_itself_is_not_refused(tmp_path, capsys):
    script = ("pip install /wheels/rixl-0.1.0-cp312-cp312-linux_x86_64.whl && exec vllm serve Qwen/Qwen3-8B "
              "--kv-transfer-config '{kv}'")
    docs = []
    for role, kv in (("prefill", KV_P), ("decode", KV_D)):
        c = {"name": "vllm", "image": "vllm/vllm-openai-rocm:v0.20.1", "command": ["bash", "-c"],
             "args": [script.format(kv=kv)], "env": [POD_IP],
             "resources": {"limits": {"amd.com/gpu": "1", "rdma/rdma_shared_device_a": "1"}},
             "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}}}
        docs.append(workload(f"m-{role}", role, c))
    code, out = check(tmp_path, capsys, *docs)
    assert "nixl-not-in-image" not in rules(out), out


def test_a_moriio_pair_on_an_old_rocm_image_is_not_refused_for_nixl(tmp_path, capsys):
    kv = '{"kv_connector":"MoRIIOConnector","kv_role":"kv_producer","kv_connector_extra_config":{"proxy_ip":"10.0.0.1"}}'
    docs = _rocm_pair("Qwen/Qwen3-8B", "vllm/vllm-openai-rocm:v0.20.1")
    for d in docs:
        args = d["spec"]["template"]["spec"]["containers"][0]["args"]
        args[-1] = "--kv-transfer-config=" + kv.replace("kv_producer", "kv_producer" if "prefill" in d["metadata"][
            "name"] else "kv_consumer")
    code, out = check(tmp_path, capsys, *docs)
    assert "nixl-not-in-image" not in rules(out), out


def test_a_pddeployment_on_an_old_rocm_image_is_refused(tmp_path, capsys):
    spec = {"model": {"name": "Qwen/Qwen3-8B"}, "engine": {"image": "vllm/vllm-openai-rocm:v0.19.1"},
            "prefill": {"replicas": 1, "tensorParallelSize": 1}, "decode": {"replicas": 1, "tensorParallelSize": 1}}
    doc = {"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment", "metadata": {"name": "p"}, "spec": spec}
    code, out = check(tmp_path, capsys, doc)
    assert code == 1 and "nixl-not-in-image" in rules(out, "error"), out
    spec["engine"]["image"] = "vllm/vllm-openai-rocm:v0.21.0"
    code, out = check(tmp_path, capsys, doc)
    assert "nixl-not-in-image" not in rules(out), out


# --- srun ... docker run: one container per node ------------------------------------------------------------------


def _srun_script(p_image, d_image, side_channel=True, nodes=("n0", "n1", "n2"), model="Qwen/Qwen3-8B"):
    lines = ["#!/bin/bash"]
    roles = zip(nodes, (p_image, d_image, d_image), (KV_P, KV_D, KV_D), strict=True)
    for i, (node, image, kv) in enumerate(roles):
        host = f"-e VLLM_NIXL_SIDE_CHANNEL_HOST=10.1.0.{i + 1} " if side_channel else ""
        lines.append(f"srun --nodelist={node} --ntasks=1 docker run --rm --network host --ipc host --device /dev/kfd "
                     f"--device /dev/dri {host}-e VLLM_NIXL_SIDE_CHANNEL_PORT=5600 {image} vllm serve {model} "
                     f"--port 8000 --tensor-parallel-size 8 --kv-transfer-config '{kv}' &")
    lines.append("wait")
    return "\n".join(lines) + "\n"


def _check_script(tmp_path, capsys, text):
    return check_text(tmp_path, capsys, text, "pd.sh")


def test_docker_run_after_srun_options_is_read():
    words = ["srun", "--nodelist=n1", "--ntasks=1", "docker", "run", "--rm", "--network", "host", "-e", "A=1",
             "vllm/vllm-openai-rocm:v0.21.0", "vllm", "serve", "m"]
    run = docker_run(words)
    assert run is not None and run.image == "vllm/vllm-openai-rocm:v0.21.0" and run.env == {"A": "1"}
    assert run.host_network and words[run.image_at] == run.image
    # not a launcher: the words stay another command's
    assert docker_run(["mpirun", "-np", "2", "-x", "A", "docker", "run", "img", "vllm", "serve", "m"]) is None


@pytest.mark.parametrize("image", ["vllm/vllm-openai-rocm:v0.21.0", "vllm/vllm-openai:v0.21.0"])
def test_srun_docker_run_engines_get_their_image_env_and_node(tmp_path, capsys, image):
    code, out = _check_script(tmp_path, capsys, _srun_script(image, image))
    # the -e side channel host reaches each engine; each node's container is its own pod (no port clash)
    assert code == 0, out
    assert not rules(out) & {"side-channel-host-not-routable", "listener-port-conflict", "side-channel-port-conflict",
                             "vllm-version-unknown"}, out


def test_srun_docker_run_images_carry_the_release(tmp_path, capsys):
    code, out = _check_script(tmp_path, capsys, _srun_script("vllm/vllm-openai-rocm:v0.21.0",
                                                             "vllm/vllm-openai-rocm:v0.22.0"))
    assert code == 1 and "vllm-version-mismatch" in rules(out, "error"), out
    code, out = _check_script(tmp_path, capsys, _srun_script("vllm/vllm-openai-rocm:v0.20.1",
                                                             "vllm/vllm-openai-rocm:v0.20.1"))
    assert code == 1 and "nixl-not-in-image" in rules(out, "error"), out


def test_srun_docker_run_without_the_side_channel_host_is_still_refused(tmp_path, capsys):
    code, out = _check_script(tmp_path, capsys, _srun_script("vllm/vllm-openai-rocm:v0.21.0",
                                                             "vllm/vllm-openai-rocm:v0.21.0", side_channel=False))
    assert code == 1 and "side-channel-host-not-routable" in rules(out, "error"), out


def test_engines_of_three_nodes_of_an_unknown_image_stay_apart(tmp_path, capsys):
    # three synthetic pods: each pod spec lives until all are read, so no two nodes share a pod id
    code, out = _check_script(tmp_path, capsys, _srun_script("my-registry/vllm-pd:latest", "my-registry/vllm-pd:latest"))
    assert not rules(out, "error") & {"listener-port-conflict", "side-channel-port-conflict"}, out
