"""What Dynamo's vLLM worker adds to the engine by itself in Dynamo 0.4.0-0.8.x (issue 9, compat/dynamo_engine_defaults.py).

The tables started at 0.9.0 because earlier ai-dynamo wheels were not read. Read in every wheel 0.4.0-0.8.1.post3
(dynamo/vllm/args.py): block_size 16 where unset, prefix caching on where unset, kv_events_config created where
prefix caching is on; before 0.7.0 for decode workers too and on a port reserved from a range (no fixed port), from
0.7.0 on DYN_VLLM_KV_EVENT_PORT (20080) and not for decode workers; 0.7.x skips it for --enable-lora. The 0.3.2 wheel
holds no dynamo/vllm: nothing is added there.
"""

from __future__ import annotations

import pytest

from pdd_operator.compat.dynamo_engine_defaults import added_block_size, added_kv_events, added_kv_events_ports
from pdd_operator.compat.dynamo_engine_defaults import dynamo_release as release_of
from pdd_operator.vllm.args import parse_flags

from .test_noticed_kinds_28b import _dynamo, _errors, _yaml_check

RUNTIME = "nvcr.io/nvidia/ai-dynamo/vllm-runtime:"
READ = ["0.4.0", "0.4.1", "0.5.0", "0.5.1", "0.6.0", "0.6.1", "0.7.0", "0.7.0.post1", "0.7.1", "0.8.0", "0.8.1",
        "0.8.1.post3"]
ARGV = ["dynamo.vllm", "--model", "Qwen/Qwen3-8B"]


def _events(tag: str, *extra: str) -> str | None:
    argv = [*ARGV, *extra]
    return added_kv_events(argv, parse_flags(argv)[1], RUNTIME + tag, None, False)


@pytest.mark.parametrize("tag", READ)
def test_block_size_16_where_unset(tag):
    assert added_block_size(ARGV, RUNTIME + tag, None) == 16
    assert added_block_size(ARGV, RUNTIME + tag, 32) is None


@pytest.mark.parametrize("tag", READ)
def test_a_prefill_or_aggregated_worker_gets_kv_events(tag):
    assert _events(tag) and _events(tag, "--is-prefill-worker"), tag
    argv = [*ARGV, "--no-enable-prefix-caching"]
    assert added_kv_events(argv, parse_flags(argv)[1], RUNTIME + tag, False, False) is None


@pytest.mark.parametrize(("tag", "adds"), [("0.6.0", True), ("0.6.1", True), ("0.7.0", False), ("0.8.1", False)])
def test_decode_workers_publish_before_0_7_only(tag, adds):
    flag = ("--is-decode-worker",) if tag != "0.6.0" else ()  # 0.6.0 has no decode flag: every worker is one
    assert bool(_events(tag, *flag)) is adds


@pytest.mark.parametrize(("tag", "adds"), [("0.7.0", False), ("0.7.1", False), ("0.8.0", True), ("0.6.1", True)])
def test_lora_skips_kv_events_in_0_7_only(tag, adds):
    assert bool(_events(tag, "--enable-lora")) is adds


def test_0_4_sets_it_in_overwrite_args():
    assert "overwrite_args" in _events("0.4.1") and "create_kv_events_config" in _events("0.5.0")


@pytest.mark.parametrize(("tag", "ports"), [("0.4.1", ()), ("0.6.1", ()), ("0.7.0", (20080,)), ("0.8.1", (20080,))])
def test_a_fixed_publisher_port_from_0_7(tag, ports):
    assert added_kv_events_ports({}, None, release_of(RUNTIME + tag)) == ports


@pytest.mark.parametrize("tag", ["0.3.2", "0.3.2-cuda13"])
def test_releases_before_the_worker_was_in_the_wheel_add_nothing(tag):
    assert added_block_size(ARGV, RUNTIME + tag, None) is None and _events(tag) is None


@pytest.mark.parametrize("tag", ["0.7.1", "0.8.0", "0.8.1.post3"])
def test_two_workers_on_one_node_share_port_20080(tmp_path, capsys, tag):
    # Before: Dynamo < 0.9 was not read, so no KV events port was listed and the pair passed.
    code, out = _yaml_check(tmp_path, capsys, _dynamo(tag))
    assert code == 1 and "listener-port-conflict" in _errors(out), out
    assert "20080" in next(f["message"] for r in out["results"] for f in r["findings"]
                           if f["rule"] == "listener-port-conflict"), out


@pytest.mark.parametrize(("tag", "decode_flag"), [("0.6.1", ()), ("0.5.1", ()), ("0.7.1", ("--is-decode-worker",))])
def test_no_fixed_port_or_no_decode_publisher_meets_no_conflict(tmp_path, capsys, tag, decode_flag):
    _, out = _yaml_check(tmp_path, capsys, _dynamo(tag, decode_flag))
    assert "listener-port-conflict" not in _errors(out), out
