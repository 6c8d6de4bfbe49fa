"""Variants of what the ninety-eighth public-report set (tests/unit/data/public_reports_98) taught, with negative
controls.

1. An attention backend named on one role only, the GPUs unknown: vLLM picks the other role's backend by compute
   capability, and a model with FP8 weights never loads below 7.5 (every FP8 method's ``get_min_capability`` is 75
   or more, checked in vllm/config/vllm.py; :mod:`pdd_operator.vllm.quantization_floor`), so on 0.18.0-0.23.x, where
   a T4 (7.5) takes FLASHINFER, ``TRITON_ATTN`` on one side is never the other's choice: an error, not a warning.
   A bf16 model can land on a V100, where vLLM takes TRITON_ATTN, so it stays a warning; so does an FP8 model from
   0.24.0, where FlashInfer refuses 7.5 and a T4 takes TRITON_ATTN.
2. A script whose prefill and decode name no devices (no ``CUDA_VISIBLE_DEVICES``, no GPU count), on a host that
   shows NVIDIA GPUs (``nvidia-smi``, ``pip install vllm``, ``apptainer exec --nv``): each engine's rank 0 opens
   ``cuda:0``, whatever its TP (a ``$TP_SIZE`` read at run time included), so two engines of 0.9 each share it and the
   second fails vLLM's startup memory check (``engines-share-gpu``). Apptainer's ``--env NAME=VALUE`` (how the
   launcher's own fix gives each worker its GPUs) is read as the engine's environment.
"""

from __future__ import annotations

import pytest

from pdd_operator.vllm.block_size import script_platform_hint
from pdd_operator.vllm.quantization_floor import FP8_WEIGHTS_MIN_CAPABILITY, min_capability
from pdd_operator.vllm.script import apptainer_env
from tests.unit.test_script_inputs import _check as check_script
from tests.unit.test_script_inputs import _errors
from tests.unit.test_turn2_variants import KV, check, container, rules, workload

# --- 1. the FP8 floor, as a pure function ---------------------------------------------------------------------


@pytest.mark.parametrize(("model", "quantization", "floor"), [
    ("Qwen/Qwen3-14B-FP8", None, FP8_WEIGHTS_MIN_CAPABILITY),
    ("RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic", None, FP8_WEIGHTS_MIN_CAPABILITY),
    ("nvidia/Llama-3.3-70B-Instruct-FP8", None, FP8_WEIGHTS_MIN_CAPABILITY),
    ("/models/qwen3-fp8", None, FP8_WEIGHTS_MIN_CAPABILITY),
    ("Qwen/Qwen3-8B", "fp8", FP8_WEIGHTS_MIN_CAPABILITY),         # online FP8: Fp8Config, 75
    ("Qwen/Qwen3-8B", "fbgemm_fp8", FP8_WEIGHTS_MIN_CAPABILITY),
    ("Qwen/Qwen3-8B", None, None),
    ("Qwen/Qwen3-8B-AWQ", None, None),                            # another method: no floor claimed
    ("Qwen/Qwen3-14B-FP8", "awq", None),                          # the flag names the method, not the name
    ("acme/superfp8model", None, None),                           # not a delimited token
    (None, None, None),
])
def test_fp8_weights_floor(model, quantization, floor):
    assert min_capability(model, quantization) == floor


# --- 1. the floor in the one-sided backend judgement ------------------------------------------------------------


def _backend_pair(model, image, named="decode", backend="TRITON_ATTN", extra=()):
    docs = []
    for role in ("prefill", "decode"):
        args = [model, "--kv-transfer-config", KV, *extra]
        if role == named:
            args += ["--attention-backend", backend]
        docs.append(workload(f"m-{role}", role, container(args, image=image), app="m"))
    return docs


@pytest.mark.parametrize(("model", "image", "extra"), [
    ("Qwen/Qwen3-14B-FP8", "vllm/vllm-openai:v0.20.1", ()),                            # the set's graph, as a Deployment
    ("RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8", "vllm/vllm-openai:v0.18.0", ()),       # another family and release
    ("Qwen/Qwen3-8B", "vllm/vllm-openai:v0.22.0", ("--quantization", "fp8")),           # online FP8 on a bf16 checkpoint
])
def test_triton_on_one_role_of_an_fp8_model_is_refused_before_0_24(tmp_path, capsys, model, image, extra):
    code, out = check(tmp_path, capsys, *_backend_pair(model, image, extra=extra))
    assert code == 1 and "attention-backend-mismatch" in rules(out, "error"), out


