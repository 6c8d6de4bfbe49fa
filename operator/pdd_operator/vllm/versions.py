"""vLLM versions: parsing, and finding the version a deployment will run.

A version is handled as a ``(major, minor, patch)`` tuple. A release candidate (``0.33.0rc2``) is unreleased code
on its way to its release: it is judged with the rules of the last release before it and warned about
(:func:`candidate_rules_version`), never read as the final release. Source and development builds are different: vLLM
versions them with setuptools-scm (``0.20.2rc1.dev265+gdd6b3a5ef`` is 265 commits after the tag
v0.20.2rc0, on whatever branch; ``0.1.dev1+g51f799c1a`` is a checkout without any reachable tag), so
their number says little about which NIXL code they hold: :func:`dev_build` recognises them and the
rules treat their version as unknown (:func:`resolve_version`).
"""

from __future__ import annotations

import json
import re
from functools import cache, lru_cache
from pathlib import Path

Version = tuple[int, int, int]

_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")

#: Oldest and newest vLLM releases whose NIXL code the rules were built from (vllm-nixl-facts.md).
OLDEST_KNOWN: Version = (0, 9, 0)
NEWEST_KNOWN: Version = (0, 34, 99)
#: The vLLM releases from :data:`OLDEST_KNOWN` on that PyPI lists up to the newest whose NIXL code the rules were built
#: from (``pip index versions vllm``, 2026-12-05; 0.34.0 read in its sdist against 0.33.0 on 2026-12-06,
#: docs/vllm-source-audit.md "After 0.33.0"). A version outside this list (0.35.0, an unreleased 0.34.1) is judged
#: with the rules of the newest release before it and warned about (``vllm-version-unverified``).
KNOWN_RELEASES: frozenset[Version] = frozenset({
    (0, 9, 0), (0, 9, 1), (0, 9, 2), (0, 10, 0), (0, 10, 1), (0, 10, 2), (0, 11, 0), (0, 11, 1), (0, 11, 2),
    (0, 12, 0), (0, 13, 0), (0, 14, 0), (0, 14, 1), (0, 15, 0), (0, 15, 1), (0, 16, 0), (0, 17, 0), (0, 17, 1),
    (0, 18, 0), (0, 18, 1), (0, 19, 0), (0, 19, 1), (0, 20, 0), (0, 20, 1), (0, 20, 2), (0, 21, 0), (0, 22, 0),
    (0, 22, 1), (0, 23, 0), (0, 24, 0), (0, 25, 0), (0, 25, 1), (0, 26, 0), (0, 27, 0), (0, 27, 1), (0, 28, 0),
    (0, 29, 0), (0, 30, 0), (0, 31, 0), (0, 32, 0), (0, 33, 0), (0, 34, 0),
})
#: The newest release the rules were built from (:data:`KNOWN_RELEASES`).
NEWEST_RELEASE: Version = max(KNOWN_RELEASES)
#: The seed documents' version (NixlConnector hybrid SSM support).
SEED_VERSION: Version = (0, 20, 0)


def parse_version(text: str | None) -> Version | None:
    """Parse ``"0.20.2"``, ``"v0.20.2"``, ``"0.20"`` or ``"0.20.2rc1.dev265+g..."`` into a tuple.

    Returns ``None`` when ``text`` is empty or does not start with ``MAJOR.MINOR``.
    """
    if not text:
        return None
    match = _VERSION_RE.match(text.strip())
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


_DEV_RE = re.compile(r"\.dev\d+|\+g[0-9a-f]{6,}")


#: vLLM's four-part releases from :data:`OLDEST_KNOWN` on (``pip index versions vllm``: 0.10.1.1, a fix release on
#: 0.10.1, whose sdist the 0.10.1 rules were read in). Such a release is judged as the three-part release it extends
#: (:func:`parse_version`) and named as vLLM numbers it (:func:`four_part_release`); another four-part number (AMD's
#: ``vllm_0.9.0.1`` builds) names no vLLM release.
FOUR_PART_RELEASES = frozenset({"0.10.1.1"})
#: A release number as a ``pip install vllm==X`` pin or an image tag writes it: three parts, or four
#: (:data:`FOUR_PART_RELEASES`), as a regular-expression fragment.
RELEASE_NUMBER = r"\d+\.\d+\.\d+(?:\.\d+)?"
_FOUR_PART_RE = re.compile(r"^v?(\d+\.\d+\.\d+\.\d+)(?=$|[-_+])")


def four_part_release(text: str | None) -> str | None:
    """The four-part vLLM release (:data:`FOUR_PART_RELEASES`) a version string or image tag starts with
    (``v0.10.1.1-cu128`` -> ``0.10.1.1``), else ``None`` (a three-part release, another four-part number, no
    version). :func:`parse_version` reads the same text as the release it extends, ``(0, 10, 1)``."""
    match = _FOUR_PART_RE.match(text.strip()) if text else None
    return match.group(1) if match and match.group(1) in FOUR_PART_RELEASES else None


def dev_build(text: str | None) -> bool:
    """True for a setuptools-scm source/development build string (``.devN`` or ``+g<sha>``)."""
    return bool(text and _DEV_RE.search(text))


