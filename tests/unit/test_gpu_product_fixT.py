"""One definition of the GPU a role is pinned to (issue 9, fixT item 1): :mod:`pdd_operator.compat.gpu_product` reads
node selectors and required node affinity (In / NotIn / Exists, ORed terms) on the labels GPU feature discovery, GKE,
Karpenter / EKS Auto Mode set for the GPU, and the instance type every cloud (AKS included) sets, and every rule that
asks for the GPU (weights-exceed-gpu-memory, nixl-needs-v1-engine, kv-connector-v0-only, attention-backend-mismatch,
the KV cache dtype hook, triton-attn-layout) reads it there. Before, the weights and V0 rules read three labels
without NotIn and the attention rules ``nvidia.com/gpu.product`` alone."""

from __future__ import annotations

import pytest

from pdd_operator.compat.gpu_memory import max_memory_gib
from pdd_operator.compat.gpu_product import (
    gpu_products,
    instance_gpu,
    pinned_gpu_capability,
    pinned_gpu_major,
    pinned_gpu_product,
)
from pdd_operator.compat.placement import node_terms

PRODUCT = "nvidia.com/gpu.product"


def affinity(*terms: list[dict]) -> dict:
    """A pod spec with required node affinity: each argument one ORed term's matchExpressions."""
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": list(t)} for t in terms]}}}}


def expr(key: str, op: str, *values: str) -> dict:
    return {"key": key, "operator": op, **({"values": list(values)} if values else {})}


@pytest.mark.parametrize(("pod", "products", "capability"), [
    # selectors, one label per provider
    ({"nodeSelector": {PRODUCT: "NVIDIA-H100-80GB-HBM3"}}, {"NVIDIA-H100-80GB-HBM3"}, (9, 0)),
    ({"nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"}}, {"nvidia-tesla-t4"}, (7, 5)),
    ({"nodeSelector": {"karpenter.k8s.aws/instance-gpu-name": "a10g"}}, {"a10g"}, (8, 6)),
    ({"nodeSelector": {"eks.amazonaws.com/instance-gpu-name": "l40s"}}, {"l40s"}, (8, 9)),
    ({"nodeSelector": {"node.kubernetes.io/instance-type": "p4d.24xlarge"}}, {"NVIDIA-A100-SXM4-40GB"}, (8, 0)),
    ({"nodeSelector": {"node.kubernetes.io/instance-type": "a3-ultragpu-8g"}}, {"NVIDIA-H200-141GB"}, (9, 0)),
    ({"nodeSelector": {"node.kubernetes.io/instance-type": "Standard_ND96isr_H100_v5"}}, {"NVIDIA-H100-80GB-HBM3"},
     (9, 0)),                                                                              # AKS: the VM size
    ({"nodeSelector": {"karpenter.k8s.aws/instance-family": "g4dn"}}, {"Tesla-T4"}, (7, 5)),
    # required node affinity: In, In with NotIn, Exists, NotIn alone
    (affinity([expr(PRODUCT, "In", "Tesla-V100-SXM2-16GB", "NVIDIA-A100-SXM4-80GB"),
               expr(PRODUCT, "NotIn", "NVIDIA-A100-SXM4-80GB")]), {"Tesla-V100-SXM2-16GB"}, (7, 0)),
    (affinity([expr(PRODUCT, "Exists")]), None, None),
    (affinity([expr(PRODUCT, "NotIn", "Tesla-T4")]), None, None),
    # several products: the set, one capability only where all share it
    (affinity([expr(PRODUCT, "In", "NVIDIA-H100-80GB-HBM3", "NVIDIA-H200")]), {"NVIDIA-H100-80GB-HBM3", "NVIDIA-H200"},
     (9, 0)),
    (affinity([expr(PRODUCT, "In", "NVIDIA-H100-80GB-HBM3", "NVIDIA-B200")]), {"NVIDIA-H100-80GB-HBM3", "NVIDIA-B200"},
     None),
    # ORed terms: each must pin; a term that pins nothing leaves the GPU open
    (affinity([expr(PRODUCT, "In", "Tesla-T4")], [expr("node.kubernetes.io/instance-type", "In", "g4dn.xlarge")]),
     {"Tesla-T4"}, (7, 5)),
    (affinity([expr(PRODUCT, "In", "Tesla-T4")], [expr("topology.kubernetes.io/zone", "In", "a")]), None, None),
    # unknown names: the product as written, no capability
    ({"nodeSelector": {PRODUCT: "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition"}},
     {"NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition"}, None),
    ({"nodeSelector": {"node.kubernetes.io/instance-type": "m5.xlarge"}}, {"m5.xlarge"}, None),
    # the product label wins over another label of the same term
    ({"nodeSelector": {PRODUCT: "NVIDIA-L4", "node.kubernetes.io/instance-type": "g6.xlarge"}}, {"NVIDIA-L4"}, (8, 9)),
    # GPU feature discovery's compute capability labels alone
    ({"nodeSelector": {"nvidia.com/gpu.compute.major": "7", "nvidia.com/gpu.compute.minor": "0"}}, None, (7, 0)),
    ({}, None, None),
])
def test_what_a_placement_pins(pod, products, capability):
    nodes = node_terms(pod)
    assert gpu_products(nodes) == (frozenset(products) if products else None)
    assert pinned_gpu_capability(nodes) == capability
    assert pinned_gpu_major(nodes) == (capability[0] if capability else None) or capability is None
    assert pinned_gpu_product(nodes) == (next(iter(products)) if products and len(products) == 1 else None)


