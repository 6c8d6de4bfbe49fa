"""KServe reading gaps set 111 (tests/unit/data/public_reports_111) left, each with variants beyond its entries (other
models, vLLM releases, model uris, KServe releases, which role is left to a template).

- The model of an LLMInferenceService engine serving ``/mnt/models`` (where KServe's storage initializer puts the
  checkpoint) is ``spec.model.uri`` (``hf://owner/model[:revision]``) or, beside a ``pvc://`` / ``oci://`` uri that
  names no model, a known ``spec.model.name``: it was read as the unknown model ``/mnt/models``, so the architecture
  rules never ran (set 111's decode-only ``--block-size=32`` entry got block-size-partial instead of
  block-size-hetero-unsupported). Where nothing names the model the architecture-unknown warning says why.
- The engine of a KServe P/D service (``spec.prefill`` set) whose other role's line is KServe's template was
  reported as "aggregated serving" beside the kv-connector-missing error: KServe creates both roles, so it is one half
  of a P/D pair, "not checked" with its counterpart named.
- Which of the user's parts KServe's well-known templates read depends on the KServe release (``VLLM_ADDITIONAL_ARGS``
  only from v0.18.0 in the single-node templates); the reader follows the release where the files name it.
"""

from __future__ import annotations

import pytest
import yaml

from tests.unit.cli_check import rules as _rules

from .test_script_inputs import _check, _errors

NIXL = '--kv-transfer-config={"kv_connector":"NixlConnector","kv_role":"kv_both"}'
POD_IP = {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}


def _messages(out: dict, rule: str) -> str:
    return " ".join(f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == rule)


def _own(image: str, port: int, extra: list[str], connector: bool = True) -> dict:
    """A main container with its own ``vllm serve /mnt/models`` line (the path KServe's templates serve)."""
    return {"name": "main", "image": image, "command": ["vllm", "serve", "/mnt/models"],
            "args": [f"--port={port}", *extra, *([NIXL] if connector else [])], "env": [POD_IP],
            "resources": {"limits": {"nvidia.com/gpu": "1"}}}


def _service(image: str, uri: str, name: str | None, d_extra: list[str], api: str = "v1alpha1") -> str:
    model = {"uri": uri, **({"name": name} if name else {})}
    return yaml.safe_dump({"apiVersion": f"serving.kserve.io/{api}", "kind": "LLMInferenceService",
                           "metadata": {"name": "svc", "namespace": "llm"},
                           "spec": {"model": model,
                                    "prefill": {"template": {"containers": [_own(image, 8000, [])]}},
                                    "template": {"containers": [_own(image, 8001, d_extra)]}}}, sort_keys=False)


# --- 1. the model KServe puts in /mnt/models ---------------------------------------------------------------------


@pytest.mark.parametrize(("spec", "expected"), [
    ({"model": {"uri": "hf://Qwen/Qwen3-8B"}}, "Qwen/Qwen3-8B"),
    ({"model": {"uri": "hf://meta-llama/Llama-3.1-8B-Instruct:main", "name": "llama"}}, "meta-llama/Llama-3.1-8B-Instruct"),
    ({"model": {"uri": "pvc://models/llama/", "name": "Qwen/Qwen3-8B"}}, "Qwen/Qwen3-8B"),  # a known served name
    ({"model": {"uri": "oci://quay.io/org/modelcar:1", "name": "my-model"}}, None),
    ({"model": {"uri": "pvc://models/llama", "name": "{{ .Name }}"}}, None),
    ({"model": {"uri": "hf://only-one-part"}}, None),  # the storage initializer refuses it: no model read
])
def test_the_model_a_service_puts_in_mnt_models(spec, expected):
    from pdd_operator.compat.kserve_merge import model_source

    assert model_source(spec)[0] == expected
    assert model_source(spec)[1]  # always says how, or why none


def test_a_service_without_a_model_uri_names_nothing():
    from pdd_operator.compat.kserve_merge import model_source

    assert model_source({"model": {"name": "Qwen/Qwen3-8B"}}) == (None, "")


@pytest.mark.parametrize(("image", "uri", "name"), [
    ("ghcr.io/llm-d/llm-d:v0.2.0", "hf://meta-llama/Llama-3-8B-Instruct", "llama-8b"),  # set 111's Lab 2 (vLLM 0.10.0)
    ("vllm/vllm-openai:v0.11.0", "hf://Qwen/Qwen3-8B", "qwen"),
    ("vllm/vllm-openai:v0.11.0", "hf://meta-llama/Llama-3.1-8B-Instruct:main", None),  # a revision, no name
    ("vllm/vllm-openai:v0.10.1.1", "pvc://models/qwen3", "Qwen/Qwen3-8B"),  # pvc://: the known served name
    ("vllm/vllm-openai:v0.11.0", "oci://quay.io/org/qwen3-modelcar:1", "Qwen/Qwen3-8B"),
])
def test_a_decode_only_block_size_is_judged_on_the_models_architecture(tmp_path, capsys, image, uri, name):
    code, out = _check(tmp_path, capsys, _service(image, uri, name, ["--block-size=32"]), "svc.yaml")
    assert code == 1 and "block-size-hetero-unsupported" in _errors(out), out
    assert "architecture-unknown" not in _rules(out), out


