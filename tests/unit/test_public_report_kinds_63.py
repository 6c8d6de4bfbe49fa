"""Variants of what the sixty-third public-report set (tests/unit/data/public_reports_63) showed, with negative
controls: a ``VLLM_*`` variable the engine's release does not read.

The routing sidecar's kustomize base sets ``VLLM_NIXL_SIZE_CHANNEL_HOST`` (for ``VLLM_NIXL_SIDE_CHANNEL_HOST``) on
both pods and llm-d-infra's mini values set ``VLLM_IS_PREFILL``, which no vLLM release reads. vLLM ignores such a
name (from 0.17.0 it logs "Unknown vLLM environment variable detected"), so the setting it was meant for keeps its
default: ``vllm-env-unread`` warns, naming the nearest variable the release reads
(:mod:`pdd_operator.vllm.env_vars`, the ``VLLM_*`` words of each release's source, 0.9.0-0.34.0).
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.cli import main
from pdd_operator.vllm.env_vars import closest, last_mentioned, releases_read, unread
from tests.unit.test_turn2_variants import KV, POD_IP, check, container, rules, workload


def _pair(image, p_env=(), d_env=(), model="Qwen/Qwen2-0.5B", command=None):
    docs = []
    for role, env in (("prefill", p_env), ("decode", d_env)):
        c = container([model, "--kv-transfer-config", KV], image=image, env=[POD_IP, *env], command=command)
        docs.append(workload(f"q-{role}", role, c, app="q"))
    return docs


def _var(name, value="1"):
    return {"name": name, "value": value}


def _messages(out, rule):
    return [f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == rule]


# --- the table, as pure functions --------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "version", "expected"), [
    ("VLLM_NIXL_SIZE_CHANNEL_HOST", (0, 9, 2), True),     # a misspelling: no release names it
    ("VLLM_NIXL_SIDE_CHANNEL_HOST", (0, 9, 2), False),
    ("VLLM_NIXL_SIZE_CHANNEL_HOST", None, True),          # unknown version: no release read names it
    ("VLLM_IS_PREFILL", (0, 10, 1), True),                # llm-d's fork variable
    ("VLLM_USE_V1", (0, 11, 0), False),                   # last named in 0.11.0
    ("VLLM_USE_V1", (0, 11, 1), True),
    ("VLLM_USE_V1", None, False),                         # some release reads it
    ("VLLM_ALL2ALL_BACKEND", (0, 14, 1), False),          # last named in 0.14.1 ...
    ("VLLM_ALL2ALL_BACKEND", (0, 15, 1), False),          # ... 0.15.x not read: named by one neighbour
    ("VLLM_ALL2ALL_BACKEND", (0, 16, 0), True),
    ("VLLM_ALL2ALL_BACKEND", (0, 40, 0), None),           # after the newest release read: not judged
    ("VLLM_KV_CACHE_LAYOUT", (0, 9, 0), True),            # first named in 0.9.2
    ("VLLM_KV_CACHE_LAYOUT", (0, 9, 2), False),
    ("UCX_TLS", (0, 20, 0), None),                        # not a vLLM variable
])
def test_which_release_reads_which_variable(name, version, expected):
    assert unread(name, version) is expected


def test_the_nearest_variable_and_the_last_release_that_read_it():
    assert closest("VLLM_NIXL_SIZE_CHANNEL_HOST", (0, 9, 2)) == "VLLM_NIXL_SIDE_CHANNEL_HOST"
    assert closest("VLLM_NIXL_SIDE_CHANEL_PORT", None) == "VLLM_NIXL_SIDE_CHANNEL_PORT"
    assert closest("VLLM_IS_PREFILL", (0, 10, 1)) is None
    assert last_mentioned("VLLM_USE_V1") == (0, 11, 0)
    assert last_mentioned("VLLM_IS_PREFILL") is None
    assert releases_read() == tuple(sorted(releases_read())) and releases_read()[0] == (0, 9, 0)


# --- vllm-env-unread on manifests --------------------------------------------------------------------------------


def test_a_misspelt_side_channel_host_is_named_beside_the_loopback_error(tmp_path, capsys):
    # the routing sidecar's pods on an upstream image: the host stays localhost, and the misspelling is why
    spelt = {"name": "VLLM_NIXL_SIZE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
    docs = []
    for role in ("prefill", "decode"):
        c = container(["Qwen/Qwen2-0.5B", "--kv-transfer-config", KV], image="vllm/vllm-openai:v0.9.2", env=[spelt])
        c["env"] = [e for e in c["env"] if e != POD_IP]  # the helper sets the right name; the base spelt it so
        docs.append(workload(f"q-{role}", role, c, app="q"))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and "side-channel-host-not-routable" in rules(out, "error"), out
    assert "vllm-env-unread" in rules(out, "warning"), out
    assert any("did you mean VLLM_NIXL_SIDE_CHANNEL_HOST" in m for m in _messages(out, "vllm-env-unread")), out


def test_the_correct_name_is_not_warned(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.9.2", p_env=[_var("VLLM_NIXL_SIDE_CHANNEL_PORT", "5557")]))
    assert code == 0 and "vllm-env-unread" not in rules(out), out


@pytest.mark.parametrize(("image", "warned", "logged"), [
    ("vllm/vllm-openai:v0.11.0", False, False),   # still read
    ("vllm/vllm-openai:v0.12.0", True, False),    # gone, nothing logged before 0.17.0
    ("vllm/vllm-openai:v0.20.0", True, True),     # gone; validate_environ logs it
])
def test_a_retired_variable_per_release(tmp_path, capsys, image, warned, logged):
    code, out = check(tmp_path, capsys, *_pair(image, d_env=[_var("VLLM_USE_V1", "1")]))
    assert code == 0 and ("vllm-env-unread" in rules(out, "warning")) is warned, out
    if warned:
        message = _messages(out, "vllm-env-unread")[0]
        assert message.startswith("decode: ") and "last read it in 0.11.0" in message, message
        assert ("logs it as an unknown vLLM variable" in message) is logged, message


def test_an_unknown_version_is_warned_only_for_a_name_no_release_reads(tmp_path, capsys):
    docs = _pair("vllm/vllm-openai:latest", p_env=[_var("VLLM_IS_PREFILL"), _var("VLLM_USE_V1")])
    code, out = check(tmp_path, capsys, *docs)
    messages = _messages(out, "vllm-env-unread")
    assert len(messages) == 1 and "VLLM_IS_PREFILL" in messages[0] and "version is unknown" in messages[0], out


@pytest.mark.parametrize("image", [
    "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.7.0",   # another launcher's code may read its own VLLM_* names
    "ghcr.io/llm-d/llm-d-cuda:v0.9.0",               # a wrapping image
])
def test_engines_vllm_does_not_start_alone_are_not_judged(tmp_path, capsys, image):
    docs = _pair(image, p_env=[_var("VLLM_IS_PREFILL")], command=["vllm", "serve"])
    code, out = check(tmp_path, capsys, *docs)
    assert "vllm-env-unread" not in rules(out), out


def test_a_script_engine_is_judged_too(tmp_path, capsys):
    script = tmp_path / "pd.sh"
    lines = []
    for port, role in ((8100, "producer"), (8200, "consumer")):
        kv = json.dumps({"kv_connector": "NixlConnector", "kv_role": f"kv_{role}"})
        lines.append(f"VLLM_NIXL_SIDE_CHANEL_PORT={port + 1} CUDA_VISIBLE_DEVICES={port // 100 - 81} "
                     f"vllm serve Qwen/Qwen2-0.5B --port {port} --kv-transfer-config '{kv}' &")
    script.write_text("#!/bin/bash\n# vllm 0.20.0\npip install vllm==0.20.0\n" + "\n".join(lines) + "\nwait\n")
    main(["check", str(script), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert any("VLLM_NIXL_SIDE_CHANNEL_PORT" in m for m in _messages(out, "vllm-env-unread")), out