def dev_build_note(text: str) -> str:
    """Explain what a development build version string says (for a ``vllm-version-unknown`` warning)."""
    base = parse_version(text)
    if base is None or base < OLDEST_KNOWN:
        return (f"vLLM {text} is a source build without a reachable release tag (setuptools-scm's fallback "
                "version), so which release's NIXL code it holds is unknown")
    return (f"vLLM {text} is an unreleased development build (commits after the last tag before "
            f"{fmt(base)}), so it may hold NIXL code of no release; it is not treated as {fmt(base)}")


def dev_build_floor(text: str | None) -> Version | None:
    """The release line a development build is known to come after, as ``(major, minor, 0)``; ``None``
    when ``text`` is not a development build (:func:`dev_build`) or names no release line these rules know.

    setuptools-scm's default scheme (``guess-next-dev``) numbers a build from the last tag reachable from its
    commit, bumped: ``0.20.2rc1.dev265+g<sha>`` is 265 commits after the tag ``v0.20.2rc0``,
    ``0.20.3.dev4+g<sha>`` 4 after ``v0.20.2``. The tag itself is on the 0.20 line (a release candidate
    of it or a release), so the build holds the 0.20 line's code at least as far as its first tag: the
    floor is ``(0, 20, 0)``. The patch is dropped because a release candidate tag comes before that
    release's final fixes; the rules' version bounds are release lines (``0.27.0``), so little is lost.
    ``0.1.dev1+g<sha>`` (no tag reachable: a shallow or tagless checkout) gives ``None``.
    """
    if not dev_build(text):
        return None
    base = parse_version(text)
    if base is None or base < OLDEST_KNOWN:
        return None
    return base[0], base[1], 0


_RC_RE = re.compile(r"^v?(\d+\.\d+(?:\.\d+)?rc\d+)", re.I)


def release_candidate(text: str | None) -> str | None:
    """The release-candidate version a version string or image tag names (``v0.34.0rc1-cu129`` -> ``0.34.0rc1``,
    ``0.33.0rc2`` -> itself), or ``None`` (a release, a development build such as ``0.20.2rc1.dev265+g<sha>``, no
    version). vLLM tags candidates ``vX.Y.Zrc<N>`` before the release; the wheel's ``__version__`` is that string."""
    if not text or dev_build(text):
        return None
    match = _RC_RE.match(text.strip())
    return match.group(1).lower() if match else None


def candidate_rules_version(text: str) -> Version | None:
    """The version whose rules judge a release candidate (:func:`release_candidate`): the newest release of
    :data:`KNOWN_RELEASES` before the release it is a candidate of (``0.33.0rc2`` -> 0.32.0, ``0.34.0rc1`` -> 0.33.0,
    ``0.20.2rc1`` -> 0.20.1). A candidate is unreleased code on its way to that release: what the release changed
    may be in it or not, so it is judged as "unreleased before X", with the rules of the last release before, and
    warned about (``vllm-version-unverified``), as a development build is judged as "after" its line
    (:func:`dev_build_floor`). ``None`` for a candidate of a release no later than :data:`OLDEST_KNOWN`."""
    base = parse_version(text)
    if base is None:
        return None
    return max((v for v in KNOWN_RELEASES if v < base), default=None)


def rules_version(text: str | None) -> Version | None:
    """The version the rules use for a version string: ``None`` for a development build or no version, the last
    release before it for a release candidate (:func:`candidate_rules_version`), else the release itself."""
    if not text or dev_build(text):
        return None
    return candidate_rules_version(text) if release_candidate(text) else parse_version(text)


#: vLLM's CPU images: its release images for x86_64 and Arm (``public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.32.0``,
#: ``.../vllm-arm64-cpu-release-repo``; vLLM docs, deployment/docker and installation/cpu), Docker Hub's
#: ``vllm/vllm-openai-cpu`` (``v<release>-x86_64`` / ``-arm64``, .buildkite/scripts/publish-release-images.sh l.189-190
#: of 0.34.0, built from the same docker/Dockerfile.cpu vllm-openai stage) and ``vllm-cpu``.
#: Engines of these images run vLLM's CPU platform (``vllm/platforms/cpu.py``).
CPU_IMAGE_NAMES = {"vllm-cpu", "vllm-cpu-release-repo", "vllm-arm64-cpu-release-repo", "vllm-openai-cpu"}
#: Image repositories (last path component) whose tag is the vLLM version: vLLM's own images and
#: this project's engine image (``vllm-openai-xpu``: vLLM's Intel GPU image, tagged ``v<release>`` and
#: ``v<release>-x86_64``, .buildkite/scripts/publish-release-images.sh l.158-168 of 0.34.0). Other images (llm-d's,
#: Dynamo's runtime, ...) version themselves.
VLLM_IMAGE_NAMES = ({"vllm", "vllm-openai", "vllm-openai-rocm", "vllm-openai-xpu", "vllm-tpu", "vllm-nixl"}
                    | CPU_IMAGE_NAMES)