def test_a_major_pinned_alone_and_products_of_one_major():
    assert pinned_gpu_major(node_terms({"nodeSelector": {"nvidia.com/gpu.compute.major": "7"}})) == 7
    assert pinned_gpu_capability(node_terms({"nodeSelector": {"nvidia.com/gpu.compute.major": "7"}})) is None
    nodes = node_terms(affinity([expr(PRODUCT, "In", "NVIDIA-A100-SXM4-80GB", "NVIDIA-L4")]))
    assert pinned_gpu_major(nodes) == 8 and pinned_gpu_capability(nodes) is None
    assert pinned_gpu_major(node_terms({"nodeSelector": {PRODUCT: "NVIDIA-RTX-PRO-6000"}})) is None


@pytest.mark.parametrize(("machine", "gpu", "gib"), [
    ("p3.2xlarge", "Tesla-V100-SXM2-16GB", 16), ("p3dn.24xlarge", "Tesla-V100-SXM2-32GB", 32),
    ("p4d.24xlarge", "NVIDIA-A100-SXM4-40GB", 40), ("p4de.24xlarge", "NVIDIA-A100-SXM4-80GB", 80),
    ("p5.48xlarge", "NVIDIA-H100-80GB-HBM3", 80), ("p5e.48xlarge", "NVIDIA-H200-141GB", 141),
    ("p5en.48xlarge", "NVIDIA-H200-141GB", 141), ("p6-b200.48xlarge", "NVIDIA-B200", 192),
    ("g5.12xlarge", "NVIDIA-A10G", 24), ("g6e.48xlarge", "NVIDIA-L40S", 48), ("g6", "NVIDIA-L4", 24),
    ("a2-highgpu-8g", "NVIDIA-A100-SXM4-40GB", 40), ("a2-ultragpu-8g", "NVIDIA-A100-SXM4-80GB", 80),
    ("a3-megagpu-8g", "NVIDIA-H100-80GB-HBM3", 80), ("a4-highgpu-8g", "NVIDIA-B200", 192),
    ("g2-standard-48", "NVIDIA-L4", 24),
    ("Standard_ND96asr_v4", "NVIDIA-A100-SXM4-40GB", 40), ("Standard_ND96amsr_A100_v4", "NVIDIA-A100-80GB", 80),
    ("Standard_NC24ads_A100_v4", "NVIDIA-A100-80GB", 80), ("Standard_NC40ads_H100_v5", "NVIDIA-H100-NVL", 94),
    ("Standard_ND96isr_H200_v5", "NVIDIA-H200-141GB", 141), ("Standard_NC4as_T4_v3", "Tesla-T4", None),
    ("Standard_NC6s_v3", "Tesla-V100-PCIE-16GB", 16),
    ("m5.xlarge", None, None), ("n1-standard-8", None, None), ("Standard_D4s_v3", None, None),
])
def test_instance_types_name_their_gpu(machine, gpu, gib):
    assert instance_gpu(machine) == gpu
    if gpu:
        assert max_memory_gib({gpu}) == gib


# --- the rules read the one definition ---------------------------------------------------------------------------


