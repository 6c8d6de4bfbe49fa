"""Dynamo's vLLM worker flags per Dynamo release, made exact (read in every ai-dynamo wheel 0.6.0-1.6.1 and the kvbm
wheels 0.7.0-1.6.1), across the graph formats a worker is written in: DynamoGraphDeployment v1alpha1 (``services``)
and v1beta1 (``components``), and a launch script (``bash -c "... python3 -m dynamo.vllm ..."``).

- One boundary for ``--connector``: ai-dynamo 1.0.0 already rejects it and adds no connector
  (:data:`~pdd_operator.compat.dynamo_worker_flags.CONNECTOR_REJECTED_SINCE`, also read by
  :func:`~pdd_operator.compat.dynamo_engine_defaults.added_connector`); a bare ``--connector`` (an empty list) is
  not "explicitly set" there; 0.7.1 still refuses ``--connector none`` beside ``--kv-transfer-config``.
- ``--disaggregation-mode``'s values per release (``encode`` from 1.1.0, ``pd`` from 1.3.0) and the legacy role
  flags beside it (ValueError in 1.0.0-1.3.1): ``engine-args-invalid``.
- KVBM's PdConnector before kvbm 0.8.0 (ai-dynamo/dynamo#4957) on vLLM >= 0.11.1: ``kvbm-pd-connector-listener``.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.compat import dynamo_engine_defaults, evaluate
from pdd_operator.compat.dynamo_engine_defaults import added_connector
from pdd_operator.compat.dynamo_worker_flags import (
    CONNECTOR_REJECTED_SINCE,
    RELEASES_READ,
    connector_refusal,
    flag_refusals,
)
from pdd_operator.compat.pair import PDPair, role_from_container
from pdd_operator.vllm.architectures import traits
from tests.unit.test_public_report_kinds_67 import RUNTIME, _v1alpha1, _v1beta1
from tests.unit.test_turn2_variants import KV, check, container, rules, workload

WITH_KV = ["--kv-transfer-config", KV]
MODE_P, MODE_D = ["--disaggregation-mode", "prefill"], ["--disaggregation-mode", "decode"]
_KVBM = {"kv_connector": "DynamoConnector", "kv_connector_module_path": "kvbm.vllm_integration.connector",
         "kv_role": "kv_both"}
PD = json.dumps({"kv_connector": "PdConnector", "kv_role": "kv_both",
                 "kv_connector_module_path": "kvbm.vllm_integration.connector",
                 "kv_connector_extra_config": {"connectors": [_KVBM, {"kv_connector": "NixlConnector",
                                                                      "kv_role": "kv_both"}]}})


def _script(image, p_args, d_args, model="Qwen/Qwen3-8B"):
    """A launch-script pair: two Deployments whose container runs ``bash -c`` with the worker's command line."""
    docs = []
    for role, args in (("prefill", p_args), ("decode", d_args)):
        line = " ".join(["exec python3 -m dynamo.vllm --model", model, *(f"'{a}'" if a.startswith("{") else a
                                                                         for a in args)])
        docs.append(workload(f"qwen-{role}", role, container([], image=image, command=["/bin/bash", "-c", line])))
    return docs


FORMATS = {
    "v1alpha1": lambda image, p, d: [_v1alpha1(image, p, d)],
    "v1beta1": lambda image, p, d: [_v1beta1(image, p, d)],
    "script": _script,
}


def _check(tmp_path, capsys, fmt, image, p_args, d_args):
    return check(tmp_path, capsys, *FORMATS[fmt](image, p_args, d_args))


def _messages(out, rule):
    return [f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == rule]


# --- one definition of the --connector boundary -----------------------------------------------------------------------


def test_the_connector_boundary_is_defined_once():
    assert not hasattr(dynamo_engine_defaults, "NO_DEFAULT_CONNECTOR_SINCE")
    assert dynamo_engine_defaults.CONNECTOR_REJECTED_SINCE is CONNECTOR_REJECTED_SINCE == (1, 0, 0)
    argv = ["dynamo.vllm", "--model", "M"]
    for release in RELEASES_READ:  # the worker adds no connector exactly where it rejects --connector
        adds_none = added_connector(argv, release, "img")[0] == {}
        rejects = connector_refusal({"--connector": "nixl"}, {}, release) is not None
        assert adds_none is rejects is (release >= (1, 0, 0)), release


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize(("tag", "connector", "refused"), [
    ("1.0.0", ["nixl"], True), ("1.0.2", ["nixl"], True), ("1.1.1", ["kvbm", "nixl"], True), ("1.6.1", ["none"], True),
    ("1.0.0", [], False), ("1.3.1", [], False), ("1.6.1", [], False), ("0.9.1", ["nixl"], False)])
