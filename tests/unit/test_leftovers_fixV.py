"""Leftovers of issue 9 (fixV): each test names the vLLM source it follows.

1. DeepSeek V4 checkpoints carry an FP8 ``weight_block_size`` for their linear layers, but vLLM's
   ``DeepseekV4FP8Config.get_quant_method`` loads the routed experts as MXFP4 (or NVFP4) unless ``expert_dtype`` is
   ``fp8`` (models/deepseek_v4.py 0.20.0 l.120-158: always MXFP4; 0.20.1 l.193-204, 0.21.0 l.197-212;
   models/deepseek_v4/quant_config.py 0.22.0 l.132-160, 0.34.0 l.209-230; models/deepseek_v41/quant_config.py
   0.34.0 l.164-191, expert_dtype read from quantization_config by transformers_utils/configs/deepseek_v41.py
   l.49-50). The MXFP4 method pads the per-rank intermediate size (quantization/mxfp4.py 0.20.0 l.495-503) and has no
   block-divisibility error, so ``fp8-moe-block-tp-indivisible`` judges only FP8 experts.
"""

from __future__ import annotations

import json

import pytest

from tests.unit.test_turn2_variants import check, container, rules, workload

KV_P = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_producer"})
KV_D = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_consumer"})


def _v4_config(model_type="deepseek_v4", size=1536, expert_dtype=None, quant_extra=None):
    """A DeepSeek-V4-like config.json whose expert intermediate size does not split along 128-blocks at TP 8."""
    quant = {"quant_method": "fp8", "weight_block_size": [128, 128], "fmt": "e4m3", **(quant_extra or {})}
    config = {"architectures": ["DeepseekV4ForCausalLM"], "model_type": model_type, "hidden_size": 4096,
              "num_attention_heads": 64, "num_key_value_heads": 1, "num_hidden_layers": 43, "n_routed_experts": 256,
              "moe_intermediate_size": size, "torch_dtype": "bfloat16", "quantization_config": quant}
    if expert_dtype is not None:
        config["expert_dtype"] = expert_dtype
    return config


def _block_findings(tmp_path, capsys, config, image):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    docs = [workload(f"v4-{role}", role, container(["/models/dsv4", "--tensor-parallel-size", "8",
                                                    "--kv-transfer-config", kv], image=image, gpus=8), app="v4")
            for role, kv in (("prefill", KV_P), ("decode", KV_D))]
    _, out = check(tmp_path, capsys, *docs, extra=("--model-config", str(path)))
    return [f for r in out["results"] for f in r["findings"] if f["rule"] == "fp8-moe-block-tp-indivisible"]


@pytest.mark.parametrize(("config", "image"), [
    (_v4_config(expert_dtype="fp4"), "vllm/vllm-openai:v0.28.0"),            # V4-Flash: MXFP4 experts
    (_v4_config(), "vllm/vllm-openai:v0.24.0"),                              # no expert_dtype: fp4 by default
    (_v4_config(size=1296, expert_dtype="fp4"), "vllm/vllm-openai:v0.34.0"),  # 162 rows: not refinable if FP8
    (_v4_config(expert_dtype="fp8"), "vllm/vllm-openai:v0.20.0"),            # 0.20.0: every expert MXFP4
    (_v4_config("deepseek_v41_text", quant_extra={"expert_dtype": "fp4"}), "vllm/vllm-openai:v0.28.0"),
    (_v4_config(expert_dtype="fp4", quant_extra={"moe_quant_algo": "NVFP4"}), "vllm/vllm-openai:v0.28.0"),
])
def test_fp4_experts_of_a_deepseek_v4_checkpoint_are_not_judged_as_fp8_blocks(tmp_path, capsys, config, image):
    assert not _block_findings(tmp_path, capsys, config, image)


@pytest.mark.parametrize(("config", "image"), [
    (_v4_config(expert_dtype="fp8"), "vllm/vllm-openai:v0.28.0"),            # V4-Flash-Base: FP8 block experts
    (_v4_config(expert_dtype="fp8"), "vllm/vllm-openai:v0.20.1"),
    (_v4_config("deepseek_v41", size=1296, quant_extra={"expert_dtype": "fp8"}), "vllm/vllm-openai:v0.34.0"),
])
def test_fp8_experts_of_a_deepseek_v4_checkpoint_are_still_judged(tmp_path, capsys, config, image):
    found = _block_findings(tmp_path, capsys, config, image)
    assert found and {f["severity"] for f in found} == {"error"}, found


