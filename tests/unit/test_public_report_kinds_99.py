"""Variants of what the ninety-ninth public-report set (tests/unit/data/public_reports_99: quantized checkpoints and
quantized KV caches in P/D) taught, with negative controls.

1. Another engine's disaggregated servers in a shell script are "not checked", not an input error. A script whose
   prefill and decode are SGLang servers (``python3 -m sglang.launch_server --disaggregation-mode prefill|decode``,
   sgl-project/sglang#18389) or TensorRT-LLM's (``trtllm-serve`` with ``trtllm-serve disaggregated``) names no vLLM
   engine: nothing in vLLM's code judges it, so it is named with the engine (exit 3), with or without a ``#!`` line.
   One such server without a P/D role is nothing to check (exit 4); a vLLM P/D script that names SGLang only in a
   comment is still checked.

2. DeepSeek-V3.2's config hook folds ``auto`` into ``fp8_ds_mla`` in 0.11.0 only. ``DeepseekV32ForCausalLM.
   verify_and_update_config`` turns ``cache_dtype == "auto" or startswith("fp8")`` into ``fp8_ds_mla`` in 0.11.0
   (vllm/model_executor/models/config.py 0.11.0 l.419-421), ``startswith("fp8")`` alone from 0.11.1 to 0.17.1
   (0.11.1 l.478-479, 0.16.0 l.557-558, 0.17.1 l.597-598) and nothing but ``bfloat16`` -> ``auto`` from 0.18.0
   (l.39-41). So on 0.11.1-0.17.1 an unset KV dtype against fp8 is refused at the handshake (``auto`` against
   ``fp8_ds_mla`` in the compatibility hash, v1/nixl_connector.py 0.16.0 l.175-230, 1085-1101), and unset against
   bfloat16 is one (``auto``).

3. Where the checkpoint is a local path whose name reads as sparse MLA (``/root/workspaces/models/
   DeepSeek-V3.2-NVFP4``) but whose config.json architecture is not known, two fp8 spellings (or bfloat16 and auto)
   that DeepSeek-V3.2's hook would fold into one are a warning, not an error: the hook runs for
   ``DeepseekV32ForCausalLM`` and not for GLM-5's ``GlmMoeDsaForCausalLM``. A dense model's name, a known
   architecture, and releases where the hook folds nothing (fp8 against fp8_e4m3 from 0.18.0) keep the error.
"""

from __future__ import annotations

import json

import pytest

from tests.unit.test_turn2_variants import check, container, rules, workload

KV_P = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_producer"})
KV_D = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_consumer"})


