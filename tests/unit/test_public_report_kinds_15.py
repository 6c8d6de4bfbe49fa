"""Variants of what the fifteenth public-report set (tests/unit/data/public_reports_15) showed, with negative controls.

The set scored 15/15 blind; its one false finding was a warning: ``--revision main`` on one role against no
``--revision`` on the other drew ``model-revision-mismatch`` ("Model revisions differ: prefill default (main), decode
main"), though an unset revision is the Hub's default branch (huggingface_hub ``DEFAULT_REVISION``, put in place of
``revision=None`` by ``hf_hub_download`` and ``snapshot_download``), so both roles load the same snapshot. The rule now
compares the revisions each role loads (:func:`pdd_operator.compat.rules.must_match.effective_revision`); a branch
against a pinned commit, two different commits and ModelScope's own default are judged as before.
"""

from __future__ import annotations

import pytest

from pdd_operator.compat.pair import RoleConfig
from pdd_operator.compat.rules.must_match import HUB_DEFAULT_REVISION, effective_revision
from tests.unit.test_turn2_variants import KV, check, container, pd, rules

RULE = "model-revision-mismatch"


def _lws(role: str, args: list[str], image: str) -> dict:
    c = container(["microsoft/Phi-4-mini-instruct", *args, "--kv-transfer-config", KV], image=image)
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": f"phi-{role}", "labels": {"app": "phi", "role": role}},
            "spec": {"leaderWorkerTemplate": {"size": 1, "workerTemplate": {
                "metadata": {"labels": {"app": "phi", "role": role}}, "spec": {"containers": [c]}}}}}


def _dynamo(p_args: list[str], d_args: list[str]) -> dict:
    def component(kind: str, extra: list[str]) -> dict:
        args = ["-m", "dynamo.vllm", "--model", "Qwen/Qwen3-32B", "--disaggregation-mode", kind,
                "--kv-transfer-config", KV, *extra]
        return {"name": kind, "type": kind, "podTemplate": {"spec": {"containers": [
            {"name": "main", "image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.1", "command": ["python3"],
             "args": args}]}}}
    return {"apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
            "spec": {"components": [component("prefill", p_args), component("decode", d_args)]}}


def test_revision_main_on_the_decode_only_is_no_difference(tmp_path, capsys):
    # vLLM 0.33 Deployment pair: the decode pins main, the prefill loads the default branch, which is main.
    docs = pd("q", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV, "--revision", "main"],
              image="vllm/vllm-openai:v0.33.0")
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and RULE not in rules(out), out


def test_revision_main_on_a_leaderworkerset_prefill_only_is_no_difference(tmp_path, capsys):
    # Another orchestrator, another version (0.24), the other role pinned to main.
    code, out = check(tmp_path, capsys, _lws("prefill", ["--revision", "main"], "vllm/vllm-openai:v0.24.0"),
                      _lws("decode", [], "vllm/vllm-openai:v0.24.0"))
    assert code == 0 and RULE not in rules(out), out


def test_revision_main_on_a_dynamo_worker_only_is_no_difference(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _dynamo([], ["--revision", "main"]))
    assert code == 0 and RULE not in rules(out), out


def test_offline_hub_unset_and_main_resolve_to_one_snapshot(tmp_path, capsys):
    # HF_HUB_OFFLINE=1: vllm/engine/arg_utils.py swaps the id for get_model_path(model, revision), and revision None
    # and "main" name the same refs/main snapshot, so the hashed model path is equal too.
    offline = [{"name": "HF_HUB_OFFLINE", "value": "1"}]
    docs = pd("q", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV, "--revision", "main"],
              image="vllm/vllm-openai:v0.32.0", env=offline)
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and RULE not in rules(out), out


# --- negative controls: what still differs ---------------------------------------------------------------------------


def test_main_against_a_pinned_commit_still_warns(tmp_path, capsys):
    # main may or may not be that commit today: a warning, never a refusal.
    docs = pd("q", ["--kv-transfer-config", KV, "--revision", "main"],
              ["--kv-transfer-config", KV, "--revision", "8e4a3f1c0d2b"], image="vllm/vllm-openai:v0.33.0")
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and RULE in rules(out, "warning"), out


def test_unset_against_a_pinned_commit_still_warns(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _lws("prefill", [], "vllm/vllm-openai:v0.24.0"),
                      _lws("decode", ["--revision", "8e4a3f1c0d2b"], "vllm/vllm-openai:v0.24.0"))
    assert code == 0 and RULE in rules(out, "warning"), out


def test_two_pinned_commits_are_still_refused(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _dynamo(["--revision", "8e4a3f1c0d2b"], ["--revision", "0a1b2c3d4e5f"]))
    assert code == 1 and RULE in rules(out, "error"), out


def test_modelscope_default_is_not_taken_for_the_hubs_main(tmp_path, capsys):
    # VLLM_USE_MODELSCOPE: the weights come from ModelScope, whose default branch is not "main".
    modelscope = [{"name": "VLLM_USE_MODELSCOPE", "value": "True"}]
    docs = pd("q", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV, "--revision", "main"],
              image="vllm/vllm-openai:v0.33.0", env=modelscope)
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and RULE in rules(out, "warning"), out


@pytest.mark.parametrize("revision, env, loads", [
    (None, {}, HUB_DEFAULT_REVISION), ("main", {}, "main"), ("8e4a3f1c0d2b", {}, "8e4a3f1c0d2b"),
    (None, {"VLLM_USE_MODELSCOPE": "1"}, None), ("v2.0", {"VLLM_USE_MODELSCOPE": "1"}, "v2.0"),
])
def test_effective_revision(revision, env, loads):
    role = RoleConfig(role="decode", revision=revision, env=env)
    assert effective_revision(role) == loads
