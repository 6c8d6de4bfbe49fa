"""Variants of what the ninety-seventh public-report set (tests/unit/data/public_reports_97) taught, with negative
controls: speculative decoding in P/D pairs, and the launchers that carry it.

- A script, unit or job file that configures no prefill/decode KV transfer (an aggregated ``python -m dynamo.vllm`` or
  ``vllm serve`` with a multi-line quoted ``--speculative-config``, as ai-dynamo/dynamo's agg_spec_decoding.sh writes
  it) holds nothing to check (exit 4), whether or not its text happens to parse as YAML; it used to be an input error
  (exit 2) when it did not (``cli._runs_without_pd``, ``text_inputs.run_format``). A broken manifest and text in no
  known format stay input errors; a P/D script with the same multi-line JSON is still read and judged.
- Speculative decoding across the roles (the set's core, judged right from its baseline, kept here as controls over
  releases and formats): a draft-model method on one role only is refused (0.28.0+: the NIXL compatibility hash,
  nixl/metadata.py ``_get_speculative_compatibility_factors``; 0.24.0-0.27.x: "Number of KV layers must match"),
  ngram / suffix on one role are not, and num_speculative_tokens may differ on a model without Mamba state.
"""

from __future__ import annotations

import pytest

from pdd_operator.compat.text_inputs import run_format
from tests.unit.cli_check import check_text

SPEC = '''--speculative_config '{
        "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        "num_speculative_tokens": 2,
        "method": "eagle3"
    }' '''


def _check(tmp_path, capsys, text: str, name: str) -> tuple[int, dict]:
    return check_text(tmp_path, capsys, text, name)


# --- files that configure no P/D: nothing to check, never an input error ---------------------------------------------


AGGREGATED = {
    "dynamo-agg.sh": ("#!/bin/bash\nset -e\npython -m dynamo.frontend --http-port=8000 &\n"
                      "CUDA_VISIBLE_DEVICES=0 python -m dynamo.vllm \\\n    --model meta-llama/Meta-Llama-3.1-8B-Instruct \\\n"
                      f"    {SPEC}\\\n    --gpu-memory-utilization 0.8\n"),
    "serve.sh": f"vllm serve meta-llama/Meta-Llama-3.1-8B-Instruct --port 8000 \\\n    {SPEC}\n",
    "docker.sh": ("docker run --gpus all vllm/vllm-openai:v0.34.0 \\\n  --model Qwen/Qwen3-8B \\\n"
                  "  --speculative-config '{\n    \"method\": \"ngram\",\n    \"num_speculative_tokens\": 3\n  }'\n"),
    "job.sbatch": ("#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --gpus=8\nsrun vllm serve Qwen/Qwen3-8B "
                   f"--tensor-parallel-size 8 \\\n  {SPEC}\n"),
    "vllm.service": ("[Unit]\nDescription=vLLM: one engine\n[Service]\n"
                     'ExecStart=/usr/bin/vllm serve Qwen/Qwen3-8B --speculative-config {"method": "ngram", '
                     '"num_speculative_tokens": 3}\n'),
}


@pytest.mark.parametrize("name", sorted(AGGREGATED))
def test_a_launcher_of_aggregated_engines_is_nothing_to_check(tmp_path, capsys, name):
    code, out = _check(tmp_path, capsys, AGGREGATED[name], name)
    assert code == 4 and not out["inputErrors"] and not out["notChecked"] and not out["results"], out


@pytest.mark.parametrize("name", sorted(AGGREGATED))
def test_the_aggregated_launchers_are_no_yaml_and_a_known_run_format(name):
    import yaml

    with pytest.raises(yaml.YAMLError):  # the case the fix is for: before it, exit 2 "not valid YAML"
        list(yaml.safe_load_all(AGGREGATED[name]))
    assert run_format(AGGREGATED[name]) is not None


