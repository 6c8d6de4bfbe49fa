"""The NIXL guards of vLLM 0.31-0.34 that no rule covered before (issue 9), with negative controls.

- ``packed-kv-pp-push-non-mla`` (0.31+): a PP push prefill with a block-outermost ``VLLM_KV_CACHE_LAYOUT`` on a
  model that is not MLA ("PP push with packed KV caches requires MLA").
- ``packed-kv-rows-differ`` (0.33+): the handshake opener packs its MLA rows and its peer does not ("Packed KV block
  rows differ between P and D").
- ``draft-kv-mla-target-tp`` (0.33+): a GQA draft under an MLA target with the opener's TP below its peer's, push
  with unequal TP, or DCP ("NIXL head-sharded draft KV under an MLA target requires local TP >= remote TP and no DCP").
- ``multi-connector-mem-pools`` (0.31+): two MultiConnector children with ``custom_mem_pool`` ("Multiple connectors
  provide a KV cache memory pool").

Sources and the table of every 0.31-0.34 guard: :mod:`pdd_operator.compat.rules.packed_kv` and the modules named in
its docstring.
"""

from __future__ import annotations

import json

import pytest

from tests.unit.test_turn2_variants import check, container, rules, workload

PUSH_P = '{"kv_connector":"NixlPushConnector","kv_role":"kv_producer"}'
PUSH_D = '{"kv_connector":"NixlPushConnector","kv_role":"kv_consumer"}'
PULL_P = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
PULL_D = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'
MLA = "deepseek-ai/DeepSeek-V3"
PACKED_PP = "packed-kv-pp-push-non-mla"
ROWS = "packed-kv-rows-differ"
DRAFT = "draft-kv-mla-target-tp"
POOLS = "multi-connector-mem-pools"


def _layout(value):
    return [{"name": "VLLM_KV_CACHE_LAYOUT", "value": value}] if value else []


def _pair(model, version, p_args, d_args, p_gpus=1, d_gpus=1, kind="Deployment", p_env=(), d_env=()):
    image = f"vllm/vllm-openai:v{version}"
    return [workload("pd-prefill", "prefill", container([model, *p_args], image=image, gpus=p_gpus, env=p_env),
                     kind=kind, app="pd"),
            workload("pd-decode", "decode", container([model, *d_args], image=image, gpus=d_gpus, env=d_env),
                     kind=kind, app="pd")]


