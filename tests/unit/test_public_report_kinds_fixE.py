"""Variants of what sets 119 and 116 (tests/unit/data/public_reports_119, _116) taught about LMCache in P/D.

1. **One unknown value inside ``--kv-transfer-config`` set the whole engine aside.** LMCache's k8s xP1D example writes
   ``"lmcache_rpc_port": "producer-${POD_ID}"`` (``POD_ID=$(hostname | awk ...)``) inside ``kv_connector_extra_config``;
   the checker read the whole flag as "computed by a command" and did not judge the engine at all, though its
   connector and role are written. vLLM builds the connector and the engine's side from ``kv_connector``,
   ``kv_connector_module_path`` and ``kv_role`` alone, so now the engine is read and only the values that are not in
   the files are unknown (:func:`pdd_operator.vllm.kv_transfer_config.read_partly`): a rule that reads one is "not
   checked" for it (:func:`pdd_operator.compat.rules.base.run_check`), every other rule judges the pair. An unknown
   connector, module path, role or extra config object still leaves the engine unknown.
2. **MultiConnector [NixlConnector, LMCacheMPConnector] before 0.25.0** (set 119's LMCache MP guide on 0.23.0): the
   ``multi-connector-params-producers`` warning put every release on the lmcache package. vLLM's own class decides it
   per release (:func:`pdd_operator.compat.rules.multi_connector.params_producer_class`): it returns ``None`` on
   0.12.0-0.19.x (nothing fails), ``{}`` on 0.20.0-0.21.x (every prefill request raises "Only one connector can
   produce KV transfer params": an error), and 0.22.0-0.24.x bind the lmcache package's class where it imports
   (a warning; an error with ``LMCACHE_USE_UPSTREAM_MP`` set). A child's external ``kv_connector_module_path``
   always depends on that package. The decode's NIXL child returns no params, so only the prefill is judged.
3. **A lone ``kv_both`` LMCache engine with ``LMCACHE_CONFIG_FILE`` was "not checked"** (set 119's LMCache#1088 and
   #2306 commands, set 116's Hygon LMCache-over-Mooncake engine): its config file may turn LMCache's P/D mode on, but
   with no other engine in the input there is no pair whatever the file holds: nothing to check, with a note
   (:func:`pdd_operator.compat.manifests.lone_lmcache_engine`). Two such engines stay "not checked" (which side each
   plays is in their files: commit d2de55a2).
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.kv_transfer_config import (
    PartlyKnown,
    UnknownField,
    read_partly,
    reading_fields,
    unknown_fields,
)
from tests.unit.cli_check import check_text as _check
from tests.unit.cli_check import rules as _rules


def _reasons(out: dict) -> str:
    return " ".join(s["reason"] for s in out["notChecked"])


def _why(text: str) -> str | None:
    return "unknown" if "<unknown:" in text else None


# --- the reader ----------------------------------------------------------------------------------------------------

def test_an_unknown_value_in_the_extra_config_leaves_the_rest_known():
    raw = ('{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_producer","kv_connector_extra_config":'
           '{"discard_partial_chunks": false, "lmcache_rpc_port": "producer-<unknown:hostname>"}}')
    config, fields = read_partly(raw, _why)
    assert fields == (("kv_connector_extra_config.lmcache_rpc_port", "unknown"),)
    assert config["kv_role"] == "kv_producer" and config["kv_connector"] == "LMCacheConnectorV1"
    extra = config["kv_connector_extra_config"]
    assert isinstance(extra, PartlyKnown) and extra.get("discard_partial_chunks") is False
    with reading_fields():
        assert extra.get("discard_partial_chunks") is False and "lmcache_rpc_port" in extra
        with pytest.raises(UnknownField) as raised:
            extra.get("lmcache_rpc_port")
    assert raised.value.field == "kv_connector_extra_config.lmcache_rpc_port"
    assert extra.get("lmcache_rpc_port") == "producer-<unknown:hostname>"  # outside a rule: the expanded text


def test_a_bare_unknown_number_is_read_as_an_unknown_value():
    config, fields = read_partly('{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_port": <unknown:PORT>}', _why)
    assert [path for path, _ in fields] == ["kv_port"] and config["kv_connector"] == "NixlConnector"


def test_an_unknown_value_inside_one_child_of_a_multiconnector():
    raw = json.dumps({"kv_connector": "MultiConnector", "kv_role": "kv_producer", "kv_connector_extra_config": {
        "connectors": [{"kv_connector": "NixlConnector", "kv_role": "kv_producer"},
                       {"kv_connector": "LMCacheMPConnector", "kv_role": "kv_both",
                        "kv_connector_extra_config": {"lmcache.mp.port": "<unknown:LMC_PORT>"}}]}})
    config, fields = read_partly(raw, _why)
    assert [p for p, _ in fields] == ["kv_connector_extra_config.connectors[1].kv_connector_extra_config.lmcache.mp.port"]
    assert unknown_fields(config) == list(fields)


@pytest.mark.parametrize("raw", [
    '{"kv_connector":"NixlConnector","kv_role":"<unknown:ROLE>"}',
    '{"kv_connector":"kv_<unknown:X>","kv_role":"kv_both"}',
    '{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_connector_module_path":"<unknown:M>"}',
    '{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_connector_extra_config":<unknown:EXTRA>}',
    '{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":<unknown:C>}}',
    '{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":'
    '[{"kv_connector":"NixlConnector","kv_role":"kv_<unknown:R>"}]}}',
    '<unknown:KV_CONFIG>',
    '{"kv_connector":"NixlConnector","kv_role":"kv_both"}',  # nothing unknown: not a partial read
])
def test_what_decides_the_connector_or_the_side_unknown_leaves_the_config_unknown(raw):
    assert read_partly(raw, _why) is None


# --- whole files ---------------------------------------------------------------------------------------------------

def _nixl_script(p_extra: str, d_extra: str = '{}', p_dtype: str = "auto", d_dtype: str = "auto",
                 setup: str = "HOSTID=$(hostname | cut -d- -f2)\n", version: str = "0.26.0",
                 d_port: str = "5601") -> str:
    def kv(role: str, extra: str) -> str:
        body = json.dumps({"kv_connector": "NixlConnector", "kv_role": role, "kv_connector_extra_config": "@"})
        return body.replace('"@"', extra).replace('"', '\\"')
    return (f"pip install vllm=={version}\n{setup}"
            f'CUDA_VISIBLE_DEVICES=0 vllm serve Qwen/Qwen3-8B --port 8100 --kv-cache-dtype {p_dtype} '
            f'--kv-transfer-config "{kv("kv_producer", p_extra)}" &\n'
            f"CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT={d_port} vllm serve Qwen/Qwen3-8B --port 8200 "
            f'--kv-cache-dtype {d_dtype} --kv-transfer-config "{kv("kv_consumer", d_extra)}" &\nwait\n')


@pytest.mark.parametrize(("d_dtype", "code"), [("auto", 0), ("fp8", 1)])
def test_nixl_pair_with_an_unknown_kv_ip_is_judged(tmp_path, capsys, d_dtype, code):
    # kv_ip in the extra config from a command: no NIXL rule reads it, so the pair is judged as a whole
    text = _nixl_script('{"kv_ip": "10.0.0.${HOSTID}"}', d_dtype=d_dtype)
    got, out = _check(tmp_path, capsys, text)
    assert got == code and not out["notChecked"], out
    assert ("kv-cache-dtype-mismatch" in _rules(out, "error")) == (code == 1)


def test_nixl_pair_with_an_unknown_kv_port_from_a_variable_on_0_18(tmp_path, capsys):
    text = _nixl_script('{"kv_port": ${KV_PORT}}', d_dtype="fp8", setup="KV_PORT=$(cat /etc/kv_port)\n",
                        version="0.18.1")
    got, out = _check(tmp_path, capsys, text)
    assert got == 1 and "kv-cache-dtype-mismatch" in _rules(out, "error"), out


def test_unknown_nixl_backends_hold_back_only_the_rules_that_read_them(tmp_path, capsys):
    text = _nixl_script('{"backends": ["${BK}"]}', d_dtype="fp8", setup="BK=$(cat /etc/backend)\n")
    got, out = _check(tmp_path, capsys, text)
    assert got == 1 and "kv-cache-dtype-mismatch" in _rules(out, "error"), out  # still judged
    reasons = _reasons(out)
    assert "prefill's --kv-transfer-config kv_connector_extra_config.backends" in reasons, reasons
    assert "computed by a command" in reasons
    got, out = _check(tmp_path, capsys, text.replace("--kv-cache-dtype fp8", "--kv-cache-dtype auto"))
    assert got == 3 and not _rules(out, "error") and "kv_connector_extra_config.backends" in _reasons(out), out


def test_an_unknown_role_stays_unknown(tmp_path, capsys):
    text = _nixl_script('{"kv_ip": "10.0.0.1"}', d_dtype="fp8", setup="R=$(cat /etc/role)\n").replace(
        "kv_producer", "kv_${R}")
    got, out = _check(tmp_path, capsys, text)
    assert got == 3 and not out["results"], out


def _multi(role: str, nixl_role: str, lmc_port: str) -> str:
    body = json.dumps({"kv_connector": "MultiConnector", "kv_role": role, "kv_connector_extra_config": {"connectors": [
        {"kv_connector": "NixlConnector", "kv_role": nixl_role},
        {"kv_connector": "LMCacheMPConnector", "kv_role": "kv_both",
         "kv_connector_extra_config": {"lmcache.mp.host": "tcp://localhost", "lmcache.mp.port": "@"}}]}})
    return body.replace('"@"', lmc_port).replace('"', '\\"')


@pytest.mark.parametrize(("d_side", "code", "rule"), [("5600", 1, "side-channel-port-conflict"), ("5558", 0, None)])
def test_multiconnector_with_an_unknown_value_in_one_child_is_judged(tmp_path, capsys, d_side, code, rule):
    # LMCache's MP guide on one node, each LMCache port from a variable read at start: the NIXL child is judged
    p_kv, d_kv = _multi("kv_producer", "kv_producer", "${P_LMC}"), _multi("kv_consumer", "kv_consumer", "${D_LMC}")
    text = ("pip install vllm==0.26.0\nP_LMC=$(cat /etc/lmc-p)\nD_LMC=$(cat /etc/lmc-d)\n"
            "CUDA_VISIBLE_DEVICES=6 VLLM_NIXL_SIDE_CHANNEL_HOST=127.0.0.1 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 vllm serve "
            f'meta-llama/Llama-3.1-8B-Instruct --port 8001 --kv-transfer-config "{p_kv}" &\n'
            f"CUDA_VISIBLE_DEVICES=7 VLLM_NIXL_SIDE_CHANNEL_HOST=127.0.0.1 VLLM_NIXL_SIDE_CHANNEL_PORT={d_side} vllm serve "
            f'meta-llama/Llama-3.1-8B-Instruct --port 8002 --kv-transfer-config "{d_kv}" &\n'
            "wait\n")
    got, out = _check(tmp_path, capsys, text)
    assert got == code, out
    assert (rule in _rules(out, "error")) if rule else not _rules(out, "error"), out
    assert "computed by a command" not in _reasons(out)


def _statefulsets(connector: str, p_extra: str, d_extra: str, p_dtype: str, d_dtype: str,
                  image: str = "vllm/vllm-openai:v0.26.0", p_flags: str = "", gpus: int = 1) -> str:
    def sts(name: str, role: str, port: int, extra: str, dtype: str) -> str:
        flags = p_flags if role == "kv_producer" else ""
        kv = json.dumps({"kv_connector": connector, "kv_role": role, "kv_connector_extra_config": "@"}).replace(
            '"@"', extra).replace('"', '\\"')
        return f"""apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: vllm-{name}
