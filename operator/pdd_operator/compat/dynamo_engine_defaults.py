"""What Dynamo's vLLM worker (``python -m dynamo.vllm``) adds to the engine arguments by itself, per Dynamo release.

Read in the ``ai-dynamo`` wheels (``dynamo/vllm/args.py``) of Dynamo 0.9.0, 0.9.1 (vllm-runtime images with vLLM
0.14.1), 1.0.0, 1.0.1, 1.0.2 (vLLM 0.16.0) and 1.1.0 (vLLM 0.19.0):

- KV events: ``create_kv_events_config`` returns a ``KVEventsConfig(enable_kv_cache_events=True, publisher="zmq",
  endpoint=f"tcp://*:{DYN_VLLM_KV_EVENT_PORT - dp_rank}")`` (port 20080 by default, ``dynamo/vllm/envs.py``) for a
  worker that is not a decode worker (0.9.x: ``--is-decode-worker``; 1.0.x: ``disaggregation_mode`` decode, which
  ``--disaggregation-mode decode`` or the deprecated ``--is-decode-worker`` set), whose prefix caching is on (Dynamo
  turns an unset ``enable_prefix_caching`` on) and that gave no ``--kv-events-config`` of its own; 1.0.x warns that
  this is deprecated. 1.1.0 returns ``None`` there: KV events only when ``--kv-events-config`` is given
  (ai-dynamo/dynamo#6404, #7591). vLLM 0.13-0.19 must turn the hybrid KV cache manager off when
  ``kv_events_config`` is set (vllm/config/vllm.py), so a prefill worker of Dynamo 0.9-1.0 with
  ``--no-disable-hybrid-kv-cache-manager`` refuses to start (``hma-explicit-forced-off``).
- Block size: an unset ``block_size`` becomes 16 ("Setting reasonable default of 16 for block_size") in 0.9.x and
  1.0.x; 1.1.0 leaves it to vLLM.
- KV connector: before 1.0.0 the worker builds NixlConnector itself from ``--connector`` (default nixl); that is
  read in :mod:`pdd_operator.compat.manifests` (``DYNAMO_EXPLICIT_CONNECTOR_SINCE``).

Only Dynamo's own vLLM runtime images name the release (``nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.0.1``); a
``-dev``/``rc`` tag or another image gives no release, and nothing is added (never guessed).
"""

from __future__ import annotations

import re

from pdd_operator.vllm.versions import Version, fmt, image_repository, parse_version

#: Dynamo releases whose dynamo.vllm creates kv_events_config and defaults block_size to 16 (read in 0.9.0-1.0.2;
#: gone in 1.1.0). Earlier releases were not read here.
AUTO_DEFAULTS_SINCE: Version = (0, 9, 0)
AUTO_DEFAULTS_UNTIL: Version = (1, 1, 0)
_RUNTIME_REPOSITORY = "ai-dynamo/vllm-runtime"
_RELEASE_TAG = re.compile(r"^v?(\d+\.\d+\.\d+)(?:-cuda\d+)?$")


def dynamo_release(image: str) -> Version | None:
    """The Dynamo release of a Dynamo vLLM runtime image (``nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.0.1``,
    ``...:0.9.1-cuda13``), or ``None`` (another image, a digest, a ``-dev``/``rc`` preview, ``latest``)."""
    ref = image.split("@", 1)[0]
    last = ref.rsplit("/", 1)[-1]
    if image_repository(image) != _RUNTIME_REPOSITORY or ":" not in last:
        return None
    match = _RELEASE_TAG.match(last.split(":", 1)[1])
    return parse_version(match.group(1)) if match else None


def _auto_release(argv: list[str], image: str) -> Version | None:
    if "dynamo.vllm" not in argv:
        return None
    release = dynamo_release(image)
    return release if release is not None and AUTO_DEFAULTS_SINCE <= release < AUTO_DEFAULTS_UNTIL else None


def added_kv_events(argv: list[str], flags: dict, image: str, prefix_caching: bool | None,
                    kv_events: bool) -> str | None:
    """Why dynamo.vllm sets ``kv_events_config`` on this engine itself (a sentence fragment for findings), or
    ``None``. ``argv``: the engine's argv (``dynamo.vllm`` first); ``flags``: its parsed flags; ``prefix_caching``:
    ``--enable-prefix-caching`` as given (``None`` unset: Dynamo turns it on); ``kv_events``: the engine gives
    ``--kv-events-config`` itself. Pure."""
    release = _auto_release(argv, image)
    if release is None or kv_events or prefix_caching is False:
        return None
    if "--is-decode-worker" in argv or flags.get("--disaggregation-mode") == "decode":
        return None
    return (f"dynamo.vllm of Dynamo {fmt(release)} sets kv_events_config itself (a ZMQ publisher, as prefix caching "
            "is on and no --kv-events-config is given; dynamo/vllm/args.py create_kv_events_config)")


def added_block_size(argv: list[str], image: str, block_size: int | None) -> int | None:
    """The block size dynamo.vllm gives an engine that sets none (16, Dynamo 0.9.x-1.0.x), else ``None``. Pure."""
    return 16 if block_size is None and _auto_release(argv, image) is not None else None
