"""Which vLLM release a PDDeployment's rules are judged for, against the release its engine image runs.

``spec.engine.vllmVersion`` wins over the image tag (:func:`~pdd_operator.vllm.versions.resolve_version`): it is how a
user names the release of an image whose tag does not (a private build, ``llm-d-cuda``). Where the image's tag does name
a vLLM release (vLLM's own images, this project's engine image, :func:`~pdd_operator.vllm.versions.version_from_image`)
and the two disagree, the engines run the tag's release while every version-bounded rule is judged for the other: a
value copied from the README or an example (``0.20.2``) beside an image swapped for another release. vLLM itself does
not read either field, so the deployment may well run: a warning that names both fields, never an error.
"""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, rule
from pdd_operator.vllm.versions import fmt, version_from_image


@rule(
    id="vllm-version-image-mismatch", family="version", severity="warning",
    fields=("spec.engine.vllmVersion", "spec.engine.image"),
    source=("PDDeployment API: spec.engine.vllmVersion wins over the image tag (pdd_operator/vllm/versions.py "
            "resolve_version); the tag of a vLLM image is the release it runs (vLLM's docker/Dockerfile builds "
            "vllm/vllm-openai:v<version> from that release's wheel)"),
    without_connector=True,
    example="engine.image vllm/vllm-openai:v0.22.0 with engine.vllmVersion 0.20.2",
)
def check_version_against_image(pair: PDPair) -> list[Violation]:
    """spec.engine.vllmVersion names the release the engine image's tag names, where the tag names one.

    Only a PDDeployment (``pair.managed``): both roles run ``spec.engine.image`` and carry ``spec.engine.vllmVersion``
    as their version. Nothing where the tag names no release (``latest``, another project's image, a digest) or the
    stated version is a development build (unknown to the rules either way)."""
    if not pair.managed:
        return []
    r = pair.prefill
    tagged = version_from_image(r.image)
    if tagged is None or r.version is None or tagged == r.version:
        return []
    return [(
        f"spec.engine.vllmVersion says vLLM {fmt(r.version)}, but the engine image {r.image} is tagged with vLLM "
        f"{fmt(tagged)}: both roles run {fmt(tagged)}, while every version-bounded rule was judged for "
        f"{fmt(r.version)}, so this check may pass what {fmt(tagged)} refuses or refuse what it runs.",
        f"Set spec.engine.vllmVersion to {fmt(tagged)} (or remove it: the version is then read from the image tag), or "
        f"set spec.engine.image to the vLLM {fmt(r.version)} image.",
    )]
