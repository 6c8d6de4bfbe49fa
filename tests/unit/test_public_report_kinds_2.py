"""Variants of the kinds of fault the second public-report set (tests/unit/data/public_reports_2) found
missed, each with negative controls: a role label naming both roles (two engines in one pod), other
engines' P/D servers (TensorRT-LLM), attention backends that differ between roles, and cross-layer KV
blocks in effect on one role only."""

from __future__ import annotations

import json

import pytest

from tests.unit.test_turn2_variants import KV, check, container, pd, rules, workload

L8B = "meta-llama/Llama-3.1-8B-Instruct"


# --- a role label naming both roles: the containers' names decide ------------------------------------------


def _one_pod(p_port, d_port, label="prefill-decode", image="vllm/vllm-openai:v0.10.1.1"):
    cs = []
    for name, port, http in (("prefill", p_port, "8100"), ("decode", d_port, "8200")):
        env = [{"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": port}] if port else []
        c = container([L8B, "--port", http, "--kv-transfer-config", KV], image=image, env=env)
        c["name"] = name
        cs.append(c)
    doc = workload("llama-1p1d", label, cs[0])
    doc["spec"]["template"]["spec"]["containers"] = cs
    return doc


@pytest.mark.parametrize("label", ["prefill-decode", "pd", "decode-and-prefill"])
def test_one_pod_with_both_roles_pairs_by_container_name(tmp_path, capsys, label):
    code, out = check(tmp_path, capsys, _one_pod("5557", None, label=label))
    assert code == 1 and "side-channel-port-conflict" in rules(out, "error"), out
    assert not out["notChecked"]


def test_one_pod_with_both_roles_on_disjoint_ports_is_accepted(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _one_pod("5557", "5657"))
    assert "side-channel-port-conflict" not in rules(out) and not out["notChecked"], out
    assert code == 0


def test_a_label_naming_one_role_still_wins_over_names(tmp_path, capsys):
    docs = pd("llama", ["--kv-transfer-config", KV], ["--kv-transfer-config", KV], model=L8B)
    docs[0]["spec"]["template"]["spec"]["containers"][0]["name"] = "decode-helper"
    code, out = check(tmp_path, capsys, *docs)
    assert code == 0 and len(out["results"]) == 1, out


# --- other engines' disaggregated servers are "not checked", never passed ---------------------------------


def _trtllm(role, labelled=True, env=()):
    c = {"name": "trtllm", "image": "nvcr.io/nvidia/tensorrt-llm/release:1.0.0rc4", "command": ["trtllm-serve"],
         "args": ["Qwen/Qwen3-8B", "--tp_size", "2"], "env": list(env), "resources": {"limits": {"nvidia.com/gpu": "2"}}}
    doc = workload(f"qwen-{role}", role, c)
    if not labelled:
        for meta in (doc["metadata"], doc["spec"]["template"]["metadata"]):
            meta["labels"] = {"app": "qwen"}
        doc["spec"]["selector"] = {"matchLabels": {"app": "qwen"}}
    return doc


@pytest.mark.parametrize(("labelled", "env"), [(True, ()), (False, ({"name": "TRTLLM_USE_NIXL_KVCACHE", "value": "1"},))])
def test_a_tensorrt_llm_pd_pair_is_not_checked(tmp_path, capsys, labelled, env):
    code, out = check(tmp_path, capsys, _trtllm("prefill", labelled, env), _trtllm("decode", labelled, env))
    assert code == 3 and out["notChecked"] and "TensorRT-LLM" in json.dumps(out["notChecked"]), out


def test_a_plain_tensorrt_llm_server_is_not_a_pd_engine(tmp_path, capsys):
    code, out = check(tmp_path, capsys, _trtllm("server", labelled=False))
    assert not out["notChecked"] and not out["results"], out


# --- attention backends that differ between roles ---------------------------------------------------------


