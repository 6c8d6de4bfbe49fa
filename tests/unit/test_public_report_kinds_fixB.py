"""Variants of what set 107 (tests/unit/data/public_reports_107, vllm-project/vllm#52627: Kimi-K3 on vLLM 0.26.0)
taught: names vLLM checks against the release that runs it, with negative controls.

1. ``architecture-not-in-release``: the architecture is not in the release's model registry (``_VLLM_MODELS``,
   vllm/model_registry.json from the sdists 0.18.0-0.34.0). With ``--model-impl vllm`` ``inspect_model_cls`` raises
   (registry.py ``_raise_for_unsupported``): an error. With ``auto`` (the default) the Transformers backend may take
   the model: a warning. ``--model-impl transformers``, ``--model-class-overrides`` and releases read that hold the
   name: nothing. A release not read between two that disagree: nothing; before 0.18.0: a warning.
2. ``engine-args-invalid`` for parser names: ``--tool-call-parser`` (with ``--enable-auto-tool-choice``) and
   ``--reasoning-parser`` that the release's OpenAI server does not register (validate_api_server_args raises
   KeyError before it serves); not without ``--enable-auto-tool-choice``, with a plugin, under ``--headless`` or in
   Dynamo's worker (no vLLM API server).
3. ``engine-args-invalid`` for a ``--speculative-config`` ``method`` the release's ``SpeculativeMethod`` lacks, and for
   an ``--attention-backend`` its ``AttentionBackendEnum`` lacks.
"""

from __future__ import annotations

import json

import pytest
import yaml

from pdd_operator.vllm.attention_backends import backend_name_table
from pdd_operator.vllm.model_registry import known_name, registry_holds, releases_read
from pdd_operator.vllm.parser_names import PARSER_FLAGS, parser_table
from pdd_operator.vllm.speculative_methods import method_table
from tests.unit.test_turn2_variants import check, container, rules, workload

KV_P = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_producer"})
KV_D = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_consumer"})
KIMI = "moonshotai/Kimi-K3"
QWEN = "Qwen/Qwen3-8B"
SSM_ENV = [{"name": "VLLM_SSM_CONV_STATE_LAYOUT", "value": "DS"}]


def _pair(tmp_path, capsys, model, args, tag, *, d_args=None, extra=(), gpus=8):
    """A Deployment pair of ``model`` on vllm/vllm-openai:``tag``, both roles with ``args`` (decode: ``d_args``)."""
    docs = []
    for role, kv, more in (("prefill", KV_P, args), ("decode", KV_D, args if d_args is None else d_args)):
        c = container([model, "--tensor-parallel-size", str(gpus), "--kv-transfer-config", kv, *more],
                      image=f"vllm/vllm-openai:{tag}", gpus=gpus, env=SSM_ENV)
        docs.append(workload(f"m-{role}", role, c, app="m"))
    return check(tmp_path, capsys, *docs, extra=extra)


def _findings(out, rule, severity):
    return [f for r in out["results"] for f in r["findings"] if f["rule"] == rule and f["severity"] == severity]


# --- 1. the architecture against the release's model registry -----------------------------------------------------


def test_registry_table_reads_kimi_k3_from_0270():
    assert registry_holds("KimiK3ForConditionalGeneration", (0, 26, 0)) is False
    assert registry_holds("KimiK3ForConditionalGeneration", (0, 27, 0)) is True
    assert registry_holds("KimiK3ForConditionalGeneration", (0, 27, 1)) is None  # not read
    assert registry_holds("KimiK3ForConditionalGeneration", (0, 35, 0)) is True  # the newest read holds it
    assert registry_holds("KimiK31ForConditionalGeneration", (0, 33, 0)) is False
    # _normalize_arch swaps task suffixes: a ...ForCausalLM name reaches the ...ForConditionalGeneration class
    assert known_name("KimiK3ForCausalLM") and registry_holds("KimiK3ForCausalLM", (0, 27, 0)) is True
    assert not known_name("MadeUpForCausalLM")
    assert releases_read()[0] == (0, 18, 0) and releases_read()[-1] == (0, 34, 0)


def test_kimi_k3_with_model_impl_vllm_on_0260_is_refused(tmp_path, capsys):
    code, out = _pair(tmp_path, capsys, KIMI, ["--model-impl", "vllm"], "v0.26.0")
    assert code == 1 and "architecture-not-in-release" in rules(out, "error"), out
    message = _findings(out, "architecture-not-in-release", "error")[0]["message"]
    assert "KimiK3ForConditionalGeneration" in message and "0.27.0" in message


