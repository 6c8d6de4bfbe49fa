"""Which GPU a role's pods are pinned to, read from their node placement: the one definition every rule asks.

A pod's placement (:func:`pdd_operator.compat.placement.node_terms`: ``nodeSelector``, ``spec.nodeName`` and the
required ``nodeAffinity`` terms, ORed) pins its GPU where every term requires one of a few node labels to be ``In`` a
list of values. The labels read here, and who sets them:

- **GPU model names** (:data:`GPU_PRODUCT_LABELS`): NVIDIA GPU feature discovery's ``nvidia.com/gpu.product`` (the
  product name, spaces as dashes: ``NVIDIA-H100-80GB-HBM3``, ``Tesla-V100-SXM2-32GB``; with MIG's single strategy
  ``NVIDIA-A100-SXM4-40GB-MIG-1g.5gb``), GKE's ``cloud.google.com/gke-accelerator`` (``nvidia-tesla-t4``,
  ``nvidia-h100-80gb``, ``nvidia-a100-80gb``), Karpenter's ``karpenter.k8s.aws/instance-gpu-name`` and EKS Auto
  Mode's ``eks.amazonaws.com/instance-gpu-name`` (``h100``, ``a10g``, ``l40s``). Their values are taken as written.
- **Instance types** (:data:`INSTANCE_TYPE_LABELS`): the kubelet's ``node.kubernetes.io/instance-type`` (and the
  deprecated ``beta.kubernetes.io/instance-type``), which every cloud sets to the machine type, and the instance
  family labels of Karpenter and EKS Auto Mode (``karpenter.k8s.aws/instance-family``,
  ``eks.amazonaws.com/instance-family``). AKS names no GPU model in a label (``kubernetes.azure.com/accelerator`` is
  ``nvidia``), so on AKS the VM size is the only reading. A machine type is read as the GPU it carries
  (:func:`instance_gpu`: AWS p3/p4d/p4de/p5/p5e/p5en/p6-b200/g4dn/g5/g6/g6e, GCP a2/a3/a4/g2, Azure ND/NC sizes, from
  the providers' instance type pages); an unknown one as itself, which no table knows (an unknown product).
- **Compute capability** (:data:`CAPABILITY_LABELS`): GPU feature discovery's ``nvidia.com/gpu.compute.major`` and
  ``nvidia.com/gpu.compute.minor``, read by :func:`pinned_gpu_capability` beside the products.

A term that requires several of these labels is read by the first of :data:`GPU_PRODUCT_LABELS` then
:data:`INSTANCE_TYPE_LABELS` it pins (a node meets all of them, so any one bounds the GPU; the product label is the
most exact). ``NotIn`` values are taken off that label's ``In`` values; ``Exists``, ``NotIn`` alone and preferred
terms pin nothing. A term that pins none of the labels leaves the GPU open: the role is then not pinned (``None``).
"""

from __future__ import annotations

import re

from pdd_operator.compat.placement import NodeTerm, label_values
from pdd_operator.vllm.attention_backends import gpu_compute_capability

#: Node labels whose value names the GPU model (module docstring), most exact first.
GPU_PRODUCT_LABELS: tuple[str, ...] = ("nvidia.com/gpu.product", "cloud.google.com/gke-accelerator",
                                       "karpenter.k8s.aws/instance-gpu-name", "eks.amazonaws.com/instance-gpu-name")
#: Node labels whose value names the machine type or family, read through :func:`instance_gpu`.
INSTANCE_TYPE_LABELS: tuple[str, ...] = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type",
                                         "karpenter.k8s.aws/instance-family", "eks.amazonaws.com/instance-family")
#: GPU feature discovery's compute capability labels (major, minor).
CAPABILITY_LABELS: tuple[str, str] = ("nvidia.com/gpu.compute.major", "nvidia.com/gpu.compute.minor")

