"""Variants of what the fifty-eighth public-report set (tests/unit/data/public_reports_58) taught: PDDeployments
written by users new to the API, from public P/D setups (llm-d's gpt-oss guide, Dynamo's vLLM examples).

- ``pdd check`` and the admission webhook give one verdict: a spec the API models refuse is refused by both with its
  ``[spec-invalid]`` fields (exit 1), not read by ``pdd check`` as a file it could not read (exit 2);
- ``spec.engine.vllmVersion`` that names another release than the engine image's tag is said
  (``vllm-version-image-mismatch``, a warning): the engines run the tag's release, the rules were judged for the other;
- a finding on a PDDeployment names the PDDeployment field to change (``spec.decode.tensorParallelSize``, not
  ``tensorParallelSize``; the extraArgs flag that raises the rank count, not ``--data-parallel-size``), and the same
  rule on a hand-written manifest still speaks of its containers' flags.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import yaml

from pdd_operator.cli import main
from pdd_operator.controller.webhook import review

ROOT = Path(__file__).resolve().parents[2]
LLAMA = yaml.safe_load((ROOT / "examples" / "llama-dense-pd.yaml").read_text())
CRD = yaml.safe_load((ROOT / "crds" / "pddeployment.yaml").read_text())["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
SPEC_PATH = re.compile(r"\bspec(?:\.[A-Za-z][A-Za-z0-9]*)+")


def _doc(mutate=None, base=LLAMA) -> dict:
    doc = copy.deepcopy(base)
    if mutate:
        mutate(doc["spec"])
    return doc


def _check(tmp_path, *docs, name="pdd.yaml") -> tuple[int, dict]:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs))
    import io
    from contextlib import redirect_stdout
    buf = io.StringIO()
    with redirect_stdout(buf):
        code = main(["check", str(path), "-o", "json"])
    return code, json.loads(buf.getvalue())


def _findings(out: dict) -> list[dict]:
    return [f for r in out["results"] for f in r["findings"]]


def _in_schema(path: str) -> bool:
    node = CRD
    for part in path.split("."):
        node = (node.get("properties") or {}).get(part)
        if node is None:
            return False
    return True


# --- one verdict for pdd check and the webhook on a spec the API refuses ------------------------------------------


REFUSED_FIELDS = {
    "backend miscased": (lambda s: s.setdefault("kvTransfer", {}).update(backends=["libfabric"]),
                         "spec.kvTransfer.backends[0]"),
    "connector miscased": (lambda s: s.setdefault("kvTransfer", {}).update(connector="nixlconnector"),
                           "spec.kvTransfer.connector"),
    "kv dtype miscased": (lambda s: s.setdefault("kvCache", {}).update(dtype="FP8"), "spec.kvCache.dtype"),
    "field typo": (lambda s: s["decode"].update(tensorParalelSize=2), "spec.decode.tensorParalelSize"),
    "out of range": (lambda s: s["prefill"].update(gpuMemoryUtilization=1.5), "spec.prefill.gpuMemoryUtilization"),
    "vllm-style key": (lambda s: s.update(kv_transfer_config={"kv_connector": "NixlConnector"}),
                       "spec.kv_transfer_config"),
}


@pytest.mark.parametrize("case", sorted(REFUSED_FIELDS))
def test_check_refuses_what_the_webhook_refuses_naming_the_field(case, tmp_path):
    mutate, field = REFUSED_FIELDS[case]
    doc = _doc(mutate)
    code, out = _check(tmp_path, doc)
    assert code == 1 and out["inputErrors"] == [], out
    (result,) = out["results"]
    assert result["object"] == "PDDeployment/llama-8b" and result["compatible"] is False
    assert result["vllmVersion"] == "0.20.2"  # the version the spec states, for the reader
    assert [f["rule"] for f in result["findings"]] == ["spec-invalid"]
    assert field in result["findings"][0]["fields"] and field in result["findings"][0]["fix"]

    verdict = review("CREATE", doc)
    assert not verdict.allowed
    refused = [line for line in verdict.message.splitlines() if line.startswith("[spec-invalid] ")]
    assert refused == [f"[spec-invalid] {result['findings'][0]['message']} Fix: {result['findings'][0]['fix']}"]


def test_a_refused_spec_beside_others_is_one_result_among_them(tmp_path):
    bad = _doc(lambda s: s["prefill"].update(tensorParallelSize=0))
    good = _doc(lambda s: s.update(model={**s["model"], "name": "Qwen/Qwen3-8B"}))
    good["metadata"]["name"] = "qwen"
    code, out = _check(tmp_path, bad, good)
    assert code == 1
    assert [(r["object"], r["compatible"]) for r in out["results"]] == [("PDDeployment/llama-8b", False),
                                                                        ("PDDeployment/qwen", True)]


def test_render_and_a_foreign_api_version_still_stop_as_unreadable_input(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(_doc(lambda s: s["decode"].update(tensorParalelSize=2))))
    assert main(["render", str(path)]) == 2
    assert "spec.decode.tensorParalelSize" in capsys.readouterr().err
    other = _doc()
    other["apiVersion"] = "pdd-operator.dev/v1beta1"
    code, out = _check(tmp_path, other)
    assert code == 2 and out["results"] == [] and "apiVersion" in out["inputErrors"][0]


# --- spec.engine.vllmVersion against the image tag ----------------------------------------------------------------


@pytest.mark.parametrize(("image", "version", "said"), [
    ("vllm/vllm-openai:v0.22.0", "0.20.2", ("0.20.2", "0.22.0")),           # set 58: the README's value kept
    ("ghcr.io/pdd-operator/vllm-nixl:v0.25.1", "0.20.2", ("0.20.2", "0.25.1")),
    ("vllm/vllm-openai:v0.17.1", "v0.25.1", ("0.25.1", "0.17.1")),          # older image, newer label
    ("rocm/vllm:rocm6.3.1_vllm_0.9.2_20250521", "0.10.0", ("0.10.0", "0.9.2")),  # AMD's tag names the release
    ("vllm/vllm-openai:v0.20.2-cu129", "0.20.2", None),                     # the same release, a CUDA suffix
    ("vllm/vllm-openai:v0.20.2", "v0.20.2", None),
    ("ghcr.io/llm-d/llm-d-cuda:v0.5.0", "0.20.2", None),                    # another project's tag: no vLLM release
    ("vllm/vllm-openai:latest", "0.22.0", None),
    ("vllm/vllm-openai@sha256:" + "a" * 64, "0.22.0", None),
    ("vllm/vllm-openai:v0.22.0", None, None),                               # no vllmVersion: the tag is the version
])
def test_vllm_version_against_the_image_tag(image, version, said, tmp_path):
    def mutate(spec):
        spec["engine"] = {"image": image, **({"vllmVersion": version} if version else {})}

    doc = _doc(mutate)
    code, out = _check(tmp_path, doc)
    found = [f for f in _findings(out) if f["rule"] == "vllm-version-image-mismatch"]
    verdict = review("CREATE", doc)
    warned = [w for w in verdict.warnings if w.startswith("[vllm-version-image-mismatch] ")]
    if said is None:
        assert found == [] and warned == []
        return
    stated, tagged = said
    (f,) = found
    # vLLM reads neither field: never a refusal of its own; AMD's ROCm image of a release before 0.14.0 holds no NIXL,
    # which nixl-not-in-image refuses (set 71)
    errors = {x["rule"] for x in _findings(out) if x["severity"] == "error"}
    assert f["severity"] == "warning"
    assert errors == ({"nixl-not-in-image"} if image.startswith("rocm/") else set())
    assert code == (1 if errors else 0) and verdict.allowed == (not errors)
    assert f"vLLM {stated}" in f["message"] and f"vLLM {tagged}" in f["message"]
    assert f"spec.engine.vllmVersion to {tagged}" in f["fix"] and "spec.engine.image" in f["fix"]
    assert len(warned) == 1


def test_a_hand_written_pair_is_never_judged_by_the_pddeployment_version_rule(tmp_path):
    from tests.unit.test_turn2_variants import POD_IP, workload

    kv = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})
    docs = [workload(f"q-{role}", role, {"name": "vllm", "image": "vllm/vllm-openai:v0.22.0", "command": ["vllm", "serve"],
                                         "args": ["Qwen/Qwen3-0.6B", "--kv-transfer-config", kv], "env": [POD_IP],
                                         "resources": {"limits": {"nvidia.com/gpu": "1"}}}, app="q")
            for role in ("prefill", "decode")]
    code, out = _check(tmp_path, *docs)
    assert out["results"] and "vllm-version-image-mismatch" not in {f["rule"] for f in _findings(out)}


# --- fixes on a PDDeployment name the field to change -----------------------------------------------------------


def _fixes(out: dict, rule: str) -> list[str]:
    return [f["fix"] for f in _findings(out) if f["rule"] == rule]


@pytest.mark.parametrize(("role", "flag", "field"), [
    ("decode", "--tensor-parallel-size=4", "spec.decode.tensorParallelSize"),   # set 58: llm-d's decode flag
    ("prefill", "-tp", "spec.prefill.tensorParallelSize"),
    ("decode", "--pipeline-parallel-size", "spec.decode.pipelineParallelSize"),
    ("prefill", "--block-size=16", "spec.prefill.blockSize"),
    ("decode", "--gpu-memory-utilization", "spec.decode.gpuMemoryUtilization"),
    ("prefill", "--max-model-len", "spec.model.maxModelLen"),
])
def test_a_managed_flag_in_extra_args_names_the_field_that_sets_it(role, flag, field, tmp_path):
    args = [flag] if "=" in flag else [flag, "2" if "util" not in flag else "0.8"]
    _, out = _check(tmp_path, _doc(lambda s: s[role].update(extraArgs=args)))
    (fix,) = _fixes(out, "extra-args-managed-flag")
    assert f"from spec.{role}.extraArgs" in fix and field in fix, fix
    assert all(_in_schema(p) for p in SPEC_PATH.findall(fix)), fix


@pytest.mark.parametrize(("args", "names", "field"), [
    (["--tensor-parallel-size=4"], "--tensor-parallel-size", "spec.decode.tensorParallelSize"),  # set 58
    (["-tp", "4"], "-tp", "spec.decode.tensorParallelSize"),  # the example's decode runs TP 2
    (["--pipeline-parallel-size", "2"], "--pipeline-parallel-size", "spec.decode.pipelineParallelSize"),
    (["--data-parallel-size", "2"], "--data-parallel-size", "spec.decode.replicas"),
])
def test_a_rank_count_above_the_pods_gpus_names_the_extra_arg_that_raised_it(args, names, field, tmp_path):
    _, out = _check(tmp_path, _doc(lambda s: s["decode"].update(extraArgs=args)))
    (fix,) = _fixes(out, "parallelism-gpu-count")
    assert fix.startswith(f"Remove {names} from spec.decode.extraArgs") and field in fix, fix
    if "data-parallel" not in names:
        assert "--data-parallel-size" not in fix and "replicas" not in fix, fix
    assert all(_in_schema(p) for p in SPEC_PATH.findall(fix)), fix


BLOCK_SIZE_CASES = {
    # rule: (prefill block, decode block, prefill TP, decode TP, other spec changes)
    "block-size-direction": (128, 64, 1, 2, {}),                          # set 58
    "block-size-push-equal": (16, 32, 1, 1, {"kvTransfer": {"connector": "NixlPushConnector"},
                                             "engine": {"image": "vllm/vllm-openai:v0.26.0"}}),
    "block-size-tp-shrink": (16, 32, 2, 1, {}),
    "block-size-hetero-unsupported": (16, 32, 1, 1, {"engine": {"image": "vllm/vllm-openai:v0.11.0"}}),
    "block-size-hma": (64, 128, 2, 2, {"model": {"name": "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8",
                                                 "hfArchitecture": "NemotronHForCausalLM", "trustRemoteCode": True},
                                       "engine": {"image": "vllm/vllm-openai:v0.25.1"}}),
}


@pytest.mark.parametrize("rule_id", sorted(BLOCK_SIZE_CASES))
def test_block_size_fixes_name_both_roles_block_size_fields(rule_id, tmp_path):
    pb, db, ptp, dtp, extra = BLOCK_SIZE_CASES[rule_id]

    def mutate(spec):
        spec["prefill"].update(blockSize=pb, tensorParallelSize=ptp)
        spec["decode"].update(blockSize=db, tensorParallelSize=dtp)
        spec.update(copy.deepcopy(extra))

    _, out = _check(tmp_path, _doc(mutate))
    fixes = _fixes(out, rule_id)
    assert fixes, [f["rule"] for f in _findings(out)]
    for fix in fixes:
        assert "spec.prefill.blockSize and spec.decode.blockSize" in fix, fix
        assert all(_in_schema(p) for p in SPEC_PATH.findall(fix)), fix


def test_block_size_fixes_on_a_deployment_pair_speak_of_its_containers(tmp_path):
    from tests.unit.test_turn2_variants import POD_IP, workload

    kv = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})
    docs = [workload(f"q-{role}", role, {"name": "vllm", "image": "vllm/vllm-openai:v0.25.1", "command": ["vllm", "serve"],
                                         "args": ["Qwen/Qwen3-8B", "--kv-transfer-config", kv, "--block-size", size],
                                         "env": [POD_IP], "resources": {"limits": {"nvidia.com/gpu": "1"}}}, app="q")
            for role, size in (("prefill", "128"), ("decode", "64"))]
    code, out = _check(tmp_path, *docs)
    (fix,) = _fixes(out, "block-size-direction")
    assert code == 1 and not SPEC_PATH.search(fix), fix
    assert "--block-size on the prefill and decode containers" in fix and "--block-size on the decode container" in fix


@pytest.mark.parametrize("version", ["0.13.0", "0.17.1", "0.19.1"])
def test_kv_events_forcing_hma_off_names_the_extra_arg(version, tmp_path):
    events = json.dumps({"publisher": "zmq", "topic": "kv-events", "endpoint": "tcp://*:20081",
                         "enable_kv_cache_events": True})

    def mutate(spec):
        spec["engine"] = {"image": f"vllm/vllm-openai:v{version}"}
        spec["prefill"]["extraArgs"] = ["--kv-events-config", events, "--no-disable-hybrid-kv-cache-manager"]
        spec["decode"]["extraArgs"] = ["--no-disable-hybrid-kv-cache-manager"]

    _, out = _check(tmp_path, _doc(mutate))
    fixes = [f["fix"] for f in _findings(out) if f["rule"] == "hma-explicit-forced-off" and "kv-events" in f["message"]]
    assert fixes and all(fix.startswith("Remove --kv-events-config from spec.prefill.extraArgs") for fix in fixes), out
