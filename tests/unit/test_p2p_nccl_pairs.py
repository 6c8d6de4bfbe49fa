"""P2pNcclConnector pairs are judged (compat/rules/p2p_nccl_pair.py), not "not checked by design".

A pair of vLLM ``P2pNcclConnector`` engines on a known release that ships the connector (0.9.2-0.23.x) runs the
P2pNccl rules and the engine-alone ones (``compat.engine``): the docs' 1P1D pair (examples/.../p2p_nccl_xpyd
disagg_example_p2p_nccl_xpyd.sh, the same ``vllm serve`` lines in 0.10.1.1-0.23.0) is ok where vLLM moves its KV and an
error where it does not, each one-change variant refused by its rule only. Unknown and other releases stay "not
checked" with the reason. The PDDeployment CRD names NIXL connectors only (``Connector``), so it is unchanged.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.compat.rules import RULES_BY_ID

from .test_script_inputs import _check, _errors

REQUEST_ID = "p2p-nccl-request-id-randomized"
PARALLEL = "p2p-nccl-parallel-mismatch"
SEND_TYPE = "p2p-nccl-send-type-mismatch"
BLOCK = "p2p-nccl-block-size-mismatch"
DTYPE = "p2p-nccl-kv-dtype-mismatch"
ROLE = "p2p-nccl-kv-role"
GET_BUFFER = "p2p-nccl-get-buffer-too-small"
MODEL = "p2p-nccl-model-mismatch"
GET_OLD = "p2p-nccl-get-unsupported"
P2P_RULES = {REQUEST_ID, PARALLEL, SEND_TYPE, BLOCK, DTYPE, ROLE, GET_BUFFER, MODEL, GET_OLD}


def _kv(role: str, kv_port: int, http_port: int, buffer: str, **extra) -> str:
    """The doc script's --kv-transfer-config (0.10.1.1-0.23.0), ``extra`` merged into kv_connector_extra_config
    (a ``kv_role`` key replaces the role)."""
    config = {"proxy_ip": "0.0.0.0", "proxy_port": "30001", "http_port": str(http_port), "send_type": "PUT_ASYNC",
              "nccl_num_channels": "16"}
    role = extra.pop("kv_role", role)
    config.update(extra)
    return json.dumps({"kv_connector": "P2pNcclConnector", "kv_role": role, "kv_buffer_size": buffer,
                       "kv_port": str(kv_port), "kv_connector_extra_config": config})


def _doc_script(vllm: str, *, env: str = "", p_flags: str = "", d_flags: str = "", p_extra: dict | None = None,
                d_extra: dict | None = None, p_gpus: str = "0", d_gpus: str = "1") -> str:
    """The docs' 1P1D pair (disagg_example_p2p_nccl_xpyd.sh: its first prefill and decode) as a script on ``vllm``."""
    return f"""#!/bin/bash
pip install vllm=={vllm}
{env}
python3 disagg_proxy_p2p_nccl_xpyd.py &
CUDA_VISIBLE_DEVICES={p_gpus} vllm serve Qwen/Qwen3-0.6B --enforce-eager --host 0.0.0.0 --port 20003 \\
    --tensor-parallel-size 1 --seed 1024 --dtype float16 --max-model-len 10000 --max-num-batched-tokens 10000 \\
    --max-num-seqs 256 --trust-remote-code --gpu-memory-utilization 0.9 {p_flags} \\
    --kv-transfer-config '{_kv("kv_producer", 21001, 20003, "1e1", **(p_extra or {}))}' > prefill1.log 2>&1 &
CUDA_VISIBLE_DEVICES={d_gpus} vllm serve Qwen/Qwen3-0.6B --enforce-eager --host 0.0.0.0 --port 20005 \\
    --tensor-parallel-size 1 --seed 1024 --dtype float16 --max-model-len 10000 --max-num-batched-tokens 10000 \\
    --max-num-seqs 256 --trust-remote-code --gpu-memory-utilization 0.7 {d_flags} \\
    --kv-transfer-config '{_kv("kv_consumer", 22001, 20005, "8e9", **(d_extra or {}))}' > decode1.log 2>&1 &
"""