#: Repositories (the path after any registry) that run vLLM's entrypoint under one of those names but tag
#: their own releases: ``lmcache/vllm-openai:v0.3.3`` is LMCache 0.3.3 (on vLLM 0.10.0, LMCache#1251),
#: ``lmcache/vllm-openai:v0.4.4`` LMCache 0.4.4. NVIDIA's NGC vLLM container ``nvcr.io/nvidia/vllm`` is tagged with the
#: NGC container release ``YY.MM[.postN]-py3`` (``25.11-py3``, ``26.03.post1-py3``, ``26.07-py3``), the year and month
#: of NVIDIA's framework containers, not a vLLM release: read as one it would be vLLM 25.11, newer than every release
#: (issue 9, set 73). Which vLLM a given NGC release carries is in NVIDIA's container release notes: the releases whose
#: notes were read are rows of ``wrapped_vllm_versions.json`` (``nvidia/vllm``, :func:`wrapped_vllm_version`), any other
#: stays unknown (:func:`unknown_tag_note` says so).
OWN_TAGGED_REPOSITORIES = {"lmcache/vllm-openai", "nvidia/vllm"}


#: AMD's ROCm vLLM images (Docker Hub ``rocm/vllm`` releases, ``rocm/vllm-dev`` previews): their tags lead with the
#: ROCm release and name the vLLM release after ``vllm_``, e.g. ``rocm/vllm:rocm6.3.1_vllm_0.8.5_20250521`` (vLLM 0.8.5)
#: or ``rocm/vllm:rocm7.14.0_cdna_ubuntu24.04_py3.14_pytorch_2.11.0_vllm_0.23.0`` (vLLM 0.23.0), as AMD's ROCm
#: documentation (vLLM inference guides) lists them. Four-part versions (``vllm_0.9.0.1``: AMD's own builds between
#: releases), named builds (``rocm7.0_vllm_qwen3coder_next``) and dated nightlies (``nightly_main_20251120``) name no
#: release and stay unknown; a plain release tag (``rocm/vllm:v0.15.0``) reads as any vLLM image's.
ROCM_IMAGE_REPOSITORIES = {"rocm/vllm", "rocm/vllm-dev"}
_ROCM_VLLM_RE = re.compile(r"(?:^|_)vllm_?v?(\d+\.\d+\.\d+)(?:rc\d+)?(?=_|$)")


def rocm_vllm_version(image: str) -> Version | None:
    """The vLLM release named in the tag of one of AMD's ROCm vLLM images (:data:`ROCM_IMAGE_REPOSITORIES`), or
    ``None`` (another image, no tag, or a tag naming no release)."""
    if image_repository(image) not in ROCM_IMAGE_REPOSITORIES:
        return None
    last = image.split("@", 1)[0].rsplit("/", 1)[-1]
    if ":" not in last:
        return None
    match = _ROCM_VLLM_RE.search(last.split(":", 1)[1])
    return parse_version(match.group(1)) if match else None


def _image_name(image: str) -> str:
    return image.split("@", 1)[0].rsplit("/", 1)[-1].split(":", 1)[0]


def image_repository(image: str) -> str:
    """``owner/name`` of an image reference (registry host and tag dropped)."""
    *path, last = image.split("@", 1)[0].split("/")
    return "/".join([*path[-1:], last.split(":", 1)[0]]).lower()


#: Image repositories (:func:`image_repository`) known to hold upstream vLLM as released (vLLM's own images, Docker
#: Hub and its CPU release repositories): no platform plugin there registers connectors of its own, so what vLLM's
#: connector factory registers for a release is what such an image can build. Plugin and fork images (Ascend, Gaudi,
#: AMD's rocm/vllm) may register connectors themselves and are not judged by the registry rules. Docker Hub's
#: ``vllm/vllm-openai-cpu`` is the CPU release repositories' image of the release commit retagged
#: (.buildkite/scripts/publish-release-images.sh: ``vllm-cpu-release-repo:${COMMIT}-x86_64`` ->
#: ``vllm/vllm-openai-cpu:v${RELEASE_VERSION}-x86_64``, 0.32.0 l.201-204, 0.34.0 l.179-190), and
#: ``vllm/vllm-openai-xpu`` the release commit's ``docker/Dockerfile.xpu`` ``vllm-openai`` stage
#: (.buildkite/release-pipeline.yaml 0.34.0 l.380-386 -> ``vllm-release-repo:$BUILDKITE_COMMIT-x86_64-xpu``, retagged
#: ``vllm/vllm-openai-xpu:v${RELEASE_VERSION}-x86_64`` by publish-release-images.sh 0.26.0 l.138, 0.32.0 l.171, 0.34.0
#: l.159): vLLM's own tree built with ``VLLM_TARGET_DEVICE=xpu`` (Dockerfile.xpu 0.34.0 l.236-241), whose XPU platform
#: is in-tree (vllm/platforms/xpu.py) and whose added packages are kernels (``vllm_xpu_kernels``, requirements/xpu.txt).
UPSTREAM_REPOSITORIES = frozenset({"vllm/vllm-openai", "vllm/vllm-openai-rocm", "q9t5s3a7/vllm-cpu-release-repo",
                                   "q9t5s3a7/vllm-arm64-cpu-release-repo", "vllm/vllm-openai-cpu",
                                   "vllm/vllm-openai-xpu"})


