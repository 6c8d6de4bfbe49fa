"""Variants of what the sixty-seventh public-report set (tests/unit/data/public_reports_67, upgrades) taught, with
negative controls: Dynamo's vLLM worker (``python -m dynamo.vllm``) has flags of its own, judged on the Dynamo release
of its runtime image (:mod:`pdd_operator.compat.dynamo_worker_flags`, read in the ai-dynamo wheels 0.6.0-1.6.1).

- Role flags: ``--is-prefill-worker`` / ``--is-decode-worker`` are gone from 1.4.0 (``cli-flag-removed``),
  ``--disaggregation-mode`` comes in 1.0.0 and ``--is-decode-worker`` in 0.6.1 (``cli-flag-not-yet``): the worker
  stops with 'unrecognized arguments'.
- Connector flags (``dynamo-connector-flag``): before 1.0.0 a ``--kv-transfer-config`` beside the worker's
  ``--connector`` (default nixl) raises, ``--connector none`` excepted from 0.8.0; from 1.0.0 any ``--connector`` or
  ``DYN_CONNECTOR`` raises.

Only an image that names its Dynamo release is judged; vLLM's own images and unnamed tags are not.
"""

from __future__ import annotations

import pytest

from pdd_operator.compat.dynamo_worker_flags import connector_refusal, flag_refusals
from tests.unit.test_turn2_variants import KV, check, rules

RUNTIME = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:"
LEGACY = (["--is-prefill-worker"], ["--is-decode-worker"])
MODE = (["--disaggregation-mode", "prefill"], ["--disaggregation-mode", "decode"])
WITH_KV = ["--kv-transfer-config", KV]


def _v1alpha1(image, p_args, d_args, model="meta-llama/Llama-3.1-8B-Instruct", tp="2", env=()):
    def worker(sub, role_args):
        args = ["--model", model, "--tensor-parallel-size", tp, *role_args]
        return {"componentType": "worker", "subComponentType": sub, "replicas": 1, "resources": {"limits": {"gpu": tp}},
                "extraPodSpec": {"mainContainer": {"image": image, "command": ["python3", "-m", "dynamo.vllm"],
                                                   "args": args, "env": [dict(e) for e in env]}}}
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
            "spec": {"services": {"Frontend": {"componentType": "frontend", "replicas": 1,
                                               "extraPodSpec": {"mainContainer": {"image": image}}},
                                  "prefill": worker("prefill", p_args), "decode": worker("decode", d_args)}}}


def _v1beta1(image, p_args, d_args, model="Qwen/Qwen3-32B"):
    def component(kind, role_args):
        return {"name": kind, "type": kind, "podTemplate": {"spec": {"containers": [
            {"name": "main", "image": image, "command": ["python3"],
             "args": ["-m", "dynamo.vllm", "--model", model, *role_args]}]}}}
    return {"apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
            "spec": {"components": [component("prefill", p_args), component("decode", d_args)]}}


# --- role flags by Dynamo release ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("tag", "refused"), [("1.4.0", True), ("1.4.2", True), ("1.6.1", True), ("1.4.0-cuda13", True),
                                              ("1.3.1", False), ("1.0.0", False), ("0.9.1", False)])
def test_legacy_role_flags_end_with_dynamo_1_4(tmp_path, capsys, tag, refused):
    kv = WITH_KV if tag >= "1" else []
    code, out = check(tmp_path, capsys, _v1alpha1(RUNTIME + tag, [*LEGACY[0], *kv], [*LEGACY[1], *kv]))
    assert ("cli-flag-removed" in rules(out, "error")) is refused, out
    assert (code == 1) is refused, out


@pytest.mark.parametrize(("tag", "refused"), [("0.9.1", True), ("0.9.0", True), ("0.8.1", True), ("0.7.0", True),
                                              ("1.0.0", False), ("1.1.0", False), ("1.4.0", False)])
def test_disaggregation_mode_begins_with_dynamo_1_0(tmp_path, capsys, tag, refused):
    kv = WITH_KV if tag >= "1" else []
    code, out = check(tmp_path, capsys, _v1beta1(RUNTIME + tag, [*MODE[0], *kv], [*MODE[1], *kv]))
    assert ("cli-flag-not-yet" in rules(out, "error")) is refused, out
    assert (code == 1) is refused, out