NO_RANDOM = "export VLLM_DISABLE_REQUEST_ID_RANDOMIZATION=1"


def _deployment(role: str, image: str, args: list[str], env: dict[str, str], gpus: int = 1) -> str:
    env_yaml = "".join(f"\n        - name: {k}\n          value: '{v}'" for k, v in env.items())
    return f"""---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: qwen-{role}
spec:
  replicas: 1
  selector:
    matchLabels: {{app: qwen-p2p, role: {role}}}
  template:
    metadata:
      labels: {{app: qwen-p2p, role: {role}}}
    spec:
      containers:
      - name: vllm
        image: {image}
        command: [vllm, serve]
        args: {json.dumps(args)}
        env:{env_yaml or " []"}
        resources:
          limits:
            nvidia.com/gpu: '{gpus}'
"""


def _deployments(vllm: str, *, env: dict[str, str] | None = None, p_args: tuple[str, ...] = (),
                 d_args: tuple[str, ...] = (), p_gpus: int = 1, d_gpus: int = 1, p_extra: dict | None = None) -> str:
    """The doc pair as two Deployments of ``vllm/vllm-openai:v<vllm>`` (one pod each, the proxy elsewhere)."""
    base = ["Qwen/Qwen3-0.6B", "--host", "0.0.0.0", "--max-model-len", "10000", "--enforce-eager"]
    image = f"vllm/vllm-openai:v{vllm}"
    p = _deployment("prefill", image, [*base, "--port", "20003", *p_args, "--kv-transfer-config",
                                       _kv("kv_producer", 21001, 20003, "1e1", **(p_extra or {}))], env or {}, p_gpus)
    d = _deployment("decode", image, [*base, "--port", "20005", *d_args, "--kv-transfer-config",
                                      _kv("kv_consumer", 22001, 20005, "8e9")], env or {}, d_gpus)
    return p + d


def _findings(out: dict) -> list[tuple[str, str]]:
    return [(f["rule"], f["severity"]) for r in out["results"] for f in r["findings"]]


def _not_checked(out: dict) -> bool:
    return any(r.get("not_checked") or r.get("unchecked") for r in out["results"])


def _ok(code: int, out: dict) -> None:
    assert code == 0 and not _not_checked(out), out
    assert not [f for f in _findings(out) if f[1] == "error"], out


# --- valid pairs: ok, every rule passing, instead of not checked ------------------------------------------------------


@pytest.mark.parametrize(("vllm", "env"), [
    ("0.9.2", ""), ("0.10.1.1", ""), ("0.11.0", ""), ("0.13.0", ""),          # before request-id randomization
    ("0.17.0", NO_RANDOM), ("0.18.0", NO_RANDOM), ("0.21.0", NO_RANDOM), ("0.23.0", NO_RANDOM),
])
def test_doc_pair_is_ok(tmp_path, capsys, vllm, env):
    code, out = _check(tmp_path, capsys, _doc_script(vllm, env=env))
    _ok(code, out)
    assert not _findings(out), out  # no NIXL rule, no P2pNccl rule, not even a warning


@pytest.mark.parametrize(("vllm", "env"), [("0.10.1.1", {}), ("0.20.0", {"VLLM_DISABLE_REQUEST_ID_RANDOMIZATION": "1"})])
def test_doc_pair_as_deployments_is_ok(tmp_path, capsys, vllm, env):
    code, out = _check(tmp_path, capsys, _deployments(vllm, env=env), "pair.yaml")
    _ok(code, out)
    assert not {rule for rule, _ in _findings(out)} & P2P_RULES, out