def test_weights_are_judged_on_an_instance_type(tmp_path, capsys):
    """DeepSeek-V3 DP 8 with EP on p4d (A100 40 GB): refused; on p5e (H200 141 GB) it fits. Before, an instance type
    pinned no GPU."""
    from tests.unit.test_public_report_kinds_88 import DSV3_DP8_EP, _pair
    from tests.unit.test_turn2_variants import rules

    code, out = _pair(tmp_path, capsys, DSV3_DP8_EP, node=("node.kubernetes.io/instance-type", "p4d.24xlarge"))
    assert code == 1 and "weights-exceed-gpu-memory" in rules(out, "error"), out
    _, out = _pair(tmp_path, capsys, DSV3_DP8_EP, node=("beta.kubernetes.io/instance-type", "p5e.48xlarge"))
    assert "weights-exceed-gpu-memory" not in rules(out), out


def _v0(version: str, pod: dict) -> str | None:
    """nixl-needs-v1-engine's severity on a Qwen2.5 pair of vLLM ``version`` whose pods carry ``pod``."""
    from pdd_operator.compat import evaluate
    from pdd_operator.compat.manifests import find_engines, pair_engines
    from tests.unit.test_public_report_kinds_26 import _deployment, _kv

    docs = [_deployment(f"q-{role}", role, f"vllm/vllm-openai:v{version}",
                        ["Qwen/Qwen2.5-7B-Instruct", "--kv-transfer-config", _kv("kv_both")])
            for role in ("prefill", "decode")]
    for d in docs:
        d["spec"]["template"]["spec"].update(pod)
    engines = [e for d in docs for e in find_engines(d)]
    (pair, _, _), = pair_engines(engines)[0]
    return {f.rule: f.severity for f in evaluate(pair).findings}.get("nixl-needs-v1-engine")


@pytest.mark.parametrize(("version", "pod", "severity"), [
    # NotIn takes the A100 away: only V100s are left (before: read as V100 or A100, no finding)
    ("0.9.2", affinity([expr(PRODUCT, "In", "Tesla-V100-SXM2-16GB", "NVIDIA-A100-SXM4-40GB"),
                        expr(PRODUCT, "NotIn", "NVIDIA-A100-SXM4-40GB")]), "error"),
    ("0.10.0", {"nodeSelector": {"node.kubernetes.io/instance-type": "g4dn.12xlarge"}}, "error"),      # T4
    ("0.10.0", {"nodeSelector": {"eks.amazonaws.com/instance-gpu-name": "t4"}}, "error"),
    ("0.10.0", {"nodeSelector": {"nvidia.com/gpu.compute.major": "7", "nvidia.com/gpu.compute.minor": "5"}}, "error"),
    ("0.10.0", {"nodeSelector": {"node.kubernetes.io/instance-type": "g5.12xlarge"}}, None),           # A10G
    ("0.10.0", {"nodeSelector": {"nvidia.com/gpu.compute.major": "8"}}, None),
    ("0.10.0", affinity([expr(PRODUCT, "In", "Tesla-T4")], [expr(PRODUCT, "Exists")]), None),          # or any GPU
])
def test_the_v0_fallback_reads_every_gpu_label(version, pod, severity):
    assert _v0(version, pod) == severity


@pytest.mark.parametrize(("pod", "severity"), [
    # V100 picks TRITON_ATTN by itself: FLASH_ATTN on the decode only is refused wherever the prefill's GPU is a V100
    ({"nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-tesla-v100"}}, "error"),
    ({"nodeSelector": {"node.kubernetes.io/instance-type": "p3.8xlarge"}}, "error"),
    ({"nodeSelector": {"nvidia.com/gpu.compute.major": "7", "nvidia.com/gpu.compute.minor": "0"}}, "error"),
    ({"nodeSelector": {"node.kubernetes.io/instance-type": "p4d.24xlarge"}}, None),                # A100: FLASH_ATTN
    (affinity([expr("cloud.google.com/gke-accelerator", "In", "nvidia-tesla-v100", "nvidia-tesla-a100")]), "warning"),
])
def test_a_one_sided_backend_reads_every_gpu_label(tmp_path, capsys, pod, severity):
    from tests.unit.test_public_report_kinds_80 import _pair, _severities
    from tests.unit.test_turn2_variants import check

    _, out = check(tmp_path, capsys, *_pair("Qwen/Qwen3-0.6B", "vllm/vllm-openai:v0.20.0", [],
                                            ["--attention-backend", "FLASH_ATTN"], p_pod=pod, d_pod=pod))
    assert _severities(out, "attention-backend-mismatch") == ({severity} if severity else set()), out
