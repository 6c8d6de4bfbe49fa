"""Variants of what the hundred-and-twenty-seventh public-report set (tests/unit/data/public_reports_127) taught:
PDDeployments written from vLLM's model recipes, whose flags users copy into ``extraArgs`` as the recipe prints them.

- a managed flag that only configures the engine (``--kv-cache-dtype``, ``--dtype``, ``--revision``, a draft
  ``--speculative-config``, ``--block-size``, ``--gpu-memory-utilization``, ``--max-model-len``,
  ``--trust-remote-code``) is a warning (``extra-args-managed-flag``) when prefill and decode still agree on what must
  match: vLLM keeps the last value and runs (a recipe's ``--kv-cache-dtype fp8`` in both roles; ``--max-model-len`` on
  the prefill only). It stays an error where the override makes the roles differ in a NIXL compatibility factor;
- flags wired into what the operator renders besides the engine (TP/PP, ``--port``, ``--kv-transfer-config``, model
  names) stay errors whatever the other role says;
- ``pdd check`` and the admission webhook give the same verdict on each.
"""

from __future__ import annotations

import copy

import pytest

from pdd_operator.api.spec import PDDeploymentSpec
from pdd_operator.compat import evaluate
from pdd_operator.controller.webhook import review
from tests.helpers import merge

RULE = "extra-args-managed-flag"

MINIMAX = {  # the MiniMax-M2.5 recipe's hopper command as a PDDeployment (set 127), vLLM 0.20.2
    "model": {"name": "MiniMaxAI/MiniMax-M2.5", "hfArchitecture": "MiniMaxM2ForCausalLM", "numKvHeads": 8,
              "trustRemoteCode": True},
    "engine": {"image": "vllm/vllm-openai:v0.20.2"},
    "kvCache": {"dtype": "fp8"},
    "network": {"rdma": {"resourceName": "rdma/ib", "count": 1}},
    "prefill": {"tensorParallelSize": 4}, "decode": {"tensorParallelSize": 4},
}
GPT_OSS = {  # the gpt-oss-120b recipe on Hopper, vLLM 0.28.0
    "model": {"name": "openai/gpt-oss-120b", "hfArchitecture": "GptOssForCausalLM", "numKvHeads": 8},
    "engine": {"image": "vllm/vllm-openai:v0.28.0"},
    "network": {"rdma": {"resourceName": "rdma/ib", "count": 1}},
    "prefill": {"tensorParallelSize": 2}, "decode": {"tensorParallelSize": 2},
}
LLAMA_034 = {
    "model": {"name": "meta-llama/Llama-3.1-8B-Instruct", "hfArchitecture": "LlamaForCausalLM", "numKvHeads": 8},
    "engine": {"image": "vllm/vllm-openai:v0.34.0"},
    "network": {"rdma": {"resourceName": "rdma/ib", "count": 1}},
}
EAGLE = '{"model":"nvidia/gpt-oss-120b-Eagle3-v3","num_speculative_tokens":7,"method":"eagle3"}'


def _spec(base: dict, patch: dict) -> dict:
    return merge(copy.deepcopy(base), patch)


def _severities(spec: dict) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for f in evaluate(PDDeploymentSpec.model_validate(spec)).findings:
        out.setdefault(f.severity, set()).add(f.rule)
    return out


def _webhook(spec: dict):
    return review("CREATE", {"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment",
                             "metadata": {"name": "x", "namespace": "ns"}, "spec": copy.deepcopy(spec)})


@pytest.mark.parametrize(("base", "patch"), [
    # the recipe's flags copied verbatim: the same value on both roles, spec field left at its default
    (_spec(MINIMAX, {"kvCache": {"dtype": "auto"}}),
     {"prefill": {"extraArgs": ["--kv-cache-dtype", "fp8"]}, "decode": {"extraArgs": ["--kv-cache-dtype", "fp8"]}}),
    # the same value as the spec's field on one role only: nothing differs
    (MINIMAX, {"decode": {"extraArgs": ["--kv-cache-dtype=fp8"]}}),
    # per-engine settings that need not match
    (GPT_OSS, {"prefill": {"extraArgs": ["--max-model-len", "131072", "--max-num-batched-tokens", "10240"]}}),
    (GPT_OSS, {"decode": {"extraArgs": ["--gpu-memory-utilization", "0.8"]}}),
    (LLAMA_034, {"prefill": {"extraArgs": ["--trust-remote-code"]}}),
    (LLAMA_034, {"prefill": {"extraArgs": ["--block-size", "32"]}, "decode": {"extraArgs": ["--block-size", "32"]}}),
    # a draft speculator on both roles, the token counts apart (not a 0.28.0 hash factor)
    (GPT_OSS, {"prefill": {"extraArgs": ["--speculative-config", EAGLE]},
               "decode": {"extraArgs": ["--speculative-config", EAGLE.replace(":7", ":3")]}}),
    (LLAMA_034, {"prefill": {"extraArgs": ["--revision", "main"]}, "decode": {"extraArgs": ["--revision", "main"]}}),
])
def test_an_engine_only_override_that_leaves_the_roles_agreeing_is_a_warning(base, patch):
    spec = _spec(base, patch)
    found = _severities(spec)
    assert RULE in found.get("warning", set()), found
    assert not found.get("error"), found
    verdict = _webhook(spec)
    assert verdict.allowed, verdict.message
    assert any(w.startswith(f"[{RULE}]") for w in verdict.warnings), verdict.warnings


@pytest.mark.parametrize(("base", "patch", "also"), [
    # the decode drops the recipe's fp8 KV cache (set 127), or stores fp8 the prefill does not (set 109)
    (MINIMAX, {"decode": {"extraArgs": ["--kv-cache-dtype", "auto"]}}, "kv-cache-dtype-mismatch"),
    (LLAMA_034, {"decode": {"extraArgs": ["--kv-cache-dtype", "fp8"]}}, "kv-cache-dtype-mismatch"),
    # EAGLE-3 on the decode only: its method and draft model are 0.28.0 hash factors
    (GPT_OSS, {"decode": {"extraArgs": ["--speculative-config", EAGLE]}}, "spec-decode-mismatch"),
])
def test_an_engine_only_override_that_makes_the_roles_differ_stays_an_error(base, patch, also):
    spec = _spec(base, patch)
    errors = _severities(spec).get("error", set())
    assert {RULE, also} <= errors, errors
    verdict = _webhook(spec)
    assert not verdict.allowed and f"[{RULE}]" in verdict.message


@pytest.mark.parametrize("args", [
    ["--port", "8100"], ["--port=8100"], ["--tensor-parallel-size", "4"], ["-tp", "4"],
    ["--pipeline-parallel-size", "2"], ["--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'],
    ["--served-model-name", "other"],
])
@pytest.mark.parametrize("base", [GPT_OSS, LLAMA_034])
def test_a_flag_the_operator_wires_elsewhere_stays_an_error_on_both_roles_too(base, args):
    spec = _spec(base, {"prefill": {"extraArgs": list(args)}, "decode": {"extraArgs": list(args)}})
    assert RULE in _severities(spec).get("error", set())
    assert not _webhook(spec).allowed