@pytest.mark.parametrize(("text", "name"), [
    ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - args: ['--port'\n", "pod.yaml"),
    ("model: {\n  name: x: y\n", "values.yaml"),
    ("vllm serve {{ .Values.model }} --speculative-config '{\n \"method\": \"ngram\"\n}'\n", "t.tpl"),
])
def test_broken_manifests_and_unknown_text_stay_input_errors(tmp_path, capsys, text, name):
    code, out = _check(tmp_path, capsys, text, name)
    assert code == 2 and out["inputErrors"] and not out["notChecked"], out


def test_a_pd_script_with_multiline_json_is_still_judged(tmp_path, capsys):
    kv = "--kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'"
    text = ("#!/bin/bash\npython -m dynamo.frontend &\n"
            f"CUDA_VISIBLE_DEVICES=0 python -m dynamo.vllm --model meta-llama/Meta-Llama-3.1-8B-Instruct "
            f"--disaggregation-mode decode {kv} \\\n    {SPEC}&\n"
            "VLLM_NIXL_SIDE_CHANNEL_PORT=20097 CUDA_VISIBLE_DEVICES=1 python -m dynamo.vllm "
            f"--model meta-llama/Meta-Llama-3.1-8B-Instruct --disaggregation-mode prefill {kv} &\nwait\n")
    code, out = _check(tmp_path, capsys, text, "disagg.sh")
    errors = {f["rule"] for r in out["results"] for f in r["findings"] if f["severity"] == "error"}
    assert code == 1 and "spec-decode-mismatch" in errors, out


# --- speculative decoding across the roles (controls) ------------------------------------------------------------------


def _pair(version: str, model: str, p_spec: str | None, d_spec: str | None, env: str = "") -> str:
    def node(role: str, port: int, spec: str | None, host: str) -> str:
        s = f" --speculative-config '{spec}'" if spec else ""
        return (f"docker run --rm --gpus all --network host -e VLLM_NIXL_SIDE_CHANNEL_HOST={host} {env}"
                f"vllm/vllm-openai:v{version} vllm serve {model} "
                f"--port {port} --tensor-parallel-size 8{s} "
                f"--kv-transfer-config '{{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"{role}\"}}'\n")
    return ("#!/bin/bash\n" + node("kv_producer", 8100, p_spec, "10.0.0.1") + "\n"
            + node("kv_consumer", 8200, d_spec, "10.0.0.2"))


EAGLE3 = '{"method": "eagle3", "model": "/models/draft", "num_speculative_tokens": %d}'


@pytest.mark.parametrize("version", ["0.26.0", "0.30.0", "0.34.0"])
@pytest.mark.parametrize("model", ["MiniMaxAI/MiniMax-M2.5", "meta-llama/Llama-3.1-70B-Instruct"])
def test_a_draft_model_on_the_decode_only_is_refused(tmp_path, capsys, version, model):
    code, out = _check(tmp_path, capsys, _pair(version, model, None, EAGLE3 % 3), "pair.sh")
    errors = {f["rule"] for r in out["results"] for f in r["findings"] if f["severity"] == "error"}
    assert code == 1 and "spec-decode-mismatch" in errors, out


@pytest.mark.parametrize("spec", ['{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}',
                                  '{"method": "suffix", "num_speculative_tokens": 8}'])
@pytest.mark.parametrize("version", ["0.30.0", "0.34.0"])
def test_draft_free_methods_on_one_role_are_not_refused(tmp_path, capsys, spec, version):
    code, out = _check(tmp_path, capsys, _pair(version, "MiniMaxAI/MiniMax-M2.5", None, spec), "pair.sh")
    assert code == 0, out


@pytest.mark.parametrize("version", ["0.26.0", "0.34.0"])
def test_token_counts_may_differ_without_mamba_state(tmp_path, capsys, version):
    code, out = _check(tmp_path, capsys, _pair(version, "meta-llama/Llama-3.1-70B-Instruct", EAGLE3 % 1, EAGLE3 % 3),
                       "pair.sh")
    assert code == 0, out


def test_the_draft_kv_dtype_on_one_role_is_refused(tmp_path, capsys):
    d_spec = '{"method": "eagle3", "model": "/models/draft", "num_speculative_tokens": 3, "kv_cache_dtype": "fp8"}'
    code, out = _check(tmp_path, capsys, _pair("0.34.0", "MiniMaxAI/MiniMax-M2.5", EAGLE3 % 3, d_spec), "pair.sh")
    errors = {f["rule"] for r in out["results"] for f in r["findings"] if f["severity"] == "error"}
    assert code == 1 and "spec-decode-mismatch" in errors, out
