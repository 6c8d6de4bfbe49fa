"""Kinds found while starting issue 9's thirty-second round, each with variants and negative controls.

1. NIXL side-channel ports per release. Up to vLLM 0.11.0 every tensor-parallel worker of an engine binds its own
   side-channel port, ``VLLM_NIXL_SIDE_CHANNEL_PORT + DP rank x TP size + TP rank`` (0.11.0 nixl_connector.py lines
   267-270 and 608-622, default base 5557); from 0.11.1 one port per data-parallel rank (0.11.1 lines 352-355,
   default 5600). Two TP-2 engines on one host with bases 5577 and 5578 collide on 0.11.0 and not on 0.11.1. An
   engine of unknown version whose ports overlap only on the old releases is a warning naming them.
2. Environment variables vLLM refuses at startup. 0.34.0's ``validate_environ`` (vllm/platforms/interface.py
   l.1476-1502, called by ``EngineArgs.create_engine_config``) raises for a key of ``envs.removed_environment_variables``
   (``VLLM_MARLIN_INPUT_DTYPE``) and for ``VLLM_USE_V2_MODEL_RUNNER`` set to anything but ``1``; 0.17.0-0.33.0 only
   log unknown names. ``vllm-env-refused``: an error on 0.34.0, nothing before, a warning for an unknown version.
3. A kv_role that contradicts the deployment's own role (a prefill with kv_consumer, a decode with kv_producer) no
   longer decides the pairing: the engine is paired by its flags, labels or name, and the kv_role is judged per
   connector. MooncakeConnector asserts it on the first request (0.14.0 mooncake_connector.py lines 277, 367; 0.34.0
   lines 1190, 1247): an error. P2pNcclConnector's consumer prefill sends nothing and waits for its own KV: an error
   (``p2p-nccl-kv-role``). NixlConnector does not move KV by kv_role: a warning.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.env_vars import refuses, refusing_releases
from tests.unit.test_turn2_variants import check, container, workload

KV = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})


def _messages(out: dict, rule: str, severity: str | None = None) -> list[str]:
    return [f["message"] for r in out["results"] for f in r["findings"]
            if f["rule"] == rule and severity in (None, f["severity"])]


# --- 1. side-channel ports per TP rank up to 0.11.0 -----------------------------------------------------------


def _compose(image: str, ports=(5577, 5578), tp=2) -> dict:
    """Two services of one Compose file on the host network, TP ``tp`` each, side-channel bases ``ports``."""
    def service(port: int, side: int, gpus: list[str]) -> dict:
        return {"image": image, "network_mode": "host", "ipc": "host", "entrypoint": ["vllm", "serve"],
                "command": ["Qwen/Qwen3-8B", "--port", str(port), "--block-size", "16", "-tp", str(tp),
                            "--kv-transfer-config", KV],
                "environment": {"VLLM_NIXL_SIDE_CHANNEL_PORT": str(side)},
                "deploy": {"resources": {"reservations": {"devices": [
                    {"driver": "nvidia", "device_ids": gpus, "capabilities": ["gpu"]}]}}}}
    return {"name": "pd", "services": {"prefill": service(8100, ports[0], ["0", "1"]),
                                       "decode": service(8200, ports[1], ["2", "3"])}}


def _host_network_pods(image: str, ports=(5577, 5578), tp=2, node="gpu-node-1") -> list[dict]:
    """Two hostNetwork Deployments pinned to one node (spec.nodeName), TP ``tp`` each."""
    docs = []
    for role, http, side in (("prefill", 8100, ports[0]), ("decode", 8200, ports[1])):
        c = {"name": "vllm", "image": image, "command": ["vllm", "serve"],
             "args": ["Qwen/Qwen3-8B", "--port", str(http), "--tensor-parallel-size", str(tp),
                      "--kv-transfer-config", KV],
             "env": [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
                     {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": str(side)}],
             "resources": {"limits": {"nvidia.com/gpu": str(tp)}}}
        docs.append(workload(f"q-{role}", role, c, app="q", pod={"hostNetwork": True, "nodeName": node}))
    return docs


FORMS = {"compose": lambda image, **kw: [_compose(image, **kw)], "hostNetwork": _host_network_pods}


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("tag", ["v0.9.2", "v0.10.1.1", "v0.11.0"])
def test_tp_engines_with_adjacent_bases_collide_up_to_0_11_0(form, tag, tmp_path, capsys):
    _, out = check(tmp_path, capsys, *FORMS[form](f"vllm/vllm-openai:{tag}"))
    assert any("5578" in m for m in _messages(out, "side-channel-port-conflict", "error"))


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("tag", ["v0.11.1", "v0.20.0", "v0.34.0"])
def test_one_port_per_engine_from_0_11_1(form, tag, tmp_path, capsys):
    """Negative control: from 0.11.1 each engine binds base + DP rank only, so 5577 and 5578 are disjoint."""
    _, out = check(tmp_path, capsys, *FORMS[form](f"vllm/vllm-openai:{tag}"))
    assert not _messages(out, "side-channel-port-conflict")


@pytest.mark.parametrize("form", sorted(FORMS))
def test_unknown_version_warns_naming_the_per_tp_releases(form, tmp_path, capsys):
    _, out = check(tmp_path, capsys, *FORMS[form]("vllm/vllm-openai:latest"))
    assert not _messages(out, "side-channel-port-conflict", "error")
    warned = _messages(out, "side-channel-port-conflict", "warning")
    assert warned and "0.9.0-0.11.0" in warned[0] and "5578" in warned[0]


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize(("kw", "image"), [
    ({"tp": 1}, "vllm/vllm-openai:latest"),               # one worker: one port on every release
    ({"ports": (5577, 5579)}, "vllm/vllm-openai:latest"),  # TP 2 from 5577 ends at 5578
    ({}, "vllm/vllm-openai:0.12.1.dev12+g0123abc"),      # a development build after 0.12: one port per engine
])
def test_unknown_version_negative_controls(form, kw, image, tmp_path, capsys):
    _, out = check(tmp_path, capsys, *FORMS[form](image, **kw))
    assert not _messages(out, "side-channel-port-conflict")


def test_tp_ports_reach_the_error_only_on_one_host(tmp_path, capsys):
    """Negative control: hostNetwork pods on two named nodes never share the node's ports."""
    docs = _host_network_pods("vllm/vllm-openai:v0.11.0")
    docs[1]["spec"]["template"]["spec"]["nodeName"] = "gpu-node-2"
    _, out = check(tmp_path, capsys, *docs)
    assert not _messages(out, "side-channel-port-conflict")


