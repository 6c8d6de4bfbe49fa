"""Hash-only mismatches as wide as vLLM's handshake (issue 9 item 1): ``_nixl_handshake`` (vLLM 0.13-0.33, facts
section 1.4) compares the NIXL compatibility hashes only where the engine that runs the handshake keeps
``kv_connector_extra_config.enforce_handshake_compat`` (default true). In pull mode that is the decode; in push
mode both sides dial each other. A setting that differs only in how it is written (the ``--model`` string, the
version string, ``auto`` against ``bfloat16``) is then a warning, not a refusal; a difference the handshake still
asserts on (KV block bytes: fp8 against bfloat16) stays an error. Each case with its negative control."""

from __future__ import annotations

import json

import pytest

from tests.unit.test_turn2_variants import check, container, rules, workload


def _kv(role: str, connector: str = "NixlConnector", enforce: bool | None = None) -> str:
    extra = {} if enforce is None else {"kv_connector_extra_config": {"enforce_handshake_compat": enforce}}
    return json.dumps({"kv_connector": connector, "kv_role": role, **extra})


def _pair(p_args, d_args, p_enforce=None, d_enforce=None, connector="NixlConnector", image="v0.30.0"):
    def role(name, args, kv):
        return workload(f"m-{name}", name, container([*args, "--kv-transfer-config", kv],
                                                     image=f"vllm/vllm-openai:{image}"))
    return [role("prefill", p_args, _kv("kv_producer", connector, p_enforce)),
            role("decode", d_args, _kv("kv_consumer", connector, d_enforce))]


MODEL = (["/models/qwen3-8b"], ["Qwen/Qwen3-8B"], "model-mismatch")
CACHE_AUTO = (["Qwen/Qwen3-8B"], ["Qwen/Qwen3-8B", "--kv-cache-dtype", "bfloat16"], "kv-cache-dtype-mismatch")


@pytest.mark.parametrize("case", [MODEL, CACHE_AUTO], ids=["model-string", "auto-vs-bfloat16"])
@pytest.mark.parametrize("p_enforce, d_enforce, connector, refused", [
    (None, None, "NixlConnector", True),        # the hash is compared: refused
    (None, False, "NixlConnector", False),      # pull: the decode runs the handshake and does not compare
    (False, None, "NixlConnector", True),       # pull: turning it off on the prefill alone changes nothing
    (False, None, "NixlPushConnector", True),   # push: the decode still compares
    (False, False, "NixlPushConnector", False),
])
def test_a_hash_only_difference_is_refused_only_where_the_handshake_compares_hashes(
        tmp_path, capsys, case, p_enforce, d_enforce, connector, refused):
    p_args, d_args, rule_id = case
    code, out = check(tmp_path, capsys, *_pair(p_args, d_args, p_enforce, d_enforce, connector))
    assert (rule_id in rules(out, "error")) is refused, out
    assert refused or rule_id in rules(out, "warning"), out


def test_a_difference_the_handshake_still_asserts_on_stays_an_error_with_the_hash_off(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair(["Qwen/Qwen3-8B"], ["Qwen/Qwen3-8B", "--kv-cache-dtype", "fp8"],
                                               d_enforce=False))
    assert "kv-cache-dtype-mismatch" in rules(out, "error"), out


@pytest.mark.parametrize("p_dtype, d_dtype, severity", [
    ("half", "float16", None),            # one torch dtype, one hash factor
    ("float", "float32", None),
    ("auto", "bfloat16", None),           # auto is config.json's torch_dtype: Qwen3-8B's is bfloat16 (vllm/dtype.py)
    ("auto", "float16", "error"),         # refused for a bfloat16 checkpoint on GPUs with bfloat16 (held-out set 12)
    ("bfloat16", "float16", "error"),     # hashed (0.13+)
    ("bfloat16", "float32", "error"),
])
def test_dtype_is_compared_as_vllm_resolves_it(tmp_path, capsys, p_dtype, d_dtype, severity):
    code, out = check(tmp_path, capsys, *_pair(["Qwen/Qwen3-8B", "--dtype", p_dtype], ["Qwen/Qwen3-8B", "--dtype", d_dtype]))
    found = {f["severity"] for r in out["results"] for f in r["findings"] if f["rule"] == "dtype-mismatch"}
    assert found == ({severity} if severity else set()), out


def test_dtype_of_equal_width_without_the_hash_is_a_warning(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair(["Qwen/Qwen3-8B", "--dtype", "bfloat16"],
                                               ["Qwen/Qwen3-8B", "--dtype", "float16"], d_enforce=False))
    assert "dtype-mismatch" in rules(out, "warning") and "dtype-mismatch" not in rules(out, "error"), out
