"""Leftovers of the newest held-out sets (84-88), each fixed as a kind with variants (other models, releases,
manifest formats) and negative controls.

1. A lone engine with no KV connector and no engine of the other role for its model in the files is aggregated
   serving, not half of a P/D pair: "nothing to check" (exit 4), the same as a plain vLLM Deployment; an engine whose
   counterpart IS in the files still gets ``kv-connector-missing`` (issue 9 item 2), and one with a connector but no
   counterpart stays "not checked" (set 88 entry router-llama31-native-decode-only-values-v0110).
"""

from __future__ import annotations

import json

import pytest
import yaml

from pdd_operator.cli import main
from tests.unit.test_turn2_variants import check, rules

NIXL = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})


def _deployment(role: str, args: list[str], image: str = "vllm/vllm-openai:v0.28.0", model: str = "Qwen/Qwen3-8B",
                namespace: str = "default", command: list[str] | None = None) -> dict:
    labels = {"app": "t", "llm-d.ai/role": role}
    container = {"name": "vllm", "image": image, "command": command or ["vllm", "serve"], "args": [model, *args],
                 "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": f"t-{role}", "namespace": namespace, "labels": labels},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}}}


# --- 1. a lone engine with no KV connector --------------------------------------------------------------------


@pytest.mark.parametrize("role", ["decode", "prefill"])
@pytest.mark.parametrize(("image", "model"), [("vllm/vllm-openai:v0.11.0", "meta-llama/Llama-3.1-8B-Instruct"),
                                              ("vllm/vllm-openai:v0.28.0", "Qwen/Qwen3-8B"),
                                              ("vllm/vllm-openai:v0.34.0", "deepseek-ai/DeepSeek-V2-Lite")])
def test_a_lone_engine_without_a_connector_is_nothing_to_check(tmp_path, capsys, role, image, model):
    code, out = check(tmp_path, capsys, _deployment(role, [], image=image, model=model))
    assert code == 4 and not out["notChecked"] and not out["results"], out
    assert len(out["aggregated"]) == 1 and out["aggregated"][0]["object"].startswith(f"Deployment/t-{role}"), out
    assert "aggregated serving" in out["aggregated"][0]["reason"]


def test_a_lone_engine_without_a_connector_is_still_refused_for_what_stops_it_alone(tmp_path, capsys):
    """The one-engine rules still run: a flag 0.20.0 no longer has stops the engine, P/D or not."""
    code, out = check(tmp_path, capsys, _deployment("decode", ["--disable-log-requests"], image="vllm/vllm-openai:v0.20.0",
                                                    model="meta-llama/Llama-3.1-8B-Instruct"))
    assert code == 1 and "cli-flag-removed" in rules(out, "error"), out


def test_llmd_decode_only_values_without_a_connector_are_nothing_to_check(tmp_path, capsys):
    values = {"modelArtifacts": {"uri": "hf://Qwen/Qwen3-8B", "name": "Qwen/Qwen3-8B"},
              "routing": {"servicePort": 8000, "proxy": {"image": "ghcr.io/llm-d/llm-d-routing-sidecar:v0.3.0",
                                                         "connector": "nixlv2"}},
              "decode": {"create": True, "replicas": 2, "parallelism": {"tensor": 2},
                         "containers": [{"name": "vllm", "image": "ghcr.io/llm-d/llm-d-cuda:v0.3.0",
                                         "modelCommand": "vllmServe", "args": ["--max-model-len", "8192"]}]},
              "prefill": {"create": False, "containers": [{
                  "name": "vllm", "image": "ghcr.io/llm-d/llm-d-cuda:v0.3.0", "modelCommand": "vllmServe",
                  "args": ["--kv-transfer-config", NIXL]}]}}
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    code = main(["check", str(path), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 4 and not out["notChecked"] and len(out["aggregated"]) == 1, out


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.11.0", "vllm/vllm-openai:v0.34.0"])
def test_an_engine_without_a_connector_beside_its_counterpart_is_still_kv_connector_missing(tmp_path, capsys, image):
    code, out = check(tmp_path, capsys, _deployment("prefill", ["--kv-transfer-config", NIXL], image=image),
                      _deployment("decode", [], image=image))
    assert code == 1 and "kv-connector-missing" in rules(out, "error"), out
    assert "aggregated" not in out


def test_a_lone_engine_with_a_connector_stays_not_checked(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _deployment("decode", ["--kv-transfer-config", NIXL]))
    assert code == 3 and out["notChecked"] and "aggregated" not in out, out


def test_a_lone_engine_without_a_connector_in_another_namespace_than_its_counterpart_is_its_own(tmp_path, capsys):
    """The prefill of another namespace is not its counterpart: that prefill is unpaired (not checked), the
    connector-less decode is aggregated serving."""
    code, out = check(tmp_path, capsys, _deployment("prefill", ["--kv-transfer-config", NIXL], namespace="a"),
                      _deployment("decode", [], namespace="b"))
    assert code == 3 and len(out["notChecked"]) == 1 and len(out["aggregated"]) == 1, out


def test_a_lone_dynamo_worker_without_a_connector_stays_not_checked(tmp_path, capsys):
    """Dynamo's runtime may add NixlConnector itself (before 1.0): its prefill workers are elsewhere."""
    doc = _deployment("decode", [], image="nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.4.0",
                      command=["python3", "-m", "dynamo.vllm", "--model"])
    code, out = check(tmp_path, capsys, doc)
    assert code != 4 and "aggregated" not in out, out