def test_kimi_k3_with_the_default_model_impl_on_0260_is_a_warning(tmp_path, capsys):
    code, out = _pair(tmp_path, capsys, KIMI, [], "v0.26.0")
    assert "architecture-not-in-release" not in rules(out, "error"), out
    assert "architecture-not-in-release" in rules(out, "warning"), out
    assert "Transformers backend" in _findings(out, "architecture-not-in-release", "warning")[0]["message"]


@pytest.mark.parametrize(("args", "tag"), [
    (["--model-impl", "vllm"], "v0.27.0"),          # registered from 0.27.0
    (["--model-impl", "vllm"], "v0.28.0"),
    (["--model-impl", "transformers"], "v0.26.0"),  # the registry is not asked
    (["--model-impl", "vllm", "--model-class-overrides",
      '{"KimiK3ForConditionalGeneration": "my_pkg.kimi:KimiK3"}'], "v0.26.0"),
    (["--model-impl", "vllm"], "v0.26.1"),          # not read, between 0.26.0 (lacks it) and 0.27.0 (has it)
])
def test_kimi_k3_where_the_registry_is_not_in_the_way_passes_that_rule(tmp_path, capsys, args, tag):
    code, out = _pair(tmp_path, capsys, KIMI, args, tag)
    assert "architecture-not-in-release" not in rules(out), out


def test_a_release_before_the_registries_read_is_a_warning(tmp_path, capsys):
    code, out = _pair(tmp_path, capsys, "/models/Kimi-K3", ["--model-impl", "vllm"], "v0.15.1")
    assert "architecture-not-in-release" in rules(out, "warning"), out
    assert "architecture-not-in-release" not in rules(out, "error"), out


def test_a_dropped_architecture_from_its_config_json_is_refused_after_it_left(tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"architectures": ["AquilaForCausalLM"], "model_type": "aquila", "hidden_size": 4096,
                                  "num_attention_heads": 32, "num_key_value_heads": 32, "num_hidden_layers": 32,
                                  "torch_dtype": "bfloat16"}))
    code, out = _pair(tmp_path, capsys, "/models/aquila-7b", ["--model-impl", "vllm"], "v0.26.0", gpus=1,
                      extra=("--model-config", str(config)))
    assert code == 1 and "architecture-not-in-release" in rules(out, "error"), out
    assert "until 0.24.0" in _findings(out, "architecture-not-in-release", "error")[0]["message"]
    code, out = _pair(tmp_path, capsys, "/models/aquila-7b", ["--model-impl", "vllm"], "v0.24.0", gpus=1,
                      extra=("--model-config", str(config)))
    assert "architecture-not-in-release" not in rules(out), out


def test_a_pddeployment_naming_hf_architecture_is_refused_on_a_release_without_it(tmp_path, capsys):
    spec = {"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment", "metadata": {"name": "step"},
            "spec": {"model": {"name": "stepfun-ai/Step-5", "hfArchitecture": "Step5ForCausalLM"},
                     "engine": {"image": "vllm/vllm-openai:v0.32.0"},
                     "prefill": {"tensorParallelSize": 8, "extraArgs": ["--model-impl", "vllm"]},
                     "decode": {"tensorParallelSize": 8, "extraArgs": ["--model-impl", "vllm"]}}}
    code, out = check(tmp_path, capsys, spec)
    assert code == 1 and "architecture-not-in-release" in rules(out, "error"), out
    spec["spec"]["engine"]["image"] = "vllm/vllm-openai:v0.33.0"
    code, out = check(tmp_path, capsys, spec)
    assert "architecture-not-in-release" not in rules(out), out


def _graph(tmp_path, tag, extra):
    services = {"Frontend": {"componentType": "frontend", "replicas": 1,
                             "extraPodSpec": {"mainContainer": {
                                 "image": f"nvcr.io/nvidia/ai-dynamo/vllm-runtime:{tag}"}}}}
    for name, role in (("VllmPrefillWorker", ["--is-prefill-worker"]), ("VllmDecodeWorker", [])):
        words = ["--model", KIMI, "--tensor-parallel-size", "8", *extra, *role]
        services[name] = {"componentType": "worker", "replicas": 1, "resources": {"limits": {"gpu": "8"}},
                          "extraPodSpec": {"mainContainer": {
                              "image": f"nvcr.io/nvidia/ai-dynamo/vllm-runtime:{tag}",
                              "command": ["python3", "-m", "dynamo.vllm"], "args": words,
                              "env": SSM_ENV}}}
    path = tmp_path / "graph.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment",
                                    "metadata": {"name": "g"}, "spec": {"services": services}}))
    return path