@pytest.mark.parametrize(("uri", "scheme"), [("pvc://models/qwen3", "pvc://"), ("oci://quay.io/org/m:1", "oci://")])
def test_a_uri_that_names_no_model_says_so(tmp_path, capsys, uri, scheme):
    code, out = _check(tmp_path, capsys, _service("vllm/vllm-openai:v0.11.0", uri, "my-model", ["--block-size=32"]),
                       "svc.yaml")
    assert "block-size-hetero-unsupported" not in _rules(out), out  # the architecture is not known: not judged
    message = _messages(out, "architecture-unknown")
    assert f"a {scheme} uri that names no model" in message and "my-model" in message, out


def test_a_line_naming_its_own_model_keeps_it(tmp_path, capsys):
    text = _service("vllm/vllm-openai:v0.11.0", "pvc://models/x", "x", []).replace("/mnt/models", "/data/other")
    code, out = _check(tmp_path, capsys, text, "svc.yaml")
    assert "a pvc:// uri" not in _messages(out, "architecture-unknown"), out


# --- 3. an engine of a P/D service is not aggregated serving --------------------------------------------------------


def _half_templated(own_role: str, connector: bool, api: str = "v1alpha2") -> str:
    """A P/D service whose ``own_role`` runs its own line and whose other role's line is KServe's template."""
    image = "vllm/vllm-openai:v0.14.1"
    own = {"containers": [_own(image, 8001, [], connector)]}
    templated = {"containers": [{"name": "main", "image": image}]}
    prefill, decode = (own, templated) if own_role == "prefill" else (templated, own)
    return yaml.safe_dump({"apiVersion": f"serving.kserve.io/{api}", "kind": "LLMInferenceService",
                           "metadata": {"name": "half", "namespace": "llm"},
                           "spec": {"model": {"uri": "hf://Qwen/Qwen3-8B", "name": "qwen"},
                                    "prefill": {"template": prefill}, "template": decode}}, sort_keys=False)


@pytest.mark.parametrize("own_role", ["decode", "prefill"])
@pytest.mark.parametrize("api", ["v1alpha1", "v1alpha2"])
def test_a_connectorless_role_beside_a_templated_one_is_not_aggregated(tmp_path, capsys, own_role, api):
    code, out = _check(tmp_path, capsys, _half_templated(own_role, connector=False, api=api), "half.yaml")
    assert code == 1 and "kv-connector-missing" in _errors(out), out
    assert not out.get("aggregated"), out
    mine = [u["reason"] for u in out["notChecked"] if u["object"].endswith("containers[0](main)")]
    assert mine and f"the {own_role} engine of a KServe prefill/decode service" in mine[0], out


def test_a_role_with_a_connector_beside_a_templated_one_names_the_template(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _half_templated("decode", connector=True), "half.yaml")
    reasons = [u["reason"] for u in out["notChecked"]]
    assert any("whose prefill engine's line is not in these files" in r for r in reasons), out


def test_a_service_without_prefill_and_without_connector_stays_aggregated(tmp_path, capsys):
    text = yaml.safe_dump({"apiVersion": "serving.kserve.io/v1alpha1", "kind": "LLMInferenceService",
                           "metadata": {"name": "agg"},
                           "spec": {"model": {"uri": "hf://Qwen/Qwen3-8B"},
                                    "template": {"containers": [_own("vllm/vllm-openai:v0.11.0", 8000, [], False)]}}})
    _, out = _check(tmp_path, capsys, text, "agg.yaml")
    assert not out.get("notChecked") and not out["results"], out


# --- 2. which user parts KServe's well-known templates read, by release ---------------------------------------------

ADDITIONAL = "--kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'"


def _controller(tag: str, registry: str = "") -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "llmisvc-controller-manager", "namespace": "kserve"},
            "spec": {"template": {"spec": {"containers": [
                {"name": "manager", "image": f"{registry}kserve/llmisvc-controller:{tag}"}]}}}}


def _templated(additional: str = ADDITIONAL, args: list[str] | None = None, side: bool = False,
               api: str = "v1alpha2") -> dict:
    """A P/D service whose two main containers are left to KServe's single-node templates, the connector in their
    ``VLLM_ADDITIONAL_ARGS`` (or ``args``), no side-channel host (a refusal wherever the connector is read)."""
    def main() -> dict:
        env = [{"name": "VLLM_ADDITIONAL_ARGS", "value": additional}] if additional else []
        return {"name": "main", "env": env + ([POD_IP] if side else []), **({"args": args} if args else {})}
    return {"apiVersion": f"serving.kserve.io/{api}", "kind": "LLMInferenceService",
            "metadata": {"name": "tpl", "namespace": "llm"},
            "spec": {"model": {"uri": "hf://Qwen/Qwen3-8B", "name": "qwen"},
                     "prefill": {"template": {"containers": [main()]}}, "template": {"containers": [main()]}}}


