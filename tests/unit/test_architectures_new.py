"""Model families the P/D rules depend on, for architectures added to vLLM's registry after the first tables.

Each row names the Hugging Face ``architectures`` entry (vllm/model_executor/models/registry.py) and a model id
of that family; both routes must give the same family, SSM kind and sliding-window trait, and the rules that
depend on them (hybrid SSM, MLA, HMA for sliding window) must see it.
"""

from __future__ import annotations

import pytest

from pdd_operator.api.spec import Architecture as A
from pdd_operator.api.spec import SSMKind as S
from pdd_operator.vllm.architectures import traits

ROWS = [
    ("DeepseekV4ForCausalLM", "deepseek-ai/DeepSeek-V4-Pro", A.SPARSE_MLA, None, True),
    ("DeepseekV3ForCausalLM", "moonshotai/Kimi-K2-Instruct", A.MLA, None, False),  # Kimi K2's config names DSv3
    ("Glm4MoeForCausalLM", "zai-org/GLM-4.6", A.MOE, None, False),
    ("Glm4MoeForCausalLM", "zai-org/GLM-4.5-Air", A.MOE, None, False),
    ("Glm4MoeLiteForCausalLM", "zai-org/GLM-4.7-Flash", A.MLA, None, False),
    ("MiniMaxM1ForCausalLM", "MiniMaxAI/MiniMax-M1-80k", A.HYBRID_SSM, None, False),
    ("MiniMaxText01ForCausalLM", "MiniMaxAI/MiniMax-Text-01", A.HYBRID_SSM, None, False),
    ("MiniMaxM2ForCausalLM", "MiniMaxAI/MiniMax-M2", A.MOE, None, False),
    ("GraniteMoeHybridForCausalLM", "ibm-granite/granite-4.0-h-small", A.HYBRID_SSM, S.MAMBA2, False),
    ("FalconH1ForCausalLM", "tiiuae/Falcon-H1-34B-Instruct", A.HYBRID_SSM, S.MAMBA2, False),
    ("Gemma3ForCausalLM", "google/gemma-3-1b-it", A.DENSE, None, True),
    ("GptOssForCausalLM", "openai/gpt-oss-120b", A.MOE, None, True),
    ("Llama4ForCausalLM", "meta-llama/Llama-4-Scout-17B-16E-Instruct", A.MOE, None, True),
    ("Qwen3NextForCausalLM", "Qwen/Qwen3-Next-80B-A3B-Instruct", A.HYBRID_SSM, S.GDN, False),
]


@pytest.mark.parametrize(("hf", "name", "family", "kind", "sliding"), ROWS)
def test_family_from_architecture_and_from_name_agree(hf, name, family, kind, sliding):
    for got in (traits(None, None, hf, ""), traits(None, None, None, name)):
        assert (got.architecture, got.ssm_kind, got.sliding_window) == (family, kind, sliding), got.source


@pytest.mark.parametrize("name", ["meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-8B", "THUDM/glm-4-9b-chat"])
def test_negative_controls_stay_dense_full_attention(name):
    got = traits(None, None, None, name)
    assert not got.sliding_window and got.architecture in (A.DENSE, None)
    assert not got.needs_hma


def test_minimax_m1_hybrid_needs_hma_and_says_its_kind_is_unknown():
    got = traits(None, None, "MiniMaxM1ForCausalLM", "")
    assert got.needs_hma and got.ssm_kind is None


def _rules(hf: str, name: str, version: str = "0.28.0") -> set[str]:
    from pdd_operator.compat import evaluate
    from tests.helpers import make_spec

    spec = make_spec(model={"name": name, "hfArchitecture": hf, "numKvHeads": 8},
                     engine={"image": f"vllm/vllm-openai:v{version}"})
    return {f.rule for f in evaluate(spec).findings}


def test_rules_see_the_new_families():
    # ssm-kind-unknown runs for 0.20-0.24 (derive_mamba_conv_split knew some kinds only)
    assert "ssm-kind-unknown" in _rules("MiniMaxM1ForCausalLM", "MiniMaxAI/MiniMax-M1-80k", "0.22.0")
    assert "ssm-kind-unknown" not in _rules("Qwen3NextForCausalLM", "Qwen/Qwen3-Next-80B-A3B-Instruct", "0.22.0")
    for hf, name in (("DeepseekV4ForCausalLM", "deepseek-ai/DeepSeek-V4-Pro"), ("Glm4MoeForCausalLM", "zai-org/GLM-4.6")):
        assert "architecture-unknown" not in _rules(hf, name)
    assert "architecture-unknown" in _rules("SomeNewForCausalLM", "acme/new-model")  # negative control
