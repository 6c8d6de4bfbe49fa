"""The leftovers of session 36's closing note that helper fixX took (each a kind, with variants that fail without it).

1. An empty default (``${X:-}``, ``${X-}``, ``${X:=}``) of a variable the input does not set is ``$X`` written to
   survive ``set -u``: the container's image, the pod's env, a sourced file or the caller may set X, so the word is
   X's unknown value, not an empty word vLLM's parser would refuse (pdd_operator.vllm.script._Shell.variable).
"""

from __future__ import annotations

import json

import pytest

from tests.unit.test_turn2_variants import check, container, workload

KV_P = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_producer"})
KV_D = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_consumer"})
KVQ = "'" + KV_D + "'"


def _pair_with_decode(d_container):
    p = container(["Qwen/Qwen3-8B", "--kv-transfer-config", KV_P], image=d_container["image"])
    return [workload("m-prefill", "prefill", p, app="m"), workload("m-decode", "decode", d_container, app="m")]


def _script(script, **kw):
    return _pair_with_decode(container([script], command=["bash", "-c"], **kw))


def _malformed(out):
    return [f for r in out["results"] for f in r["findings"] if f["rule"] == "cli-option-malformed"]


def _not_checked(out):
    return " ".join(n["reason"] for n in out.get("notChecked", []))


@pytest.mark.parametrize("word", ['"${EXTRA_ARGS:-}"', '"${EXTRA_ARGS-}"', '"${EXTRA_ARGS:=}"', '"${EXTRA_ARGS:-""}"',
                                  '"${EXTRA_ARGS:-}${MORE:-}"'])
def test_an_empty_default_of_a_variable_the_input_does_not_set_is_not_an_empty_word(tmp_path, capsys, word):
    code, out = check(tmp_path, capsys, *_script(f"vllm serve Qwen/Qwen3-8B {word} --kv-transfer-config {KVQ}"))
    assert not _malformed(out) and code == 3, (code, out)
    assert "EXTRA_ARGS" in _not_checked(out), out


@pytest.mark.parametrize(("script", "env"), [
    (f'EXTRA_ARGS=; vllm serve Qwen/Qwen3-8B "${{EXTRA_ARGS:-}}" --kv-transfer-config {KVQ}', ()),  # the script sets it
    (f'vllm serve Qwen/Qwen3-8B "${{EXTRA_ARGS:-}}" --kv-transfer-config {KVQ}',
     ({"name": "EXTRA_ARGS", "value": ""},)),                                                   # the container's env does
])
def test_controls_an_empty_word_the_input_does_make_is_still_refused(tmp_path, capsys, script, env):
    code, out = check(tmp_path, capsys, *_script(script, env=env))
    found = _malformed(out)
    assert code == 1 and len(found) == 1 and found[0]["severity"] == "error", out


def test_control_an_unquoted_empty_default_makes_no_word(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_script(f"vllm serve Qwen/Qwen3-8B ${{EXTRA_ARGS:-}} --kv-transfer-config {KVQ}"))
    assert code == 0 and not _malformed(out), out


@pytest.mark.parametrize("script", [  # a condition or an assignment keeps the default (set 22's E/P/D scripts)
    f'if [[ -z "${{AFFINITY:-}}" ]]; then GPU=0; else GPU=1; fi; '
    f'CUDA_VISIBLE_DEVICES=$GPU vllm serve Qwen/Qwen3-8B --kv-transfer-config {KVQ}',
    f'M=${{MORE:-}}; vllm serve Qwen/Qwen3-8B --kv-transfer-config {KVQ} $M',
])
def test_control_a_condition_or_assignment_keeps_the_empty_default(tmp_path, capsys, script):
    code, out = check(tmp_path, capsys, *_script(script))
    assert code == 0 and not _not_checked(out), out


def test_control_a_non_empty_default_is_still_read(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_script(
        f"vllm serve Qwen/Qwen3-8B --block-size ${{BS:-16}} --kv-transfer-config {KVQ}"))
    assert code == 0 and "BS" not in _not_checked(out), out


# 2. vLLM's gRPC server parses --host, --port and AsyncEngineArgs only (grpc_server.py main: 0.18.0 l.140-161,
#    launchers/grpc_server.py 0.34.0 l.289-310): the HTTP front end's flags are 'unrecognized arguments' there.

GRPC = ["python3", "-m", "vllm.entrypoints.grpc_server"]


def _grpc_pair(image, extra=(), module=GRPC):
    def one(role, kv):
        return workload(f"g-{role}", role, container(["--model", "Qwen/Qwen3-8B", "--port", "50051",
                                                      "--kv-transfer-config", kv, *extra], image=image,
                                                     command=module), app="g")
    return [one("prefill", KV_P), one("decode", KV_D)]


