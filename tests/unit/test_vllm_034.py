"""vLLM 0.34.0 read against 0.33.0 (issue 9; docs/vllm-source-audit.md "After 0.33.0"): a known release now, and
what it changed that a rule reads.

- ``CacheConfig.DEFAULT_BLOCK_SIZE`` is 64 (vllm/config/cache.py line 185; 16 in 0.33.0), and
  ``Platform.update_block_size_for_backend`` asks the backends from it (platforms/interface.py lines 760-790): a
  plain-attention engine without ``--block-size`` runs 64 on CUDA, so a peer that sets 16 pairs on 0.33 and not on
  0.34 (block-size-direction, block-size-push-equal); with the version unknown the rules judge every release.
- Six flags appear in ``EngineArgs.add_cli_args`` (cli-flag-not-yet on an older release).
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.block_size import default_block_size, likely_block_size
from pdd_operator.vllm.versions import KNOWN_RELEASES, NEWEST_RELEASE
from tests.unit.test_public_report_kinds_14 import _messages, _pair
from tests.unit.test_turn2_variants import check, rules

GPU = {"nvidia.com/gpu": "1"}
MODEL = "openai-community/gpt2"  # plain attention, head size 64: no FA4 page on any GPU


def _kv(connector: str = "NixlConnector", role: str = "kv_both") -> str:
    return json.dumps({"kv_connector": connector, "kv_role": role})


def test_0_34_0_is_the_newest_known_release():
    assert (0, 34, 0) in KNOWN_RELEASES and NEWEST_RELEASE == (0, 34, 0)


def test_the_cuda_default_is_64_from_0_34():
    assert default_block_size((0, 34, 0), "vllm/vllm-openai:v0.34.0", GPU, "dense", head_size=64) == 64
    assert default_block_size((0, 33, 0), "vllm/vllm-openai:v0.33.0", GPU, "dense", head_size=64) == 16
    # an attention backend that keeps the default keeps 64; FA4's head-size-256 page still depends on the GPU
    assert default_block_size((0, 34, 0), "vllm/vllm-openai:v0.34.0", GPU, "dense", None, "FLASHINFER") == 64
    assert default_block_size((0, 34, 0), "vllm/vllm-openai:v0.34.0", GPU, "dense", head_size=256) is None
    # the CPU platform asks from 128 in 0.33 and 0.34 alike (platforms/cpu.py update_block_size_for_backend)
    assert default_block_size((0, 34, 0), "public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.34.0", {}, "dense") == 128
    # ROCm: ROCM_AITER_FA (16) first when AITER's MHA is on, else 64: only likely
    rocm = likely_block_size((0, 34, 0), "rocm/vllm:latest", {"amd.com/gpu": "1"}, "dense", head_size=64)
    assert rocm.size == 64 and "ROCM_AITER_FA" in rocm.depends_on


@pytest.mark.parametrize(("tag", "want"), [("v0.33.0", 0), ("v0.34.0", 1)])
def test_pull_decode_16_under_a_default_prefill(tmp_path, capsys, tag, want):
    """Decode --block-size 16, prefill unset: 16 % 16 on 0.33; 16 % 64 != 0 on 0.34 (block_size_ratio's assert)."""
    p = [MODEL, "--kv-transfer-config", _kv()]
    d = [MODEL, "--block-size", "16", "--kv-transfer-config", _kv()]
    code, out = check(tmp_path, capsys, *_pair(p, d, image=f"vllm/vllm-openai:{tag}"))
    assert code == want and ("block-size-direction" in rules(out, "error")) == bool(want), out


@pytest.mark.parametrize(("tag", "want"), [("v0.33.0", 0), ("v0.34.0", 1)])
def test_push_decode_16_under_a_default_prefill(tmp_path, capsys, tag, want):
    p = [MODEL, "--kv-transfer-config", _kv("NixlPushConnector", "kv_producer")]
    d = [MODEL, "--block-size", "16", "--kv-transfer-config", _kv("NixlPushConnector", "kv_consumer")]
    code, out = check(tmp_path, capsys, *_pair(p, d, image=f"vllm/vllm-openai:{tag}"))
    assert ("block-size-push-equal" in rules(out, "error")) == bool(want), out


@pytest.mark.parametrize("tag", ["v0.33.0", "v0.34.0"])
def test_pull_prefill_16_under_a_default_decode_passes_on_both(tmp_path, capsys, tag):
    p = [MODEL, "--block-size", "16", "--kv-transfer-config", _kv()]
    d = [MODEL, "--kv-transfer-config", _kv()]
    code, out = check(tmp_path, capsys, *_pair(p, d, image=f"vllm/vllm-openai:{tag}"))
    assert code == 0 and not rules(out, "error"), out


def test_unknown_version_every_release_refuses(tmp_path, capsys):
    p = [MODEL, "--block-size", "128", "--kv-transfer-config", _kv()]
    d = [MODEL, "--kv-transfer-config", _kv()]
    code, out = check(tmp_path, capsys, *_pair(p, d, image="vllm/vllm-openai:latest"))
    assert code == 1 and "block-size-direction" in rules(out, "error"), out
    assert "16 or 64" in _messages(out, "block-size-direction")[0], out


def test_unknown_version_some_releases_refuse_is_a_warning(tmp_path, capsys):
    p = [MODEL, "--kv-transfer-config", _kv()]
    d = [MODEL, "--block-size", "16", "--kv-transfer-config", _kv()]
    code, out = check(tmp_path, capsys, *_pair(p, d, image="vllm/vllm-openai:latest"))
    assert "block-size-direction" in rules(out, "warning") and "block-size-direction" not in rules(out, "error"), out
    assert "some releases refuse" in _messages(out, "block-size-direction")[0], out


def test_unknown_version_that_every_release_pairs_is_silent(tmp_path, capsys):
    p = [MODEL, "--block-size", "16", "--kv-transfer-config", _kv()]
    d = [MODEL, "--kv-transfer-config", _kv()]
    code, out = check(tmp_path, capsys, *_pair(p, d, image="vllm/vllm-openai:latest"))
    assert "block-size-direction" not in rules(out), out


@pytest.mark.parametrize("flag", ["--enable-extensible-kv-cache", "--max-num-inflight-kv-loads 4",
                                  "--shuffle-safetensors-files"])
@pytest.mark.parametrize(("tag", "want"), [("v0.33.0", True), ("v0.34.0", False)])
def test_flags_new_in_0_34(tmp_path, capsys, flag, tag, want):
    args = [MODEL, *flag.split(), "--kv-transfer-config", _kv()]
    code, out = check(tmp_path, capsys, *_pair(args, args, image=f"vllm/vllm-openai:{tag}"))
    assert ("cli-flag-not-yet" in rules(out, "error")) == want, out


SPEC = {"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3}


@pytest.mark.parametrize("key", ["disable_padded_drafter_batch", "use_heterogeneous_vocab", "disable-padded-drafter-batch"])
@pytest.mark.parametrize(("tag", "want"), [("v0.33.0", None), ("v0.34.0", "error"), ("latest", "warning")])
def test_speculative_keys_removed_in_0_34(tmp_path, capsys, key, tag, want):
    """SpeculativeConfig (pydantic, extra='forbid') dropped both keys in 0.34.0: the engine never starts."""
    spec = json.dumps({**SPEC, key: True})
    args = ["meta-llama/Llama-3.1-8B-Instruct", "--speculative-config", spec, "--kv-transfer-config", _kv()]
    code, out = check(tmp_path, capsys, *_pair(args, args, image=f"vllm/vllm-openai:{tag}"))
    found = {f["severity"] for r in out["results"] for f in r["findings"]
             if f["rule"] == "speculative-config-removed-field"}
    assert found == ({want} if want else set()), out


def test_speculative_config_without_removed_keys_passes_on_0_34(tmp_path, capsys):
    args = ["meta-llama/Llama-3.1-8B-Instruct", "--speculative-config", json.dumps(SPEC), "--kv-transfer-config", _kv()]
    code, out = check(tmp_path, capsys, *_pair(args, args, image="vllm/vllm-openai:v0.34.0"))
    assert "speculative-config-removed-field" not in rules(out), out


def _extra(mode: str, role: str = "kv_both") -> str:
    return json.dumps({"kv_connector": "NixlConnector", "kv_role": role,
                       "kv_connector_extra_config": {"transfer_mode": mode}})


@pytest.mark.parametrize(("tag", "want"), [("v0.33.0", 0), ("v0.34.0", 1)])
def test_transfer_mode_push_on_nixl_connector_against_pull(tmp_path, capsys, tag, want):
    """0.34's factory makes NixlConnector + transfer_mode "push" the push connector (kv_connector/factory.py 125-130);
    0.33 ignores the key: against a plain NixlConnector the modes differ only on 0.34."""
    p = [MODEL, "--kv-transfer-config", _extra("push", "kv_producer")]
    d = [MODEL, "--kv-transfer-config", _kv(role="kv_consumer")]
    code, out = check(tmp_path, capsys, *_pair(p, d, image=f"vllm/vllm-openai:{tag}"))
    assert ("transfer-mode-mismatch" in rules(out, "error")) == bool(want), out


@pytest.mark.parametrize(("tag", "want"), [("v0.33.0", 1), ("v0.34.0", 0)])
def test_transfer_mode_push_on_nixl_connector_against_push(tmp_path, capsys, tag, want):
    p = [MODEL, "--kv-transfer-config", _extra("push", "kv_producer")]
    d = [MODEL, "--kv-transfer-config", _kv("NixlPushConnector", "kv_consumer")]
    code, out = check(tmp_path, capsys, *_pair(p, d, image=f"vllm/vllm-openai:{tag}"))
    assert ("transfer-mode-mismatch" in rules(out, "error")) == bool(want), out


def test_transfer_mode_push_with_an_unknown_version_is_a_warning(tmp_path, capsys):
    p = [MODEL, "--kv-transfer-config", _extra("push", "kv_producer")]
    d = [MODEL, "--kv-transfer-config", _kv(role="kv_consumer")]
    code, out = check(tmp_path, capsys, *_pair(p, d, image="vllm/vllm-openai:latest"))
    assert "transfer-mode-mismatch" in rules(out, "warning") and "transfer-mode-mismatch" not in rules(out, "error"), out


@pytest.mark.parametrize(("tag", "want"), [("v0.33.0", False), ("v0.34.0", True)])
def test_invalid_transfer_mode_fails_0_34_startup(tmp_path, capsys, tag, want):
    """The invalid value is judged by set 43's ``nixl-transfer-mode-invalid`` (compat/rules/transfer_mode.py)."""
    args = [MODEL, "--kv-transfer-config", _extra("Push")]
    code, out = check(tmp_path, capsys, *_pair(args, args, image=f"vllm/vllm-openai:{tag}"))
    assert ("nixl-transfer-mode-invalid" in rules(out, "error")) == want, out
