"""Quantized and re-published copies of known checkpoints (issue 9, branch i9-models32).

``RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic``, ``nvidia/*-FP8``, ``*-AWQ``, ``*-GPTQ-Int4``, ``*-NVFP4``,
``unsloth/*`` and ``neuralmagic/*`` were not in the table of known checkpoints, so the KV-head rules only warned
(``tp-kv-heads-unknown``) or stayed silent. Quantization keeps ``num_key_value_heads`` and the architecture
(vLLM's ``get_total_num_kv_heads`` never reads ``quantization_config``), so such a copy is read as its base, and the
finding ``model-read-as-base`` says so; its own KV cache quantization, which the base's config.json cannot show, is
named where the roles' ``--kv-cache-dtype`` differ (``auto`` becomes a ModelOpt checkpoint's from vLLM 0.14.0)."""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.known_models import derived_config, served_as_known
from tests.unit.test_public_report_kinds_12 import _deployment
from tests.unit.test_turn2_variants import check, rules

NIXL = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})


def _pdd(model: str, p_tp: int, d_tp: int, image: str = "vllm/vllm-openai:v0.20.0") -> dict:
    return {"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment", "metadata": {"name": "x"},
            "spec": {"model": {"name": model}, "engine": {"image": image},
                     "network": {"rdma": {"resourceName": "rdma/ib", "count": 1}},
                     "prefill": {"replicas": 1, "tensorParallelSize": p_tp},
                     "decode": {"replicas": 1, "tensorParallelSize": d_tp}}}


def _findings(out, rule):
    return [f for r in out["results"] for f in r["findings"] if f["rule"] == rule]


@pytest.mark.parametrize(("name", "base", "heads"), [
    ("RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", "meta-llama/Llama-3.3-70B-Instruct", 8),
    ("nvidia/Llama-3.3-70B-Instruct-FP8", "meta-llama/Llama-3.3-70B-Instruct", 8),
    ("Qwen/Qwen2.5-7B-Instruct-AWQ", "Qwen/Qwen2.5-7B-Instruct", 4),
    ("Qwen/Qwen2.5-72B-Instruct-GPTQ-Int4", "Qwen/Qwen2.5-72B-Instruct", 8),
    ("Qwen/Qwen3-8B-FP8", "Qwen/Qwen3-8B", 8),
    ("nvidia/Qwen3-32B-NVFP4", "Qwen/Qwen3-32B", 8),
    ("unsloth/Meta-Llama-3.1-8B-Instruct-unsloth-bnb-4bit", "meta-llama/Meta-Llama-3.1-8B-Instruct", 8),
    ("neuralmagic/Meta-Llama-3.1-8B-Instruct-quantized.w4a16", "meta-llama/Meta-Llama-3.1-8B-Instruct", 8),
])
def test_a_quantized_copy_resolves_to_its_base(name, base, heads):
    config, found, quantized = derived_config(name)
    assert (found, quantized, config["num_key_value_heads"]) == (base, True, heads)
    # the copy's dtype, quantization and context length are its own, not the base's
    assert not {"torch_dtype", "dtype", "quantization_config", "max_position_embeddings"} & set(config)


def test_a_re_upload_under_another_organisation_is_not_marked_quantized():
    assert derived_config("unsloth/Llama-3.3-70B-Instruct")[1:] == ("meta-llama/Llama-3.3-70B-Instruct", False)


@pytest.mark.parametrize("name", [
    "meta-llama/Llama-3.3-70B-Instruct",  # known itself
    "foo/Llama-3.3-8B-Instruct-FP8",  # no known checkpoint of that size: no guess across sizes
    "acme/MyLlama-3.3-70B-Instruct-FP8",  # a fine-tune whose name only contains the base
    "Qwen/Qwen3-8B-Base-FP8",  # a sibling the table does not hold
    "/models/Llama-3.3-70B-Instruct-FP8",  # a local path
    "Llama-3.3-70B-Instruct-FP8",  # no organisation
])
def test_names_that_do_not_carry_a_known_base_stay_unknown(name):
    assert derived_config(name) is None


