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
With ``--model`` the 0.32.0 parser moves that model to the front and ``vllm serve`` are both left over; 0.11.x
refuses ``--model`` after ``serve`` outright. Either way the server never starts.
"""

from __future__ import annotations

from dataclasses import dataclass

from pdd_operator.vllm.versions import Version, image_repository, is_vllm_image, version_from_image

#: ``vllm serve``: the ``vllm/vllm-openai`` image's entrypoint from :data:`SERVE_ENTRYPOINT_SINCE` on, and the
#: words a container with ``args`` only is read as running on any vLLM image
#: (:func:`pdd_operator.vllm.args.command_launches`).
SERVE: tuple[str, ...] = ("vllm", "serve")
#: The ``vllm/vllm-openai`` image's entrypoint before :data:`SERVE_ENTRYPOINT_SINCE`.
API_SERVER: tuple[str, ...] = ("python3", "-m", "vllm.entrypoints.openai.api_server")
#: First release whose ``vllm-openai`` stage runs ``vllm serve`` (absent in 0.11.0, present in 0.11.1).
SERVE_ENTRYPOINT_SINCE: Version = (0, 11, 1)
#: Image repositories (:func:`~pdd_operator.vllm.versions.image_repository`) whose ENTRYPOINT per release is read
#: above; any registry host in front of them.
ENTRYPOINT_READ_REPOSITORIES = frozenset({"vllm/vllm-openai"})

_API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"


def image_entrypoint(image: str) -> tuple[str, ...] | None:
    """The ENTRYPOINT of ``image`` as words, or ``None`` where it was not read (any image other than
    :data:`ENTRYPOINT_READ_REPOSITORIES`). A tag without a version (``latest``, ``nightly``, a digest) is taken as a
    current release: ``vllm serve``."""
    if image_repository(image) not in ENTRYPOINT_READ_REPOSITORIES:
        return None
    version = version_from_image(image)
    return API_SERVER if version is not None and version < SERVE_ENTRYPOINT_SINCE else SERVE


def leading_entry(args: list[str]) -> int:
    """How many leading words of ``args`` start a vLLM engine themselves: 2 for ``vllm serve`` (``vllm`` by any
    path), 3 for ``python[3] -m vllm.entrypoints.openai.api_server``; 0 for anything else (flags, a model)."""
    if len(args) >= 2 and args[0].rsplit("/", 1)[-1] == "vllm" and args[1] == "serve":
        return 2
    if (len(args) >= 3 and args[0].rsplit("/", 1)[-1].startswith("python") and args[1] == "-m"
            and args[2] == _API_SERVER_MODULE):
        return 3
    return 0


@dataclass(frozen=True)
class RepeatedEntrypoint:
    """A container without ``command`` whose ``args`` start with an engine entry point of their own.

    Attributes:
        written: the leading words of ``args`` that start an engine (``("vllm", "serve")``).
        entrypoint: the image's ENTRYPOINT (:func:`image_entrypoint`), which runs first; ``None`` where it was not
            read (a vLLM image other than ``vllm/vllm-openai``).
    """

    written: tuple[str, ...]
    entrypoint: tuple[str, ...] | None


def repeated_entrypoint(container: dict) -> RepeatedEntrypoint | None:
    """The entry point a container's ``args`` repeat, or ``None``: it has a ``command`` (which replaces the
    ENTRYPOINT), its ``args`` start with no entry point (flags, a model), or its image is not one of vLLM's
    (:func:`~pdd_operator.vllm.versions.is_vllm_image`; another image's entrypoint is not known here)."""
    image = str(container.get("image") or "")
    args = [str(x) for x in container.get("args") or []]
    if container.get("command") or not is_vllm_image(image):
        return None
    n = leading_entry(args)
    if not n:
        return None
    return RepeatedEntrypoint(written=tuple(args[:n]), entrypoint=image_entrypoint(image))
