"""Variants of what the nineteenth public-report set (tests/unit/data/public_reports_19) taught, with negative
controls.

Three kinds the set found:

- AMD's ROCm vLLM images (``rocm/vllm:rocm7.14.0_..._vllm_0.23.0``) name the vLLM release after the ROCm one; the
  image reader took their tags for no version, so every version-bounded rule went unchecked on them
  (:func:`pdd_operator.vllm.versions.rocm_vllm_version`).
- The PyNccl-era ``kv_rank`` / ``kv_parallel_size`` / ``kv_ip`` / ``kv_buffer_size`` keys in ``--kv-transfer-config``:
  accepted and ignored up to 0.31, refused at startup from 0.32.0 (``kv-transfer-config-removed-field``).
- A prefill tuned to run whole prompts (``--no-enable-chunked-prefill``) with a ``--max-num-batched-tokens`` below
  the context length: refused at startup by ``SchedulerConfig.verify_max_model_len``
  (``max-num-batched-tokens-below-max-model-len``), or a warning when the context length is the model's own
  (``max-num-batched-tokens-unverified``).
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.kv_transfer_config import removed_fields
from pdd_operator.vllm.scheduler_budget import SchedulerBudget, human_int
from pdd_operator.vllm.versions import version_from_image
from tests.unit.test_turn2_variants import KV, check, pd, rules

# --- ROCm image tags ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("image", "want"), [
    ("rocm/vllm:rocm6.3.1_vllm_0.8.5_20250521", (0, 8, 5)),
    ("docker.io/rocm/vllm:rocm7.14.0_cdna_ubuntu24.04_py3.14_pytorch_2.11.0_vllm_0.23.0", (0, 23, 0)),
    ("rocm/vllm:rocm6.2_mi300_ubuntu20.04_py3.9_vllm_0.6.4", (0, 6, 4)),
    ("rocm/vllm-dev:rocm7.0_vllm_0.27.0_20260101", (0, 27, 0)),
    # named no release: AMD's four-part builds, named previews, nightlies, latest, no tag
    ("rocm/vllm:rocm6.4.1_vllm_0.9.0.1_20250605", None),
    ("rocm/vllm:rocm7.0_vllm_qwen3coder_next", None),
    ("rocm/vllm-dev:nightly_main_20251120", None),
    ("rocm/vllm:latest", None),
    ("rocm/vllm", None),
    # a plain release tag, and another repository called vllm, keep the plain-tag reading
    ("rocm/vllm:v0.15.0", (0, 15, 0)),
    ("registry.local/team/vllm:0.30.1", (0, 30, 1)),
])
def test_rocm_image_tags_name_the_vllm_release_after_the_rocm_one(image, want):
    assert version_from_image(image) == want


GPT_OSS = ["openai/gpt-oss-120b", "--tensor-parallel-size=8", "--kv-transfer-config", KV,
           "--no-disable-hybrid-kv-cache-manager"]


@pytest.mark.parametrize(("image", "refused"), [
    ("rocm/vllm:rocm7.14.0_cdna_ubuntu24.04_py3.14_pytorch_2.11.0_vllm_0.23.0", True),  # HMA + ratio != 1, 0.18-0.26
    ("rocm/vllm:rocm10.0.0_ubuntu24.04_py3.14_pytorch_2.12.0_vllm_0.27.0", False),  # allowed from 0.27.0
], ids=["0.23", "0.27"])
def test_a_rocm_pair_is_judged_by_the_version_in_its_tag(tmp_path, capsys, image, refused):
    docs = pd("gpt-oss", [*GPT_OSS, "--block-size=64"], [*GPT_OSS, "--block-size=128"], model="openai/gpt-oss-120b",
              image=image, gpus=8)
    code, out = check(tmp_path, capsys, *docs)
    assert ("block-size-hma" in rules(out, "error")) is refused, out
    assert "vllm-version-unknown" not in rules(out) and not out.get("notChecked"), out


def test_a_rocm_tag_without_a_release_stays_unknown(tmp_path, capsys):
    docs = pd("gpt-oss", [*GPT_OSS, "--block-size=64"], [*GPT_OSS, "--block-size=128"], model="openai/gpt-oss-120b",
              image="rocm/vllm-dev:nightly_main_20251120", gpus=8)
    code, out = check(tmp_path, capsys, *docs)
    assert "vllm-version-unknown" in rules(out, "warning") and "block-size-hma" not in rules(out, "error"), out


# --- kv_rank / kv_parallel_size in --kv-transfer-config -----------------------------------------------------

LEGACY_P = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_producer", "kv_rank": 0, "kv_parallel_size": 2})
LEGACY_D = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_consumer", "kv_rank": 1, "kv_parallel_size": 2})


@pytest.mark.parametrize(("image", "refused"), [
    ("vllm/vllm-openai:v0.32.0", True),
    ("vllm/vllm-openai:v0.33.0", True),
    ("vllm/vllm-openai:v0.31.0", False),  # still fields of KVTransferConfig (ignored by NIXL)
    ("vllm/vllm-openai:v0.20.2", False),
])
def test_pynccl_era_keys_are_refused_from_032(tmp_path, capsys, image, refused):
    docs = pd("phi", ["--kv-transfer-config", LEGACY_P], ["--kv-transfer-config", LEGACY_D],
              model="microsoft/Phi-4-mini-instruct", image=image)
    code, out = check(tmp_path, capsys, *docs)
    assert ("kv-transfer-config-removed-field" in rules(out, "error")) is refused, out
    assert (code == 1) is refused, out


def test_the_keys_are_found_inside_a_multiconnector_child_and_only_there(tmp_path, capsys):
    multi = json.dumps({"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {
        "connectors": [{"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_ip": "10.0.0.1"},
                       {"kv_connector": "OffloadingConnector", "kv_role": "kv_both"}]}})
    assert removed_fields(json.loads(multi)) == ("kv_ip",)
    assert removed_fields({"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_port": 14579}) == ()
    docs = pd("qwen", ["--kv-transfer-config", multi], ["--kv-transfer-config", KV], image="vllm/vllm-openai:v0.32.0")
    code, out = check(tmp_path, capsys, *docs)
    findings = [f for r in out["results"] for f in r["findings"] if f["rule"] == "kv-transfer-config-removed-field"]
    assert code == 1 and len(findings) == 1 and findings[0]["message"].startswith("prefill: "), out


def test_an_unknown_version_warns_about_the_keys_without_holding_the_pair_unchecked(tmp_path, capsys):
    docs = pd("phi", ["--kv-transfer-config", LEGACY_P], ["--kv-transfer-config", LEGACY_D],
              model="microsoft/Phi-4-mini-instruct", image="vllm/vllm-openai:nightly")
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and "kv-transfer-config-removed-field" in rules(out, "warning"), out
    assert "kv-transfer-config-removed-field" not in rules(out, "error") and not out.get("notChecked"), out


# --- chunked prefill off with a small batch budget ---------------------------------------------------------


@pytest.mark.parametrize(("value", "want"), [
    ("8192", 8192), ("32k", 32000), ("32K", 32768), ("1.5k", 1500), ("2M", 2 * 2**20),
    ("-1", None), ("auto", None), (None, None), (True, None), ("8k tokens", None),
])
def test_human_readable_token_counts_read_as_vllm_reads_them(value, want):
    assert human_int(value) == want


@pytest.mark.parametrize(("p_extra", "rule", "severity"), [
    (["--no-enable-chunked-prefill", "--max-num-batched-tokens", "8192", "--max-model-len", "32k"],
     "max-num-batched-tokens-below-max-model-len", "error"),
    (["--enable-chunked-prefill=false", "--max-num-batched-tokens=4096", "--max-model-len=8192"],
     "max-num-batched-tokens-below-max-model-len", "error"),
    (["--max-num-batched-tokens", "128", "--max-num-seqs", "256"],  # chunked or not
     "max-num-batched-tokens-below-max-model-len", "error"),
    (["--no-enable-chunked-prefill", "--max-num-batched-tokens", "8192"],  # the model's own context
     "max-num-batched-tokens-unverified", "warning"),
], ids=["below-max-model-len", "equals-false-spelling", "below-max-num-seqs", "context-not-in-manifest"])
def test_a_prefill_that_cannot_hold_its_budget_is_refused_or_warned(tmp_path, capsys, p_extra, rule, severity):
    docs = pd("ds", ["--kv-transfer-config", KV, *p_extra], ["--kv-transfer-config", KV],
              model="deepseek-ai/DeepSeek-V2-Lite-Chat", image="vllm/vllm-openai:v0.32.0")
    code, out = check(tmp_path, capsys, *docs)
    assert rule in rules(out, severity) and (code == 1) is (severity == "error"), out


@pytest.mark.parametrize("p_extra", [
    ["--no-enable-chunked-prefill", "--max-num-batched-tokens", "32768", "--max-model-len", "32768"],
    ["--no-enable-chunked-prefill", "--max-model-len", "32768"],  # vLLM raises the default budget itself
    ["--max-num-batched-tokens", "8192", "--max-model-len", "32768"],  # chunked prefill on (the default)
    ["--enable-chunked-prefill", "--max-num-batched-tokens", "2048"],
])
def test_budgets_vllm_starts_with_pass(tmp_path, capsys, p_extra):
    docs = pd("ds", ["--kv-transfer-config", KV, *p_extra], ["--kv-transfer-config", KV],
              model="deepseek-ai/DeepSeek-V2-Lite-Chat", image="vllm/vllm-openai:v0.32.0")
    code, out = check(tmp_path, capsys, *docs)
    assert not rules(out) & {"max-num-batched-tokens-below-max-model-len", "max-num-batched-tokens-unverified"}, out


def test_budget_fields_come_from_the_flags():
    budget = SchedulerBudget.from_flags({"--enable-chunked-prefill": False, "--max-num-batched-tokens": "8k",
                                         "--max-model-len": "16K"})
    assert budget == SchedulerBudget(False, 8000, None, 16384) and budget.refusals() and not budget.context_unknown
    assert SchedulerBudget.from_flags({}).refusals() == [] and not SchedulerBudget.from_flags({}).context_unknown
