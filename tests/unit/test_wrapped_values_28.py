"""llm-d-modelservice values carried by a GitOps wrapper (:mod:`pdd_operator.compat.llmd_wrappers`), judged like a
values file (issue 9).

The values are those of tests/unit/test_llmd_values.py (the chart's examples/values-pd.yaml and the llm-d guide's
ms-pd values); the wrappers are a Flux HelmRelease (helm.toolkit.fluxcd.io/v2: ``spec.values``, ``spec.valuesFrom``)
and an Argo CD Application (argoproj.io/v1alpha1: ``spec.source.helm.valuesObject``, ``helm.values`` as a YAML string,
``spec.sources[]``). Positive variants fail without the wrapper reader (the release was "not checked"); the controls
(another chart, values the files do not hold) stay as they were.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from pdd_operator.compat.llmd_wrappers import wrapped_llmd_values
from tests.unit.cli_check import check_text
from tests.unit.test_llmd_values import _values

REPO = "https://llm-d-incubation.github.io/llm-d-modelservice/"
#: Prefill TP 2 over decode TP 1 on vLLM 0.11.0: refused (the rule of test_llmd_values.py's values file).
HETERO = "hetero-tp-p-gt-d-unsupported"
#: The llm-d guides' image: only the chart's command makes its containers engines.
LLM_D = "ghcr.io/llm-d/llm-d-cuda:v0.4.0"


def _flux(values: dict | None, chart: str = "llm-d-modelservice", **spec) -> dict:
    body = {"interval": "10m", "chart": {"spec": {"chart": chart, "version": "v0.2.0",
                                                  "sourceRef": {"kind": "HelmRepository", "name": "llm-d"}}}, **spec}
    if values is not None:
        body["values"] = values
    return {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": "pd", "namespace": "llm-d"}, "spec": body}


def _argo_source(values: dict, chart: str = "llm-d-modelservice", as_text: bool = False, **helm) -> dict:
    h = {"releaseName": "pd", **helm}
    if as_text:
        h["values"] = yaml.safe_dump(values)
    else:
        h["valuesObject"] = values
    return {"repoURL": REPO, "chart": chart, "targetRevision": "v0.2.0", "helm": h}


def _argo(source: dict | None = None, sources: list | None = None) -> dict:
    spec = {"project": "default", "destination": {"server": "https://kubernetes.default.svc", "namespace": "llm-d"}}
    if sources is not None:
        spec["sources"] = sources
    if source is not None:
        spec["source"] = source
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
            "metadata": {"name": "pd", "namespace": "argocd"}, "spec": spec}


def _check(tmp_path, capsys, *docs: dict) -> tuple[int, dict]:
    return check_text(tmp_path, capsys, yaml.safe_dump_all(docs), "release.yaml")


def _errors(out: dict) -> dict[str, dict]:
    return {f["rule"]: f for r in out["results"] for f in r["findings"] if f["severity"] == "error"}


# --- judged like a values file, findings named by the wrapper's keys ---------------------------------------------------

def test_a_flux_release_s_values_are_judged_and_name_spec_values_keys(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _flux(_values(prefill_tp=2)))
    assert code == 1, out
    finding = _errors(out)[HETERO]
    assert {"spec.values.prefill.parallelism.tensor", "spec.values.decode.parallelism.tensor"} <= set(finding["fields"])
    assert out["results"][0]["object"].startswith("HelmRelease/pd spec.values.prefill.containers[0]")


def test_a_valid_flux_release_passes(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _flux(_values(LLM_D)))  # was "not checked": the image names no engine
    assert code == 0 and not _errors(out) and not out["notChecked"] and out["results"], out


def test_an_argo_value_object_is_judged(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _argo(_argo_source(_values(prefill_tp=2))))
    assert code == 1, out
    fields = _errors(out)[HETERO]["fields"]
    assert "spec.source.helm.valuesObject.decode.parallelism.tensor" in fields


def test_argo_values_as_a_yaml_string_are_judged(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _argo(_argo_source(_values(prefill_tp=2), as_text=True)))
    assert code == 1 and "spec.source.helm.values.decode.parallelism.tensor" in (
        _errors(out)[HETERO]["fields"]), out


def test_argo_sources_name_the_chart_s_source_and_ignore_spec_source(tmp_path, capsys):
    other = {"repoURL": "https://github.com/example/gitops.git", "targetRevision": "main", "ref": "values"}
    app = _argo(source=_argo_source(_values()), sources=[other, _argo_source(_values(prefill_tp=2))])
    code, out = _check(tmp_path, capsys, app)
    assert code == 1, out
    assert "spec.sources[1].helm.valuesObject.decode.parallelism.tensor" in (
        _errors(out)[HETERO]["fields"])


def test_values_from_a_config_map_in_the_files_are_merged_with_spec_values(tmp_path, capsys):
    base = _values()
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "pd-values", "namespace": "llm-d"},
          "data": {"values.yaml": yaml.safe_dump(base)}}
    release = _flux({"prefill": {"parallelism": {"tensor": 2}}}, valuesFrom=[{"kind": "ConfigMap", "name": "pd-values"}])
    code, out = _check(tmp_path, capsys, cm, release)
    assert code == 1 and "(spec.valuesFrom, spec.values) prefill.parallelism.tensor" in _errors(out)[HETERO]["fields"], out


def test_the_release_s_own_values_override_values_from_as_flux_merges_them():
    release = _flux({"decode": {"parallelism": {"tensor": 2}}},
                    valuesFrom=[{"kind": "ConfigMap", "name": "a", "resolvedValues": "decode: {replicas: 3}"}])
    [(prefix, values)] = wrapped_llmd_values(release)
    assert prefix == "(spec.valuesFrom, spec.values) " and values == {"decode": {"replicas": 3, "parallelism": {"tensor": 2}}}


def test_an_error_in_prefill_args_names_the_wrapper_s_container_key(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _flux(_values(LLM_D, prefill_args=("--kv-cache-dtype", "fp8"))))
    assert code == 1 and set(_errors(out)) == {"kv-cache-dtype-mismatch"}, out
    fields = [f for finding in _errors(out).values() for f in finding["fields"]]
    assert any(f.startswith("spec.values.prefill.containers[0]") for f in fields), out


def test_a_part_the_chart_cannot_render_is_not_checked_under_the_wrapper_s_key(tmp_path, capsys):
    values = _values()
    values["multinode"] = True
    code, out = _check(tmp_path, capsys, _flux(values))
    assert code == 3 and out["notChecked"][0]["object"] == "HelmRelease/pd spec.values.multinode", out


def test_an_argo_git_source_names_the_chart_by_its_path_or_repository():
    git = {"repoURL": "https://github.com/llm-d-incubation/llm-d-modelservice.git", "path": "charts/llm-d-modelservice",
           "targetRevision": "main", "helm": {"valuesObject": _values()}}
    [(prefix, values)] = wrapped_llmd_values(_argo(git))
    assert prefix == "spec.source.helm.valuesObject." and values == _values()
    other_path = {**git, "repoURL": "https://github.com/example/charts.git", "path": "charts/vllm"}
    assert wrapped_llmd_values(_argo(other_path)) is None  # control: another chart in another repository


# --- controls: what the wrapper does not show stays as it was ---------------------------------------------------------

def test_a_wrapper_of_another_chart_is_as_before(tmp_path, capsys):
    assert wrapped_llmd_values(_flux(_values(), chart="vllm-stack")) is None
    assert wrapped_llmd_values(_argo(_argo_source(_values(), chart="vllm-stack") | {"repoURL": "https://x.io"})) is None
    code, out = _check(tmp_path, capsys, _flux(_values(LLM_D, prefill_tp=2), chart="vllm-stack"))
    assert code == 3 and not out["results"] and out["notChecked"][0]["object"] == "HelmRelease/pd", out


def test_values_the_files_do_not_hold_make_the_release_not_checked_with_the_key(tmp_path, capsys):
    missing = _flux(_values(prefill_tp=2), valuesFrom=[{"kind": "ConfigMap", "name": "not-in-the-files"}])
    value_files = _argo(_argo_source(_values(prefill_tp=2), valueFiles=["values-prod.yaml"]))
    parameters = _argo(_argo_source(_values(prefill_tp=2), parameters=[{"name": "decode.replicas", "value": "2"}]))
    chart_files = _flux(_values(prefill_tp=2))
    chart_files["spec"]["chart"]["spec"]["valuesFiles"] = ["values-pd.yaml"]
    keys = ("spec.valuesFrom[0]", "spec.source.helm.valueFiles", "spec.source.helm.parameters",
            "spec.chart.spec.valuesFiles")
    for doc, key in zip((missing, value_files, parameters, chart_files), keys, strict=True):
        code, out = _check(tmp_path, capsys, doc)  # vllm/vllm-openai: its args no longer judged as a whole command
        assert code == 3 and not out["results"], out
        assert out["notChecked"][0]["object"].endswith(key), out


def test_an_aggregated_model_service_in_a_wrapper_has_nothing_to_check(tmp_path, capsys):
    values = _values()
    for role in ("prefill", "decode"):
        values[role]["containers"][0]["args"] = ["--block-size", "128"]
    values["routing"]["proxy"].pop("connector")
    values["prefill"]["create"] = False  # one serving role (both roles without a connector: set 124's kind)
    code, out = _check(tmp_path, capsys, _flux(values))
    assert not out["results"] and not out["notChecked"] and not _errors(out), out


# --- MooncakeConnector pairs: what the sender refuses on every transfer (compat/rules/mooncake.py) ---------------------

MOONCAKE_PAIR = Path(__file__).parent / "data" / "public_reports_40" / "inputs" / "llmd-mooncake-gptoss120b-p1-d4-v0200.yaml"


def _mooncake(tmp_path, capsys, *edits: tuple[str, str], name: str = "pair.yaml") -> tuple[int, dict]:
    """Set 40's llm-d Mooncake pair (gpt-oss-120b, prefill TP 1 kv_producer, decode TP 4 kv_consumer, block 128, 0.20.0)
    with ``edits`` (text, replacement) applied to its Deployments."""
    text = MOONCAKE_PAIR.read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    return check_text(tmp_path, capsys, text, name)


DECODE_TP = "--tensor-parallel-size=4"
DECODE_KV = '"kv_role":"kv_consumer", "kv_connector_extra_config":{"mooncake_protocol":"rdma"}}\' \\'


def _decode_flag(flag: str) -> tuple[str, str]:
    return DECODE_KV, DECODE_KV + f"\n                {flag} \\"


def test_a_decode_fp8_kv_cache_under_mooncake_is_refused(tmp_path, capsys):
    code, out = _mooncake(tmp_path, capsys, _decode_flag("--kv-cache-dtype=fp8"))
    assert code == 1 and set(_errors(out)) == {"mooncake-kv-region-length"}, out
    fix = _errors(out)["mooncake-kv-region-length"]["fix"]
    assert "--kv-cache-dtype" in fix, fix


def test_the_region_rule_holds_on_0_24_and_for_fp8_e4m3(tmp_path, capsys):
    code, out = _mooncake(tmp_path, capsys, ("v0.20.0", "v0.24.0"), _decode_flag("--kv-cache-dtype=fp8_e4m3"))
    assert code == 1 and "mooncake-kv-region-length" in _errors(out), out


def test_controls_the_same_dtype_an_older_release_or_another_block_size(tmp_path, capsys):
    code, out = _mooncake(tmp_path, capsys)  # the valid pair: judged (branch i9-mooncake32) and ok
    assert code == 0 and not _errors(out), out
    prefill_kv = '"kv_role":"kv_producer", "kv_connector_extra_config":{"mooncake_protocol":"rdma"}}\' \\'
    code, out = _mooncake(tmp_path, capsys, (prefill_kv, prefill_kv + "\n                --kv-cache-dtype=fp8 \\"),
                          _decode_flag("--kv-cache-dtype=fp8"), name="both.yaml")
    assert code == 0 and not _errors(out), out  # fp8 on both
    code, out = _mooncake(tmp_path, capsys, ("v0.20.0", "v0.18.0"), _decode_flag("--kv-cache-dtype=fp8"), name="old.yaml")
    # 0.18.0's connector has no length check and copies the prefill's raw bytes with its own block_len
    assert "copies the prefill's raw KV bytes" in _errors(out)["mooncake-kv-region-length"]["message"], out
    code, out = _mooncake(tmp_path, capsys, _decode_flag("--kv-cache-dtype=fp8"), _decode_flag("--block-size=256"),
                          name="block.yaml")
    # other block sizes: the lengths are not read here, so the pair is not judged
    assert code == 3 and "mooncake-kv-region-length" not in _errors(out), out


def test_an_unknown_model_s_auto_kv_cache_is_not_decided(tmp_path, capsys):
    code, out = _mooncake(tmp_path, capsys, ("openai/gpt-oss-120b", "example/private-model"),
                          _decode_flag("--kv-cache-dtype=fp8"))
    assert code == 3 and not _errors(out), out


def test_mooncake_tp_sizes_neither_dividing_the_other_are_refused(tmp_path, capsys):
    edits = [("openai/gpt-oss-120b", "example/private-model"), ("--tensor-parallel-size=1", "--tensor-parallel-size=2")]
    code, out = _mooncake(tmp_path, capsys, *edits, (DECODE_TP, "--tensor-parallel-size=3"))
    assert code == 1 and "mooncake-tp-indivisible" in _errors(out), out
    code, out = _mooncake(tmp_path, capsys, *edits, name="ok.yaml")  # control: 2 and 4
    assert "mooncake-tp-indivisible" not in _errors(out), out
