"""Variants of the kinds of fault the eleventh public-report set (tests/unit/data/public_reports_11) found, each with
negative controls: ``--block-size`` on one role only where vLLM's platform pins the other role's size (before 0.11.1,
a plain-attention model on CUDA/ROCm: 16, so a different size on the other role fails the handshake assert; the same
size passes; an MLA model, a CPU image or a vLLM from 0.29 on stays a warning that the size was not known), and a Dynamo
graph whose worker engine lines are one shell string in ``args`` with no ``command`` (read as the ``sh -c`` line
Dynamo's operator runs; a main container with a command is read as written)."""

from __future__ import annotations

from pdd_operator.compat.manifests import _dynamo_main_container
from pdd_operator.vllm.architectures import Architecture
from pdd_operator.vllm.block_size import default_block_size
from tests.unit.test_turn2_variants import check, rules

KV = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


def _deployment(role: str, image: str, args: list[str], gpu: str = "nvidia.com/gpu") -> dict:
    """One engine of a prefill/decode pair as a Deployment (labels ``app: t``, ``role: <role>``)."""
    labels = {"app": "t", "role": role}
    env = [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
    container = {"name": "vllm", "image": image, "command": ["vllm", "serve"], "args": args, "env": env,
                 "resources": {"limits": {gpu: "1"}} if gpu else {}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"t-{role}", "labels": labels},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}}}


def _pair(image: str, prefill: list[str], decode: list[str], model: str = "meta-llama/Llama-3.1-8B-Instruct",
          gpu: str = "nvidia.com/gpu") -> list[dict]:
    base = [model, "--kv-transfer-config", KV]
    return [_deployment("prefill", image, base + prefill, gpu), _deployment("decode", image, base + decode, gpu)]


# --- --block-size on one role only, the other pinned by vLLM's platform -----------------------------------------


def test_one_sided_block_size_against_the_cuda_default_is_refused_before_0111(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.10.2", ["--block-size", "32"], []))
    assert code == 1 and "block-size-hetero-unsupported" in rules(out, "error")
    (finding,) = [f for r in out["results"] for f in r["findings"] if f["rule"] == "block-size-hetero-unsupported"]
    assert "prefill 32, decode 16 (vLLM's default: no --block-size)" in finding["message"]
    assert "block-size-partial" not in rules(out)


def test_one_sided_block_size_equal_to_the_default_passes(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.11.0", [], ["--block-size", "16"]))
    assert code == 0 and not rules(out, "error") and "block-size-partial" not in rules(out)


def test_a_rocm_gpu_has_the_same_default(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair("rocm/vllm:v0.10.2", [], ["--block-size", "64"], gpu="amd.com/gpu"))
    assert code == 1 and "block-size-hetero-unsupported" in rules(out, "error")


def test_an_mla_model_is_not_given_the_default(tmp_path, capsys):
    # cuda.py forces FlashMLA's 64 (or CUTLASS MLA's 128 on Blackwell) for MLA models: the size depends on the GPU.
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.11.0", ["--block-size", "64"], [],
                                               model="deepseek-ai/DeepSeek-V2-Lite-Chat"))
    assert "block-size-hetero-unsupported" not in rules(out) and "block-size-partial" in rules(out, "warning")


def test_a_later_vllm_keeps_the_warning(tmp_path, capsys):
    # From 0.29 the CUDA default depends on the GPU and head size (FlashAttention 4 prefers 128 for head size 256);
    # up to 0.28 it is pinned at 16 (tests/unit/test_block_size_defaults.py).
    # A model whose head size is not known (a fine-tune the table of known configs lacks; Llama 3.1's own head
    # size 128 keeps 16 on every GPU, which pins the default).
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.30.0", ["--block-size", "32"], [],
                                              model="NousResearch/Hermes-3-Llama-3.1-8B"))
    assert code == 0 and "block-size-partial" in rules(out, "warning")


def test_default_block_size_needs_a_gpu_platform_and_a_plain_attention_model():
    gpu = {"nvidia.com/gpu": "1"}
    assert default_block_size((0, 11, 0), "example.com/my-vllm:1", gpu, Architecture.DENSE) == 16
    assert default_block_size((0, 11, 0), "vllm/vllm-openai:v0.11.0", {}, Architecture.MOE) == 16
    assert default_block_size((0, 11, 0), "vllm/vllm-tpu:v0.11.0", {}, Architecture.DENSE) is None
    assert default_block_size((0, 11, 0), "public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.11.0", {},
                              Architecture.DENSE) is None
    assert default_block_size((0, 11, 0), "vllm/vllm-openai:v0.11.0", gpu, Architecture.HYBRID_SSM) is None
    assert default_block_size((0, 11, 0), "vllm/vllm-openai:v0.11.0", gpu, None) is None
    assert default_block_size((0, 11, 1), "vllm/vllm-openai:v0.11.1", gpu, Architecture.DENSE) == 16
    assert default_block_size((0, 29, 0), "vllm/vllm-openai:v0.29.0", gpu, Architecture.DENSE) is None
    assert default_block_size(None, "vllm/vllm-openai:latest", gpu, Architecture.DENSE) is None


# --- a Dynamo main container whose args are one shell line -----------------------------------------------------


def _dgd(image: str, decode_line: str, prefill_line: str, command: list[str] | None = None) -> dict:
    def worker(line: str) -> dict:
        main = {"image": image, "args": [line]} | ({"command": command} if command else {})
        return {"componentType": "worker", "replicas": 1, "resources": {"limits": {"gpu": "1"}},
                "extraPodSpec": {"mainContainer": main}}
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
            "spec": {"services": {"VllmDecodeWorker": worker(decode_line), "VllmPrefillWorker": worker(prefill_line)}}}


