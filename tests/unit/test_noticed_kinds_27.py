"""Kinds the last round noticed and left, settled from vLLM's own source for each version they cover.

Short options vLLM's parser did not define yet (flags.py ``_ALIASES``): ``-dpn`` ... ``-dpe`` are absent from
vllm/engine/arg_utils.py of 0.10.1.1 and 0.11.0 (only ``-dp``) and present from 0.11.1; ``-ep`` is absent from
0.11.0-0.13.0 (only ``--enable-expert-parallel``) and present from 0.14.0; ``-dpm`` (and its long flag
``--data-parallel-multi-port-external-lb``) is absent from 0.18.0 and present in 0.24.0. vLLM's
FlexibleArgumentParser is an argparse parser: an option it does not define ends in 'unrecognized arguments' and the
server never starts. The checker read the short option as its long flag for any version and passed such an engine
in silence (``cli-flag-not-yet``, :mod:`pdd_operator.vllm.added_flags`).

NixlPushConnector with different block sizes (``block-size-push-equal``): 0.24.0-0.33.0 push_worker._xfer_blocks has a
``block_size_ratio > 1`` branch (non-HMA), but TransferTopology.block_size_ratio(remote) asserts local % remote == 0
(kv_connector/utils.py) on both ends: the prefill in its handshake with the decode before it writes (P % D == 0); the
decode in its own handshake before it sends PUSH_REG (0.24.0-0.26.0) or, where that handshake is notif-only (0.27.0
on), in get_finished / get_transfer_results on each received request (D % P == 0). Only equal sizes pass both, so the
branch is unreachable and the rule stands (pinned here for 0.24.0, 0.28.0 and 0.32.0, both directions).

A hybrid SSM decode with prefix caching (``hybrid-ssm-prefix-caching``) started at 0.20 while NIXL runs hybrid SSM
models from 0.18.0: 0.18.0 and 0.19.1 nixl_connector.py _read_blocks trim every KV cache group's remote blocks to the
local ones on a partial prefix hit (SSM groups included) and assert nothing there, as 0.21.0 does; so 0.18-0.19 warn
(not established), and passed in silence before.

P2pNcclConnector is registered in kv_connector/factory.py up to 0.23.0 and gone from 0.24.0 (0.32.0, 0.34.0): an
upstream vLLM image from 0.24.0 stops at 'Unsupported connector type' (``p2p-nccl-connector-unavailable``); plugin and
fork images, or a kv_connector_module_path, may supply it and are not judged.

Pull NixlConnector with a pipeline-parallel dense prefill (``pp-pull-unsupported``): 0.32.0 starts the prefill, and
the decode's handshake asserts that the remote registered as many regions as its own full model; the error stands.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.compat import evaluate
from pdd_operator.vllm.added_flags import ADDED_FLAGS, flags_floor
from pdd_operator.vllm.flags import short_options
from tests.helpers import hybrid, make_spec
from tests.unit.test_turn2_variants import check, pd, rules

KV = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
PUSH = '{"kv_connector":"NixlPushConnector","kv_role":"kv_both"}'
NOT_YET = "cli-flag-not-yet"


def _findings(out, rule):
    return [f for r in out["results"] for f in r["findings"] if f["rule"] == rule]


@pytest.mark.parametrize(("version", "option", "value"), [
    # Set 30: -dpn, -dpr and -dpb are in 0.10.0-0.11.0 too, -dpl, -dpa and -dpp in 0.9.0 (arg_utils.py 0.11.0
    # l.662-688, single-quoted; tests/unit/test_short_options_30.py): only a release before them refuses them.
    ("v0.9.0", "-dpr", "1"), ("v0.9.0", "-dpn", "0"), ("v0.9.0", "-dpb", "ray"),
    ("v0.11.0", "-dph", None), ("v0.11.0", "-dpe", None),
    ("v0.13.0", "-ep", None), ("v0.12.0", "-ep", None), ("v0.18.0", "-dpm", None),
    ("v0.18.0", "--data-parallel-multi-port-external-lb", None),
])
def test_a_short_option_before_its_release_is_refused_at_startup(tmp_path, capsys, version, option, value):
    extra = [option] + ([value] if value else [])
    code, out = check(tmp_path, capsys, *pd("dp", ["--kv-transfer-config", KV, *extra], ["--kv-transfer-config", KV],
                                            image=f"vllm/vllm-openai:{version}"))
    found = _findings(out, NOT_YET)
    assert code == 1 and [f["severity"] for f in found] == ["error"]
    assert option in found[0]["message"] and "unrecognized arguments" in found[0]["message"]


@pytest.mark.parametrize(("version", "args"), [
    ("v0.11.1", ["-dpl", "2"]), ("v0.14.0", ["-ep"]), ("v0.24.0", ["-dpm"]), ("v0.32.0", ["-dpa", "10.0.0.1", "-ep"]),
    ("v0.11.0", ["--data-parallel-size-local", "2"]), ("v0.13.0", ["--enable-expert-parallel"]),
    ("v0.11.0", ["-dp", "2"]), ("v0.11.0", ["-dpl", "2"]), ("v0.11.0", ["-dpa", "10.0.0.1"]),
    ("v0.10.1.1", ["-dpr", "1"]), ("v0.11.0", ["-dpn", "0"]), ("v0.11.0", ["-dpp", "13345"]),
    ("v0.10.0", ["-dpb", "ray"]), ("v0.9.0", ["-dpl", "2"]),
])
def test_the_option_from_its_release_or_its_long_flag_before_is_not_refused(tmp_path, capsys, version, args):
    code, out = check(tmp_path, capsys, *pd("dp", ["--kv-transfer-config", KV, *args], ["--kv-transfer-config", KV, *args],
                                            image=f"vllm/vllm-openai:{version}"))
    assert NOT_YET not in rules(out)


def test_between_the_release_read_without_and_the_one_read_with_it_is_a_warning(tmp_path, capsys):
    # -dpm: absent in 0.21.0, present in 0.22.0 (both read): 0.21.0 refuses it; 0.15.x (not read) lies between
    # 0.14.0 and 0.16.0 for --kernel-config
    code, out = check(tmp_path, capsys, *pd("dp", ["--kv-transfer-config", KV, "--kernel-config", "{}"],
                                            ["--kv-transfer-config", KV], image="vllm/vllm-openai:v0.15.1"))
    assert [f["severity"] for f in _findings(out, NOT_YET)] == ["warning"]
    code, out = check(tmp_path, capsys, *pd("dp", ["--kv-transfer-config", KV, "-dpm"], ["--kv-transfer-config", KV],
                                            image="vllm/vllm-openai:v0.21.0"))
    assert [f["severity"] for f in _findings(out, NOT_YET)] == ["error"]


def test_a_long_flag_listed_as_added_is_refused_on_a_known_release_before_it(tmp_path, capsys):
    args = ["--kv-transfer-config", KV, "--kernel-config", "{}"]
    code, out = check(tmp_path, capsys, *pd("k", args, args, image="vllm/vllm-openai:v0.14.0"))
    assert code == 1 and len(_findings(out, NOT_YET)) == 2 and NOT_YET in rules(out, "error")


def test_short_options_are_read_as_written_and_bound_an_unknown_version():
    assert list(short_options(["vllm", "serve", "m", "-dpl", "2", "-ep", "--x", "1", "&&", "-dpa", "h"])) == [
        "-dpl", "-ep"]
    assert short_options(["vllm", "serve", "m", "-dp=2", "-tp", "2"]) == {
        "-dp": "--data-parallel-size", "-tp": "--tensor-parallel-size"}
    assert ADDED_FLAGS["-dph"].floor == (0, 11, 1) and ADDED_FLAGS["-ep"].floor == (0, 14, 0)
    assert flags_floor(dict.fromkeys(("-ep", "-dph"))) == ((0, 14, 0), "-ep")


@pytest.mark.parametrize("version", ["v0.24.0", "v0.28.0", "v0.32.0"])
@pytest.mark.parametrize(("p_size", "d_size"), [("32", "16"), ("16", "32")])
def test_push_with_different_block_sizes_stays_refused_in_both_directions(tmp_path, capsys, version, p_size, d_size):
    code, out = check(tmp_path, capsys, *pd("push", ["--kv-transfer-config", PUSH, "--block-size", p_size],
                                            ["--kv-transfer-config", PUSH, "--block-size", d_size],
                                            image=f"vllm/vllm-openai:{version}"))
    assert "block-size-push-equal" in rules(out, "error")


def test_push_with_equal_block_sizes_is_not_refused(tmp_path, capsys):
    args = ["--kv-transfer-config", PUSH, "--block-size", "32"]
    code, out = check(tmp_path, capsys, *pd("push", args, args, image="vllm/vllm-openai:v0.32.0"))
    assert "block-size-push-equal" not in rules(out)


@pytest.mark.parametrize(("version", "severity"), [
    ("0.17.1", None), ("0.18.0", "warning"), ("0.19.1", "warning"), ("0.20.0", "error"), ("0.21.0", "warning"),
    ("0.22.0", "error"),
])
def test_hybrid_decode_prefix_caching_is_judged_from_0_18(version, severity):
    spec = hybrid(engine={"image": f"vllm/vllm-openai:v{version}"}, decode={"extraArgs": ["--enable-prefix-caching"]})
    found = [f.severity for f in evaluate(spec).findings if f.rule == "hybrid-ssm-prefix-caching"]
    assert found == ([severity] if severity else [])


def _p2p(image, module_path=False):
    cfg = {"kv_connector": "P2pNcclConnector", "kv_connector_extra_config": {"http_port": "8000"}}
    if module_path:
        cfg["kv_connector_module_path"] = "my_plugin.connectors"
    p = json.dumps({**cfg, "kv_role": "kv_producer"})
    d = json.dumps({**cfg, "kv_role": "kv_consumer"})
    return pd("p2p", ["--kv-transfer-config", p], ["--kv-transfer-config", d], image=image)


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.24.0", "docker.io/vllm/vllm-openai:v0.32.0",
                                   "vllm/vllm-openai-rocm:v0.28.0",
                                   "public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.32.0"])
def test_p2p_nccl_on_an_upstream_image_without_it_does_not_start(tmp_path, capsys, image):
    code, out = check(tmp_path, capsys, *_p2p(image))
    assert code == 1 and "p2p-nccl-connector-unavailable" in rules(out, "error")


@pytest.mark.parametrize(("image", "module_path"), [
    ("vllm/vllm-openai:v0.23.0", False), ("rocm/vllm:rocm7.14.0_cdna_ubuntu24.04_py3.14_pytorch_2.11.0_vllm_0.24.0", False),
    ("quay.io/ascend/vllm-ascend:v0.24.0", False), ("vllm/vllm-openai:v0.24.0", True), ("vllm/vllm-openai:latest", False),
])
def test_p2p_nccl_where_it_may_be_registered_is_not_refused(tmp_path, capsys, image, module_path):
    code, out = check(tmp_path, capsys, *_p2p(image, module_path))
    assert "p2p-nccl-connector-unavailable" not in rules(out)


def test_pull_with_a_pipeline_parallel_dense_prefill_stays_refused_at_the_handshake():
    # 0.32.0 base_worker: a non-hybrid PP producer starts, the decode's handshake asserts equal region counts
    spec = make_spec(engine={"image": "vllm/vllm-openai:v0.32.0"}, prefill={"pipelineParallelSize": 2})
    found = [f for f in evaluate(spec).findings if f.rule == "pp-pull-unsupported"]
    assert [f.severity for f in found] == ["error"] and "handshake" in found[0].message