def test_xpyd_same_tp2_on_both_roles_is_ok(tmp_path, capsys):
    script = _doc_script("0.12.0", p_flags="--tensor-parallel-size 2", d_flags="--tensor-parallel-size 2",
                         p_gpus="0,1", d_gpus="2,3")
    code, out = _check(tmp_path, capsys, script)
    _ok(code, out)


# --- request ids: randomized per engine from 0.14.0 (vllm#42839, #42931) -----------------------------------------------


@pytest.mark.parametrize("vllm", ["0.14.0", "0.14.1", "0.16.0", "0.17.1", "0.19.1", "0.22.0", "0.23.0"])
def test_randomized_request_ids_hang(tmp_path, capsys, vllm):
    code, out = _check(tmp_path, capsys, _doc_script(vllm))
    assert code == 1 and _errors(out) == {REQUEST_ID}, out


@pytest.mark.parametrize("vllm", ["0.14.0", "0.16.0"])
def test_no_way_out_before_0_17(tmp_path, capsys, vllm):
    """VLLM_DISABLE_REQUEST_ID_RANDOMIZATION is not in 0.14.0-0.16.0's envs.py: setting it changes nothing."""
    code, out = _check(tmp_path, capsys, _doc_script(vllm, env=NO_RANDOM))
    assert code == 1 and _errors(out) == {REQUEST_ID}, out


@pytest.mark.parametrize("value", ["0", "true"])  # bool(int(value)): 0 is off, "true" raises ValueError
def test_opt_out_must_be_non_zero(tmp_path, capsys, value):
    code, out = _check(tmp_path, capsys, _doc_script("0.21.0", env=f"export VLLM_DISABLE_REQUEST_ID_RANDOMIZATION={value}"))
    assert code == 1 and _errors(out) == {REQUEST_ID}, out


def test_opt_out_on_one_engine_only(tmp_path, capsys):
    yaml_text = _deployments("0.21.0")
    # the prefill's env only
    yaml_text = yaml_text.replace("env: []", "env:\n        - name: VLLM_DISABLE_REQUEST_ID_RANDOMIZATION\n"
                                  "          value: '1'", 1)
    code, out = _check(tmp_path, capsys, yaml_text, "pair.yaml")
    assert code == 1 and _errors(out) == {REQUEST_ID}, out
    assert "decode" in next(f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == REQUEST_ID)


# --- one change per rule, on several releases ---------------------------------------------------------------------------


@pytest.mark.parametrize("vllm", ["0.10.1.1", "0.13.0", "0.21.0"])
@pytest.mark.parametrize(("kwargs", "rule"), [
    ({"p_flags": "--tensor-parallel-size 2", "p_gpus": "0,2"}, PARALLEL),
    ({"d_flags": "--tensor-parallel-size 2", "d_gpus": "1,2"}, PARALLEL),
    ({"p_flags": "--pipeline-parallel-size 2", "p_gpus": "0,2"}, PARALLEL),
    ({"p_extra": {"send_type": "GET"}, "d_extra": {"send_type": "PUT"}}, SEND_TYPE),
    ({"p_flags": "--block-size 32", "d_flags": "--block-size 16"}, BLOCK),
    ({"d_flags": "--kv-cache-dtype fp8"}, DTYPE),
    ({"p_flags": "--dtype bfloat16"}, DTYPE),
])
def test_one_change_is_refused_by_its_rule(tmp_path, capsys, vllm, kwargs, rule):
    env = NO_RANDOM if vllm == "0.21.0" else ""  # randomized request ids would hang it anyway
    code, out = _check(tmp_path, capsys, _doc_script(vllm, env=env, **kwargs))
    assert code == 1 and _errors(out) == {rule}, out


@pytest.mark.parametrize("vllm", ["0.11.0", "0.20.0"])
def test_one_change_as_deployments(tmp_path, capsys, vllm):
    env = {"VLLM_DISABLE_REQUEST_ID_RANDOMIZATION": "1"}
    code, out = _check(tmp_path, capsys, _deployments(vllm, env=env, p_args=("--tensor-parallel-size", "2"), p_gpus=2),
                       "pair.yaml")
    assert code == 1 and _errors(out) == {PARALLEL}, out