def _script(tmp_path, text, name="launch.sh"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _run(capsys, path):
    from pdd_operator.cli import main

    code = main(["check", str(path), "-o", "json"])
    out = capsys.readouterr().out
    return code, (json.loads(out) if out.strip() else {})


SGLANG_PD = (
    "python3 -m sglang.launch_server --model-path {model} --disaggregation-mode prefill --tp-size 4 "
    "--disaggregation-transfer-backend nixl --port 30000\n"
    "python3 -m sglang.launch_server --model-path {model} --disaggregation-mode decode --tp-size 4 "
    "--disaggregation-transfer-backend nixl --port 30001\n")
TRTLLM_PD = ("trtllm-serve {model} --port 8001 --extra_llm_api_options ctx.yaml &\n"
             "trtllm-serve {model} --port 8002 --extra_llm_api_options gen.yaml &\n"
             "trtllm-serve disaggregated -c disagg_config.yaml\n")


@pytest.mark.parametrize(("text", "engine"), [
    ("#!/bin/bash\n" + SGLANG_PD.format(model="nvidia/DeepSeek-V3.2-NVFP4"), "SGLang"),
    ("NCCL_IB_DISABLE=0 " + SGLANG_PD.format(model="Qwen/Qwen3-235B-A22B-FP8"), "SGLang"),   # pasted, no #! line
    ("#!/bin/bash\n#SBATCH --nodes=2\nsrun bash -c 'true'\n" + SGLANG_PD.format(model="openai/gpt-oss-120b"),
     "SGLang"),
    (TRTLLM_PD.format(model="nvidia/DeepSeek-R1-FP4"), "TensorRT-LLM"),
])
def test_another_engines_pd_script_is_not_checked(tmp_path, capsys, text, engine):
    code, out = _run(capsys, _script(tmp_path, text))
    assert code == 3, out
    assert not out.get("inputErrors") and out["notChecked"], out
    assert engine in out["notChecked"][0]["reason"], out


def test_one_sglang_server_without_a_role_is_nothing_to_check(tmp_path, capsys):
    code, out = _run(capsys, _script(tmp_path, "python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --port 30000\n"))
    assert code == 4 and not out.get("notChecked") and not out.get("inputErrors"), out


def test_a_vllm_pd_script_naming_sglang_in_a_comment_is_checked(tmp_path, capsys):
    text = ("#!/bin/bash\n# moved from python3 -m sglang.launch_server --disaggregation-mode prefill\n"
            f"vllm serve Qwen/Qwen3-8B --port 8100 --kv-transfer-config '{KV_P}' &\n"
            f"vllm serve Qwen/Qwen3-8B --port 8200 --kv-transfer-config '{KV_D}' &\nwait\n")
    code, out = _run(capsys, _script(tmp_path, text))
    assert code in (0, 1) and out["results"] and not out.get("notChecked"), out


def _pair(model, image, p_kv=(), d_kv=()):
    docs = []
    for role, kv, own in (("prefill", KV_P, p_kv), ("decode", KV_D, d_kv)):
        c = container([model, *own, "--kv-transfer-config", kv], image=image)
        docs.append(workload(f"m-{role}", role, c, app="m"))
    return docs


def _kv_findings(out):
    return [f for r in out["results"] for f in r["findings"] if f["rule"] == "kv-cache-dtype-mismatch"]


@pytest.mark.parametrize(("model", "image", "p_kv", "d_kv"), [
    # 0.11.1-0.17.1: unset stays auto, fp8 becomes fp8_ds_mla
    ("deepseek-ai/DeepSeek-V3.2-Exp", "vllm/vllm-openai:v0.11.1", (), ("--kv-cache-dtype", "fp8")),
    ("deepseek-ai/DeepSeek-V3.2", "vllm/vllm-openai:v0.16.0", ("--kv-cache-dtype", "fp8_e4m3"), ()),
    ("deepseek-ai/DeepSeek-V3.2", "vllm/vllm-openai:v0.17.1", ("--kv-cache-dtype", "auto"), ("--kv-cache-dtype", "fp8")),
])
def test_dsv32_unset_against_fp8_is_refused_after_0_11_0(tmp_path, capsys, model, image, p_kv, d_kv):
    code, out = check(tmp_path, capsys, *_pair(model, image, p_kv, d_kv))
    found = _kv_findings(out)
    assert code == 1 and found and found[0]["severity"] == "error", out
    assert "'auto'" in found[0]["message"] and "'fp8_ds_mla'" in found[0]["message"], out


@pytest.mark.parametrize(("image", "p_kv", "d_kv"), [
    ("vllm/vllm-openai:v0.11.0", (), ("--kv-cache-dtype", "fp8")),             # 0.11.0 folds auto too
    ("vllm/vllm-openai:v0.16.0", (), ("--kv-cache-dtype", "bfloat16")),        # bfloat16 -> auto = unset
    ("vllm/vllm-openai:v0.14.1", ("--kv-cache-dtype", "fp8_e4m3"), ("--kv-cache-dtype", "fp8")),
])
def test_dsv32_controls_the_hook_still_folds(tmp_path, capsys, image, p_kv, d_kv):
    code, out = check(tmp_path, capsys, *_pair("deepseek-ai/DeepSeek-V3.2", image, p_kv, d_kv))
    assert not _kv_findings(out) and code == 0, out


@pytest.mark.parametrize(("model", "image", "p_kv", "d_kv"), [
    ("/root/workspaces/models/DeepSeek-V3.2-NVFP4", "vllm/vllm-openai:v0.16.0",
     ("--kv-cache-dtype", "fp8_e4m3"), ("--kv-cache-dtype", "fp8")),
    ("/models/DeepSeek-V3.2-Exp", "vllm/vllm-openai:v0.13.0", ("--kv-cache-dtype", "fp8"), ("--kv-cache-dtype", "fp8_e5m2")),
    ("/mnt/ckpt/DeepSeek-V3.2", "vllm/vllm-openai:v0.34.0", (), ("--kv-cache-dtype", "bfloat16")),
])
def test_a_local_sparse_mla_checkpoint_the_hook_may_fold_is_a_warning(tmp_path, capsys, model, image, p_kv, d_kv):
    code, out = check(tmp_path, capsys, *_pair(model, image, p_kv, d_kv))
    found = _kv_findings(out)
    assert found and {f["severity"] for f in found} == {"warning"}, out
    assert "DeepseekV32ForCausalLM" in found[0]["message"]
    assert code == 0 and "kv-cache-dtype-mismatch" not in rules(out, "error"), out


@pytest.mark.parametrize(("model", "image", "p_kv", "d_kv"), [
    # from 0.18.0 the hook folds no fp8 spelling
    ("/root/workspaces/models/DeepSeek-V3.2-NVFP4", "vllm/vllm-openai:v0.18.0",
     ("--kv-cache-dtype", "fp8_e4m3"), ("--kv-cache-dtype", "fp8")),
    # a dense model's name: no hook
    ("/models/Qwen3-8B", "vllm/vllm-openai:v0.16.0", ("--kv-cache-dtype", "fp8_e4m3"), ("--kv-cache-dtype", "fp8")),
    # a known architecture is judged as it is (Kimi-K2 is MLA but not DeepSeek-V3.2)
    ("moonshotai/Kimi-K2-Instruct", "vllm/vllm-openai:v0.16.0", ("--kv-cache-dtype", "fp8_e4m3"), ("--kv-cache-dtype", "fp8")),
    # fp8 against bfloat16 stays apart under the hook
    ("/root/workspaces/models/DeepSeek-V3.2-NVFP4", "vllm/vllm-openai:v0.16.0", ("--kv-cache-dtype", "fp8"),
     ("--kv-cache-dtype", "bfloat16")),
])
def test_controls_stay_errors(tmp_path, capsys, model, image, p_kv, d_kv):
    code, out = check(tmp_path, capsys, *_pair(model, image, p_kv, d_kv))
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error"), out