LINE = "python3 -m dynamo.vllm --model Qwen/Qwen3-0.6B --enforce-eager"


def test_args_only_shell_lines_of_a_dynamo_graph_are_read(tmp_path, capsys):
    doc = _dgd("nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1", f"{LINE} 2>&1 | tee /tmp/vllm.log",
               f"{LINE} --is-prefill-worker 2>&1 | tee /tmp/vllm.log")
    code, out = check(tmp_path, capsys, doc)
    assert code == 0 and len(out["results"]) == 1 and not out["notChecked"]


def test_a_fault_in_args_only_shell_lines_is_found(tmp_path, capsys):
    doc = _dgd("nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1", f"{LINE} --block-size 32 | tee /tmp/vllm.log",
               f"{LINE} --is-prefill-worker | tee /tmp/vllm.log")
    code, out = check(tmp_path, capsys, doc)
    assert code == 1 and "block-size-hetero-unsupported" in rules(out, "error")


def test_a_main_container_with_its_own_command_is_read_as_written():
    # An explicit command, or args as separate words (what an exec-form entrypoint takes), are not a shell line.
    with_command = {"command": ["python3", "-m", "dynamo.vllm"], "args": [LINE]}
    words = {"args": ["--model", "Qwen/Qwen3-0.6B"]}
    assert _dynamo_main_container(with_command) is with_command and _dynamo_main_container(words) is words
    assert _dynamo_main_container({"args": [LINE]})["command"] == ["sh", "-c"]


def test_args_as_words_after_an_exec_form_command_are_flags(tmp_path, capsys):
    command = ["python3", "-m", "dynamo.vllm", "--model", "Qwen/Qwen3-0.6B"]
    doc = _dgd("nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1", "--enforce-eager", "--is-prefill-worker", command=command)
    doc["spec"]["services"]["VllmDecodeWorker"]["extraPodSpec"]["mainContainer"]["args"] = ["--block-size", "32"]
    code, out = check(tmp_path, capsys, doc)
    assert code == 1 and "block-size-hetero-unsupported" in rules(out, "error")


# --- kind-less P/D documents that are not Helm values: not checked, with a reason in their own terms -----------


def _reason(tmp_path, capsys, doc: dict) -> str:
    code, out = check(tmp_path, capsys, doc)
    assert code == 3 and len(out["notChecked"]) == 1 and not out["results"]
    return out["notChecked"][0]["reason"]


def test_a_ray_serve_config_is_read_as_ray_serve_llmconfigs_not_as_helm_values(tmp_path, capsys):
    """Ray Serve LLM P/D applications are read as the engines Ray builds from their LLMConfigs now
    (compat/ray_serve.py, issue 9 fixR; until then this file was "not checked" as a Ray Serve config): the pair is
    judged and named by its LLMConfigs, never as Helm values. One given as a file path stays not checked."""
    llm = {"model_loading_config": {"model_id": "Qwen/Qwen3-0.6B"},
           "engine_kwargs": {"kv_transfer_config": {"kv_connector": "NixlConnector", "kv_role": "kv_both"}}}
    doc = {"applications": [{"name": "pd", "import_path": "ray.serve.llm:build_pd_openai_app",
                             "args": {"prefill_config": llm, "decode_config": llm}}]}
    code, out = check(tmp_path, capsys, doc)
    (result,) = out["results"]
    assert "applications[pd].args.prefill_config" in result["object"] and not out["notChecked"], out
    doc["applications"][0]["args"]["prefill_config"] = "./configs/qwen3.yaml"
    reason = _reason(tmp_path, capsys, doc)
    assert "Ray Serve LLM" in reason and "helm" not in reason


def test_a_dynamo_serve_config_is_not_checked_as_dynamo_serve(tmp_path, capsys):
    doc = {"Common": {"model": "Qwen/Qwen3-0.6B", "kv-transfer-config": '{"kv_connector":"DynamoNixlConnector"}'},
           "VllmWorker": {"remote-prefill": True, "common-configs": ["model", "kv-transfer-config"]},
           "PrefillWorker": {"ServiceArgs": {"workers": 1}, "common-configs": ["model", "kv-transfer-config"]}}
    reason = _reason(tmp_path, capsys, doc)
    assert "dynamo serve" in reason and "helm" not in reason


def test_a_compose_file_is_read_as_compose_services(tmp_path, capsys):
    """Compose services are read as engines now (compat/compose_inputs.py, issue 9; until then this file was "not
    checked" as a Compose file): the pair is judged and named by its services, never as Helm values."""
    cmd = f"vllm serve Qwen/Qwen3-0.6B --kv-transfer-config '{KV}'"
    doc = {"services": {"prefill": {"image": "vllm/vllm-openai:v0.20.0", "entrypoint": cmd},
                        "decode": {"image": "vllm/vllm-openai:v0.20.0", "entrypoint": cmd}}}
    code, out = check(tmp_path, capsys, doc)
    (result,) = out["results"]
    assert "(Compose) services.prefill.entrypoint" in result["object"], out
    assert not any("helm" in s["reason"] for s in out["notChecked"])


def test_helm_values_keep_the_helm_reason(tmp_path, capsys):
    doc = {"servingEngineSpec": {"modelSpec": [{"name": "p", "lmcacheConfig": {"kvRole": "kv_producer"}},
                                               {"name": "d", "lmcacheConfig": {"kvRole": "kv_consumer"}}]}}
    assert "helm template" in _reason(tmp_path, capsys, doc)
