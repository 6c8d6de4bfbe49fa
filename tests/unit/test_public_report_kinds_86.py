"""Variants of what the eighty-sixth public-report set (tests/unit/data/public_reports_86) taught: P/D on platform
plugins and forks, with negative controls.

- ``cli-option-malformed``: a word written as an option with three hyphens or a typographic dash
  (``---max-num-batched-tokens``, as vllm-ascend's run_server.sh has it) stops vLLM's parser on every release and
  every platform, so it is refused on a NIXL pair and on a plugin connector's pair of unknown release alike;
- a platform plugin's own P/D launcher (Qualcomm vllm-qaic's ``qaic_disagg`` container) is "not checked", in a
  script of ``docker run`` lines and in a Kubernetes container, not "nothing to check";
- ``bash -c -- "vllm serve ..."`` (tpu-inference's manifests) runs the script after ``--``: its engine is read, and
  ``bash -c`` followed by flags stays unreadable;
- ``--api-server-count`` is vllm serve's from 0.9.1 (vllm/entrypoints/cli/serve.py 0.9.1 l.88-92), not from 0.10.0;
- an engine whose environment sets ``ZE_AFFINITY_MASK`` (vLLM's XPU platform device variable) is an XPU engine for the
  NIXL device table: ``kv_buffer_device`` xpu refused before 0.17.0, the ``cuda`` default before 0.18.0.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.flags import malformed_options, option_spelling
from tests.unit.cli_check import check_text
from tests.unit.test_turn2_variants import POD_IP, check, container, rules, workload

KV = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
XPU_KV = '{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_buffer_device":"xpu"}'


def _script(tmp_path, capsys, text: str, *extra: str) -> tuple[int, dict]:
    return check_text(tmp_path, capsys, text, "pair.sh", *extra)


def _pair(p_args, d_args, image="vllm/vllm-openai:v0.20.0", model="Qwen/Qwen3-8B", **kw):
    return [workload(f"m-{role}", role, container([model, *args], image=image, **kw), app="m")
            for role, args in (("prefill", p_args), ("decode", d_args))]


def _messages(out: dict, rule: str) -> list[str]:
    return [f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == rule]


# --- cli-option-malformed ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("argv", "expected"), [
    (["vllm", "serve", "m", "---max-num-batched-tokens", "256"], ("---max-num-batched-tokens",)),
    (["vllm", "serve", "m", "\u2014max-model-len", "4096"], ("\u2014max-model-len",)),  # em dash pasted from docs
    (["vllm", "serve", "m", "\u2013tp", "2"], ("\u2013tp",)),  # en dash for a short option
    (["vllm", "serve", "m", "-\u2013enforce-eager"], ("-\u2013enforce-eager",)),
    (["vllm", "serve", "m", "----max-model-len=4096"], ("----max-model-len",)),
    (["vllm", "serve", "m", "--max-model-len", "4096", "-tp", "2"], ()),  # controls
    (["vllm", "serve", "m", "--max-model-len=4096", "---"], ()),
    (["python3", "-m", "dynamo.vllm", "--model", "m", "---block-size", "64"], ("---block-size",)),
])
def test_malformed_options_are_read(argv, expected):
    assert malformed_options(argv) == expected


@pytest.mark.parametrize("word", ["---max-num-batched-tokens", "\u2014max-num-batched-tokens"])
def test_a_malformed_option_refuses_a_nixl_pair_on_any_release(tmp_path, capsys, word):
    for image in ("vllm/vllm-openai:v0.20.0", "vllm/vllm-openai:v0.34.0"):
        code, out = check(tmp_path, capsys, *_pair(["--kv-transfer-config", KV],
                                                   ["--kv-transfer-config", KV, word, "256"], image=image))
        assert code == 1 and "cli-option-malformed" in rules(out, "error"), out
        assert all(m.startswith("decode:") and word in m for m in _messages(out, "cli-option-malformed")), out
    # Control: the flag with two hyphens.
    code, out = check(tmp_path, capsys, *_pair(["--kv-transfer-config", KV],
                                               ["--kv-transfer-config", KV, "--max-num-batched-tokens", "8192"]))
    assert "cli-option-malformed" not in rules(out), out


_ASCEND = """export HCCL_IF_IP=10.0.0.{n}
export ASCEND_RT_VISIBLE_DEVICES=0,1,2,3
vllm serve /models/deepseek_r1_w8a8 --port 2000{n} --tensor-parallel-size 4 {flag} 256 \\
  --kv-transfer-config '{{"kv_connector": "{connector}", "kv_buffer_device": "npu", "kv_role": "{role}"}}' &
