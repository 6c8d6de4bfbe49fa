"""Context parallelism against vLLM's NIXL start-up checks (issue 9, a gap of the seventh held-out round):
vllm/distributed/kv_transfer/kv_connector/v1/nixl/connector.py NixlBaseConnector.__init__ and
NixlPushConnector.__init__, read in the wheels 0.28.0-0.33.0 (0.28.0 has none of them), each with negative controls
and a test that the rules' version windows are the wheels' own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.test_turn2_variants import check, container, rules, workload

SRC = Path("/tmp/i9-src")


def _kv(role="kv_both", connector="NixlConnector", **extra):
    return json.dumps({"kv_connector": connector, "kv_role": role, **extra})


#: An MLA model: from 0.29.0 VllmConfig refuses DCP > 1 with NixlConnector on any other (vllm/config/vllm.py, the
#: nixl-dcp-non-mla rule), so these PCP/DCP cases keep to what NixlBaseConnector.__init__ checks.
MODEL = "deepseek-ai/DeepSeek-V2-Lite"


def _pair(image="vllm/vllm-openai:v0.33.0", p_args=(), d_args=(), p_kv=None, d_kv=None, gpus=8):
    def role(name, args, kv):
        return workload(f"m-{name}", name, container([MODEL, *args, "--kv-transfer-config", kv],
                                                     image=image, gpus=gpus))
    return [role("prefill", p_args, p_kv or _kv("kv_producer")), role("decode", d_args, d_kv or _kv("kv_consumer"))]


@pytest.mark.parametrize("image, p_args, refused", [
    ("v0.33.0", ["-pcp", "2", "-dcp", "2", "-tp", "2"], True),   # TP must be 1
    ("v0.33.0", ["-pcp", "4", "-dcp", "2"], True),               # DCP must span the PCP group
    ("v0.33.0", ["-pcp", "2", "-dcp", "2"], False),              # TP 1, DCP == PCP
    ("v0.30.0", ["-pcp", "2", "--decode-context-parallel-size", "2"], False),
    ("v0.29.0", ["-pcp", "2", "-dcp", "2"], True),               # 0.29.0 refuses any DCP > 1 with PCP
    ("v0.28.0", ["-pcp", "2", "-dcp", "2", "-tp", "2"], False),  # no check before 0.29
    ("v0.33.0", ["-dcp", "2", "-tp", "2"], False),               # DCP alone on the pull connector
])
def test_pcp_with_dcp(tmp_path, capsys, image, p_args, refused):
    code, out = check(tmp_path, capsys, *_pair(f"vllm/vllm-openai:{image}", p_args=p_args))
    assert ("pcp-dcp-unsupported" in rules(out, "error")) is refused, out
    assert (code == 1) is refused, out


@pytest.mark.parametrize("image, value, refused", [
    ("v0.33.0", True, True), ("v0.31.0", "true", True), ("v0.33.0", False, False), ("v0.28.0", True, False),
])
def test_pcp_producer_with_bidirectional_kv_xfer(tmp_path, capsys, image, value, refused):
    p_kv = _kv("kv_producer", kv_connector_extra_config={"bidirectional_kv_xfer": value})
    d_kv = _kv("kv_consumer", kv_connector_extra_config={"bidirectional_kv_xfer": value})
    code, out = check(tmp_path, capsys, *_pair(f"vllm/vllm-openai:{image}", p_args=["-pcp", "2"], p_kv=p_kv,
                                               d_kv=d_kv))
    assert ("pcp-bidirectional-unsupported" in rules(out, "error")) is refused, out


@pytest.mark.parametrize("image, connector, refused", [
    ("v0.33.0", "NixlPushConnector", True), ("v0.29.0", "NixlPushConnector", True),
    ("v0.33.0", "NixlConnector", False), ("v0.28.0", "NixlPushConnector", False),
])
def test_push_connector_with_decode_context_parallelism(tmp_path, capsys, image, connector, refused):
    docs = _pair(f"vllm/vllm-openai:{image}", d_args=["-dcp", "2", "-tp", "2"], p_kv=_kv("kv_producer", connector),
                 d_kv=_kv("kv_consumer", connector))
    code, out = check(tmp_path, capsys, *docs)
    assert ("push-dcp-unsupported" in rules(out, "error")) is refused, out


CHECKS = {"pcp-kv-role-unsupported": "NixlConnector PCP currently supports kv_producer only",
          "pcp-bidirectional-unsupported": "PCP producers do not support bidirectional KV transfer",
          "push-dcp-unsupported": "NixlPushConnector does not support decode_context_parallel_size > 1",
          "pcp-dcp-tp1": "NixlConnector PCP+DCP requires TP1"}


@pytest.mark.skipif(not (SRC / "0.33.0").is_dir(), reason="the unpacked vLLM wheels are not on this machine")
@pytest.mark.parametrize("check_id, text", CHECKS.items())
def test_the_version_windows_are_those_of_the_wheels(check_id, text):
    since = "0.30.0" if check_id == "pcp-dcp-tp1" else "0.29.0"
    versions = sorted((p.name for p in SRC.iterdir() if (p / "vllm").is_dir() and p.name.startswith("0.")),
                      key=lambda v: tuple(int(x) for x in v.split(".")))
    have = {v for v in versions if text in _read(SRC / v / "vllm/distributed/kv_transfer/kv_connector/v1")}
    want = {v for v in versions if tuple(int(x) for x in v.split(".")) >= tuple(int(x) for x in since.split("."))}
    assert have == want


def _read(folder: Path) -> str:
    return "".join(p.read_text() for p in folder.glob("nixl*/connector.py")) + "".join(
        p.read_text() for p in folder.glob("nixl_connector.py"))
