"""Variants of what the eighteenth public-report set (tests/unit/data/public_reports_18) taught, with negative
controls.

The kind: a KServe LLMInferenceService whose ``main`` containers have no command (KServe's LLMInferenceServiceConfig
templates supply it) was reported "not checked" whole, though vLLM 0.33 refuses every such engine at startup for
what the manifest itself holds: the pinned image, ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` in the env and
the KV connector in ``VLLM_ADDITIONAL_ARGS``, which KServe's templates append to ``vllm serve``
(config/llmisvcconfig/config-llm-prefill-template.yaml) with no ``--enable-cumem-allocator``
(vllm/config/vllm.py ``_verify_kv_transfer_compat``). Such an engine is now refused with
``expandable-segments-with-nixl`` and still reported not checked for everything else; an unknown or older version,
the cumem allocator, or a connector the user does not name leave it not checked only.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.compat.templated import templated_findings, user_engine_args
from tests.unit.test_turn2_variants import POD_IP, check, rules

NIXL = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})
EXPANDABLE = {"name": "PYTORCH_CUDA_ALLOC_CONF", "value": "expandable_segments:True"}


def _main(image: str | None, additional: str | None, args: list[str] | None = None, env=(EXPANDABLE,)) -> dict:
    """A KServe ``main`` container without a command: ``image`` (``None``: KServe's default), ``additional``: its
    VLLM_ADDITIONAL_ARGS (``None``: unset), ``args``: its args; the side-channel host is the pod IP (without it the
    pair is refused on its own, set 73)."""
    c: dict = {"name": "main", "env": [POD_IP, *env, *([{"name": "VLLM_ADDITIONAL_ARGS", "value": additional}]
                                                       if additional is not None else [])],
               "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    if image:
        c["image"] = image
    if args:
        c["args"] = args
    return c


def _llmisvc(main: dict) -> dict:
    """A P/D LLMInferenceService (Qwen3-8B, one prefill and one decode replica) with ``main`` in both pools."""
    return {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "LLMInferenceService", "metadata": {"name": "qwen-pd"},
            "spec": {"model": {"uri": "hf://Qwen/Qwen3-8B", "name": "Qwen/Qwen3-8B"}, "replicas": 1,
                     "router": {"scheduler": {}, "route": {}, "gateway": {}},
                     "template": {"containers": [dict(main)]},
                     "prefill": {"replicas": 1, "template": {"containers": [dict(main)]}}}}


@pytest.mark.parametrize(("additional", "args"), [
    (f"--max-model-len 8192 --kv_transfer_config '{NIXL}'", None),  # KServe's samples: the underscore spelling
    ("--max-model-len 8192", ["--kv-transfer-config", NIXL]),  # the connector in the container's own args
], ids=["in-VLLM_ADDITIONAL_ARGS", "in-args"])
def test_a_templated_kserve_engine_on_033_with_expandable_segments_is_refused_and_otherwise_unchecked(
        tmp_path, capsys, additional, args):
    code, out = check(tmp_path, capsys, _llmisvc(_main("vllm/vllm-openai:v0.33.0", additional, args)))
    assert code == 1 and rules(out, "error") == {"expandable-segments-with-nixl"}, out
    refused = [r for r in out["results"] if r["findings"]]
    assert {r["object"] for r in refused} == {"LLMInferenceService/qwen-pd spec.prefill.template.containers(main)",
                                              "LLMInferenceService/qwen-pd spec.template.containers(main)"}
    assert all(r["vllmVersion"] == "0.33.0" and not r["compatible"] for r in refused)
    finding = refused[0]["findings"][0]
    assert "NixlConnector" in finding["message"] and "--enable-cumem-allocator" in finding["fix"]
    assert any(f.endswith(".env[PYTORCH_CUDA_ALLOC_CONF]") for f in finding["fields"])
    # The rest of the engine line is still KServe's template's: both engines stay "not checked".
    assert len(out["notChecked"]) == 2, out["notChecked"]


@pytest.mark.parametrize("main", [
    _main("vllm/vllm-openai:v0.33.0", f"--kv_transfer_config '{NIXL}' --enable-cumem-allocator"),  # allocator on
    _main("vllm/vllm-openai:v0.20.2", f"--kv_transfer_config '{NIXL}'"),  # before the startup refusal (0.21)
    _main(None, f"--kv_transfer_config '{NIXL}'"),  # KServe's default image: version unknown
    _main("vllm/vllm-openai:v0.33.0", "--max-model-len 8192"),  # no connector the user names
    _main("vllm/vllm-openai:v0.33.0", f"--kv_transfer_config '{NIXL}'", env=()),  # no expandable_segments
], ids=["cumem-allocator", "v0202", "default-image", "no-user-connector", "no-expandable"])
def test_a_templated_kserve_engine_the_manifest_does_not_prove_refused_stays_not_checked_only(tmp_path, capsys, main):
    code, out = check(tmp_path, capsys, _llmisvc(main))
    # a pair naming no connector at all carries kv-connector-missing as a warning beside its "not checked" (no released
    # KServe template adds one: compat/templated.py _no_connector_warning); nothing else is said of these engines
    names_connector = "kv_transfer_config" in repr(main)
    assert code == 3 and rules(out) == (set() if names_connector else {"kv-connector-missing"}), out
    assert not rules(out, "error") and (not out["results"]) == names_connector, out
    assert len(out["notChecked"]) == 2


def test_user_engine_args_split_the_additional_args_as_the_template_shell_does():
    c = _main(None, f"--enforce-eager --kv_transfer_config '{NIXL}'", ["--max-model-len", "4096"])
    assert user_engine_args(c) == ["--enforce-eager", "--kv_transfer_config", NIXL, "--max-model-len", "4096"]
    assert user_engine_args(_main(None, "--a 'unbalanced")) == []


def test_templated_findings_name_the_containers_own_fields():
    where = "LLMInferenceService/x spec.template.containers(main)"
    (finding,) = templated_findings(_main("vllm/vllm-openai:v0.33.0", f"--kv_transfer_config '{NIXL}'"), where)
    assert finding.rule == "expandable-segments-with-nixl" and finding.severity == "error"
    assert finding.fields == [f"{where}.env[PYTORCH_CUDA_ALLOC_CONF]", f"{where}.env[VLLM_ADDITIONAL_ARGS]",
                              f"{where}.image"]
    assert "config/llmisvcconfig" in finding.source
