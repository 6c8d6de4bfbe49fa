"""The leftovers of issue 9 after sets 23-28 (session 27), each as a kind, with variants and controls.

1. Model facts without a config.json: a decode TP past the model's KV heads (set 26's Qwen2.5-3B, 2 KV heads, decode
   TP 4 on 0.9.1) was "not checked" because only a config.json given by the user said how many KV heads it has. The
   key config.json fields of widely used public checkpoints are now a generated table
   (:mod:`pdd_operator.vllm.known_models`, ``dev/gen_known_model_configs.py`` from the snapshots and sources in
   ``dev/model_configs``), read where no config.json is given; the user's config.json still wins and an id not in
   the table stays unknown.
2. Config-driven sliding windows: a config's ``sliding_window`` is read as vLLM reads it
   (:mod:`pdd_operator.vllm.sliding_window`): Qwen2-style ``use_sliding_window: false`` drops the window (vllm/config.py
   ``get_hf_config_sliding_window`` 0.9.0-0.10.0; transformers' ``Qwen2Config`` under ``get_sliding_window`` from
   0.10.1.1 to 0.34.0), Mistral-7B-v0.1's ``sliding_window: 4096`` windows every layer (``Attention`` falls back to
   ``cache_config.sliding_window``: vllm/attention/layer.py 0.10.1.1, model_executor/layers/attention/attention.py
   0.32.0), so the sliding-window / HMA rules judge them.
3. A vLLM command built in a shell variable and run by ``eval "$CMD"``: ``eval`` now reads its joined arguments as
   shell input (POSIX 2.14), so the command is read from the variable's literal value; a part of unknown value stays
   unknown and the rules reading the flags it may carry say "not checked" (``exec $CMD`` was read already).
4. Pod-IP placeholders for the side-channel host read alike in every reader (Deployment, LeaderWorkerSet, AIBrix
   StormService, RoleBasedGroup, KServe LLMInferenceService, Dynamo graph: one pair through each); a ``$(VAR)`` the
   kubelet leaves unexpanded (VAR undefined, or defined after it) or a ``${VAR}`` in an env value reaches vLLM as
   text, on which the listener's bind fails: refused on either role.
5. ``--dtype`` on one role only: the NIXL compatibility hash carries ``str(model_config.dtype)`` from 0.13.0
   (nixl/metadata.py ``compute_nixl_compatibility_hash`` 0.32.0/0.33.0); before it the handshake compares block bytes
   only, which 16-bit dtypes pass. With the checkpoint's ``torch_dtype`` from the table, ``auto`` on the other role is
   resolved (bfloat16 for MiMo-V2-Flash) and the pair judged: an error from 0.13.0, a warning before.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from dev.gen_known_model_configs import HERE, build, render
from pdd_operator.cli import main
from pdd_operator.vllm.known_models import _TABLE, known_config, known_ids
from pdd_operator.vllm.model_config import facts_from_config, resolve_model
from pdd_operator.vllm.sliding_window import has_sliding_window
from tests.unit.test_turn2_variants import check, container, rules, workload

KV_P = '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'
KV_D = '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'


def pair(model, version, p_tp=1, d_tp=1, p_args=(), d_args=(), name="m"):
    """A Deployment pair of ``model`` on vllm/vllm-openai:v``version`` with the given TPs and extra flags."""
    image = f"vllm/vllm-openai:v{version}"
    return [workload(f"{name}-prefill", "prefill", container(
                [model, "--tensor-parallel-size", str(p_tp), "--kv-transfer-config", KV_P, *p_args], image=image,
                gpus=p_tp)),
            workload(f"{name}-decode", "decode", container(
                [model, "--tensor-parallel-size", str(d_tp), "--kv-transfer-config", KV_D, *d_args], image=image,
                gpus=d_tp))]


def snapshot(model_id: str) -> dict:
    return json.loads((HERE / "snapshots" / (model_id.replace("/", "--", 1) + ".json")).read_text())


# --- 1. the generated table of key config.json fields -----------------------------------------------------------


def test_the_table_is_what_the_generator_makes_of_the_snapshots():
    sources = json.loads((HERE / "sources.json").read_text())
    assert _TABLE.read_text() == render(build(sources, HERE / "snapshots"))


def test_every_snapshot_names_its_public_copy():
    sources = json.loads((HERE / "sources.json").read_text())
    assert len(sources) >= 100
    for entry in sources:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", entry["repo"]) and entry["path"], entry
        assert re.fullmatch(r"[0-9a-f]{40}", entry["commit"]), entry
        assert (HERE / "snapshots" / entry["snapshot"]).is_file(), entry


@pytest.mark.parametrize(("model_id", "kv_heads", "dtype"), [
    # the families sets 2-28 use and the common open ones (Llama 3.x, Qwen2.5/3, Mistral/Mixtral, Gemma 2, DeepSeek
    # V3/R1, gpt-oss, GLM-4.x/5, Kimi-K2, MiMo)
    ("Qwen/Qwen2.5-3B-Instruct", 2, "bfloat16"),
    ("Qwen/Qwen2.5-7B-Instruct", 4, "bfloat16"),
    ("Qwen/Qwen3-0.6B", 8, "bfloat16"),
    ("Qwen/Qwen3-32B-FP8", 8, "bfloat16"),
    ("Qwen/Qwen3-30B-A3B", 4, "bfloat16"),
    ("Qwen/Qwen3-Next-80B-A3B-Instruct", 2, "bfloat16"),
    ("meta-llama/Llama-3.1-8B-Instruct", 8, "bfloat16"),
    ("meta-llama/Llama-3.3-70B-Instruct", 8, "bfloat16"),
    ("meta-llama/Llama-3.2-3B-Instruct", 8, "bfloat16"),
    ("meta-llama/Llama-2-7b-chat-hf", 32, "float16"),
    ("mistralai/Mistral-7B-Instruct-v0.1", 8, "bfloat16"),
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", 8, "bfloat16"),
    ("google/gemma-2-9b-it", 8, "bfloat16"),
    ("openai/gpt-oss-120b", 8, None),                # the copy names no torch_dtype: not taken as float32
    ("XiaomiMiMo/MiMo-V2-Flash", 4, "bfloat16"),
    ("zai-org/GLM-4.7-Flash", 20, "bfloat16"),
])
def test_known_checkpoints_give_kv_heads_and_dtype(model_id, kv_heads, dtype):
    config, source = known_config(model_id.upper())   # the Hub matches ids case-insensitively
    facts = facts_from_config(config)
    assert facts.num_kv_heads == kv_heads and source.startswith("config.json of ")
    assert resolve_model(SimpleNamespace(name=model_id, architecture=None, ssm_kind=None, hf_architecture=None,
                                         num_kv_heads=None, mamba_n_groups=None)).checkpoint_dtype == dtype


@pytest.mark.parametrize("model_id", ["deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-R1-0528",
                                      "moonshotai/Kimi-K2-Instruct", "zai-org/GLM-4.7-Flash"])
def test_known_mla_checkpoints_carry_their_latent(model_id):
    config, _ = known_config(model_id)
    assert config["kv_lora_rank"] == 512 and facts_from_config(config).architecture == "mla"


@pytest.mark.parametrize("config", [
    {"architectures": ["KimiLinearForCausalLM"], "kv_lora_rank": 512, "linear_attn_config": {"kda_layers": [1]}},
    None,   # Kimi-K3's snapshot: KDA linear attention beside MLA full-attention layers
])
def test_a_hybrid_whose_full_attention_is_mla_stays_hybrid(config):
    # vLLM's registry (IsHybrid, kda/GDN state) and the hand table call these hybrid; the MLA latent of their
    # full-attention layers does not make them plain MLA (which would skip the hybrid SSM rules)
    facts = facts_from_config(config or known_config("moonshotai/Kimi-K3")[0])
    assert (facts.architecture, facts.ssm_kind) == ("hybrid-ssm", "GDN")


def test_an_instruct_id_takes_its_base_snapshot_but_not_its_context_length():
    base, _ = known_config("Qwen/Qwen2.5-72B")
    instruct, source = known_config("Qwen/Qwen2.5-72B-Instruct")
    assert base["max_position_embeddings"] == 131072 and "max_position_embeddings" not in instruct
    assert {k: v for k, v in base.items() if k != "max_position_embeddings"} == instruct
    assert "the same checkpoint shape as Qwen/Qwen2.5-72B-Instruct" in source
    # with a public copy of its own config.json, the instruct id takes its own length (32768), never the base's
    base, _ = known_config("Qwen/Qwen2.5-7B")
    instruct, source = known_config("Qwen/Qwen2.5-7B-Instruct")
    assert base["max_position_embeddings"] == 131072 and instruct["max_position_embeddings"] == 32768
    assert {k: v for k, v in base.items() if k != "max_position_embeddings"} == \
        {k: v for k, v in instruct.items() if k != "max_position_embeddings"}
    assert "its context length from its own config.json" in source


def test_a_hub_cache_snapshot_path_is_its_repository():
    # Dynamo's worker replaces a Hub id by its cache snapshot (hf_cache.py); the files there are that repository's
    path = "/root/.cache/huggingface/hub/models--Qwen--Qwen2.5-3B-Instruct/snapshots/aa8e72537993ba99e69dfaafa59ed015b17504d1"
    assert known_config(path)[0]["num_key_value_heads"] == 2


@pytest.mark.parametrize("name", ["/models/Qwen2.5-3B-Instruct", "Qwen/Qwen2.5-3B-Instruct-finetuned",
                                  "my-org/Qwen2.5-3B-Instruct", ""])
def test_other_names_are_not_guessed(name):
    assert known_config(name) is None


def test_the_ids_sets_2_to_28_use_most_are_known():
    # every id of the sets' inputs that the table holds is checked through it; these are the ones it must hold
    must = {"Qwen/Qwen3-0.6B", "Qwen/Qwen3-8B", "Qwen/Qwen3-32B", "meta-llama/Llama-3.1-8B-Instruct",
            "openai/gpt-oss-120b", "openai/gpt-oss-20b", "deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3",
            "moonshotai/Kimi-K2.5", "Qwen/Qwen2.5-3B-Instruct", "Qwen/Qwen2.5-7B-Instruct",
            "XiaomiMiMo/MiMo-V2-Flash", "Qwen/Qwen3.5-122B-A10B", "zai-org/GLM-5.2-FP8",
            "meta-llama/Llama-3.3-70B-Instruct", "deepseek-ai/DeepSeek-V4-Flash"}
    assert must <= set(known_ids())


def test_decode_tp_past_the_kv_heads_of_a_known_checkpoint_is_refused(tmp_path, capsys):
    # set 26's vllm#19691 kind: Qwen2.5-3B-Instruct (2 KV heads), prefill TP 1, decode TP 4 on 0.9.1 (v1/nixl_connector.py
    # add_remote_agent asserts block_len == self.block_len * tp_ratio unless prefill TP >= the KV heads)
    code, out = check(tmp_path, capsys, *pair("Qwen/Qwen2.5-3B-Instruct", "0.9.1", 1, 4))
    assert code != 0 and "hetero-tp-kv-replicated" in rules(out, "error")
    assert "tp-kv-heads-unknown" not in rules(out)


def test_decode_tp_past_the_kv_heads_of_another_checkpoint_and_release(tmp_path, capsys):
    # Qwen2.5-7B-Instruct (4 KV heads), decode TP 8 on 0.20.0 (nixl/worker.py: assert unless prefill TP > KV heads)
    code, out = check(tmp_path, capsys, *pair("Qwen/Qwen2.5-7B-Instruct", "0.20.0", 1, 8))
    assert code != 0 and "hetero-tp-kv-replicated" in rules(out, "error")


def test_a_pddeployment_of_a_known_checkpoint_gets_its_kv_heads(tmp_path, capsys):
    doc = {"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment", "metadata": {"name": "qwen"},
           "spec": {"model": {"name": "Qwen/Qwen2.5-3B-Instruct"},
                    "engine": {"image": "vllm/vllm-openai:v0.11.1"},
                    "prefill": {"replicas": 1, "tensorParallelSize": 1},
                    "decode": {"replicas": 1, "tensorParallelSize": 4}}}
    code, out = check(tmp_path, capsys, doc)
    assert code != 0 and "hetero-tp-kv-replicated" in rules(out, "error")


def test_controls_within_the_kv_heads_unknown_names_and_the_users_config(tmp_path, capsys):
    _, out = check(tmp_path, capsys, *pair("Qwen/Qwen2.5-3B-Instruct", "0.9.1", 1, 2))
    assert not rules(out, "error") & {"hetero-tp-kv-replicated", "tp-exceeds-kv-heads"}
    assert "tp-kv-heads-unknown" not in rules(out)
    _, out = check(tmp_path, capsys, *pair("/models/qwen2.5-3b", "0.9.1", 1, 4))
    assert "tp-kv-heads-unknown" in rules(out, "warning") and "hetero-tp-kv-replicated" not in rules(out)
    # the user's config.json wins over the table (here: a fine-tune published under the same id with 16 KV heads)
    given = tmp_path / "config.json"
    given.write_text(json.dumps({**snapshot("Qwen/Qwen2.5-3B"), "num_key_value_heads": 16}))
    _, out = check(tmp_path, capsys, *pair("Qwen/Qwen2.5-3B-Instruct", "0.9.1", 1, 4),
                   extra=("--model-config", str(given)))
    assert "hetero-tp-kv-replicated" not in rules(out)


# --- 2. sliding windows as vLLM reads them --------------------------------------------------------------------------


@pytest.mark.parametrize(("config", "sliding"), [
    ({"model_type": "qwen2", "sliding_window": 32768, "use_sliding_window": False}, False),   # Qwen2.5
    ({"model_type": "qwen2", "sliding_window": 4096}, False),              # the class default use_sliding_window=False
    ({"model_type": "qwen3_moe", "sliding_window": 4096}, False),
    ({"model_type": "qwen2", "sliding_window": 4096, "use_sliding_window": True}, True),
    ({"model_type": "mistral", "sliding_window": 4096}, True),              # Mistral-7B-v0.1
    ({"model_type": "mistral", "sliding_window": None}, False),             # Mistral-7B-v0.2/v0.3
    ({"model_type": "mistral"}, True),                                      # MistralConfig's default 4096
    ({"model_type": "ministral"}, True),
    ({"model_type": "mixtral"}, False),                                     # MixtralConfig's default None
    ({"model_type": "phi3", "sliding_window": 2047}, True),                 # Phi-3-mini-4k
    ({"model_type": "gpt_oss", "layer_types": ["sliding_attention", "full_attention"]}, True),
    ({"model_type": "llama4_text", "attention_chunk_size": 8192}, True),
    ({"model_type": "mimo_v2_flash", "sliding_window_size": 128}, True),
    ({"model_type": "llama"}, False),
])
def test_has_sliding_window(config, sliding):
    assert has_sliding_window(config) is sliding


@pytest.mark.parametrize(("model_id", "sliding"), [
    ("Qwen/Qwen2.5-7B", False), ("Qwen/Qwen2.5-3B", False), ("Qwen/Qwen3-8B", False),
    ("mistralai/Mistral-7B-Instruct-v0.1", True), ("google/gemma-2-9b", True), ("openai/gpt-oss-20b", True),
    ("meta-llama/Meta-Llama-3.1-8B", False),
])
def test_real_configs_read_as_vllm_reads_them(model_id, sliding):
    assert facts_from_config(snapshot(model_id)).sliding_window is sliding


def test_a_qwen25_config_with_its_disabled_window_is_not_judged_as_sliding(tmp_path, capsys):
    # 0.20.0 turns HMA off under a connector unless both roles ask; only sliding-window models lose by it
    given = tmp_path / "config.json"
    given.write_text(json.dumps(snapshot("Qwen/Qwen2.5-7B")))
    _, out = check(tmp_path, capsys, *pair("Qwen/Qwen2.5-7B", "0.20.0"), extra=("--model-config", str(given)))
    assert "hma-implicitly-disabled" not in rules(out)


def test_mistral_v01_is_judged_as_sliding_without_a_config(tmp_path, capsys):
    _, out = check(tmp_path, capsys, *pair("mistralai/Mistral-7B-Instruct-v0.1", "0.20.0"))
    assert "hma-implicitly-disabled" in rules(out, "warning")
    # control: the same model with HMA kept on on both roles
    flag = ("--no-disable-hybrid-kv-cache-manager",)
    _, out = check(tmp_path, capsys, *pair("mistralai/Mistral-7B-Instruct-v0.1", "0.20.0", p_args=flag, d_args=flag))
    assert "hma-implicitly-disabled" not in rules(out)


# --- 5. --dtype on one role only, with the checkpoint's dtype known --------------------------------------------------


def test_mimo_float16_decode_against_its_bfloat16_checkpoint_is_refused_from_the_hash(tmp_path, capsys):
    # set 25's recipes-mimo-v2-flash-pd-decode-dtype-fp16-v0330 kind
    code, out = check(tmp_path, capsys, *pair("XiaomiMiMo/MiMo-V2-Flash", "0.33.0", 8, 8, d_args=("--dtype", "float16")))
    assert code != 0 and "dtype-mismatch" in rules(out, "error")


def test_control_float16_against_auto_before_the_hash_stays_a_warning(tmp_path, capsys):
    # 0.11.1: no compatibility hash; bfloat16 and float16 blocks have the same bytes, so the block-length assert passes
    _, out = check(tmp_path, capsys, *pair("Qwen/Qwen2.5-7B-Instruct", "0.11.1", p_args=("--dtype", "half")))
    assert "dtype-mismatch" in rules(out, "warning") and "dtype-mismatch" not in rules(out, "error")


def test_half_against_auto_on_another_checkpoint_and_release(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *pair("Qwen/Qwen3-30B-A3B", "0.26.0", 4, 4,
                                              p_args=("--dtype", "half")))
    assert code != 0 and "dtype-mismatch" in rules(out, "error")


def test_dtype_controls_float16_checkpoint_and_the_users_config(tmp_path, capsys):
    # a float16 checkpoint: auto is float16, the same as the decode's explicit float16
    _, out = check(tmp_path, capsys, *pair("meta-llama/Llama-2-7b-chat-hf", "0.26.0", d_args=("--dtype", "float16")))
    assert "dtype-mismatch" not in rules(out)
    # the user's config.json (float16) wins over the table's bfloat16
    given = tmp_path / "config.json"
    given.write_text(json.dumps({**snapshot("XiaomiMiMo/MiMo-V2-Flash"), "torch_dtype": "float16"}))
    _, out = check(tmp_path, capsys, *pair("XiaomiMiMo/MiMo-V2-Flash", "0.33.0", 8, 8, d_args=("--dtype", "float16")),
                   extra=("--model-config", str(given)))
    assert "dtype-mismatch" not in rules(out)


def test_the_inputs_of_sets_25_and_26_now_get_their_verdicts(capsys):
    data = Path(__file__).parent / "data"
    for path, rule in ((data / "public_reports_25/inputs/recipes-mimo-v2-flash-pd-decode-dtype-fp16-v0330.yaml",
                        "dtype-mismatch"),
                       (data / "public_reports_26/inputs/vllm19691-qwen25-3b-p-tp1-d-tp4-v0091.yaml",
                        "hetero-tp-kv-replicated")):
        if not path.exists():
            path = next((data / path.parts[-3]).glob(f"inputs/**/{path.name}"))
        main(["check", str(path), "-o", "json"])
        out = json.loads(capsys.readouterr().out)
        assert rule in rules(out, "error"), (path.name, yaml.safe_dump(sorted(rules(out))))


# --- 3. a vLLM command built in a shell variable and run by eval / exec ------------------------------------------
# POSIX Shell Command Language 2.14 "eval": the arguments joined by spaces are read and run as shell input, so the
# quotes inside the variable's value apply (``CMD="vllm serve m --kv-transfer-config '{...}'"; eval "$CMD"``); an
# unquoted ``exec $CMD`` splits the value into words (2.6.5) and keeps its quotes literally, as bash does.

from pdd_operator.vllm.script import launches, opaque_command  # noqa: E402

FP8 = "--kv-cache-dtype fp8"
KV_D_IN_DQ = KV_D.replace('"', '\\"')   # the decode's connector JSON inside a double-quoted shell string


@pytest.mark.parametrize(("script", "argv"), [
    ('CMD="vllm serve Qwen/Qwen3-8B --tensor-parallel-size 2"\neval "$CMD"',
     ("vllm", "serve", "Qwen/Qwen3-8B", "--tensor-parallel-size", "2")),
    ("CMD=\"vllm serve m --kv-transfer-config '{\\\"kv_connector\\\":\\\"NixlConnector\\\"}'\"\neval \"$CMD\" --port 8001",
     ("vllm", "serve", "m", "--kv-transfer-config", '{"kv_connector":"NixlConnector"}', "--port", "8001")),
    ('eval "python3 -m vllm.entrypoints.openai.api_server --model m"',
     ("vllm.entrypoints.openai.api_server", "--model", "m")),
    ('BASE="vllm serve m"\nVLLM_CMD="$BASE --block-size 32"\nexec $VLLM_CMD',
     ("vllm", "serve", "m", "--block-size", "32")),
    ('run() { eval "$1"; }\nrun "vllm serve m --max-model-len 4096"',
     ("vllm", "serve", "m", "--max-model-len", "4096")),
])
def test_eval_and_exec_of_a_command_in_a_variable_are_read(script, argv):
    assert [launch.argv for launch in launches(script)] == [argv]


def test_an_unknown_part_of_an_evaluated_command_stays_unknown():
    (launch,) = launches('CMD="vllm serve m --block-size 16 $EXTRA_ARGS"\neval "$CMD"')
    assert launch.argv[:5] == ("vllm", "serve", "m", "--block-size", "16") and launch.argv[5] == "<unknown:EXTRA_ARGS>"
    # the command itself unknown: kept as such (opaque_command), so the container is "not checked", never passed
    (opaque,) = launches('eval "$VLLM_CMD"')
    assert opaque_command(opaque) == "VLLM_CMD"
    assert [opaque_command(x) for x in launches("exec $CMD --port 8000")] == ["CMD"]
    assert [opaque_command(x) for x in launches("vllm serve m")] == [None]


def _shell_pair(tmp_path, capsys, d_script):
    image = "vllm/vllm-openai:v0.26.0"
    p = container(["Qwen/Qwen3-8B", "--kv-transfer-config", KV_P], image=image)
    d = container([], image=image, command=["sh", "-c", d_script])
    return check(tmp_path, capsys, workload("e-prefill", "prefill", p), workload("e-decode", "decode", d))


def test_an_evaluated_decode_command_is_judged(tmp_path, capsys):
    # fp8 KV on the decode only, hashed as the raw string from 0.13.0 (nixl/metadata.py): refused
    d = f"CMD=\"vllm serve Qwen/Qwen3-8B {FP8} --kv-transfer-config '{KV_D_IN_DQ}'\"\neval \"$CMD\""
    code, out = _shell_pair(tmp_path, capsys, d)
    assert code == 1 and "kv-cache-dtype-mismatch" in rules(out, "error")
    # control: the same command without fp8 pairs
    code, out = _shell_pair(tmp_path, capsys, d.replace(FP8 + " ", ""))
    assert code == 0 and "kv-cache-dtype-mismatch" not in rules(out)


def test_an_evaluated_command_with_an_unread_part_is_not_checked(tmp_path, capsys):
    d = f"CMD=\"vllm serve Qwen/Qwen3-8B $EXTRA --kv-transfer-config '{KV_D_IN_DQ}'\"\neval \"$CMD\""
    code, out = _shell_pair(tmp_path, capsys, d)
    assert code == 3 and not rules(out, "error") and "EXTRA" in json.dumps(out["notChecked"])
    code, out = _shell_pair(tmp_path, capsys, 'eval "$VLLM_CMD"')
    assert code == 3 and not out["results"] and "$VLLM_CMD" in json.dumps(out["notChecked"])


@pytest.mark.parametrize("script", ['exec $VLLM_CMD', 'eval "$VLLM_CMD"', '$LAUNCH --port 8000'])
def test_both_roles_running_a_command_held_in_an_unread_variable_are_not_checked(tmp_path, capsys, script):
    # the command comes from a ConfigMap: never "nothing to check" (exit 4), never a pass
    env = [{"name": "VLLM_CMD", "valueFrom": {"configMapKeyRef": {"name": "cmds", "key": "cmd"}}}]
    docs = [workload(f"v-{role}", role, container([], command=["sh", "-c", script], env=env))
            for role in ("prefill", "decode")]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 3 and len(out["notChecked"]) == 2 and not out["results"]


# --- 4. pod-IP placeholders for the side-channel host, through every reader ----------------------------------------
# vLLM's NIXL worker binds and advertises VLLM_NIXL_SIDE_CHANNEL_HOST (envs.py; localhost by default), so only an
# address the peer can dial works across pods. The pod IP arrives as the downward API (status.podIP), as a Kubernetes
# dependent variable ``$(POD_IP)`` of such a variable (the kubelet expands ``$(VAR)`` from the container's earlier
# env), or through a script's ``${POD_IP}``; each orchestrator's reader must take each of them as the pod IP, and a
# loopback host as loopback.

_POD_IP_VAR = {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
_HOSTS = {
    "downward API": ([{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                     False),
    "$(POD_IP)": ([_POD_IP_VAR, {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "value": "$(POD_IP)"}], False),
    "${POD_IP} in a script": ([_POD_IP_VAR], True),
    "127.0.0.1": ([{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "value": "127.0.0.1"}], False),
    # the kubelet leaves a reference to a variable not defined before it as written; no shell expands ${...} here
    "$(POD_IP) undefined": ([{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "value": "$(POD_IP)"}], False),
    "$(POD_IP) defined after": ([{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "value": "$(POD_IP)"}, _POD_IP_VAR], False),
    "${POD_IP} in an env value": ([_POD_IP_VAR, {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "value": "${POD_IP}"}], False),
}
_REFUSED = {"127.0.0.1", "$(POD_IP) undefined", "$(POD_IP) defined after", "${POD_IP} in an env value"}


def _engine(kv: str, host: str) -> dict:
    env, scripted = _HOSTS[host]
    base = {"name": "vllm", "image": "vllm/vllm-openai:v0.26.0", "env": env,
            "resources": {"limits": {"nvidia.com/gpu": "1", "rdma/ib": "1"}},
            "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}}}
    if scripted:
        return {**base, "command": ["sh", "-c", "export VLLM_NIXL_SIDE_CHANNEL_HOST=${POD_IP}\n"
                                    f"exec vllm serve Qwen/Qwen3-8B --kv-transfer-config '{kv}'"]}
    return {**base, "command": ["vllm", "serve"], "args": ["Qwen/Qwen3-8B", "--kv-transfer-config", kv]}


def _lws(p, d):
    def one(role, c):
        labels = {"app": "f", "role": role}
        return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                "metadata": {"name": f"f-{role}", "labels": labels}, "spec": {"leaderWorkerTemplate": {
                    "size": 1, "workerTemplate": {"metadata": {"labels": labels}, "spec": {"containers": [c]}}}}}
    return [one("prefill", p), one("decode", d)]


def _roles(p, d):
    return [{"name": r, "replicas": 1, "template": {"metadata": {"labels": {"app": "s"}}, "spec": {"containers": [c]}}}
            for r, c in (("prefill", p), ("decode", d))]


def _dgd_service(role, c):
    main = {k: v for k, v in c.items() if k not in ("resources", "name")}
    return {"componentType": "worker", "subComponentType": role, "replicas": 1, "resources": {"limits": {"gpu": "1"}},
            "extraPodSpec": {"mainContainer": main}}


READERS = {
    "Deployment": lambda p, d: [workload("f-prefill", "prefill", p), workload("f-decode", "decode", d)],
    "LeaderWorkerSet": _lws,
    "AIBrix StormService": lambda p, d: [{
        "apiVersion": "orchestration.aibrix.ai/v1alpha1", "kind": "StormService", "metadata": {"name": "s"},
        "spec": {"replicas": 1, "template": {"spec": {"roles": _roles(p, d)}}}}],
    "RoleBasedGroup": lambda p, d: [{
        "apiVersion": "workloads.x-k8s.io/v1alpha1", "kind": "RoleBasedGroup", "metadata": {"name": "r"},
        "spec": {"roles": _roles(p, d)}}],
    "KServe LLMInferenceService": lambda p, d: [{
        "apiVersion": "serving.kserve.io/v1alpha1", "kind": "LLMInferenceService", "metadata": {"name": "q"},
        "spec": {"template": {"containers": [{**d, "name": "main"}]},
                 "prefill": {"template": {"containers": [{**p, "name": "main"}]}}}}],
    "DynamoGraphDeployment": lambda p, d: [{
        "apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
        "spec": {"services": {"VllmPrefillWorker": _dgd_service("prefill", p),
                              "VllmDecodeWorker": _dgd_service("decode", d)}}}],
}


@pytest.mark.parametrize("host", list(_HOSTS))
@pytest.mark.parametrize("reader", list(READERS))
def test_the_side_channel_host_reads_alike_in_every_reader(tmp_path, capsys, reader, host):
    code, out = check(tmp_path, capsys, *READERS[reader](_engine(KV_P, host), _engine(KV_D, host)))
    assert len(out["results"]) == 1 and not out["notChecked"], (reader, host)
    refused = "side-channel-host-not-routable" in rules(out, "error")
    assert refused == (host in _REFUSED) and code == (1 if refused else 0), (reader, host, rules(out))


def test_an_unexpanded_host_fails_on_the_decode_too(tmp_path, capsys):
    # in pull mode the decode's host is never dialed, but its engine binds its own listener on it all the same
    p, d = _engine(KV_P, "downward API"), _engine(KV_D, "$(POD_IP) undefined")
    code, out = check(tmp_path, capsys, *READERS["Deployment"](p, d))
    finding = next(f for r in out["results"] for f in r["findings"] if f["rule"] == "side-channel-host-not-routable")
    assert code == 1 and finding["message"].startswith("decode: ") and "'$(POD_IP)'" in finding["message"]
    assert "status.podIP" in finding["fix"]
