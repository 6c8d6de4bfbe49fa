"""Variants of what the seventy-fourth public-report set (tests/unit/data/public_reports_74) taught, with negative
controls.

- Two engines on one GPU whose ``--gpu-memory-utilization`` sum to 1 or more, where an engine fixes its KV cache with
  ``--kv-cache-memory-bytes`` (Dynamo's tito_parity runner starts an upstream vLLM P/D pair that way on one GPU; a
  user dropping its ``--gpu-memory-utilization 0.01`` leaves vLLM's 0.9 on both). ``engines-share-gpu`` refused it as
  if the first engine held its whole 0.9 share, but with a fixed KV size vLLM returns that size from
  ``determine_available_memory`` (v1/worker/gpu_worker.py 0.10.2 lines 235-251, 0.24.0 lines 412-430, 0.34.0 lines
  688-705): the first engine holds its weights, activations and that KV cache, and the second's startup check (its
  utilization x the device free, v1/worker/utils.py request_memory 0.24.0 lines 405-420) passes or fails with the
  model's size and the device's memory. That is a warning now; with neither engine fixing its KV size (both start
  orders fail) it stays an error.
"""

from __future__ import annotations

from tests.unit.cli_check import check_text
from tests.unit.test_compose_inputs import _check as compose_check
from tests.unit.test_compose_inputs import _gpu_pair
from tests.unit.test_turn2_variants import check, rules

RULE = "engines-share-gpu"
KV = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
_ROLES = {"prefill": "kv_producer", "decode": "kv_consumer"}


def _script(tmp_path, capsys, version: str, model: str, prefill_extra: str = "", decode_extra: str = "",
            gpus: tuple[str, str] = ("0", "0")) -> tuple[int, dict]:
    lines = [f"pip install vllm=={version}"]
    for role, port, side, gpu, extra in (("decode", 8200, 5601, gpus[1], decode_extra),
                                         ("prefill", 8100, 5600, gpus[0], prefill_extra)):
        lines.append(f"# {role}")
        lines.append(f"CUDA_VISIBLE_DEVICES={gpu} VLLM_NIXL_SIDE_CHANNEL_PORT={side} vllm serve {model} --port {port} "
                     f"{extra} --kv-transfer-config '{KV.replace('kv_both', _ROLES[role])}' &")
    lines.append("wait")
    return check_text(tmp_path, capsys, "\n".join(lines) + "\n", "pd.sh")


def _finding(out: dict) -> dict:
    (finding,) = [f for r in out["results"] for f in r["findings"] if f["rule"] == RULE]
    return finding


def test_both_engines_with_a_fixed_kv_size_on_one_gpu_are_warned_not_refused(tmp_path, capsys):
    fixed = "--kv-cache-memory-bytes 8589934592"
    code, out = _script(tmp_path, capsys, "0.11.0", "meta-llama/Llama-3.1-8B-Instruct", fixed, fixed)
    assert code == 0 and RULE in rules(out, "warning") and RULE not in rules(out, "error"), out
    finding = _finding(out)
    assert "0.9 + 0.9 = 1.8" in finding["message"] and "--kv-cache-memory-bytes 8589934592" in finding["message"]
    assert "--gpu-memory-utilization" in finding["fix"]


def test_one_engine_with_a_fixed_kv_size_is_warned_and_named(tmp_path, capsys):
    code, out = _script(tmp_path, capsys, "0.34.0", "Qwen/Qwen3-8B", decode_extra="--kv-cache-memory-bytes=4G")
    assert code == 0 and RULE in rules(out, "warning") and RULE not in rules(out, "error"), out
    message = _finding(out)["message"]
    assert "decode --kv-cache-memory-bytes 4G fixes" in message and "prefill --kv-cache-memory-bytes" not in message


def test_without_a_fixed_kv_size_the_shared_gpu_stays_an_error(tmp_path, capsys):
    code, out = _script(tmp_path, capsys, "0.24.0", "Qwen/Qwen3-8B")
    assert code == 1 and RULE in rules(out, "error"), out


def test_a_fixed_kv_size_under_a_fitting_utilization_sum_or_on_separate_gpus_says_nothing(tmp_path, capsys):
    fixed = "--kv-cache-memory-bytes 4294967296"
    code, out = _script(tmp_path, capsys, "0.24.0", "Qwen/Qwen3-8B", f"{fixed} --gpu-memory-utilization 0.3",
                        f"{fixed} --gpu-memory-utilization 0.3")
    assert RULE not in rules(out), out
    code, out = _script(tmp_path, capsys, "0.24.0", "Qwen/Qwen3-8B", fixed, fixed, gpus=("0", "1"))
    assert RULE not in rules(out), out


def test_compose_services_on_one_host_gpu_with_a_fixed_kv_size_are_warned(tmp_path, capsys):
    text = _gpu_pair('["0"]').replace("--model Qwen/Qwen2.5-7B-Instruct", "--model Qwen/Qwen2.5-7B-Instruct "
                                      "--kv-cache-memory-bytes 2147483648")
    assert text.count("--kv-cache-memory-bytes") == 2
    code, out = compose_check(tmp_path, capsys, text)
    assert RULE in rules(out, "warning") and RULE not in rules(out, "error"), out
    code, out = compose_check(tmp_path, capsys, _gpu_pair('["0"]'))  # control: no fixed size, an error as before
    assert RULE in rules(out, "error"), out


def test_one_container_script_of_a_deployment_with_a_fixed_kv_size_is_warned(tmp_path, capsys):
    lines = [f"CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT={5600 + i} vllm serve Qwen/Qwen3-4B --port {8100 + i} "
             f"--kv-cache-memory-bytes 6000000000 --kv-transfer-config '{KV}' &" for i in range(2)]
    container = {"name": "vllm", "image": "vllm/vllm-openai:v0.20.1", "command": ["/bin/bash", "-c"],
                 "args": ["\n".join([*lines, "wait"])], "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    labels = {"app": "pd"}
    doc = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "pd", "labels": labels},
           "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                    "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}}}
    code, out = check(tmp_path, capsys, doc)
    assert RULE in rules(out, "warning") and RULE not in rules(out, "error"), out
