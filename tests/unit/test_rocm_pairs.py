"""AMD/ROCm P/D follow-ups of set 71 (tests/unit/data/public_reports_71).

1. MoRIIOConnector pairs (:mod:`pdd_operator.compat.rules.moriio_pair`): judged by the ``moriio-*`` rules on the
   releases whose ``moriio/`` package was read (0.14.0-0.34.0), "not checked" outside them or with the release
   unknown. TP sizes (equal before 0.25.0; from 0.25.0 one dividing the other and, for a non-MLA model, the smaller
   holding whole heads), block size, KV cache dtype, transfer mode (the env variable before 0.23.0, the
   ``read_mode`` key from 0.23.0) and model.
2. The NIXL a ROCm image loads comes from its release's ``docker/Dockerfile.rocm`` build (RIXL / NIXL at a commit),
   never from vLLM's requirements pin of the CUDA wheel (:func:`pdd_operator.vllm.rocm_nixl.rocm_image_nixl_version`).
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.known_bad import nixl_version
from pdd_operator.vllm.rocm_nixl import ROCM_IMAGE_NIXL_BUILDS, rocm_image_nixl_version
from tests.unit.cli_check import check_text
from tests.unit.test_turn2_variants import check, rules, workload


def _moriio_pair(image, p_tp=8, d_tp=None, model="deepseek-ai/DeepSeek-V3", p_args=(), d_args=(), p_extra=None,
                 d_extra=None, env=(), p_env=(), d_env=()):
    docs = []
    for role, tp, args, extra, own_env in (("prefill", p_tp, p_args, p_extra, p_env),
                                           ("decode", d_tp or p_tp, d_args, d_extra, d_env)):
        kv = {"kv_connector": "MoRIIOConnector", "kv_role": "kv_producer" if role == "prefill" else "kv_consumer",
              # http_port is read with int(extra_config["http_port"]) in every release, proxy_ping_port so before
              # 0.28.0 (moriio_common.py 0.14.0 lines 218-219; set 96: moriio-extra-config-port-invalid)
              "kv_connector_extra_config": {"proxy_ip": "10.0.0.1", "proxy_ping_port": "36367", "http_port": "8000",
                                            "handshake_port": "6301", "notify_port": "61005", **(extra or {})}}
        c = {"name": "vllm", "image": image, "command": ["vllm", "serve"],
             "args": [model, f"--tensor-parallel-size={tp}", *args, "--kv-transfer-config=" + json.dumps(kv)],
             "env": [{"name": k, "value": v} for k, v in (*env, *own_env)],
             "resources": {"limits": {"amd.com/gpu": str(tp), "rdma/rdma_shared_device_a": "1"}},
             "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}}}
        docs.append(workload(f"m-{role}", role, c))
    return docs


def _not_checked(out):
    return [n for n in out.get("notChecked", [])]


RELEASES = ["v0.14.0", "v0.20.2", "v0.24.0", "v0.25.0", "v0.28.0", "v0.34.0"]


# --- which MoRIIO pairs are judged -----------------------------------------------------------------------------


@pytest.mark.parametrize("tag", RELEASES)
@pytest.mark.parametrize("model", ["deepseek-ai/DeepSeek-V3", "Qwen/Qwen3-8B"])
def test_a_valid_moriio_pair_of_a_read_release_is_judged(tmp_path, capsys, tag, model):
    code, out = check(tmp_path, capsys, *_moriio_pair(f"vllm/vllm-openai-rocm:{tag}", model=model))
    assert code == 0 and not _not_checked(out) and not rules(out, "error"), out
    assert not {r for r in rules(out) if r.startswith("moriio-")}, out


@pytest.mark.parametrize("image", ["vllm/vllm-openai-rocm:latest", "my-registry/vllm-rocm:dev"])
def test_a_moriio_pair_of_an_unknown_release_stays_not_checked(tmp_path, capsys, image):
    code, out = check(tmp_path, capsys, *_moriio_pair(image, 4, 8))
    assert code == 3 and _not_checked(out) and not rules(out, "error"), out
    assert "MoRIIOConnector pairs are judged on a known vLLM release" in json.dumps(out), out


def test_a_moriio_pair_of_a_release_before_it_is_refused_by_the_registry(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_moriio_pair("vllm/vllm-openai-rocm:v0.13.0"))
    assert code == 1 and "kv-connector-unregistered" in rules(out, "error"), out
    assert not {r for r in rules(out) if r.startswith("moriio-")}, out


# --- TP ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tag", ["v0.14.0", "v0.20.2", "v0.24.0"])
@pytest.mark.parametrize("model", ["deepseek-ai/DeepSeek-V3", "Qwen/Qwen3-8B"])
def test_different_tp_before_0_25_is_refused_for_any_model(tmp_path, capsys, tag, model):
    code, out = check(tmp_path, capsys, *_moriio_pair(f"vllm/vllm-openai-rocm:{tag}", 4, 8, model=model))
    assert code == 1 and "moriio-tp-mismatch" in rules(out, "error"), out


@pytest.mark.parametrize("tag", ["v0.25.0", "v0.28.0", "v0.34.0"])
def test_from_0_25_mla_and_whole_heads_pair_different_tp(tmp_path, capsys, tag):
    image = f"vllm/vllm-openai-rocm:{tag}"
    code, out = check(tmp_path, capsys, *_moriio_pair(image, 4, 8, model="deepseek-ai/DeepSeek-V3"))  # MLA
    assert "moriio-tp-mismatch" not in rules(out), out
    code, out = check(tmp_path, capsys, *_moriio_pair(image, 8, 16, model="Qwen/Qwen3-8B"))  # 8 KV heads, min TP 8
    assert "moriio-tp-mismatch" not in rules(out), out
    code, out = check(tmp_path, capsys, *_moriio_pair(image, 4, 8, model="Qwen/Qwen3-8B"))  # 2 heads per rank
    assert code == 1 and "moriio-tp-mismatch" in rules(out, "error"), out
    code, out = check(tmp_path, capsys, *_moriio_pair(image, 4, 6, model="deepseek-ai/DeepSeek-V3"))  # 6 % 4
    assert code == 1 and "moriio-tp-mismatch" in rules(out, "error"), out


def test_an_unknown_model_with_different_tp_from_0_25_is_a_warning(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_moriio_pair("vllm/vllm-openai-rocm:v0.28.0", 4, 8, model="my-org/model"))
    assert "moriio-tp-mismatch" in rules(out, "warning") and "moriio-tp-mismatch" not in rules(out, "error"), out


# --- block size, KV dtype, mode, model -------------------------------------------------------------------------


@pytest.mark.parametrize("tag", ["v0.14.0", "v0.28.0", "v0.34.0"])
def test_block_sizes_that_differ_are_refused(tmp_path, capsys, tag):
    code, out = check(tmp_path, capsys, *_moriio_pair(f"vllm/vllm-openai-rocm:{tag}", p_args=["--block-size=16"],
                                                      d_args=["--block-size=64"]))
    assert code == 1 and "moriio-block-size-mismatch" in rules(out, "error"), out


@pytest.mark.parametrize("tag", ["v0.17.1", "v0.28.0"])
def test_kv_cache_dtypes_that_differ(tmp_path, capsys, tag):
    image = f"vllm/vllm-openai-rocm:{tag}"
    code, out = check(tmp_path, capsys, *_moriio_pair(image, p_args=["--kv-cache-dtype=fp8"],
                                                      d_args=["--kv-cache-dtype=bfloat16"]))
    assert code == 1 and "moriio-kv-dtype-mismatch" in rules(out, "error"), out
    code, out = check(tmp_path, capsys, *_moriio_pair(image, p_args=["--kv-cache-dtype=fp8"]))
    assert "moriio-kv-dtype-mismatch" in rules(out, "warning") and not rules(out, "error"), out
    code, out = check(tmp_path, capsys, *_moriio_pair(image, p_args=["--kv-cache-dtype=fp8"],
                                                      d_args=["--kv-cache-dtype=fp8"]))
    assert "moriio-kv-dtype-mismatch" not in rules(out), out


def test_the_mode_is_read_where_each_release_reads_it(tmp_path, capsys):
    read = ("VLLM_MORIIO_CONNECTOR_READ_MODE", "1")
    # before 0.23.0 the variable sets it: on one engine only, the modes differ
    code, out = check(tmp_path, capsys, *_moriio_pair("vllm/vllm-openai-rocm:v0.20.2", d_env=[read]))
    assert "moriio-mode-mismatch" in rules(out, "warning"), out
    code, out = check(tmp_path, capsys, *_moriio_pair("vllm/vllm-openai-rocm:v0.20.2", env=[read]))
    assert not {r for r in rules(out) if r.startswith("moriio-")}, out
    # from 0.23.0 the key sets it and the variable is ignored
    code, out = check(tmp_path, capsys, *_moriio_pair("vllm/vllm-openai-rocm:v0.28.0", p_extra={"read_mode": "true"}))
    assert "moriio-mode-mismatch" in rules(out, "warning"), out
    code, out = check(tmp_path, capsys, *_moriio_pair("vllm/vllm-openai-rocm:v0.28.0", env=[read]))
    assert "moriio-read-mode-env-ignored" in rules(out, "warning") and "moriio-mode-mismatch" not in rules(out), out
    code, out = check(tmp_path, capsys, *_moriio_pair("vllm/vllm-openai-rocm:v0.28.0", p_extra={"read_mode": "true"},
                                                      d_extra={"read_mode": "1"}))
    assert not {r for r in rules(out) if r.startswith("moriio-")}, out


def test_models_that_differ_are_a_warning(tmp_path, capsys):
    docs = _moriio_pair("vllm/vllm-openai-rocm:v0.28.0")
    docs[1]["spec"]["template"]["spec"]["containers"][0]["args"][0] = "deepseek-ai/DeepSeek-R1"
    code, out = check(tmp_path, capsys, *docs)
    assert "moriio-model-mismatch" in rules(out, "warning"), out


def test_statefulsets_are_judged_alike(tmp_path, capsys):
    # the PDDeployment API is NIXL only (spec-invalid for MoRIIOConnector); hand-written workloads of any kind are read
    docs = _moriio_pair("vllm/vllm-openai-rocm:v0.20.2", 4, 8)
    for d in docs:
        d["kind"] = "StatefulSet"
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "moriio-tp-mismatch" in rules(out, "error"), out


# --- scripts: set 71's vLLM CI job, one thing changed --------------------------------------------------------------


def _ci_script(**swap):
    from pathlib import Path
    text = (Path(__file__).parent / "data/public_reports_71/inputs/vllm-ci-amd-disagg-dsv3-moriio-1p1d-v0280.sh").read_text()
    for old, new in swap.items():
        text = text.replace(old, new)
    return text


def _check_script(tmp_path, capsys, text):
    return check_text(tmp_path, capsys, text, "pd.sh")


def test_the_ci_job_is_judged_and_its_variants_refused(tmp_path, capsys):
    code, out = _check_script(tmp_path, capsys, _ci_script())
    assert code == 0 and not _not_checked(out) and not rules(out, "error"), out
    decode_tp = "--port 8200 --tensor-parallel-size 8"
    code, out = _check_script(tmp_path, capsys, _ci_script(**{
        "IMAGE=vllm/vllm-openai-rocm:v0.28.0": "IMAGE=vllm/vllm-openai-rocm:v0.24.0",
        decode_tp: "--port 8200 --tensor-parallel-size 4"}))
    assert code == 1 and "moriio-tp-mismatch" in rules(out, "error"), out
    prefill_tp = "--port 8100 --tensor-parallel-size 8"
    code, out = _check_script(tmp_path, capsys, _ci_script(**{decode_tp: decode_tp + " --block-size 32",
                                                              prefill_tp: prefill_tp + " --block-size 16"}))
    assert code == 1 and "moriio-block-size-mismatch" in rules(out, "error"), out
    # on the decode only: the other engine's default (ROCm, MLA) is not pinned here
    code, out = _check_script(tmp_path, capsys, _ci_script(**{decode_tp: decode_tp + " --block-size 32"}))
    assert "moriio-block-size-mismatch" in rules(out, "warning") and not rules(out, "error"), out


# --- the NIXL a ROCm image loads ------------------------------------------------------------------------------------


@pytest.mark.parametrize("tag", ["v0.24.0", "v0.26.0", "v0.27.0", "v0.28.0"])  # releases that pin nixl == X
def test_a_rocm_image_loads_what_its_dockerfile_builds_not_the_requirements_pin(tag):
    version = tuple(int(x) for x in tag[1:].split("."))
    assert nixl_version("", f"vllm/vllm-openai-rocm:{tag}", version) == rocm_image_nixl_version(
        f"vllm/vllm-openai-rocm:{tag}", version) == (None, "")
    assert nixl_version("", f"rocm/vllm:rocm7.2.0_vllm_{tag[1:]}_20260601", version) == (None, "")
    # the CUDA image of the same release installs the pinned wheel
    assert nixl_version("", f"vllm/vllm-openai:{tag}", version)[0] is not None


def test_every_rocm_release_with_nixl_has_one_build():
    for minor in range(21, 35):
        v = (0, minor, 0)
        assert len([b for b in ROCM_IMAGE_NIXL_BUILDS if b.since <= v < b.until]) == 1, v


@pytest.mark.parametrize("tag", ["v0.26.0", "v0.27.0"])
def test_a_rocm_nixl_pair_is_not_held_to_the_pinned_wheels_known_fault(tmp_path, capsys, tag):
    # vLLM 0.26.0 and 0.27.0 pin nixl == 1.3.1 (a known-bad row) for CUDA; their ROCm images build RIXL / NIXL main
    docs = []
    kv = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
    for role in ("prefill", "decode"):
        c = {"name": "vllm", "image": f"vllm/vllm-openai-rocm:{tag}", "command": ["vllm", "serve"],
             "args": ["Qwen/Qwen3-8B", "--kv-transfer-config=" + json.dumps(kv)],
             "env": [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
             "resources": {"limits": {"amd.com/gpu": "1", "rdma/rdma_shared_device_a": "1"}},
             "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}}}
        docs.append(workload(f"q-{role}", role, c))
    code, out = check(tmp_path, capsys, *docs)
    assert "nixl-version-known-bad" not in rules(out), out
    for d in docs:
        d["spec"]["template"]["spec"]["containers"][0]["image"] = f"vllm/vllm-openai:{tag}"
        d["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1", "rdma/ib": "1"}}
    code, out = check(tmp_path, capsys, *docs)
    assert "nixl-version-known-bad" in rules(out), out
