"""Variants of what the thirty-third public-report set (tests/unit/data/public_reports_33) taught, with negative
controls.

- Decode context parallelism on a NixlConnector engine (vllm#50611): from 0.29.0 ``VllmConfig.__post_init__``
  asserts, when ``kv_transfer_config.has_connector("NixlConnector")``, DCP 1 or DCP equal to the NIXL transfer
  parallel size (TP; from 0.30.0 max(TP, PCP)) and an MLA model (vllm/config/vllm.py, 0.29.0-0.34.0 sdists). A decode
  at TP 4 with DCP 2, or DCP on a GQA model, passed as compatible
  (:mod:`pdd_operator.compat.rules.decode_context`).
"""

from __future__ import annotations

import pytest

from tests.unit.test_turn2_variants import check, pd, rules

KV_P = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
KV_D = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'
MLA = "deepseek-ai/DeepSeek-V2-Lite-Chat"


def _pddeployment(spec: dict) -> dict:
    return {"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment", "metadata": {"name": "p"}, "spec": spec}


def _dcp_pair(d_tp, d_dcp, model=MLA, image="vllm/vllm-openai:v0.31.0", kv_d=KV_D, kind="Deployment", p_extra=()):
    docs = pd("dcp", ["--tensor-parallel-size", "2", "--kv-transfer-config", KV_P, *p_extra],
              ["--tensor-parallel-size", str(d_tp), "--decode-context-parallel-size", str(d_dcp),
               "--kv-transfer-config", kv_d], model=model, image=image, gpus=max(2, d_tp))
    for doc in docs:
        doc["kind"] = kind
    return docs


# --- decode context parallelism on a NixlConnector engine -----------------------------------------------------


@pytest.mark.parametrize(("image", "tp", "dcp"), [("vllm/vllm-openai:v0.31.0", 8, 4), ("vllm/vllm-openai:v0.29.0", 4, 2),
                                                   ("vllm/vllm-openai:v0.33.0", 2, 4)])
def test_a_partial_dcp_group_on_a_nixl_decode_is_an_error(tmp_path, capsys, image, tp, dcp):
    code, out = check(tmp_path, capsys, *_dcp_pair(tp, dcp, image=image, kind="StatefulSet"))
    assert code == 1 and "nixl-dcp-partial" in rules(out, "error"), out


def test_a_partial_dcp_group_on_a_pddeployment_decode_is_an_error(tmp_path, capsys):
    spec = {"model": {"name": "deepseek-ai/DeepSeek-V3"}, "engine": {"image": "vllm/vllm-openai:v0.32.0"},
            "prefill": {"replicas": 1, "tensorParallelSize": 8},
            "decode": {"replicas": 1, "tensorParallelSize": 8, "extraArgs": ["--decode-context-parallel-size", "2"]}}
    code, out = check(tmp_path, capsys, _pddeployment(spec))
    assert code == 1 and "nixl-dcp-partial" in rules(out, "error"), out


@pytest.mark.parametrize("model", ["meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-30B-A3B", "openai/gpt-oss-20b"])
def test_dcp_with_a_non_mla_model_on_a_nixl_decode_is_an_error(tmp_path, capsys, model):
    code, out = check(tmp_path, capsys, *_dcp_pair(2, 2, model=model, image="vllm/vllm-openai:v0.30.0"))
    assert code == 1 and "nixl-dcp-non-mla" in rules(out, "error"), out


def test_dcp_inside_a_multiconnector_is_still_nixl(tmp_path, capsys):
    multi = ('{"kv_connector":"MultiConnector","kv_role":"kv_consumer","kv_connector_extra_config":{"connectors":['
             '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"},{"kv_connector":"OffloadingConnector",'
             '"kv_role":"kv_both","kv_connector_extra_config":{"cpu_bytes_to_use":1073741824}}]}}')
    code, out = check(tmp_path, capsys, *_dcp_pair(4, 2, kv_d=multi, image="vllm/vllm-openai:v0.31.0"))
    assert "nixl-dcp-partial" in rules(out, "error"), out


def test_dcp_with_an_unknown_architecture_is_a_warning(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_dcp_pair(2, 2, model="/models/house-model", image="vllm/vllm-openai:v0.31.0"))
    assert "nixl-dcp-non-mla" in rules(out, "warning") and "nixl-dcp-non-mla" not in rules(out, "error"), out


@pytest.mark.parametrize(("model", "tp", "dcp", "image"), [
    (MLA, 2, 2, "vllm/vllm-openai:v0.31.0"),               # the PR's shape: DCP = TP on an MLA model
    ("deepseek-ai/DeepSeek-R1", 8, 8, "vllm/vllm-openai:v0.33.0"),
    (MLA, 4, 1, "vllm/vllm-openai:v0.31.0"),               # DCP 1: replicated
    (MLA, 4, 2, "vllm/vllm-openai:v0.28.0"),               # before the assertion: not claimed
    ("Qwen/Qwen3-8B", 2, 2, "vllm/vllm-openai:v0.28.0"),
])
def test_full_dcp_groups_mla_models_and_older_releases_pass(tmp_path, capsys, model, tp, dcp, image):
    code, out = check(tmp_path, capsys, *_dcp_pair(tp, dcp, model=model, image=image))
    assert not {"nixl-dcp-partial", "nixl-dcp-non-mla"} & rules(out), out


def test_pcp_counts_in_the_transfer_size_from_030_only(tmp_path, capsys):
    # vllm 0.30.0 config/vllm.py: transfer size max(tp, pcp); a TP 1 PCP 2 DCP 2 prefill producer is accepted there.
    docs = pd("dcp", ["--tensor-parallel-size", "1", "--prefill-context-parallel-size", "2",
                      "--decode-context-parallel-size", "2", "--kv-transfer-config", KV_P],
              ["--tensor-parallel-size", "2", "--kv-transfer-config", KV_D], model=MLA,
              image="vllm/vllm-openai:v0.31.0", gpus=2)
    code, out = check(tmp_path, capsys, *docs)
    assert "nixl-dcp-partial" not in rules(out), out


def test_the_push_connector_is_not_named_nixlconnector(tmp_path, capsys):
    # has_connector("NixlConnector") compares the name: NixlPushConnector has its own rule (push-dcp-unsupported).
    push_p = '{"kv_connector":"NixlPushConnector","kv_role":"kv_producer"}'
    push_d = '{"kv_connector":"NixlPushConnector","kv_role":"kv_consumer"}'
    docs = pd("dcp", ["--tensor-parallel-size", "2", "--kv-transfer-config", push_p],
              ["--tensor-parallel-size", "4", "--decode-context-parallel-size", "2", "--kv-transfer-config", push_d],
              model=MLA, image="vllm/vllm-openai:v0.31.0", gpus=4)
    code, out = check(tmp_path, capsys, *docs)
    assert "nixl-dcp-partial" not in rules(out) and "push-dcp-unsupported" in rules(out, "error"), out
