"""Variants of what the seventeenth public-report set (tests/unit/data/public_reports_17) taught, with negative
controls. The checker's verdicts on the set were right (its blind expectations were not: Dynamo's pre-1.0 example run
on vllm-runtime 1.2.1), but the finding it gave was not what happens: for a ``dynamo.vllm`` worker of a Dynamo >= 1.0
runtime with no ``--kv-transfer-config`` it said the engine "never receives KV ... while every request still
succeeds" and told the user to edit "the prefill container" with kv_producer. Dynamo's worker refuses to start a
prefill worker without the flag (components/src/dynamo/vllm/args.py ``update_dynamo_config_with_engine``: ValueError
'--connector is deprecated and the default is no longer nixl ...'), and the decode worker runs with no connector; the
fix belongs in the worker's args list, with the config that error text names.

Second kind: the set's llm-d entries (ghcr.io/llm-d/llm-d-cuda:v0.5.1) could only be judged by what holds in every vLLM
version, because llm-d's image tags are llm-d's; where llm-d's release notes name the vLLM wheel of an llm-d-cuda tag,
that tag is now read as that vLLM (vllm/wrapped_vllm_versions.json), so version rules and skew between roles apply."""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.versions import version_from_image, wrapped_vllm_version
from tests.unit.test_public_report_kinds_12 import _deployment
from tests.unit.test_turn2_variants import check, rules

NIXL = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})


def _graph(prefill: list[str], decode: list[str], runtime: str = "1.2.1") -> dict:
    """A v1alpha1 DynamoGraphDeployment: one prefill and one decode ``dynamo.vllm`` worker of one GPU each,
    ``prefill`` / ``decode``: the flags after ``--model Qwen/Qwen3-0.6B``."""
    image = f"nvcr.io/nvidia/ai-dynamo/vllm-runtime:{runtime}"

    def worker(flags: list[str]) -> dict:
        return {"componentType": "worker", "replicas": 1, "resources": {"limits": {"gpu": "1"}},
                "extraPodSpec": {"mainContainer": {"image": image, "command": ["python3", "-m", "dynamo.vllm"],
                                                   "args": ["--model", "Qwen/Qwen3-0.6B", *flags]}}}

    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
            "spec": {"services": {"Frontend": {"componentType": "frontend", "replicas": 1,
                                               "extraPodSpec": {"mainContainer": {"image": image}}},
                                  "VllmPrefillWorker": worker(prefill), "VllmDecodeWorker": worker(decode)}}}


def _findings(out: dict, rule: str) -> dict[str, dict]:
    """The ``rule`` findings of a report, by the role their message starts with."""
    return {f["message"].split(":", 1)[0]: f for r in out["results"] for f in r["findings"] if f["rule"] == rule}


@pytest.mark.parametrize(("prefill", "decode"), [
    (["--disaggregation-mode", "prefill"], ["--disaggregation-mode", "decode"]),
    (["--is-prefill-worker"], ["--is-decode-worker"]),  # the deprecated aliases the 0.x examples use
], ids=["disaggregation-mode", "legacy-flags"])
def test_a_dynamo_1x_prefill_worker_without_kv_transfer_config_is_said_to_crash(tmp_path, capsys, prefill, decode):
    code, out = check(tmp_path, capsys, _graph(prefill, decode))
    assert code == 1 and rules(out, "error") == {"kv-connector-missing"}, out
    found = _findings(out, "kv-connector-missing")
    assert set(found) == {"prefill", "decode"}, found
    assert "refuses to start a prefill worker" in found["prefill"]["message"]
    assert "no longer nixl" in found["prefill"]["message"]
    assert "starts with no KV connector" in found["decode"]["message"]
    for f in found.values():
        assert "every request still succeeds" not in f["message"]
        assert f["fix"].startswith(f"Add --kv-transfer-config '{NIXL.replace(' ', '')}'")
        assert "worker's args" in f["fix"] and "container" not in f["fix"]


def test_only_the_role_without_the_flag_is_named(tmp_path, capsys):
    # The Dynamo >= 1.0 check is on the prefill only; a decode given the flag and a prefill without: prefill named.
    code, out = check(tmp_path, capsys, _graph(["--disaggregation-mode", "prefill"],
                                               ["--disaggregation-mode", "decode", "--kv-transfer-config", NIXL]))
    assert code == 1 and set(_findings(out, "kv-connector-missing")) == {"prefill"}, out


