"""Model facts from a Hugging Face config.json, and their effect on the rules."""

from __future__ import annotations

import json

import pytest

from pdd_operator.cli import main
from pdd_operator.compat import evaluate
from pdd_operator.vllm.model_config import facts_from_config
from tests.helpers import make_spec

NEMOTRON_H = {"architectures": ["NemotronHForCausalLM"], "hybrid_override_pattern": "M-M-M*-", "n_groups": 8,
              "num_key_value_heads": 8, "ssm_state_size": 128}
QWEN3_NEXT = {"architectures": ["Qwen3NextForCausalLM"], "num_key_value_heads": 2,
              "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"]}
DEEPSEEK_V3 = {"architectures": ["DeepseekV3ForCausalLM"], "kv_lora_rank": 512, "num_key_value_heads": 128,
               "n_routed_experts": 256}
DEEPSEEK_V32 = {**DEEPSEEK_V3, "architectures": ["DeepseekV32ForCausalLM"], "index_topk": 2048}
JAMBA = {"architectures": ["JambaForCausalLM"], "layers_block_type": ["mamba", "attention"], "num_key_value_heads": 8}
LLAMA = {"architectures": ["LlamaForCausalLM"], "num_key_value_heads": 8}
T5 = {"architectures": ["T5ForConditionalGeneration"], "is_encoder_decoder": True}
LLAVA = {"architectures": ["SomeNewVLForConditionalGeneration"], "vision_config": {"hidden_size": 1024},
         "text_config": {"num_key_value_heads": 4}}
PRIVATE_MOE = {"architectures": ["AcmeMoeForCausalLM"], "num_local_experts": 8, "num_key_value_heads": 8}


@pytest.mark.parametrize(
    "config, arch, kind, heads",
    [
        (NEMOTRON_H, "hybrid-ssm", "Mamba2", 8), (QWEN3_NEXT, "hybrid-ssm", "GDN", 2),
        (DEEPSEEK_V3, "mla", None, 128), (DEEPSEEK_V32, "sparse-mla", None, 128),
        (JAMBA, "hybrid-ssm", "Mamba1", 8), (LLAMA, "dense", None, 8), (T5, "encoder-decoder", None, None),
        (LLAVA, "multimodal", None, 4), (PRIVATE_MOE, "moe", None, 8),
    ],
)
def test_facts(config, arch, kind, heads):
    facts = facts_from_config(config)
    assert (facts.architecture, facts.ssm_kind, facts.num_kv_heads) == (arch, kind, heads)


def test_config_gives_kv_heads_to_the_tp_rule():
    spec = make_spec(model={"name": "acme/private", "hfArchitecture": None, "numKvHeads": None},
                     prefill={"tensorParallelSize": 4}, decode={"tensorParallelSize": 1})
    without = {f.rule for f in evaluate(spec).findings}
    assert "architecture-unknown" in without and "tp-exceeds-kv-heads" not in without
    with_config = evaluate(spec, model_config={"architectures": ["AcmeForCausalLM"], "num_key_value_heads": 2})
    assert "tp-exceeds-kv-heads" in {f.rule for f in with_config.errors}


def test_config_gives_n_groups_to_the_mamba2_rule():
    spec = make_spec(model={"name": "acme/hybrid", "hfArchitecture": None, "numKvHeads": None},
                     prefill={"tensorParallelSize": 1}, decode={"tensorParallelSize": 2})
    report = evaluate(spec, model_config={**NEMOTRON_H, "n_groups": 1})
    assert "mamba2-n-groups-tp" in {f.rule for f in report.errors}
    assert evaluate(spec, model_config=NEMOTRON_H).compatible


def test_explicit_spec_fields_win_over_the_config():
    spec = make_spec(model={"name": "acme/x", "architecture": "dense", "numKvHeads": 16},
                     prefill={"tensorParallelSize": 8}, decode={"tensorParallelSize": 1})
    assert evaluate(spec, model_config={"architectures": ["X"], "num_key_value_heads": 2}).compatible


def test_pdd_check_reads_the_config_map_from_the_files(tmp_path, capsys):
    path = tmp_path / "all.yaml"
    path.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: acme-config}\ndata:\n"
        f"  config.json: '{json.dumps(QWEN3_NEXT)}'\n---\n"
        "apiVersion: pdd-operator.dev/v1alpha1\nkind: PDDeployment\nmetadata: {name: acme}\n"
        "spec:\n  model: {name: acme/private-next, configMapRef: {name: acme-config}}\n"
        "  engine: {image: 'vllm/vllm-openai:v0.21.0'}\n"
    )
    assert main(["check", str(path)]) == 1   # GDN conv transfer needs vLLM >= 0.22
    assert "[ssm-kind-unsupported]" in capsys.readouterr().out
    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA))
    assert main(["check", str(path), "--model-config", str(config)]) == 0
