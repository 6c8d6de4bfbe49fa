"""The conformance run's definition (dev/conformance.py) and its document (docs/conformance.md) agree,
and every variant gets from ``pdd check`` the verdict it was written for. No engines run here: the
engines' side is ``make conformance``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dev import conformance as c
from pdd_operator.compat.rules import CHECKS

MODELS = {"llama": "/models/llama-tiny", "nemotron_h": "/models/nemotron-h-tiny"}
_ROW = re.compile(r"^\| `([a-z0-9-]+)` \| `([a-z0-9-]+)` \|")


def _doc_rows() -> list[tuple[str, str]]:
    return [m.groups() for line in c.DOC.read_text().splitlines() if (m := _ROW.match(line))]


def test_document_lists_exactly_the_variants():
    assert _doc_rows() == [(v.id, v.rule) for v in c.VARIANTS]


def test_each_family_has_a_refused_and_an_accepted_variant():
    by_family: dict[str, set[bool]] = {}
    for v in c.VARIANTS:
        by_family.setdefault(v.family, set()).add(v.refused)
    assert by_family and all(s == {True, False} for s in by_family.values()), by_family
    assert len({v.id for v in c.VARIANTS}) == len(c.VARIANTS)
    ids = {r.id for r in CHECKS}
    assert {v.rule for v in c.VARIANTS} <= ids


@pytest.mark.parametrize("v", c.VARIANTS, ids=lambda v: v.id)
def test_pdd_check_gives_the_verdict_the_variant_was_written_for(v, tmp_path: Path):
    verdict = c.check_variant(v, tmp_path, c.model_ref(v, MODELS))
    assert verdict.paired_by, "the two Deployments were not paired"
    if v.refused:
        assert verdict.exit_code == 1 and v.rule in verdict.errors, verdict
    else:
        assert verdict.exit_code == 0 and not verdict.errors, verdict
    assert c.verdict_as_written(v, verdict)


def test_the_document_records_the_verdicts_pdd_check_gives_now(tmp_path: Path):
    """The table's pdd check column is what pdd check says today (a rule change shows up here
    until ``make conformance`` has been run again)."""
    cells = {}
    for line in c.DOC.read_text().splitlines():
        if _ROW.match(line):
            parts = [p.strip() for p in line.strip("|").split("|")]
            cells[parts[0].strip("`")] = parts[3]
    for v in c.VARIANTS:
        assert cells[v.id] == c.check_variant(v, tmp_path, c.model_ref(v, MODELS)).text().replace("|", "\\|"), v.id


def test_manifest_is_what_runs():
    """The engines started are the manifest's containers: ``vllm serve <model>``, the variant's flags
    last, the side channel on the pod IP (localized to 127.0.0.1 by dev/local_pd.py)."""
    v = c.variant("version-skew-refused")
    prefill, decode = c.manifest(v, "/m/llama-tiny")
    pc_, dc = (d["spec"]["template"]["spec"]["containers"][0] for d in (prefill, decode))
    assert pc_["image"].endswith(f":v{c.OLDER}") and dc["image"].endswith(f":v{c.PRIMARY}")
    assert pc_["command"] == ["vllm", "serve", "/m/llama-tiny"]
    v = c.variant("block-size-refused")
    prefill, decode = c.manifest(v, "/m/llama-tiny")
    args = prefill["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[-2:] == ["--block-size", "128"]


def test_first_error_picks_the_telling_line():
    log = ("INFO ... starting\n(EngineCore pid=1) ERROR 12-01 10:00:00 [base_worker.py:1080] RuntimeError: NIXL "
           "compatibility hash mismatch. Local: ab, Remote: cd.\nTraceback (most recent call last):\n  File x\n"
           "RuntimeError: boom\n")
    assert c.first_error(log).startswith("RuntimeError: NIXL compatibility hash mismatch")
    assert c.first_error("Traceback (most recent call last):\n  File y\nAssertionError: SSM can only have one local "
                         "block\n") == "AssertionError: SSM can only have one local block"
    assert c.first_error("INFO all fine\n") is None


def test_fp8_kv_cache_needs_avx512_or_amx():
    assert c.fp8_kv_unsupported("processor\t: 0\nflags\t\t: fpu sse avx2 avx512f\n") == ""
    assert c.fp8_kv_unsupported("flags\t\t: fpu amx_tile amx_bf16\n") == ""
    assert "AVX-512 or AMX" in c.fp8_kv_unsupported("flags\t\t: fpu sse avx2\n")
    assert {v.id for v in c.VARIANTS if v.needs_fp8_kv} == {"kv-cache-dtype-refused", "kv-cache-dtype-accepted"}


def test_revision_mismatch_offline_says_the_handshake_refuses(tmp_path: Path, capsys):
    """With HF_HUB_OFFLINE=1 vLLM hashes the revision's snapshot path (what revision-refused showed);
    online it hashes the model id only, and the message says the output is wrong instead."""
    import json

    import yaml

    from pdd_operator.cli import main

    docs = c.manifest(c.variant("revision-refused"), c.HUB_MODEL)
    messages = {}
    for offline in (True, False):
        if not offline:
            for d in docs:
                env = d["spec"]["template"]["spec"]["containers"][0]["env"]
                env[:] = [e for e in env if e["name"] != "HF_HUB_OFFLINE"]
        path = tmp_path / f"rev-{offline}.yaml"
        path.write_text(yaml.safe_dump_all(docs))
        capsys.readouterr()
        assert main(["check", "-o", "json", str(path)]) == 1
        findings = json.loads(capsys.readouterr().out)["results"][0]["findings"]
        [messages[offline]] = [f["message"] for f in findings if f["rule"] == "model-revision-mismatch"]
    assert "handshake refuses" in messages[True]
    assert "wrong output" in messages[False]


def test_variants_that_cannot_run_here_say_why():
    v = c.variant("hybrid-prefix-caching-refused")
    assert "triton" in c.precondition(v)
    assert c.precondition(c.variant("hybrid-prefix-caching-accepted")) == ""
    assert c.precondition(c.variant("block-size-refused")) == ""