def test_with_the_flag_on_both_workers_the_nixl_rules_judge_the_graph(tmp_path, capsys):
    # Negative control: the config Dynamo's error names, on both workers, and a cache dtype that differs.
    code, out = check(tmp_path, capsys,
                      _graph(["--disaggregation-mode", "prefill", "--kv-transfer-config", NIXL],
                             ["--disaggregation-mode", "decode", "--kv-transfer-config", NIXL,
                              "--kv-cache-dtype", "fp8"]))
    assert code == 1 and "kv-connector-missing" not in rules(out), out
    assert "kv-cache-dtype-mismatch" in rules(out, "error"), out


def test_a_pre_1_0_runtime_adds_nixl_itself(tmp_path, capsys):
    # Negative control: before 1.0 dynamo.vllm configured NixlConnector unless told otherwise.
    code, out = check(tmp_path, capsys, _graph(["--is-prefill-worker"], ["--is-decode-worker"], runtime="0.8.0"))
    assert "kv-connector-missing" not in rules(out), out


def test_a_plain_vllm_engine_keeps_the_generic_finding(tmp_path, capsys):
    # Negative control: vllm serve with no connector starts and recomputes; the fix names the container and role.
    code, out = check(tmp_path, capsys, _deployment("prefill", ["Qwen/Qwen3-0.6B"]),
                      _deployment("decode", ["Qwen/Qwen3-0.6B"]))
    found = _findings(out, "kv-connector-missing")
    assert code == 1 and set(found) == {"prefill", "decode"}, out
    assert "every request still succeeds" in found["prefill"]["message"]
    assert '"kv_role":"kv_producer"' in found["prefill"]["fix"] and "container" in found["prefill"]["fix"]


# --- llm-d's own image tags: the vLLM their release notes name -------------------------------------------------------
# The set's llm-d entries run ghcr.io/llm-d/llm-d-cuda:v0.5.1, whose vLLM no public page here names: the checker warns
# vllm-version-unknown and judges only what holds in every version. llm-d's v0.8.0 and v0.9.0 release component
# summaries do name the vLLM wheel in llm-d-cuda (0.23.0, 0.26.0): those two tags are read as that vLLM, no other.

LLMD = "ghcr.io/llm-d/llm-d-cuda"


@pytest.mark.parametrize(("tag", "vllm"), [("v0.9.0", (0, 26, 0)), ("v0.8.0", (0, 23, 0))])
def test_llmd_cuda_tags_its_releases_document_give_their_vllm(tag, vllm):
    assert version_from_image(f"{LLMD}:{tag}") == vllm
    assert "Component Summary" in wrapped_vllm_version(f"{LLMD}:{tag}")[1]


@pytest.mark.parametrize("tag", ["v0.8.1", "v0.7.0", "v0.5.1", "v0.4.0", "latest"])
def test_other_llmd_cuda_tags_stay_unknown(tag):
    # v0.8.1 is only the "previous version" column of v0.9.0's table: not a row that names its own vLLM.
    assert version_from_image(f"{LLMD}:{tag}") is None


def _llmd_pair(prefill_tag: str, decode_tag: str) -> list[dict]:
    return [_deployment(role, ["Qwen/Qwen3-0.6B", "--kv-transfer-config", NIXL], image=f"{LLMD}:{tag}")
            for role, tag in (("prefill", prefill_tag), ("decode", decode_tag))]


def test_two_llmd_releases_in_one_pair_are_refused_for_their_vllm_skew(tmp_path, capsys):
    # vLLM 0.23.0 against 0.26.0: the version string is a factor of the compatibility hash (0.13.0 on).
    code, out = check(tmp_path, capsys, *_llmd_pair("v0.8.0", "v0.9.0"))
    assert code == 1 and "vllm-version-mismatch" in rules(out, "error"), out


def test_one_llmd_release_on_both_roles_is_a_known_version(tmp_path, capsys):
    # Negative control: the same documented tag on both roles, no version warning left.
    code, out = check(tmp_path, capsys, *_llmd_pair("v0.9.0", "v0.9.0"))
    assert code == 0 and not {"vllm-version-mismatch", "vllm-version-unknown"} & rules(out), out
