"""Variants of what the hundred-and-twenty-fifth public-report set (tests/unit/data/public_reports_125: NeMo Gym's
vLLM 0.29/0.30 Nemotron P/D configs) taught: the Mamba state dtypes of a hybrid SSM model must be equal on both roles.

vLLM resolves a hybrid model's conv state dtype from ``--mamba-cache-dtype`` (``auto``: the model's dtype) and its
temporal (SSM) state dtype from ``--mamba-ssm-cache-dtype`` (``auto``: the conv state's, or for NemotronH the
checkpoint's ``mamba_ssm_cache_dtype``, else float32): model_executor/layers/mamba/mamba_utils.py
``_mamba_state_dtype`` and model_executor/models/config.py ``update_mamba_ssm_cache_dtype``. Neither is a factor of
the NIXL compatibility hash, the handshake skips the block-length check of Mamba models, and the decode reads each
transferred request's states with its own sizes at the prefill's offsets (0.22.0-0.34.0 nixl worker
``_build_mamba_remote`` descriptors): a state of another dtype arrives as garbage while requests return 200. The
``mamba-state-dtype-mismatch`` rule reports it for Mamba1, Mamba2 and Gated DeltaNet models in every input format,
warns where ``auto`` rests on what is not known (an unknown checkpoint's dtype; the model hooks that fill an ``auto``
SSM dtype from the checkpoint, NemotronH's and Qwen3.5's) or the release was not read (before 0.22.0), and leaves
equal dtypes, dense models and hybrids of unknown kind (not checked) alone.
"""

from __future__ import annotations

import json

import pytest
import yaml

from pdd_operator.cli import main
from pdd_operator.compat.engine import evaluate
from pdd_operator.vllm.must_match import compat_hash
from tests.helpers import hybrid
from tests.unit.test_turn2_variants import check, container, workload

RULE = "mamba-state-dtype-mismatch"
KV_P = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_producer"})
KV_D = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_consumer"})
DS = [{"name": "VLLM_SSM_CONV_STATE_LAYOUT", "value": "DS"}]


def _pair(model, image, p_extra, d_extra, tp="2"):
    common = ["--tensor-parallel-size", tp, "--trust-remote-code", "--no-disable-hybrid-kv-cache-manager"]
    return [workload("m-prefill", "prefill", container([model, *common, "--kv-transfer-config", KV_P, *p_extra],
                                                        image=image, env=DS, gpus=int(tp))),
            workload("m-decode", "decode", container([model, *common, "--kv-transfer-config", KV_D, *d_extra],
                                                      image=image, env=DS, gpus=int(tp)))]


def _findings(out, rule=RULE):
    return [f for r in out["results"] for f in r["findings"] if f["rule"] == rule]


@pytest.mark.parametrize(("model", "image", "p_extra", "d_extra"), [
    # Gated DeltaNet (Qwen3.5) on 0.26.0: the decode's SSM state in float16, the prefill's in float32
    ("Qwen/Qwen3.5-35B-A3B", "vllm/vllm-openai:v0.26.0", ["--mamba-ssm-cache-dtype", "float32"],
     ["--mamba-ssm-cache-dtype", "float16"]),
    # Mamba2 (Nemotron 3 Nano) on 0.34.0: the conv state in float32 on the decode only
    ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "vllm/vllm-openai:v0.34.0", [], ["--mamba-cache-dtype", "float32"]),
    # equal element size, other encoding: bfloat16 against float16 (0.22.0, the first release read)
    ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8", "vllm/vllm-openai:v0.22.0", ["--mamba-ssm-cache-dtype=bfloat16"],
     ["--mamba-ssm-cache-dtype=float16"]),
])
def test_differing_mamba_state_dtypes_are_an_error(tmp_path, capsys, model, image, p_extra, d_extra):
    code, out = check(tmp_path, capsys, *_pair(model, image, p_extra, d_extra))
    found = _findings(out)
    assert code == 1 and found and all(f["severity"] == "error" for f in found), out


@pytest.mark.parametrize(("model", "image", "p_extra", "d_extra"), [
    ("Qwen/Qwen3.5-35B-A3B", "vllm/vllm-openai:v0.30.0", ["--mamba-ssm-cache-dtype", "float16"],
     ["--mamba-ssm-cache-dtype", "float16"]),                                       # equal on both
    ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "vllm/vllm-openai:v0.34.0", ["--mamba-cache-dtype", "bfloat16"],
     []),                                                                           # explicit = what auto gives
    ("meta-llama/Llama-3.1-8B-Instruct", "vllm/vllm-openai:v0.30.0", ["--mamba-ssm-cache-dtype", "float16"],
     []),                                                                           # a dense model has no state
])
def test_equal_or_irrelevant_mamba_state_dtypes_pass(tmp_path, capsys, model, image, p_extra, d_extra):
    _, out = check(tmp_path, capsys, *_pair(model, image, p_extra, d_extra))
    assert not _findings(out), out