# 2. An empty word is a positional argument to vLLM's parser, as a word of blanks is: FlexibleArgumentParser.parse_args
#    rewrites only words starting with -- or -O (vllm/utils.py 0.9.1 l.1440-1531, vllm/utils/__init__.py 0.11.0
#    l.1848-1981, vllm/utils/argparse_utils.py 0.34.0 l.313-502) and argparse's _parse_optional returns None for an
#    empty word, so `vllm serve <model> ""` ends with 'unrecognized arguments' (exit 2).

def _cli_findings(tmp_path, capsys, *docs):
    code, out = check(tmp_path, capsys, *docs)
    return code, [f for r in out["results"] for f in r["findings"] if f["rule"] == "cli-option-malformed"]


def _pair_with_decode(d_container):
    p = container(["Qwen/Qwen3-8B", "--kv-transfer-config", KV_P], image=d_container["image"])
    return [workload("m-prefill", "prefill", p, app="m"), workload("m-decode", "decode", d_container, app="m")]


KVQ = "'" + KV_D + "'"


@pytest.mark.parametrize(("d_container", "said"), [
    (container(["Qwen/Qwen3-8B", "", "--kv-transfer-config", KV_D]), "an empty word"),
    (container(["Qwen/Qwen3-8B", "--kv-transfer-config", KV_D, ""], image="vllm/vllm-openai:v0.9.0"), "an empty word"),
    (container(["--model", "Qwen/Qwen3-8B", "--kv-transfer-config", KV_D, ""], image="vllm/vllm-openai:v0.34.0",
               command=["python3", "-m", "vllm.entrypoints.openai.api_server"]), "an empty word"),
    (container([f'EXTRA=""; vllm serve Qwen/Qwen3-8B "$EXTRA" --kv-transfer-config {KVQ}'], command=["bash", "-c"]),
     "an empty word"),
    (container(["Qwen/Qwen3-8B", "\t", "--kv-transfer-config", KV_D]), "a word of blanks only"),
])
def test_an_empty_word_is_refused_like_a_blank_one(tmp_path, capsys, d_container, said):
    code, found = _cli_findings(tmp_path, capsys, *_pair_with_decode(d_container))
    assert code == 1 and len(found) == 1 and said in found[0]["message"], found
    assert found[0]["severity"] == "error"


def test_an_empty_extra_arg_of_a_pddeployment_is_refused(tmp_path, capsys):
    spec = {"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment", "metadata": {"name": "m"},
            "spec": {"model": {"name": "Qwen/Qwen3-8B"}, "engine": {"image": "vllm/vllm-openai:v0.24.0"},
                     "prefill": {"tensorParallelSize": 1}, "decode": {"tensorParallelSize": 1, "extraArgs": [""]}}}
    code, found = _cli_findings(tmp_path, capsys, spec)
    assert code == 1 and found and "spec.decode.extraArgs" in found[0]["fix"], found


@pytest.mark.parametrize("script", [
    f'vllm serve Qwen/Qwen3-8B "$NOT_KNOWN" --kv-transfer-config {KVQ}',   # may hold anything: not judged
    f'EXTRA=""; vllm serve Qwen/Qwen3-8B $EXTRA --kv-transfer-config {KVQ}',  # unquoted: bash drops the word
])
def test_controls_words_that_are_not_known_to_be_empty(tmp_path, capsys, script):
    _, found = _cli_findings(tmp_path, capsys, *_pair_with_decode(container([script], command=["bash", "-c"])))
    assert not found, found


# 3. MoRIIOConnector workers bind handshake_port / notify_port + dp_rank + tp_rank (get_port_offset without its
#    tp_size: moriio_common.py 0.14.0 l.170-171 and l.205-221, 0.34.0 l.236-248 and l.352-398): two workers of one pod
#    meet on a port where DP ranks x TP ranks overlap, pipeline stages repeat the TP ranks, or the two bases are close.