def test_triton_on_the_prefill_only_is_refused_alike(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_backend_pair("Qwen/Qwen3-14B-FP8", "vllm/vllm-openai:v0.20.1", "prefill"))
    assert code == 1 and "attention-backend-mismatch" in rules(out, "error"), out


@pytest.mark.parametrize(("model", "image", "backend"), [
    ("Qwen/Qwen3-14B", "vllm/vllm-openai:v0.20.1", "TRITON_ATTN"),      # bf16: a V100 picks TRITON_ATTN
    ("Qwen/Qwen3-14B-FP8", "vllm/vllm-openai:v0.24.0", "TRITON_ATTN"),  # from 0.24.0 a T4 (7.5) picks TRITON_ATTN
    ("Qwen/Qwen3-14B-FP8", "vllm/vllm-openai:v0.20.1", "FLASHINFER"),   # vLLM's own choice on 7.5 and 10.x
])
def test_a_backend_some_gpu_the_model_runs_on_would_pick_stays_a_warning(tmp_path, capsys, model, image, backend):
    code, out = check(tmp_path, capsys, *_backend_pair(model, image, backend=backend))
    assert code == 0 and "attention-backend-mismatch" in rules(out, "warning"), out


# --- 2. a script's engines that name no devices -----------------------------------------------------------------


def _script(host_sign: str, p_env: str = "", d_env: str = "", tp: str = "1", mem: str = "") -> str:
    flags = f"--tensor-parallel-size {tp} {mem}".strip()
    kv = '{{"kv_connector":"NixlConnector","kv_role":"{}"}}'
    return (f"#!/bin/bash\n{host_sign}\n"
            f"{p_env}vllm serve Qwen/Qwen3-8B --port 8100 {flags} --kv-transfer-config '{kv.format('kv_producer')}' &\n"
            f"{d_env}VLLM_NIXL_SIDE_CHANNEL_PORT=5700 vllm serve Qwen/Qwen3-8B --port 8200 {flags} "
            f"--kv-transfer-config '{kv.format('kv_consumer')}' &\nwait\n")


@pytest.mark.parametrize(("sign", "tp"), [
    ("nvidia-smi", "1"),
    ("pip install vllm==0.20.1", "2"),
    ("nvidia-smi", "$TP_SIZE"),             # the TP read at run time: rank 0 is on cuda:0 all the same
])
def test_engines_naming_no_devices_on_a_gpu_host_share_gpu_0(tmp_path, capsys, sign, tp):
    code, out = check_script(tmp_path, capsys, _script(sign, tp=tp))
    assert code == 1 and "engines-share-gpu" in _errors(out), out


@pytest.mark.parametrize(("sign", "kw"), [
    ("nvidia-smi", {"p_env": "CUDA_VISIBLE_DEVICES=0 ", "d_env": "CUDA_VISIBLE_DEVICES=1 "}),  # own devices
    ("nvidia-smi", {"mem": "--gpu-memory-utilization 0.45"}),                                 # 0.9 in all
    ("echo starting", {}),                                                                    # no GPU host shown
    ("export TPU_VISIBLE_CHIPS=0,1", {}),                                                     # another accelerator
])
def test_engines_with_own_devices_or_room_or_no_gpu_host_are_not_refused(tmp_path, capsys, sign, kw):
    code, out = check_script(tmp_path, capsys, _script(sign, **kw))
    assert "engines-share-gpu" not in _errors(out), out


def test_docker_containers_get_their_own_devices_and_are_not_judged_so(tmp_path, capsys):
    text = "nvidia-smi\n" + "".join(
        f"docker run --rm --gpus '\"device={i}\"' --network host vllm/vllm-openai:v0.20.1 vllm serve Qwen/Qwen3-8B "
        f"--port {8100 + 100 * i} --kv-transfer-config '{{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"{r}\"}}' &\n"
        for i, r in enumerate(("kv_producer", "kv_consumer"))) + "wait\n"
    code, out = check_script(tmp_path, capsys, text)
    assert out["results"] and "engines-share-gpu" not in _errors(out), out