@pytest.mark.parametrize(("release", "data_parallel", "reads"), [
    (None, False, (True, True)),
    ((0, 16, 0), False, (False, True)),
    ((0, 16, 0), True, (True, False)),
    ((0, 17, 1), False, (False, True)),
    ((0, 17, 0), True, (True, True)),
    ((0, 18, 0), False, (True, True)),
    ((0, 20, 0), True, (True, True)),
])
def test_the_user_parts_each_release_reads(release, data_parallel, reads):
    from pdd_operator.compat.templated import template_reads

    assert template_reads(release, data_parallel) == reads


@pytest.mark.parametrize(("docs", "release"), [
    ([_controller("v0.17.0")], (0, 17, 0)),
    ([_controller("v0.18.1", "quay.io/")], (0, 18, 1)),
    ([{"kind": "ConfigMap", "metadata": {"name": "x", "labels": {"helm.sh/chart": "kserve-llmisvc-resources-v0.16.0"}}}],
     (0, 16, 0)),
    ([{"kind": "LLMInferenceServiceConfig", "metadata": {"name": "kserve-config-llm-template",
                                                         "labels": {"app.kubernetes.io/version": "v0.20.0"}}}],
     (0, 20, 0)),
    ([{"kind": "LLMInferenceServiceConfig", "metadata": {"name": "my-config",  # a user's own config: no release
                                                         "labels": {"app.kubernetes.io/version": "v3"}}}], None),
    ([_controller("v0.17.0"), _controller("v0.18.0")], None),  # two releases: none is known
    ([_controller("latest")], None),
    ([_templated()], None),
])
def test_the_kserve_release_the_files_show(docs, release):
    from pdd_operator.compat.kserve_merge import kserve_release

    assert kserve_release(docs) == release


@pytest.mark.parametrize("tag", ["v0.16.0", "v0.17.0", "v0.17.1"])
def test_additional_args_the_release_never_reads_configure_no_connector(tmp_path, capsys, tag):
    text = yaml.safe_dump_all([_templated(), _controller(tag)], sort_keys=False)
    code, out = _check(tmp_path, capsys, text, "tpl.yaml")
    assert "side-channel-host-not-routable" not in _rules(out), out  # no connector is read: no NIXL handshake
    message = _messages(out, "kv-connector-missing")
    assert f"KServe {tag[1:]}'s templates" in message and "never read VLLM_ADDITIONAL_ARGS" in message, out
    assert not _errors(out) and code == 3, out


@pytest.mark.parametrize("tag", ["v0.18.0", "v0.19.0", "v0.20.0"])
def test_additional_args_a_later_release_reads_are_judged(tmp_path, capsys, tag):
    text = yaml.safe_dump_all([_templated(), _controller(tag)], sort_keys=False)
    code, out = _check(tmp_path, capsys, text, "tpl.yaml")
    assert code == 1 and "side-channel-host-not-routable" in _errors(out), out
    reasons = " ".join(u["reason"] for u in out["notChecked"])
    assert f"KServe {tag[1:]}'s template appends VLLM_ADDITIONAL_ARGS and args" in reasons, out


@pytest.mark.parametrize("tag", ["v0.16.0", "v0.17.0", "v0.20.0"])
def test_a_connector_in_args_is_read_on_every_release(tmp_path, capsys, tag):
    args = ["--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both"}']
    text = yaml.safe_dump_all([_templated("", args), _controller(tag)], sort_keys=False)
    code, out = _check(tmp_path, capsys, text, "tpl.yaml")
    assert code == 1 and "side-channel-host-not-routable" in _errors(out), out


def test_an_unknown_release_is_read_as_the_newest_templates_and_says_so(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, yaml.safe_dump(_templated(), sort_keys=False), "tpl.yaml")
    assert code == 1 and "side-channel-host-not-routable" in _errors(out), out
    reasons = " ".join(u["reason"] for u in out["notChecked"])
    assert "read as KServe v0.18.0 and later run it" in reasons and "the KServe release is not in these files" in reasons


def test_a_startup_refusal_from_additional_args_follows_the_release():
    from pdd_operator.compat.templated import template_reads, templated_findings

    main = {"name": "main", "image": "vllm/vllm-openai:v0.33.0",
            "env": [{"name": "PYTORCH_CUDA_ALLOC_CONF", "value": "expandable_segments:True"},
                    {"name": "VLLM_ADDITIONAL_ARGS", "value": ADDITIONAL}]}
    assert templated_findings(main, "x", template_reads((0, 18, 0), False))
    assert templated_findings(main, "x", template_reads((0, 17, 0), False)) == ()  # the connector is never read
    assert templated_findings(main, "x", template_reads((0, 17, 0), True))  # -worker-data-parallel reads it


def test_v0_16_data_parallel_args_replace_the_templates_script():
    from pdd_operator.compat.templated import template_engine, template_reads

    main = {"name": "main", "args": ["--max-model-len", "4096"]}
    assert template_engine(main, "m", template_reads((0, 16, 0), True)) is None
    assert template_engine(main, "m", template_reads((0, 17, 0), True))["command"][-2:] == ["--max-model-len", "4096"]
    assert template_engine(main, "m", template_reads((0, 17, 0), False))["command"][-2:] == ["--max-model-len", "4096"]
