"""Model names as launchers rewrite them: a Hugging Face Hub id and its local cache snapshot path.

vLLM hashes ``--model`` as written (``model_config.model`` is a factor of the NIXL compatibility hash, 0.13+), so
``Qwen/Qwen3-32B`` and ``/models/hub/models--Qwen--Qwen3-32B/snapshots/<sha>`` are different models to a plain
``vllm serve``. Dynamo's vLLM worker is different: before it starts the engine, a ``--model`` that is not a local
path is downloaded with ``fetch_llm`` and replaced by the snapshot directory in the Hub cache
(``components/src/dynamo/vllm/main.py``: ``if not os.path.exists(config.model): config.model =
config.engine_args.model = await fetch_llm(config.model)``), so vLLM sees the snapshot path.

The cache layout is huggingface_hub's: ``<cache>/models--<id with "/" as "--">/snapshots/<commit>``, where
``<cache>`` is ``HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``
(huggingface_hub ``constants.HF_HUB_CACHE``, ``file_download.repo_folder_name``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: ``<cache>/models--<org>--<name>/snapshots/<revision>`` (a trailing slash allowed).
_SNAPSHOT = re.compile(r"^(?P<cache>.*)/models--(?P<folder>[^/]+)/snapshots/(?P<revision>[^/]+)/?$")

#: Launchers that replace a Hub id by its cache snapshot path before vLLM reads ``--model``.
RESOLVING_LAUNCHERS = ("dynamo.vllm",)


@dataclass(frozen=True)
class Snapshot:
    """A Hub cache snapshot directory: ``repo_id`` (``org/name``), ``revision`` (the commit directory name) and
    ``cache`` (the Hub cache directory it lies in)."""

    repo_id: str
    revision: str
    cache: str


def snapshot(model: str | None) -> Snapshot | None:
    """The Hub snapshot a ``--model`` path names, or ``None`` when it is not one."""
    match = _SNAPSHOT.match(model or "")
    if not match:
        return None
    return Snapshot(match["folder"].replace("--", "/", 1), match["revision"], match["cache"])


def hub_cache(env: dict[str, str]) -> str | None:
    """The Hub cache directory an engine with environment ``env`` downloads into, when its env says
    (``HF_HUB_CACHE``, else ``HF_HOME`` + ``/hub``); ``None`` when it is the image user's default."""
    if env.get("HF_HUB_CACHE"):
        return env["HF_HUB_CACHE"].rstrip("/")
    if env.get("HF_HOME"):
        return env["HF_HOME"].rstrip("/") + "/hub"
    return None


def resolves_to_snapshot(launcher: str, model: str | None) -> bool:
    """True when ``launcher`` will replace ``model`` by a Hub cache snapshot path: a resolving launcher and a
    model that reads as a Hub id (``org/name``, not an absolute or relative path)."""
    return (launcher in RESOLVING_LAUNCHERS and bool(model) and model.count("/") == 1
            and not model.startswith((".", "/", "~")))
