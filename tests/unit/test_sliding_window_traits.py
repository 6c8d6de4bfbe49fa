"""A model's sliding window as its architecture decides it: windowed by the model's code, windowed or not as the
checkpoint's config.json says, or never (``ModelTraits.window_depends``, :mod:`pdd_operator.vllm.sliding_window`).

vLLM hands ``cache_config`` to every ``Attention`` layer of Mistral / Mixtral / Phi-3 / Qwen2-3 / StarCoder2, and a
layer without a window of its own takes ``cache_config.sliding_window`` (model_executor/layers/attention/attention.py
0.18.0 l.217, 0.34.0 l.287), set from ``hf_text_config.sliding_window`` (arg_utils.py 0.18.0 l.1524, 0.34.0
l.2327): Mistral-7B-v0.1 windows every layer, v0.3 none. With the hybrid KV cache manager on, one windowed group makes
the NIXL worker take the HMA path, which refuses different block sizes before 0.27 (nixl_connector.py 0.18.0 lines
567-573 and 2036-2038). So a fine-tune of one of those architectures, named without a config.json the checker can
read, is "not checked" where block-size-hma decides (exit 3); a checkpoint of the public table, or a config.json,
decides it; an architecture that never windows (Llama, Gemma 1, DeepSeek) stays judged once, and one windowed by its
code (Gemma 2, gpt-oss) stays windowed.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from pdd_operator.compat.engine import evaluate
from pdd_operator.compat.manifests import find_engines, pair_engines
from pdd_operator.vllm.architectures import traits
from pdd_operator.vllm.model_config import resolve_model
from pdd_operator.vllm.sliding_window import window_depends
from tests.unit.test_turn2_variants import check, container, rules, workload

KV = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})
HMA_ON = ("--no-disable-hybrid-kv-cache-manager",)


def _pair(model, image, p_block="16", d_block="32", flags=HMA_ON):
    docs = []
    for role, block in (("prefill", p_block), ("decode", d_block)):
        c = container([model, "--block-size", block, "--no-enable-prefix-caching", *flags, "--kv-transfer-config", KV],
                      image=image)
        docs.append(workload(f"sw-{role}", role, c, app="sw"))
    return docs


def _pdd(model, hf_architecture, image, config=None, flags=HMA_ON):
    spec = {"model": {"name": model, "hfArchitecture": hf_architecture,
                      **({"configMapRef": {"name": "cfg", "key": "config.json"}} if config else {})},
            "engine": {"image": image}, "kvTransfer": {"connector": "NixlConnector"},
            "prefill": {"replicas": 1, "blockSize": 16, "extraArgs": list(flags)},
            "decode": {"replicas": 1, "blockSize": 32, "extraArgs": list(flags)}}
    docs = [{"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment", "metadata": {"name": "m"},
             "spec": spec}]
    if config:
        docs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"},
                     "data": {"config.json": json.dumps(config)}})
    return docs


def _not_checked(out):
    return " ".join(n.get("reason", "") for n in out.get("notChecked", []))


# --- the trait, per architecture -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("hf", "name", "depends", "sliding"), [
    ("MistralForCausalLM", "acme/house-7b", True, False),
    ("MixtralForCausalLM", "acme/house-moe", True, False),
    ("Phi3ForCausalLM", "acme/house-mini", True, False),
    ("Qwen2ForCausalLM", "acme/house-qwen", True, False),        # use_sliding_window decides
    ("Qwen3MoeForCausalLM", "acme/house-moe", True, False),
    ("Starcoder2ForCausalLM", "acme/house-coder", True, False),
    ("Gemma2ForCausalLM", "acme/house-gemma", False, True),      # windowed by gemma2.py itself
    ("GptOssForCausalLM", "acme/house-oss", False, True),
    ("LlamaForCausalLM", "acme/house-llama", False, False),      # LlamaConfig has no sliding_window
    ("DeepseekV3ForCausalLM", "acme/house-mla", False, False),
    (None, "mistralai/Mistral-7B-Instruct-v0.2", True, False),   # named only: the family decides
    (None, "acme/qwen2.5-7b-sft", True, False),
    (None, "acme/Phi-3-medium-ft", True, False),
    (None, "acme/llama-3-8b-sft", False, False),
    (None, "acme/gemma-2-9b-sft", False, True),
    (None, "Qwen/Qwen3.5-27B-sft", False, False),                # a hybrid SSM family, not a config window
])
def test_the_window_trait_per_architecture(hf, name, depends, sliding):
    got = traits(None, None, hf, name)
    assert (got.window_depends, got.sliding_window) == (depends, sliding)
    assert window_depends(hf, name) is depends or sliding


@pytest.mark.parametrize(("name", "sliding"), [
    ("mistralai/Mistral-7B-v0.1", True),          # "sliding_window": 4096 in the table's config.json
    ("mistralai/Mistral-7B-Instruct-v0.3", False),  # null
    ("microsoft/Phi-3.5-mini-instruct", True),    # 262144
    ("Qwen/Qwen2.5-7B-Instruct", False),          # use_sliding_window false
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", False),
    ("RedHatAI/Mistral-7B-Instruct-v0.3-FP8", False),  # a quantized copy of a known checkpoint
])
def test_a_checkpoint_of_the_table_knows_its_window(name, sliding):
    model = type("M", (), {"name": name, "architecture": None, "ssm_kind": None, "hf_architecture": None,
                           "num_kv_heads": None, "mamba_n_groups": None})()
    got = resolve_model(model).traits
    assert (got.window_depends, got.sliding_window) == (False, sliding)


@pytest.mark.parametrize(("config", "sliding"), [
    ({"architectures": ["MistralForCausalLM"], "model_type": "mistral", "sliding_window": 4096}, True),
    ({"architectures": ["MistralForCausalLM"], "model_type": "mistral", "sliding_window": None}, False),
    ({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "sliding_window": 32768,
      "use_sliding_window": False}, False),
])
def test_a_config_json_settles_a_depending_architecture(config, sliding):
    model = type("M", (), {"name": "acme/house-7b", "architecture": "dense", "ssm_kind": None,
                           "hf_architecture": config["architectures"][0], "num_kv_heads": None,
                           "mamba_n_groups": None})()
    got = resolve_model(model, config).traits
    assert (got.window_depends, got.sliding_window) == (False, sliding)


# --- the verdicts, per release ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("model", "image", "flags"), [
    ("mistralai/Mistral-7B-Instruct-v0.2", "vllm/vllm-openai:v0.18.0", HMA_ON),  # not in the table; Mistral family
    ("acme/Mistral-7B-house-sft", "vllm/vllm-openai:v0.20.0", HMA_ON),
    ("acme/qwen2.5-7b-sft", "vllm/vllm-openai:v0.22.0", ()),             # 0.22+: HMA on by default with NIXL
    ("acme/Phi-3-mini-house", "vllm/vllm-openai:v0.26.0", ()),
    ("acme/Mixtral-8x7B-house", "vllm/vllm-openai:v0.24.0", ()),
])
def test_a_fine_tune_of_a_config_window_family_is_not_checked(tmp_path, capsys, model, image, flags):
    code, out = check(tmp_path, capsys, *_pair(model, image, flags=flags))
    assert code == 3 and not rules(out, "error"), out
    assert "block-size-hma" in _not_checked(out) and "takes its sliding window from config.json" in _not_checked(out)
    assert "--model-config" in _not_checked(out)


@pytest.mark.parametrize(("hf", "image"), [
    ("MistralForCausalLM", "vllm/vllm-openai:v0.18.0"),
    ("Phi3ForCausalLM", "vllm/vllm-openai:v0.22.0"),
    ("Qwen2ForCausalLM", "vllm/vllm-openai:v0.25.0"),
])
def test_a_pddeployment_naming_a_config_window_architecture_asks_for_its_config(tmp_path, capsys, hf, image):
    code, out = check(tmp_path, capsys, *_pdd("acme/house-7b", hf, image))
    assert code == 3 and not rules(out, "error"), out
    assert "block-size-hma" in _not_checked(out) and "spec.model.configMapRef" in _not_checked(out)
    assert "hfArchitecture," not in _not_checked(out)   # it is set already


@pytest.mark.parametrize(("config", "code", "refused"), [
    ({"architectures": ["MistralForCausalLM"], "model_type": "mistral", "sliding_window": 4096}, 1, True),
    ({"architectures": ["MistralForCausalLM"], "model_type": "mistral", "sliding_window": None}, 0, False),
])
def test_the_config_map_decides_the_pddeployment(tmp_path, capsys, config, code, refused):
    got, out = check(tmp_path, capsys, *_pdd("acme/house-7b", "MistralForCausalLM", "vllm/vllm-openai:v0.18.0", config))
    assert got == code and ("block-size-hma" in rules(out, "error")) is refused, out
    assert "sliding window" not in _not_checked(out)


@pytest.mark.parametrize(("model", "image", "flags", "code", "refused"), [
    ("mistralai/Mistral-7B-v0.1", "vllm/vllm-openai:v0.18.0", HMA_ON, 1, True),        # table: windowed
    ("microsoft/Phi-3.5-mini-instruct", "vllm/vllm-openai:v0.22.0", (), 1, True),
    ("mistralai/Mistral-7B-Instruct-v0.3", "vllm/vllm-openai:v0.18.0", HMA_ON, 0, False),  # table: no window
    ("Qwen/Qwen2.5-7B-Instruct", "vllm/vllm-openai:v0.22.0", (), 0, False),
    ("acme/llama-3-8b-sft", "vllm/vllm-openai:v0.22.0", (), 0, False),                 # never windows
    ("acme/mistral-7b-sft", "vllm/vllm-openai:v0.27.0", HMA_ON, 0, False),             # HMA takes it from 0.27
    ("acme/mistral-7b-sft", "vllm/vllm-openai:v0.20.0", (), 0, False),                 # HMA off under a connector
    ("acme/mistral-7b-sft", "vllm/vllm-openai:v0.22.0", ("--disable-hybrid-kv-cache-manager",), 0, False),
    # --disable-sliding-window on both clears config.sliding_window (config/model.py __post_init__)
    ("acme/mistral-7b-sft", "vllm/vllm-openai:v0.22.0", ("--disable-sliding-window",), 0, False),
])
def test_where_the_window_is_known_or_decides_nothing(tmp_path, capsys, model, image, flags, code, refused):
    got, out = check(tmp_path, capsys, *_pair(model, image, flags=flags))
    assert got == code and ("block-size-hma" in rules(out, "error")) is refused, out
    assert "takes its sliding window" not in _not_checked(out)


def test_the_windowed_reading_runs_only_for_a_depending_model():
    # the engine's second reading follows the trait, not the family: a Llama pair with the trait set is judged again
    engines = [e for doc in _pair("acme/llama-3-8b-sft", "vllm/vllm-openai:v0.18.0") for e in find_engines(doc)]
    pair = pair_engines(engines)[0][0][0]
    assert "block-size-hma" not in evaluate(pair).unchecked
    assert "block-size-hma" in evaluate(replace(pair, model=replace(pair.model, window_depends=True))).unchecked
