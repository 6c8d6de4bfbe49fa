"""Model facts from a Hugging Face config.json, and their effect on the rules."""

from __future__ import annotations

import json

import pytest
import yaml

from pdd_operator.cli import main
from pdd_operator.compat import evaluate
from pdd_operator.compat.engine import MODEL_CONFIG_UNAVAILABLE, model_config_from_configmap
from pdd_operator.vllm.model_config import (
    MAX_CONFIG_JSON_BYTES,
    ModelConfigError,
    facts_from_config,
    parse_config_json,
)
from tests.helpers import ROOT, make_spec

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
    assert "mamba2-n-groups-tp" in {f.rule for f in report.warnings}  # a warning: no vLLM release refuses it
    assert "mamba2-n-groups-tp" not in {f.rule for f in evaluate(spec, model_config=NEMOTRON_H).findings}


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


# -- the one config.json loader ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, words",
    [
        ('{"architectures": ["LlamaForCausalLM"],', "not valid JSON: Expecting property name"),
        ("", "not valid JSON: Expecting value at line 1 column 1"),
        ('["LlamaForCausalLM"]', "not a JSON object: the top level is an array"),
        ("42", "not a JSON object: the top level is a number"),
        ("null", "not a JSON object: the top level is null"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"a": ' * 100_000 + "1" + "}" * 100_000, "nested too deeply"),
        (b"\xff\xfe{}", "not UTF-8"),
        ('{"x": "' + "a" * MAX_CONFIG_JSON_BYTES + '"}', "byte limit"),
    ],
)
def test_parse_config_json_refuses_unusable_text_with_one_typed_error(text, words):
    with pytest.raises(ModelConfigError, match=words) as info:
        parse_config_json(text)
    assert isinstance(info.value, ValueError)


def test_parse_config_json_returns_the_object():
    assert parse_config_json(json.dumps(NEMOTRON_H)) == NEMOTRON_H
    assert parse_config_json(json.dumps(LLAMA).encode()) == LLAMA


def test_odd_types_in_a_config_do_not_break_the_facts():
    facts = facts_from_config({"architectures": 5, "layer_types": 3, "num_key_value_heads": "8"})
    assert (facts.hf_architecture, facts.architecture, facts.num_kv_heads) == (None, None, None)


@pytest.mark.parametrize("content", ['{"architectures": ["LlamaForCausalLM"],', "[1, 2]", "[" * 50_000])
def test_pdd_check_with_an_unusable_model_config_exits_2_naming_it(tmp_path, capsys, content):
    config = tmp_path / "config.json"
    config.write_text(content)
    assert main(["check", str(ROOT / "examples" / "llama-dense-pd.yaml"), "--model-config", str(config)]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"error: {config}: ")
    assert "Traceback" not in captured.err and captured.out == ""


def test_pdd_check_with_a_missing_model_config_exits_2(tmp_path, capsys):
    assert main(["check", str(ROOT / "examples" / "llama-dense-pd.yaml"),
                 "--model-config", str(tmp_path / "nope.json")]) == 2
    assert "nope.json" in capsys.readouterr().err


def _with_config_map(tmp_path, value: str):
    path = tmp_path / "all.yaml"
    path.write_text(yaml.safe_dump_all([
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "acme-config"}, "data": {"config.json": value}},
        {"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment", "metadata": {"name": "acme"},
         "spec": {"model": {"name": "meta-llama/Llama-3.1-8B-Instruct", "configMapRef": {"name": "acme-config"}},
                  "engine": {"image": "vllm/vllm-openai:v0.20.2"}}},
    ]))
    return str(path)


def test_pdd_check_reports_a_malformed_config_map_as_the_operator_does(tmp_path, capsys):
    path = _with_config_map(tmp_path, '{"architectures": ')
    assert main(["check", path, "-o", "json"]) == 0   # a warning: the rules ran on spec.model instead
    (result,) = json.loads(capsys.readouterr().out)["results"]
    (finding,) = [f for f in result["findings"] if f["rule"] == MODEL_CONFIG_UNAVAILABLE]
    _, expected = model_config_from_configmap('{"architectures": ', "acme-config", "config.json")
    assert finding == expected.wire()
    assert "ConfigMap 'acme-config' key 'config.json': not valid JSON" in finding["message"]


@pytest.mark.parametrize(
    "value, words",
    [
        (None, "ConfigMap 'cm' or its key 'config.json' does not exist"),
        ("{", "ConfigMap 'cm' key 'config.json': not valid JSON"),
        ("[]", "ConfigMap 'cm' key 'config.json': not a JSON object"),
        ("[" * 100_000, "ConfigMap 'cm' key 'config.json': JSON nested too deeply"),
    ],
)
def test_the_operators_config_map_reader_turns_bad_content_into_the_warning(value, words):
    config, finding = model_config_from_configmap(value, "cm", "config.json")
    assert config is None
    assert (finding.rule, finding.severity, finding.fields) == (MODEL_CONFIG_UNAVAILABLE, "warning",
                                                                ["spec.model.configMapRef"])
    assert finding.message.startswith(words)


def test_the_operators_config_map_reader_returns_a_good_config():
    assert model_config_from_configmap(json.dumps(LLAMA), "cm", "config.json") == (LLAMA, None)
