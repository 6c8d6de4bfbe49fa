"""Variants of what the seventieth public-report set (tests/unit/data/public_reports_70) taught, with negative
controls.

1. A flag's first (or last) release is dated by the patch releases too. ``--kernel-config`` (DeepSeek-V3.2's recipe)
   is absent from the 0.14.0 *and* 0.14.1 sdists and in 0.16.0: an engine pinned to 0.14.1 stops with
   ``unrecognized arguments`` (``cli-flag-not-yet`` is an error there, not "whether 0.14.1 has it was not read"). The
   patch releases 0.11.2, 0.14.1, 0.17.1, 0.18.1, 0.22.1, 0.25.1 and 0.27.1 now bound every flag of
   :mod:`pdd_operator.vllm.added_flags_read` and :mod:`pdd_operator.vllm.removed_flags_read`, and no hand-written
   entry of :data:`~pdd_operator.vllm.added_flags.ADDED_FLAGS` is looser than the read table (``--kda-prefill-backend``
   was dated 0.24.0-0.32.0 by hand while the sdists read 0.26.0 without it, 0.27.0 with it).
2. An engine with no counterpart in the files (GLM-5.1's TileRT recipe: the decode is not vLLM) is still stopped by
   what stops it on its own: the rules of ``Rule.one_engine`` (pdd_operator/compat/rules/base.py) run on it (errors only,
   :func:`~pdd_operator.compat.engine.evaluate_alone`), and the KV path stays "not checked".
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.added_flags import ADDED_FLAGS
from pdd_operator.vllm.added_flags_read import READ_ADDITIONS
from pdd_operator.vllm.removed_flags_read import READ_REMOVALS
from tests.unit.test_turn2_variants import POD_IP, check, rules, workload

PRODUCER = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_producer"})
CONSUMER = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_consumer"})


def _engine(name, role, model, image, args, gpus=8):
    c = {"name": "vllm", "image": image, "command": ["vllm", "serve"], "args": [model, *args],
         "env": [POD_IP], "resources": {"limits": {"nvidia.com/gpu": str(gpus), "rdma/ib": "1"}}}
    return workload(f"{name}-{role}", role, c, app=name)


def _pair(model, image, p_extra=(), d_extra=(), d_image=None):
    return [_engine("m", "prefill", model, image, ["--tensor-parallel-size", "8", "--kv-transfer-config", PRODUCER,
                                                  *p_extra]),
            _engine("m", "decode", model, d_image or image, ["--tensor-parallel-size", "8", "--kv-transfer-config",
                                                            CONSUMER, *d_extra])]


def _severity(out, rule):
    return {f["severity"] for r in out["results"] for f in r["findings"] if f["rule"] == rule}


# --- 1. patch releases bound the flag tables --------------------------------------------------------------------


@pytest.mark.parametrize(("model", "flag", "image", "expected"), [
    ("deepseek-ai/DeepSeek-V3.2", "--kernel-config.enable_flashinfer_autotune=False", "v0.14.1", {"error"}),
    ("deepseek-ai/DeepSeek-V3.2", "--kernel-config.enable_flashinfer_autotune=False", "v0.14.0", {"error"}),
    ("deepseek-ai/DeepSeek-V3.2", "--kernel-config.enable_flashinfer_autotune=False", "v0.16.0", set()),
    # another flag of the same gap, another model: absent from 0.14.1, in 0.16.0
    ("Qwen/Qwen3-Next-80B-A3B-Instruct", "--mamba-cache-mode=all", "v0.14.1", {"error"}),
    # added between 0.17.0 and 0.18.0: 0.17.1 lacks it
    ("Qwen/Qwen3.5-397B-A17B", "--gdn-prefill-backend=triton", "v0.17.1", {"error"}),
    ("Qwen/Qwen3.5-397B-A17B", "--gdn-prefill-backend=triton", "v0.18.0", set()),
    # -sc: '--speculative-config' without '-sc' in 0.18.0 and 0.18.1, with it in 0.19.0
    ("meta-llama/Llama-3.1-8B-Instruct", "-sc={\"method\":\"ngram\",\"num_speculative_tokens\":3,"
     "\"prompt_lookup_max\":4}", "v0.18.1", {"error"}),
])
def test_a_flag_absent_from_a_patch_release_stops_it(tmp_path, capsys, model, flag, image, expected):
    code, out = check(tmp_path, capsys, *_pair(model, f"vllm/vllm-openai:{image}", [flag], [flag]))
    assert _severity(out, "cli-flag-not-yet") == expected, out
    assert (code == 1) == ("error" in expected) or rules(out, "error") - {"cli-flag-not-yet"}


def test_a_flag_removed_after_a_patch_release_is_still_there_in_it(tmp_path, capsys):
    """--swap-space: still in the 0.17.1 sdist, gone in 0.18.0 (READ_REMOVALS bounds moved to 0.17.1)."""
    _, out = check(tmp_path, capsys, *_pair("Qwen/Qwen3-8B", "vllm/vllm-openai:v0.17.1", ["--swap-space", "4"],
                                            ["--swap-space", "4"]))
    assert "cli-flag-removed" not in rules(out)
    _, out = check(tmp_path, capsys, *_pair("Qwen/Qwen3-8B", "vllm/vllm-openai:v0.18.0", ["--swap-space", "4"],
                                            ["--swap-space", "4"]))
    assert _severity(out, "cli-flag-removed") == {"error"}
    assert READ_REMOVALS["--swap-space"][:2] == ((0, 17, 1), (0, 18, 0))


def test_no_hand_entry_is_looser_than_the_sdists_read():
    for flag, (without, with_) in READ_ADDITIONS.items():
        if flag in ADDED_FLAGS:
            added = ADDED_FLAGS[flag]
            assert added.absent_in >= without and added.present_in <= with_, flag


def test_kda_prefill_backend_is_dated_by_the_sdists():
    assert (ADDED_FLAGS["--kda-prefill-backend"].absent_in, ADDED_FLAGS["--kda-prefill-backend"].present_in) == (
        (0, 26, 0), (0, 27, 0))


# --- 2. an engine with no counterpart -----------------------------------------------------------------------------

TILERT = json.dumps({"kv_connector": "TileRTConnector", "kv_role": "kv_producer",
                     "kv_connector_extra_config": {"tilert_host": "10.0.0.12"}})
TILERT_MODULE = json.dumps({"kv_connector": "TileRTConnector", "kv_role": "kv_producer",
                            "kv_connector_module_path": "tilert.pd_vllm.prefill_connector"})


def _script(tmp_path, capsys, body):
    path = tmp_path / "run.sh"
    path.write_text(body)
    from pdd_operator.cli import main
    code = main(["check", str(path), "-o", "json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(("pin", "kv", "expected_code", "expected_rules"), [
    ("pip install vllm==0.25.0", TILERT, 1, {"kv-connector-unregistered"}),
    ("pip install vllm==0.19.1", TILERT, 1, {"kv-connector-unregistered"}),
    ("pip install vllm==0.25.0", TILERT_MODULE, 3, set()),        # a module path: vLLM imports it
    ("", TILERT, 3, set()),                                        # release unknown: a later one may register it
])
def test_a_lone_script_engine_is_judged_on_its_own(tmp_path, capsys, pin, kv, expected_code, expected_rules):
    code, out = _script(tmp_path, capsys, f"{pin}\npython3 -m tilert.pd_vllm.decode_server --http-port 5557\n"
                        f"vllm serve zai-org/GLM-5.1-FP8 --tensor-parallel-size 8 --kv-transfer-config '{kv}'\n")
    assert code == expected_code, out
    assert rules(out, "error") == expected_rules
    assert out["notChecked"], out  # the KV path is not checked either way


@pytest.mark.parametrize(("role", "kv", "flag", "image", "rule"), [
    ("prefill", PRODUCER, "--kernel-config.enable_flashinfer_autotune=False", "v0.14.1", "cli-flag-not-yet"),
    ("decode", CONSUMER, "--swap-space=4", "v0.20.0", "cli-flag-removed"),
    ("decode", CONSUMER, '--attention-config={"use_fp4_indexer_cache":true}', "v0.30.0", "engine-args-invalid"),
])
def test_a_lone_deployment_engine_is_judged_on_its_own(tmp_path, capsys, role, kv, flag, image, rule):
    doc = _engine("solo", role, "deepseek-ai/DeepSeek-V3.2", f"vllm/vllm-openai:{image}",
                  ["--tensor-parallel-size", "8", "--kv-transfer-config", kv, flag])
    code, out = check(tmp_path, capsys, doc)
    assert code == 1 and rules(out, "error") == {rule}, out
    messages = [f["message"] for r in out["results"] for f in r["findings"]]
    assert len(messages) == 1 and messages[0].startswith(f"{role}:"), messages  # once, in the engine's own role
    assert out["notChecked"]


def test_a_lone_engine_with_nothing_wrong_stays_not_checked(tmp_path, capsys):
    doc = _engine("solo", "prefill", "deepseek-ai/DeepSeek-V3.2", "vllm/vllm-openai:v0.18.0",
                  ["--tensor-parallel-size", "8", "--kv-transfer-config", PRODUCER])
    code, out = check(tmp_path, capsys, doc)
    assert code == 3 and out["results"] == [] and out["notChecked"], out


def test_a_lone_engine_is_not_refused_for_what_only_a_pair_shares(tmp_path, capsys):
    """Rules that compare the roles or count what two engines share (GPUs, ports) never run on a lone engine: the
    engine is not its own counterpart."""
    doc = _engine("solo", "decode", "deepseek-ai/DeepSeek-V3.2", "vllm/vllm-openai:v0.25.0",
                  ["--tensor-parallel-size", "8", "--kv-transfer-config", CONSUMER, "--port", "8000"])
    code, out = check(tmp_path, capsys, doc)
    assert code == 3 and not rules(out), out