def test_apptainer_nv_shows_an_nvidia_host():
    text = "APPTAINER_BASE=(\n    apptainer exec\n    --nv\n    --bind /a:/a\n    img.sif\n)\n"
    assert "Apptainer" in script_platform_hint(text)
    assert script_platform_hint("singularity exec --nv x.sif vllm serve m") != ""
    assert script_platform_hint("apptainer exec --rocm x.sif vllm serve m") == ""      # AMD's option
    assert script_platform_hint("apptainer exec x.sif vllm serve m --nvx") == ""


def test_the_apptainer_launcher_with_loops_is_refused(tmp_path, capsys):
    text = """#!/bin/bash
TP_SIZE=$(python3 read.py tp)
NUM_PREFILL=$(python3 read.py prefill)
NUM_DECODE=$(python3 read.py decode)
ARGS=(--model /m --tensor-parallel-size "$TP_SIZE" --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}')
BASE=(apptainer exec --nv --bind /m:/m /img/dynamo-vllm.sif)
for ((i=0; i<NUM_PREFILL; i++)); do
    "${BASE[@]}" python3 -m dynamo.vllm "${ARGS[@]}" --disaggregation-mode prefill &
done
for ((i=0; i<NUM_DECODE; i++)); do
    "${BASE[@]}" python3 -m dynamo.vllm "${ARGS[@]}" --disaggregation-mode decode &
done
wait
"""
    code, out = check_script(tmp_path, capsys, text)
    assert code == 1 and "engines-share-gpu" in _errors(out), out
    fixed = (text.replace('"${BASE[@]}" python3 -m dynamo.vllm "${ARGS[@]}" --disaggregation-mode prefill',
                          'CUDA_VISIBLE_DEVICES=0 "${BASE[@]}" python3 -m dynamo.vllm "${ARGS[@]}" --disaggregation-mode prefill')
             .replace('"${BASE[@]}" python3 -m dynamo.vllm "${ARGS[@]}" --disaggregation-mode decode',
                      'CUDA_VISIBLE_DEVICES=1 "${BASE[@]}" python3 -m dynamo.vllm "${ARGS[@]}" --disaggregation-mode decode'))
    code, out = check_script(tmp_path, capsys, fixed)
    assert "engines-share-gpu" not in _errors(out), out
    # the repo's own fix (bd406b5): each worker's devices given to Apptainer with --env, read as the engine's
    prefill, decode = ('"${BASE[@]}" python3 -m dynamo.vllm "${ARGS[@]}" --disaggregation-mode ' + r
                       for r in ("prefill", "decode"))
    own = (text.replace(prefill, prefill.replace('" python3', '" --env CUDA_VISIBLE_DEVICES=0 python3'))
           .replace(decode, decode.replace('" python3', '" --env=CUDA_VISIBLE_DEVICES=1 python3')))
    code, out = check_script(tmp_path, capsys, own)
    assert "engines-share-gpu" not in _errors(out), out
    code, out = check_script(tmp_path, capsys, own.replace("CUDA_VISIBLE_DEVICES=1", "CUDA_VISIBLE_DEVICES=0"))
    assert code == 1 and "engines-share-gpu" in _errors(out), out


@pytest.mark.parametrize(("words", "env"), [
    (["apptainer", "exec", "--nv", "--env", "CUDA_VISIBLE_DEVICES=0,1", "img.sif"], {"CUDA_VISIBLE_DEVICES": "0,1"}),
    (["singularity", "run", "--env=A=1,B=2", "img.sif"], {"A": "1", "B": "2"}),
    (["srun", "apptainer", "exec", "--env", "X=a,b", "i"], {"X": "a,b"}),            # a comma inside a value
    (["docker", "run", "--env", "X=1", "img"], {}),                                    # not Apptainer's
    (["env", "X=1"], {}),
])
def test_apptainer_env_options_are_read(words, env):
    assert apptainer_env(words) == env