def _backends(p, d, image, how="flag"):
    def args(b):
        return ["--kv-transfer-config", KV] + (["--attention-backend", b] if how == "flag" and b else [])

    docs = pd("llama", args(p), args(d), model=L8B, image=image)
    if how == "env":
        for doc, b in zip(docs, (p, d), strict=True):
            if b:
                doc["spec"]["template"]["spec"]["containers"][0]["env"].append({"name": "VLLM_ATTENTION_BACKEND", "value": b})
    return docs


@pytest.mark.parametrize(("p", "d", "image", "how", "severity"), [
    ("FLASHINFER", "FLASH_ATTN", "vllm/vllm-openai:v0.26.0", "flag", "error"),   # read and hashed (0.26.0 source)
    ("FLASHINFER", "FLASH_ATTN", "vllm/vllm-openai:v0.32.0", "flag", "error"),
    ("FLASHINFER", "TRITON_ATTN", "vllm/vllm-openai:v0.20.0", "flag", "error"),  # read for set 28 (0.18-0.24 sdists)
    ("FLASHINFER", "TRITON_ATTN", "vllm/vllm-openai:v0.17.0", "flag", "warning"),  # flag era before 0.18 not read here
    ("FLASHINFER", "FLASH_ATTN", "vllm/vllm-openai:v0.10.1.1", "env", "error"),  # vllm#23587
])
def test_attention_backends_that_differ(tmp_path, capsys, p, d, image, how, severity):
    code, out = check(tmp_path, capsys, *_backends(p, d, image, how))
    assert "attention-backend-mismatch" in rules(out, severity), out
    assert code == (1 if severity == "error" else 0)


def test_an_ignored_backend_variable_is_said_unread_not_a_mismatch(tmp_path, capsys):
    """0.26.0 ignores VLLM_ATTENTION_BACKEND (no file of 0.16.0+ mentions it: vllm/attention_backends.py
    BACKEND_ENV): both roles run vLLM's own default, so the differing values are no mismatch; the variable is named
    unread (a warning)."""
    code, out = check(tmp_path, capsys, *_backends("FLASHINFER", "FLASH_ATTN", "vllm/vllm-openai:v0.26.0", "env"))
    assert "attention-backend-mismatch" not in rules(out), out
    assert "vllm-env-unread" in rules(out, "warning")
    assert code == 0


@pytest.mark.parametrize(("p", "d", "how"), [("FLASHINFER", "FLASHINFER", "flag"), ("flashinfer", "FLASHINFER", "env"),
                                             ("FLASHINFER", None, "flag"), (None, "FLASH_ATTN", "env")])
def test_attention_backends_equal_or_given_once_are_not_refused(tmp_path, capsys, p, d, how):
    code, out = check(tmp_path, capsys, *_backends(p, d, "vllm/vllm-openai:v0.26.0", how))
    assert "attention-backend-mismatch" not in rules(out, "error") and code == 0, out
    # a flag on one role only, GPU not pinned: the other runs vLLM's default for its GPU, a warning (round 20)
    assert ("attention-backend-mismatch" in rules(out, "warning")) is (how == "flag" and None in (p, d)), out


# --- cross-layer KV blocks in effect on one role only -----------------------------------------------------


def _nixl(cross=True):
    extra = {"enable_cross_layers_blocks": True} if cross else {}
    return {"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_connector_extra_config": extra}


def _multi(sibling, cross=True, name="MultiConnector"):
    return {"kv_connector": name, "kv_role": "kv_both",
            "kv_connector_extra_config": {"connectors": [{"kv_connector": sibling, "kv_role": "kv_both"}, _nixl(cross)]}}


def _cross(p_cfg, d_cfg, image="vllm/vllm-openai:v0.26.0", model=L8B):
    return pd("llama", ["--kv-transfer-config", json.dumps(p_cfg)], ["--kv-transfer-config", json.dumps(d_cfg)],
              model=model, image=image)


