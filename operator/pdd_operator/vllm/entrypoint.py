"""The entrypoint of vLLM's images, and a container whose ``args`` repeat it.

A Kubernetes container without ``command`` runs the image's ``ENTRYPOINT`` with ``args`` appended (a Compose
service's ``command`` is the same: arguments to the ``ENTRYPOINT``). vLLM's ``vllm/vllm-openai`` image, read in
``docker/Dockerfile`` (final ``vllm-openai`` stage) per release:

* up to 0.11.0 (read in 0.10.1.1 and 0.11.0; the same line in the 0.9 tree): ``ENTRYPOINT ["python3", "-m",
  "vllm.entrypoints.openai.api_server"]``;
* from 0.11.1 (read in 0.11.1, 0.12.0, 0.13.0, 0.14.0, 0.21.0, 0.22.0, 0.32.0 and 0.34.0): ``ENTRYPOINT ["vllm",
  "serve"]`` (0.22.0 on add an opt-in ``vllm-openai-nonroot`` stage whose wrapper script forwards to ``vllm serve``).

``args: ["vllm", "serve", "Qwen/Qwen3-8B", ...]`` on that image runs ``vllm serve vllm serve Qwen/Qwen3-8B ...``
(or ``python3 -m vllm.entrypoints.openai.api_server vllm serve ...``). Both parsers take at most one positional,
``model_tag`` (``nargs="?"``; ``vllm/entrypoints/openai/cli_args.py`` make_arg_parser in 0.11.0 and 0.11.1,
``vllm/entrypoints/launchers/cli_args.py`` in 0.32.0), so ``vllm`` becomes the model and ``serve`` is left over:
``FlexibleArgumentParser.parse_args`` ends in argparse's ``parse_args`` (``vllm/utils/__init__.py`` 0.11.0,
``vllm/utils/argparse_utils.py`` 0.32.0), which stops with ``error: unrecognized arguments: serve ...`` (exit 2).
With ``--model`` the parser moves that model to the front and ``vllm serve`` are both left over (from 0.11.1:
vllm/utils/argparse_utils.py 0.11.1 l.201, 0.32.0); up to 0.11.0 it refuses ``--model`` after ``serve`` outright.
Either way the server never starts. ``args: ["serve", MODEL, ...]`` (written for an ENTRYPOINT of ``vllm`` alone)
runs ``vllm serve serve MODEL ...`` there: ``serve`` becomes the model and MODEL is left over
(:func:`repeated_entrypoint`). vLLM's CPU, ROCm and XPU release images are read the same way
(:data:`IMAGE_ENTRYPOINTS`; the table of every image, read or not, is docs/entrypoints.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from pdd_operator.vllm.flags import parse_flags
from pdd_operator.vllm.versions import Version, image_repository, is_vllm_image, version_from_image

#: ``vllm serve``: the ENTRYPOINT of vLLM's OpenAI-server images from :data:`SERVE_ENTRYPOINT_SINCE` on, and the
#: words a container with ``args`` only is read as running on any vLLM image
#: (:func:`pdd_operator.vllm.args.command_launches`).
SERVE: tuple[str, ...] = ("vllm", "serve")
#: The ENTRYPOINT of those images before :data:`SERVE_ENTRYPOINT_SINCE`.
API_SERVER: tuple[str, ...] = ("python3", "-m", "vllm.entrypoints.openai.api_server")
#: First release whose ``vllm-openai`` stages run ``vllm serve`` (absent in 0.11.0, present in 0.11.1: docker/
#: Dockerfile l.500, Dockerfile.cpu l.692, Dockerfile.xpu l.770 of the 0.11.1 sdist).
SERVE_ENTRYPOINT_SINCE: Version = (0, 11, 1)


@dataclass(frozen=True)
class ImageEntrypoint:
    """The ENTRYPOINT of one kind of vLLM image, read in the Dockerfile stage its release pipeline publishes.

    Attributes:
        repositories: image repositories (:func:`~pdd_operator.vllm.versions.image_repository`; any registry host).
        source: the Dockerfile stage and the release pipeline step that builds the published image, per release.
        unknown_tags: tag markers of images of the repository built from another stage (``-base``: the ROCm stack
            without vLLM), whose ENTRYPOINT is not read.
    """

    repositories: frozenset[str]
    source: str
    unknown_tags: tuple[str, ...] = ()


#: The images whose ENTRYPOINT is read: ``python3 -m vllm.entrypoints.openai.api_server`` up to 0.11.0 and
#: ``vllm serve`` from :data:`SERVE_ENTRYPOINT_SINCE` on, in every ``vllm-openai`` stage vLLM publishes. Other images
#: users run P/D with, and why their ENTRYPOINT is not known here (docs/entrypoints.md holds the table):
#: AMD's ``rocm/vllm`` and ``rocm/vllm-dev`` (built by AMD's pipeline; vLLM's docs, getting_started/installation/
#: gpu.rocm.inc.md l.416-418 of 0.34.0, say only that rocm/vllm-dev's "entrypoint is /bin/bash"; docker/Dockerfile.rocm
#: ``final`` stage up to 0.13.0 sets ``CMD ["/bin/bash"]`` and no ENTRYPOINT),
#: ``vllm/vllm-tpu`` (docker/Dockerfile.tpu up to 0.14.1 sets ``CMD ["/bin/bash"]`` over a base image whose ENTRYPOINT
#: was not read; later tags come from vllm-project/tpu-inference), Dynamo's ``vllm-runtime``
#: (``ENTRYPOINT ["/opt/nvidia/nvidia_entrypoint.sh"]`` with ``CMD []``: no engine; ai-dynamo/dynamo container/
#: Dockerfile.vllm, runtime stage, commit 039a024) and llm-d's ``llm-d``/``llm-d-cuda`` (``python -m
#: vllm.entrypoints.openai.api_server`` in llm-d/llm-d docker/Dockerfile.cuda at a22af71 and the root Dockerfile at
#: f458af2; which release tag each commit became is not known).
IMAGE_ENTRYPOINTS: tuple[ImageEntrypoint, ...] = (
    ImageEntrypoint(
        frozenset({"vllm/vllm-openai"}),
        "docker/Dockerfile, final vllm-openai stage: api_server in 0.9.0 (l.364), 0.10.0 (l.526), 0.10.1.1 (l.532), "
        "0.11.0 (l.542); vllm serve in 0.11.1 (l.500), 0.12.0 (l.543), 0.14.0 (l.667), 0.21.0 (l.885), 0.32.0 "
        "(l.1332), 0.34.0 (l.1386)"),
    ImageEntrypoint(
        frozenset({"q9t5s3a7/vllm-cpu-release-repo", "q9t5s3a7/vllm-arm64-cpu-release-repo", "vllm/vllm-openai-cpu"}),
        "docker/Dockerfile.cpu vllm-openai stage (.buildkite/release-pipeline.yaml: --target vllm-openai -f "
        "docker/Dockerfile.cpu, 0.10.1.1 l.120, 0.14.0 l.208, 0.32.0 l.528, 0.34.0 l.410 and l.430): api_server in "
        "0.10.0 (l.163), 0.10.1.1 (l.182), 0.11.0 (l.179); vllm serve in 0.11.1 (l.692), 0.12.0 (l.201), 0.14.0 "
        "(l.203), 0.21.0 (l.236), 0.32.0 (l.494), 0.34.0 (l.507)"),
    ImageEntrypoint(
        frozenset({"vllm/vllm-openai-rocm"}),
        "docker/Dockerfile.rocm vllm-openai stage (.buildkite/release-pipeline.yaml 0.20.2 l.709-717: --target "
        "vllm-openai -f docker/Dockerfile.rocm, tagged vllm-release-repo:<commit>-rocm, published as "
        "vllm/vllm-openai-rocm from January 2026, docs gpu.rocm.inc.md l.416 of 0.34.0): vllm serve in 0.14.0 "
        "(l.389), 0.20.2 (l.531), 0.21.0 (l.547), 0.32.0 (l.1016), 0.34.0 (l.592); its -base tags are the ROCm stack "
        "without vLLM (docs l.374)",
        unknown_tags=("base",)),
    ImageEntrypoint(
        frozenset({"vllm/vllm-openai-xpu"}),
        "docker/Dockerfile.xpu vllm-openai stage (.buildkite/release-pipeline.yaml 0.32.0 l.497-503: --target "
        "vllm-openai -f docker/Dockerfile.xpu): api_server in 0.10.1.1 (l.61), 0.11.0 (l.72); vllm serve in 0.11.1 "
        "(l.770), 0.12.0 (l.83), 0.21.0 (l.182), 0.32.0 (l.286), 0.34.0 (l.246)"),
    ImageEntrypoint(
        frozenset({"intel/vllm"}),
        "Intel's XPU images, which vLLM's docs name as its prebuilt XPU images 'based on vLLM released version' "
        "(getting_started/installation/gpu.xpu.inc.md l.49 of 0.12.0, l.61 of 0.26.0): the docker/Dockerfile.xpu "
        "vllm-openai stage (api_server in 0.9.0 l.55, 0.10.0 l.56, 0.11.0 l.72; vllm serve in 0.11.1 l.78, 0.12.0 "
        "l.83, 0.17.0 l.179, 0.26.0 l.245, 0.34.0 l.246); Intel's own release notes start every tag with "
        "`docker run --entrypoint= intel/vllm:<tag> /bin/bash` to clear that ENTRYPOINT (intel/ai-containers "
        "vllm/0.10.2-xpu.md, 0.14.1-xpu.md, 0.17.0-xpu.md)"),
)

#: Image repositories whose ENTRYPOINT per release is read (:data:`IMAGE_ENTRYPOINTS`); any registry host in front.
ENTRYPOINT_READ_REPOSITORIES = frozenset(r for row in IMAGE_ENTRYPOINTS for r in row.repositories)

_API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"


def image_entrypoint(image: str) -> tuple[str, ...] | None:
    """The ENTRYPOINT of ``image`` as words, or ``None`` where it was not read (an image outside
    :data:`IMAGE_ENTRYPOINTS`, or a tag of one built from another stage, such as ``vllm/vllm-openai-rocm:latest-base``).
    A tag without a version (``latest``, ``nightly``, a digest) is taken as a current release: ``vllm serve``."""
    repository = image_repository(image)
    row = next((r for r in IMAGE_ENTRYPOINTS if repository in r.repositories), None)
    if row is None:
        return None
    last = image.split("@", 1)[0].rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1].lower() if ":" in last else ""
    if any(marker in tag.replace("_", "-").split("-") for marker in row.unknown_tags):
        return None
    version = version_from_image(image)
    return API_SERVER if version is not None and version < SERVE_ENTRYPOINT_SINCE else SERVE


def entrypoint_unread(image: str) -> bool:
    """Whether ``image`` is a vLLM image whose ENTRYPOINT was not read, so that a container of it without
    ``command`` whose ``args`` start no engine of their own (a model, flags) runs something not known here.

    True for :func:`~pdd_operator.vllm.versions.is_vllm_image` images outside :data:`IMAGE_ENTRYPOINTS` (and their
    ``-base`` tags) that are not named ``vllm-openai*``: AMD's ``rocm/vllm`` (built by AMD's pipeline; vLLM's
    docker/Dockerfile.rocm ``final`` stage sets ``CMD ["/bin/bash"]`` and no ENTRYPOINT over a base image whose own
    was not read: 0.10.1.1 l.113, 0.11.0 l.119, 0.13.0 l.147, 0.21.0 l.543; vLLM's docs say only that the entrypoint
    of AMD's rocm/vllm-dev "is /bin/bash", gpu.rocm.inc.md l.314 of 0.21.0, l.418 of 0.34.0), ``vllm/vllm-tpu``
    (docker/Dockerfile.tpu sets ``CMD ["/bin/bash"]`` over ``$BASE_IMAGE``: 0.10.1.1 l.31, 0.11.0 l.36, 0.21.0 l.36;
    no Dockerfile.tpu in 0.34.0), ``vllm-nixl`` and any ``<org>/vllm``. Where the ENTRYPOINT is empty, ``args: [MODEL,
    ...]`` is run as a program named MODEL; where it is ``vllm serve``, as the engine: which one is not known, so such
    an engine is "not checked" (rule-free), never read as ``vllm serve``. Images named ``vllm-openai*`` (mirrors, and
    builds on vLLM's OpenAI image such as ``aibrix/vllm-openai-*`` and ``lmcache/vllm-openai``) are read as vLLM's
    OpenAI image: ``vllm serve``.
    """
    if not is_vllm_image(image) or image_entrypoint(image) is not None:
        return False
    name = image.split("@", 1)[0].rsplit("/", 1)[-1].split(":", 1)[0].lower()
    return not name.startswith("vllm-openai") or image_repository(image) in ENTRYPOINT_READ_REPOSITORIES


def leading_entry(args: list[str]) -> int:
    """How many leading words of ``args`` start a vLLM engine themselves: 2 for ``vllm serve`` (``vllm`` by any
    path), 3 for ``python[3] -m vllm.entrypoints.openai.api_server``; 0 for anything else (flags, a model, a bare
    ``serve``: :func:`leading_serve`)."""
    if len(args) >= 2 and args[0].rsplit("/", 1)[-1] == "vllm" and args[1] == "serve":
        return 2
    if (len(args) >= 3 and args[0].rsplit("/", 1)[-1].startswith("python") and args[1] == "-m"
            and args[2] == _API_SERVER_MODULE):
        return 3
    return 0


def leading_serve(args: list[str]) -> bool:
    """Whether ``args`` start with the bare subcommand ``serve``: written for an image whose ENTRYPOINT is ``vllm``
    alone, so that ``vllm serve ...`` runs; on an ENTRYPOINT that already says ``vllm serve`` it repeats it."""
    return bool(args) and args[0] == "serve"


@dataclass(frozen=True)
class RepeatedEntrypoint:
    """A container without ``command`` whose ``args`` start with an engine entry point of their own.

    Attributes:
        written: the leading words of ``args`` that start an engine (``("vllm", "serve")``, or ``("serve",)``).
        entrypoint: the image's ENTRYPOINT (:func:`image_entrypoint`), which runs first; ``None`` where it was not
            read (a vLLM image outside :data:`IMAGE_ENTRYPOINTS`).
        left_over: the word vLLM's parser refuses ('unrecognized arguments') or ``--model`` (which the api_server
            parser refuses after ``serve``); ``""`` where the argv parses and only the model is wrong (``serve`` and
            flags without a model: the model is ``serve`` on ``vllm serve``, the default one on the api_server);
            ``None`` where :attr:`entrypoint` is not known.
    """

    written: tuple[str, ...]
    entrypoint: tuple[str, ...] | None
    left_over: str | None = None

    @property
    def fails(self) -> bool:
        """Whether vLLM's parser stops (exit 2, or the api_server's ``ValueError``) before the server starts."""
        return bool(self.left_over)


def repeated_entrypoint(container: dict) -> RepeatedEntrypoint | None:
    """The entry point a container's ``args`` repeat, or ``None``: it has a ``command`` (which replaces the
    ENTRYPOINT), its ``args`` start with no entry point (flags, a model), or its image is not one of vLLM's
    (:func:`~pdd_operator.vllm.versions.is_vllm_image`; another image's entrypoint is not known here).

    ``vllm serve`` (or ``python -m vllm.entrypoints.openai.api_server``) written again always fails: its first word
    becomes the one positional ``model_tag`` and the next is left over. A bare ``serve`` (written for an ENTRYPOINT
    of ``vllm`` alone) becomes the model on ``vllm serve``: the model written after it is left over (and with
    ``--model`` FlexibleArgumentParser.parse_args moves that model to the front and leaves ``serve`` over:
    vllm/utils/argparse_utils.py 0.11.1 l.201, 0.14.0 l.193, 0.34.0 l.328); on the api_server entrypoint
    (``python3 -m vllm.entrypoints.openai.api_server serve ...``, up to 0.11.0) a model written after it is left over
    and a ``--model`` word raises "With `vllm serve`, you should provide the model as a positional argument"
    (parse_args sees ``serve`` first: vllm/utils.py 0.9.0 l.1400, vllm/utils/__init__.py 0.10.1.1 l.1775, 0.11.0
    l.1857), while ``--model=M`` alone parses (the api_server ignores ``model_tag``)."""
    image = str(container.get("image") or "")
    args = [str(x) for x in container.get("args") or []]
    if container.get("command") or not is_vllm_image(image):
        return None
    entrypoint = image_entrypoint(image)
    n = leading_entry(args)
    if n:
        return RepeatedEntrypoint(written=tuple(args[:n]), entrypoint=entrypoint,
                                  left_over=None if entrypoint is None else " ".join(args[1:n]))
    if not leading_serve(args):
        return None
    if entrypoint is None:
        return RepeatedEntrypoint(written=("serve",), entrypoint=None)
    left_over = _serve_left_over(args[1:], entrypoint)
    return None if left_over is None else RepeatedEntrypoint(("serve",), entrypoint, left_over)


def _serve_left_over(rest: list[str], entrypoint: tuple[str, ...]) -> str | None:
    """What vLLM refuses in ``<entrypoint> serve <rest>`` (:attr:`RepeatedEntrypoint.left_over`); ``None`` where
    the engine starts as intended (the api_server with ``--model=M``, which ignores ``model_tag``)."""
    model, flags = parse_flags(["vllm", "serve", *rest])
    positional = model if model is not None and "--model" not in flags else None
    if entrypoint == SERVE:
        return positional or ("serve" if model is not None else "")
    if positional or "--model" in rest:
        return positional or "--model"
    return None if model is not None else ""


#: The first release that ships vLLM's Rust frontend, the ``vllm-rs`` binary (``vllm-rs serve MODEL ... -- ENGINE
#: FLAGS``, :data:`pdd_operator.vllm.script.RUST_FRONTEND`): the 0.22.0 sdist first has ``rust/src/cmd`` (Cargo.toml
#: ``[[bin]] name = "vllm-rs"``, main.rs ``Command::Serve``), setup.py builds it into the package as ``vllm/vllm-rs``
#: (0.22.0 lines 38, 1142-1156) and docker/Dockerfile copies it there (0.22.0 line 511). The 0.9.0-0.21.0 sdists have
#: no ``rust/`` tree and no file naming ``vllm-rs``: ``vllm-rs`` is no command of theirs.
RUST_FRONTEND_SINCE: Version = (0, 22, 0)
#: The first release whose images put ``vllm-rs`` on ``PATH``: docker/Dockerfile links ``/usr/local/bin/vllm-rs`` to
#: the package's binary from 0.31.0 (line 1090; 0.34.0 line 1018; Dockerfile.cpu, .rocm and .xpu name it too); in
#: 0.22.0-0.30.0 the binary is only ``<site-packages>/vllm/vllm-rs`` (setup.py: "we may use ``RustBin`` to directly
#: install it into ``bin``", 0.22.0 line 1147; pyproject.toml's only script is ``vllm``).
RUST_FRONTEND_ON_PATH_SINCE: Version = (0, 31, 0)