def test_connector_flag_from_dynamo_1_0_0(tmp_path, capsys, fmt, tag, connector, refused):
    # _reject_connector_flag (1.0.0 args.py lines 404-451): explicitly_set = bool(connector_list) or DYN_CONNECTOR is
    # set, and a bare --connector (nargs="*") is []: not refused. 0.9.1 builds the connector from it (no
    # --kv-transfer-config here): not refused either.
    role = (MODE_P, MODE_D) if tag >= "1" else (["--is-prefill-worker"], ["--is-decode-worker"])
    kv = WITH_KV if tag >= "1" else []
    code, out = _check(tmp_path, capsys, fmt, RUNTIME + tag, [*role[0], "--connector", *connector, *kv],
                       [*role[1], *kv])
    assert ("dynamo-connector-flag" in rules(out, "error")) is refused, out
    if refused:
        assert code == 1 and any("Dynamo " + tag in m for m in _messages(out, "dynamo-connector-flag")), out
    assert connector_refusal({"--connector": True}, {"DYN_CONNECTOR": ""}, (1, 0, 0)) is not None


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize(("tag", "refused"), [("0.7.1", True), ("0.7.0", True), ("0.8.0", False), ("0.9.1", False)])
def test_connector_none_beside_kv_transfer_config_up_to_0_7_1(tmp_path, capsys, fmt, tag, refused):
    code, out = _check(tmp_path, capsys, fmt, RUNTIME + tag, ["--is-prefill-worker", "--connector", "none", *WITH_KV],
                       ["--is-decode-worker", "--connector", "none", *WITH_KV])
    assert ("dynamo-connector-flag" in rules(out, "error")) is refused, out


# --- --disaggregation-mode values and the legacy role flags beside it -------------------------------------------------


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize(("tag", "mode", "refused"), [
    ("1.2.1", "pd", True), ("1.0.2", "pd", True), ("1.3.1", "pd", False), ("1.4.0", "pd", False),
    ("1.3.1", "prefil", True), ("1.6.1", "Prefill", True), ("1.0.0", "prefill", False)])
def test_disaggregation_mode_values_by_release(tmp_path, capsys, fmt, tag, mode, refused):
    code, out = _check(tmp_path, capsys, fmt, RUNTIME + tag, ["--disaggregation-mode", mode, *WITH_KV],
                       [*MODE_D, *WITH_KV])
    found = [m for m in _messages(out, "engine-args-invalid") if "--disaggregation-mode" in m]
    assert bool(found) is refused, out
    if refused:
        assert code == 1 and "invalid choice" in found[0] and found[0].startswith("prefill:"), out


def test_encode_mode_comes_with_dynamo_1_1_0():
    assert [r.kind for r in flag_refusals({"--disaggregation-mode": "encode"}, (1, 0, 2))] == ["value"]
    assert flag_refusals({"--disaggregation-mode": "encode"}, (1, 1, 0)) == []
    # before 1.0.0 the flag itself is missing: one not-yet refusal, no value judged
    assert [r.kind for r in flag_refusals({"--disaggregation-mode": "pd"}, (0, 9, 1))] == ["not-yet"]
    assert flag_refusals({"--disaggregation-mode": "<unknown:MODE>"}, (1, 0, 0)) == []


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize(("tag", "rule"), [("1.0.0", "engine-args-invalid"), ("1.3.1", "engine-args-invalid"),
                                           ("1.4.0", "cli-flag-removed")])
def test_legacy_role_flag_beside_disaggregation_mode(tmp_path, capsys, fmt, tag, rule):
    code, out = _check(tmp_path, capsys, fmt, RUNTIME + tag, ["--is-prefill-worker", *MODE_P, *WITH_KV],
                       [*MODE_D, *WITH_KV])
    assert code == 1 and rule in rules(out, "error"), out
    conflict = [m for m in _messages(out, "engine-args-invalid") if "Cannot combine" in m]
    assert bool(conflict) is (tag < "1.4"), out


# --- KVBM's PdConnector before kvbm 0.8.0 -----------------------------------------------------------------------------


def _kvbm_graph(image):
    return [_v1alpha1(image, ["--is-prefill-worker", "--kv-transfer-config", PD], ["--is-decode-worker", *WITH_KV])]


def _kvbm_deployments(image):
    return [workload(f"m-{r}", r, container(["Qwen/Qwen3-8B", "--kv-transfer-config", PD if r == "prefill" else KV],
                                            image=image)) for r in ("prefill", "decode")]


