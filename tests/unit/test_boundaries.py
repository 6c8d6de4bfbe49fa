"""Each must-match setting, and each vLLM version boundary the rules know, on both sides of it."""

from __future__ import annotations

import pytest

from pdd_operator.compat import evaluate
from pdd_operator.compat.pair import PDPair, role_from_container
from pdd_operator.vllm.architectures import traits
from tests.helpers import HYBRID, hybrid, make_spec

HYBRID_MODEL = HYBRID["model"]["name"]

POD_IP = {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}


def engine(*args: str, env: list[dict] | None = None, connector: str = "NixlConnector") -> dict:
    kv = f'{{"kv_connector":"{connector}","kv_role":"kv_both"}}'
    return {"name": "vllm", "command": ["vllm", "serve", *args, "--kv-transfer-config", kv],
            "env": [POD_IP, *(env or [])]}


def pair(p: dict, d: dict, vp: str = "0.28.0", vd: str | None = None, model: str = "meta-llama/Llama-3.1-8B") -> PDPair:
    return PDPair("test", role_from_container("prefill", p, {}, version_text=vp),
                  role_from_container("decode", d, {}, version_text=vd or vp), traits(None, None, None, model))


def errors(target) -> set[str]:
    return {f.rule for f in evaluate(target).errors}


# Must match between prefill and decode (seed 000 section 2; vllm nixl metadata.py hash factors).
MUST_MATCH = [
    ("vllm-version-mismatch", pair(engine("m"), engine("m"), "0.28.0", "0.28.1")),
    ("model-mismatch", pair(engine("meta-llama/Llama-3.1-8B"), engine("/models/llama"))),
    ("dtype-mismatch", pair(engine("m", "--dtype", "bfloat16"), engine("m", "--dtype", "float16"))),
    ("kv-cache-dtype-mismatch", pair(engine("m", "--kv-cache-dtype", "auto"), engine("m", "--kv-cache-dtype", "bfloat16"))),
    ("transfer-mode-mismatch", pair(engine("m", connector="NixlPushConnector"), engine("m"))),
    ("hma-flag-mismatch", pair(engine("m", "--no-disable-hybrid-kv-cache-manager"), engine("m"), "0.21.0")),
    ("spec-decode-mismatch", pair(engine("m", "--speculative-config", '{"method":"mtp","num_speculative_tokens":1}'),
                                  engine("m", "--speculative-config",
                                         '{"method":"eagle3","model":"d","num_speculative_tokens":1}'))),
    ("kv-layout-mismatch", pair(engine("m", env=[{"name": "VLLM_KV_CACHE_LAYOUT", "value": "NHD"}]), engine("m"))),
]


@pytest.mark.parametrize("rule, bad", MUST_MATCH, ids=[m[0] for m in MUST_MATCH])
def test_each_must_match_setting(rule, bad):
    assert rule in errors(bad)
    assert rule not in errors(pair(engine("m"), engine("m"), bad.prefill.version_text))


def test_transfer_mode_message_says_whether_the_handshake_catches_it():
    def message(version: str) -> str:
        p = pair(engine("m", connector="NixlPushConnector"), engine("m"), version)
        return next(f.message for f in evaluate(p).errors if f.rule == "transfer-mode-mismatch")
    assert "handshake passes" in message("0.27.0") and "refuses it" in message("0.28.0")


def image(version: str) -> dict:
    return {"image": f"vllm/vllm-openai:v{version}"}


# (rule, spec builder, last version where it fires, first version where it does not) or reverse.
BOUNDARIES = [
    ("push-connector-unavailable", lambda v: make_spec(engine=image(v), kvTransfer={"connector": "NixlPushConnector"}),
     "0.23.1", "0.24.0"),
    ("hybrid-ssm-unsupported", lambda v: hybrid(engine=image(v)), "0.17.1", "0.18.0"),
    ("hybrid-ssm-hetero-tp", lambda v: hybrid(engine=image(v), prefill={"tensorParallelSize": 4}), "0.19.1", "0.20.0"),
    ("ssm-kind-unsupported", lambda v: hybrid(engine=image(v), model={"name": "q", "hfArchitecture": "Qwen3NextForCausalLM"}),
     "0.21.0", "0.22.0"),
    ("ssm-kind-unsupported", lambda v: hybrid(engine=image(v), model={"name": "j", "hfArchitecture": "JambaForCausalLM"}),
     "0.24.1", "0.25.0"),
    ("block-size-hma", lambda v: hybrid(engine=image(v), decode={"blockSize": 256}), "0.26.1", "0.27.0"),
    ("pp-unsupported-version", lambda v: make_spec(engine=image(v), kvTransfer={"connector": "NixlPushConnector"},
                                                   prefill={"pipelineParallelSize": 2}), "0.25.1", "0.26.0"),
    ("pp-push-hma-version", lambda v: make_spec(engine=image(v), model={"name": "g", "architecture": "hybrid-ssm",
                                                                        "ssmKind": "Mamba2"},
                                                kvTransfer={"connector": "NixlPushConnector"},
                                                prefill={"pipelineParallelSize": 2}), "0.30.1", "0.31.0"),
    ("hybrid-hma-required", lambda v: hybrid(engine=image(v), prefill={"extraArgs": []}), None, None),
    ("hetero-tp-p-gt-d-unsupported", lambda v: make_spec(engine=image(v), prefill={"tensorParallelSize": 2}),
     "0.13.0", "0.14.0"),
    ("block-size-hetero-unsupported", lambda v: make_spec(engine=image(v), prefill={"blockSize": 16},
                                                          decode={"blockSize": 32}), "0.11.0", "0.11.1"),
    ("hetero-tp-kv-replicated", lambda v: make_spec(engine=image(v), prefill={"tensorParallelSize": 4},
                                                    decode={"tensorParallelSize": 16}), "0.23.0", "0.24.0"),
    ("hybrid-ssm-prefix-caching", lambda v: hybrid(engine=image(v), decode={"extraArgs": ["--enable-prefix-caching"]}),
     "0.26.0", "0.27.0"),
    ("kv-layout-version", lambda v: make_spec(engine=image(v), kvCache={"layout": "BLHNC"}), "0.28.1", "0.29.0"),
    ("nixl-connector-unavailable", lambda v: make_spec(engine=image(v)), "0.8.5", "0.9.0"),
]


