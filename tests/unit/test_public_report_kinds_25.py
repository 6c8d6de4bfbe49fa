"""Variants of what the twenty-fifth public-report set (tests/unit/data/public_reports_25) taught, with negative
controls.

Routed-expert capture next to a NIXL connector (``return-routed-experts-with-nixl``): ``--enable-return-routed-experts``
(routing replay for RL rollouts) makes vLLM refuse to build the engine's config whenever a KV connector is set, from
0.22.0 on (vllm/config/vllm.py: 0.22-0.24 "incompatible with KV connectors", 0.32-0.33 "incompatible with
NixlConnector; PD auxiliary output is not supported"). The checker did not read the flag, so the recipes' Kimi-K2.5
pd_cluster with the flag on its decode passed. The flag is now a boolean the parser knows (it takes no value) and a rule
of its own (:mod:`pdd_operator.compat.rules.aux_output`).
"""

from __future__ import annotations

from pdd_operator.compat.pair import role_from_container
from tests.unit.test_turn2_variants import check, container, pd, rules, workload

KV_P = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
KV_D = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'
MOE = "Qwen/Qwen3-30B-A3B"
RULE = "return-routed-experts-with-nixl"


def _pair(p_extra=(), d_extra=(), image="vllm/vllm-openai:v0.33.0", model=MOE, kind="Deployment"):
    docs = pd("moe", ["--kv-transfer-config", KV_P, *p_extra], ["--kv-transfer-config", KV_D, *d_extra], model=model,
              image=image)
    if kind != "Deployment":
        for d in docs:
            d["kind"] = kind
    return docs


def test_the_flag_on_the_decode_of_a_v033_pair_is_an_error(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair(d_extra=["--enable-return-routed-experts"]))
    assert code == 1 and RULE in rules(out, "error")
    finding = next(f for r in out["results"] for f in r["findings"] if f["rule"] == RULE)
    assert finding["message"].startswith("decode:")


def test_the_flag_on_the_prefill_of_statefulsets_on_v022_is_an_error(tmp_path, capsys):
    # 0.22.0 refuses it with any KV transfer instance (the first release read with the check)
    code, out = check(tmp_path, capsys, *_pair(p_extra=["--enable-return-routed-experts"],
                                                image="vllm/vllm-openai:v0.22.0", kind="StatefulSet"))
    assert code == 1 and RULE in rules(out, "error")


def test_the_flag_on_a_leaderworkerset_mla_pair_on_v024_is_an_error(tmp_path, capsys):
    docs = []
    for role, kv in (("prefill", KV_P), ("decode", KV_D)):
        c = container(["deepseek-ai/DeepSeek-V3-0324", "--tensor-parallel-size", "8", "--enable-expert-parallel",
                       "--kv-transfer-config", kv, *(["--enable-return-routed-experts"] if role == "decode" else [])],
                      image="vllm/vllm-openai:v0.24.0", gpus=8)
        w = workload(f"dsv3-{role}", role, c)
        docs.append({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                     "metadata": {"name": f"dsv3-{role}"},
                     "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 1,
                                                                      "workerTemplate": w["spec"]["template"]}}})
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and RULE in rules(out, "error")


def test_before_v022_the_engine_starts_and_nothing_is_reported(tmp_path, capsys):
    # 0.21.0 checks PP/PCP/DCP/async scheduling only, no KV connector: no promise of a failure
    _, out = check(tmp_path, capsys, *_pair(d_extra=["--enable-return-routed-experts"],
                                             image="vllm/vllm-openai:v0.21.0"))
    assert RULE not in rules(out)


def test_without_the_flag_or_with_its_negation_nothing_is_reported(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair())
    assert code == 0 and RULE not in rules(out)
    code, out = check(tmp_path, capsys, *_pair(d_extra=["--no-enable-return-routed-experts"]))
    assert code == 0 and RULE not in rules(out)


def test_the_flag_takes_no_value_so_the_flag_after_it_is_still_read():
    c = container([MOE, "--enable-return-routed-experts", "--block-size", "32", "--kv-transfer-config", KV_D])
    role = role_from_container("decode", c, {}, version_text="0.33.0")
    assert role.aux_outputs == ("--enable-return-routed-experts",)
    assert role.block_size == 32 and role.kv_transfer.get("kv_role") == "kv_consumer"


def test_an_unknown_version_is_never_passed_silently_as_valid(tmp_path, capsys):
    # refused from 0.22 on, started before: with the version unknown the pair is not checked (exit 3), naming the rule
    code, out = check(tmp_path, capsys, *_pair(d_extra=["--enable-return-routed-experts"],
                                                image="vllm/vllm-openai:latest"))
    assert code == 3 and RULE in " ".join(f["message"] for r in out["results"] for f in r["findings"])
