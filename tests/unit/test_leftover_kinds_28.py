"""The leftovers of issue 9 after sets 29-34 (session 28), each as a kind, with variants and controls.

1. The known-checkpoint table (:mod:`pdd_operator.vllm.known_models`) lacked DeepSeek-V2-Lite, Gemma 2 2B/27B,
   Gemma 3 1B, Phi-3.5-mini, Phi-4-mini, Llama-3.2-1B, Mistral-7B v0.3 and Qwen2.5-VL-3B: their config.json copies
   kept in mlc-ai/mlc-llm's ``python/mlc_llm/model/model_preset.py`` (MODEL_PRESETS, commit d1ea69a8) and
   whaler404/Hf-Learn's ``qwen2.5_vl.md`` (commit 52e20dfe) are now snapshots, so
   the rules that need KV heads (``hetero-tp-kv-replicated``), a sliding window (the HMA rules) or MLA
   (``hetero-tp-p-gt-d-unsupported``) judge them instead of "not checked".
2. MLA with prefill TP > decode TP: vLLM 0.13.0's NIXL handshake asserts ``tp_ratio > 0`` ("Decode TP cannot be
   smaller than prefill TP", v1/nixl_connector.py add_remote_agent) for every model; from 0.14.0 an MLA decode reads
   the (duplicated) latent cache from the first remote rank only and notifies the others ("MLA opt", the same code in
   0.18.0 and 0.19.1 nixl_connector.py), so an MLA pair with P TP > D TP is valid there.
3. Short options dated (``cli-flag-not-yet``, :mod:`pdd_operator.vllm.added_flags`): ``--decode-context-parallel-size``
   and ``-dcp`` are absent from the 0.10.0 wheel and the 0.10.1.1 sdist and in 0.11.0 on (vllm/engine/arg_utils.py);
   ``--prefill-context-parallel-size`` and ``-pcp`` absent from 0.11.0/0.11.1 and in 0.12.0 on. ``-tp``, ``-pp``
   and ``-O`` are in every release read (0.9.0 to 0.32.0), so they set no floor and are never refused.
4. ``--disable-sliding-window`` (:mod:`pdd_operator.compat.rules.sliding_window_flag`): in every release read vLLM sets
   ``hf_text_config.sliding_window = None`` when it is given (vllm/config/model.py 0.11.1-0.32.0, config/__init__.py
   0.10.1.1), so windows read from that field (Gemma 2/3, gpt-oss, Mistral-7B v0.1, Phi-3) become full attention,
   while Llama 4's chunked attention and MiMo-V2-Flash's ``sliding_window_size`` stay. On both roles the pair is judged
   as a full-attention model (no HMA warning on 0.18-0.21, no HMA block-size assert on 0.22-0.26); on one role it is
   ``sliding-window-disabled-one-role`` (a warning: not hashed, no handshake check). The flag was also not a boolean
   to the parser here, so a positional model after it was read as its value.
5. A prefill-only kernel split on 0.11.1-0.11.2 (prefill ``--block-size 128`` on FLASH_ATTN, whose kernel blocks are
   64 tokens; decode 64) is not a false refusal of ``block-size-direction``: 0.11.1's nixl_connector.py
   register_kv_caches moves the prefill's ``self.block_size`` to 64 and publishes it, so the decode's handshake passes
   (``metadata.block_size <= self.block_size``, ratio 1), but the prefill's ``kv_transfer_params`` carry its logical
   128-token block ids, which the decode's ``_logical_to_kernel_block_ids`` leaves as they are (its own ratio is 1):
   ``_read_blocks`` then has twice the local blocks of the remote ones and asserts ``num_local_blocks <=
   num_remote_blocks`` at the first request longer than one prefill block. Without the split (a backend taking
   128-token blocks) the handshake asserts "nP > nD is not supported yet". Either way the pair fails: an error.
6. ``MultiConnector[NixlConnector, LMCacheConnectorV1]`` and HMA (:mod:`pdd_operator.compat.connector_hma`): from 0.22.0
   vLLM keeps HMA on under a MultiConnector only when every child subclasses ``SupportsHMA`` (0.22.0 config/vllm.py;
   ``MultiConnector.all_children_support_hma`` in 0.23.0, 0.24.0, 0.32.0), which the in-tree LMCacheConnectorV1,
   ExampleConnector and FlexKVConnectorV1 do not (LMCacheMPConnector resolves to LMCache's own class: not claimed);
   ``is_hma_enabled`` is hashed (0.18+), so such a role against a plain NixlConnector peer is ``hma-flag-mismatch``;
   the same MultiConnector on both roles, or 0.21 (HMA off under any connector), is not.
7. Dynamo's ``--disaggregation-mode decode`` does not add a NixlConnector (ai-dynamo/dynamo
   components/src/dynamo/vllm/args.py at 000a36a7: ``update_dynamo_config_with_engine`` raises ValueError for
   ``--disaggregation-mode prefill`` without ``--kv-transfer-config`` and sets no connector for decode;
   ``_uses_nixl_connector`` reads only the user's config), so the claim of ai-dynamo/modelexpress#245 does not hold
   for runtime 1.x: such a decode is ``kv-connector-missing``, as the checker already read it; runtimes before 1.0
   (``--connector nixl`` the default) keep their implicit NixlConnector. Pinned.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.compat.rules.sliding_window_flag import window_cleared
from pdd_operator.vllm.added_flags import ADDED_FLAGS, flags_floor
from pdd_operator.vllm.flags import parse_flags
from pdd_operator.vllm.known_models import known_config
from pdd_operator.vllm.model_config import facts_from_config
from tests.unit.test_leftover_kinds_27 import READERS, pair
from tests.unit.test_turn2_variants import check, container, rules, workload

NOT_YET = "cli-flag-not-yet"

# --- 1. the known-checkpoint table ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("model_id", "kv_heads", "sliding", "arch"), [
    ("deepseek-ai/DeepSeek-V2-Lite", 16, False, "mla"),
    ("deepseek-ai/DeepSeek-V2-Lite-Chat", 16, False, "mla"),
    ("google/gemma-3-1b-it", 1, True, "dense"),
    ("google/gemma-2-27b-it", 16, True, "dense"),
    ("google/gemma-2-2b", 4, True, "dense"),
    ("microsoft/Phi-3.5-mini-instruct", 32, True, "dense"),    # sliding_window 262144: vLLM windows every layer
    ("microsoft/Phi-4-mini-instruct", 8, True, "dense"),
    ("meta-llama/Llama-3.2-1B-Instruct", 8, False, "dense"),
    ("mistralai/Mistral-7B-Instruct-v0.3", 8, False, "dense"),   # sliding_window null
    ("Qwen/Qwen2.5-VL-3B-Instruct", 2, False, "multimodal"),     # use_sliding_window false
])
def test_new_checkpoints_are_known(model_id, kv_heads, sliding, arch):
    found = known_config(model_id)
    # Llama-3.2-1B-Instruct: its own config.json since fix H (kevinstephano/thunder_model_blocks), not mlc-llm's base
    assert found is not None and any(where in found[1] for where in (
        "mlc-ai/mlc-llm", "whaler404/Hf-Learn", "kevinstephano/thunder_model_blocks"))
    facts = facts_from_config(found[0])
    assert (facts.num_kv_heads, facts.sliding_window, facts.architecture.value) == (kv_heads, sliding, arch)


def test_gemma3_1b_decode_tp_past_its_one_kv_head_is_refused(tmp_path, capsys):
    # 0.20.0 nixl/worker.py: the block lengths must differ by the TP ratio unless the KV heads are replicated
    code, out = check(tmp_path, capsys, *pair("google/gemma-3-1b-it", "0.20.0", 1, 4))
    assert code != 0 and "hetero-tp-kv-replicated" in rules(out, "error")
    assert "tp-kv-heads-unknown" not in rules(out)


def test_qwen25_vl_3b_decode_tp_past_its_two_kv_heads_is_refused(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *pair("Qwen/Qwen2.5-VL-3B-Instruct", "0.20.0", 1, 4))
    assert code != 0 and "hetero-tp-kv-replicated" in rules(out, "error")


def test_llama32_1b_decode_tp_past_its_kv_heads_is_refused(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *pair("meta-llama/Llama-3.2-1B-Instruct", "0.20.0", 1, 16))
    assert code != 0 and "hetero-tp-kv-replicated" in rules(out, "error")
    _, out = check(tmp_path, capsys, *pair("meta-llama/Llama-3.2-1B-Instruct", "0.20.0", 1, 8))   # control
    assert "hetero-tp-kv-replicated" not in rules(out) and "tp-kv-heads-unknown" not in rules(out)


@pytest.mark.parametrize("model_id", ["google/gemma-2-27b-it", "microsoft/Phi-3.5-mini-instruct",
                                      "google/gemma-3-1b-it"])
def test_sliding_window_checkpoints_get_the_hma_warning_on_0_20(tmp_path, capsys, model_id):
    # 0.18-0.21 config/vllm.py: a kv_transfer_config turns HMA off unless --no-disable-hybrid-kv-cache-manager
    _, out = check(tmp_path, capsys, *pair(model_id, "0.20.0", 1, 1))
    assert "hma-implicitly-disabled" in rules(out, "warning")


def test_full_attention_checkpoints_do_not(tmp_path, capsys):
    _, out = check(tmp_path, capsys, *pair("mistralai/Mistral-7B-Instruct-v0.3", "0.20.0", 1, 1))
    assert "hma-implicitly-disabled" not in rules(out)


# --- 2. MLA with prefill TP > decode TP ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["0.11.1", "0.13.0"])
def test_mla_prefill_tp_above_decode_tp_is_refused_before_0_14(tmp_path, capsys, version):
    code, out = check(tmp_path, capsys, *pair("deepseek-ai/DeepSeek-V2-Lite-Chat", version, 2, 1))
    assert code != 0 and "hetero-tp-p-gt-d-unsupported" in rules(out, "error")


@pytest.mark.parametrize("version", ["0.14.0", "0.18.0", "0.19.1"])
def test_mla_prefill_tp_above_decode_tp_is_valid_from_0_14(tmp_path, capsys, version):
    code, out = check(tmp_path, capsys, *pair("deepseek-ai/DeepSeek-V2-Lite-Chat", version, 2, 1))
    assert code == 0 and not rules(out, "error") and "architecture-unknown" not in rules(out)


# --- 3. short options dated -----------------------------------------------------------------------------------------


def _not_yet(out):
    return [f["severity"] for r in out["results"] for f in r["findings"] if f["rule"] == NOT_YET]


@pytest.mark.parametrize(("version", "args"), [
    ("0.10.1.1", ["-dcp", "2"]), ("0.10.0", ["--decode-context-parallel-size", "2"]),
    ("0.11.1", ["-pcp", "2"]), ("0.11.0", ["--prefill-context-parallel-size", "2"]),
])
def test_context_parallel_options_before_their_release_are_refused(tmp_path, capsys, version, args):
    # argparse in FlexibleArgumentParser: 'unrecognized arguments' and exit 2 before the engine starts
    code, out = check(tmp_path, capsys, *pair("deepseek-ai/DeepSeek-V2-Lite-Chat", version, 2, 2, d_args=args))
    assert code != 0 and _not_yet(out) == ["error"]


@pytest.mark.parametrize(("version", "args"), [
    ("0.11.0", ["-dcp", "2"]), ("0.12.0", ["-pcp", "2"]), ("0.14.0", ["--prefill-context-parallel-size", "2"]),
    ("0.9.0", ["-tp", "2"]), ("0.10.1.1", ["-pp", "2"]), ("0.9.1", ["-O", "3"]), ("0.32.0", ["-O3"]),
])
def test_context_parallel_from_their_release_and_old_short_options_are_not(tmp_path, capsys, version, args):
    _, out = check(tmp_path, capsys, *pair("deepseek-ai/DeepSeek-V2-Lite-Chat", version, 2, 2, d_args=args))
    assert _not_yet(out) == []


def test_context_parallel_options_bound_an_unknown_version():
    assert ADDED_FLAGS["-dcp"].floor == (0, 10, 2) and ADDED_FLAGS["-pcp"].floor == (0, 12, 0)
    assert flags_floor(dict.fromkeys(("--decode-context-parallel-size", "--prefill-context-parallel-size"))) == (
        (0, 12, 0), "--prefill-context-parallel-size")
    assert "-tp" not in ADDED_FLAGS and "-pp" not in ADDED_FLAGS and "-O" not in ADDED_FLAGS


# --- 4. --disable-sliding-window ------------------------------------------------------------------------------------

OFF = ["--disable-sliding-window"]
ONE_ROLE = "sliding-window-disabled-one-role"


@pytest.mark.parametrize(("model_id", "cleared"), [
    ("google/gemma-2-9b-it", True), ("google/gemma-3-1b-it", True), ("openai/gpt-oss-120b", True),
    ("mistralai/Mistral-7B-v0.1", True), ("microsoft/Phi-3.5-mini-instruct", True),
    ("meta-llama/Llama-4-Scout-17B-16E-Instruct", False), ("XiaomiMiMo/MiMo-V2-Flash", False),
    ("deepseek-ai/DeepSeek-V4-Flash", False), ("/models/my-gemma", None),
])
def test_which_windows_the_flag_clears(model_id, cleared):
    assert window_cleared(model_id) is cleared


def test_the_flag_is_a_boolean_and_does_not_take_the_model():
    model, flags = parse_flags(["vllm", "serve", "--disable-sliding-window", "google/gemma-2-9b-it"])
    assert model == "google/gemma-2-9b-it" and flags["--disable-sliding-window"] is True
    assert parse_flags(["vllm", "serve", "m", "--no-disable-sliding-window"])[1]["--disable-sliding-window"] is False


@pytest.mark.parametrize(("model_id", "version"), [("google/gemma-2-9b-it", "0.20.0"),
                                                   ("microsoft/Phi-3.5-mini-instruct", "0.18.0")])
def test_on_both_roles_the_model_is_full_attention_for_the_hma_warning(tmp_path, capsys, model_id, version):
    _, out = check(tmp_path, capsys, *pair(model_id, version, p_args=OFF, d_args=OFF))
    assert "hma-implicitly-disabled" not in rules(out) and ONE_ROLE not in rules(out)
    _, out = check(tmp_path, capsys, *pair(model_id, version))   # control: the window is there without the flag
    assert "hma-implicitly-disabled" in rules(out, "warning")


def test_on_both_roles_no_hma_block_size_assert(tmp_path, capsys):
    # 0.24.0: HMA stays on under NIXL; with no sliding-window layer left nothing needs it, so different block sizes
    # are judged as for a full-attention model (no 'HMA does not support different remote block size yet')
    bs_p, bs_d = ["--block-size", "16"], ["--block-size", "32"]
    _, out = check(tmp_path, capsys, *pair("openai/gpt-oss-20b", "0.24.0", p_args=[*bs_p, *OFF], d_args=[*bs_d, *OFF]))
    assert "block-size-hma" not in rules(out)
    _, out = check(tmp_path, capsys, *pair("openai/gpt-oss-20b", "0.24.0", p_args=bs_p, d_args=bs_d))   # control
    assert "block-size-hma" in rules(out, "error")


def test_a_window_the_flag_keeps_is_still_judged(tmp_path, capsys):
    # Llama 4's chunked local attention reads attention_chunk_size, which the flag leaves alone
    _, with_flag = check(tmp_path, capsys, *pair("meta-llama/Llama-4-Scout-17B-16E-Instruct", "0.20.0",
                                                 p_args=OFF, d_args=OFF))
    _, without = check(tmp_path, capsys, *pair("meta-llama/Llama-4-Scout-17B-16E-Instruct", "0.20.0"))
    assert rules(with_flag) == rules(without)


@pytest.mark.parametrize(("model_id", "version", "p_args", "d_args"), [
    ("google/gemma-2-9b-it", "0.24.0", [], OFF),                    # HMA on: the KV cache groups differ
    ("google/gemma-3-1b-it", "0.20.0", OFF, []),                    # HMA off: same layout, different attention
    ("mistralai/Mistral-7B-Instruct-v0.1", "0.14.0", [], ["--disable_sliding_window"]),
])
def test_on_one_role_it_is_a_warning(tmp_path, capsys, model_id, version, p_args, d_args):
    code, out = check(tmp_path, capsys, *pair(model_id, version, p_args=p_args, d_args=d_args))
    assert ONE_ROLE in rules(out, "warning") and ONE_ROLE not in rules(out, "error")


@pytest.mark.parametrize(("model_id", "p_args", "d_args"), [
    ("meta-llama/Llama-3.1-8B-Instruct", [], OFF),                       # no window to drop
    ("meta-llama/Llama-4-Scout-17B-16E-Instruct", [], OFF),              # the chunked window stays
    ("google/gemma-2-9b-it", ["--no-disable-sliding-window"], []),       # false on one role is the default
])
def test_one_role_controls(tmp_path, capsys, model_id, p_args, d_args):
    _, out = check(tmp_path, capsys, *pair(model_id, "0.24.0", p_args=p_args, d_args=d_args))
    assert ONE_ROLE not in rules(out)


# --- 5. a prefill-only kernel split on 0.11.1 ------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["0.11.1", "0.11.2"])
def test_a_prefill_only_kernel_split_is_still_refused(tmp_path, capsys, version):
    fa = [{"name": "VLLM_ATTENTION_BACKEND", "value": "FLASH_ATTN"}]
    docs = pair("meta-llama/Llama-3.1-8B-Instruct", version, p_args=["--block-size", "128"],
                d_args=["--block-size", "64"])
    for doc in docs:
        doc["spec"]["template"]["spec"]["containers"][0]["env"] += fa
    code, out = check(tmp_path, capsys, *docs)
    assert code != 0 and "block-size-direction" in rules(out, "error")
    assert "block-size-kernel-split" not in rules(out)   # the decode's 64 runs as is


# --- 6. MultiConnector children without HMA -------------------------------------------------------------------------


def _multi(*children):
    return json.dumps({"kv_connector": "MultiConnector", "kv_role": "kv_both", "kv_connector_extra_config": {
        "connectors": [{"kv_connector": c, "kv_role": "kv_both"} for c in children]}})


NIXL_BOTH = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'


def _kv_pair(version, p_kv, d_kv, model="Qwen/Qwen3-8B", p_extra=(), d_extra=()):
    image = f"vllm/vllm-openai:v{version}"
    return [workload("m-prefill", "prefill", container([model, "--kv-transfer-config", p_kv, *p_extra], image=image)),
            workload("m-decode", "decode", container([model, "--kv-transfer-config", d_kv, *d_extra], image=image))]


@pytest.mark.parametrize(("version", "p_kv", "d_kv"), [
    ("0.22.0", _multi("NixlConnector", "LMCacheConnectorV1"), NIXL_BOTH),
    ("0.24.0", NIXL_BOTH, _multi("FlexKVConnectorV1", "NixlConnector")),
    ("0.32.0", _multi("NixlConnector", "LMCacheConnectorV1"), NIXL_BOTH),
])
def test_a_multiconnector_child_without_hma_against_plain_nixl_is_refused(tmp_path, capsys, version, p_kv, d_kv):
    code, out = check(tmp_path, capsys, *_kv_pair(version, p_kv, d_kv, model="meta-llama/Llama-3.1-8B-Instruct"))
    assert code != 0 and "hma-flag-mismatch" in rules(out, "error")


@pytest.mark.parametrize(("version", "p_kv", "d_kv", "p_extra", "d_extra"), [
    ("0.32.0", _multi("NixlConnector", "LMCacheConnectorV1"), _multi("NixlConnector", "LMCacheConnectorV1"), (), ()),
    ("0.21.0", _multi("NixlConnector", "LMCacheConnectorV1"), NIXL_BOTH, (), ()),     # HMA off under any connector
    ("0.24.0", _multi("NixlConnector", "OffloadingConnector"), NIXL_BOTH, (), ()),   # OffloadingConnector has HMA
    ("0.24.0", _multi("NixlConnector", "LMCacheConnectorV1"), NIXL_BOTH, (), ["--disable-hybrid-kv-cache-manager"]),
    ("0.24.0", _multi("NixlConnector", "MyOutOfTreeConnector"), NIXL_BOTH, (), ()),  # not claimed
    ("0.28.0", _multi("LMCacheMPConnector", "NixlConnector"), NIXL_BOTH, (), ()),     # LMCache's own class
])
def test_multiconnector_hma_controls(tmp_path, capsys, version, p_kv, d_kv, p_extra, d_extra):
    _, out = check(tmp_path, capsys, *_kv_pair(version, p_kv, d_kv, p_extra=p_extra, d_extra=d_extra))
    assert "hma-flag-mismatch" not in rules(out)


# --- 7. Dynamo's --disaggregation-mode adds no connector ------------------------------------------------------------


def _dynamo(image, p_kv, d_kv):
    kv = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
    cmd = ["python3", "-m", "dynamo.vllm"]
    p = container(["--model", "Qwen/Qwen3-8B", "--disaggregation-mode", "prefill",
                   *(["--kv-transfer-config", kv] if p_kv else [])], image=image, command=cmd)
    d = container(["--model", "Qwen/Qwen3-8B", "--disaggregation-mode", "decode",
                   *(["--kv-transfer-config", kv] if d_kv else [])], image=image, command=cmd)
    return READERS["DynamoGraphDeployment"](p, d)


@pytest.mark.parametrize("tag", ["1.3.0", "1.1.0"])
def test_a_dynamo_decode_without_kv_transfer_config_has_no_connector(tmp_path, capsys, tag):
    code, out = check(tmp_path, capsys, *_dynamo(f"nvcr.io/nvidia/ai-dynamo/vllm-runtime:{tag}", True, False))
    found = [f for r in out["results"] for f in r["findings"] if f["rule"] == "kv-connector-missing"]
    assert code != 0 and [f["severity"] for f in found] == ["error"] and found[0]["message"].startswith("decode")
    code, out = check(tmp_path, capsys, *_dynamo(f"nvcr.io/nvidia/ai-dynamo/vllm-runtime:{tag}", True, True))
    assert "kv-connector-missing" not in rules(out)   # control: explicit on both


def test_a_dynamo_runtime_before_1_0_keeps_its_implicit_nixl(tmp_path, capsys):
    _, out = check(tmp_path, capsys, *_dynamo("nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.7.1", False, False))
    assert "kv-connector-missing" not in rules(out)