@pytest.mark.parametrize(("p_cfg", "image", "severity"), [
    (_multi("LMCacheConnectorV1"), "vllm/vllm-openai:v0.26.0", "error"),     # base class: no cross-layer blocks
    (_nixl(cross=False), "vllm/vllm-openai:v0.26.0", "error"),
    (_multi("LMCacheConnectorV1"), "vllm/vllm-openai:v0.24.0", "error"),     # hashed in 0.16-0.28 (read in the wheels)
    (_multi("LMCacheConnectorV1"), "vllm/vllm-openai:v0.13.0", "warning"),   # no cross-layer factor before 0.16
    (_multi("DynamoConnector", name="PdConnector"), "vllm/vllm-openai:v0.26.0", "warning"),  # out-of-tree sibling
])
def test_cross_layer_blocks_on_one_role_only(tmp_path, capsys, p_cfg, image, severity):
    code, out = check(tmp_path, capsys, *_cross(p_cfg, _nixl(), image))
    assert "cross-layers-blocks-mismatch" in rules(out, severity), out
    expected = 1 if severity == "error" else 0
    if p_cfg["kv_connector"] == "PdConnector":
        # and KVBM's PdConnector turns HMA off while the NIXL decode keeps it on from 0.22 (ai-dynamo/dynamo#12821,
        # set 30): the hashed is_hma_enabled differs, an error of its own
        assert "hma-flag-mismatch" in rules(out, "error"), out
        expected = 1
    if p_cfg["kv_connector"] == "MultiConnector" and image.endswith("v0.13.0"):
        # and 0.13.0's MultiConnector does not forward the handshake metadata that starts its NIXL child's listener
        # (set 76): the prefill never serves its side channel, an error of its own
        assert "multi-connector-nixl-listener" in rules(out, "error"), out
        expected = 1
    assert code == expected


@pytest.mark.parametrize(("p_cfg", "d_cfg", "image"), [
    (_nixl(), _nixl(), "vllm/vllm-openai:v0.26.0"),
    (_multi("OffloadingConnector"), _nixl(), "vllm/vllm-openai:v0.26.0"),  # OffloadingConnector prefers them too
    (_multi("LMCacheConnectorV1"), _nixl(), "vllm/vllm-openai:v0.32.0"),   # no cross-layer path in 0.32
])
def test_cross_layer_blocks_in_effect_alike_are_not_refused(tmp_path, capsys, p_cfg, d_cfg, image):
    code, out = check(tmp_path, capsys, *_cross(p_cfg, d_cfg, image))
    assert "cross-layers-blocks-mismatch" not in rules(out), out


def test_cross_layer_blocks_do_not_apply_to_hybrid_ssm_models(tmp_path, capsys):
    docs = _cross(_nixl(cross=False), _nixl(), model="nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8")
    _, out = check(tmp_path, capsys, *docs)
    assert "cross-layers-blocks-mismatch" not in rules(out), out


def test_dynamo_tensorrt_llm_workers_are_not_checked(tmp_path, capsys):
    docs = []
    for role in ("prefill", "decode"):
        c = {"name": "main", "image": "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.5.0", "command": ["python3"],
             "args": ["-m", "dynamo.trtllm", "--model-path", "Qwen/Qwen3-8B", "--disaggregation-mode", role],
             "resources": {"limits": {"nvidia.com/gpu": "1"}}}
        docs.append(workload(f"qwen-trt-{role}", role, c))
    code, out = check(tmp_path, capsys, *docs)
    assert code == 3 and "TensorRT-LLM" in json.dumps(out["notChecked"]), out


@pytest.mark.parametrize(("p_cfg", "image", "why"), [
    (_multi("DynamoConnector", name="PdConnector"), "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.2.0", "not in these files"),
    (_multi("LMCacheConnectorV1"), "vllm/vllm-openai:v0.13.0", "0.16-0.28 only"),
])
def test_a_cross_layer_warning_says_why_it_is_not_an_error(tmp_path, capsys, p_cfg, image, why):
    # a version inside 0.16-0.28 (Dynamo 1.2.0 ships 0.20.1) is not what makes the out-of-tree stack a warning
    _, out = check(tmp_path, capsys, *_cross(p_cfg, _nixl(), image))
    (finding,) = [f for r in out["results"] for f in r["findings"] if f["rule"] == "cross-layers-blocks-mismatch"]
    assert finding["severity"] == "warning" and why in finding["message"], finding
