"""One definition per concept (issue 9 item 3, fixN): each concept the rules share is asked of one function, and the
rules that disagreed are re-derived from vLLM's source."""

from __future__ import annotations

import json

import pytest

from pdd_operator.compat import evaluate
from pdd_operator.compat.pair import PDPair, role_from_container
from pdd_operator.vllm.architectures import traits
from pdd_operator.vllm.attention_backends import BACKEND_ENV, backend_env_read, selected_backend
from pdd_operator.vllm.versions import parse_version

POD_IP = {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"


def engine(*args: str, env: dict | None = None, tp: int = 1, extra: dict | None = None) -> dict:
    kv = {"kv_connector": "NixlConnector", "kv_role": "kv_both", **({"kv_connector_extra_config": extra} if extra else {})}
    return {"name": "vllm", "command": ["vllm", "serve", LLAMA, "--tensor-parallel-size", str(tp), *args,
                                        "--kv-transfer-config", json.dumps(kv)],
            "env": [POD_IP, *({"name": k, "value": v} for k, v in (env or {}).items())],
            "resources": {"limits": {"nvidia.com/gpu": str(tp)}}}


def pair(p: dict, d: dict, version: str, pod: dict | None = None, model: str = LLAMA) -> PDPair:
    return PDPair("test", role_from_container("prefill", p, pod or {}, version_text=version),
                  role_from_container("decode", d, pod or {}, version_text=version), traits(None, None, None, model))


def found(target, rule: str) -> set[str]:
    """The severities of ``rule``'s findings on ``target``."""
    return {f.severity for f in evaluate(target).findings if f.rule == rule}


# --- 1. VLLM_ATTENTION_BACKEND: read 0.9.0-0.14.1, ignored from 0.16.0, 0.15.x unknown --------------------------


@pytest.mark.parametrize(("version", "read"), [
    ("0.9.0", True), ("0.12.0", True), ("0.13.0", True), ("0.14.1", True),
    ("0.15.0", None), ("0.15.1", None),                                  # no sdist read: between read and ignored
    ("0.16.0", False), ("0.17.0", False), ("0.17.1", False), ("0.18.0", False), ("0.26.0", False),
    ("0.34.0", False), (None, None),
])
def test_backend_env_read_per_release(version, read):
    assert backend_env_read(parse_version(version) if version else None) is read


def test_selected_backend_takes_the_flag_then_the_variable_where_read():
    env = {BACKEND_ENV: "TRITON_ATTN"}
    assert selected_backend("FLASH_ATTN", env, (0, 14, 1)) == "FLASH_ATTN"
    assert selected_backend(None, env, (0, 14, 1)) == "TRITON_ATTN"
    assert selected_backend(None, env, (0, 17, 0)) is None
    assert selected_backend(None, env, None) == "TRITON_ATTN"
    assert selected_backend(None, env, None, unknown_reads=False) is None


@pytest.mark.parametrize(("version", "expected"), [
    ("0.14.1", {"warning"}), ("0.15.0", {"warning"}),                   # read / perhaps read
    ("0.16.0", set()), ("0.17.0", set()), ("0.17.1", set()),            # ignored: vLLM picks its own default
])
def test_triton_layout_reads_the_variable_only_where_vllm_does(version, expected):
    env = {BACKEND_ENV: "TRITON_ATTN"}
    p = pair(engine(env=env, tp=1), engine(env=env, tp=2), version)
    assert found(p, "triton-attn-hetero-tp-layout") == expected


@pytest.mark.parametrize(("version", "expected"), [
    ("0.14.1", {"error"}), ("0.15.0", {"warning"}),
    ("0.16.0", set()), ("0.18.0", set()), ("0.26.0", set()),            # a difference vLLM never sees
])
def test_backend_variable_difference_per_release(version, expected):
    p = pair(engine(env={BACKEND_ENV: "FLASHINFER"}), engine(env={BACKEND_ENV: "FLASH_ATTN"}), version)
    assert found(p, "attention-backend-mismatch") == expected


def test_cross_layer_blocks_ignore_the_variable_where_vllm_ignores_it():
    extra = {"enable_cross_layers_blocks": "True"}
    ignored = pair(engine(env={BACKEND_ENV: "FLEX_ATTENTION"}, extra=extra), engine(extra=extra), "0.18.0")
    assert "error" not in found(ignored, "cross-layers-blocks-mismatch")
    flag = pair(engine("--attention-backend", "FLEX_ATTENTION", extra=extra), engine(extra=extra), "0.18.0")
    assert "error" in found(flag, "cross-layers-blocks-mismatch")


def test_one_sided_backend_is_judged_when_the_other_role_sets_an_ignored_variable():
    h100 = {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}
    p = pair(engine("--attention-backend", "TRITON_ATTN"), engine(env={BACKEND_ENV: "TRITON_ATTN"}), "0.18.0", h100)
    assert found(p, "attention-backend-mismatch") == {"error"}