def test_decode_role_flag_is_not_in_dynamo_0_6():
    assert [(r.flag, r.kind) for r in flag_refusals({"--is-decode-worker": True}, (0, 6, 0))] == [
        ("--is-decode-worker", "not-yet")]
    assert flag_refusals({"--is-prefill-worker": True}, (0, 6, 0)) == []
    assert flag_refusals({"--is-decode-worker": True}, (0, 7, 0)) == []


def test_role_flags_on_an_image_without_a_dynamo_release_are_not_judged(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _v1alpha1("registry.example.com/dynamo-vllm:custom",
                                                  [*LEGACY[0], *WITH_KV], [*LEGACY[1], *WITH_KV]))
    assert not {"cli-flag-removed", "cli-flag-not-yet"} & rules(out), out


def test_one_worker_upgraded_with_its_old_flag_is_named_for_that_worker_only(tmp_path, capsys):
    doc = _v1alpha1(RUNTIME + "1.4.0", [*MODE[0], *WITH_KV], [*LEGACY[1], *WITH_KV], model="Qwen/Qwen3-8B", tp="1")
    code, out = check(tmp_path, capsys, doc)
    messages = [f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == "cli-flag-removed"]
    assert code == 1 and len(messages) == 1 and messages[0].startswith("decode:") and "--is-decode-worker" in messages[0]


# --- connector flags by Dynamo release -------------------------------------------------------------------------------


@pytest.mark.parametrize(("tag", "connector", "refused"), [
    ("0.9.1", None, True), ("0.8.1", None, True), ("0.7.0", None, True), ("0.6.0", None, True),
    ("0.9.1", "nixl", True), ("0.9.1", "none", False), ("0.8.1", "null", False), ("0.8.0", "none", False),
    ("0.7.0", "none", True)])
def test_kv_transfer_config_beside_the_pre_1_0_connector(tmp_path, capsys, tag, connector, refused):
    extra = ["--connector", connector] if connector else []
    p_role = ["--is-prefill-worker"]
    d_role = ["--is-decode-worker"] if tag != "0.6.0" else []
    code, out = check(tmp_path, capsys, _v1alpha1(RUNTIME + tag, [*p_role, *extra, *WITH_KV], [*d_role, *extra, *WITH_KV],
                                                  model="Qwen/Qwen3-32B"))
    assert ("dynamo-connector-flag" in rules(out, "error")) is refused, out


@pytest.mark.parametrize(("tag", "args", "env", "refused"), [
    ("1.0.0", ["--connector", "nixl"], (), True), ("1.3.1", ["--connector", "nixl", *WITH_KV], (), True),
    ("1.4.0", ["--connector", "none", *WITH_KV], (), True),
    ("1.3.1", WITH_KV, ({"name": "DYN_CONNECTOR", "value": "nixl"},), True),
    ("1.0.0", WITH_KV, (), False), ("1.6.1", WITH_KV, (), False), ("0.9.1", ["--connector", "nixl"], (), False)])
def test_explicit_connector_flag_from_dynamo_1_0(tmp_path, capsys, tag, args, env, refused):
    p_role, d_role = MODE if tag >= "1" else LEGACY
    code, out = check(tmp_path, capsys, _v1alpha1(RUNTIME + tag, [*p_role, *args], [*d_role, *args], env=env,
                                                  model="deepseek-ai/DeepSeek-R1-Distill-Llama-70B", tp="4"))
    assert ("dynamo-connector-flag" in rules(out, "error")) is refused, out
    if refused:
        assert code == 1, out


def test_connector_refusal_reads_the_release_boundaries():
    assert connector_refusal({}, {}, (1, 0, 0)) is None
    assert connector_refusal({"--kv-transfer-config": KV}, {}, (0, 9, 1)) is not None
    assert connector_refusal({"--kv-transfer-config": KV, "--connector": "none"}, {}, (0, 8, 1)) is None
    assert connector_refusal({"--connector": "nixl"}, {}, (0, 9, 1)) is None
    # a bare --connector is an empty list: let through from 0.8.0, refused by 0.6.0/0.7.0 (``is not None``)
    assert connector_refusal({"--kv-transfer-config": KV, "--connector": True}, {}, (0, 9, 1)) is None
    assert connector_refusal({"--kv-transfer-config": KV, "--connector": True}, {}, (0, 6, 0)) is not None