def test_a_pddeployment_of_a_quantized_llama_is_judged_with_the_bases_kv_heads(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _pdd("RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", 16, 8))
    assert code == 1 and "tp-exceeds-kv-heads" in rules(out, "error"), out
    assert "tp-kv-heads-unknown" not in rules(out), out
    (read,) = _findings(out, "model-read-as-base")
    assert read["severity"] == "warning" and "read as meta-llama/Llama-3.3-70B-Instruct" in read["message"]
    assert "8 KV heads" in read["message"]


def test_within_the_kv_heads_the_quantized_copy_passes(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _pdd("nvidia/Llama-3.3-70B-Instruct-FP8", 8, 4))
    assert code == 0 and not rules(out, "error"), out
    assert "model-read-as-base" in rules(out, "warning") and "tp-kv-heads-unknown" not in rules(out)


def test_the_base_itself_gets_no_read_as_finding(tmp_path, capsys):
    _, out = check(tmp_path, capsys, _pdd("meta-llama/Llama-3.3-70B-Instruct", 16, 8))
    assert "tp-exceeds-kv-heads" in rules(out, "error") and "model-read-as-base" not in rules(out)


def test_an_unrelated_name_still_warns_that_the_kv_heads_are_unknown(tmp_path, capsys):
    _, out = check(tmp_path, capsys, _pdd("acme/MyLlama-3.3-70B-Instruct-FP8", 16, 8))
    assert "tp-kv-heads-unknown" in rules(out, "warning") and "model-read-as-base" not in rules(out), out


def _pair(model: str, p_tp: int, d_tp: int, image: str = "vllm/vllm-openai:v0.21.0", p_extra=(), d_extra=(),
          served: str | None = None):
    extra = ["--served-model-name", served] if served else []
    return (_deployment("prefill", [model, "--kv-transfer-config", NIXL, "--tensor-parallel-size", str(p_tp),
                                    *extra, *p_extra], gpus=p_tp, image=image),
            _deployment("decode", [model, "--kv-transfer-config", NIXL, "--tensor-parallel-size", str(d_tp),
                                   *extra, *d_extra], gpus=d_tp, image=image))


def test_deployments_of_a_gptq_qwen_are_judged_with_the_bases_kv_heads(tmp_path, capsys):
    # Qwen2.5-72B has 8 KV heads: prefill TP 16 > decode TP 8 replicates them, which decode cannot read
    code, out = check(tmp_path, capsys, *_pair("Qwen/Qwen2.5-72B-Instruct-GPTQ-Int4", 16, 8))
    assert code == 1 and "tp-exceeds-kv-heads" in rules(out, "error"), out
    (read,) = _findings(out, "model-read-as-base")
    assert "read as Qwen/Qwen2.5-72B-Instruct" in read["message"]


def test_a_local_path_served_as_a_quantized_name_is_read_as_the_base(tmp_path, capsys):
    assert served_as_known("/models/llama", "nvidia/Llama-3.3-70B-Instruct-FP8") == \
        "nvidia/Llama-3.3-70B-Instruct-FP8"
    code, out = check(tmp_path, capsys, *_pair("/models/llama", 16, 8, served="nvidia/Llama-3.3-70B-Instruct-FP8"))
    assert code == 1 and "tp-exceeds-kv-heads" in rules(out, "error"), out


@pytest.mark.parametrize(("image", "said"), [("vllm/vllm-openai:v0.21.0", True), ("vllm/vllm-openai:v0.13.0", False)])
def test_the_unknown_kv_cache_quantization_is_named_where_the_roles_dtypes_differ(tmp_path, capsys, image, said):
    # prefill leaves --kv-cache-dtype auto, decode names fp8_e4m3: a ModelOpt FP8-KV checkpoint makes auto fp8_e4m3
    # from 0.14.0 (vllm utils/torch_utils.py resolve_kv_cache_dtype_string); 0.13.0 has no such resolution
    _, out = check(tmp_path, capsys, *_pair("nvidia/Llama-3.3-70B-Instruct-FP8", 4, 4, image=image,
                                             d_extra=["--kv-cache-dtype", "fp8_e4m3"]))
    (read,) = _findings(out, "model-read-as-base")
    assert ("kv_cache_quant_algo" in read["message"]) is said, read