def _grpc_findings(out):
    return [f for r in out["results"] for f in r["findings"] if f["rule"] == "grpc-server-flag-unrecognised"]


@pytest.mark.parametrize(("image", "extra", "module", "severity"), [
    ("vllm/vllm-openai:v0.18.0", ("--tool-call-parser", "hermes", "--enable-auto-tool-choice"), GRPC, "error"),
    ("vllm/vllm-openai:v0.25.0", ("--api-key", "k"), GRPC, "error"),
    ("vllm/vllm-openai:v0.34.0", ("--api-server-count", "2"),
     ["python3", "-m", "vllm.entrypoints.launchers.grpc_server"], "error"),
    ("vllm/vllm-openai:v0.18.0", ("--disable-frontend-multiprocessing",), GRPC, "error"),
    ("my-registry/vllm-grpc:stable", ("--uvicorn-log-level", "info"), GRPC, "warning"),
])
def test_an_http_front_end_flag_on_the_grpc_server_is_refused(tmp_path, capsys, image, extra, module, severity):
    code, out = check(tmp_path, capsys, *_grpc_pair(image, extra, module))
    found = _grpc_findings(out)
    assert found and {f["severity"] for f in found} == {severity}, out
    assert extra[0] in found[0]["message"], found


@pytest.mark.parametrize(("image", "extra"), [
    ("vllm/vllm-openai:v0.25.0", ("--max-model-len", "4096", "--host", "0.0.0.0")),  # the engine's and its own
    ("vllm/vllm-openai:v0.34.0", ("--log-config-file", "/etc/log.json")),  # an engine flag from 0.31.0
    ("vllm/vllm-openai:v0.34.0", ("--config", "/etc/vllm.yaml")),  # FlexibleArgumentParser reads --config itself
])
def test_controls_flags_the_grpc_parser_defines_are_not_refused(tmp_path, capsys, image, extra):
    _, out = check(tmp_path, capsys, *_grpc_pair(image, extra))
    assert not _grpc_findings(out), out


def test_control_the_http_server_takes_its_own_flags(tmp_path, capsys):
    docs = [workload(f"h-{role}", role, container(["Qwen/Qwen3-8B", "--api-key", "k", "--kv-transfer-config", kv],
                                                  image="vllm/vllm-openai:v0.25.0"), app="h")
            for role, kv in (("prefill", KV_P), ("decode", KV_D))]
    _, out = check(tmp_path, capsys, *docs)
    assert not _grpc_findings(out), out


# 3. An image whose tag names no release: the vllm-version-unknown warning says where the release would come from
#    (a template value, a variable, a digest, a moving tag, another tag scheme) and the fix how to give it.

@pytest.mark.parametrize(("image", "said"), [
    ("vllm/vllm-openai:${VLLM_TAG}", "takes its tag from $VLLM_TAG"),
    ("vllm/vllm-openai:{{ .Values.vllm.tag }}", "takes its tag from the template value .Values.vllm.tag"),
    ("${IMAGE}", "takes its name from $IMAGE"),
    ("vllm/vllm-openai@sha256:" + "a" * 64, "pinned by digest"),
    ("vllm/vllm-openai:latest", "the moving tag latest"),
    ("registry.example.com/team/inference:prod-7", "tag prod-7 names no vLLM release"),
])
def test_an_unknown_release_names_where_it_would_come_from(tmp_path, capsys, image, said):
    docs = [workload(f"t-{role}", role, container(["Qwen/Qwen3-8B", "--kv-transfer-config", kv], image=image), app="t")
            for role, kv in (("prefill", KV_P), ("decode", KV_D))]
    _, out = check(tmp_path, capsys, *docs)
    found = [f for r in out["results"] for f in r["findings"] if f["rule"] == "vllm-version-unknown"]
    assert found and said in found[0]["message"], found
    assert "--vllm-version" in found[0]["fix"], found


def test_a_pddeployment_image_names_where_its_release_would_come_from(tmp_path, capsys):
    spec = {"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment", "metadata": {"name": "m"},
            "spec": {"model": {"name": "Qwen/Qwen3-8B"}, "engine": {"image": "vllm/vllm-openai:${VLLM_TAG}"},
                     "prefill": {"tensorParallelSize": 1}, "decode": {"tensorParallelSize": 1}}}
    _, out = check(tmp_path, capsys, spec)
    found = [f for r in out["results"] for f in r["findings"] if f["rule"] == "vllm-version-unknown"]
    assert found and "takes its tag from $VLLM_TAG" in found[0]["message"], found