@pytest.mark.parametrize("vllm", ["0.9.2", "0.10.1.1", "0.11.0", "0.13.0"])
def test_get_with_the_docs_tiny_prefill_buffer(tmp_path, capsys, vllm):
    """The doc prefill's kv_buffer_size 1e1 (meant for PUT_ASYNC) with GET on both roles: no block fits. Before 0.11.0
    the decode does not pull at all (p2p-nccl-get-unsupported)."""
    get = {"send_type": "GET"}
    old = {GET_OLD} if vllm in ("0.9.2", "0.10.1.1") else set()
    code, out = _check(tmp_path, capsys, _doc_script(vllm, p_extra=get, d_extra=get))
    assert code == 1 and _errors(out) == {GET_BUFFER} | old, out
    fits = _doc_script(vllm, p_extra=get, d_extra=get).replace('"kv_buffer_size": "1e1"', '"kv_buffer_size": "1e9"')
    code, out = _check(tmp_path, capsys, fits)
    if old:
        assert code == 1 and _errors(out) == old, out
    else:
        _ok(code, out)


def test_other_models_are_a_warning(tmp_path, capsys):
    script = _doc_script("0.13.0").replace("vllm serve Qwen/Qwen3-0.6B --enforce-eager --host 0.0.0.0 --port 20005",
                                           "vllm serve /models/qwen3-0.6b --enforce-eager --host 0.0.0.0 --port 20005")
    code, out = _check(tmp_path, capsys, script)
    assert code == 0 and (MODEL, "warning") in _findings(out), out


def test_two_fp8_formats_are_a_warning(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _doc_script("0.12.0", p_flags="--kv-cache-dtype fp8_e4m3",
                                                     d_flags="--kv-cache-dtype fp8_e5m2"))
    assert code == 0 and (DTYPE, "warning") in _findings(out), out
    code, out = _check(tmp_path, capsys, _doc_script("0.12.0", p_flags="--kv-cache-dtype fp8",
                                                     d_flags="--kv-cache-dtype fp8_e4m3"))
    _ok(code, out)
    assert DTYPE not in {rule for rule, _ in _findings(out)}, out


def test_xpyd_one_prefill_two_decodes(tmp_path, capsys):
    """The docs' xPyD shape, 1P2D on one host: each decode pairs with the prefill; one decode at TP 2 is refused."""
    one = _doc_script("0.13.0")
    second = one[one.index("CUDA_VISIBLE_DEVICES=1"):].replace("CUDA_VISIBLE_DEVICES=1", "CUDA_VISIBLE_DEVICES=2") \
        .replace("--port 20005", "--port 20007").replace('"kv_port": "22001"', '"kv_port": "23001"') \
        .replace('"http_port": "20005"', '"http_port": "20007"').replace("decode1.log", "decode2.log")
    code, out = _check(tmp_path, capsys, one + second)
    _ok(code, out)
    assert len(out["results"]) == 2, out
    code, out = _check(tmp_path, capsys, one + second.replace("CUDA_VISIBLE_DEVICES=2", "CUDA_VISIBLE_DEVICES=2,3")
                       .replace("--tensor-parallel-size 1", "--tensor-parallel-size 2"))
    assert code == 1 and _errors(out) == {PARALLEL}, out


@pytest.mark.parametrize(("vllm", "rules"), [("0.10.1.1", {SEND_TYPE, GET_OLD}), ("0.13.0", {SEND_TYPE})])
def test_get_decode_against_a_pushing_prefill(tmp_path, capsys, vllm, rules):
    code, out = _check(tmp_path, capsys, _doc_script(vllm, d_extra={"send_type": "GET"}))
    assert code == 1 and _errors(out) == rules, out


