"""Known model configs without their context length (issue 9, fix H).

Set 126 found a silent pass: ``--max-model-len 200000`` on meta-llama/Llama-3.1-8B-Instruct without
``VLLM_ALLOW_LONG_MAX_MODEL_LEN`` passed, because the table of public config.json copies
(operator/pdd_operator/vllm/known_model_configs.json) listed that id beside its base without the context length
(``also``), although it is the very checkpoint of meta-llama/Meta-Llama-3.1-8B-Instruct, whose copy has it. vLLM
refuses a ``--max-model-len`` above the length it derives from config.json at config time on every release read
(``_get_and_verify_max_len``: vllm/config.py 0.9.0 lines 3150-3280, vllm/config/model.py 0.11.0 lines 1763-1915,
0.28.0 lines 2328-2466; :mod:`pdd_operator.vllm.max_model_len`).

Two kinds of fix, each with variants here:

1. data: ids of the very same checkpoint (meta-llama's renamed Llama-3.1 repositories) take all of its copy's fields
   (dev/model_configs/sources.json ``same``), and ids with a public copy of their own config.json take it
   (google/gemma-2-9b-it, meta-llama/Llama-3.2-1B-Instruct), or a copy saved from that very checkpoint shows its
   length (``context_for``: nvidia's FP8 copy of Llama-3.1-70B-Instruct): a too long ``--max-model-len`` is the
   rule's error;
2. visibility: for an id whose table copy still lacks the field (an instruct release listed beside its base, a
   quantized copy read as its base) max-model-len-exceeds-model warns that the length was not checked, naming the
   missing field: never silence, never an error, and not "not checked" for the whole pair (its other rules decide).
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.cli import main
from pdd_operator.vllm.known_models import known_config
from tests.unit.cli_check import check_text
from tests.unit.test_turn2_variants import check, container, rules, workload

MML = "max-model-len-exceeds-model"
KV_P = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_producer"})
KV_D = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_consumer"})


def _script(model: str, d_flags: str, d_env: str = "", version: str = "0.28.0") -> str:
    return (f"pip install vllm=={version}\n"
            f"CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 vllm serve {model} --port 8100 "
            f"--kv-transfer-config '{KV_P}' &\n"
            f"CUDA_VISIBLE_DEVICES=1 VLLM_NIXL_SIDE_CHANNEL_PORT=5601 {d_env} vllm serve {model} --port 8200 {d_flags} "
            f"--kv-transfer-config '{KV_D}' &\nwait\n")


def _run(tmp_path, capsys, text: str) -> tuple[int, dict]:
    return check_text(tmp_path, capsys, text, "launch.sh")


def _not_checked(out: dict) -> str:
    return " ".join(item["reason"] for item in out["notChecked"])


def _warned(out: dict) -> str:
    return " ".join(f["message"] for r in out["results"] for f in r["findings"]
                    if f["rule"] == MML and f["severity"] == "warning")


# --- 1. the data: the same checkpoint, and ids with their own public copy -------------------------------------------


@pytest.mark.parametrize(("model", "asked", "derived"), [
    ("meta-llama/Llama-3.1-8B-Instruct", 200000, 131072),   # set 126's entry: llama3 RoPE, unscaled
    ("meta-llama/Llama-3.1-8B", 262144, 131072),
    ("meta-llama/Llama-3.1-70B", 262144, 131072),
    ("meta-llama/Llama-3.1-405B", 262144, 131072),
    ("meta-llama/Llama-3.1-70B-Instruct", 262144, 131072),  # length from an FP8 copy saved from this checkpoint
    ("google/gemma-2-9b-it", 16384, 8192),                   # its own config.json: no RoPE scaling
    ("meta-llama/Llama-3.2-1B-Instruct", 262144, 131072),
])
@pytest.mark.parametrize("version", ["0.9.2", "0.11.0", "0.28.0"])
def test_a_known_id_past_its_context_is_refused(tmp_path, capsys, model, asked, derived, version):
    code, out = _run(tmp_path, capsys, _script(model, f"--max-model-len {asked}", version=version))
    assert code == 1 and MML in rules(out, "error"), out
    assert f"{derived} tokens" in json.dumps(out), out
    code, out = _run(tmp_path, capsys, _script(model, f"--max-model-len {derived}", version=version))
    assert MML not in rules(out) and MML not in _not_checked(out), out


def test_the_same_checkpoint_takes_every_field_and_says_so():
    renamed, source = known_config("meta-llama/Llama-3.1-8B-Instruct")
    original, _ = known_config("meta-llama/Meta-Llama-3.1-8B-Instruct")
    assert renamed == original and renamed["max_position_embeddings"] == 131072
    assert "the same checkpoint as meta-llama/Llama-3.1-8B-Instruct" in source and "renamed" in source
    gemma, source = known_config("google/gemma-2-9b-it")
    assert gemma["max_position_embeddings"] == 8192 and "kevinstephano/thunder_model_blocks" in source


def test_a_deployment_of_a_known_id_past_its_context(tmp_path, capsys):
    image = "vllm/vllm-openai:v0.24.0"
    docs = [workload("g-prefill", "prefill", container(["google/gemma-2-9b-it", "--max-model-len", "32768",
                                                         "--kv-transfer-config", KV_P], image=image)),
            workload("g-decode", "decode", container(["google/gemma-2-9b-it", "--kv-transfer-config", KV_D],
                                                     image=image))]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and MML in rules(out, "error"), out


# --- 2. visibility: a table copy still without the field warns that the length was not checked --------------------


@pytest.mark.parametrize(("model", "asked"), [
    ("meta-llama/Llama-3.1-405B-Instruct", 262144),        # listed beside Meta-Llama-3.1-405B: no copy of its own
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", 65536),        # beside Mixtral-8x7B-v0.1
    ("google/gemma-2-27b-it", 16384),                        # beside gemma-2-27b
    ("Qwen/Qwen2.5-72B-Instruct", 65536),                    # beside Qwen2.5-72B, whose 131072 it does not share
])
@pytest.mark.parametrize("version", ["0.11.0", "0.28.0"])
def test_a_known_id_without_its_context_warns_it_was_not_checked(tmp_path, capsys, model, asked, version):
    code, out = _run(tmp_path, capsys, _script(model, f"--max-model-len {asked}", version=version))
    assert MML not in rules(out, "error") and MML not in _not_checked(out), out   # never an error on a missing field
    said = _warned(out)
    assert "not checked" in said and "has no max_position_embeddings" in said and f"--max-model-len {asked}" in said, out
    assert code == 0, out


def test_a_copy_read_as_its_base_says_so_in_its_one_warning(tmp_path, capsys):
    # RedHatAI's FP8 copy is read as meta-llama/Llama-3.3-70B-Instruct less its context length: model-read-as-base
    # (already a warning for every such copy) names the length that was not checked; no second finding
    code, out = _run(tmp_path, capsys, _script("RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", "--max-model-len 262144"))
    said = [f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == "model-read-as-base"]
    assert code == 0 and MML not in rules(out) and MML not in _not_checked(out), out
    assert len(said) == 1 and "--max-model-len 262144 was not checked" in said[0], out
    code, out = _run(tmp_path, capsys, _script("RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", ""))
    assert "was not checked" not in json.dumps(out), out


def test_the_base_of_such_an_id_still_decides(tmp_path, capsys):
    # Mixtral-8x7B-v0.1's own copy has max_position_embeddings 32768: an error, not a note
    code, out = _run(tmp_path, capsys, _script("mistralai/Mixtral-8x7B-v0.1", "--max-model-len 65536"))
    assert code == 1 and MML in rules(out, "error") and not _warned(out), out


def test_nothing_to_say_without_a_length_the_long_env_or_an_override(tmp_path, capsys):
    model = "mistralai/Mixtral-8x7B-Instruct-v0.1"
    for flags, env in (("", ""), ("--max-model-len 65536", "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"),
                       ("--max-model-len 65536 --hf-overrides '{\"max_position_embeddings\": 65536}'", "")):
        code, out = _run(tmp_path, capsys, _script(model, flags, d_env=env))
        assert MML not in rules(out) and MML not in _not_checked(out), (flags, env, out)


def test_a_deployment_without_the_field_warns(tmp_path, capsys):
    image = "vllm/vllm-openai:v0.24.0"
    model = "mistralai/Mixtral-8x7B-Instruct-v0.1"
    docs = [workload("m-prefill", "prefill", container([model, "--kv-transfer-config", KV_P], image=image)),
            workload("m-decode", "decode", container([model, "--max-model-len", "65536", "--kv-transfer-config", KV_D],
                                                     image=image))]
    code, out = check(tmp_path, capsys, *docs)
    assert MML not in rules(out, "error") and "has no max_position_embeddings" in _warned(out), out


def test_a_given_config_json_is_not_the_tables_business(tmp_path, capsys):
    # a whole config.json the user passes decides alone (here it names the length): no note
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"architectures": ["MixtralForCausalLM"], "model_type": "mixtral",
                                  "num_key_value_heads": 8, "num_attention_heads": 32, "num_local_experts": 8,
                                  "max_position_embeddings": 32768}))
    path = tmp_path / "launch.sh"
    path.write_text(_script("mistralai/Mixtral-8x7B-Instruct-v0.1", "--max-model-len 65536"))
    code = main(["check", str(path), "-o", "json", "--model-config", str(config)])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and MML in rules(out, "error") and not _warned(out), out
