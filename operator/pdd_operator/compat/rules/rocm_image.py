"""What vLLM's ROCm images hold for the NixlConnector (:mod:`pdd_operator.vllm.rocm_nixl`)."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, rule
from pdd_operator.vllm.rocm_nixl import (
    ROCM_IMAGE_NIXL_SINCE,
    ROCM_RIXL_BUILT_SINCE,
    VLLM_ROCM_IMAGE_REPOSITORY,
    rocm_image_nixl_missing,
)
from pdd_operator.vllm.versions import fmt, image_repository


@rule(
    id="nixl-not-in-image", family="connector", severity="error",
    fields=("spec.engine.image",),
    source=("vLLM docker/Dockerfile.rocm per release: no RIXL before 0.14.0; RIXL installed only in the test stage "
            "0.14.0-0.20.2 (0.17.1 l.290/304-306/353, 0.20.1 l.372/391-393/467); in the final stage from 0.21.0 "
            "(l.475/510-512, vllm-project/vllm#41634); nixl_utils.py imports rixl on ROCm (0.20.1 l.30) and the "
            "NIXL worker raises RuntimeError('NIXL is not available') (0.20.1 nixl/worker.py l.90-91)"),
    until=ROCM_IMAGE_NIXL_SINCE,
    example="NixlConnector on vllm/vllm-openai-rocm:v0.20.1",
)
def check_rocm_image_nixl(pair: PDPair) -> list[Violation]:
    """The engine's ROCm vLLM image holds the NIXL package (RIXL) the NixlConnector imports on ROCm."""
    out: list[Violation] = []
    for r in pair.roles:
        how = rocm_image_nixl_missing(r.image, r.version) if r.nixl else None
        if how is None or r.installs_nixl:
            continue
        release = fmt(r.version)
        if image_repository(r.image) == VLLM_ROCM_IMAGE_REPOSITORY:
            why = (f"{r.role}: {r.image} is vLLM {release}'s ROCm image, built from docker/Dockerfile.rocm's final "
                   "stage, which installs no RIXL (the release builds it for its test stage only, or not at all)")
        elif how == "error":
            why = (f"{r.role}: {r.image} is AMD's ROCm image of vLLM {release}, whose docker/Dockerfile.rocm builds no "
                   f"RIXL or NIXL in any stage (first built in {fmt(ROCM_RIXL_BUILT_SINCE)}) and whose NixlConnector "
                   "imports nixl._api, which no ROCm build provides")
        else:
            why = (f"{r.role}: {r.image} is AMD's ROCm image of vLLM {release}; that release's docker/Dockerfile.rocm "
                   "installs RIXL only in its test stage, not in the final image, and whether AMD's build adds it is "
                   "not in these files")
        message = (f"{why}: on ROCm vLLM imports NIXL's API from that package, the import fails and the NixlConnector "
                   "worker raises RuntimeError('NIXL is not available') while the engine starts, so it never comes up "
                   "(vllm-project/vllm#41637).")
        fix = (f"Run vllm/vllm-openai-rocm:v{fmt(ROCM_IMAGE_NIXL_SINCE)} or later (RIXL in the final image), or an "
               "image that installs RIXL (ROCm/RIXL's wheel, as Dockerfile.rocm's test stage does).")
        out.append((message, fix) if how == "error" else (message, fix, "warning"))
    return out