spec:
  serviceName: vllm-{name}-svc
  replicas: 1
  selector:
    matchLabels:
      app: vllm-{name}
  template:
    metadata:
      labels:
        app: vllm-{name}
    spec:
      containers:
      - name: container
        image: {image}
        env:
        - name: VLLM_NIXL_SIDE_CHANNEL_HOST
          valueFrom:
            fieldRef:
              fieldPath: status.podIP
        command: ["/bin/bash", "-c"]
        args:
        - |
          POD_ID=$(hostname | awk -F'-' '{{print $NF}}')
          vllm serve Qwen/Qwen2.5-0.5B --port {port} --kv-cache-dtype {dtype} {flags} \\
            --kv-transfer-config "{kv}"
        resources:
          limits:
            nvidia.com/gpu: "{gpus}"
"""
    return (sts("prefiller", "kv_producer", 8100, p_extra, p_dtype) + "---\n"
            + sts("decoder", "kv_consumer", 8200, d_extra, d_dtype))


def test_set_119_statefulsets_are_read_with_the_pod_id_in_the_extra_config(tmp_path, capsys):
    text = _statefulsets("LMCacheConnectorV1", '{"lmcache_rpc_port": "producer-${POD_ID}"}',
                         '{"lmcache_rpc_port": "consumer0"}', "auto", "auto")
    got, out = _check(tmp_path, capsys, text, "xp1d.yaml")
    reasons = _reasons(out)
    # both engines read and paired; LMCache's channel is not NIXL's: the pair is not checked for that, not set aside
    assert got == 3 and "computed by a command" not in reasons and "no prefill engine" not in reasons, out
    assert "LMCacheConnectorV1" in reasons


@pytest.mark.parametrize(("d_dtype", "code"), [("auto", 0), ("fp8", 1)])
def test_statefulsets_of_nixl_with_the_pod_id_in_the_extra_config_are_judged(tmp_path, capsys, d_dtype, code):
    text = _statefulsets("NixlConnector", '{"engine_tag": "p-${POD_ID}"}', '{"engine_tag": "d-${POD_ID}"}',
                         "auto", d_dtype)
    got, out = _check(tmp_path, capsys, text, "xp1d.yaml")
    assert got == code and not out["notChecked"], out
    assert ("kv-cache-dtype-mismatch" in _rules(out, "error")) == (code == 1)


# --- 3. a lone kv_both LMCache engine whose P/D mode its config file may turn on -----------------------------------

def _lmcache_line(env: str = "LMCACHE_CONFIG_FILE=/etc/lmcache/cpu.yaml", connector: str = "LMCacheConnectorV1",
                  role: str = "kv_both", model: str = "Qwen/Qwen3-8B", port: int = 8000) -> str:
    return (f"{env} vllm serve {model} --port {port} --kv-transfer-config "
            f"'{{\"kv_connector\":\"{connector}\",\"kv_role\":\"{role}\"}}'\n")


@pytest.mark.parametrize(("pin", "env"), [
    ("pip install vllm==0.9.1 lmcache==0.3.1.post1\n", "LMCACHE_CONFIG_FILE=/etc/lmcache/cpu.yaml"),
    ("pip install vllm==0.26.0\n", "LMCACHE_CONFIG_FILE=blend.yaml"),
    ("", "LMCACHE_ENABLE_PD=True LMCACHE_PD_ROLE=sender"),
])
def test_a_lone_lmcache_kv_both_engine_is_nothing_to_check_with_a_note(tmp_path, capsys, pin, env):
    code, out = _check(tmp_path, capsys, "#!/bin/bash\n" + pin + _lmcache_line(env))
    assert code == 4 and not out["notChecked"] and not out["results"], out
    notes = [a["reason"] for a in out["aggregated"]]
    assert len(notes) == 1 and env.split("=", 1)[0] in notes[0] and "no other vLLM engine" in notes[0], notes


def test_a_lone_lmcache_mp_engine_in_a_multiconnector_is_nothing_to_check(tmp_path, capsys):
    kv = json.dumps({"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {
        "connectors": [{"kv_connector": "LMCacheMPConnector", "kv_role": "kv_both",
                        "kv_connector_extra_config": {"lmcache.mp.port": 6555, "pd_role": "sender"}},
                       {"kv_connector": "OffloadingConnector", "kv_role": "kv_both"}]}})
    code, out = _check(tmp_path, capsys, f"pip install vllm==0.26.0\nvllm serve Qwen/Qwen3-8B --kv-transfer-config '{kv}'\n")
    assert code == 4 and out["aggregated"] and "kv_connector_extra_config" in out["aggregated"][0]["reason"], out


def test_a_lone_lmcache_deployment_with_a_config_file_is_nothing_to_check(tmp_path, capsys):
    kv = json.dumps({"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"})
    doc = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "qwen-lmcache"}, "spec": {
        "replicas": 1, "selector": {"matchLabels": {"app": "q"}}, "template": {
            "metadata": {"labels": {"app": "q"}}, "spec": {"containers": [{
                "name": "vllm", "image": "vllm/vllm-openai:v0.23.0", "command": ["vllm", "serve"],
                "args": ["Qwen/Qwen3-8B", "--kv-transfer-config", kv],
                "env": [{"name": "LMCACHE_CONFIG_FILE", "value": "/config/lmcache.yaml"}],
                "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}
    code, out = _check(tmp_path, capsys, json.dumps(doc), "lmcache.yaml")
    assert code == 4 and out["aggregated"] and not out["notChecked"], out


@pytest.mark.parametrize("text", [
    # two such engines: which side each plays is in their config files (commit d2de55a2 keeps them not checked)
    _lmcache_line() + _lmcache_line(model="Qwen/Qwen3-4B", port=8001),
    _lmcache_line() + _lmcache_line(port=8001),
    # a lone kv_producer is a prefill whose decode is elsewhere, a lone NIXL kv_both half of a pair elsewhere
    _lmcache_line(role="kv_producer"),
    _lmcache_line(env="VLLM_NIXL_SIDE_CHANNEL_PORT=5600", connector="NixlConnector"),
])
def test_with_a_peer_engine_or_another_role_or_connector_it_stays_not_checked(tmp_path, capsys, text):
    code, out = _check(tmp_path, capsys, "pip install vllm==0.23.0\n" + text)
    assert code == 3 and out["notChecked"] and not out.get("aggregated"), out


# --- 2. MultiConnector [NixlConnector, LMCacheMPConnector] per release ---------------------------------------------

MP_CHILD = {"kv_connector": "LMCacheMPConnector", "kv_role": "kv_both",
            "kv_connector_extra_config": {"lmcache.mp.host": "tcp://localhost", "lmcache.mp.port": 6555}}


def _mp_guide(version: str, env: str = "", child: dict | None = None, lmcache_first: bool = False) -> str:
    """LMCache's MP P/D guide on one node (set 119), on ``version``; ``env`` on the prefill's line."""
    def kv(role: str) -> str:
        children = [{"kv_connector": "NixlConnector", "kv_role": role}, child or MP_CHILD]
        return json.dumps({"kv_connector": "MultiConnector", "kv_role": role, "kv_connector_extra_config": {
            "connectors": children[::-1] if lmcache_first else children}})
    return (f"pip install vllm=={version}\n"
            f"CUDA_VISIBLE_DEVICES=6 VLLM_NIXL_SIDE_CHANNEL_HOST=127.0.0.1 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 {env} "
            f"vllm serve meta-llama/Llama-3.1-8B-Instruct --port 8001 --kv-transfer-config '{kv('kv_producer')}' &\n"
            "CUDA_VISIBLE_DEVICES=7 VLLM_NIXL_SIDE_CHANNEL_HOST=127.0.0.1 VLLM_NIXL_SIDE_CHANNEL_PORT=5558 "
            f"vllm serve meta-llama/Llama-3.1-8B-Instruct --port 8002 --kv-transfer-config '{kv('kv_consumer')}' &\nwait\n")


def _params(out: dict) -> list[dict]:
    return [f for r in out["results"] for f in r["findings"] if f["rule"] == "multi-connector-params-producers"]


@pytest.mark.parametrize("version", ["0.20.0", "0.20.2", "0.21.0"])
@pytest.mark.parametrize("lmcache_first", [False, True])
def test_vllms_own_class_returning_an_empty_dict_fails_the_prefill(tmp_path, capsys, version, lmcache_first):
    code, out = _check(tmp_path, capsys, _mp_guide(version, lmcache_first=lmcache_first))
    found = _params(out)
    assert code == 1 and [f["severity"] for f in found] == ["error"], out
    assert found[0]["message"].startswith("prefill:") and "every prefill/decode request" in found[0]["message"]


@pytest.mark.parametrize("version", ["0.22.0", "0.23.0", "0.24.0"])
def test_the_package_class_preferred_from_0_22_is_a_warning_unless_the_builtin_is_forced(tmp_path, capsys, version):
    code, out = _check(tmp_path, capsys, _mp_guide(version))
    assert code == 0 and [f["severity"] for f in _params(out)] == ["warning"], out
    assert "lmcache package's class" in _params(out)[0]["message"]
    code, out = _check(tmp_path, capsys, _mp_guide(version, env="LMCACHE_USE_UPSTREAM_MP=1"))
    assert code == 1 and [f["severity"] for f in _params(out)] == ["error"], out
    assert "LMCACHE_USE_UPSTREAM_MP is set" in _params(out)[0]["message"]


@pytest.mark.parametrize("version", ["0.12.0", "0.14.0", "0.18.1", "0.19.1"])
def test_vllms_own_class_returning_none_fails_nothing(tmp_path, capsys, version):
    code, out = _check(tmp_path, capsys, _mp_guide(version))
    assert not _params(out) and code in (0, 1), out
    assert "multi-connector-params-producers" not in _rules(out)


@pytest.mark.parametrize("version", ["0.18.1", "0.21.0"])
def test_an_external_module_path_depends_on_that_package(tmp_path, capsys, version):
    child = {**MP_CHILD, "kv_connector_module_path": "lmcache.integration.vllm.lmcache_mp_connector"}
    code, out = _check(tmp_path, capsys, _mp_guide(version, child=child))
    found = _params(out)
    assert [f["severity"] for f in found] == ["warning"] and "lmcache.integration.vllm" in found[0]["message"], out


@pytest.mark.parametrize("version", ["0.25.0", "0.26.0", "0.34.0"])
def test_from_0_25_the_params_are_merged(tmp_path, capsys, version):
    _, out = _check(tmp_path, capsys, _mp_guide(version, env="LMCACHE_USE_UPSTREAM_MP=1"))
    assert not _params(out), out


@pytest.mark.parametrize(("connector", "image"), [("LMCacheConnectorV1", "lmcache/vllm-openai:latest-nightly"),
                                                  ("MooncakeConnector", "vllm/vllm-openai:latest")])
@pytest.mark.parametrize(("gpus", "code"), [(1, 1), (2, 3)])
def test_gpu_count_is_judged_on_a_read_engine_of_another_connector_and_an_unknown_release(
        tmp_path, capsys, connector, image, gpus, code):
    # set 119's xP1D prefiller with TP 2: once the engine is read, one device per rank holds on every release
    text = _statefulsets(connector, '{"lmcache_rpc_port": "producer-${POD_ID}"}', '{"lmcache_rpc_port": "c0"}',
                         "auto", "auto", image=image, p_flags="--tensor-parallel-size 2", gpus=gpus)
    got, out = _check(tmp_path, capsys, text, "xp1d.yaml")
    assert got == code and ("parallelism-gpu-count" in _rules(out, "error")) == (code == 1), out


def test_p2p_nccl_pair_with_an_unknown_kv_port_is_not_checked_for_that_rule_only(tmp_path, capsys):
    def kv(role: str, http: int, port: str) -> str:
        body = {"kv_connector": "P2pNcclConnector", "kv_role": role, "kv_buffer_size": "1e9",
                "kv_connector_extra_config": {"proxy_ip": "127.0.0.1", "proxy_port": "30001", "http_port": str(http)}}
        if port:
            body["kv_port"] = port
        return json.dumps(body).replace('"', '\\"')

    def script(port: str) -> str:
        p_kv, d_kv = kv("kv_producer", 20001, port), kv("kv_consumer", 20002, port)
        return ("pip install vllm==0.12.0\nPORT=$(shuf -i 20000-30000 -n 1)\n"
                f'CUDA_VISIBLE_DEVICES=0 vllm serve Qwen/Qwen3-8B --port 20001 --kv-transfer-config "{p_kv}" &\n'
                f'CUDA_VISIBLE_DEVICES=1 vllm serve Qwen/Qwen3-8B --port 20002 --kv-transfer-config "{d_kv}" &\n'
                "wait\n")
    code, out = _check(tmp_path, capsys, script("${PORT}"))
    assert code == 3 and not _rules(out, "error"), out
    assert "p2p-nccl-kv-port-conflict reads prefill's --kv-transfer-config kv_port" in _reasons(out), out
    code, out = _check(tmp_path, capsys, script(""))  # no kv_port on either: both bind the default, on one host
    assert code == 1 and "p2p-nccl-kv-port-conflict" in _rules(out, "error"), out