#: Registry namespaces (the path component before the image name) whose ``vllm-openai-<extras>`` images are vLLM's
#: OpenAI server image rebuilt with extras and tagged with the vLLM release first: AIBrix's
#: ``aibrix/vllm-openai-aibrix-kvcache-nixl:v0.10.2-nixl-0.7.1-ucx-1.19.0`` is vLLM 0.10.2 with AIBrix's KV cache,
#: NIXL 0.7.1 and UCX 1.19.0 (vllm-project/aibrix test/regression/v0.5.0/vllm-xpyd-rdma.yaml, the manifest of
#: vllm-project/aibrix#1772), as its plain ``aibrix/vllm-openai:v0.9.2-cu128-nixl-v0.4.1-...`` is vLLM 0.9.2.
DERIVED_VLLM_OPENAI_NAMESPACES = {"aibrix"}


def is_vllm_image(image: str) -> bool:
    """True when ``image`` is a vLLM image whose tag names the vLLM version: a name of :data:`VLLM_IMAGE_NAMES`, or
    ``vllm-openai-<extras>`` under one of the :data:`DERIVED_VLLM_OPENAI_NAMESPACES`."""
    name = _image_name(image)
    if name in VLLM_IMAGE_NAMES:
        return True
    namespace, _, _ = image_repository(image).rpartition("/")
    return name.startswith("vllm-openai-") and namespace in DERIVED_VLLM_OPENAI_NAMESPACES


def is_cpu_image(image: str) -> bool:
    """True when ``image`` is one of vLLM's CPU images (:data:`CPU_IMAGE_NAMES`): its engine runs on
    vLLM's CPU platform, where the KV cache is host memory."""
    return _image_name(image) in CPU_IMAGE_NAMES


@cache
def _wrapped_table() -> dict:
    return json.loads((Path(__file__).parent / "wrapped_vllm_versions.json").read_text())["repositories"]


def wrapped_vllm_version(image: str) -> tuple[Version, str] | None:
    """``(vLLM version, source)`` for an image that wraps vLLM under its own release tag, or ``None``.

    Read from ``wrapped_vllm_versions.json``: NVIDIA Dynamo's ``vllm-runtime`` images
    (``nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.7.0`` ships vLLM 0.11.0, its ``-cuda13`` variant too), as
    Dynamo's release-artifacts page documents them, and llm-d's ``llm-d-cuda`` images whose release's component
    summary names the vLLM wheel in them (``ghcr.io/llm-d/llm-d-cuda:v0.9.0`` ships vLLM 0.26.0), and Ray's LLM
    images (``rayproject/ray-llm:2.51.0-py311-cu128`` ships vLLM 0.11.0: the engines of a RayService's Ray Serve LLM
    applications, :mod:`pdd_operator.compat.ray_serve`; a Ray release whose ``llm`` extra names only a floor,
    ``vllm>=X``, has a row without ``vllm`` and gives ``None``), and NVIDIA's NGC vLLM containers whose release notes
    name the vLLM (``nvcr.io/nvidia/vllm:26.05-py3`` ships vLLM 0.20.1); each row names its source, which the returned
    text quotes.
    A tag the table does not list (a newer release, an undocumented ``-dev`` preview, ``latest``, a digest) gives
    ``None``: its vLLM is unknown, never guessed.
    """
    found = _wrapped_row(image)
    if found is None or "vllm" not in found[2]:
        return None  # a row that names only a floor (Ray's "requires": vllm>=X) leaves the vLLM unknown
    repo, tag, row = found
    return parse_version(row["vllm"]), f"{repo}:{tag} ships vLLM {row['vllm']} ({row['source']})"


def wrapped_release_tag(image: str) -> str | None:
    """The tag of an image of a repository in ``wrapped_vllm_versions.json`` without its ``v`` and its variant
    suffixes (``nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.4.0-efa-amd64`` -> ``1.4.0``; ``...:1.3.0-rc.9`` stays as it
    is), whether or not the table lists it; ``None`` for another repository, a digest-only reference or no tag."""
    entry = _wrapped_table().get(image_repository(image))
    last = image.split("@", 1)[0].rsplit("/", 1)[-1]
    if entry is None or ":" not in last:
        return None
    tag = last.split(":", 1)[1].removeprefix("v")
    for suffix in entry.get("variant_suffixes", []):
        tag = tag.removesuffix(suffix)
    if entry.get("variant_pattern"):  # Ray's -py311-cu128, -py312-cu130, -gpu, -aarch64 variants
        tag = re.sub(entry["variant_pattern"], "", tag, count=1)
    return tag


def _wrapped_row(image: str) -> tuple[str, str, dict] | None:
    """``(repository, tag without variant suffixes, row)`` of ``wrapped_vllm_versions.json`` for ``image``, or
    ``None`` where the table lists no such tag (see :func:`wrapped_vllm_version`)."""
    tag = wrapped_release_tag(image)
    if tag is None:
        return None
    repo = image_repository(image)
    row = _wrapped_table()[repo]["tags"].get(tag)
    return None if row is None else (repo, tag, row)