"""


@pytest.mark.parametrize("connector", ["LLMDataDistCMgrConnector", "MooncakeConnectorV1"])
def test_a_malformed_option_refuses_a_plugin_connector_pair_of_unknown_release(tmp_path, capsys, connector):
    text = (_ASCEND.format(n=1, flag="--max-num-batched-tokens", connector=connector, role="kv_producer")
            + _ASCEND.format(n=2, flag="---max-num-batched-tokens", connector=connector, role="kv_consumer"))
    code, out = _script(tmp_path, capsys, text)
    assert code == 1 and rules(out, "error") == {"cli-option-malformed"}, out
    assert out["notChecked"], out  # the plugin's KV transfer itself stays not checked
    # Control: both written right: not checked, nothing refused.
    code, out = _script(tmp_path, capsys, text.replace("---max", "--max"))
    assert code == 3 and not rules(out), out


def _ascend_pair(decode_flag: str, image="quay.io/ascend/vllm-ascend:v0.11.0rc0", resource="huawei.com/ascend-1980"):
    docs = []
    for role, flag, kv_role in (("prefill", "--max-num-batched-tokens", "kv_producer"),
                                ("decode", decode_flag, "kv_consumer")):
        kv = json.dumps({"kv_connector": "MooncakeConnectorV1", "kv_buffer_device": "npu", "kv_role": kv_role})
        c = {"name": "vllm", "image": image, "command": ["vllm", "serve"],
             "args": ["/models/ds", "--tensor-parallel-size", "4", flag, "256", "--kv-transfer-config", kv],
             "resources": {"limits": {resource: "4"}}}
        docs.append(workload(f"ds-{role}", role, c, app="ds"))
    return docs


@pytest.mark.parametrize(("image", "resource"), [
    ("quay.io/ascend/vllm-ascend:v0.11.0rc0", "huawei.com/ascend-1980"),  # the plugin named by its image
    ("registry.example/serving:1", "huawei.com/Ascend910"),  # by its device-plugin resource
])
def test_a_malformed_option_refuses_a_platform_plugin_container(tmp_path, capsys, image, resource):
    code, out = check(tmp_path, capsys, *_ascend_pair("---max-num-batched-tokens", image, resource))
    assert code == 1 and rules(out, "error") == {"cli-option-malformed"}, out
    assert [m[:7] for m in _messages(out, "cli-option-malformed")] == ["decode:"], out
    assert len(out["notChecked"]) == 2, out  # the plugin engines themselves stay not checked
    # Control: written right, both engines are only not checked.
    code, out = check(tmp_path, capsys, *_ascend_pair("--max-num-batched-tokens", image, resource))
    assert code == 3 and not out["results"], out


@pytest.mark.parametrize(("name", "spelled"), [("tp", "-tp"), ("asc", "-asc"), ("max-model-len", "--max-model-len"),
                                               ("port", "--port")])
def test_the_fix_spells_the_option_as_the_parser_takes_it(name, spelled):
    assert option_spelling(name) == spelled


# --- a platform plugin's own P/D launcher --------------------------------------------------------------------------

_QAIC = """docker pull ghcr.io/quic/cloud_ai_inference_vllm_disagg:1.21.2.0

docker run --rm -it --privileged --network host \\
  ghcr.io/quic/cloud_ai_inference_vllm_disagg:1.21.2.0 \\
  --model "{model}" {flags} --port 8000 --max-model-len 4096 --kv-cache-dtype mxint8