#: Machine type (or family) patterns -> the GPU each carries, named as GPU feature discovery would (so that the
#: capability and memory tables read them). AWS EC2 accelerated instance types (p3: V100 16 GB, p3dn: V100 32 GB,
#: p4d: A100 40 GB, p4de: A100 80 GB, p5: H100 80 GB, p5e/p5en: H200 141 GB, p6-b200: B200, g4dn: T4, g5: A10G,
#: g6: L4, g6e: L40S); GCP accelerator-optimized machine types (a2-highgpu/megagpu: A100 40 GB, a2-ultragpu:
#: A100 80 GB, a3-highgpu/megagpu/edgegpu: H100 80 GB, a3-ultragpu: H200 141 GB, a4-highgpu: B200, g2-standard: L4);
#: Azure GPU VM sizes (ND A100 v4 ``Standard_ND96asr_v4``: A100 40 GB; ``*_A100_v4``: A100 80 GB; ``*_H100_v5``:
#: H100 80 GB, the NC H100 v5 sizes H100 NVL 94 GB; ``*_H200_v5``: H200; ``*_T4_v3``: T4; NCv3 ``Standard_NC6s_v3``:
#: V100 16 GB; ``Standard_ND40rs_v2``: V100 32 GB). Checked in order; case-insensitive.
_INSTANCE_GPUS: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p, re.I), gpu) for p, gpu in (
    (r"^p3dn(\.|$)", "Tesla-V100-SXM2-32GB"),
    (r"^p3(\.|$)", "Tesla-V100-SXM2-16GB"),
    (r"^p4d(\.|$)", "NVIDIA-A100-SXM4-40GB"),
    (r"^p4de(\.|$)", "NVIDIA-A100-SXM4-80GB"),
    (r"^p5(\.|$)", "NVIDIA-H100-80GB-HBM3"),
    (r"^p5en?(\.|$)", "NVIDIA-H200-141GB"),
    (r"^p6-b200(\.|$)", "NVIDIA-B200"),
    (r"^g4dn(\.|$)", "Tesla-T4"),
    (r"^g5(\.|$)", "NVIDIA-A10G"),
    (r"^g6(\.|$)", "NVIDIA-L4"),
    (r"^g6e(\.|$)", "NVIDIA-L40S"),
    (r"^a2-(highgpu|megagpu)(-|$)", "NVIDIA-A100-SXM4-40GB"),
    (r"^a2-ultragpu(-|$)", "NVIDIA-A100-SXM4-80GB"),
    (r"^a3-(highgpu|megagpu|edgegpu)(-|$)", "NVIDIA-H100-80GB-HBM3"),
    (r"^a3-ultragpu(-|$)", "NVIDIA-H200-141GB"),
    (r"^a4-highgpu(-|$)", "NVIDIA-B200"),
    (r"^g2-standard(-|$)", "NVIDIA-L4"),
    (r"^Standard_ND96asr_v4$", "NVIDIA-A100-SXM4-40GB"),
    (r"^Standard_N[CD]\d+a\w*_A100_v4$", "NVIDIA-A100-80GB"),
    (r"^Standard_NC\d+\w*_H100_v5$", "NVIDIA-H100-NVL"),
    (r"^Standard_ND\d+\w*_H100_v5$", "NVIDIA-H100-80GB-HBM3"),
    (r"^Standard_ND\d+\w*_H200_v5$", "NVIDIA-H200-141GB"),
    (r"^Standard_NC\d+as_T4_v3$", "Tesla-T4"),
    (r"^Standard_NC\d+r?s_v3$", "Tesla-V100-PCIE-16GB"),
    (r"^Standard_ND40rs_v2$", "Tesla-V100-SXM2-32GB"),
))


def instance_gpu(machine_type: str) -> str | None:
    """The GPU a cloud machine type or instance family carries (``p5.48xlarge`` -> ``NVIDIA-H100-80GB-HBM3``,
    ``a2-ultragpu-1g`` -> ``NVIDIA-A100-SXM4-80GB``, ``Standard_NC24ads_A100_v4`` -> ``NVIDIA-A100-80GB``), named
    as GPU feature discovery's ``nvidia.com/gpu.product`` would; ``None`` where the type is not in the table (a
    machine without a GPU, or one not known here). Pure."""
    return next((gpu for pattern, gpu in _INSTANCE_GPUS if pattern.search(machine_type.strip())), None)


def _pinned(term: NodeTerm, key: str) -> frozenset[str] | None:
    """The values one node ``term`` allows the label ``key`` (:func:`~pdd_operator.compat.placement.label_values`),
    ``None`` where the term has no ``In`` on ``key``."""
    return label_values((term,), key)


