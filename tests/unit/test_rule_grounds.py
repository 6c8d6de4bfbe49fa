"""Issue 9, "an error is a promise that vLLM fails": two rules whose grounds were weak, re-derived from vLLM's source
(0.20.0-0.34.0 wheels; docs/vllm-source-audit.md): no release raises for either, the decode reads a wrong conv state,
so each is a warning, never a refusal. Variants: a Deployment pair (with the model's config.json) and a PDDeployment.
"""

from __future__ import annotations

import json

from tests.unit.test_turn2_variants import KV, check, pd

NEMOTRON_H = {"architectures": ["NemotronHForCausalLM"], "hybrid_override_pattern": "M-M-M*-", "n_groups": 1,
              "num_key_value_heads": 8, "ssm_state_size": 128, "torch_dtype": "bfloat16"}
ENV = [{"name": "VLLM_SSM_CONV_STATE_LAYOUT", "value": "DS"}]


def _severity(out, rule) -> set[str]:
    return {f["severity"] for r in out["results"] for f in r["findings"] if f["rule"] == rule}


def _config(tmp_path, config) -> list[str]:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return ["--model-config", str(path)]


def test_mamba2_groups_a_tp_size_does_not_divide_warn(tmp_path, capsys):
    docs = pd("h", ["--kv-transfer-config", KV, "-tp", "1"], ["--kv-transfer-config", KV, "-tp", "2"],
              model="acme/nemotron-h", image="vllm/vllm-openai:v0.33.0", env=ENV, gpus=2)
    code, out = check(tmp_path, capsys, *docs, extra=_config(tmp_path, NEMOTRON_H))
    assert _severity(out, "mamba2-n-groups-tp") == {"warning"}, out
    code, out = check(tmp_path, capsys, *docs, extra=_config(tmp_path, {**NEMOTRON_H, "n_groups": 8}))
    assert not _severity(out, "mamba2-n-groups-tp"), out


def test_hybrid_speculative_token_counts_that_differ_warn(tmp_path, capsys):
    def spec(n):
        return ["--speculative-config", json.dumps({"method": "mtp", "num_speculative_tokens": n})]
    docs = pd("h", ["--kv-transfer-config", KV, *spec(1)], ["--kv-transfer-config", KV, *spec(3)],
              model="acme/nemotron-h", image="vllm/vllm-openai:v0.33.0", env=ENV)
    code, out = check(tmp_path, capsys, *docs, extra=_config(tmp_path, {**NEMOTRON_H, "n_groups": 8}))
    assert _severity(out, "hybrid-spec-tokens-mismatch") == {"warning"}, out
    assert "hybrid-spec-tokens-mismatch" not in {f["rule"] for r in out["results"] for f in r["findings"]
                                                 if f["severity"] == "error"}


def test_pddeployment_mamba2_groups_warn(tmp_path, capsys):
    doc = {"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment", "metadata": {"name": "h"},
           "spec": {"model": {"name": "acme/nemotron-h", "architecture": "hybrid-ssm", "ssmKind": "Mamba2",
                              "mambaNGroups": 1},
                    "engine": {"image": "vllm/vllm-openai:v0.33.0"},
                    "prefill": {"replicas": 1, "tensorParallelSize": 1},
                    "decode": {"replicas": 1, "tensorParallelSize": 2}}}
    code, out = check(tmp_path, capsys, doc)
    assert _severity(out, "mamba2-n-groups-tp") == {"warning"}, out