def _moriio(role, extra=None):
    return json.dumps({"kv_connector": "MoRIIOConnector", "kv_role": role,
                       "kv_connector_extra_config": {"proxy_ip": "10.0.0.1", "proxy_ping_port": "36367",
                                                     "http_port": "8000", **(extra or {})}})


def _moriio_pair(image, d_args, d_extra=None, gpus=4):
    p = container(["Qwen/Qwen3-8B", "--kv-transfer-config", _moriio("kv_producer")], image=image)
    d = container(["Qwen/Qwen3-8B", *d_args, "--kv-transfer-config", _moriio("kv_consumer", d_extra)], image=image,
                  gpus=gpus)
    return [workload("m-prefill", "prefill", p, app="m"), workload("m-decode", "decode", d, app="m")]


def _collisions(tmp_path, capsys, *docs):
    code, out = check(tmp_path, capsys, *docs)
    return code, [f for r in out["results"] for f in r["findings"] if f["rule"] == "moriio-listener-port-collision"]


@pytest.mark.parametrize(("image", "d_args", "d_extra", "port"), [
    ("vllm/vllm-openai-rocm:v0.14.0", ("--data-parallel-size", "2", "--tensor-parallel-size", "2"), None, "6302"),
    ("vllm/vllm-openai-rocm:v0.34.0", ("-dp", "2", "-tp", "2"), {"handshake_port": "7000"}, "7001"),
    ("vllm/vllm-openai-rocm:v0.28.0", ("--data-parallel-size", "4", "--data-parallel-size-local", "2",
                                       "--data-parallel-start-rank", "2", "--tensor-parallel-size", "2"), None, "6302"),
    ("vllm/vllm-openai-rocm:v0.24.0", ("--pipeline-parallel-size", "2",), None, "6301"),
    ("vllm/vllm-openai-rocm:v0.20.0", ("--tensor-parallel-size", "4"), {"handshake_port": 9000, "notify_port": 9002},
     "9002"),
])
def test_two_workers_of_one_pod_binding_one_moriio_port_are_refused(tmp_path, capsys, image, d_args, d_extra, port):
    code, found = _collisions(tmp_path, capsys, *_moriio_pair(image, d_args, d_extra))
    assert code == 1 and len(found) == 1 and found[0]["severity"] == "error", found
    assert found[0]["message"].startswith("decode:") and f"port {port} twice" in found[0]["message"]


@pytest.mark.parametrize(("image", "d_args", "d_extra"), [
    ("vllm/vllm-openai-rocm:v0.34.0", ("--tensor-parallel-size", "8"), None),         # one DP rank: 6301..6308
    ("vllm/vllm-openai-rocm:v0.34.0", ("--data-parallel-size", "8"), None),           # TP 1: 6301..6308
    ("vllm/vllm-openai-rocm:v0.28.0", ("--data-parallel-size", "2", "--data-parallel-rank", "1",
                                       "--tensor-parallel-size", "4"), None),       # one DP rank in this pod
    ("vllm/vllm-openai-rocm:v0.24.0", ("--tensor-parallel-size", "$(TP)"), None),     # not a literal: not judged
    ("vllm/vllm-openai-rocm:v0.20.0", ("--tensor-parallel-size", "2"), {"handshake_port": 9000, "notify_port": 9002}),
])
def test_controls_moriio_ports_that_stay_apart(tmp_path, capsys, image, d_args, d_extra):
    _, found = _collisions(tmp_path, capsys, *_moriio_pair(image, d_args, d_extra))
    assert not found, found


# 4. MooncakeConnector's kv_lease_duration (mooncake_connector.py 0.34.0 l.703-712, l.1271-1290, l.1718-1731,
#    l.2947-2968, l.3009-3011): a value float() refuses or <= 0 stops the engine; a lease on one role only is a warning
#    (a pull fails only where a request waits longer than the prefill holds its blocks).

def _mooncake(role, lease=None):
    extra = {} if lease is None else {"kv_lease_duration": lease}
    return json.dumps({"kv_connector": "MooncakeConnector", "kv_role": role, "kv_connector_extra_config": extra})