def test_a_dynamo_graph_on_a_runtime_whose_vllm_lacks_the_model_is_refused(tmp_path, capsys):
    from pdd_operator.cli import main

    main(["check", str(_graph(tmp_path, "1.4.0", ["--model-impl", "vllm"])), "-o", "json"])  # vLLM 0.26.0
    out = json.loads(capsys.readouterr().out)
    assert "architecture-not-in-release" in rules(out, "error"), out
    main(["check", str(_graph(tmp_path, "1.5.0", ["--model-impl", "vllm"])), "-o", "json"])  # vLLM 0.28.0
    out = json.loads(capsys.readouterr().out)
    assert "architecture-not-in-release" not in rules(out), out


# --- 2. parser names ----------------------------------------------------------------------------------------------


TOOLS = ["--enable-auto-tool-choice", "--tool-call-parser"]


@pytest.mark.parametrize(("model", "args", "tag", "name"), [
    (KIMI, [*TOOLS, "kimi_k3"], "v0.26.0", "kimi_k3"),                           # set 107's, tool parser
    (KIMI, ["--reasoning-parser", "kimi_k3"], "v0.26.0", "kimi_k3"),             # its reasoning parser
    ("deepseek-ai/DeepSeek-V4-Flash", ["--reasoning-parser", "deepseek_v4"], "v0.19.1", "deepseek_v4"),  # 0.20.0 on
    ("MiniMaxAI/MiniMax-M1-80k", [*TOOLS, "minimax"], "v0.24.0", "minimax"),     # dropped after 0.23.0
    (QWEN, ["--reasoning-parser", "qwen3-thinking"], "v0.28.0", "qwen3-thinking"),  # no release has it
])
def test_a_parser_name_the_release_does_not_register_is_refused(tmp_path, capsys, model, args, tag, name):
    code, out = _pair(tmp_path, capsys, model, args, tag, gpus=1)
    assert code == 1 and "engine-args-invalid" in rules(out, "error"), out
    assert any(name in f["message"] and "validate_api_server_args" in f["message"]
               for f in _findings(out, "engine-args-invalid", "error")), out


@pytest.mark.parametrize(("args", "tag"), [
    ([*TOOLS, "kimi_k3", "--reasoning-parser", "kimi_k3"], "v0.27.0"),    # registered from 0.27.0
    (["--tool-call-parser", "kimi_k3"], "v0.26.0"),                       # checked only with auto tool choice
    ([*TOOLS, "kimi_k3", "--tool-parser-plugin", "/plugins/kimi_k3.py"], "v0.26.0"),  # a plugin may register it
    ([*TOOLS, "hermes", "--reasoning-parser", "qwen3"], "v0.26.0"),
    (["--reasoning-parser", "deepseek_v4"], "v0.15.1"),                   # before the releases read: not judged
])
def test_parser_names_that_start_pass(tmp_path, capsys, args, tag):
    code, out = _pair(tmp_path, capsys, QWEN, args, tag, gpus=1)
    assert not any("parser" in f["message"] for f in _findings(out, "engine-args-invalid", "error")), out


def test_a_headless_engine_serves_no_api_and_checks_no_parser(tmp_path, capsys):
    code, out = _pair(tmp_path, capsys, QWEN, ["--headless", "--reasoning-parser", "kimi_k3"], "v0.26.0", gpus=1)
    assert not any("parser" in f["message"] for f in _findings(out, "engine-args-invalid", "error")), out


