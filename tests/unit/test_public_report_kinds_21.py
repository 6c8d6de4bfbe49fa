"""Variants of what the twenty-first public-report set (tests/unit/data/public_reports_21) taught, with negative
controls.

One kind the set found: one side of a P/D deployment shared by several engines of the other side, whose labels and
names tell them apart rather than join them. llm-d's context-length-aware guide runs one ``decode`` Deployment beside
two prefill pools, ``prefill-short`` and ``prefill-long``, each with its own ``app`` label and a
``llm-d.ai/context-length-range`` label; its EPP sends each request's prefill to one pool and its decode to the one
decode, which pulls the KV from that pool (NIXL's ``kv_transfer_params`` name the remote engine). No label set and no
name is shared once the role is set aside, so nothing was paired and every fault in the group passed as "not checked".
Now, where one side of a model has a single engine in a namespace, every engine of the other side pairs with it
(:func:`pdd_operator.compat.manifests.pair_engines`); where both sides have several, which meet which is still not in
the files and they stay unpaired.
"""

from __future__ import annotations

from tests.unit.test_turn2_variants import KV, check, container, rules, workload

MODEL = "Qwen/Qwen3-0.6B"


def _engine(name, role, args=(), image="vllm/vllm-openai:v0.23.0", namespace="default", model=MODEL, **labels):
    """A Deployment ``name`` of one vLLM engine of ``role`` whose ``app`` label is its own name (as llm-d's
    context-length-aware guide writes them), plus any ``labels``."""
    doc = workload(name, role, container([model, "--kv-transfer-config", KV, *args], image=image), namespace=namespace,
                   app=name)
    for meta in (doc["metadata"], doc["spec"]["template"]["metadata"]):
        meta["labels"].update(labels)
    return doc


def _pools(long_args=(), long_image="vllm/vllm-openai:v0.23.0"):
    return [_engine("decode", "decode"),
            _engine("prefill-short", "prefill", **{"llm-d.ai/context-length-range": "0-1000"}),
            _engine("prefill-long", "prefill", long_args, image=long_image, **{"llm-d.ai/context-length-range": "1000-32768"})]


def test_two_prefill_pools_share_the_only_decode(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pools())
    assert code == 0 and not out["notChecked"], out
    assert sorted(r["object"].split(" + ")[0].split(" ")[0] for r in out["results"]) == [
        "Deployment/prefill-long", "Deployment/prefill-short"]
    assert all("the only decode engine of model Qwen/Qwen3-0.6B" in r["pairedBy"] for r in out["results"])


def test_a_fault_on_one_pool_is_refused_and_named_on_that_pool(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pools(long_image="vllm/vllm-openai:v0.24.0"))
    assert code == 1, out
    refused = [r["object"] for r in out["results"] if "vllm-version-mismatch" in
               {f["rule"] for f in r["findings"] if f["severity"] == "error"}]
    assert len(refused) == 1 and refused[0].startswith("Deployment/prefill-long"), out


def test_a_dtype_on_one_pool_is_refused(tmp_path, capsys):
    code, out = check(tmp_path, capsys, *_pools(long_args=["--dtype=float16"]))
    assert code == 1 and "dtype-mismatch" in rules(out, "error"), out


def test_one_prefill_shared_by_two_decode_pools(tmp_path, capsys):
    docs = [_engine("prefill", "prefill"), _engine("decode-chat", "decode", tier="chat"),
            _engine("decode-batch", "decode", ["--kv-cache-dtype=fp8"], tier="batch")]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 1 and len(out["results"]) == 2 and not out["notChecked"], out
    by_decode = {r["object"].split(" + ")[1].split(" ")[0]: {f["rule"] for f in r["findings"] if f["severity"] == "error"}
                 for r in out["results"]}
    assert "kv-cache-dtype-mismatch" in by_decode["Deployment/decode-batch"]
    assert "kv-cache-dtype-mismatch" not in by_decode["Deployment/decode-chat"]


def test_several_of_each_side_without_a_shared_label_stay_unpaired(tmp_path, capsys):
    docs = [_engine("prefill-short", "prefill"), _engine("prefill-long", "prefill"),
            _engine("decode-fast", "decode"), _engine("decode-slow", "decode")]
    code, out = check(tmp_path, capsys, *docs)
    assert code == 3 and not out["results"] and len(out["notChecked"]) == 4, out


def test_pools_of_another_model_or_namespace_do_not_join(tmp_path, capsys):
    docs = [_engine("decode", "decode"), _engine("prefill-short", "prefill"),
            _engine("prefill-llama", "prefill", model="meta-llama/Llama-3.1-8B-Instruct"),
            _engine("prefill-other", "prefill", namespace="team-b")]
    code, out = check(tmp_path, capsys, *docs)
    paired = [r["object"].split(" + ")[0].split(" ")[0] for r in out["results"]]
    assert paired == ["Deployment/prefill-short"], out
    assert len(out["notChecked"]) == 2 and code == 3, out
