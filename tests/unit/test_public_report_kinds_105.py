"""Variants of what the hundred-and-fifth public-report set (tests/unit/data/public_reports_105: prefill and decode on
one host) taught, with negative controls.

1. A ``--max-model-len`` past the model's own context. vLLM derives the longest context from the model's config.json
   (the smallest length key, a ``model_max_length`` outright, times the RoPE factor unless su/longrope/llama3, yarn
   from ``original_max_position_embeddings``) and raises ValueError for a longer ``--max-model-len`` unless
   ``VLLM_ALLOW_LONG_MAX_MODEL_LEN`` is set (``_get_and_verify_max_len``: vllm/config.py 0.9.0 lines 3150-3280,
   config/model.py 0.11.0 lines 1763-1915, 0.28.0 lines 2328-2466). No rule compared the two: a decode given a 64K
   context for Qwen3-0.6B (40960) passed. The table of public config.json files now keeps the length keys and RoPE
   settings (not inherited by an ``also`` id, whose context may differ).

2. ``docker run --gpus device=N`` hands a container some of its host's GPUs, which it sees as devices 0, 1, ...; a
   ``CUDA_VISIBLE_DEVICES`` that keeps the host ordinal (``--gpus '"device=1"'`` with ``CUDA_VISIBLE_DEVICES=1``)
   names no device inside it, and the engine fails at startup (0.28.0 v1/worker/gpu_worker.py lines 369-373). The
   docker run reader did not read ``--gpus``; Compose's ``device_ids`` were read but not compared with
   ``CUDA_VISIBLE_DEVICES`` (one definition now: the visible list ends at its first ordinal past the handed GPUs).
   Two containers each handed one GPU and both using ``CUDA_VISIBLE_DEVICES=0`` were read as sharing GPU 0 (a false
   refusal): their devices are now compared as the host GPUs they were handed.

3. ``HIP_VISIBLE_DEVICES`` in a script on a ROCm host. vLLM's ROCm platform copies it into ``CUDA_VISIBLE_DEVICES``
   (vllm/platforms/rocm.py 0.23.0 lines 114-134), but the script reader counted the host's GPUs from
   ``CUDA_VISIBLE_DEVICES`` only, so two engines of a W7900 workstation both on GPUs 0-3 at 0.45 + 0.9 of their
   memory were not seen to share them.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.cli import main
from pdd_operator.vllm.max_model_len import context_limit
from pdd_operator.vllm.script import gpu_devices
from tests.unit.test_compose_inputs import _service
from tests.unit.test_turn2_variants import check, container, rules, workload

MML = "max-model-len-exceeds-model"
KV_P = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_producer"})
KV_D = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_consumer"})


def _run(tmp_path, capsys, text: str, name: str = "launch.sh") -> tuple[int, dict]:
    path = tmp_path / name
    path.write_text(text)
    code = main(["check", str(path), "-o", "json"])
    out = capsys.readouterr().out
    return code, (json.loads(out) if out.strip() else {})


def _script(model: str, p_flags: str = "", d_flags: str = "", p_env: str = "", d_env: str = "",
            head: str = "pip install vllm==0.28.0\n") -> str:
    return (f"{head}"
            f"CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 {p_env} vllm serve {model} --port 8100 {p_flags} "
            f"--kv-transfer-config '{KV_P}' &\n"
            f"CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5601 {d_env} vllm serve {model} --port 8200 {d_flags} "
            f"--kv-transfer-config '{KV_D}' &\nwait\n")


# --- 1. --max-model-len against the model's context ---------------------------------------------------------------


def test_context_limit_follows_vllms_derivation():
    assert context_limit({"max_position_embeddings": 40960}).derived == 40960
    # the smallest length key, then model_max_length outright (Command-R)
    assert context_limit({"max_position_embeddings": 8192, "seq_length": 4096}).derived == 4096
    limit = context_limit({"max_position_embeddings": 8192, "model_max_length": 131072})
    assert (limit.derived, limit.key, limit.model_max_length) == (131072, "model_max_length", 131072)
    # yarn: original x factor; linear/dynamic: factor x length; llama3, longrope, su: unscaled
    assert context_limit({"max_position_embeddings": 163840, "rope_scaling": {
        "type": "yarn", "factor": 40, "original_max_position_embeddings": 4096}}).derived == 163840
    assert context_limit({"max_position_embeddings": 32768, "rope_scaling": {
        "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}).derived == 131072
    assert context_limit({"max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 2}}).derived == 8192
    assert context_limit({"max_position_embeddings": 131072, "rope_scaling": {
        "rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192}}).derived == 131072
    # Gemma 3's length is already scaled; per-layer-type RoPE (transformers v5) keeps the factor
    assert context_limit({"max_position_embeddings": 131072, "rope_scaling": {"rope_type": "linear", "factor": 8}},
                         "gemma3_text").derived == 131072
    assert context_limit({"max_position_embeddings": 4096, "rope_parameters": {
        "full_attention": {"rope_type": "linear", "factor": 2.0}, "sliding_attention": {"rope_type": "default"}}}
    ).derived == 8192
    assert context_limit({"hidden_size": 8}) is None
    assert context_limit({"max_position_embeddings": 4096, "rope_scaling": {"factor": 2}}) is None  # no type


@pytest.mark.parametrize(("model", "flags", "refused"), [
    ("Qwen/Qwen3-0.6B", "--max-model-len 65536", True),            # 40960
    ("Qwen/Qwen3-0.6B", "--max-model-len 64k", True),              # vLLM's human_readable_int: 64,000
    ("Qwen/Qwen3-0.6B", "--max-model-len 40960", False),
    ("Qwen/Qwen3-0.6B", "--max-model-len 32768", False),
    ("deepseek-ai/DeepSeek-R1", "--max-model-len 200000", True),   # yarn 4096 x 40 = 163840
    ("deepseek-ai/DeepSeek-R1", "--max-model-len 163840", False),
    ("meta-llama/Meta-Llama-3.1-8B", "--max-model-len 262144", True),   # llama3 RoPE: 131072 unscaled
    ("meta-llama/Meta-Llama-3.1-8B", "--max-model-len 131072", False),
    # the same checkpoints under meta-llama's renamed ids (sources.json "same", fix H): judged
    ("meta-llama/Llama-3.1-8B", "--max-model-len 262144", True),
    ("meta-llama/Llama-3.1-8B-Instruct", "--max-model-len 262144", True),
    # an instruct release listed beside its base takes no context from it: not judged (a warning, fix H)
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", "--max-model-len 65536", False),
    # a flag that rewrites the config vLLM reads: not judged
    ("Qwen/Qwen3-0.6B", "--max-model-len 131072 --hf-overrides '{\"max_position_embeddings\": 131072}'", False),
])
def test_a_decode_past_its_models_context(tmp_path, capsys, model, flags, refused):
    code, out = _run(tmp_path, capsys, _script(model, d_flags=flags))
    assert (MML in rules(out, "error")) == refused, out
    if refused:
        assert code == 1


def test_a_table_copy_that_may_be_trimmed_only_warns(tmp_path, capsys):
    # the table's gpt-oss-120b and MiniMax-M2.5 copies name no dtype (possibly trimmed of a key that allows more)
    for model, asked in (("openai/gpt-oss-120b", 262144), ("MiniMaxAI/MiniMax-M2.5", 200000)):
        code, out = _run(tmp_path, capsys, _script(model, d_flags=f"--max-model-len {asked}"))
        assert MML in rules(out, "warning") and MML not in rules(out, "error"), out
    code, out = _run(tmp_path, capsys, _script("openai/gpt-oss-120b", d_flags="--max-model-len 131072"))
    assert MML not in rules(out), out


def test_the_long_context_env_allows_it_and_an_unknown_value_warns(tmp_path, capsys):
    code, out = _run(tmp_path, capsys, _script("Qwen/Qwen3-0.6B", d_flags="--max-model-len 65536",
                                               d_env="VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"))
    assert MML not in rules(out), out
    code, out = _run(tmp_path, capsys, _script("Qwen/Qwen3-0.6B", d_flags="--max-model-len 65536",
                                               d_env="VLLM_ALLOW_LONG_MAX_MODEL_LEN=0"))
    assert MML in rules(out, "error"), out
    code, out = _run(tmp_path, capsys, _script("Qwen/Qwen3-0.6B", d_flags="--max-model-len 65536",
                                               d_env="VLLM_ALLOW_LONG_MAX_MODEL_LEN=$LONG"))
    assert MML in rules(out, "warning") and MML not in rules(out, "error"), out


def test_a_deployment_and_a_prefill_past_the_context(tmp_path, capsys):
    docs = [workload("q-prefill", "prefill", container(["Qwen/Qwen3-0.6B", "--max-model-len", "65536",
                                                         "--kv-transfer-config", KV_P], image="vllm/vllm-openai:v0.11.0")),
            workload("q-decode", "decode", container(["Qwen/Qwen3-0.6B", "--kv-transfer-config", KV_D],
                                                     image="vllm/vllm-openai:v0.11.0"))]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and MML in rules(out, "error"), out
    prefill = docs[0]["spec"]["template"]["spec"]["containers"][0]
    prefill["envFrom"] = [{"configMapRef": {"name": "vllm-tuning"}}]  # not in these files: may allow it
    code, out = check(tmp_path, capsys, *docs)
    assert MML in rules(out, "warning") and MML not in rules(out, "error"), out
    del prefill["envFrom"]
    prefill["args"][2] = "40960"
    code, out = check(tmp_path, capsys, *docs)
    assert MML not in rules(out), out


def test_a_model_config_given_on_the_command_line_decides(tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                                  "num_key_value_heads": 8, "num_attention_heads": 32, "max_position_embeddings": 16384}))
    path = tmp_path / "launch.sh"
    path.write_text(_script("/models/my-llama", d_flags="--max-model-len 32768"))
    code = main(["check", str(path), "-o", "json", "--model-config", str(config)])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and MML in rules(out, "error"), out


# --- 2. GPUs handed to a container and CUDA_VISIBLE_DEVICES ---------------------------------------------------------


def test_gpu_devices_of_docker_run():
    assert gpu_devices('"device=0,1"') == ("0", "1")
    assert gpu_devices("device=1") == ("1",)
    assert gpu_devices('"device=2,0",capabilities=compute,utility') == ("2", "0")
    assert gpu_devices("all") is None and gpu_devices("2") is None and gpu_devices(None) is None


def _docker(p_gpus: str, d_gpus: str, d_cvd: str = "1") -> str:
    return (
        f"docker run -d --name p --network host --ipc host --gpus {p_gpus} -e CUDA_VISIBLE_DEVICES=0 "
        f"-e VLLM_NIXL_SIDE_CHANNEL_PORT=5600 vllm/vllm-openai:v0.28.0 Qwen/Qwen3-0.6B --port 8100 "
        f"--kv-transfer-config '{KV_P}'\n"
        f"docker run -d --name d --network host --ipc host --gpus {d_gpus} -e CUDA_VISIBLE_DEVICES={d_cvd} "
        f"-e VLLM_NIXL_SIDE_CHANNEL_PORT=5601 vllm/vllm-openai:v0.28.0 Qwen/Qwen3-0.6B --port 8200 "
        f"--kv-transfer-config '{KV_D}'\n")


@pytest.mark.parametrize(("d_gpus", "d_cvd", "refused"), [
    ("'\"device=1\"'", "1", True),      # the container's one GPU is its device 0
    ("device=1", "1", True),
    ("'\"device=1\"'", "0", False),
    ("'\"device=0,1\"'", "1", False),   # mutual visibility: device 1 is there
    ("all", "1", False),
    ("'\"device=2,3\"'", "1", False),   # two GPUs handed: device 1 is host GPU 3
    ("'\"device=2,3\"'", "2", True),    # host GPU 2 is the container's device 0: no device 2
])
def test_a_docker_container_given_fewer_gpus_than_its_ordinal(tmp_path, capsys, d_gpus, d_cvd, refused):
    code, out = _run(tmp_path, capsys, _docker("'\"device=0,1\"'", d_gpus, d_cvd))
    assert ("parallelism-gpu-count" in rules(out, "error")) == refused, out


@pytest.mark.parametrize(("p_gpus", "d_gpus", "shared"), [
    ("'\"device=0\"'", "'\"device=1\"'", False),   # device 0 of each container: host GPUs 0 and 1
    ("'\"device=0\"'", "'\"device=0\"'", True),
    ("'\"device=1,0\"'", "'\"device=1\"'", True),  # the prefill's device 0 is host GPU 1
    ("all", "'\"device=0\"'", True),                # --gpus all: device 0 is host GPU 0
])
def test_docker_containers_each_handed_a_gpu_are_compared_on_the_host(tmp_path, capsys, p_gpus, d_gpus, shared):
    code, out = _run(tmp_path, capsys, _docker(p_gpus, d_gpus, d_cvd="0"))
    assert ("engines-share-gpu" in rules(out, "error")) == shared, out


def test_a_compose_service_given_one_gpu_keeps_the_host_ordinal(tmp_path, capsys):
    port = "      - VLLM_NIXL_SIDE_CHANNEL_PORT=5600\n"
    decode = _service("decode", "--block-size 16", gpu="1").replace(port, port + "      - CUDA_VISIBLE_DEVICES=1\n")
    text = "services:\n" + _service("prefill", "--block-size 16") + decode
    code, out = _run(tmp_path, capsys, text, "compose.yml")
    assert code == 1 and "parallelism-gpu-count" in rules(out, "error"), out
    code, out = _run(tmp_path, capsys, text.replace("CUDA_VISIBLE_DEVICES=1", "CUDA_VISIBLE_DEVICES=0"), "compose.yml")
    assert "parallelism-gpu-count" not in rules(out), out


# --- 3. HIP_VISIBLE_DEVICES of a script on a ROCm host --------------------------------------------------------------


def _rocm(p_devices: str, d_devices: str, d_util: str = "") -> str:
    return (
        "export VLLM_SSM_CONV_STATE_LAYOUT=DS\n"
        f"HIP_VISIBLE_DEVICES={p_devices} VLLM_NIXL_SIDE_CHANNEL_PORT=5600 vllm serve Qwen/Qwen3-8B -tp 4 --port 8100 "
        f"--gpu-memory-utilization 0.45 --kv-transfer-config '{KV_P}' &\n"
        f"HIP_VISIBLE_DEVICES={d_devices} VLLM_NIXL_SIDE_CHANNEL_PORT=5610 vllm serve Qwen/Qwen3-8B -tp 4 --port 8200 "
        f"{d_util} --kv-transfer-config '{KV_D}' &\nwait\n")


@pytest.mark.parametrize(("p", "d", "util", "shared"), [
    ("0,1,2,3", "0,1,2,3", "", True),                               # 0.45 + 0.9
    ("0,1,2,3", "0,1,2,3", "--gpu-memory-utilization 0.45", False),  # 0.45 + 0.45
    ("0,1,2,3", "4,5,6,7", "", False),
    ("0,1,2,3", "3,4,5,6", "", True),                               # GPU 3 on both
])
def test_rocm_scripts_pick_gpus_with_hip_visible_devices(tmp_path, capsys, p, d, util, shared):
    code, out = _run(tmp_path, capsys, _rocm(p, d, util))
    assert ("engines-share-gpu" in rules(out, "error")) == shared, out