def _mooncake_pair(image, p_lease=None, d_lease=None):
    return [workload(f"mc-{role}", role, container(["Qwen/Qwen3-8B", "--kv-transfer-config", _mooncake(kv, lease)],
                                                  image=image), app="mc")
            for role, kv, lease in (("prefill", "kv_producer", p_lease), ("decode", "kv_consumer", d_lease))]


def _lease_findings(tmp_path, capsys, docs):
    code, out = check(tmp_path, capsys, *docs)
    return code, [f for r in out["results"] for f in r["findings"] if f["rule"].startswith("mooncake-kv-lease")]


@pytest.mark.parametrize(("p_lease", "d_lease", "said"), [
    (None, 30, "not set on the prefill"),
    (None, "45.5", "not set on the prefill"),
    (60, None, "not set on the decode"),
    (5, 120, "lapses between renewals"),
])
def test_a_one_sided_kv_lease_is_a_warning(tmp_path, capsys, p_lease, d_lease, said):
    code, found = _lease_findings(tmp_path, capsys, _mooncake_pair("vllm/vllm-openai:v0.34.0", p_lease, d_lease))
    assert [(f["rule"], f["severity"]) for f in found] == [("mooncake-kv-lease-one-sided", "warning")], found
    assert said in found[0]["message"]


@pytest.mark.parametrize(("image", "p_lease", "d_lease"), [
    ("vllm/vllm-openai:v0.34.0", 30, "30"),        # the same seconds
    ("vllm/vllm-openai:v0.34.0", 60, 90),          # the prefill's renewal (40 s) outlasts the period (15 s)
    ("vllm/vllm-openai:v0.34.0", None, None),
    ("vllm/vllm-openai:v0.33.0", None, 30),        # not read before 0.34.0
])
def test_controls_kv_leases_that_hold(tmp_path, capsys, image, p_lease, d_lease):
    _, found = _lease_findings(tmp_path, capsys, _mooncake_pair(image, p_lease, d_lease))
    assert not found, found


@pytest.mark.parametrize(("image", "lease", "severity"), [
    ("vllm/vllm-openai:v0.34.0", 0, "error"),
    ("vllm/vllm-openai:v0.34.0", "30s", "error"),
    ("vllm/vllm-openai:v0.34.0", -5, "error"),
    ("vllm/vllm-openai:v0.34.0", "-1", "error"),
])
def test_a_kv_lease_vllm_refuses_stops_the_engine(tmp_path, capsys, image, lease, severity):
    _, found = _lease_findings(tmp_path, capsys, _mooncake_pair(image, lease, lease))
    assert {(f["rule"], f["severity"]) for f in found} == {("mooncake-kv-lease-invalid", severity)}, found
    assert {f["message"].split(":")[0] for f in found} == {"prefill", "decode"}


def test_an_invalid_kv_lease_on_an_unknown_release_is_named_where_the_pair_is_not_checked(tmp_path, capsys):
    _, out = check(tmp_path, capsys, *_mooncake_pair("vllm/vllm-openai:latest", "-1", "-1"))
    assert any("mooncake-kv-lease-invalid (vLLM 0.34.0" in n["reason"] for n in out["notChecked"]), out


def test_an_older_release_ignores_an_invalid_kv_lease(tmp_path, capsys):
    _, found = _lease_findings(tmp_path, capsys, _mooncake_pair("vllm/vllm-openai:v0.30.0", 0, 0))
    assert not found, found


# 6. kv-connector-missing beside a --kv-transfer-config that is no JSON object: vLLM's parser refuses the value
#    (vllm/engine/arg_utils.py 0.14.1 l.279-286 TypeAdapter(KVTransferConfig).validate_json; 0.9.0 l.163-192
#    KVTransferConfig(**json.loads(x))), so the finding names the parse error and how to write the JSON.