def test_equal_kv_cache_dtypes_need_no_kv_quantization_caveat(tmp_path, capsys):
    _, out = check(tmp_path, capsys, *_pair("nvidia/Llama-3.3-70B-Instruct-FP8", 4, 4))
    (read,) = _findings(out, "model-read-as-base")
    assert "kv_cache_quant_algo" not in read["message"]


# --- Dynamo's vLLM worker without a role flag is the decode (or aggregated) worker ------------------------------
# dynamo/vllm/args.py registers the ``prefill`` component only for --is-prefill-worker (0.6.0 l.158, 0.9.1 l.382) or
# --disaggregation-mode prefill (1.0.0 l.164, 1.6.1 l.257), the ``backend`` (decode/aggregated) one otherwise.

DSR1_LIKE = """#!/bin/bash
MODEL=deepseek-ai/DeepSeek-R1
IS_PREFILL_WORKER="false"
if [ "$IS_PREFILL_WORKER" = "true" ]; then
    python3 -m dynamo.vllm --model $MODEL --tensor-parallel-size 8 {kv} --is-prefill-worker &
else
    python3 -m dynamo.vllm --model $MODEL --tensor-parallel-size 8 {kv} &
fi
wait
"""


def _script(tmp_path, capsys, text: str) -> dict:
    from pdd_operator.cli import main

    path = tmp_path / "launch.sh"
    path.write_text(text)
    main(["check", str(path), "-o", "json", "--allow-empty"])
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("kv", ["", "--kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'"])
def test_a_script_of_flagless_dynamo_workers_is_read_as_their_decode_pool(tmp_path, capsys, kv):
    # Dynamo's dsr1_dep.sh shape (set 65): run without --is-prefill-worker, every worker it starts is a decode worker
    out = _script(tmp_path, capsys, DSR1_LIKE.format(kv=kv))
    reasons = [n["reason"] for n in out["notChecked"]]
    assert not any("cannot be told" in r for r in reasons), reasons
    assert any(r.startswith("no prefill engine") and "decode (or aggregated) worker" in r for r in reasons), reasons


def _dynamo_deployment(role: str, args: list[str], tag: str, env: list[dict] | None = None) -> dict:
    labels = {"app": "q", "role": role}
    container = {"name": "worker", "image": f"nvcr.io/nvidia/ai-dynamo/vllm-runtime:{tag}",
                 "command": ["python3", "-m", "dynamo.vllm"], "args": args, "env": env or [],
                 "resources": {"limits": {"nvidia.com/gpu": "2"}}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"q-{role}", "labels": labels},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}}}


MODEL_ARGS = ["--model", "Qwen/Qwen3-8B", "--tensor-parallel-size", "2"]


def test_a_role_label_does_not_make_a_flagless_dynamo_worker_a_prefill_worker(tmp_path, capsys):
    # both Deployments run dynamo.vllm without a role flag: Dynamo registers both as the backend (decode) component,
    # so there is no prefill worker to pair, whatever the labels say
    code, out = check(tmp_path, capsys, _dynamo_deployment("prefill", MODEL_ARGS, "0.6.0"),
                      _dynamo_deployment("decode", MODEL_ARGS, "0.6.0"), extra=["--allow-empty"])
    assert not out["results"], out
    assert any("decode (or aggregated) worker" in n["reason"] for n in out["notChecked"]), out


@pytest.mark.parametrize(("tag", "flag", "env"), [
    ("0.6.0", ["--is-prefill-worker"], None),
    ("1.0.0", ["--disaggregation-mode", "prefill"], None),
    # 1.0.0 and later also read the mode from DYN_VLLM_DISAGGREGATION_MODE (backend_args.py env_var)
    ("1.0.0", [], [{"name": "DYN_VLLM_DISAGGREGATION_MODE", "value": "prefill"}]),
])
def test_a_dynamo_prefill_worker_still_pairs_with_the_flagless_decode(tmp_path, capsys, tag, flag, env):
    kv = [] if tag.startswith("0.") else ["--kv-transfer-config", NIXL]
    _, out = check(tmp_path, capsys, _dynamo_deployment("prefill", [*MODEL_ARGS, *kv, *flag], tag, env),
                   _dynamo_deployment("decode", [*MODEL_ARGS, *kv], tag))
    assert len(out["results"]) == 1 and "q-prefill" in out["results"][0]["object"], out
