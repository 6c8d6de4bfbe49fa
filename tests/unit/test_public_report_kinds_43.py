"""Variants of what the forty-third public-report set (tests/unit/data/public_reports_43) taught, with negative
controls (other models, releases and workload kinds than the set's):

- From 0.34.0 ``NixlConnector`` reads ``kv_connector_extra_config.transfer_mode`` (kv_connector/factory.py):
  ``push`` makes it the push connector, whatever the name says, also as a MultiConnector child; any value but
  ``pull``/``push`` stops the engine; releases before 0.34.0 ignore the key and pull.
- The push connector refuses ``bidirectional_kv_xfer`` at startup (vllm#46473; 0.25.0-0.34.0 sdists).
- The NIXL hash holds more speculative factors than the method and draft model: ``parallel_drafting`` (0.28.0-0.33.x)
  and the draft's effective KV cache dtype (0.28.0+).
"""

from __future__ import annotations

import json

from pdd_operator.vllm.transfer_mode import invalid_option, transfer_mode
from tests.unit.test_turn2_variants import POD_IP, check, rules, workload

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
NIXL = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
PUSH = {"kv_connector": "NixlPushConnector", "kv_role": "kv_both"}
OFFLOAD = {"kv_connector": "OffloadingConnector", "kv_role": "kv_both",
           "kv_connector_extra_config": {"block_size": 64, "cpu_bytes_to_use": 8000000000}}


def _opt(value, base=None, **extra):
    return {**(base or NIXL), "kv_connector_extra_config": {"transfer_mode": value, **extra}}


def _pair(image, kv_p, kv_d, model=LLAMA, args_p=(), args_d=(), kind="StatefulSet"):
    docs = []
    for role, kv, args in (("prefill", kv_p, args_p), ("decode", kv_d, args_d)):
        c = {"name": "vllm", "image": image, "command": ["vllm", "serve"],
             "args": [model, *args, "--kv-transfer-config", json.dumps(kv)], "env": [POD_IP],
             "resources": {"limits": {"nvidia.com/gpu": "1"}}}
        docs.append(workload(f"m-{role}", role, c, kind=kind, app="m"))
    return docs


def test_transfer_mode_by_release():
    assert transfer_mode("NixlConnector", {"transfer_mode": "push"}, (0, 34, 0)) == "push"
    assert transfer_mode("NixlConnector", {"transfer_mode": "push"}, (0, 33, 0)) == "pull"
    assert transfer_mode("NixlConnector", {"transfer_mode": "push"}, None) is None
    assert transfer_mode("NixlConnector", {}, None) == "pull"
    assert transfer_mode("NixlConnector", {"transfer_mode": "Push"}, (0, 34, 0)) is None
    assert transfer_mode("NixlPullConnector", {"transfer_mode": "push"}, (0, 34, 0)) == "pull"
    assert transfer_mode("NixlPushConnector", {}, (0, 34, 0)) == "push"
    assert transfer_mode("MooncakeConnector", {}, (0, 34, 0)) is None
    assert invalid_option("NixlConnector", {"transfer_mode": "write"}) == "write"
    assert invalid_option("NixlPushConnector", {"transfer_mode": "write"}) is None


def test_push_by_option_and_push_by_name_pair_on_0_34_also_inside_a_multiconnector(tmp_path, capsys):
    multi = {"kv_connector": "MultiConnector", "kv_role": "kv_both",
             "kv_connector_extra_config": {"connectors": [_opt("push"), OFFLOAD]}}
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.34.0", multi, PUSH))
    assert "transfer-mode-mismatch" not in rules(out)
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.34.0", multi, NIXL))
    assert code == 1 and "transfer-mode-mismatch" in rules(out, "error")


def test_the_option_is_ignored_before_0_34(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.31.0", _opt("push"), _opt("push"), kind="Deployment"))
    assert "transfer-mode-mismatch" not in rules(out) and "nixl-transfer-mode-ignored" in rules(out, "warning")
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.31.0", _opt("push"), PUSH, kind="Deployment"))
    assert code == 1 and "transfer-mode-mismatch" in rules(out, "error")


def test_an_unknown_release_with_the_option_is_a_warning_not_a_verdict(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair("registry.example.com/team/vllm-custom:latest", _opt("push"), PUSH))
    assert "transfer-mode-mismatch" in rules(out, "warning") and "transfer-mode-mismatch" not in rules(out, "error")


def test_an_invalid_transfer_mode_is_refused_on_0_34_only(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.34.0", _opt("Push"), _opt("Push"),
                                               model="Qwen/Qwen3-0.6B"))
    assert code == 1 and "nixl-transfer-mode-invalid" in rules(out, "error")
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.33.0", _opt("Push"), _opt("Push"),
                                               model="Qwen/Qwen3-0.6B"))
    assert "nixl-transfer-mode-invalid" not in rules(out)
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.34.0", _opt("pull"), NIXL, model="Qwen/Qwen3-0.6B"))
    assert "nixl-transfer-mode-invalid" not in rules(out) and "transfer-mode-mismatch" not in rules(out)