"""
_QAIC_PD = "--prefill-port 9900 --prefill-device-group 0..7 --decode-port 9800 --decode-device-group 8..11"


@pytest.mark.parametrize("model", ["meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-8B"])
def test_the_qaic_disagg_launcher_script_is_not_checked(tmp_path, capsys, model):
    code, out = _script(tmp_path, capsys, _QAIC.format(model=model, flags=_QAIC_PD))
    assert code == 3 and not out["results"], out
    assert "qaic_disagg" in out["notChecked"][0]["reason"], out
    # Control: the same container without prefill/decode flags configures no P/D: nothing to check.
    code, out = _script(tmp_path, capsys, _QAIC.format(model=model, flags=""))
    assert code == 4, out


def test_the_qaic_disagg_launcher_container_is_not_checked(tmp_path, capsys):
    c = {"name": "disagg", "image": "ghcr.io/quic/cloud_ai_inference_vllm_disagg:1.21.2.0",
         "args": ["--model", "Qwen/Qwen3-8B", *_QAIC_PD.split(), "--port", "8000"]}
    code, out = check(tmp_path, capsys, workload("qaic", "prefill", c, app="q"))
    assert code == 3 and not out["results"] and "qaic_disagg" in out["notChecked"][0]["reason"], out


# --- bash -c -- SCRIPT -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shell", ["/bin/bash", "sh"])
def test_a_shell_script_after_the_end_of_options_marker_is_read(tmp_path, capsys, shell):
    def docs(decode_dtype):
        out = []
        for role, dtype in (("prefill", "fp8"), ("decode", decode_dtype)):
            c = container([f"vllm serve Qwen/Qwen3-8B --kv-cache-dtype={dtype} --kv-transfer-config '{KV}'"],
                          image="vllm/vllm-openai:v0.20.0", command=[shell, "-c", "--"])
            out.append(workload(f"m-{role}", role, c, app="m"))
        return out
    code, out = check(tmp_path, capsys, *docs("auto"))
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error"), out
    code, out = check(tmp_path, capsys, *docs("fp8"))
    assert code == 0 and not out["notChecked"], out


def test_flags_after_bash_c_stay_unreadable(tmp_path, capsys):
    docs = [workload(f"m-{role}", role, container(["--model", "Qwen/Qwen3-8B", "--kv-transfer-config", KV],
                                                  command=["/bin/bash", "-c"]), app="m")
            for role in ("prefill", "decode")]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 3 and "invalid option" in out["notChecked"][0]["reason"], out


# --- --api-server-count in vllm serve from 0.9.1 ------------------------------------------------------------------


@pytest.mark.parametrize("words", [["--api-server-count", "2"], ["-asc", "2"]])
def test_api_server_count_is_not_refused_on_0_9_1(tmp_path, capsys, words):
    args = ["--kv-transfer-config", KV, "--data-parallel-size", "2", *words]
    for version in ("v0.9.1", "v0.9.2"):
        code, out = check(tmp_path, capsys, *_pair(args, args, image=f"vllm/vllm-openai:{version}", gpus=2))
        assert "cli-flag-not-yet" not in rules(out), (version, out)
    # Control: 0.9.0's parsers have no such option.
    code, out = check(tmp_path, capsys, *_pair(args, args, image="vllm/vllm-openai:v0.9.0", gpus=2))
    assert "cli-flag-not-yet" in rules(out, "error"), out


# --- ZE_AFFINITY_MASK: an XPU engine -------------------------------------------------------------------------------


def _xpu_script(kv: str) -> str:
    lines = ["#!/bin/bash"]
    for i, flag in ((0, ""), (1, "--is-prefill-worker")):
        lines.append(f"VLLM_NIXL_SIDE_CHANNEL_PORT={20096 + i} ZE_AFFINITY_MASK={i} python3 -m dynamo.vllm "
                     f"--model Qwen/Qwen3-0.6B --block-size 64 --kv-transfer-config '{kv}' {flag} &")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("version", "refused"), [("0.16.0", True), ("0.17.0", False), ("0.22.0", False)])
def test_an_xpu_buffer_is_judged_by_release_for_ze_affinity_engines(tmp_path, capsys, version, refused):
    code, out = _script(tmp_path, capsys, _xpu_script(XPU_KV), "--vllm-version", version)
    assert ("kv-buffer-device-unsupported" in rules(out, "error")) is refused, out
    # The host buffer is on the XPU row from 0.10.2 on.
    code, out = _script(tmp_path, capsys, _xpu_script(XPU_KV.replace('"xpu"', '"cpu"')), "--vllm-version", version)
    assert "kv-buffer-device-unsupported" not in rules(out), out


def test_the_default_buffer_on_xpu_is_refused_before_0_18(tmp_path, capsys):
    code, out = _script(tmp_path, capsys, _xpu_script(KV), "--vllm-version", "0.17.0")
    assert "kv-buffer-device-unsupported" in rules(out, "error"), out
    code, out = _script(tmp_path, capsys, _xpu_script(KV), "--vllm-version", "0.18.0")
    assert "kv-buffer-device-unsupported" not in rules(out), out
    # Unknown release: a warning, not a refusal.
    code, out = _script(tmp_path, capsys, _xpu_script(XPU_KV))
    assert code == 0 and "kv-buffer-device-unsupported" in rules(out, "warning"), out


def test_ze_affinity_mask_in_a_container_makes_an_xpu_engine(tmp_path, capsys):
    def docs(env):
        return [workload(f"m-{role}", role, {
            "name": "vllm", "image": "registry.example/vllm-custom:1", "command": ["vllm", "serve"],
            "args": ["Qwen/Qwen3-8B", "--kv-transfer-config", XPU_KV], "env": [POD_IP, *env]}, app="m")
            for role in ("prefill", "decode")]
    code, out = check(tmp_path, capsys, *docs([{"name": "ZE_AFFINITY_MASK", "value": "0"}]),
                      extra=("--vllm-version", "0.16.0"))
    assert "kv-buffer-device-unsupported" in rules(out, "error"), out
    # Control: nothing tells the platform: not judged.
    code, out = check(tmp_path, capsys, *docs([]), extra=("--vllm-version", "0.16.0"))
    assert "kv-buffer-device-unsupported" not in rules(out), out
