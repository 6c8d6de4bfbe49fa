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
  The publisher binds ``DYN_VLLM_KV_EVENT_PORT`` (20080) minus the DP rank on every interface, so the checker lists
  it among the engine's ports (:func:`added_kv_events_ports`) and the port-conflict rules compare it: two hostNetwork
  workers of such a release on one node both bind 20080.
- Block size: an unset ``block_size`` becomes 16 ("Setting reasonable default of 16 for block_size") in 0.9.x and
  1.0.x; 1.1.0 leaves it to vLLM.
- Prefix caching: ``update_engine_config_with_dynamo`` turns an unset ``enable_prefix_caching`` on ("Defaulting to
  True (vLLM v1 default behavior)"; dynamo/vllm/args.py lines 225-230 in 1.1.0, 233-238 in 1.3.0.post1, 343-360 in
  1.6.1, where embedding and classify workers get False), whatever vLLM's own default for the model is: vLLM
  0.20.0-0.25.0 leaves it off for hybrid models (:data:`PREFIX_CACHING_ON_SINCE`, :func:`prefix_caching_default`).
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


#: The oldest Dynamo release read whose dynamo.vllm turns an unset ``--enable-prefix-caching`` on (0.9.0; also read in
#: 0.9.1, 1.0.x, 1.1.0, 1.3.0.post1 and 1.6.1, the newest read). Every vllm-runtime image whose vLLM runs hybrid SSM
#: over NIXL (vLLM >= 0.18, Dynamo >= 1.1) lies in that range.
PREFIX_CACHING_ON_SINCE: Version = (0, 9, 0)


def prefix_caching_default(launcher: str, prefix_caching: bool | None) -> bool | None:
    """Whether the engine runs prefix caching when the launcher decides it: ``True`` for a ``dynamo.vllm`` worker
    that gives neither ``--enable-prefix-caching`` nor ``--no-enable-prefix-caching`` (Dynamo turns it on, module
    docstring), else ``None`` (the flag as given, or vLLM's own default, decides). ``launcher``: the engine's
    launcher (``"dynamo.vllm"`` or ``""``); ``prefix_caching``: the flag as given (``None`` unset). Pure."""
    return True if launcher == "dynamo.vllm" and prefix_caching is None else None


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


#: Dynamo's KV events publisher base port when ``DYN_VLLM_KV_EVENT_PORT`` is not set (``dynamo/vllm/envs.py``, 0.9.0-1.0.2;
#: Dynamo's operator sets ``DYN_VLLM_KV_EVENT_PORT`` to 20080 + engine id itself for its failover engines).
KV_EVENT_PORT_DEFAULT = 20080


def added_kv_events_ports(env: dict[str, str], dp: int | None) -> tuple[int, ...]:
    """The ports of the ZMQ publisher dynamo.vllm binds for the KV events it adds itself (:func:`added_kv_events`):
    ``create_kv_events_config``'s ``tcp://*:{DYN_VLLM_KV_EVENT_PORT - dp_rank}`` (``dynamo/vllm/args.py`` 0.9.0-1.0.2),
    one per data-parallel rank of the engine (``dp``: ``--data-parallel-size``; ``None``, not known: rank 0 only).
    ``env``: the engine's environment; a ``DYN_VLLM_KV_EVENT_PORT`` that is not a literal integer gives ``()`` (not
    known here). Pure."""
    raw = env.get("DYN_VLLM_KV_EVENT_PORT", str(KV_EVENT_PORT_DEFAULT)).strip()
    if not raw.isdigit():
        return ()
    return tuple(int(raw) - rank for rank in range(dp if dp and dp > 0 else 1))


def added_block_size(argv: list[str], image: str, block_size: int | None) -> int | None:
    """The block size dynamo.vllm gives an engine that sets none (16, Dynamo 0.9.x-1.0.x), else ``None``. Pure."""
    return 16 if block_size is None and _auto_release(argv, image) is not None else None
