"""Fix M (issue 9): P/D pairs on vLLM releases before 0.9.0 (the V0 disaggregated prefill, sets 130 and 132).

A pair whose roles both name the same V0 connector read for the release (``PyNcclConnector`` / ``MooncakeConnector``
on 0.7.0-0.8.x, ``MooncakeStoreConnector`` on 0.8.5) under that release's V0 engine (0.7.x unless ``VLLM_USE_V1=1``,
0.8.x with ``VLLM_USE_V1=0``), with the same model, dtype, block size and TP, gets a verdict from the engine-alone rules
read back to the release (``v0-pynccl-kv-rank``, ``v0-mooncake-config-path``, the ``any_release`` ones): ok where none
fails, the rules not read for it named in the ``vllm-version-unverified`` warning. Other old pairs (a connector or
release not read, a TP mismatch, 0.6.x) stay not checked.
"""

from __future__ import annotations

import json

import pytest

from tests.unit.cli_check import check_text, rules
from tests.unit.test_turn2_variants import check, workload

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def _kv(connector: str, role: str, rank: int | None, size: int | None = 2) -> str:
    kv: dict = {"kv_connector": connector, "kv_role": role}
    if rank is not None:
        kv["kv_rank"] = rank
    if size is not None:
        kv["kv_parallel_size"] = size
    return json.dumps(kv, separators=(",", ":"))


def _script(pin: str, connector: str = "PyNcclConnector", ranks: tuple = (0, 1), sizes: tuple = (2, 2),
            env: str = "", tps: tuple[int, int] = (1, 1), roles: tuple[str, str] = ("kv_producer", "kv_consumer"),
            model: str = MODEL, length: str = "--max-model-len 4096") -> str:
    lines = ["#!/bin/bash", f"pip install vllm=={pin}"]
    for gpu, port, role, rank, size, tp in zip((0, 1), (8100, 8200), roles, ranks, sizes, tps, strict=True):
        gpus = ",".join(str(gpu * 4 + i) for i in range(tp))
        lines.append(f"{env}CUDA_VISIBLE_DEVICES={gpus} vllm serve {model} --port {port} {length} "
                     f"--tensor-parallel-size {tp} --kv-transfer-config '{_kv(connector, role, rank, size)}' &")
    return "\n".join(lines) + "\nwait\n"


def _warning(out: dict) -> str:
    return json.dumps([f for r in out.get("results", []) for f in r["findings"]
                       if f["rule"] == "vllm-version-unverified"])


@pytest.mark.parametrize(("pin", "env"), [("0.7.0", ""), ("0.7.3", ""), ("0.8.5", "VLLM_USE_V1=0 "),
                                          ("0.8.0", "VLLM_USE_V1=0 ")])
def test_a_valid_pynccl_pair_of_an_older_release_is_ok(tmp_path, capsys, pin, env):
    code, out = check_text(tmp_path, capsys, _script(pin, env=env))
    assert code == 0 and not rules(out, "error"), out
    warning = _warning(out)
    # what was not read for the release is named, never silence: the flag tables among them
    assert f"vLLM {pin}" in warning and "cli-flag-unknown" in warning and "kv-connector-v0-only" in warning, out


@pytest.mark.parametrize(("pin", "env", "ranks", "sizes"), [
    ("0.7.0", "", (1, 1), (2, 2)),                    # neither is rank 0: nobody listens
    ("0.7.3", "", (0, 0), (2, 2)),                    # both rank 0
    ("0.7.3", "", (0, 2), (2, 2)),                    # kv_rank out of range: rank 1 never joins
    ("0.8.5", "VLLM_USE_V1=0 ", (0, 1), (3, 3)),     # kv_parallel_size 3 for one producer and one consumer
    ("0.8.0", "VLLM_USE_V1=0 ", (0, 1), (2, 3)),     # the decode's group awaits a third rank
])
def test_a_broken_pynccl_group_of_an_older_release_is_refused(tmp_path, capsys, pin, env, ranks, sizes):
    code, out = check_text(tmp_path, capsys, _script(pin, env=env, ranks=ranks, sizes=sizes))
    assert code == 1 and rules(out, "error") == {"v0-pynccl-kv-rank"}, out


def test_missing_ranks_are_refused_on_the_releases_read_after_0_9_0_too(tmp_path, capsys):
    code, out = check_text(tmp_path, capsys, _script("0.9.2", env="VLLM_USE_V1=0 ", ranks=(0, 2)))
    assert code == 1 and "v0-pynccl-kv-rank" in rules(out, "error"), out


def test_a_pair_of_two_kv_producers_is_no_pd_pair(tmp_path, capsys):
    # two kv_producer engines: no decode engine to pair with, so not checked (exit 3), never ok
    code, out = check_text(tmp_path, capsys, _script("0.7.3", roles=("kv_producer", "kv_producer")))
    assert code == 3 and not rules(out, "error") and not out["results"], out


