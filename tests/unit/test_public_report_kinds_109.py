"""Variants of what the hundred-and-ninth public-report set (tests/unit/data/public_reports_109) taught: PDDeployments
translated from other frameworks' P/D deployments keep a flag of the framework they came from.

- a flag of Dynamo (its SDK graphs' ``max-local-prefill-length``, its worker's ``--is-prefill-worker``), SGLang
  (``--mem-fraction-static``, ``--tp-size``) or TensorRT-LLM (``--max-batch-size``) handed to vLLM's own parser stops
  the engine ('unrecognized arguments'): an error (``cli-flag-unknown``) on a PDDeployment's extraArgs, a ``vllm
  serve`` container and the ``api_server`` module, whatever the release (none of vLLM 0.9.0-0.34.0 read defines
  them), and the webhook refuses what ``pdd check`` refuses;
- a ``dynamo.vllm`` worker keeps its own flags (``--is-prefill-worker`` is Dynamo's there), and flags vLLM shares with
  those frameworks (``--kv-cache-dtype``, ``--nnodes``) are never called foreign.
"""

from __future__ import annotations

import copy
import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import pytest
import yaml

from pdd_operator.cli import main
from pdd_operator.controller.webhook import review
from pdd_operator.vllm.flags import parse_flags
from pdd_operator.vllm.foreign_flags import FOREIGN_FLAGS, foreign_flags

ROOT = Path(__file__).resolve().parents[2]
SET = ROOT / "tests" / "unit" / "data" / "public_reports_109" / "inputs"
LLAMA = yaml.safe_load((ROOT / "examples" / "llama-dense-pd.yaml").read_text())
DYNAMO_060 = ROOT / "tests" / "unit" / "data" / "public_reports_101" / "inputs" / "dyn3643-maverick-both-runtime-060.yaml"


def _check(tmp_path, docs, name="in.yaml") -> tuple[int, dict]:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs))
    buf = io.StringIO()
    with redirect_stdout(buf):
        code = main(["check", str(path), "-o", "json"])
    return code, json.loads(buf.getvalue())


def _rules(out: dict, severity: str = "error") -> set[str]:
    return {f["rule"] for r in out["results"] for f in r["findings"] if f["severity"] == severity}


def _pdd(image: str, role: str, extra: list[str]) -> dict:
    doc = copy.deepcopy(LLAMA)
    doc["spec"]["engine"]["image"] = image
    doc["spec"][role]["extraArgs"] = extra
    return doc


def _deployments(entry: list[str], prefill_extra: list[str], image: str = "vllm/vllm-openai:v0.30.0") -> list[dict]:
    """A prefill and a decode Deployment of Llama-3.1-8B over NixlConnector, started with ``entry`` (``vllm serve``
    or the ``api_server`` module); ``prefill_extra`` is added to the prefill's argv only."""
    kv = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
    out = []
    for role, extra in (("prefill", prefill_extra), ("decode", [])):
        out.append({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"llama-{role}"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": f"llama-{role}"}},
                     "template": {"metadata": {"labels": {"app": f"llama-{role}"}}, "spec": {"containers": [{
                         "name": "vllm", "image": image,
                         "command": [*entry, "--model", "meta-llama/Llama-3.1-8B-Instruct", "--kv-transfer-config", kv,
                                     *extra],
                         "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}})
    return out


@pytest.mark.parametrize(("image", "role", "extra"), [
    ("vllm/vllm-openai:v0.18.0", "decode", ["--max-local-prefill-length", "1500"]),  # set 109's own (Dynamo SDK)
    ("vllm/vllm-openai:v0.30.0", "prefill", ["--mem-fraction-static", "0.8"]),  # SGLang
    ("vllm/vllm-openai:v0.34.0", "decode", ["--max-batch-size=64"]),  # TensorRT-LLM, =value form
    ("vllm/vllm-openai:v0.26.0", "prefill", ["--disaggregation-mode", "prefill"]),  # Dynamo worker / SGLang role flag
    ("vllm/vllm-openai:nightly", "decode", ["--max-local-prefill-length", "1500"]),  # unknown release: every one refuses
])
def test_foreign_flag_in_pddeployment_extra_args_is_refused_by_check_and_webhook(tmp_path, image, role, extra):
    doc = _pdd(image, role, extra)
    code, out = _check(tmp_path, [doc])
    assert code == 1 and "cli-flag-unknown" in _rules(out)
    finding = next(f for r in out["results"] for f in r["findings"] if f["rule"] == "cli-flag-unknown")
    assert f"spec.{role}.extraArgs" in finding["fix"] and extra[0].split("=")[0] in finding["message"]
    verdict = review("CREATE", doc)
    assert not verdict.allowed and "[cli-flag-unknown]" in verdict.message


@pytest.mark.parametrize("entry", [["vllm", "serve"], ["python3", "-m", "vllm.entrypoints.openai.api_server"]])
@pytest.mark.parametrize("extra", [["--tp_size", "2"], ["--chunked-prefill-size", "8192"], ["--is-prefill-worker"]])
def test_foreign_flag_on_vllms_own_entry_points_is_an_error(tmp_path, entry, extra):
    code, out = _check(tmp_path, _deployments(entry, extra))
    assert code == 1 and "cli-flag-unknown" in _rules(out), out


def test_dynamo_worker_keeps_its_own_role_flag(tmp_path):
    """``--is-prefill-worker`` is Dynamo's worker flag (defined there up to ai-dynamo 1.3.1): not foreign to it."""
    docs = list(yaml.safe_load_all(DYNAMO_060.read_text()))
    code, out = _check(tmp_path, docs)
    assert "cli-flag-unknown" not in _rules(out) | _rules(out, "warning")


@pytest.mark.parametrize("extra", [["--kv-cache-dtype", "fp8"], ["--max-num-seqs", "64"],
                                   ["--enable-log-requests"], ["--disable-uvicorn-access-log"]])
def test_vllm_flags_are_never_foreign(tmp_path, extra):
    code, out = _check(tmp_path, _deployments(["vllm", "serve"], extra))
    assert "cli-flag-unknown" not in _rules(out)


def test_the_set_entries_without_the_foreign_flag_still_pass(tmp_path):
    doc = yaml.safe_load((SET / "haydeniw-qwen3-06b-decode-max-local-prefill-length.yaml").read_text())
    del doc["spec"]["decode"]["extraArgs"]
    code, out = _check(tmp_path, [doc])
    assert code == 0 and not _rules(out)


def test_foreign_flags_reads_underscored_and_negated_spellings():
    _, flags = parse_flags(["vllm", "serve", "m", "--mem_fraction_static", "0.8", "--no-enable-dp-attention"])
    assert foreign_flags(flags) == ("--mem-fraction-static", "--enable-dp-attention")


def test_no_foreign_flag_begins_a_vllm_option():
    """argparse's allow_abbrev takes a unique prefix of an option string for it: a listed flag must begin none of the
    option strings vLLM's parser registers (the flags this project reads and the ones it knows were added or
    removed)."""
    from pdd_operator.vllm.added_flags_read import READ_ADDITIONS
    from pdd_operator.vllm.removed_flags import REMOVED_FLAGS
    known = {*READ_ADDITIONS, *REMOVED_FLAGS, "--kv-cache-dtype", "--tensor-parallel-size", "--max-num-seqs",
             "--max-num-batched-tokens", "--data-parallel-size", "--gpu-memory-utilization", "--max-model-len"}
    assert not [(f, o) for f in FOREIGN_FLAGS for o in known if o.startswith(f)]