@pytest.mark.parametrize(("value", "image", "said"), [
    ("{kv_connector: NixlConnector, kv_role: kv_consumer}", "vllm/vllm-openai:v0.24.0", "is not valid JSON"),
    ("{'kv_connector': 'NixlConnector', 'kv_role': 'kv_consumer'}", "vllm/vllm-openai:v0.14.1", "single-quoted"),
    ('["NixlConnector"]', "vllm/vllm-openai:v0.11.0", "must be a JSON object"),
    ('{"kv_connector":"NixlConnector",', "vllm/vllm-openai:v0.34.0", "is not valid JSON"),
])
def test_an_unreadable_kv_transfer_config_is_said_to_be_unreadable(tmp_path, capsys, value, image, said):
    p = container(["Qwen/Qwen3-8B", "--kv-transfer-config", KV_P], image=image)
    d = container(["Qwen/Qwen3-8B", "--kv-transfer-config", value], image=image)
    code, out = check(tmp_path, capsys, workload("m-prefill", "prefill", p, app="m"),
                      workload("m-decode", "decode", d, app="m"))
    found = [f for r in out["results"] for f in r["findings"] if f["rule"] == "kv-connector-missing"]
    assert code == 1 and len(found) == 1, out
    assert "cannot be read" in found[0]["message"] and said in found[0]["message"], found
    assert "Add --kv-transfer-config" not in found[0]["fix"] and "double-quoted" in found[0]["fix"], found


def test_control_an_engine_without_kv_transfer_config_is_told_to_add_one(tmp_path, capsys):
    p = container(["Qwen/Qwen3-8B", "--kv-transfer-config", KV_P])
    d = container(["Qwen/Qwen3-8B"])
    _, out = check(tmp_path, capsys, workload("m-prefill", "prefill", p, app="m"),
                   workload("m-decode", "decode", d, app="m"))
    found = [f for r in out["results"] for f in r["findings"] if f["rule"] == "kv-connector-missing"]
    assert len(found) == 1 and found[0]["fix"].startswith("Add --kv-transfer-config"), found


# 5. A --config file's YAML mapping reaches vLLM as str(dict) up to 0.14.1 (refused by the flag's JSON parser) and as
#    JSON from 0.16.0 (vllm/utils/argparse_utils.py 0.14.1 l.489, 0.16.0 l.505, 0.34.0 l.668); where the release is
#    unknown or 0.15.x (not read) the engine is read as JSON and warned that the release decides.

def _config_file_pair(image, nested, command=("vllm", "serve")):
    from tests.unit.test_public_report_kinds_92 import MODELS, _engine_file, _pair
    files = {f"{r}.yaml": _engine_file(MODELS[0], r, nested=nested) for r in ("prefill", "decode")}
    return _pair(files, image, command=command)


def _mapping_findings(out):
    return [f for r in out["results"] for f in r["findings"] if f["rule"] == "config-file-mapping-release-dependent"]


@pytest.mark.parametrize(("image", "command"), [
    ("vllm/vllm-openai:v0.15.1", ("vllm", "serve")),
    ("vllm/vllm-openai:v0.15.0", None),                         # the image's entry point, args only
    ("registry.example.com/team/vllm:custom", ("vllm", "serve")),
    ("vllm/vllm-openai:v0.15.1", ("bash", "-c")),               # a script
])
def test_a_config_file_mapping_on_an_undecided_release_is_a_warning(tmp_path, capsys, image, command):
    docs = _config_file_pair(image, nested=True, command=command)
    if command == ("bash", "-c"):
        for doc in docs[1:]:
            c = doc["spec"]["template"]["spec"]["containers"][0]
            c["command"], c["args"] = ["bash", "-c"], [" ".join(["vllm", "serve", *c["command"][2:]])]
    code, out = check(tmp_path, capsys, *docs)
    found = _mapping_findings(out)
    assert {f["message"].split(":")[0] for f in found} == {"prefill", "decode"}, out
    assert {f["severity"] for f in found} == {"warning"} and "--kv-transfer-config" in found[0]["message"]
    assert "engine-args-invalid" not in rules(out, "error")


@pytest.mark.parametrize(("image", "nested"), [
    ("vllm/vllm-openai:v0.14.1", True),    # decided: str(dict), refused by engine-args-invalid
    ("vllm/vllm-openai:v0.16.0", True),    # decided: JSON
    ("vllm/vllm-openai:v0.15.1", False),   # a JSON string in the file: every release passes it on
])
def test_controls_config_files_whose_release_decides_nothing_open(tmp_path, capsys, image, nested):
    _, out = check(tmp_path, capsys, *_config_file_pair(image, nested))
    assert not _mapping_findings(out), out