@pytest.mark.parametrize("rule, build, fires, clears", [b for b in BOUNDARIES if b[2]],
                         ids=[f"{b[0]}@{b[3]}" for b in BOUNDARIES if b[2]])
def test_version_boundary(rule, build, fires, clears):
    assert rule in {f.rule for f in evaluate(build(fires)).findings}
    assert rule not in {f.rule for f in evaluate(build(clears)).findings}


@pytest.mark.parametrize("version, fires", [("0.20.0", True), ("0.32.0", True), ("0.33.0", False)])
def test_matrix_override_note_until_the_docs_caught_up(version, fires):
    spec = hybrid(engine=image(version), prefill={"tensorParallelSize": 4})
    assert ("matrix-overridden-by-code" in {f.rule for f in evaluate(spec).findings}) is fires


@pytest.mark.parametrize("rule, patch", [
    ("model-mismatch", {"decode": {"extraArgs": ["--model", "/models/llama"]}}),
    ("kv-cache-dtype-mismatch", {"prefill": {"extraArgs": ["--kv-cache-dtype", "bfloat16"]}}),
])
def test_hash_only_mismatches_refuse_from_0_13_and_warn_before(rule, patch):
    """vLLM 0.12.0's v1/nixl_connector.py has no compute_nixl_compatibility_hash; 0.13.0's handshake checks it."""
    from tests.helpers import merge

    severities = {}
    for version in ("0.12.0", "0.13.0"):
        report = evaluate(make_spec(**merge({"engine": image(version)}, patch)))
        severities[version] = {f.severity for f in report.findings if f.rule == rule}
    assert severities == {"0.12.0": {"warning"}, "0.13.0": {"error"}}, severities


@pytest.mark.parametrize("version, fires", [("0.25.0", False), ("0.26.0", False)])
def test_hybrid_decode_prefix_caching_follows_vllms_default(tmp_path, capsys, version, fires):
    """vllm/config/model.py is_prefix_caching_supported: off for hybrid models up to 0.25, on from 0.26, but
    engine/arg_utils.py keeps hybrid models opt-in through 0.27.1 (default on only from 0.28.0, after this rule's
    range); with no prefix-caching flag on a hand-written decode the rules follow that default. A PDDeployment's
    decode gets --no-enable-prefix-caching rendered (render/engine.py), so only a user's --enable-prefix-caching in
    extraArgs brings the rule back (0.26 asserts 'SSM can only have one local block' on a prefix hit)."""
    from .test_turn2_variants import KV, check, pd, rules

    ds = [{"name": "VLLM_SSM_CONV_STATE_LAYOUT", "value": "DS"}]
    docs = pd("h", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV], model=HYBRID_MODEL,
              image=f"vllm/vllm-openai:v{version}", env=ds)
    _, out = check(tmp_path, capsys, *docs)
    assert ("hybrid-ssm-prefix-caching" in rules(out, "error")) is fires, rules(out)
    assert "hybrid-ssm-prefix-caching" not in {f.rule for f in evaluate(hybrid(engine=image(version))).findings}
    forced = evaluate(hybrid(engine=image(version), decode={"extraArgs": ["--enable-prefix-caching"]}))
    assert "hybrid-ssm-prefix-caching" in {f.rule for f in forced.errors}


def test_hetero_tp_kv_replicated_leaves_a_non_integer_tp_ratio_to_tp_divisibility():
    """TP 2 / 3 is refused by tp-divisibility; the KV-replication check has no TP ratio to speak of there."""
    found = {f.rule for f in evaluate(make_spec(engine=image("0.21.0"), prefill={"tensorParallelSize": 2},
                                                decode={"tensorParallelSize": 3})).errors}
    assert "tp-divisibility" in found and "hetero-tp-kv-replicated" not in found, found


def test_block_size_partial_names_the_role_that_sets_none():
    # on 0.30 the decode's size depends on the GPU and head size (FlashAttention 4); on 0.20.2 it is pinned at 16
    # (a fine-tune whose head size is not known: Llama 3.1's own 128 keeps 16 on every GPU)
    spec = make_spec(engine=image("0.30.0"), prefill={"blockSize": 16}, model={"name": "NousResearch/Hermes-3-Llama-3.1-8B"})
    (finding,) = [f for f in evaluate(spec).findings if f.rule == "block-size-partial"]
    assert "prefill 16, decode not set" in finding.message and "None" not in finding.message
    assert not [f for f in evaluate(make_spec(prefill={"blockSize": 16})).findings if f.rule == "block-size-partial"]