def wrapped_nixl_version(image: str) -> tuple[Version, str] | None:
    """``(NIXL version, source)`` for a wrapping image whose row of ``wrapped_vllm_versions.json`` names the NIXL it
    ships (key ``nixl``: Dynamo pins its own NIXL per release, which may differ from the ``nixl ==`` pin of the vLLM
    inside: vllm-runtime 1.4.0 ships NIXL 1.3.2 beside vLLM 0.26.0, whose requirements/kv_connectors.txt pins
    1.3.1), else ``None``."""
    found = _wrapped_row(image)
    if found is None or "nixl" not in found[2]:
        return None
    repo, tag, row = found
    return parse_version(row["nixl"]), f"{repo}:{tag} ships NIXL {row['nixl']} ({row['source']})"


#: Repositories of vendor distributions of vLLM whose tags are the distribution's own releases and that no public
#: source read here maps to vLLM releases: Red Hat AI Inference Server (``registry.redhat.io/rhaiis/vllm-cuda-rhel9:3.2.1``,
#: ``rhaiis/vllm-rocm-rhel9``; the same builds as ``quay.io/aipcc/...``) and OpenShift AI's serving images
#: (``registry.redhat.io/rhoai/odh-vllm-cuda-rhel9:v2.25``), tagged with RHAIIS / RHOAI releases. Red Hat's release notes
#: name the vLLM of each, but no GitHub source or stored page read for issue 9 states it (the red-hat-data-services
#: manifests pin these images by digest only): their vLLM stays unknown, and :func:`unknown_tag_note` says why.
#: ``quay.io/vllm/vllm-cuda:0.14.1_rhai0`` names its vLLM in the tag and is read by :func:`custom_tag_version`.
VENDOR_OWN_RELEASE_OWNERS = {"rhaiis": "Red Hat AI Inference Server", "aipcc": "Red Hat AI Inference Server",
                             "rhoai": "Red Hat OpenShift AI"}


def unknown_tag_note(image: str) -> str | None:
    """Why the tag of ``image`` names no vLLM release although its repository is a known distribution of vLLM or of
    a launcher that carries it, as a clause for the ``vllm-version-unknown`` note; ``None`` for any other image, or
    where the tag does name one (:func:`version_from_image`).

    - a Ray LLM image (``rayproject/ray-llm``) of a release whose row names only a vLLM floor: the release and its
      ``vllm>=X`` requirement (``wrapped_vllm_versions.json``); a tag that names no Ray release (``nightly``,
      ``latest``): so said;
    - a plain Ray image (``rayproject/ray``): Ray's wheel requires vLLM only under its ``llm`` extra (setup.py), so which
      vLLM such a pod imports is not in the tag;
    - a table repository's unlisted tag (NGC ``nvcr.io/nvidia/vllm:25.11-py3``): the release the table does not list;
    - a Red Hat AI Inference Server or OpenShift AI image (:data:`VENDOR_OWN_RELEASE_OWNERS`).
    """
    if version_from_image(image) is not None:
        return None
    repo = image_repository(image)
    last = image.split("@", 1)[0].rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else ""
    if repo == "rayproject/ray":
        return (f"{image} is a Ray image without Ray's LLM stack: Ray's wheel requires vLLM only under its llm extra "
                "(python/setup.py), and the LLM images are rayproject/ray-llm, so the vLLM its pods import is not in "
                "the tag")
    found = _wrapped_row(image)
    if found is not None and "requires" in found[2]:
        return (f"{image} is Ray {found[1]}, which requires {found[2]['requires']} (python/setup.py llm extra): a floor, "
                "not the image's own vLLM, which its rayllm lock pins and no table here lists")
    if repo in _wrapped_table():
        release = wrapped_release_tag(image) or tag or "(no tag)"
        return (f"{image} names the {repo} release {release}, whose vLLM no public source read here lists "
                "(wrapped_vllm_versions.json)")
    owner = repo.split("/", 1)[0]
    if owner in VENDOR_OWN_RELEASE_OWNERS or "/rhaiis/" in f"/{image.split('@', 1)[0].rsplit(':', 1)[0]}/":
        product = VENDOR_OWN_RELEASE_OWNERS.get(owner, "Red Hat AI Inference Server")
        return (f"{image} is tagged with a {product} release ({tag or 'no tag'}), not a vLLM release, and no public "
                "source read here maps that release to the vLLM it ships")
    return None