def _term_products(term: NodeTerm) -> set[str] | frozenset[str] | None:
    """The GPU products one node term allows (module docstring: the first label of :data:`GPU_PRODUCT_LABELS`, then
    of :data:`INSTANCE_TYPE_LABELS`, it pins), ``None`` where it pins none."""
    for key in GPU_PRODUCT_LABELS:
        if (values := _pinned(term, key)) is not None:
            return values
    for key in INSTANCE_TYPE_LABELS:
        if (values := _pinned(term, key)) is not None:
            return {instance_gpu(v) or v for v in values}
    return None


def gpu_products(nodes: tuple[NodeTerm, ...] | None) -> frozenset[str] | None:
    """The GPU products a role's pods may run on, from their placement ``nodes`` (:func:`~pdd_operator.compat.
    placement.node_terms`, ORed terms): the union over the terms of what each pins (module docstring), as label
    values (a machine type read as its GPU, :func:`instance_gpu`; an unknown one as written). ``None`` where the
    placement is unknown, some term leaves the GPU open, or no product is left (a pod that never schedules). Pure."""
    if not nodes:
        return None
    out: set[str] = set()
    for term in nodes:
        values = _term_products(term)
        if values is None:
            return None
        out |= values
    return frozenset(out) or None


def pinned_gpu_product(nodes: tuple[NodeTerm, ...] | None) -> str | None:
    """The one GPU product a role's pods may run on (:func:`gpu_products`), ``None`` where it is not pinned or
    several are allowed. Pure."""
    products = gpu_products(nodes)
    return next(iter(products)) if products and len(products) == 1 else None


def _term_capabilities(term: NodeTerm) -> set[tuple[int, int]] | None:
    """The compute capabilities one node term allows: from GPU feature discovery's compute labels where it pins both
    (integers), else from its products (:func:`~pdd_operator.vllm.attention_backends.gpu_compute_capability`;
    ``(0, 0)`` stands for a product not known). ``None`` where it pins neither."""
    major, minor = (_pinned(term, key) for key in CAPABILITY_LABELS)
    if major is not None and minor is not None and all(v.isdigit() for v in major | minor):
        return {(int(a), int(b)) for a in major for b in minor}
    products = _term_products(term)
    if products is None:
        return None
    return {gpu_compute_capability(p) or (0, 0) for p in products}


def pinned_gpu_capability(nodes: tuple[NodeTerm, ...] | None) -> tuple[int, int] | None:
    """The one compute capability ``(major, minor)`` every GPU a role's pods may run on shares (products,
    :func:`gpu_products`, or GPU feature discovery's ``nvidia.com/gpu.compute.major`` / ``.minor`` labels);
    ``None`` where the GPU is not pinned, a product's capability is not known, or the allowed GPUs differ. Pure."""
    found = _capabilities(nodes)
    return found.pop() if found is not None and len(found) == 1 and (0, 0) not in found else None


def pinned_gpu_major(nodes: tuple[NodeTerm, ...] | None) -> int | None:
    """The one compute capability major every GPU a role's pods may run on shares (as :func:`pinned_gpu_capability`,
    minors may differ: A100 8.0 and L4 8.9 are 8), ``None`` where not pinned or not known. Also read from a
    ``nvidia.com/gpu.compute.major`` label pinned alone. Pure."""
    found = _capabilities(nodes, majors_alone=True)
    if found is None or (0, 0) in found:
        return None
    majors = {major for major, _ in found}
    return majors.pop() if len(majors) == 1 else None


def _capabilities(nodes: tuple[NodeTerm, ...] | None, majors_alone: bool = False) -> set[tuple[int, int]] | None:
    """The compute capabilities over all terms (``(major, -1)`` for a major label pinned alone where
    ``majors_alone``), ``None`` where some term pins none."""
    if not nodes:
        return None
    out: set[tuple[int, int]] = set()
    for term in nodes:
        found = _term_capabilities(term)
        if found is None and majors_alone and (major := _pinned(term, CAPABILITY_LABELS[0])) is not None:
            found = {(int(v), -1) if v.isdigit() else (0, 0) for v in major}
        if found is None:
            return None
        out |= found
    return out or None

