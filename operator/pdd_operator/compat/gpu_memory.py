"""How much memory the GPU a node label names has at most, for judging whether an engine's weights can fit.

Read from the GPU product names :func:`pdd_operator.compat.gpu_product.gpu_products` gives: GPU
feature discovery's ``nvidia.com/gpu.product`` (``NVIDIA-H100-80GB-HBM3``, ``NVIDIA-A100-SXM4-40GB``,
``NVIDIA-H200``), GKE's ``cloud.google.com/gke-accelerator`` (``nvidia-h100-80gb``, ``nvidia-a100-80gb``,
``nvidia-l4``), Karpenter's ``karpenter.k8s.aws/instance-gpu-name`` (``h100``, ``l40s``), and the GPU of an
instance type named as the product label would (``p5.48xlarge``: ``NVIDIA-H100-80GB-HBM3``).

An upper bound in GiB, so that weights above it are a promise of failure: a size written in the name (``80GB``) is
taken as that many GiB (the 80 GB H100 reports 79.19 GiB to CUDA: its memory is 80 GiB less what the driver keeps),
and for names without one the table gives the product's memory as NVIDIA's data sheets state it, rounded up to GiB:
H200 141 GB, H100 NVL 94 GB, H20 96 GB, B200 and GB200 192 GB (per GPU; 180 GB usable on DGX B200), B300 and GB300
288 GB, L40S and L40 48 GB, L4, A10 and A10G 24 GB.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: A memory size written in a product name (``80GB``, ``80gb``, ``-141GB``).
_SIZE = re.compile(r"(?:^|[-_ ])(\d{2,3})\s?GB(?:$|[-_ ])", re.I)
#: Product name patterns without a size -> an upper bound of their memory in GiB (module docstring); checked in order.
_NAMED: tuple[tuple[re.Pattern[str], int], ...] = (
    (re.compile(r"(^|[-_ ])G?B300($|[-_ ])", re.I), 288),
    (re.compile(r"(^|[-_ ])G?B200($|[-_ ])", re.I), 192),
    (re.compile(r"(^|[-_ ])H200($|[-_ ])", re.I), 141),
    (re.compile(r"(^|[-_ ])H100[-_ ]NVL($|[-_ ])", re.I), 94),
    (re.compile(r"(^|[-_ ])H20($|[-_ ])", re.I), 96),
    (re.compile(r"(^|[-_ ])L40S?($|[-_ ])", re.I), 48),
    (re.compile(r"(^|[-_ ])(L4|A10G?)($|[-_ ])", re.I), 24),
)


def product_memory_gib(product: str) -> int | None:
    """An upper bound of the memory, in GiB, of the GPU that the label value ``product`` names; ``None`` where the
    name tells no size and the table does not list it. Pure."""
    if found := _SIZE.search(product):
        return int(found.group(1))
    return next((gib for pattern, gib in _NAMED if pattern.search(product)), None)


def max_memory_gib(products: Iterable[str] | None) -> int | None:
    """The largest upper bound among the GPU products a pod may land on (``products``: label values; ``None``: not
    pinned), or ``None`` where any of them is not known: the weights must fit the GPU the scheduler picks. Pure."""
    sizes = [product_memory_gib(p) for p in products or ()]
    if not sizes or any(s is None for s in sizes):
        return None
    return max(s for s in sizes if s is not None)