#: A template placeholder in an image reference: Helm/Go templates (``{{ .Values.tag }}``), shell or Compose variables
#: (``${TAG}``, ``${TAG:-latest}``, ``$TAG``), Jinja/Ansible (``{{ vllm_tag }}``).
_TEMPLATE_PART = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}|\$\{([A-Za-z_][A-Za-z0-9_]*)[^}]*\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def tag_uncertainty(image: str) -> str | None:
    """Why ``image`` (a container's image as written) names no vLLM release, naming where the release would come from,
    as a clause (``"vllm/vllm-openai:${TAG} takes its tag from $TAG, which these files do not set"``); ``None`` where
    its tag names one (:func:`version_from_image`) or :func:`unknown_tag_note` explains it (a launcher's or vendor's
    own release). The cases: a template placeholder (a Helm value ``.Values.tag``, a variable ``$TAG``; not rendered
    here), a digest (``@sha256:...``: content, no release), a moving or absent tag (``latest``, ``nightly``: the
    registry decides at pull time), any other tag of an image whose tag scheme is not vLLM's (a user's own build)."""
    if not image or version_from_image(image) is not None or unknown_tag_note(image) is not None:
        return None
    if found := _TEMPLATE_PART.search(image):
        helm, braced, bare = found.groups()
        source = f"the template value {helm}" if helm is not None else f"${braced or bare}"
        part = "tag" if ":" in image[:found.start()].rsplit("/", 1)[-1] else "name"
        return f"{image} takes its {part} from {source}, which is not rendered here (these files do not set it)"
    if "@" in image:
        return f"{image} is pinned by digest, which names no release"
    last = image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else ""
    if not tag or tag.split("-")[0] in ("latest", "nightly", "main", "stable"):
        return (f"{image} has {'the moving tag ' + tag if tag else 'no tag (latest)'}, whose release the registry "
                "decides when the pod pulls it")
    return f"{image}'s tag {tag} names no vLLM release (an image whose tags are not vLLM's)"


#: ``ray[llm]==X`` (extras in any order, e.g. ``ray[serve,llm]``) in a ``pip install`` / ``uv pip install`` word or a
#: runtime_env requirement: Ray release X with its LLM stack.
RAY_LLM_REQUIREMENT = re.compile(r"\bray\[[a-z,\s]*\bllm\b[a-z,\s]*\]\s*==\s*v?(\d+\.\d+\.\d+)\b", re.I)


def ray_llm_vllm(ray_release: str) -> tuple[str, str] | None:
    """``(vLLM release, source)`` that ``pip install "ray[llm]==<ray_release>"`` installs: the exact pin of that Ray
    release's llm extra (``wrapped_vllm_versions.json`` rows with ``"pin": "=="``, Ray 2.56.0 on), else ``None`` (a
    release that only names a floor, ``vllm>=X``: pip then installs the newest vLLM it can, which no tag or pin
    here says; an unlisted release)."""
    row = _wrapped_table()["rayproject/ray-llm"]["tags"].get(ray_release)
    if row is None or row.get("pin") != "==":
        return None
    return row["vllm"], f"ray[llm]=={ray_release} pins vLLM {row['vllm']} ({row['source']})"


#: A ``vllm`` token right before a release number in a tag names the vLLM release whatever the repository
#: (``.../dsv3-uccl-nixl:vllm-0.21.0``, ``...:cu128-vllm0.20.1``, ``...:vllm-v0.19.0-20260411``): three-part
#: ``0.Y.Z`` only (optionally a candidate ``rcN``), ended by the tag or a separator, never a four-part build number.
_VLLM_TOKEN_TAG_RE = re.compile(r"(?:^|[-_.])vllm[-_]?v?(0\.\d+\.\d+(?:rc\d+)?)(?=$|[-_+])", re.I)
#: A tag that starts with a release number (``v0.11.0-cu128``, ``0.18.0-ubuntu22.04``, ``0.19.1``).
_LEADING_RELEASE_RE = re.compile(r"^v?(0\.\d+\.\d+(?:rc\d+)?)(?=$|[-_+])", re.I)
#: Tag words that mark a build between releases (``vllm-v0.22.0-nightly_20260712``, ``v0.25.0-dev``,
#: ``vllm-v0.14.0_amd_dev_...``): its code is not the release's, so the number is not read.
_UNRELEASED_TAG_WORDS = {"dev", "nightly", "main", "snapshot"}
#: Words of a repository name that say the image is another component named after vLLM, versioned on its own
#: (vLLM's ``vllm-router``, Dynamo's ``vllm-runtime``, a ``vllm-proxy``, platform plugins such as ``vllm-ascend``,
#: ``vllm-spyre``, ``vllm-gaudi``, ``vllm-omni``, other engines such as ``nano-vllm``).
_OTHER_COMPONENT_WORDS = {"router", "runtime", "proxy", "gateway", "operator", "controller", "sidecar", "exporter",
                          "benchmark", "bench", "client", "ui", "ascend", "spyre", "gaudi", "hpu", "neuron", "metal",
                          "omni", "sim", "simulator", "semantic", "nano", "tt", "tenstorrent"}