@pytest.mark.parametrize(("model", "p_extra", "d_extra"), [
    # a NemotronH auto SSM dtype takes the checkpoint's config.json mamba_ssm_cache_dtype (else float32)
    ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8", ["--mamba-ssm-cache-dtype", "float16"], []),
    # Qwen3.5's hook gives an auto SSM dtype its config.json mamba_ssm_dtype (float32 in its checkpoints), not the
    # conv state's bfloat16: an error here would refuse a pair that runs
    ("Qwen/Qwen3.5-35B-A3B", [], ["--mamba-ssm-cache-dtype", "float32"]),
    # an auto conv dtype is the model's dtype, and this FP8 checkpoint's config.json is not known here
    ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8", [], ["--mamba-cache-dtype", "float32"]),
])
def test_an_auto_dtype_resting_on_the_checkpoint_is_a_warning(tmp_path, capsys, model, p_extra, d_extra):
    _, out = check(tmp_path, capsys, *_pair(model, "vllm/vllm-openai:v0.30.0", p_extra, d_extra))
    found = _findings(out)
    assert found and all(f["severity"] == "warning" for f in found), out


def test_a_release_before_the_read_ones_gets_a_warning(tmp_path, capsys):
    _, out = check(tmp_path, capsys, *_pair("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8", "vllm/vllm-openai:v0.20.2",
                                            ["--mamba-ssm-cache-dtype", "float32"], ["--mamba-ssm-cache-dtype", "float16"]))
    found = _findings(out)
    assert found and all(f["severity"] == "warning" for f in found), out


def test_a_hybrid_of_unknown_kind_is_not_checked(tmp_path, capsys):
    # MiniMax-M1's linear attention keeps one state whose dtype only --mamba-cache-dtype sets
    code, out = check(tmp_path, capsys, *_pair("MiniMaxAI/MiniMax-M1-40k", "vllm/vllm-openai:v0.30.0",
                                               ["--mamba-ssm-cache-dtype", "float32"],
                                               ["--mamba-ssm-cache-dtype", "float16"], tp="8"))
    assert not _findings(out) and any(RULE in n.get("reason", "") or RULE in json.dumps(n)
                                      for n in out.get("notChecked", [])), out


def test_a_pddeployment_with_differing_extra_args_is_refused_and_hashed():
    differ = hybrid(prefill={"extraArgs": ["--mamba-ssm-cache-dtype", "float32"]},
                    decode={"extraArgs": ["--mamba-ssm-cache-dtype", "float16"]},
                    engine={"image": "vllm/vllm-openai:v0.30.0"})
    same = hybrid(prefill={"extraArgs": ["--mamba-ssm-cache-dtype", "float16"]},
                  decode={"extraArgs": ["--mamba-ssm-cache-dtype", "float16"]},
                  engine={"image": "vllm/vllm-openai:v0.30.0"})
    assert any(f.rule == RULE and f.severity == "error" for f in evaluate(differ).findings)
    assert not any(f.rule == RULE for f in evaluate(same).findings)
    # the compat hash follows the dtypes: pods of either setting are never paired during a rollout
    base = hybrid(engine={"image": "vllm/vllm-openai:v0.30.0"})
    assert len({compat_hash(base), compat_hash(same), compat_hash(differ)}) == 3


def test_a_dynamo_graph_with_one_worker_on_float16_is_refused(tmp_path, capsys):
    def worker(role, extra):
        return {"name": f"Vllm{role.title()}Worker", "type": role, "replicas": 1, "podTemplate": {"spec": {
            "containers": [{"name": "main", "image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.0",
                            "command": ["python3", "-m", "dynamo.vllm"], "env": DS,
                            "args": ["--model", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-FP8", "--disaggregation-mode",
                                     role, "--kv-transfer-config", KV_P if role == "prefill" else KV_D,
                                     "--mamba-cache-dtype", "float32", *extra],
                            "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}
    dgd = {"apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeployment", "metadata": {"name": "nano"},
           "spec": {"components": [
               {"name": "Frontend", "type": "frontend", "replicas": 1, "podTemplate": {"spec": {"containers": [
                   {"name": "main", "image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.0"}]}}},
               worker("decode", ["--mamba-ssm-cache-dtype", "float16"]), worker("prefill", ["--mamba-ssm-cache-dtype",
                                                                                               "float32"])]}}
    path = tmp_path / "dgd.yaml"
    path.write_text(yaml.safe_dump(dgd))
    code = main(["check", str(path), "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    found = _findings(out)
    assert code == 1 and found and all(f["severity"] == "error" for f in found), out
