"""Variants of what the seventy-fifth public-report set (tests/unit/data/public_reports_75) taught, with negative
controls: a model whose attention layout the rules cannot know is "not checked" where a window would decide.

vLLM gives a layer a ``SlidingWindowSpec`` from the model's config.json, and any non-full group makes the NIXL
worker follow the hybrid KV cache manager (``_is_hma_required = not disable_hybrid_kv_cache_manager and
any(not FullAttentionSpec)``, nixl_connector.py 0.18.0 lines 567-573, "Also handle unlikely SW-only model case"): a
Mistral-7B-v0.1 fine-tune windows every layer, so with HMA on its pair refuses different block sizes before 0.27
("HMA does not support different remote block size yet", lines 2036-2038). Where neither the architecture nor a
config.json is known, the pair is judged again with windowed layers (``compat/engine.py`` ``_unknown_window``); a
rule that refuses only that reading makes the pair "not checked" (exit 3), never a silent pass and never an error.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.cli import main
from tests.unit.test_turn2_variants import check, container, rules, workload

KV = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})
ZEPHYR = "HuggingFaceH4/zephyr-7b-beta"           # a Mistral-7B-v0.1 fine-tune no table names: "sliding_window": 4096
UNKNOWN = "acme/house-model-7b"                    # nothing tells its layout either
HMA_ON = ("--no-disable-hybrid-kv-cache-manager",)
WINDOWED_CONFIG = {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "sliding_window": 4096,
                   "num_key_value_heads": 8, "num_attention_heads": 32, "hidden_size": 4096, "num_hidden_layers": 32,
                   "max_position_embeddings": 32768, "torch_dtype": "bfloat16", "vocab_size": 32000}


def _pair(model, image, p_block="16", d_block="32", flags=HMA_ON):
    docs = []
    for role, block in (("prefill", p_block), ("decode", d_block)):
        c = container([model, "--block-size", block, "--no-enable-prefix-caching", *flags, "--kv-transfer-config", KV],
                      image=image)
        docs.append(workload(f"sw-{role}", role, c, app="sw"))
    return docs


def _not_checked(out):
    return " ".join(n.get("reason", "") for n in out.get("notChecked", []))


@pytest.mark.parametrize(("model", "image", "flags"), [
    (ZEPHYR, "vllm/vllm-openai:v0.18.0", HMA_ON),    # HMA asked for on both (0.18-0.21 keep it on only then)
    (UNKNOWN, "vllm/vllm-openai:v0.20.0", HMA_ON),
    (ZEPHYR, "vllm/vllm-openai:v0.22.0", ()),        # 0.22+: on by default for a SupportsHMA connector
    (UNKNOWN, "vllm/vllm-openai:v0.26.0", ()),
])
def test_unknown_layout_with_hma_and_different_block_sizes_is_not_checked(tmp_path, capsys, model, image, flags):
    code, out = check(tmp_path, capsys, *_pair(model, image, flags=flags))
    assert code == 3, out
    assert not rules(out, "error")
    assert "block-size-hma" in _not_checked(out) and "sliding window" in _not_checked(out)
    assert "--model-config" in _not_checked(out)


@pytest.mark.parametrize(("model", "image", "flags", "p_block", "d_block"), [
    (ZEPHYR, "vllm/vllm-openai:v0.20.0", (), "16", "32"),           # 0.18-0.21 turn HMA off under a connector
    (ZEPHYR, "vllm/vllm-openai:v0.22.0", ("--disable-hybrid-kv-cache-manager",), "16", "32"),  # HMA off on both
    (ZEPHYR, "vllm/vllm-openai:v0.27.0", HMA_ON, "16", "32"),       # HMA takes different block sizes from 0.27
    (ZEPHYR, "vllm/vllm-openai:v0.18.0", HMA_ON, "16", "16"),       # equal block sizes: no rule hinges on the window
    ("meta-llama/Llama-3.1-8B-Instruct", "vllm/vllm-openai:v0.18.0", HMA_ON, "16", "32"),  # a known full-attention model
])
def test_controls_where_the_window_decides_nothing(tmp_path, capsys, model, image, flags, p_block, d_block):
    code, out = check(tmp_path, capsys, *_pair(model, image, p_block, d_block, flags))
    assert code == 0, out
    assert "sliding window" not in _not_checked(out)


def test_a_config_json_with_a_window_decides_it(tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(WINDOWED_CONFIG))
    code, out = check(tmp_path, capsys, *_pair(ZEPHYR, "vllm/vllm-openai:v0.18.0"), extra=("--model-config", str(config)))
    assert code == 1 and "block-size-hma" in rules(out, "error"), out


def test_a_shell_script_of_the_set_is_not_checked_and_says_what_to_pass(tmp_path, capsys):
    kv = "'" + KV + "'"
    script = tmp_path / "pd.sh"
    script.write_text(
        "pip install vllm==0.18.0\n"
        f"CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=5559 vllm serve {ZEPHYR} --port 8100 --block-size 16 "
        f"--no-disable-hybrid-kv-cache-manager --kv-transfer-config {kv} &\n"
        f"CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5659 vllm serve {ZEPHYR} --port 8200 --block-size 32 "
        f"--no-disable-hybrid-kv-cache-manager --kv-transfer-config {kv} &\nwait\n")
    code = main(["check", str(script), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 3 and "block-size-hma" in _not_checked(out), out
    assert "spec.model" not in _not_checked(out)   # a script's fix names the command line's own way