# 4. A kv_connector no vLLM release read registers (factory.py _get_connector_class_with_compat: 'Unsupported
#    connector type'), on an unknown release: a warning naming it (a patched build may register it).

def _named_pair(image, name, module_path=None):
    def kv(role):
        config = {"kv_connector": name, "kv_role": role}
        if module_path:
            config["kv_connector_module_path"] = module_path
        return json.dumps(config)
    return [workload(f"c-{role}", role, container(["Qwen/Qwen3-8B", "--kv-transfer-config", kv(f"kv_{r}")],
                                                  image=image), app="c")
            for role, r in (("prefill", "producer"), ("decode", "consumer"))]


def _unregistered(out):
    return [f for r in out["results"] for f in r["findings"] if f["rule"] == "kv-connector-unregistered"]


@pytest.mark.parametrize("name", ["DynamoNixlConnector", "TorchDistributedConnector", "MadeUpConnector"])
def test_a_connector_no_release_registers_is_warned_on_an_unknown_release(tmp_path, capsys, name):
    code, out = check(tmp_path, capsys, *_named_pair("nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.1.0", name))
    # a pair of a connector these rules do not describe: its warning is what decides the "not checked" (engine.py
    # _foreign_connector), never a refusal
    said = _not_checked(out)
    assert code == 3 and not _unregistered(out), out
    assert f"kv-connector-unregistered: prefill: kv_connector {name} is registered by no vLLM release" in said, said


@pytest.mark.parametrize(("image", "name", "path"), [
    ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.1.0", "NixlConnector", None),  # vLLM registers it
    ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.1.0", "PyNcclConnector", None),  # 0.9.0-0.10.0's V0 factory does
    ("nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.1.0", "DynamoNixlConnector", "dynamo.connectors.nixl"),  # loaded by path
])
def test_controls_a_connector_some_release_registers_or_loads_is_not_warned(tmp_path, capsys, image, name, path):
    _, out = check(tmp_path, capsys, *_named_pair(image, name, path))
    assert not _unregistered(out) and "kv-connector-unregistered" not in _not_checked(out), out


def test_control_a_known_release_still_refuses_it(tmp_path, capsys):
    _, out = check(tmp_path, capsys, *_named_pair("vllm/vllm-openai:v0.20.0", "DynamoNixlConnector"))
    found = _unregistered(out)
    assert found and {f["severity"] for f in found} == {"error"}, out


# 5. --kv-cache-dtype auto on a ModelOpt checkpoint (resolve_kv_cache_dtype_string, vllm/utils/torch_utils.py 0.14.0
#    l.240-300, 0.34.0 l.463-535): the quant_method in any case, or producer.name modelopt with a ModelOpt quant_algo
#    (an hf_quant_config.json: model_arch_config_convertor.py _normalize_quantization_config sets quant_method), the
#    KV algorithm in any case; fp8 -> fp8_e4m3 from 0.14.0, nvfp4 -> nvfp4 from 0.20.0 only. The NIXL hash compares
#    the resolved strings (nixl/metadata.py compute_nixl_compatibility_hash "cache_dtype").

def _modelopt_config(tmp_path, quant):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "num_key_value_heads": 8,
                                "torch_dtype": "bfloat16", "quantization_config": quant}))
    return ["--model-config", str(path)]


