"""Issue 9: a vLLM version the tables do not know (0.35.0, an unreleased 0.34.1, a development build after 0.34) is
judged with the newest known rules and carries a warning that the rules were written from vLLM's code up to 0.34.0
(``vllm-version-unverified`` for a release, a sentence of ``vllm-version-unknown`` for a development build).
Variants: a Deployment pair, a LeaderWorkerSet pair, a PDDeployment (``spec.engine.vllmVersion``). 0.34.0 is a known
release since its sdist was read against 0.33.0 (docs/vllm-source-audit.md "After 0.33.0"): no warning."""

from __future__ import annotations

import pytest

from pdd_operator.vllm.versions import KNOWN_RELEASES, NEWEST_RELEASE
from tests.unit.test_turn2_variants import KV, check, container, pd, rules

FP8 = ["--kv-cache-dtype", "fp8"]


def _message(out, rule) -> str:
    return " ".join(f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == rule)


@pytest.mark.parametrize("tag", ["v0.35.0", "v0.34.1", "v0.35.2"])
def test_a_release_after_the_tables_is_judged_with_the_newest_rules_and_warned(tmp_path, capsys, tag):
    code, out = check(tmp_path, capsys, *pd("m", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV],
                                            image=f"vllm/vllm-openai:{tag}"))
    assert code == 0 and "vllm-version-unverified" in rules(out, "warning"), out
    assert "judged with the newest rules, those of 0.34.0" in _message(out, "vllm-version-unverified"), out
    # the newest rules still refuse what 0.34 refuses (the compat hash takes the raw cache dtype string)
    code, out = check(tmp_path, capsys, *pd("m", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV, *FP8],
                                            image=f"vllm/vllm-openai:{tag}"))
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error"), out


@pytest.mark.parametrize("tag", ["v0.34.0", "v0.33.0", "v0.20.2", "v0.10.1"])
def test_a_known_release_is_not_warned(tmp_path, capsys, tag):
    code, out = check(tmp_path, capsys, *pd("m", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV],
                                            image=f"vllm/vllm-openai:{tag}"))
    assert "vllm-version-unverified" not in rules(out), out


@pytest.mark.parametrize("tag", ["0.35.0.dev5-gabc1234", "0.34.1.dev12-g1234abc"])
def test_a_development_build_after_0_34_says_the_rules_end_there(tmp_path, capsys, tag):
    code, out = check(tmp_path, capsys, *pd("m", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV, *FP8],
                                            image=f"vllm/vllm-openai:{tag}"))
    assert "The rules were written from vLLM's NIXL code up to 0.34.0" in _message(out, "vllm-version-unknown"), out
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error"), out  # judged as the newest known


def test_a_development_build_of_an_older_line_does_not_say_so(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *pd("m", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV],
                                            image="vllm/vllm-openai:0.20.3.dev4-gabc1234"))
    assert "written from vLLM's NIXL code up to" not in _message(out, "vllm-version-unknown"), out


def test_leaderworkerset_on_0_34(tmp_path, capsys):
    def lws(role):
        labels = {"app": "m", "llm-d.ai/role": role}
        c = container(["Qwen/Qwen3-8B", "--kv-transfer-config", KV], image="vllm/vllm-openai:v0.34.0")
        return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                "metadata": {"name": f"m-{role}", "labels": labels},
                "spec": {"leaderWorkerTemplate": {"size": 1, "workerTemplate": {
                    "metadata": {"labels": labels}, "spec": {"containers": [c]}}}}}
    code, out = check(tmp_path, capsys, lws("prefill"), lws("decode"))
    assert code == 0 and "vllm-version-unverified" not in rules(out), out


def test_pddeployment_vllm_version_0_34(tmp_path, capsys):
    doc = {"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment", "metadata": {"name": "l"},
           "spec": {"model": {"name": "meta-llama/Llama-3.1-8B-Instruct", "hfArchitecture": "LlamaForCausalLM"},
                    "engine": {"image": "registry.example/vllm:custom", "vllmVersion": "0.34.0"},
                    "prefill": {"replicas": 1}, "decode": {"replicas": 1}}}
    code, out = check(tmp_path, capsys, doc)
    assert "vllm-version-unverified" not in rules(out), out


def test_known_releases_end_at_0_34_0():
    assert NEWEST_RELEASE == (0, 34, 0) and (0, 35, 0) not in KNOWN_RELEASES and (0, 34, 1) not in KNOWN_RELEASES