def custom_tag_version(image: str) -> tuple[str, str] | None:
    """``(version text, source)`` for an image whose tag names the vLLM release unambiguously although the plain
    reading (:func:`image_tag`) does not, else ``None``.

    Two shapes count (issue 9, set 37: custom builds were read as unknown):

    - a ``vllm`` token right before a release number ``0.Y.Z`` of :data:`OLDEST_KNOWN` or later, in any
      repository's tag: ``ghcr.io/acme/dsv3-uccl-nixl:vllm-0.21.0``, ``...:vllm0.20.1``,
      ``.../x-platform-model-workers:vllm-v0.19.0-20260411``, ``quay.io/u/vllm:vllm-v0.18.0-tt-v1.2.5``;
    - a repository whose name has ``vllm`` as a word (``dualspark-vllm``, ``engine-vllm``, ``my-vllm-image``) with a
      tag that starts with a release :data:`KNOWN_RELEASES` lists: ``:v0.25.1-nccl-2.30.4``, ``:v0.11.2-ray2.53.0``.

    The text is the version (``0.21.0``; ``0.21.0rc1`` for a candidate); the source says where it came from:
    ``0.21.0 (from the image tag vllm-0.21.0)``. What stays unknown: a number not next to such a token or name (a
    CUDA version ``12.8.1-cudnn``, a date, a build number), a team's own ``0.3.2`` or a release no list has
    (``tt-vllm:v0.77.0-rc1``), a four-part ``0.9.0.1``, a tag with a word of :data:`_UNRELEASED_TAG_WORDS`, a
    repository named for another component (:data:`_OTHER_COMPONENT_WORDS`: ``vllm-router``, ``nano-vllm``) or one
    that versions itself (:data:`OWN_TAGGED_REPOSITORIES`, AMD's ROCm and the wrapped-image tables).
    """
    ref = image.split("@", 1)[0]
    last = ref.rsplit("/", 1)[-1]
    if ":" not in last:
        return None
    repo = image_repository(image)
    if repo in OWN_TAGGED_REPOSITORIES or repo in ROCM_IMAGE_REPOSITORIES or repo in _wrapped_table():
        return None
    tag = last.split(":", 1)[1]
    vllm_image = is_vllm_image(image)
    if (vllm_image and parse_version(tag) is not None) or dev_build(tag):
        return None  # the plain reading's (a release, a candidate, a development build)
    if set(re.split(r"[-_.+]", tag.lower())) & _UNRELEASED_TAG_WORDS:
        return None
    words = set(re.split(r"[-_.]", _image_name(image).lower()))
    text = None
    if (match := _VLLM_TOKEN_TAG_RE.search(tag)) is not None:
        base = parse_version(match.group(1))
        if base is not None and base >= OLDEST_KNOWN:
            text = match.group(1).lower()
    elif (not vllm_image and "vllm" in words and not words & _OTHER_COMPONENT_WORDS
          and (match := _LEADING_RELEASE_RE.match(tag)) is not None and parse_version(match.group(1)) in KNOWN_RELEASES):
        text = match.group(1).lower()
    if text is None:
        return None
    return text, f"{text} (from the image tag {tag})"


def version_from_image(image: str) -> Version | None:
    """Return the vLLM version in a vLLM image's tag, e.g. ``vllm/vllm-openai:v0.20.2-cu129``.

    Only images in :data:`VLLM_IMAGE_NAMES` count (``ghcr.io/llm-d/llm-d-cuda:v0.4.0`` is llm-d's
    version, not vLLM's), and images wrapping vLLM whose tags a publisher maps to a vLLM release
    (:func:`wrapped_vllm_version`), and AMD's ROCm images, whose tags name the vLLM release after the ROCm one
    (:func:`rocm_vllm_version`). Registry ports (``host:5000/x``) are not tags; digests (``@sha256:...``)
    and tags without a leading version (``latest``, ``nightly``) give ``None``.
    """
    wrapped = wrapped_vllm_version(image)
    if wrapped is not None:
        return wrapped[0]
    rocm = rocm_vllm_version(image)
    if rocm is not None:
        return rocm
    if (custom := custom_tag_version(image)) is not None:
        return rules_version(custom[0])
    tag = image_tag(image)
    if tag is None or dev_build(tag):
        return None
    return rules_version(tag)


def image_tag(image: str) -> str | None:
    """The tag of a vLLM image (see :func:`version_from_image`), or ``None`` (also for the
    :data:`OWN_TAGGED_REPOSITORIES`, whose tag is not vLLM's version)."""
    if not is_vllm_image(image) or image_repository(image) in OWN_TAGGED_REPOSITORIES:
        return None
    ref = image.split("@", 1)[0]
    last = ref.rsplit("/", 1)[-1]
    if ":" not in last:
        return None
    return last.split(":", 1)[1]


def image_version_text(image: str) -> str | None:
    """The version text a vLLM image's tag names for messages and the handshake's version string: a development build
    (:func:`image_dev_build`), a release candidate (``0.34.0rc1``), a four-part release (``0.10.1.1``:
    :func:`four_part_release`), else ``None`` (the caller formats the release)."""
    custom = custom_tag_version(image)
    tag = image_tag(image)
    return (image_dev_build(image) or release_candidate(tag) or release_candidate(custom and custom[0])
            or four_part_release(tag))


def image_dev_build(image: str) -> str | None:
    """The development-build version a vLLM image's tag names (:func:`dev_build`), from its first ``MAJOR.MINOR`` on:
    ``vllm/vllm-openai:nightly-0.34.0.dev3`` -> ``0.34.0.dev3`` (vLLM's nightly images are tagged ``nightly-<version>``
    with the wheel's setuptools-scm version, or ``nightly-<commit>``), ``...:0.20.2rc1.dev265+g1a2b3c4`` -> itself;
    ``None`` for a release tag, a tag naming no version (``latest``, ``nightly-<commit>``, ``cu130-nightly``) or a
    digest. Such a build is read as "unreleased, after" its release line (:func:`dev_build_floor`), never as a
    release."""
    tag = image_tag(image)
    if tag is None or not dev_build(tag):
        return None
    match = re.search(r"(?<![0-9A-Za-z])v?\d+\.\d+\S*", tag)
    return match.group(0) if match else tag