@pytest.mark.parametrize(("pin", "connector", "env", "code_", "errors"), [
    # the V0 SimpleConnector's Mooncake pipe: ValueError without MOONCAKE_CONFIG_PATH (simple_connector.py 0.7.0 47-55)
    ("0.7.3", "MooncakeConnector", "", 1, {"v0-mooncake-config-path"}),
    ("0.7.3", "MooncakeConnector", "MOONCAKE_CONFIG_PATH=/m.json ", 0, set()),
    ("0.8.5", "MooncakeStoreConnector", "MOONCAKE_CONFIG_PATH=/m.json VLLM_USE_V1=0 ", 0, set()),
    ("0.8.5", "MooncakeStoreConnector", "VLLM_USE_V1=0 ", 1, {"v0-mooncake-config-path"}),
    # 0.8.0 registers no MooncakeStoreConnector (factory.py 0.8.0): not read, not checked
    ("0.8.0", "MooncakeStoreConnector", "MOONCAKE_CONFIG_PATH=/m.json VLLM_USE_V1=0 ", 3, set()),
])
def test_mooncake_pairs_of_older_releases(tmp_path, capsys, pin, connector, env, code_, errors):
    code, out = check_text(tmp_path, capsys, _script(pin, connector, env=env, ranks=(None, None), sizes=(None, None)))
    assert code == code_ and rules(out, "error") == errors, out


@pytest.mark.parametrize(("pin", "kw"), [
    ("0.8.5", {}),                                         # 0.8.x without VLLM_USE_V1=0: which engine runs is not read
    ("0.7.3", {"tps": (1, 2)}),                            # TP differs between P and D: SimpleConnector's shapes unread
    ("0.7.3", {"env": "VLLM_USE_V1=1 "}),                  # the V1 engine of 0.7.x
    ("0.6.4.post1", {}),                                   # 0.6.x's connector code not read
    ("0.8.0", {"connector": "LMCacheConnector"}),          # LMCacheConnector not read
    # chunked prefill may be on (V0 default above 32768, arg_utils.py 0.7.0 lines 1083-1106), which SimpleConnector
    # does not follow: the model's own length (131072) without --max-model-len, a long one, or the flag itself
    ("0.7.3", {"length": ""}),
    ("0.7.0", {"length": "--max-model-len 35000"}),
    ("0.8.5", {"env": "VLLM_USE_V1=0 ", "length": "--max-model-len 4096 --enable-chunked-prefill"}),
])
def test_old_pairs_not_read_stay_not_checked(tmp_path, capsys, pin, kw):
    code, out = check_text(tmp_path, capsys, _script(pin, **kw))
    assert code == 3 and not rules(out, "error"), out


@pytest.mark.parametrize("length", ["--enable-chunked-prefill=False", "--no-enable-chunked-prefill --max-model-len 65536",
                                    "--max-model-len 32768"])
def test_chunked_prefill_off_is_judged(tmp_path, capsys, length):
    code, out = check_text(tmp_path, capsys, _script("0.7.3", length=length))
    assert code == 0 and not rules(out, "error"), out


def test_chunked_prefill_names_itself_in_the_reason(tmp_path, capsys):
    code, out = check_text(tmp_path, capsys, _script("0.7.3", length=""))
    assert code == 3 and "chunked prefill may be on" in json.dumps(out["notChecked"]), out


def test_model_rules_that_hold_on_every_release_judge_an_older_pair(tmp_path, capsys):
    # Llama-3.1-8B's 32 heads / 8 KV heads at TP 3 on both: tp-heads-indivisible (any_release)
    code, out = check_text(tmp_path, capsys, _script("0.7.3", tps=(3, 3)))
    assert code == 1 and "tp-heads-indivisible" in rules(out, "error"), out


def _deployment(image: str, ranks: tuple, env: dict | None = None) -> list[dict]:
    docs = []
    for (role, kv_role), rank in zip((("prefill", "kv_producer"), ("decode", "kv_consumer")), ranks, strict=True):
        c = {"name": "vllm", "image": image, "command": ["vllm", "serve"],
             "args": [MODEL, "--max-model-len", "8192", "--kv-transfer-config", _kv("PyNcclConnector", kv_role, rank)],
             "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
             "resources": {"limits": {"nvidia.com/gpu": "1"}}}
        docs.append(workload(f"m-{role}", role, c, app="m"))
    return docs


@pytest.mark.parametrize(("image", "env", "ranks", "code_"), [
    ("vllm/vllm-openai:v0.7.3", None, (0, 1), 0),
    ("vllm/vllm-openai:v0.7.3", None, (1, 0), 0),
    ("vllm/vllm-openai:v0.7.3", None, (0, 2), 1),
    ("vllm/vllm-openai:v0.8.5", {"VLLM_USE_V1": "0"}, (0, 1), 0),
    ("vllm/vllm-openai:v0.8.5", {"VLLM_USE_V1": "0"}, (1, 1), 1),
])
def test_deployments_of_older_releases(tmp_path, capsys, image, env, ranks, code_):
    code, out = check(tmp_path, capsys, *_deployment(image, ranks, env))
    assert code == code_, out
    assert rules(out, "error") == ({"v0-pynccl-kv-rank"} if code_ == 1 else set()), out