def test_dynamo_workers_do_not_run_vllms_api_server_parser_check(tmp_path, capsys):
    from pdd_operator.cli import main

    main(["check", str(_graph(tmp_path, "1.4.0", ["--reasoning-parser", "kimi_k3"])), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert not any("parser" in f["message"] for f in _findings(out, "engine-args-invalid", "error")), out


def test_a_pddeployment_parser_in_extra_args_is_judged(tmp_path, capsys):
    spec = {"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment", "metadata": {"name": "q"},
            "spec": {"model": {"name": QWEN}, "engine": {"image": "vllm/vllm-openai:v0.26.0"},
                     "prefill": {"extraArgs": ["--reasoning-parser", "kimi_k3"]},
                     "decode": {"extraArgs": ["--reasoning-parser", "kimi_k3"]}}}
    code, out = check(tmp_path, capsys, spec)
    assert code == 1 and "engine-args-invalid" in rules(out, "error"), out


# --- 3. speculative methods and attention backends ----------------------------------------------------------------


def _spec(method):
    return ["--speculative-config", json.dumps({"method": method, "num_speculative_tokens": 3})]


@pytest.mark.parametrize(("method", "tag", "verdict"), [
    ("dspark", "v0.24.0", "error"),        # SpeculativeMethod has dspark from 0.25.0
    ("dspark", "v0.25.0", None),
    ("medusa", "v0.33.0", "error"),        # medusa ends with 0.32.0
    ("medusa", "v0.32.0", None),
    ("kimi_k3_mtp", "v0.26.0", "error"),   # from 0.27.0
    ("my_plugin_method", "v0.34.0", "warning"),  # 0.34.0 admits a method a plugin registers
    ("ngram", "v0.26.0", None),
])
def test_speculative_methods_against_the_release(tmp_path, capsys, method, tag, verdict):
    code, out = _pair(tmp_path, capsys, QWEN, _spec(method), tag, gpus=1)
    said = {sev for sev in ("error", "warning") for f in _findings(out, "engine-args-invalid", sev)
            if "speculative method" in f["message"]}
    assert said == ({verdict} if verdict else set()), out


@pytest.mark.parametrize(("backend", "tag", "refused"), [
    ("TURBOQUANT", "v0.19.1", True),       # AttentionBackendEnum has it from 0.20.0
    ("TREE_ATTN", "v0.21.0", True),        # gone after 0.20.2
    ("tree_attn", "v0.20.2", False),       # looked up upper-cased
    ("FLASH_ATTN", "v0.26.0", False),
    ("auto", "v0.26.0", False),
])
def test_attention_backend_names_against_the_release(tmp_path, capsys, backend, tag, refused):
    code, out = _pair(tmp_path, capsys, QWEN, ["--attention-backend", backend], tag, gpus=1)
    found = [f for f in _findings(out, "engine-args-invalid", "error") if "Unknown attention backend" in f["message"]]
    assert bool(found) == refused, out


# --- the tables -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("table", [parser_table(f) for f in PARSER_FLAGS] + [method_table(), backend_name_table()],
                         ids=[*PARSER_FLAGS, "speculative-method", "attention-backend"])
def test_each_name_spans_its_releases_without_a_gap(table):
    data_file = {"--tool-call-parser": "parser_names.json", "--reasoning-parser": "parser_names.json",
                 "--speculative-config method": "speculative_methods.json",
                 "--attention-backend": "attention_backend_names.json"}[table.flag]
    from pathlib import Path

    import pdd_operator.vllm as pkg

    raw = json.loads((Path(pkg.__file__).parent / data_file).read_text())
    key = {"--tool-call-parser": "tool", "--reasoning-parser": "reasoning",
           "--speculative-config method": "method", "--attention-backend": "backend"}[table.flag]
    releases = raw["releases"]
    assert tuple(int(p) for p in releases[0].split(".")) == table.read[0]
    for name, found in raw[key].items():
        idx = [releases.index(v) for v in found]
        assert idx == list(range(idx[0], idx[-1] + 1)), name


@pytest.mark.parametrize(("args", "said"), [
    (["--reasoning-parser", "step5"], "releases from 0.33.0 list it"),            # registered from 0.33.0
    (_spec("kimi_k3_mtp"), "releases from 0.27.0 list it"),
    (["--attention-backend", "TURBOQUANT"], "releases from 0.20.0 list it"),
])
def test_a_name_only_some_releases_have_is_a_warning_on_an_unknown_version(tmp_path, capsys, args, said):
    code, out = _pair(tmp_path, capsys, QWEN, args, "latest", gpus=1)
    assert "engine-args-invalid" not in rules(out, "error"), out
    assert any(said in f["message"] and "version is unknown" in f["message"]
               for f in _findings(out, "engine-args-invalid", "warning")), out


def test_names_every_release_has_say_nothing_on_an_unknown_version(tmp_path, capsys):
    code, out = _pair(tmp_path, capsys, QWEN, [*TOOLS, "hermes", "--reasoning-parser", "qwen3", *_spec("ngram"),
                                               "--attention-backend", "FLASH_ATTN"], "latest", gpus=1)
    assert "engine-args-invalid" not in rules(out), out
