"""Small faults noticed by issue 9's helpers (round 31), each a kind with variants that fail without its fix."""

from __future__ import annotations

import pytest

from pdd_operator.compat.script_inputs import script_engines
from pdd_operator.vllm.versions import image_version_text, version_from_image

KV_P = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
KV_D = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'


# --- 1. four-part vLLM releases (0.10.1.1) are named as vLLM numbers them ------------------------------------------------


@pytest.mark.parametrize(("pin", "text"), [("0.10.1.1", "0.10.1.1"), ("0.10.1", "0.10.1"), ("0.11.0", "0.11.0")])
def test_a_script_s_pip_pin_keeps_a_four_part_release(pin, text):
    script = (f"#!/bin/bash\npip install vllm=={pin}\nvllm serve m --port 8100 --kv-transfer-config '{KV_P}' &\n"
              f"vllm serve m --port 8200 --kv-transfer-config '{KV_D}' &\n")
    engines, _ = script_engines("run.sh", script)
    assert [e.config.version_text for e in engines] == [text, text], engines


@pytest.mark.parametrize(("image", "text", "version"), [
    ("vllm/vllm-openai:v0.10.1.1", "0.10.1.1", (0, 10, 1)),
    ("docker.io/vllm/vllm-openai:v0.10.1.1-cu128", "0.10.1.1", (0, 10, 1)),
    ("vllm/vllm-openai:v0.10.1", None, (0, 10, 1)),
    ("vllm/vllm-openai:v0.9.0.1", None, (0, 9, 0)),  # no vLLM release of that number
])
def test_an_image_tag_names_a_four_part_release_as_vllm_numbers_it(image, text, version):
    assert image_version_text(image) == text
    assert version_from_image(image) == version


# --- 2. vllm-version-mismatch cites the vLLM code it rests on ------------------------------------------------------------


def test_the_version_mismatch_rule_cites_vllm_s_files_and_releases_not_the_seed():
    import pdd_operator.compat.rules  # noqa: F401  (registers the rules)
    from pdd_operator.compat.rules.base import REGISTRY
    (rule,) = [r for r in REGISTRY if r.id == "vllm-version-mismatch"]
    assert "seed" not in rule.source, rule.source
    for cited in ("nixl_connector.py 0.13.0 line 178", "nixl/metadata.py 0.20.0 line 105", "nixl_handshake_wire"):
        assert cited in rule.source, (cited, rule.source)


# --- 3. hetero-tp-kv-layout: vLLM refuses only from 0.20.0; the handshake's opener is named --------------------------------

LAYOUT = "hetero-tp-kv-layout"


def _layout_severity(image: str, layout: str = "NHD") -> set[str]:
    from pdd_operator.compat import evaluate
    from tests.helpers import make_spec
    spec = make_spec(kvCache={"layout": layout}, engine={"image": image}, decode={"tensorParallelSize": 2})
    report = evaluate(spec)
    return {f.severity for f in report.findings if f.rule == LAYOUT}


@pytest.mark.parametrize(("image", "severity"), [
    ("vllm/vllm-openai:v0.19.1", "warning"), ("vllm/vllm-openai:v0.19.0", "warning"),
    ("vllm/vllm-openai:v0.18.0", "warning"), ("vllm/vllm-openai:v0.20.0", "error"), ("vllm/vllm-openai:v0.26.0", "error"),
])
def test_a_non_contiguous_layout_with_heterogeneous_tp_is_refused_only_where_vllm_checks_it(image, severity):
    assert _layout_severity(image) == {severity}, image


@pytest.mark.parametrize(("mode", "opener"), [("push", "prefill's handshake (push)"), ("pull", "decode's handshake")])
def test_a_forced_token_major_layout_names_the_engine_that_opens_the_handshake(tmp_path, capsys, mode, opener):
    from tests.unit.test_rule_scopes_30 import _kv, _messages, _pair
    from tests.unit.test_turn2_variants import check
    extra = {"kv_connector_extra_config": {"transfer_mode": mode}}
    args = ("--kv-cache-dtype", "turboquant_k8v4", "--tensor-parallel-size")
    docs = _pair("meta-llama/Llama-3.1-8B-Instruct", "vllm/vllm-openai:v0.34.0", _kv("kv_producer", **extra),
                 _kv("kv_consumer", **extra), args_p=(*args, "2"), args_d=(*args, "4"), gpus=(2, 4))
    _, out = check(tmp_path, capsys, *docs)
    (message,) = _messages(out, LAYOUT) or [""]
    assert f"the {opener} raises" in message, out


