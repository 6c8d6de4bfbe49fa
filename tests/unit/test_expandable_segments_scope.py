"""``expandable-segments-with-nixl`` as wide as vLLM's code (issue 9 item 1): vllm/config/vllm.py
``VllmConfig._verify_kv_transfer_compat`` refuses any KV connector with ``PYTORCH_CUDA_ALLOC_CONF=
expandable_segments:True`` from 0.21.0 (read in the 0.21.0-0.24.0 sdists; absent from 0.20.2) unless the KV cache
sits in CuMemAllocator's pool: ``enable_sleep_mode`` in 0.21, ``enable_cumem_allocator`` (which sleep mode sets)
from 0.22.0. ``CuMemAllocator.use_memory_pool`` (vllm/device_allocator/cumem.py, 0.20.1 on) turns expandable
segments off around that pool, so the exemption holds before the refusal too. Before 0.21 the fault is a runtime
one over RDMA (vllm#41237). Each case with a negative control; the KServe-templated path uses the same definition.
"""

from __future__ import annotations

import json

import pytest

from pdd_operator.compat.rules.memory import expandable_segments_fault
from pdd_operator.compat.templated import templated_findings
from tests.unit.test_turn2_variants import check, container, rules, workload

EXPANDABLE = {"name": "PYTORCH_CUDA_ALLOC_CONF", "value": "expandable_segments:True"}
NIXL = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})


def _pair(image: str, p_args=(), d_args=(), p_env=(EXPANDABLE,), d_env=(EXPANDABLE,), rdma=True):
    def role(name, args, env):
        c = container(["Qwen/Qwen3-8B", "--kv-transfer-config", NIXL, *args], image=image, env=env)
        if not rdma:
            del c["resources"]["limits"]["rdma/ib"]
        return workload(f"m-{name}", name, c)
    return [role("prefill", p_args, p_env), role("decode", d_args, d_env)]


def _findings(out: dict) -> list[dict]:
    return [f for r in out["results"] for f in r["findings"] if f["rule"] == "expandable-segments-with-nixl"]


@pytest.mark.parametrize("image, args, severity", [
    ("v0.30.0", ["--enable-cumem-allocator"], None),  # 0.22+: the cumem allocator is exempt
    ("v0.33.0", ["--enable-sleep-mode"], None),       # sleep mode sets enable_cumem_allocator
    ("v0.21.0", ["--enable-sleep-mode"], None),       # 0.21 exempts enable_sleep_mode
    ("v0.20.2", ["--enable-sleep-mode"], None),       # no check; the pool turns expandable_segments off
    ("v0.20.0", ["--enable-sleep-mode"], "error"),    # the pool's toggle arrived in 0.20.1
    ("v0.21.0", ["--enable-cumem-allocator"], "error"),  # the field arrived in 0.22
    ("v0.33.0", [], "error"),
    ("v0.30.0", [], "error"),   # refused from 0.21, not only from 0.33
    ("v0.20.2", [], "error"),   # over RDMA: remote access errors at the first transfer
])
def test_the_cumem_allocator_exempts_and_the_refusal_starts_at_021(tmp_path, capsys, image, args, severity):
    code, out = check(tmp_path, capsys, *_pair(f"vllm/vllm-openai:{image}", p_args=args, d_args=args))
    found = _findings(out)
    assert {f["severity"] for f in found} == ({severity} if severity else set()), out
    assert (len(found) == 2) is bool(severity)


def test_without_rdma_an_older_release_is_a_warning_and_a_refusing_one_an_error(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.20.2", rdma=False))
    assert {f["severity"] for f in _findings(out)} == {"warning"}, out
    assert "expandable-segments-with-nixl" not in rules(out, "error")
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.21.0", rdma=False))
    assert "expandable-segments-with-nixl" in rules(out, "error"), out


def test_one_role_with_expandable_segments_breaks_the_pair_on_that_role(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pair("vllm/vllm-openai:v0.30.0", d_env=()))
    (finding,) = _findings(out)
    assert finding["severity"] == "error" and finding["message"].startswith("prefill:"), out
    assert code == 1


def test_the_rule_and_the_templated_path_share_one_condition():
    assert expandable_segments_fault((0, 21, 0), "expandable_segments:True", ["--enable-sleep-mode"], True) is None
    assert expandable_segments_fault((0, 22, 0), "expandable_segments:True", ["--enable-cumem-allocator"], True) is None
    assert expandable_segments_fault((0, 33, 0), "max_split_size_mb:512,expandable_segments:False", [], True) is None
    assert expandable_segments_fault(None, "expandable_segments:True", [], True)[0] == "error"
    # an unknown version without a known RDMA device: 0.21+ refuse it, older releases only copy slower (the version
    # decides), so a warning, not an error no release before 0.21 would bear out
    assert expandable_segments_fault(None, "expandable_segments:True", [], None)[0] == "warning"
    assert expandable_segments_fault(None, "expandable_segments:True", [], False)[0] == "warning"
    main = {"name": "main", "image": "vllm/vllm-openai:v0.33.0",
            "env": [EXPANDABLE, {"name": "VLLM_ADDITIONAL_ARGS", "value": f"--kv_transfer_config '{NIXL}'"}]}
    assert templated_findings(main, "x")
    sleeping = {**main, "args": ["--enable-sleep-mode"]}
    assert templated_findings(sleeping, "x") == ()  # sleep mode exempts in KServe's templates too
    older = {**main, "image": "vllm/vllm-openai:v0.25.0"}
    assert templated_findings(older, "x")  # 0.25 already refuses it at startup
