"""Variants of the kind of fault the ninetieth public-report set (tests/unit/data/public_reports_90) found, with
negative controls: a prefill whose TP is above the decode's and equal to the model's KV heads. vLLM 0.9.2-0.19.1 count
a remote KV cache as replicated once ``tp_size // total_num_kv_heads >= 1`` (kv_connector/utils.py, 0.19.0 lines
456-462) and the NIXL handshake asserts ``not (tp_ratio < 0 and is_kv_replicated(remote))`` (v1/nixl_connector.py
0.14.0 line 1693, 0.19.0 line 2086), so prefill TP == KV heads > decode TP fails there; from 0.20.0 only a prefill
above the KV heads counts as replicated (``remote_tp_size > total_num_kv_heads``, 0.20.0 utils.py line 598).
``tp-exceeds-kv-heads`` bounded the prefill TP by ``<=`` the KV heads in every release (Dynamo's Llama-3.3-70B GAIE
recipe with its prefill moved to TP 8 on vllm-runtime:1.1.1, vLLM 0.19.0, passed)."""

from __future__ import annotations

import json

import pytest

from tests.unit.test_turn2_variants import check, rules

NIXL = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})
LLAMA_8B = "meta-llama/Llama-3.1-8B-Instruct"  # 8 KV heads
QWEN_7B = "Qwen/Qwen2.5-7B-Instruct"  # 4 KV heads
DSV2_LITE = "deepseek-ai/DeepSeek-V2-Lite"  # MLA: every rank holds the latent KV whole


def _deployment(role: str, model: str, tp: int, image: str) -> dict:
    """One engine of a prefill/decode pair as a Deployment running ``vllm serve`` with TP ``tp`` on ``tp`` GPUs."""
    labels = {"app": "t", "role": role}
    container = {"name": "vllm", "image": image, "command": ["vllm", "serve"],
                 "args": [model, "--tensor-parallel-size", str(tp), "--kv-transfer-config", NIXL],
                 "env": [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                 "resources": {"limits": {"nvidia.com/gpu": str(tp)}}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"t-{role}", "labels": labels},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}}}


def _pair(tmp_path, capsys, model: str, prefill_tp: int, decode_tp: int, image: str) -> tuple[int, dict]:
    return check(tmp_path, capsys, _deployment("prefill", model, prefill_tp, image),
                 _deployment("decode", model, decode_tp, image))


def _graph(prefill_tp: int, decode_tp: int, tag: str, model: str = LLAMA_8B) -> dict:
    """A Dynamo graph (v1alpha1) whose workers run ``python3 -m dynamo.vllm`` on vllm-runtime:``tag``."""
    def worker(mode: str, tp: int) -> dict:
        return {"componentType": "worker", "subComponentType": mode, "replicas": 1,
                "resources": {"limits": {"gpu": str(tp)}},
                "extraPodSpec": {"mainContainer": {
                    "image": f"nvcr.io/nvidia/ai-dynamo/vllm-runtime:{tag}", "command": ["python3", "-m", "dynamo.vllm"],
                    "args": ["--model", model, "--tensor-parallel-size", str(tp), "--disaggregation-mode", mode,
                             "--kv-transfer-config", NIXL]}}}
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
            "spec": {"services": {"VllmPrefillWorker": worker("prefill", prefill_tp),
                                  "VllmDecodeWorker": worker("decode", decode_tp)}}}


@pytest.mark.parametrize("version", ["0.14.0", "0.17.1", "0.18.0", "0.19.1"])
def test_prefill_at_the_kv_heads_above_the_decode_is_refused_before_0_20(tmp_path, capsys, version):
    code, out = _pair(tmp_path, capsys, LLAMA_8B, 8, 4, f"vllm/vllm-openai:v{version}")
    assert code == 1 and "tp-exceeds-kv-heads" in rules(out, "error"), out


def test_another_model_at_its_kv_heads_is_refused_too(tmp_path, capsys):
    code, out = _pair(tmp_path, capsys, QWEN_7B, 4, 2, "vllm/vllm-openai:v0.19.0")
    assert code == 1 and "tp-exceeds-kv-heads" in rules(out, "error"), out


@pytest.mark.parametrize("version", ["0.20.0", "0.23.0", "0.26.0"])
def test_prefill_at_the_kv_heads_passes_from_0_20(tmp_path, capsys, version):
    _, out = _pair(tmp_path, capsys, LLAMA_8B, 8, 4, f"vllm/vllm-openai:v{version}")
    assert "tp-exceeds-kv-heads" not in rules(out), out


def test_prefill_below_the_kv_heads_passes_on_0_19(tmp_path, capsys):
    _, out = _pair(tmp_path, capsys, LLAMA_8B, 4, 2, "vllm/vllm-openai:v0.19.0")
    assert "tp-exceeds-kv-heads" not in rules(out), out


def test_prefill_above_the_kv_heads_is_still_refused_from_0_20(tmp_path, capsys):
    code, out = _pair(tmp_path, capsys, QWEN_7B, 8, 4, "vllm/vllm-openai:v0.26.0")
    assert code == 1 and "tp-exceeds-kv-heads" in rules(out, "error"), out


def test_mla_prefill_above_the_decode_is_not_this_rule(tmp_path, capsys):
    _, out = _pair(tmp_path, capsys, DSV2_LITE, 4, 2, "vllm/vllm-openai:v0.19.0")
    assert "tp-exceeds-kv-heads" not in rules(out), out


@pytest.mark.parametrize(("tag", "refused"), [("1.1.1", True), ("1.0.0", True), ("1.4.0", False)])
def test_dynamo_graph_follows_its_runtime_images_vllm(tmp_path, capsys, tag, refused):
    """vllm-runtime 1.0.0 ships vLLM 0.16.0 and 1.1.1 vLLM 0.19.0 (refused); 1.4.0 ships 0.26.0 (passes)."""
    code, out = check(tmp_path, capsys, _graph(8, 4, tag))
    assert ("tp-exceeds-kv-heads" in rules(out, "error")) is refused, out
    assert (code == 1) is refused or "tp-exceeds-kv-heads" not in rules(out), out


def test_an_unknown_release_is_a_warning_not_a_refusal(tmp_path, capsys):
    _, out = _pair(tmp_path, capsys, LLAMA_8B, 8, 4, "registry.example.com/team/vllm:custom")
    assert "tp-exceeds-kv-heads" in rules(out, "warning") and "tp-exceeds-kv-heads" not in rules(out, "error"), out
