"""``pdd check`` throughput on one core, against JSON-schema validation of the same objects.

Workload: a fixed, seeded corpus of PDDeployment specs drawn over architectures, vLLM versions, TP,
PP, block sizes and connectors (most random combinations break at least one rule). For each spec the checker does what
``pdd check`` does per object: model validation, rendering the engines, evaluating every rule.
Baseline: validating the same objects against the CRD's OpenAPI schema with ``jsonschema`` (what the
API server's schema validation does), measured in the same run. Pinned to one CPU when possible.

Output: specs per second for both, and the ratio (checker time per spec / schema validation time).
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))

import jsonschema  # noqa: E402

from pdd_operator.api.crd import build_crd  # noqa: E402
from pdd_operator.api.spec import PDDeploymentSpec  # noqa: E402
from pdd_operator.compat import evaluate  # noqa: E402

ARCHS = [("LlamaForCausalLM", 8), ("NemotronHForCausalLM", 8), ("DeepseekV3ForCausalLM", 128),
         ("Qwen3NextForCausalLM", 2), ("MixtralForCausalLM", 8), ("WhisperForConditionalGeneration", 8)]
VERSIONS = ["0.19.1", "0.20.2", "0.24.0", "0.27.0", "0.31.0", "0.33.0"]


def corpus(n: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        arch, heads = rng.choice(ARCHS)
        spec = {
            "model": {"name": f"org/model-{i % 17}", "hfArchitecture": arch, "numKvHeads": heads, "maxModelLen": 8192},
            "engine": {"image": f"vllm/vllm-openai:v{rng.choice(VERSIONS)}"},
            "kvTransfer": {"connector": rng.choice(["NixlConnector", "NixlConnector", "NixlPushConnector"])},
            "network": {"rdma": {"resourceName": "rdma/ib", "count": 1}},
            "prefill": {"replicas": rng.randint(1, 4), "tensorParallelSize": rng.choice([1, 2, 4, 8]),
                        "pipelineParallelSize": rng.choice([1, 1, 1, 2]), "blockSize": rng.choice([16, 32, 64, 128])},
            "decode": {"replicas": rng.randint(1, 4), "tensorParallelSize": rng.choice([1, 2, 3, 4, 8]),
                       "blockSize": rng.choice([16, 32, 64, 128])},
        }
        out.append({"apiVersion": "pdd-operator.dev/v1alpha1", "kind": "PDDeployment",
                    "metadata": {"name": f"d{i}"}, "spec": spec})
    return out


def timed(fn, items, rounds: int) -> list[float]:
    """Seconds per item for each round."""
    out = []
    for _ in range(rounds):
        start = time.perf_counter()
        for item in items:
            fn(item)
        out.append((time.perf_counter() - start) / len(items))
    return out


def main() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    docs = corpus(500)
    schema = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    validator = jsonschema.Draft7Validator(schema)

    def check(doc: dict) -> int:
        return len(evaluate(PDDeploymentSpec.model_validate(doc["spec"])).errors)

    def schema_only(doc: dict) -> int:
        return sum(1 for _ in validator.iter_errors(doc))

    refused = sum(1 for d in docs if check(d))  # warm-up, and the share of refused specs
    timed(schema_only, docs[:50], 1)
    rounds = 5
    t_check = statistics.median(timed(check, docs, rounds))
    t_schema = statistics.median(timed(schema_only, docs, rounds))
    print(f"corpus: {len(docs)} specs, {refused} refused by the checker; {rounds} rounds, median")
    print(f"pdd check:            {1 / t_check:9.0f} specs/s  ({t_check * 1e6:7.1f} us/spec)")
    print(f"schema validation:    {1 / t_schema:9.0f} specs/s  ({t_schema * 1e6:7.1f} us/spec)  [baseline]")
    print(f"ratio check/baseline: {t_check / t_schema:9.2f}x time per spec")


if __name__ == "__main__":
    main()
