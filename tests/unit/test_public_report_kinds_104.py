"""Variants of what the hundred-and-fourth public-report set (tests/unit/data/public_reports_104: models the checker
does not know) taught, with negative controls.

1. A ``--speculative-config`` that names a draft model but no ``num_speculative_tokens`` is not a refusal: vLLM takes
   the count from the draft's config.json (``n_predict``: "Default to max value defined in draft model config",
   config.py 0.9.0 l.2568, config/speculative.py 0.20.0 l.655-661, v1/worker/gpu/spec_decode/speculator_config.py
   0.34.0 l.275-282) and fails only where that config has none, which the files do not show: a warning
   (1CatAI/1Cat-vLLM#555, a DFlash draft in a local directory, got past that check to the NIXL worker). Without a
   draft model the count is still required.

2. A Qwen version the checker does not know is not read as a dense Qwen. The catch-all name pattern took any
   ``qwen`` (even the ``Qwen/`` organisation) for a dense model, so a local Qwen3.8-27B checkpoint, whose NIXL worker
   fails the Mamba conv-layout assert (1Cat-vLLM#555: it has linear-attention layers), passed as dense with no word.
   Only Qwen, Qwen1.5, Qwen2, Qwen2.5, Qwen3 and QwQ names read as dense (and Qwen2/3 ``-A..B`` names as MoE); another
   version is architecture-unknown, a warning that names how to give the config.json.

3. A re-release or precision sibling of a known checkpoint reads as that checkpoint. Only trailing quantization
   tokens were stripped, so Qwen/Qwen3-30B-A3B-Thinking-2507-FP8 (the 2507 Thinking re-release of Qwen3-30B-A3B, in
   Qwen's FP8 recipe) and nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8 (beside its known -BF16 and -NVFP4 siblings) were
   unknown: the FP8 experts' 768 rows split over TP 4 (192, not a multiple of block_n 128: quantization/fp8.py
   0.20.0 l.620-633) passed in silence (set 99's one miss), and a hybrid's n_groups was "not known". Now a
   re-release token (instruct, thinking, chat, it, a four-digit date) is stripped too: the same organisation's known
   copy with the same quantization tail is taken whole (its weight blocks), else the base without its quantization; a
   precision token (BF16) names a sibling of the same organisation. The organisation's own re-releases with the
   sibling's own quantization read as known ids (as the table's ``also`` ids do); a quantized copy of another
   quantization and another organisation's copy read as the base with the model-read-as-base warning. A base
   checkpoint the table does not hold, another size, or a fine-tune whose name only contains the base stay unknown.

4. A hybrid SSM model over a KV connector that is not SupportsHMA fails at startup. hybrid-hma-disabled judged NIXL
   and its wrappers only, so Qwen3.6-35B-A3B over P2pNcclConnector on 0.23.0 (vllm#44831 without the PR) passed:
   vLLM turns the hybrid KV cache manager off for a connector without SupportsHMA (config/vllm.py 0.23.0
   l.1479-1501) and the Mamba and attention specs cannot be unified (v1/core/kv_cache_utils.py 0.23.0 l.1421-1428).
   hybrid-connector-without-hma judges each engine on its own from vLLM's connector classes per release
   (compat/connector_hma.py CONNECTOR_HMA: P2pNccl never, MooncakeConnector from 0.20.0, MoRIIO from 0.30.0).
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.known_models import derived_config, known_config
from tests.unit.test_turn2_variants import check, container, rules, workload

KV_P = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_producer"})
KV_D = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_consumer"})


def _pair(image, model, p_args=(), d_args=(), env=(), p_gpus=1, d_gpus=1):
    return [workload("m-prefill", "prefill", container([model, *p_args, "--kv-transfer-config", KV_P], image=image,
                                                       env=list(env), gpus=p_gpus)),
            workload("m-decode", "decode", container([model, *d_args, "--kv-transfer-config", KV_D], image=image,
                                                     env=list(env), gpus=d_gpus))]


# --- 1. the speculative token count behind the draft model's config.json ------------------------------------------


@pytest.mark.parametrize(("image", "spec"), [
    ("vllm/vllm-openai:v0.28.0", {"method": "dflash", "model": "/data/models/Qwen3-8B-DFlash"}),
    ("vllm/vllm-openai:v0.20.0", {"method": "eagle3", "model": "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3"}),
    ("vllm/vllm-openai:v0.34.0", {"method": "draft_model", "model": "Qwen/Qwen3-0.6B"}),
])
def test_a_named_draft_without_a_token_count_is_a_warning(tmp_path, capsys, image, spec):
    args = ["--speculative-config", json.dumps(spec)]
    code, out = check(tmp_path, capsys, *_pair(image, "Qwen/Qwen3-8B", args, args))
    assert code == 0, out
    assert "speculative-incomplete" in rules(out, "warning") and "speculative-incomplete" not in rules(out, "error"), out


def test_no_draft_model_and_no_token_count_is_still_refused(tmp_path, capsys):
    args = ["--speculative-config", json.dumps({"method": "eagle3"})]
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.28.0", "Qwen/Qwen3-8B", args, args))
    assert code == 1 and "speculative-incomplete" in rules(out, "error"), out


def test_a_named_draft_with_its_token_count_has_no_finding(tmp_path, capsys):
    args = ["--speculative-config", json.dumps({"method": "dflash", "model": "/data/models/Qwen3-8B-DFlash",
                                                "num_speculative_tokens": 15})]
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.28.0", "Qwen/Qwen3-8B", args, args))
    assert code == 0 and "speculative-incomplete" not in rules(out), out


# --- 2. a Qwen version the tables do not know -----------------------------------------------------------------------


@pytest.mark.parametrize("model", ["/data/models/RadixArk_Qwen3.8-27B-NVFP4-BF16-LMHead", "Qwen/Qwen3.8-35B-A3B",
                                   "/models/qwen4-14b-instruct"])
@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.25.1", "vllm/vllm-openai:v0.34.0"])
def test_an_unknown_qwen_version_is_architecture_unknown(tmp_path, capsys, model, image):
    code, out = check(tmp_path, capsys, *_pair(image, model, ["--tensor-parallel-size", "2"],
                                               ["--tensor-parallel-size", "2"], p_gpus=2, d_gpus=2))
    assert code == 0 and "architecture-unknown" in rules(out, "warning"), out


@pytest.mark.parametrize("model", ["Qwen/Qwen3-8B", "/models/qwen3-8b-sft", "Qwen/Qwen2.5-7B-Instruct", "Qwen/QwQ-32B"])
def test_known_dense_qwen_names_stay_dense(tmp_path, capsys, model):
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.25.1", model))
    assert code == 0 and "architecture-unknown" not in rules(out), out


def test_a_known_hybrid_qwen_name_is_still_judged_as_hybrid(tmp_path, capsys):
    # Qwen3.6 without the DS layout on 0.25.1: both NIXL workers assert at startup (nixl/base_worker.py 0.25.1 l.302).
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.25.1", "/data/models/Qwen3.6-35B-A3B-NVFP4"))
    assert code == 1 and "ssm-conv-layout-ds" in rules(out, "error"), out


# --- 3. re-releases and precision siblings of known checkpoints ------------------------------------------------------


@pytest.mark.parametrize(("name", "read_as", "blocks", "own"), [
    # the organisation's own re-releases and siblings read as known ids (as the table's ``also`` ids are)
    ("Qwen/Qwen3-30B-A3B-Thinking-2507-FP8", "Qwen/Qwen3-30B-A3B-FP8", [128, 128], True),
    ("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "Qwen/Qwen3-235B-A22B-FP8", [128, 128], True),
    ("Qwen/Qwen3-30B-A3B-Instruct-2507", "Qwen/Qwen3-30B-A3B", None, True),
    ("moonshotai/Kimi-K2-Instruct-0905", "moonshotai/Kimi-K2-Instruct", None, True),  # one token at a time
    # a quantized copy of an unquantized sibling and another organisation's copies read as the base, said by
    # model-read-as-base (their own KV cache quantization is not known), never with Qwen's block recipe
    ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", None, False),
    ("unsloth/Qwen3-30B-A3B-Instruct-2507", "Qwen/Qwen3-30B-A3B", None, False),
    ("RedHatAI/Qwen3-30B-A3B-Thinking-2507-FP8-dynamic", "Qwen/Qwen3-30B-A3B", None, False),
])
def test_a_re_release_or_sibling_reads_as_the_known_checkpoint(name, read_as, blocks, own):
    if own:
        config, source = known_config(name)
        assert f"read as {read_as}," in source and derived_config(name) is None
    else:
        assert known_config(name) is None
        config, found, _ = derived_config(name)
        assert found == read_as
    assert (config.get("quantization_config") or {}).get("weight_block_size") == blocks
    assert "max_position_embeddings" not in config  # re-releases change the context length


@pytest.mark.parametrize("name", ["Qwen/Qwen3-8B-Base-FP8", "Qwen/Qwen3-31B-A3B-Thinking-2507-FP8",
                                  "acme/MyQwen3-30B-A3B-Thinking-2507-FP8", "/models/Qwen3-30B-A3B-Thinking-2507-FP8",
                                  "acme/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8"])
def test_names_without_a_known_re_release_base_stay_unknown(name):
    assert derived_config(name) is None and known_config(name) is None


@pytest.mark.parametrize(("model", "tp", "image"), [
    ("Qwen/Qwen3-30B-A3B-Thinking-2507-FP8", 4, "vllm/vllm-openai:v0.20.0"),   # 768 / 4 = 192
    ("Qwen/Qwen3-30B-A3B-Instruct-2507-FP8", 4, "vllm/vllm-openai:v0.28.0"),
    ("Qwen/Qwen3-235B-A22B-Thinking-2507-FP8", 8, "vllm/vllm-openai:v0.24.0"),  # 1536 / 8 = 192
])
def test_a_re_releases_fp8_experts_split_off_the_blocks_are_refused(tmp_path, capsys, model, tp, image):
    code, out = check(tmp_path, capsys, *_pair(image, model, ["--tensor-parallel-size", str(tp)],
                                               ["--tensor-parallel-size", str(tp)], p_gpus=tp, d_gpus=tp))
    assert code == 1 and "fp8-moe-block-tp-indivisible" in rules(out, "error"), out


@pytest.mark.parametrize(("model", "tp"), [("Qwen/Qwen3-30B-A3B-Thinking-2507-FP8", 2),
                                           ("Qwen/Qwen3-235B-A22B-Thinking-2507-FP8", 4)])
def test_a_re_releases_fp8_experts_on_whole_blocks_run(tmp_path, capsys, model, tp):
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.20.0", model, ["--tensor-parallel-size", str(tp)],
                                               ["--tensor-parallel-size", str(tp)], p_gpus=tp, d_gpus=tp))
    assert code == 0 and "fp8-moe-block-tp-indivisible" not in rules(out), out


def test_a_precision_siblings_mamba_groups_are_known(tmp_path, capsys):
    # Nemotron-3-Nano FP8 prefill TP 1 / decode TP 2 on 0.20.0 with the DS layout: n_groups 8 from the BF16 sibling.
    hybrid = ["--no-disable-hybrid-kv-cache-manager", "--no-enable-prefix-caching", "--no-async-scheduling"]
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.20.0", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8",
                                               hybrid, [*hybrid, "--tensor-parallel-size", "2"], d_gpus=2,
                                               env=[{"name": "VLLM_SSM_CONV_STATE_LAYOUT", "value": "DS"}]))
    assert code == 0 and "mamba2-n-groups-unknown" not in rules(out), out
    assert "model-read-as-base" in rules(out, "warning"), out


# --- 4. a hybrid model over a connector without SupportsHMA -------------------------------------------------------


def _kv(connector, role, **extra):
    return json.dumps({"kv_connector": connector, "kv_role": role, **extra})


def _connector_pair(image, model, connector, extra=None):
    extra = extra or {}
    return [workload("h-prefill", "prefill", container([model, "--kv-transfer-config",
                                                        _kv(connector, "kv_producer", **extra.get("p", {}))],
                                                       image=image)),
            workload("h-decode", "decode", container([model, "--kv-transfer-config",
                                                      _kv(connector, "kv_consumer", **extra.get("d", {}))],
                                                     image=image))]


_P2P = {"p": {"kv_port": "21001", "kv_connector_extra_config": {"http_port": "8000", "proxy_ip": "10.0.0.1",
                                                                  "proxy_port": "30001"}},
        "d": {"kv_port": "22001", "kv_connector_extra_config": {"http_port": "8000", "proxy_ip": "10.0.0.1",
                                                                  "proxy_port": "30001"}}}


@pytest.mark.parametrize(("image", "model", "connector", "extra"), [
    ("vllm/vllm-openai:v0.23.0", "/data/models/Qwen3.6-35B-A3B-NVFP4", "P2pNcclConnector", _P2P),
    ("vllm/vllm-openai:v0.20.0", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "P2pNcclConnector", _P2P),
    ("vllm/vllm-openai:v0.19.1", "Qwen/Qwen3.5-27B", "MooncakeConnector", None),
    ("vllm/vllm-openai:v0.18.0", "ibm-granite/granite-4.0-h-small", "MooncakeConnector", None),
])
def test_a_hybrid_model_over_a_connector_without_hma_is_refused(tmp_path, capsys, image, model, connector, extra):
    code, out = check(tmp_path, capsys, *_connector_pair(image, model, connector, extra))
    assert code == 1 and "hybrid-connector-without-hma" in rules(out, "error"), out


@pytest.mark.parametrize(("image", "model", "connector", "extra"), [
    ("vllm/vllm-openai:v0.20.0", "Qwen/Qwen3.5-27B", "MooncakeConnector", None),   # SupportsHMA from 0.20.0
    ("vllm/vllm-openai:v0.23.0", "Qwen/Qwen3-8B", "P2pNcclConnector", _P2P),     # no SSM layers
])
def test_a_connector_with_hma_or_a_plain_model_is_not_refused_for_it(tmp_path, capsys, image, model, connector, extra):
    code, out = check(tmp_path, capsys, *_connector_pair(image, model, connector, extra))
    assert "hybrid-connector-without-hma" not in rules(out), out