def test_push_and_put_async_pair(tmp_path, capsys):
    """PUT and PUT_ASYNC both push: they pair."""
    code, out = _check(tmp_path, capsys, _doc_script("0.11.0", d_extra={"send_type": "PUT"}))
    _ok(code, out)


def test_send_type_default_of_0_9_2_is_put(tmp_path, capsys):
    """0.9.2 defaults send_type to PUT (p2p_nccl_engine.py line 122): a decode without it pairs with a PUT prefill and
    not with a GET one."""
    extra_p, extra_d = {"send_type": "PUT"}, {}
    script = _doc_script("0.9.2", p_extra=extra_p, d_extra=extra_d).replace(',"send_type": "PUT_ASYNC"', "")
    code, out = _check(tmp_path, capsys, script)
    assert SEND_TYPE not in _errors(out), out
    code, out = _check(tmp_path, capsys, _doc_script("0.9.2", p_extra={"send_type": "GET"}))
    assert code == 1 and _errors(out) == {SEND_TYPE}, out  # the decode pushes (PUT_ASYNC): not the GET decode rule


def test_block_size_on_one_role_against_the_pinned_default(tmp_path, capsys):
    """0.11.0 on CUDA gives an engine without --block-size 16 (vllm/block_size.py): 32 against it is refused."""
    code, out = _check(tmp_path, capsys, _doc_script("0.11.0", d_flags="--block-size 32"))
    assert code == 1 and _errors(out) == {BLOCK}, out
    code, out = _check(tmp_path, capsys, _doc_script("0.11.0", d_flags="--block-size 16"))
    _ok(code, out)


@pytest.mark.parametrize("role", ["kv_both"])
def test_decode_producer_is_a_warning(tmp_path, capsys, role):
    code, out = _check(tmp_path, capsys, _doc_script("0.12.0", d_extra={"kv_role": role}))
    assert code == 0 and (ROLE, "warning") in _findings(out), out


def test_prefill_both_is_ok(tmp_path, capsys):
    code, out = _check(tmp_path, capsys, _doc_script("0.12.0", p_extra={"kv_role": "kv_both"}))
    _ok(code, out)
    assert ROLE not in {rule for rule, _ in _findings(out)}, out


# --- outside the releases read: not checked with the reason ----------------------------------------------------------


def test_unknown_release_of_an_image_stays_not_checked(tmp_path, capsys):
    """An image whose tag names no release (a host install that pins none is judged on 0.9.2-0.23.x instead:
    test_public_report_kinds_fixO)."""
    text = _deployments("0.13.0").replace("vllm/vllm-openai:v0.13.0", "vllm/vllm-openai:latest")
    code, out = _check(tmp_path, capsys, text, "pair.yaml")
    assert code == 3 and "image names none" in json.dumps(out) and "0.14.0" in json.dumps(out), out


def test_release_without_the_connector_is_refused_not_judged(tmp_path, capsys):
    """0.24.0 no longer registers P2pNcclConnector: the engine-alone refusal, and none of the pair rules."""
    code, out = _check(tmp_path, capsys, _deployments("0.24.0"), "pair.yaml")
    assert code == 1 and _errors(out) == {"p2p-nccl-connector-unavailable"}, out
    assert "0.9.2-0.23.x" in json.dumps(out), out


def test_nixl_rules_never_run_on_a_p2p_nccl_pair(tmp_path, capsys):
    """A pair NIXL would refuse (block sizes 16 / 32 pull on 0.10: block-size-hetero-unsupported) is judged by the
    P2pNccl rules only."""
    code, out = _check(tmp_path, capsys, _doc_script("0.10.1.1", p_flags="--block-size 16", d_flags="--block-size 32"))
    assert {rule for rule, _ in _findings(out)} == {BLOCK}, out


def test_p2p_rules_are_p2p_only():
    for rule in P2P_RULES:
        assert RULES_BY_ID[rule].p2p_nccl and not RULES_BY_ID[rule].without_connector