def _kvbm_connector_flag(image):  # Dynamo before 1.0 builds PdConnector itself from --connector kvbm nixl
    return [_v1beta1(image, ["--is-prefill-worker", "--connector", "kvbm", "nixl"], ["--is-decode-worker"])]


@pytest.mark.parametrize(("docs", "image", "warned"), [
    (_kvbm_deployments, "vllm/vllm-openai:v0.12.0", True), (_kvbm_deployments, "vllm/vllm-openai:v0.11.1", True),
    (_kvbm_graph, RUNTIME + "0.7.0.post2", True),  # vLLM 0.11.2; no kvbm/ai-dynamo 0.7.0.post2 wheel was published
    (_kvbm_deployments, "vllm/vllm-openai:v0.11.0", False), (_kvbm_deployments, "vllm/vllm-openai:v0.13.0", False),
    # Dynamo's own images: 0.7.x ships vLLM 0.11.0 (the worker starts the listener itself), 0.8.x vLLM 0.12.0 and
    # 0.9.x 0.14.1 with kvbm releases that forward the handshake
    (_kvbm_connector_flag, RUNTIME + "0.7.1", False), (_kvbm_connector_flag, RUNTIME + "0.8.1", False),
    (_kvbm_graph, RUNTIME + "0.9.1", False)])
def test_pd_connector_whose_kvbm_cannot_be_told(tmp_path, capsys, docs, image, warned):
    code, out = check(tmp_path, capsys, *docs(image))
    assert ("kvbm-pd-connector-listener" in rules(out, "warning")) is warned, out
    assert "kvbm-pd-connector-listener" not in rules(out, "error"), out
    assert any(f["message"].startswith("prefill: not checked: PdConnector[") for r in out["results"] for f in r["findings"]
               if f["rule"] == "multi-connector-child-not-checked"), out  # the wrapper was read in every variant


def _pd_pair(image: str, vllm: str) -> PDPair:
    p = {"name": "w", "image": image, "command": ["vllm", "serve", "Qwen/Qwen3-8B", "--kv-transfer-config", PD]}
    d = {"name": "w", "image": image, "command": ["vllm", "serve", "Qwen/Qwen3-8B", "--kv-transfer-config", KV]}
    return PDPair("test", role_from_container("prefill", p, {}, version_text=vllm),
                  role_from_container("decode", d, {}, version_text=vllm), traits(None, None, None, "Qwen/Qwen3-8B"))


@pytest.mark.parametrize(("tag", "vllm", "severity"), [
    ("0.7.1", "0.12.0", "error"), ("0.7.0", "0.11.1", "error"), ("0.7.1", "0.11.0", None),
    ("0.8.0", "0.12.0", None), ("1.0.0", "0.16.0", None)])
def test_pd_connector_of_a_known_kvbm_release(tag, vllm, severity):
    found = [f for f in evaluate(_pd_pair(RUNTIME + tag, vllm)).findings if f.rule == "kvbm-pd-connector-listener"]
    assert [f.severity for f in found] == ([severity] if severity else []), found
    if severity:
        assert found[0].message.startswith("prefill:") and "TypeError" in found[0].message


# --- which image tags name a Dynamo release ---------------------------------------------------------------------------


@pytest.mark.parametrize(("tag", "judged"), [
    ("1.4.0-efa", True), ("1.4.0-efa-amd64", True), ("1.4.0-cuda13", True), ("1.4.0", True),
    ("1.4.0-kimi-k3-dev.1", False), ("1.4.1-a.x-k2-post.1", False)])
def test_variant_tags_of_a_release_are_judged_previews_are_not(tmp_path, capsys, tag, judged):
    # the variant suffixes of wrapped_vllm_versions.json name the release; a -dev / rc / custom tag names none
    code, out = check(tmp_path, capsys, _v1alpha1(RUNTIME + tag, ["--is-prefill-worker", *WITH_KV],
                                                  ["--is-decode-worker", *WITH_KV]))
    assert ("cli-flag-removed" in rules(out, "error")) is judged, out


@pytest.mark.parametrize(("tag", "release"), [
    ("1.3.0.post1", (1, 3, 0)), ("0.7.0.post1", (0, 7, 0)), ("0.7.0.post2", None), ("0.6.1.post1", None),
    ("1.3.0-rc.9", None), ("1.3.0-dev.1", None), ("v0.9.1", (0, 9, 1))])
def test_post_releases_name_a_release_only_where_read(tag, release):
    assert dynamo_engine_defaults.dynamo_release(RUNTIME + tag) == release