def test_push_with_bidirectional_kv_xfer_is_refused(tmp_path, capsys):
    bidir = _opt("push", bidirectional_kv_xfer=True)  # push by the 0.34 option
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.34.0", bidir, bidir, model="Qwen/Qwen3-0.6B"))
    assert code == 1 and "push-bidirectional-unsupported" in rules(out, "error")
    named = {**PUSH, "kv_connector_extra_config": {"bidirectional_kv_xfer": True}}
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.27.0", named, named, kind="Deployment"))
    assert code == 1 and "push-bidirectional-unsupported" in rules(out, "error")


def test_bidirectional_is_fine_with_pull_and_unestablished_before_0_25(tmp_path, capsys):
    pull = {**NIXL, "kv_connector_extra_config": {"bidirectional_kv_xfer": True}}
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.34.0", pull, pull))
    assert "push-bidirectional-unsupported" not in rules(out)
    named = {**PUSH, "kv_connector_extra_config": {"bidirectional_kv_xfer": True}}
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.24.0", named, named))
    assert "push-bidirectional-unsupported" in rules(out, "warning")
    assert "push-bidirectional-unsupported" not in rules(out, "error")


EAGLE3 = {"model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "method": "eagle3", "num_speculative_tokens": 3}


def _spec(spec):
    return ("--speculative-config", json.dumps(spec))


def test_parallel_drafting_is_hashed_from_0_28_to_0_33(tmp_path, capsys):
    on = _spec({**EAGLE3, "parallel_drafting": True})
    for image, refused in (("vllm/vllm-openai:v0.30.0", True), ("vllm/vllm-openai:v0.34.0", False),
                           ("vllm/vllm-openai:v0.27.0", False)):
        code, out = check(tmp_path, capsys, *_pair(image, NIXL, NIXL, args_p=on, args_d=_spec(EAGLE3)))
        assert ("spec-decode-mismatch" in rules(out, "error")) is refused, image


def test_the_draft_kv_cache_dtype_is_hashed_from_0_28(tmp_path, capsys):
    mtp = {"method": "mtp", "num_speculative_tokens": 1}
    model = "zai-org/GLM-4.5-Air"
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.29.0", NIXL, NIXL, model=model, args_p=_spec(mtp),
                                               args_d=_spec({**mtp, "kv_cache_dtype": "fp8"})))
    assert code == 1 and "spec-decode-mismatch" in rules(out, "error")
    # the same effective dtype: the decode's draft inherits fp8 from --kv-cache-dtype, the prefill's names it
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.29.0", NIXL, NIXL, model=model,
                                               args_p=(*_spec({**mtp, "kv_cache_dtype": "fp8"}), "--kv-cache-dtype", "fp8"),
                                               args_d=(*_spec(mtp), "--kv-cache-dtype", "fp8")))
    assert "spec-decode-mismatch" not in rules(out)


def test_a_pddeployment_selecting_push_by_extra_config_is_told_to_name_the_connector():
    from pdd_operator.compat.engine import evaluate
    from tests.helpers import make_spec

    def found(image, extra, connector="NixlConnector"):
        spec = make_spec(engine={"image": image}, kvTransfer={"connector": connector, "extraConfig": extra})
        return {(f.rule, f.severity) for f in evaluate(spec).findings}

    assert ("transfer-mode-option-managed", "warning") in found("vllm/vllm-openai:v0.34.0", {"transfer_mode": "push"})
    assert not {r for r, _ in found("vllm/vllm-openai:v0.33.0", {"transfer_mode": "push"})} & {
        "transfer-mode-option-managed", "transfer-mode-mismatch"}
    assert "transfer-mode-option-managed" not in {r for r, _ in found("vllm/vllm-openai:v0.34.0", {},
                                                                            "NixlPushConnector")}
    assert ("nixl-transfer-mode-invalid", "error") in found("vllm/vllm-openai:v0.34.0", {"transfer_mode": "write"})