MODELOPT_LOWER = {"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "fp8"}
MODELOPT_UPPER = {"quant_method": "ModelOpt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}
HF_QUANT_CONFIG = {"producer": {"name": "modelopt", "version": "0.29.0"},
                   "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}
NVFP4 = {"producer": {"name": "modelopt", "version": "0.29.0"},
         "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "NVFP4"}}


def _dtype_pair(image, p_kv, d_kv):
    p = ["Qwen/Qwen3-8B", "--kv-transfer-config", KV_P] + (["--kv-cache-dtype", p_kv] if p_kv else [])
    d = ["Qwen/Qwen3-8B", "--kv-transfer-config", KV_D] + (["--kv-cache-dtype", d_kv] if d_kv else [])
    return [workload("k-prefill", "prefill", container(p, image=image), app="k"),
            workload("k-decode", "decode", container(d, image=image), app="k")]


def _kv_mismatch(tmp_path, capsys, quant, image, p_kv, d_kv):
    _, out = check(tmp_path, capsys, *_dtype_pair(image, p_kv, d_kv), extra=_modelopt_config(tmp_path, quant))
    return {f["severity"] for r in out["results"] for f in r["findings"] if f["rule"] == "kv-cache-dtype-mismatch"}


@pytest.mark.parametrize("quant", [MODELOPT_LOWER, MODELOPT_UPPER, HF_QUANT_CONFIG])
@pytest.mark.parametrize(("p_kv", "d_kv", "refused"), [
    (None, "fp8_e4m3", False),   # auto resolves to fp8_e4m3: the same string
    ("auto", "fp8_e4m3", False),
    (None, "fp8", True),         # fp8 hashes apart from fp8_e4m3
    (None, "bfloat16", True),
])
def test_auto_on_a_modelopt_checkpoint_resolves_whatever_its_spelling(tmp_path, capsys, quant, p_kv, d_kv, refused):
    found = _kv_mismatch(tmp_path, capsys, quant, "vllm/vllm-openai:v0.25.0", p_kv, d_kv)
    assert (found == {"error"}) if refused else not found, found


NVFP4_METHOD = {"quant_method": "modelopt_fp4", "quant_algo": "NVFP4", "kv_cache_quant_algo": "nvfp4"}


@pytest.mark.parametrize("quant", [NVFP4, NVFP4_METHOD])
@pytest.mark.parametrize(("image", "refused"), [("vllm/vllm-openai:v0.19.1", True), ("vllm/vllm-openai:v0.20.0", False)])
def test_an_nvfp4_kv_checkpoint_resolves_auto_from_the_release_whose_map_has_it(tmp_path, capsys, quant, image,
                                                                                refused):
    found = _kv_mismatch(tmp_path, capsys, quant, image, None, "nvfp4")
    assert (found == {"error"}) if refused else not found, found


def test_control_a_checkpoint_of_another_producer_keeps_auto(tmp_path, capsys):
    quant = {"producer": {"name": "llm-compressor"}, "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}
    assert _kv_mismatch(tmp_path, capsys, quant, "vllm/vllm-openai:v0.25.0", None, "fp8_e4m3") == {"error"}


# 6. MoRIIO READ mode, 0.33.0 on: the decode's release goes to notify_port + global DP rank x prefill TP + TP rank
#    (moriio_connector.py 0.34.0 l.4037-4045), the prefill rank listens on notify_port + pod-local DP rank + TP rank
#    (moriio_common.py 0.34.0 l.354-357): apart only where the prefill's DP ranks span pods -> a warning (blocks held
#    for the 3600 s read abort timeout); in one pod they agree (or the listeners collide first).

def _moriio_kv(role, read=True):
    return json.dumps({"kv_connector": "MoRIIOConnector", "kv_role": role,
                       "kv_connector_extra_config": {"proxy_ip": "10.0.0.1", "proxy_ping_port": "36367",
                                                     "http_port": "8000", "read_mode": "true" if read else "false"}})


def _moriio_read_pair(image, p_args, read=True):
    p = container(["Qwen/Qwen3-8B", *p_args, "--kv-transfer-config", _moriio_kv("kv_producer", read)], image=image,
                  gpus=8)
    d = container(["Qwen/Qwen3-8B", "--kv-transfer-config", _moriio_kv("kv_consumer", read)], image=image)
    return [workload("r-prefill", "prefill", p, app="r"), workload("r-decode", "decode", d, app="r")]


def _release(out):
    return [f for r in out["results"] for f in r["findings"] if f["rule"] == "moriio-read-release-port-offset"]


@pytest.mark.parametrize(("image", "p_args"), [
    ("vllm/vllm-openai-rocm:v0.34.0", ("--data-parallel-size", "4", "--data-parallel-size-local", "2")),
    ("vllm/vllm-openai-rocm:v0.33.0", ("--data-parallel-size", "2", "--data-parallel-rank", "1")),
    ("vllm/vllm-openai-rocm:v0.34.0", ("--data-parallel-size", "4", "--data-parallel-size-local", "1",
                                       "--tensor-parallel-size", "2")),
])
def test_a_read_release_to_a_prefill_whose_dp_ranks_span_pods_is_warned(tmp_path, capsys, image, p_args):
    _, out = check(tmp_path, capsys, *_moriio_read_pair(image, p_args))
    found = _release(out)
    assert found and {f["severity"] for f in found} == {"warning"} and "3600 s" in found[0]["message"], out


@pytest.mark.parametrize(("image", "p_args", "read"), [
    ("vllm/vllm-openai-rocm:v0.34.0", ("--data-parallel-size", "4"), True),               # all DP ranks in one pod
    ("vllm/vllm-openai-rocm:v0.34.0", ("--data-parallel-size", "4", "--data-parallel-size-local", "2"), False),
    ("vllm/vllm-openai-rocm:v0.32.0", ("--data-parallel-size", "4", "--data-parallel-size-local", "2"), True),
])
def test_controls_read_releases_that_reach_their_listener(tmp_path, capsys, image, p_args, read):
    _, out = check(tmp_path, capsys, *_moriio_read_pair(image, p_args, read))
    assert not _release(out), out
