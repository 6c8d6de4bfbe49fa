"""Variants of what the fifty-seventh public-report set (tests/unit/data/public_reports_57) taught, with negative
controls: two vLLM releases whose NIXL handshake replies one cannot decode.

The decode dials the prefill's side channel and decodes its reply with msgspec: a bare ``NixlAgentMetadata`` up to
0.12.0, a ``NixlHandshakePayload`` wrapping it from 0.13.0. A field the decode's struct requires and the prefill's
reply lacks raises ``ValidationError`` at the first handshake, with or without the compatibility hash (which 0.12.0
does not have) and before it is compared (:mod:`pdd_operator.vllm.nixl_handshake_wire`). So a 0.12.0 prefill with a
0.13.0 decode (the set's entry), 0.11.0 with 0.12.0 (``device_id``, ``block_size`` added in 0.11.1) and, with the
hash check turned off, 0.20.0 with 0.21.0 are errors; a newer prefill whose reply only adds fields the older decode
skips stays the warning it was.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.vllm.nixl_handshake_wire import READ, REQUIRED, required_fields, unreadable_reply
from tests.unit.test_turn2_variants import check, container, rules, workload

KV = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}


def _pair(p_image, d_image, model="Qwen/Qwen3-0.6B", d_extra=None, kind="Deployment"):
    docs = []
    for role, image, extra in (("prefill", p_image, None), ("decode", d_image, d_extra)):
        kv = json.dumps({**KV, **({"kv_connector_extra_config": extra} if extra else {})})
        docs.append(workload(f"m-{role}", role, container([model, "--kv-transfer-config", kv], image=image), kind=kind,
                             app="m"))
    return docs


def _findings(out, rule):
    return [f for r in out["results"] for f in r["findings"] if f["rule"] == rule]


@pytest.mark.parametrize(("prefill", "decode", "kind"), [
    ("v0.12.0", "v0.13.0", "Deployment"),     # the set's entry, as Deployments: 0.13 expects NixlHandshakePayload
    ("v0.12.0", "v0.14.1", "StatefulSet"),
    ("v0.14.0", "v0.12.0", "Deployment"),     # the other way: the 0.12 decode cannot read the 0.14 payload
    ("v0.11.0", "v0.12.0", "StatefulSet"),  # both unhashed: 0.12 requires device_id and block_size (0.11.1+)
    ("v0.10.0", "v0.11.2", "Deployment"),     # kv_cache_layout, block_lens, device_id, block_size missing
])
def test_a_handshake_reply_the_decode_cannot_decode_is_an_error(tmp_path, capsys, prefill, decode, kind):
    code, out = check(tmp_path, capsys, *_pair(f"vllm/vllm-openai:{prefill}", f"vllm/vllm-openai:{decode}", kind=kind))
    found = _findings(out, "vllm-version-mismatch")
    assert code == 1 and found and found[0]["severity"] == "error", out
    assert "missing required field" in found[0]["message"]


@pytest.mark.parametrize(("prefill", "decode"), [
    ("v0.12.0", "v0.11.2"),   # the 0.11.2 decode's fields are all in the 0.12.0 reply: no decode error
    ("v0.11.2", "v0.12.0"),   # the same struct in both releases
    ("v0.12.0", "v0.11.0"),   # the newer reply only adds fields the older decode skips
])
def test_a_reply_the_decode_can_read_stays_a_warning_without_the_hash(tmp_path, capsys, prefill, decode):
    code, out = check(tmp_path, capsys, *_pair(f"vllm/vllm-openai:{prefill}", f"vllm/vllm-openai:{decode}"))
    assert code == 0 and "vllm-version-mismatch" in rules(out, "warning"), out


def test_with_the_hash_check_off_the_inner_metadata_decides(tmp_path, capsys):
    off = {"enforce_handshake_compat": False}
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.20.0", "vllm/vllm-openai:v0.21.0", d_extra=off))
    found = _findings(out, "vllm-version-mismatch")
    assert code == 1 and found[0]["severity"] == "error" and "physical_blocks_per_logical_kv_block" in found[0]["message"]
    # the other way round the 0.20.0 decode skips the field it does not know: a warning
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.21.0", "vllm/vllm-openai:v0.20.0", d_extra=off))
    assert code == 0 and "vllm-version-mismatch" in rules(out, "warning"), out


def test_with_the_hash_check_on_the_hash_is_the_reason(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.20.0", "vllm/vllm-openai:v0.21.0"))
    found = _findings(out, "vllm-version-mismatch")
    assert code == 1 and "hashes the exact version string" in found[0]["message"]


def test_the_table_is_read_per_release():
    assert required_fields((0, 12, 0)) == required_fields((0, 11, 1))
    assert ("NixlHandshakePayload", "compatibility_hash") in required_fields((0, 13, 0))
    assert ("NixlAgentMetadata", "attn_backend_name") not in required_fields((0, 19, 1))  # dropped 0.13-0.19
    assert ("NixlAgentMetadata", "attn_backend_name") in required_fields((0, 20, 0))
    assert required_fields((0, 15, 1)) == required_fields((0, 14, 1))  # between reads that agree
    assert required_fields((0, 35, 0)) is None and required_fields((0, 8, 5)) is None
    assert unreadable_reply((0, 35, 0), (0, 12, 0)) is None and unreadable_reply(None, (0, 12, 0)) is None
    assert all(a in READ and b in READ and a <= b for spans in REQUIRED.values() for a, b in spans)
