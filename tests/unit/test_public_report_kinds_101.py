"""Variants of what the hundred-and-first public-report set (tests/unit/data/public_reports_101: users' own P/D
manifests pasted in ai-dynamo/dynamo's tracker) taught, with negative controls.

1. The vLLM inside Dynamo's vLLM runtime images before 0.6.0 is read. ``nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.5.0``
   (ai-dynamo/dynamo#3643) named a Dynamo release the checker knew (its worker flags and defaults are read) but no
   vLLM release, because Dynamo's release-artifacts page begins at v0.6.0: every version-bounded rule was left
   unjudged, so a TP 8 prefill against a TP 4 decode came back "not checked" and a 0.5.0 prefill against a 0.6.0
   decode passed. The releases before 0.6.0 are mapped by their own ai-dynamo wheel's ``vllm`` pin and the pull
   request that moved the container with it (0.4.0: vLLM 0.10.0, ai-dynamo/dynamo#2114; 0.4.1 and 0.5.0: vLLM
   0.10.1.1, #2641), one table (``pdd_operator/vllm/wrapped_vllm_versions.json``) for every reader of an image.
   On those releases vLLM's NIXL handshake refuses what the rules say: a decode TP smaller than the prefill's
   (``divide(decode TP, prefill TP)``, v1/nixl_connector.py 0.10.1.1 l.916-918; 0.10.0 l.757), unequal block sizes
   (l.946-948), and a 0.11.0 peer (``NixlAgentMetadata.block_len`` against 0.11.0's ``block_lens``, l.66-77 and
   0.11.0 l.78-89, decoded strictly by msgspec). vllm-runtime 0.5.1, cut from its release branch after main moved
   the container to vLLM 0.11.0 (#3422), stays unknown.
"""

from __future__ import annotations

import json

import pytest
import yaml

RUNTIME = "nvcr.io/nvidia/ai-dynamo/vllm-runtime"
LLAMA70 = "meta-llama/Llama-3.1-70B-Instruct"


def _worker(image: str, words: list[str], *, shell: bool, gpus: int) -> dict:
    """A DynamoGraphDeployment worker running ``python3 -m dynamo.vllm`` with ``words``: as a ``/bin/sh -c`` line
    (the way #3643 wrote it) or as an argument list (Dynamo's examples)."""
    if shell:
        container = {"image": image, "command": ["/bin/sh", "-c"],
                     "args": [" ".join(["python3", "-m", "dynamo.vllm", *words])]}
    else:
        container = {"image": image, "command": ["python3", "-m", "dynamo.vllm"], "args": words}
    return {"componentType": "worker", "replicas": 1, "resources": {"limits": {"gpu": str(gpus)}},
            "extraPodSpec": {"mainContainer": container}}


def _graph(tmp_path, prefill: tuple[str, list[str], int], decode: tuple[str, list[str], int], *, shell: bool) -> str:
    """A graph of a frontend and one prefill and one decode worker; each role ``(runtime tag, extra words, TP)``."""
    services = {"Frontend": {"componentType": "frontend", "replicas": 1,
                             "extraPodSpec": {"mainContainer": {"image": f"{RUNTIME}:{prefill[0]}"}}}}
    for name, (tag, extra, tp), role in (("VllmPrefillWorker", prefill, ["--is-prefill-worker"]),
                                         ("VllmDecodeWorker", decode, [])):
        words = ["--model", LLAMA70, "--tensor-parallel-size", str(tp), *extra, *role]
        services[name] = _worker(f"{RUNTIME}:{tag}", words, shell=shell, gpus=tp)
    doc = {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "g"},
           "spec": {"services": services}}
    path = tmp_path / "graph.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def _check(capsys, path: str) -> tuple[int, set[str], set[str]]:
    from pdd_operator.cli import main

    code = main(["check", path, "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    findings = [f for r in out["results"] for f in r["findings"]]
    return (code, {f["rule"] for f in findings if f["severity"] == "error"},
            {f["rule"] for f in findings if f["severity"] == "warning"})


@pytest.mark.parametrize("shell", [True, False], ids=["sh-c-line", "args-list"])
@pytest.mark.parametrize("tag", ["0.4.0", "0.4.1", "0.5.0"])
def test_a_smaller_decode_tp_on_a_runtime_before_060_is_refused(tmp_path, capsys, tag, shell):
    code, errors, warnings = _check(capsys, _graph(tmp_path, (tag, [], 8), (tag, [], 4), shell=shell))
    assert code == 1 and "hetero-tp-p-gt-d-unsupported" in errors, (errors, warnings)
    assert "vllm-version-unknown" not in warnings


@pytest.mark.parametrize("tag", ["0.4.1", "0.5.0"])
def test_a_runtime_before_060_against_060_is_a_version_mismatch(tmp_path, capsys, tag):
    code, errors, _ = _check(capsys, _graph(tmp_path, (tag, [], 4), ("0.6.0", [], 4), shell=True))
    assert code == 1 and "vllm-version-mismatch" in errors, errors


def test_unequal_block_sizes_on_runtime_040_are_refused(tmp_path, capsys):
    code, errors, _ = _check(capsys, _graph(tmp_path, ("0.4.0", ["--block-size", "128"], 4), ("0.4.0", [], 4),
                                            shell=False))
    assert code == 1 and "block-size-hetero-unsupported" in errors, errors


@pytest.mark.parametrize("tag", ["0.4.0", "0.4.1", "0.5.0"])
def test_an_equal_pair_on_a_runtime_before_060_passes_with_its_version_known(tmp_path, capsys, tag):
    code, errors, warnings = _check(capsys, _graph(tmp_path, (tag, [], 4), (tag, [], 4), shell=True))
    assert code == 0 and not errors and "vllm-version-unknown" not in warnings, (errors, warnings)


def test_runtime_051_stays_unknown(tmp_path, capsys):
    """Negative control: 0.5.1's wheel still pins 0.10.1.1, but it was cut after main's container moved to vLLM
    0.11.0 (ai-dynamo/dynamo#3422) and no source read names the image's vLLM: never inferred."""
    code, errors, warnings = _check(capsys, _graph(tmp_path, ("0.5.1", [], 4), ("0.5.1", [], 4), shell=True))
    assert not errors and "vllm-version-unknown" in warnings, (code, errors, warnings)