@lru_cache(maxsize=1024)
def resolve_version(explicit: str | None, image: str) -> tuple[Version | None, str]:
    """Return the version the rules use and where it came from (``"spec.engine.vllmVersion"``,
    ``"image tag"``, ``"dev build"`` or ``"unknown"``). A development build (:func:`dev_build`) gives
    ``None``: its code is not any release's. Memoized (a pure function of two strings, asked 9 times
    per render of a PDDeployment; the answer is immutable)."""
    if explicit:
        if dev_build(explicit):
            return None, "dev build"
        return rules_version(explicit), "spec.engine.vllmVersion"
    from_image = version_from_image(image)
    if from_image is not None:
        return from_image, "image tag"
    return None, "unknown"


#: First release whose NIXL connector lets decode keep prefix caching for hybrid SSM models: 0.20.0-0.26.0 assert
#: when a transferred request hits decode's prefix cache (0.20 ``_read_blocks``, 0.22 ``_apply_prefix_caching``
#: equal SSM block counts, 0.23-0.26 'SSM can only have one local block'; 0.21 trims without asserting),
#: 0.27.0 pairs the SSM state slots by position (read in the released wheels; docs/vllm-source-audit.md).
HYBRID_NIXL_PREFIX_CACHING_SINCE: Version = (0, 27, 0)
#: ``KVTransferConfig.kv_load_failure_policy`` (``"recompute"`` or ``"fail"``): first release that has it, and first
#: whose default is ``"fail"`` (``vllm/config/kv_transfer.py``: ``"recompute"`` in the 0.13.0 and 0.16.0 wheels,
#: ``"fail"`` in 0.17.0, 0.20.2, 0.26.0 and 0.32.0; vllm-nixl-facts.md section 0).
KV_LOAD_FAILURE_POLICY_SINCE: Version = (0, 13, 0)
KV_LOAD_FAILURE_FAIL_DEFAULT_SINCE: Version = (0, 17, 0)


def fmt(version: Version | None) -> str:
    """Format a version tuple as ``"0.20.2"`` (``"unknown"`` for ``None``)."""
    return "unknown" if version is None else ".".join(map(str, version))


def fmt_line(version: Version) -> str:
    """Format a version tuple's release line as ``"0.24"`` (major.minor), as user-facing ">= 0.24" texts write it."""
    return f"{version[0]}.{version[1]}"


#: NIXL releases each vLLM release line accepts (``requirements/kv_connectors.txt``;
#: vllm-nixl-facts.md section 7): first vLLM version of the line -> (lowest, highest) NIXL version.
NIXL_REQUIREMENTS: list[tuple[Version, tuple[Version, Version]]] = [
    ((0, 20, 0), ((0, 7, 1), (0, 10, 1))),
    ((0, 24, 0), ((1, 2, 0), (1, 2, 0))),
    # v0.26 and v0.27.1 requirements/kv_connectors.txt: nixl == 1.3.1 (ai-dynamo/dynamo#12952 pairs 0.26.0 with it).
    ((0, 26, 0), ((1, 3, 1), (1, 3, 1))),
    ((0, 28, 0), ((1, 3, 2), (1, 3, 2))),
    ((0, 33, 0), ((1, 5, 0), (1, 5, 99))),
]


#: vLLM's XPU image (``vllm/vllm-openai-xpu``) does not install NIXL from ``requirements/kv_connectors.txt``: its
#: ``docker/Dockerfile.xpu`` builds UCX and NIXL from source at ``ARG NIXL_VERSION`` (and installs that release),
#: read in the sdists 0.22.0-0.34.0: first vLLM release -> NIXL release. 0.34.0 names two (v1.5.0 and v1.5.2), so
#: from there the version is unknown (``None``); so is every release before 0.22.0.
XPU_IMAGE_NIXL: list[tuple[Version, Version | None]] = [
    ((0, 22, 0), (0, 7, 0)),
    ((0, 24, 0), (1, 2, 0)),
    ((0, 29, 0), (1, 3, 2)),
    ((0, 33, 0), (1, 5, 0)),
    ((0, 34, 0), None),
]
XPU_IMAGE_REPOSITORY = "vllm/vllm-openai-xpu"


def xpu_image_nixl(vllm: Version | None) -> Version | None:
    """The NIXL release vLLM's XPU image of release ``vllm`` ships (:data:`XPU_IMAGE_NIXL`), or ``None`` unknown."""
    found = None
    if vllm is not None:
        for since, nixl in XPU_IMAGE_NIXL:
            if vllm >= since:
                found = nixl
    return found


def nixl_range(vllm: Version) -> tuple[Version, Version] | None:
    """The NIXL versions vLLM ``vllm`` accepts, or ``None`` before the first known line (0.20)."""
    found = None
    for since, bounds in NIXL_REQUIREMENTS:
        if vllm >= since:
            found = bounds
    return found