def _lws(model, version, p_args, d_args, p_gpus, d_gpus, p_env=(), d_env=()):
    docs = []
    for role, args, gpus, env in (("prefill", p_args, p_gpus, p_env), ("decode", d_args, d_gpus, d_env)):
        c = container([model, *args], image=f"vllm/vllm-openai:v{version}", gpus=gpus, env=env)
        template = {"metadata": {"labels": {"app": "pd", "llm-d.ai/role": role}}, "spec": {"containers": [c]}}
        docs.append({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                     "metadata": {"name": f"pd-{role}", "labels": {"app": "pd", "llm-d.ai/role": role}},
                     "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 1, "workerTemplate": template}}})
    return docs


def _dynamo(model, p_args, d_args, p_gpus, d_gpus, p_env=(), d_env=(), image="vllm/vllm-openai:v0.34.0"):
    def worker(sub, args, gpus, env):
        main = {"image": image, "command": ["python3", "-m", "dynamo.vllm"],
                "args": ["--model", model, "--disaggregation-mode", sub, *args], "env": list(env)}
        return {"componentType": "worker", "subComponentType": sub, "replicas": 1,
                "resources": {"limits": {"gpu": str(gpus)}}, "extraPodSpec": {"mainContainer": main}}
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
            "spec": {"services": {"VllmPrefillWorker": worker("prefill", p_args, p_gpus, p_env),
                                  "VllmDecodeWorker": worker("decode", d_args, d_gpus, d_env)}}}


def _pddeployment(spec: dict) -> dict:
    return {"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment", "metadata": {"name": "p"}, "spec": spec}


# --- 1. PP push with a packed layout on a non-MLA model ------------------------------------------------------------


def _pp_push(model, version, layout, pp=2, tp=1, kind="Deployment", p_kv=PUSH_P, d_kv=PUSH_D):
    p = ["--pipeline-parallel-size", str(pp), "--tensor-parallel-size", str(tp), "--kv-transfer-config", p_kv]
    d = ["--tensor-parallel-size", str(tp), "--kv-transfer-config", d_kv]
    env = _layout(layout)
    return _pair(model, version, p, d, pp * tp, tp, kind, p_env=env, d_env=env)


@pytest.mark.parametrize(("model", "version", "layout", "kind"), [
    ("meta-llama/Llama-3.1-70B-Instruct", "0.31.0", "BLHNC", "Deployment"),
    ("Qwen/Qwen3-32B", "0.33.0", "BLNHC", "StatefulSet"),
    ("Qwen/Qwen3-30B-A3B", "0.34.0", "BHLNC", "Deployment"),
])
def test_a_packed_pp_push_prefill_of_a_gqa_model_is_an_error(tmp_path, capsys, model, version, layout, kind):
    code, out = check(tmp_path, capsys, *_pp_push(model, version, layout, kind=kind))
    assert code == 1 and PACKED_PP in rules(out, "error"), out


def test_a_packed_pp_push_prefill_in_a_leaderworkerset_is_an_error(tmp_path, capsys):
    p = ["--pipeline-parallel-size", "2", "--kv-transfer-config", PUSH_P]
    d = ["--kv-transfer-config", PUSH_D]
    code, out = check(tmp_path, capsys, *_lws("meta-llama/Llama-3.1-8B-Instruct", "0.32.0", p, d, 2, 1,
                                              p_env=_layout("BLHNC"), d_env=_layout("BLHNC")))
    assert code == 1 and PACKED_PP in rules(out, "error"), out


def test_a_packed_pp_push_prefill_on_a_pddeployment_is_an_error(tmp_path, capsys):
    spec = {"model": {"name": "meta-llama/Llama-3.1-8B-Instruct"}, "engine": {"image": "vllm/vllm-openai:v0.34.0"},
            "kvTransfer": {"connector": "NixlPushConnector"}, "kvCache": {"layout": "BLHNC"},
            "prefill": {"replicas": 1, "pipelineParallelSize": 2}, "decode": {"replicas": 1}}
    code, out = check(tmp_path, capsys, _pddeployment(spec))
    assert code == 1 and PACKED_PP in rules(out, "error"), out


@pytest.mark.parametrize(("model", "version", "layout", "pp"), [
    ("meta-llama/Llama-3.1-8B-Instruct", "0.30.0", "BLHNC", 2),   # the release before: no packed path
    ("meta-llama/Llama-3.1-8B-Instruct", "0.34.0", "LBHNC", 2),   # layer-outermost
    ("meta-llama/Llama-3.1-8B-Instruct", "0.34.0", None, 2),      # NIXL's own LBHNC
    ("meta-llama/Llama-3.1-8B-Instruct", "0.34.0", "BLHNC", 1),   # no PP: whole rows
    (MLA, "0.34.0", "BLHNC", 2),                                  # MLA: what the guard allows
])
def test_other_pp_push_layouts_are_not_this_fault(tmp_path, capsys, model, version, layout, pp):
    code, out = check(tmp_path, capsys, *_pp_push(model, version, layout, pp=pp))
    assert PACKED_PP not in rules(out), out


def test_the_pull_connector_is_refused_by_its_own_rule_not_this(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pp_push("meta-llama/Llama-3.1-8B-Instruct", "0.34.0", "BLHNC",
                                                  p_kv=PULL_P, d_kv=PULL_D))
    assert "pp-pull-unsupported" in rules(out, "error") and PACKED_PP not in rules(out), out


def test_an_unknown_model_family_is_a_warning(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pp_push("acme/house-model-7b", "0.34.0", "BLHNC"))
    assert PACKED_PP in rules(out, "warning") and PACKED_PP not in rules(out, "error"), out


# --- 3. packed MLA rows that differ between P and D ----------------------------------------------------------------


def _rows(version, p_layout, d_layout, model=MLA, kv=(PULL_P, PULL_D), kind="Deployment", extra=()):
    p = ["--tensor-parallel-size", "8", *extra, "--kv-transfer-config", kv[0]]
    d = ["--tensor-parallel-size", "8", *extra, "--kv-transfer-config", kv[1]]
    return _pair(model, version, p, d, 8, 8, kind, p_env=_layout(p_layout), d_env=_layout(d_layout))


@pytest.mark.parametrize(("version", "p_layout", "d_layout", "kv", "kind"), [
    ("0.33.0", "LBHNC", "BLHNC", (PULL_P, PULL_D), "Deployment"),     # pull: the decode opens and packs
    ("0.34.0", None, "BLNHC", (PULL_P, PULL_D), "StatefulSet"),       # the prefill's MLA default is layer-outermost
    ("0.34.0", "BLHNC", "LBNHC", (PUSH_P, PUSH_D), "Deployment"),     # push: the prefill opens and packs
])
def test_packed_rows_on_the_opener_only_are_an_error(tmp_path, capsys, version, p_layout, d_layout, kv, kind):
    code, out = check(tmp_path, capsys, *_rows(version, p_layout, d_layout, kv=kv, kind=kind))
    assert code == 1 and ROWS in rules(out, "error"), out


def test_packed_rows_on_a_dynamo_decode_only_are_an_error(tmp_path, capsys):
    args = ["--tensor-parallel-size", "8", "--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both"}']
    doc = _dynamo(MLA, args, args, 8, 8, d_env=_layout("BLHNC"))
    code, out = check(tmp_path, capsys, doc)
    assert code == 1 and ROWS in rules(out, "error"), out


@pytest.mark.parametrize(("version", "p_layout", "d_layout", "kv", "model"), [
    ("0.32.0", "LBHNC", "BLHNC", (PULL_P, PULL_D), MLA),                                  # the release before
    ("0.34.0", "BLHNC", "BLHNC", (PULL_P, PULL_D), MLA),                                  # both packed alike
    ("0.34.0", "BLHNC", "LBHNC", (PULL_P, PULL_D), MLA),                                  # the peer packs: split
    ("0.34.0", "LBHNC", "LBHNC", (PULL_P, PULL_D), MLA),                                  # neither packs
    ("0.34.0", "BLHNC", "LBHNC", (PUSH_P, PUSH_D), "meta-llama/Llama-3.1-8B-Instruct"),   # not MLA
])
def test_other_layout_pairs_are_not_this_fault(tmp_path, capsys, version, p_layout, d_layout, kv, model):
    code, out = check(tmp_path, capsys, *_rows(version, p_layout, d_layout, kv=kv, model=model))
    assert ROWS not in rules(out), out


# --- 4. a GQA draft under an MLA target ------------------------------------------------------------------------------

EAGLE = json.dumps({"method": "eagle3", "model": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 3})
MTP = json.dumps({"method": "deepseek_mtp", "num_speculative_tokens": 1})
UNKNOWN_DRAFT = json.dumps({"method": "eagle3", "model": "acme/eagle-head", "num_speculative_tokens": 3})


def _draft(version, ptp, dtp, spec=EAGLE, kv=(PULL_P, PULL_D), kind="Deployment", d_extra=(), env=()):
    p = ["--tensor-parallel-size", str(ptp), "--speculative-config", spec, "--kv-transfer-config", kv[0]]
    d = ["--tensor-parallel-size", str(dtp), *d_extra, "--speculative-config", spec, "--kv-transfer-config", kv[1]]
    return _pair(MLA, version, p, d, ptp, dtp, kind, p_env=env, d_env=env)


@pytest.mark.parametrize(("version", "ptp", "dtp", "kv", "kind"), [
    ("0.33.0", 8, 4, (PULL_P, PULL_D), "Deployment"),      # pull: decode TP below prefill TP
    ("0.34.0", 4, 8, (PUSH_P, PUSH_D), "StatefulSet"),     # push: prefill TP below decode TP
    ("0.34.0", 8, 4, (PUSH_P, PUSH_D), "Deployment"),      # push: any TP difference
])
def test_a_gqa_draft_under_an_mla_target_with_the_wrong_tp_is_an_error(tmp_path, capsys, version, ptp, dtp, kv, kind):
    code, out = check(tmp_path, capsys, *_draft(version, ptp, dtp, kv=kv, kind=kind))
    assert code == 1 and DRAFT in rules(out, "error"), out


def test_a_gqa_draft_with_dcp_on_the_decode_is_an_error(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_draft("0.34.0", 8, 8, d_extra=("--decode-context-parallel-size", "8")))
    assert code == 1 and DRAFT in rules(out, "error"), out


def test_an_unknown_draft_family_is_a_warning(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_draft("0.34.0", 8, 4, spec=UNKNOWN_DRAFT))
    assert DRAFT in rules(out, "warning") and DRAFT not in rules(out, "error"), out


def test_a_wider_pull_decode_warns_about_the_layout_and_lbhnc_on_both_clears_it(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_draft("0.34.0", 4, 8))
    assert DRAFT in rules(out, "warning") and DRAFT not in rules(out, "error"), out
    code, out = check(tmp_path, capsys, *_draft("0.34.0", 4, 8, env=_layout("LBHNC")))
    assert DRAFT not in rules(out), out


@pytest.mark.parametrize(("version", "ptp", "dtp", "spec"), [
    ("0.32.0", 8, 4, EAGLE),     # the release before: no head-sharded draft mapping
    ("0.34.0", 8, 4, MTP),       # the target's MTP is MLA
    ("0.34.0", 8, 8, EAGLE),     # equal TP
])
def test_other_draft_shapes_are_not_this_fault(tmp_path, capsys, version, ptp, dtp, spec):
    code, out = check(tmp_path, capsys, *_draft(version, ptp, dtp, spec=spec))
    assert DRAFT not in rules(out), out


def test_a_gqa_target_is_not_this_fault(tmp_path, capsys):
    p = ["--tensor-parallel-size", "8", "--speculative-config", EAGLE, "--kv-transfer-config", PULL_P]
    d = ["--tensor-parallel-size", "4", "--speculative-config", EAGLE, "--kv-transfer-config", PULL_D]
    code, out = check(tmp_path, capsys, *_pair("meta-llama/Llama-3.1-70B-Instruct", "0.34.0", p, d, 8, 4))
    assert DRAFT not in rules(out), out


# --- 2. two memory pools in one MultiConnector -----------------------------------------------------------------------


def _multi(role, pools, nixl="NixlConnector"):
    children = [{"kv_connector": nixl, "kv_role": role}]
    for pool in pools:
        extra = {"custom_mem_pool": pool} if pool else {}
        children.append({"kv_connector": "MooncakeStoreConnector", "kv_role": "kv_both",
                         "kv_connector_extra_config": extra})
    return json.dumps({"kv_connector": "MultiConnector", "kv_role": role,
                       "kv_connector_extra_config": {"connectors": children}})


@pytest.mark.parametrize(("version", "pools", "kind"), [
    ("0.31.0", ("NVLINK", "NVLINK"), "Deployment"),
    ("0.34.0", ("NVLINK", "BAREX"), "StatefulSet"),
])
def test_two_mooncake_pools_in_a_multiconnector_are_an_error(tmp_path, capsys, version, pools, kind):
    p = ["--kv-transfer-config", _multi("kv_producer", pools)]
    d = ["--kv-transfer-config", PULL_D]
    code, out = check(tmp_path, capsys, *_pair("Qwen/Qwen3-8B", version, p, d, kind=kind))
    assert code == 1 and POOLS in rules(out, "error"), out


def test_two_pools_on_a_dynamo_decode_are_an_error(tmp_path, capsys):
    doc = _dynamo("Qwen/Qwen3-8B", ["--kv-transfer-config", PULL_P],
                  ["--kv-transfer-config", _multi("kv_consumer", ("NVLINK", "NVLINK"))], 1, 1,
                  image="vllm/vllm-openai:v0.33.0")
    code, out = check(tmp_path, capsys, doc)
    assert code == 1 and POOLS in rules(out, "error"), out


def test_a_module_path_child_with_a_pool_is_a_warning(tmp_path, capsys):
    cfg = json.loads(_multi("kv_producer", ("NVLINK",)))
    cfg["kv_connector_extra_config"]["connectors"].append(
        {"kv_connector": "AcmeConnector", "kv_connector_module_path": "acme.kv", "kv_role": "kv_both",
         "kv_connector_extra_config": {"custom_mem_pool": "NVLINK"}})
    p = ["--kv-transfer-config", json.dumps(cfg)]
    code, out = check(tmp_path, capsys, *_pair("Qwen/Qwen3-8B", "0.34.0", p, ["--kv-transfer-config", PULL_D]))
    assert POOLS in rules(out, "warning") and POOLS not in rules(out, "error"), out


@pytest.mark.parametrize(("version", "pools"), [
    ("0.30.0", ("NVLINK", "NVLINK")),   # the release before: MultiConnector forwards no pool
    ("0.34.0", ("NVLINK", None)),       # one pool
    ("0.34.0", (None, None)),           # none
])
def test_other_multiconnector_stacks_are_not_this_fault(tmp_path, capsys, version, pools):
    p = ["--kv-transfer-config", _multi("kv_producer", pools)]
    code, out = check(tmp_path, capsys, *_pair("Qwen/Qwen3-8B", version, p, ["--kv-transfer-config", PULL_D]))
    assert POOLS not in rules(out), out


# --- DCP with different block sizes ----------------------------------------------------------------------------------

DCP_RULE = "dcp-block-size-hetero"


def _dcp(version, bp, bd, dcp=8, kind="Deployment"):
    p = ["--tensor-parallel-size", "8", "--block-size", str(bp), "--kv-transfer-config", PULL_P]
    d = ["--tensor-parallel-size", "8", "--decode-context-parallel-size", str(dcp), "--block-size", str(bd),
         "--kv-transfer-config", PULL_D]
    return _pair(MLA, version, p, d, 8, 8, kind)


@pytest.mark.parametrize(("bp", "bd", "kind"), [(64, 128, "Deployment"), (128, 64, "StatefulSet")])
def test_dcp_with_different_block_sizes_on_0340_is_an_error(tmp_path, capsys, bp, bd, kind):
    code, out = check(tmp_path, capsys, *_dcp("0.34.0", bp, bd, kind=kind))
    assert code == 1 and DCP_RULE in rules(out, "error"), out


def test_dcp_with_different_block_sizes_on_a_pddeployment_is_an_error(tmp_path, capsys):
    spec = {"model": {"name": MLA}, "engine": {"image": "vllm/vllm-openai:v0.34.0"},
            "prefill": {"replicas": 1, "tensorParallelSize": 8, "blockSize": 64},
            "decode": {"replicas": 1, "tensorParallelSize": 8, "blockSize": 128,
                       "extraArgs": ["--decode-context-parallel-size", "8"]}}
    code, out = check(tmp_path, capsys, _pddeployment(spec))
    assert code == 1 and DCP_RULE in rules(out, "error"), out


def test_dcp_with_different_block_sizes_before_0340_is_a_warning(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_dcp("0.33.0", 64, 128))
    assert DCP_RULE in rules(out, "warning") and DCP_RULE not in rules(out, "error"), out


@pytest.mark.parametrize(("version", "bp", "bd", "dcp"), [
    ("0.34.0", 64, 64, 8),      # equal block sizes
    ("0.34.0", 64, 128, 1),     # no DCP
    ("0.30.0", 64, 128, 8),     # the release before either guard
])
def test_other_dcp_block_sizes_are_not_this_fault(tmp_path, capsys, version, bp, bd, dcp):
    code, out = check(tmp_path, capsys, *_dcp(version, bp, bd, dcp=dcp))
    assert DCP_RULE not in rules(out), out


def test_a_packed_peer_of_a_multi_group_model_on_0330_is_a_warning(tmp_path, capsys):
    """0.33.0 reads a peer's packed row per layer for one KV cache group only; DeepSeek-V3.2 has an indexer group."""
    code, out = check(tmp_path, capsys, *_rows("0.33.0", "BLHNC", "LBHNC", model="deepseek-ai/DeepSeek-V3.2-Exp"))
    assert ROWS in rules(out, "warning") and ROWS not in rules(out, "error"), out
    code, out = check(tmp_path, capsys, *_rows("0.34.0", "BLHNC", "LBHNC", model="deepseek-ai/DeepSeek-V3.2-Exp"))
    assert ROWS not in rules(out), out