# --- 2. environment variables vLLM refuses at startup --------------------------------------------------------------


@pytest.mark.parametrize(("name", "value", "version", "expected"), [
    ("VLLM_MARLIN_INPUT_DTYPE", "int8", (0, 34, 0), True),
    ("VLLM_MARLIN_INPUT_DTYPE", "fp8", (0, 34, 0), True),        # any value: the name itself is removed
    ("VLLM_MARLIN_INPUT_DTYPE", "int8", (0, 33, 0), False),      # 0.33.0 reads it
    ("VLLM_MARLIN_INPUT_DTYPE", "int8", (0, 33, 1), None),       # between a release that reads and one that refuses
    ("VLLM_MARLIN_INPUT_DTYPE", "int8", None, None),
    ("VLLM_USE_V2_MODEL_RUNNER", "0", (0, 34, 0), True),
    ("VLLM_USE_V2_MODEL_RUNNER", "true", (0, 34, 0), True),      # compared as text: only "1" passes
    ("VLLM_USE_V2_MODEL_RUNNER", "1", (0, 34, 0), False),
    ("VLLM_USE_V2_MODEL_RUNNER", None, (0, 34, 0), None),        # a value not in the files
    ("VLLM_USE_V2_MODEL_RUNNER", "0", (0, 30, 0), False),
    ("VLLM_NIXL_SIDE_CHANNEL_PORT", "5600", (0, 34, 0), False),
])
def test_refusal_table(name, value, version, expected):
    assert refuses(name, value, version) is expected


def test_the_refusal_table_comes_from_the_source_of_0_34_0_only():
    assert refusing_releases("VLLM_MARLIN_INPUT_DTYPE", "x") == ((0, 34, 0),)
    assert refusing_releases("VLLM_USE_V2_MODEL_RUNNER", "1") == ()


def _env_pair(tag: str, env: list[dict]) -> list[dict]:
    return [workload(f"q-{role}", role, container(["Qwen/Qwen3-8B", "--kv-transfer-config", KV],
                                                  image=f"vllm/vllm-openai:{tag}", env=env if role == "decode" else []),
                     app="q") for role in ("prefill", "decode")]


@pytest.mark.parametrize(("env", "tag", "severity"), [
    ([{"name": "VLLM_USE_V2_MODEL_RUNNER", "value": "0"}], "v0.34.0", "error"),
    ([{"name": "VLLM_MARLIN_INPUT_DTYPE", "value": "int8"}], "v0.34.0", "error"),
    ([{"name": "VLLM_MARLIN_INPUT_DTYPE", "value": "int8"}], "latest", "warning"),
    ([{"name": "VLLM_USE_V2_MODEL_RUNNER", "value": "0"}], "v0.34.1", "warning"),
    ([{"name": "VLLM_USE_V2_MODEL_RUNNER", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}],
     "v0.34.0", "warning"),
    ([{"name": "VLLM_USE_V2_MODEL_RUNNER", "value": "1"}], "v0.34.0", None),
    ([{"name": "VLLM_USE_V2_MODEL_RUNNER", "value": "0"}], "v0.33.0", None),
    ([{"name": "VLLM_MARLIN_INPUT_DTYPE", "value": "int8"}], "v0.20.0", None),
])
def test_refused_env_on_a_deployment(env, tag, severity, tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_env_pair(tag, env))
    found = {f["severity"] for r in out["results"] for f in r["findings"] if f["rule"] == "vllm-env-refused"}
    assert found == ({severity} if severity else set())
    if severity == "error":
        assert code == 1


