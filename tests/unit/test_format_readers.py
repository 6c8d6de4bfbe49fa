"""What the manifest readers must not misread (issue 9 items 1, 2 and 6), on manifests in each format's own shape.

A container is another engine than vLLM (SGLang, TensorRT-LLM) only when its image is one or its command runs one
(``python3 -m sglang.launch_server``, ``sglang serve``, ``trtllm-serve``); a flag whose VALUE names that engine
(llm-d's routing sidecar ``-connector=sglang``, a router's ``--backend sglang``) says which protocol a sidecar
speaks and never turns the pod's vLLM engine into an SGLang one.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.compat.manifests import program_words
from tests.unit.test_turn2_variants import check, container, rules, workload

NIXL = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})


# --- 2. a sidecar's flags are not an engine's ---------------------------------------------------------------------


def _sidecar_pair(sidecar: dict, model: str, image: str, native: bool) -> list[dict]:
    decode = container([model, "--port", "8200", "--kv-transfer-config", NIXL], image=image)
    pod = {"initContainers": [{**sidecar, "restartPolicy": "Always"}]} if native else {}
    d = workload("m-decode", "decode", decode, pod=pod, app="m")
    if not native:
        d["spec"]["template"]["spec"]["containers"].insert(0, sidecar)
    p = workload("m-prefill", "prefill", container([model, "--kv-transfer-config", NIXL], image=image), app="m")
    return [p, d]


@pytest.mark.parametrize(("sidecar", "model", "image"), [
    ({"name": "routing-proxy", "image": "ghcr.io/llm-d/llm-d-routing-sidecar:v0.2.0",
      "args": ["-port=8000", "-vllm-port=8200", "-connector=sglang"]}, "Qwen/Qwen2-0.5B", "vllm/vllm-openai:v0.10.0"),
    ({"name": "pd-sidecar", "image": "ghcr.io/llm-d/llm-d-inference-scheduler/pd-sidecar:v0.5.0",
      "args": ["--port=8000", "--vllm-port=8200", "--kv-connector", "sglang"]},
     "meta-llama/Llama-3.1-8B-Instruct", "vllm/vllm-openai:v0.20.0"),
    ({"name": "router", "image": "quay.io/me/router:1.2", "command": ["/router"],
      "args": ["--backend=sglang", "--prefill-url", "http://localhost:8200"]},
     "deepseek-ai/DeepSeek-V2-Lite", "vllm/vllm-openai:v0.14.0"),
])
@pytest.mark.parametrize("native", [True, False])
def test_a_sidecar_naming_sglang_as_a_flag_value_leaves_the_vllm_pair_judged(tmp_path, capsys, sidecar, model,
                                                                             image, native):
    code, out = check(tmp_path, capsys, *_sidecar_pair(sidecar, model, image, native))
    assert not out["notChecked"], out["notChecked"]
    assert len(out["results"]) == 1 and code == 0


@pytest.mark.parametrize("command", [
    ["python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B", "--disaggregation-mode", "decode"],
    ["bash", "-c", "exec python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --disaggregation-mode decode"],
    ["sglang", "serve", "--model-path", "Qwen/Qwen3-8B", "--disaggregation-mode", "decode"],
])
def test_a_container_that_runs_sglang_is_still_not_checked(tmp_path, capsys, command):
    """Negative control: where the command runs SGLang (its program or module), the engine is SGLang's."""
    sg = {"name": "engine", "image": "quay.io/me/engine:1", "command": command}
    docs = [workload("s-prefill", "prefill", {**sg, "command": [c.replace("decode", "prefill") for c in command]},
                     app="s"),
            workload("s-decode", "decode", sg, app="s")]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 3 and not out["results"]
    assert all("SGLang" in n["reason"] for n in out["notChecked"])


@pytest.mark.parametrize(("command", "words"), [
    (["-connector=sglang", "-v=6"], ["-connector", "-v"]),
    (["--kv-connector", "sglang", "--port", "8000"], ["--kv-connector", "--port", "8000"]),
    (["python3", "-m", "sglang.launch_server"], ["python3", "-m", "sglang.launch_server"]),
    (["mpirun", "--allow-run-as-root", "trtllm-serve", "m"], ["mpirun", "--allow-run-as-root", "trtllm-serve", "m"]),
    (["sh", "-c", "sglang serve --x 1 && echo done"], ["sh", "-c", "sglang", "serve", "--x", "1", "echo", "done"]),
])
def test_program_words(command, words):
    assert program_words(command) == words


def test_the_sidecar_does_not_hide_a_real_fault_of_the_pair(tmp_path, capsys):
    """The pair behind an SGLang-speaking sidecar is judged like any other: a KV dtype mismatch is still refused."""
    sidecar = {"name": "routing-proxy", "image": "ghcr.io/llm-d/llm-d-routing-sidecar:v0.3.0",
               "args": ["-vllm-port=8200", "-connector=sglang"]}
    docs = _sidecar_pair(sidecar, "Qwen/Qwen3-8B", "vllm/vllm-openai:v0.24.0", native=False)
    docs[1]["spec"]["template"]["spec"]["containers"][1]["args"] += ["--kv-cache-dtype", "fp8"]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error")