# --- 4. vllm-gaudi loads its heterogeneous connector only for VLLM_HPU_HETERO_KV_LAYOUT "true" ----------------------------


@pytest.mark.parametrize(("value", "loaded"), [
    ("true", True), ("TRUE", True), ("True", True), ("1", False), ("yes", False), (" true", False), ("false", False),
])
def test_the_gaudi_hetero_connector_is_loaded_as_vllm_gaudi_reads_its_variable(value, loaded):
    from types import SimpleNamespace

    from pdd_operator.compat.rules.kv_layout import gaudi_hetero_layout
    from pdd_operator.vllm.gaudi import hetero_saved_block_size
    env = {"VLLM_HPU_HETERO_KV_LAYOUT": value}
    assert gaudi_hetero_layout(SimpleNamespace(buffer_device="hpu", env=env)) is loaded
    assert gaudi_hetero_layout(SimpleNamespace(buffer_device="cuda", env=env)) is False
    kv = {"enable_permute_local_kv": True, "kv_connector_extra_config": {"agreed_block_size": 64}}
    assert hetero_saved_block_size(env, kv, 128, False) == (64 if loaded else None)


# --- 5. the HMA refusal names the field that sets the release; an invalid spec reads INVALID -------------------------------


def test_the_hma_refusal_names_the_image_field_of_each_format(tmp_path, capsys):
    from pdd_operator.compat import evaluate
    from tests.helpers import make_spec
    from tests.unit.test_noticed_kinds_37 import FORCED, HMA, _pair
    from tests.unit.test_turn2_variants import check
    _, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.17.1", [HMA]))
    fixes = [f["fix"] for r in out["results"] for f in r["findings"] if f["rule"] == FORCED]
    assert fixes and all("0.18.0 or later" in f and "in each container's image" in f for f in fixes), fixes
    spec = make_spec(engine={"image": "vllm/vllm-openai:v0.17.1"}, prefill={"extraArgs": [HMA]})
    fixes = [f.fix for f in evaluate(spec).findings if f.rule == FORCED]
    assert fixes and all("0.18.0 or later" in f and "spec.engine.image" in f for f in fixes), fixes


@pytest.mark.parametrize(("patch", "verdict"), [
    ({"prefill": {"tensorParallelSize": -1}}, "INVALID"),               # the API refuses the spec
    ({"model": {"name": 7}}, "INVALID"),
    ({"prefill": {"blockSize": 32}, "decode": {"blockSize": 16}}, "INCOMPATIBLE"),  # a rule refuses it
])
def test_pdd_check_s_text_output_labels_a_refused_spec_invalid(tmp_path, capsys, patch, verdict):
    import yaml

    from pdd_operator.cli import main
    spec = {"model": {"name": "m"}, "engine": {"image": "vllm/vllm-openai:v0.20.0"}}
    for key, value in patch.items():
        spec[key] = {**spec.get(key, {}), **value}
    doc = {"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment", "metadata": {"name": "x"}, "spec": spec}
    path = tmp_path / "pdd.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert main(["check", str(path)]) == 1
    first = capsys.readouterr().out.splitlines()[0]
    assert first == f"PDDeployment/x (vLLM 0.20.0): {verdict}", first


# --- 6. vLLM's Docker Hub CPU and XPU images are upstream's tree: the registry rules judge them -----------------------------


@pytest.mark.parametrize("image", [
    "vllm/vllm-openai-cpu:v0.24.0-x86_64", "vllm/vllm-openai-cpu:v0.24.0-arm64", "docker.io/vllm/vllm-openai-xpu:v0.24.0",
    "vllm/vllm-openai:v0.24.0",  # control: the CUDA image
])
def test_an_unregistered_connector_on_vllm_s_cpu_or_xpu_image_is_refused(tmp_path, capsys, image):
    from tests.unit.test_public_report_kinds_36 import _storage_pair
    from tests.unit.test_turn2_variants import check, rules
    _, out = check(tmp_path, capsys, *_storage_pair("SharedStorageConnector", image))
    assert "kv-connector-unregistered" in rules(out, "error"), out


def test_a_fork_s_xpu_image_is_still_not_judged_by_the_registry(tmp_path, capsys):
    from tests.unit.test_public_report_kinds_36 import _storage_pair
    from tests.unit.test_turn2_variants import check, rules
    _, out = check(tmp_path, capsys, *_storage_pair("SharedStorageConnector", "intel/vllm:0.24.0-xpu"))
    assert "kv-connector-unregistered" not in rules(out), out
