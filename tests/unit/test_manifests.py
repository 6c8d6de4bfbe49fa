"""``pdd check`` on the manifests people write today: engines found, paired, checked by the same rules."""

from __future__ import annotations

import json

import pytest
import yaml

from pdd_operator.cli import main
from pdd_operator.compat import evaluate
from pdd_operator.compat.manifests import find_engines, pair_engines
from pdd_operator.vllm.args import parse_flags, split_command
from tests.helpers import ROOT

MANIFESTS = ROOT / "tests" / "unit" / "manifests"


def check(name: str):
    docs = list(yaml.safe_load_all((MANIFESTS / name).read_text()))
    engines = [e for d in docs for e in find_engines(d)]
    pairs, unpaired = pair_engines(engines)
    return engines, [(p, evaluate(p)) for p, _, _ in pairs], unpaired


def errors(report) -> set[str]:
    return {f.rule for f in report.errors}


def test_plain_deployments():
    engines, pairs, unpaired = check("deployments-bad.yaml")
    assert [e.role for e in engines] == ["prefill", "decode"] and not unpaired
    (pair, report), = pairs
    assert (pair.prefill.tp, pair.decode.tp) == (2, 3)
    assert errors(report) == {"kv-cache-dtype-mismatch", "tp-divisibility", "side-channel-host-not-routable",
                              "tp-heads-indivisible"}  # set 37: decode TP 3 cannot shard the model's heads


def test_leaderworkersets_with_kv_both_are_told_apart_by_name():
    engines, pairs, _ = check("lws-good.yaml")
    assert [e.role for e in engines] == ["prefill", "decode"]
    (_, report), = pairs
    assert report.compatible and report.version == "0.22.0"


def test_kserve_llminferenceservice_template_is_the_decode_side():
    engines, pairs, _ = check("kserve-llmisvc.yaml")
    assert sorted(e.role for e in engines) == ["decode", "prefill"]
    (pair, report), = pairs
    assert pair.hybrid_ssm and pair.model.ssm_kind == "Mamba2"
    assert {(f.rule, f.message.split(":")[0]) for f in report.errors} == {("ssm-conv-layout-ds", "decode")}


def test_dynamo_graph_deployment():
    engines, pairs, _ = check("dynamo-dgd.yaml")
    assert sorted(e.role for e in engines) == ["decode", "prefill"]  # the frontend is not an engine
    (pair, report), = pairs
    assert pair.prefill.pp == 2 and errors(report) == {"pp-pull-unsupported"}


def test_engines_without_a_counterpart_are_reported_not_checked(tmp_path, capsys):
    docs = yaml.safe_load_all((MANIFESTS / "lws-good.yaml").read_text())
    only_prefill = next(docs)
    path = tmp_path / "one.yaml"
    path.write_text(yaml.safe_dump(only_prefill))
    assert main(["check", str(path), "-o", "json"]) == 3  # not checked is not a pass
    out = json.loads(capsys.readouterr().out)
    assert out["results"] == [] and "no decode engine" in out["notChecked"][0]["reason"]
    assert main(["check", str(path), "--allow-unchecked"]) == 0


def test_check_mixes_pddeployments_and_foreign_manifests(capsys):
    files = [str(MANIFESTS / "lws-good.yaml"), str(ROOT / "examples" / "llama-dense-pd.yaml")]
    assert main(["check", *files]) == 0
    assert main(["check", str(MANIFESTS / "dynamo-dgd.yaml")]) == 1
    assert "[pp-pull-unsupported]" in capsys.readouterr().out


@pytest.mark.parametrize(
    "command, args, model, tp",
    [
        (["vllm", "serve"], ["m", "--tensor-parallel-size", "4"], "m", "4"),
        (["sh", "-c"], ["pip list && vllm serve m -tp=2 --port 8000"], "m", "2"),
        (["python3", "-m", "vllm.entrypoints.openai.api_server"], ["--model", "m", "-tp", "8"], "m", "8"),
        (["/usr/bin/bash", "-lc", "exec vllm serve m \\\n  --tensor-parallel-size 2"], None, "m", "2"),
    ],
)
def test_command_lines(command, args, model, tp):
    got_model, flags = parse_flags(split_command(command, args))
    assert (got_model, flags["--tensor-parallel-size"]) == (model, tp)


def test_non_vllm_containers_are_ignored():
    assert split_command(["python3", "-m", "dynamo.frontend"], None) == []
    assert split_command(["nginx"], ["-g", "daemon off;"]) == []


def test_versions_are_read_only_from_vllm_image_tags():
    from pdd_operator.vllm.versions import version_from_image
    assert version_from_image("vllm/vllm-openai:v0.28.0") == (0, 28, 0)
    assert version_from_image("registry.local/team/vllm:0.30.1") == (0, 30, 1)
    assert version_from_image("ghcr.io/llm-d/llm-d-cuda:v0.4.0") is None
    # Dynamo's runtime tags are Dynamo's: a documented tag maps to the vLLM it ships, any other stays unknown
    assert version_from_image("nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.7.0") == (0, 11, 0)
    assert version_from_image("nvcr.io/nvidia/ai-dynamo/vllm-runtime:9.9.9") is None


def test_kserve_preset_style_args_in_env_and_underscore_flags():
    # The decode's script expands VLLM_ADDITIONAL_ARGS (unquoted: split on blanks, no quote removal), as KServe's
    # templates do; vLLM itself never reads it.
    kv = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
    doc = {"kind": "LLMInferenceService", "metadata": {"name": "x"}, "spec": {
        "template": {"containers": [{"name": "main", "image": "vllm/vllm-openai:v0.22.0",
                                     "command": ["/bin/bash", "-c", "exec vllm serve --model m ${VLLM_ADDITIONAL_ARGS}"],
                                     "env": [{"name": "VLLM_ADDITIONAL_ARGS",
                                              "value": f"--kv_transfer_config {kv} --kv-cache-dtype fp8"}]}]},
        "prefill": {"template": {"containers": [{"name": "main", "image": "vllm/vllm-openai:v0.22.0",
                                                 "command": ["vllm", "serve"],
                                                 "args": ["--model", "m", "--kv_transfer_config", kv]}]}}}}
    engines = find_engines(doc)
    assert sorted(e.role for e in engines) == ["decode", "prefill"]
    (pair, _, _), = pair_engines(engines)[0]
    assert pair.decode.kv_cache_dtype == "fp8" and pair.prefill.connector == "NixlConnector"
    assert "kv-cache-dtype-mismatch" in errors(evaluate(pair))