# --- 3. a kv_role that contradicts the deployment's own role ---------------------------------------------------


def _role_pair(p_role: str, d_role: str, connector="NixlConnector", tag="v0.20.0", labels_key="llm-d.ai/role",
               names=("q-prefill", "q-decode")) -> list[dict]:
    docs = []
    for name, role, kv_role in ((names[0], "prefill", p_role), (names[1], "decode", d_role)):
        kv = json.dumps({"kv_connector": connector, "kv_role": kv_role})
        docs.append(workload(name, role, container(["Qwen/Qwen3-8B", "--kv-transfer-config", kv],
                                                   image=f"vllm/vllm-openai:{tag}"), app="q", labels_key=labels_key))
    return docs


def _findings(out: dict, rule: str) -> list[tuple[str, str]]:
    return [(f["severity"], f["message"]) for r in out["results"] for f in r["findings"] if f["rule"] == rule]


@pytest.mark.parametrize(("labels_key", "names"), [
    ("llm-d.ai/role", ("q-prefill", "q-decode")),   # a role label
    ("tier", ("q-prefill", "q-decode")),            # no role label: the names say it
])
def test_swapped_nixl_kv_roles_pair_by_the_deployments_roles(labels_key, names, tmp_path, capsys):
    _, out = check(tmp_path, capsys, *_role_pair("kv_consumer", "kv_producer", labels_key=labels_key, names=names))
    assert [r["object"].split()[0].split("+")[0] for r in out["results"]] == ["Deployment/q-prefill"]
    found = _findings(out, "kv-role-contradicts-role")
    assert sorted(s for s, _ in found) == ["warning", "warning"]
    assert any("prefill has kv_role kv_consumer" in m for _, m in found)


def test_one_producer_label_and_a_kv_both_pair_is_checked(tmp_path, capsys):
    """A kv_both prefill beside a decode with kv_producer: paired (was: two prefills, not checked)."""
    _, out = check(tmp_path, capsys, *_role_pair("kv_both", "kv_producer"))
    assert out["results"] and not out.get("notChecked")
    assert [s for s, _ in _findings(out, "kv-role-contradicts-role")] == ["warning"]


@pytest.mark.parametrize(("p_role", "d_role", "who"), [
    ("kv_consumer", "kv_consumer", "prefill"),
    ("kv_producer", "kv_producer", "decode"),
])
@pytest.mark.parametrize("tag", ["v0.14.0", "v0.20.0", "v0.34.0"])
def test_mooncake_asserts_a_contradicting_kv_role(p_role, d_role, who, tag, tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_role_pair(p_role, d_role, "MooncakeConnector", tag))
    found = _findings(out, "kv-role-contradicts-role")
    assert [s for s, _ in found] == ["error"] and found[0][1].startswith(f"The {who} runs MooncakeConnector")
    assert code == 1


@pytest.mark.parametrize("connector", ["NixlConnector", "MooncakeConnector", "P2pNcclConnector"])
def test_agreeing_kv_roles_are_not_reported(connector, tmp_path, capsys):
    """Negative control: kv_producer prefill and kv_consumer decode."""
    _, out = check(tmp_path, capsys, *_role_pair("kv_producer", "kv_consumer", connector))
    assert not _findings(out, "kv-role-contradicts-role")
    assert not [s for s, m in _findings(out, "p2p-nccl-kv-role") if s == "error"]


def test_without_role_hints_the_kv_role_still_decides(tmp_path, capsys):
    """Negative control: no role label and role-free names: the kv_role is the only role there is."""
    _, out = check(tmp_path, capsys, *_role_pair("kv_consumer", "kv_producer", labels_key="tier",
                                                 names=("q-one", "q-two")))
    assert not _findings(out, "kv-role-contradicts-role")


def test_p2p_nccl_consumer_prefill_is_an_error(tmp_path, capsys):
    _, out = check(tmp_path, capsys, *_role_pair("kv_consumer", "kv_consumer", "P2pNcclConnector"))
    assert [s for s, m in _findings(out, "p2p-nccl-kv-role") if "prefill has kv_role kv_consumer" in m] == ["error"]
