"""What Dynamo's vLLM worker (``python -m dynamo.vllm``) adds to the engine arguments by itself, per Dynamo release.

Read in the ``ai-dynamo`` wheels (``dynamo/vllm/args.py``) of Dynamo 0.4.0, 0.4.1, 0.5.0, 0.5.1, 0.6.0, 0.6.1,
0.7.0, 0.7.0.post1, 0.7.1 (vllm-runtime images with vLLM 0.11.0), 0.8.0, 0.8.1, 0.8.1.post3 (vLLM 0.12.0), 0.9.0,
0.9.1 (vLLM 0.14.1), 1.0.0, 1.0.1, 1.0.2 (vLLM 0.16.0) and 1.1.0 (vLLM 0.19.0); the per-release differences before
0.9.0 are at :data:`AUTO_DEFAULTS_SINCE`, :data:`KV_EVENTS_FIXED_PORT_SINCE` and :data:`KV_EVENTS_NO_LORA`:

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
- KV connector: before 1.0.0 the worker builds its connector itself from ``--connector`` (default nixl); from 1.0.0
  it adds none and rejects ``--connector`` (:func:`added_connector`; the boundary is
  :data:`~pdd_operator.compat.dynamo_worker_flags.CONNECTOR_REJECTED_SINCE`, read in every release 0.6.0-1.6.1).

Only Dynamo's own vLLM runtime images name the release (``nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.0.1``); a
``-dev``/``rc`` tag or another image gives no release, and nothing is added (never guessed).
"""

from __future__ import annotations

import json
import re

from pdd_operator.compat.dynamo_worker_flags import CONNECTOR_REJECTED_SINCE
from pdd_operator.vllm.versions import Version, fmt, image_repository, parse_version, wrapped_release_tag

#: Dynamo releases whose dynamo.vllm creates kv_events_config and defaults block_size to 16: read in the ai-dynamo
#: wheels of every release 0.4.0-1.0.2 (dynamo/vllm/args.py; block_size ``if ... is None: ... = 16`` at 0.4.0 l.137-138,
#: 0.4.1 l.144-145, 0.5.0 l.181-182, 0.5.1 l.189-190, 0.6.0/0.6.1 l.213-214, 0.7.0-0.7.1 l.315-316, 0.8.0-0.8.1.post3
#: l.379-380, 0.9.0 l.459-460); gone in 1.1.0. 0.4.0 is the first ai-dynamo wheel that ships ``dynamo/vllm`` (0.3.2's has
#: none); before it the worker lived in the repository's examples and components, outside the wheel and the runtime image's
#: ``python -m dynamo.vllm``, and is not read: a vllm-runtime 0.3.x image gets nothing added.
AUTO_DEFAULTS_SINCE: Version = (0, 4, 0)
AUTO_DEFAULTS_UNTIL: Version = (1, 1, 0)
#: The first release whose ``create_kv_events_config`` leaves decode workers out (``if config.is_decode_worker:
#: return None``, 0.7.0 l.328-334) and publishes on ``DYN_VLLM_KV_EVENT_PORT`` (default 20080, dynamo/vllm/envs.py
#: 0.7.0 l.20, 61). Before it (0.4.0-0.6.1) every worker with prefix caching on gets kv_events_config, decode ones
#: too (0.6.1 takes ``--is-decode-worker`` but only skips Dynamo's own subscriber, main.py l.121-124), on a port
#: Dynamo's runtime reserves from the worker's ``--dynamo-port-min``..``max`` range at startup
#: (``configure_ports`` -> ``allocate_and_reserve_port``, 0.6.0 args.py l.229-240): no fixed port. 0.4.x sets it in
#: ``overwrite_args`` (0.4.0 l.227-236, 0.4.1 l.263-272) over a ``--kv-events-config`` of the user's too.
KV_EVENTS_FIXED_PORT_SINCE: Version = (0, 7, 0)
#: 0.7.x only: a worker with ``--enable-lora`` and no ``--kv-events-config`` gets no kv_events_config (vLLM's KV events
#: with LoRA, vllm-project/vllm#27728; 0.7.0 args.py l.340-356, which raises ValueError where both are given); gone in
#: 0.8.0.
KV_EVENTS_NO_LORA: tuple[Version, Version] = ((0, 7, 0), (0, 8, 0))
_RUNTIME_REPOSITORY = "ai-dynamo/vllm-runtime"
_RELEASE_TAG = re.compile(r"^(\d+\.\d+\.\d+)(\.post\d+)?$")
#: The ``.postN`` releases of ai-dynamo whose wheels were read (each agrees with the release it extends in the worker
#: flags and defaults read: :mod:`pdd_operator.compat.dynamo_worker_flags`); another ``.postN`` image (vllm-runtime
#: ``0.6.1.post1``, ``0.7.0.post2``, which no ai-dynamo or kvbm wheel of that number matches) names no release read.
POST_RELEASES_READ = frozenset({"0.7.0.post1", "0.8.1.post3", "1.2.0.post1", "1.3.0.post1"})


def dynamo_release(image: str) -> Version | None:
    """The Dynamo release of a Dynamo vLLM runtime image (``nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.0.1``,
    ``...:0.9.1-cuda13``, ``...:1.4.0-efa-amd64``: the variant suffixes of ``wrapped_vllm_versions.json``;
    ``...:1.3.0.post1``, a ``.postN`` of :data:`POST_RELEASES_READ`, as the release it extends), or ``None`` (another
    image, a digest, a ``-dev``/``rc`` preview, ``latest``, another ``.postN``). The one reading of an image's Dynamo
    release: the worker flags, the defaults it adds (connector, block size, KV events, side-channel port:
    ``compat.manifests``) and KVBM's release all follow it; where it gives ``None`` they say the release is unknown
    (``dynamo-connector-assumed``, the side-channel port "not checked") rather than read a preview as the release it
    precedes. Only ``ai-dynamo/vllm-runtime`` names one for ``dynamo.vllm``: ``sglang-runtime`` and
    ``tensorrtllm-runtime`` ship other workers, and ``ai-dynamo/dynamo:<X>-ci-<sha>-vllm-runtime`` images (in the
    manifests read, e.g. ``1.4.1-ci-cb301ba...-vllm-runtime``) are CI builds of a commit, not a release."""
    if image_repository(image) != _RUNTIME_REPOSITORY:
        return None
    match = _RELEASE_TAG.match(wrapped_release_tag(image) or "")
    if match is None or (match.group(2) and match.group(0) not in POST_RELEASES_READ):
        return None
    return parse_version(match.group(1))


#: The oldest Dynamo release read whose dynamo.vllm turns an unset ``--enable-prefix-caching`` on (0.4.0, l.92-96;
#: also read in 0.4.1 l.99-103, 0.5.0 l.123-127, 0.5.1 l.130-134, 0.6.x l.140-144, 0.7.x l.195-199, 0.8.x l.255-259,
#: 0.9.x, 1.0.x, 1.1.0, 1.3.0.post1 and 1.6.1, the newest read). Every vllm-runtime image whose vLLM runs hybrid SSM
#: over NIXL (vLLM >= 0.18, Dynamo >= 1.1) lies in that range.
PREFIX_CACHING_ON_SINCE: Version = (0, 4, 0)


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
    decode = "--is-decode-worker" in argv or flags.get("--disaggregation-mode") == "decode"
    if decode and release >= KV_EVENTS_FIXED_PORT_SINCE:
        return None  # 0.7.0+: decode workers publish nothing; before, every worker did
    if KV_EVENTS_NO_LORA[0] <= release < KV_EVENTS_NO_LORA[1] and flags.get("--enable-lora") is True:
        return None
    where = "overwrite_args" if release < (0, 5, 0) else "create_kv_events_config"
    return (f"dynamo.vllm of Dynamo {fmt(release)} sets kv_events_config itself (a ZMQ publisher, as prefix caching "
            f"is on and no --kv-events-config is given; dynamo/vllm/args.py {where})")


#: Dynamo's KV events publisher base port when ``DYN_VLLM_KV_EVENT_PORT`` is not set (``dynamo/vllm/envs.py``, 0.9.0-1.0.2;
#: Dynamo's operator sets ``DYN_VLLM_KV_EVENT_PORT`` to 20080 + engine id itself for its failover engines).
KV_EVENT_PORT_DEFAULT = 20080


def added_kv_events_ports(env: dict[str, str], dp: int | None, release: Version | None = None) -> tuple[int, ...]:
    """The ports of the ZMQ publisher dynamo.vllm binds for the KV events it adds itself (:func:`added_kv_events`):
    ``create_kv_events_config``'s ``tcp://*:{DYN_VLLM_KV_EVENT_PORT - dp_rank}`` (``dynamo/vllm/args.py`` 0.7.0-1.0.2),
    one per data-parallel rank of the engine (``dp``: ``--data-parallel-size``; ``None``, not known: rank 0 only).
    ``env``: the engine's environment; a ``DYN_VLLM_KV_EVENT_PORT`` that is not a literal integer gives ``()`` (not
    known here). ``release``: the worker's Dynamo release; one before :data:`KV_EVENTS_FIXED_PORT_SINCE` gives ``()``
    (its port is reserved at startup from a range, never a fixed one). Pure."""
    if release is not None and release < KV_EVENTS_FIXED_PORT_SINCE:
        return ()
    raw = env.get("DYN_VLLM_KV_EVENT_PORT", str(KV_EVENT_PORT_DEFAULT)).strip()
    if not raw.isdigit():
        return ()
    return tuple(int(raw) - rank for rank in range(dp if dp and dp > 0 else 1))


def added_block_size(argv: list[str], image: str, block_size: int | None) -> int | None:
    """The block size dynamo.vllm gives an engine that sets none (16, Dynamo 0.4.0-1.0.x:
    :data:`AUTO_DEFAULTS_SINCE`), else ``None``. Pure."""
    return 16 if block_size is None and _auto_release(argv, image) is not None else None


#: The KV transfer config dynamo.vllm builds for each ``--connector`` name before Dynamo 1.0 (``create_kv_transfer_config``
#: in dynamo/vllm/args.py of the 0.9.1 wheel, l.509-548; the names it takes, ``VALID_CONNECTORS`` l.27: nixl,
#: lmcache, kvbm, null, none).
_CONNECTOR_CONFIGS: dict[str, dict] = {
    "nixl": {"kv_connector": "NixlConnector", "kv_role": "kv_both"},
    "lmcache": {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"},
    "kvbm": {"kv_connector": "DynamoConnector", "kv_connector_module_path": "kvbm.vllm_integration.connector",
             "kv_role": "kv_both"},
}


def _connector_words(argv: list[str]) -> list[str] | None:
    """The names after ``--connector`` (``nargs="*"``: up to the next option; ``--connector=a``), or ``None``
    where the flag is not given."""
    for i, word in enumerate(argv):
        if word.startswith("--connector="):
            return [word.split("=", 1)[1]]
        if word == "--connector":
            rest = argv[i + 1:]
            end = next((j for j, w in enumerate(rest) if w.startswith("-")), len(rest))
            return rest[:end]
    return None


def added_connector(argv: list[str], release: Version | None, image: str) -> tuple[dict, str]:
    """The KV transfer config a ``dynamo.vllm`` worker without ``--kv-transfer-config`` runs with, and, where its
    Dynamo release is not known, which default was assumed (a sentence for the ``dynamo-connector-assumed`` warning;
    ``""`` where the release tells it).

    ``argv``: the engine's argv (``dynamo.vllm`` first); ``release``: the Dynamo release of its runtime image
    (``None``: not known, a custom image or a ``-dev`` tag); ``image``: the image, named in the note.

    Per release (dynamo/vllm/args.py): before 1.0 the worker builds the config from ``--connector`` (default
    ``["nixl"]``: 0.9.1 l.138-144; ``none``/``null``/an empty list: no connector, l.444-449; several: a
    ``PdConnector`` over them, l.550-557); the oldest workers (components/backends/vllm/src/dynamo/vllm/args.py at
    ai-dynamo/dynamo 0069741) always set NixlConnector. From :data:`CONNECTOR_REJECTED_SINCE` (1.0.0; read in every
    release 1.0.0-1.6.1) there is no default: ``{}``. Unknown release: ``--disaggregation-mode`` (the 1.x role flag:
    dynamo/vllm/backend_args.py 1.0.0 l.32, 1.4.0 l.82; not in 0.9.1's parser, whose role flags are
    ``--is-prefill-worker``/``--is-decode-worker`` l.123-130) tells a 1.x worker, which adds none; otherwise the pre-1.0
    reading, with the note. Pure."""
    if release is None and any(w == "--disaggregation-mode" or w.startswith("--disaggregation-mode=") for w in argv):
        release = CONNECTOR_REJECTED_SINCE  # the 1.x role flag (dynamo/vllm/backend_args.py 1.0.0 l.32; not in 0.9.1)
    if release is not None and release >= CONNECTOR_REJECTED_SINCE:
        return {}, ""
    words = _connector_words(argv)
    names = [w.lower() for w in (["nixl"] if words is None else words)]
    if not names or any(n in ("none", "null") for n in names):
        config: dict = {}
    else:
        configs = [_CONNECTOR_CONFIGS.get(n, {"kv_connector": n}) for n in names]
        config = configs[0] if len(configs) == 1 else {
            "kv_connector": "PdConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"connectors": configs},
            "kv_connector_module_path": "kvbm.vllm_integration.connector"}
    if release is not None:
        return config, ""
    given = "its --connector " + " ".join(words) if words is not None else "no --connector"
    assumed = config.get("kv_connector") or "no connector"
    return config, (
        f"the worker names no --kv-transfer-config and {given}, and its Dynamo release is not known from its image "
        f"({image or 'none'}): judged with {assumed}, what dynamo.vllm before 1.0 builds from it (--connector, default "
        "nixl: dynamo/vllm/args.py 0.9.1 l.138-144, create_kv_transfer_config l.509-548). From Dynamo 1.0 the worker "
        "adds no connector and rejects --connector: a prefill worker without --kv-transfer-config raises "
        "ValueError('--connector is deprecated and the default is no longer nixl ...') at startup and a decode "
        "worker runs without a connector (args.py 1.0.0 l.189-210)")


#: The Dynamo releases whose dynamo.vllm replaces the engine's ``kv_transfer_config`` whatever ``--kv-transfer-config``
#: says: ``overwrite_args`` sets it among its ``defaults`` with ``setattr(config.engine_args, key, value)`` (0.4.0
#: dynamo/vllm/args.py l.204-245, called from main.py l.49; 0.4.1 l.211-281, main.py l.72). From 0.5.0
#: ``create_kv_transfer_config`` keeps a user-provided one ("Using user-provided kv_transfer_config from
#: --kv-transfer-config", 0.5.0 l.279-291; 0.5.1 l.287-299, 0.6.0 l.313-325, and every release read after).
KV_TRANSFER_OVERWRITTEN: tuple[Version, Version] = ((0, 4, 0), (0, 5, 0))
#: The release from which ``overwrite_args`` reads ``ENABLE_LMCACHE`` (0.4.1 args.py l.34, 219-243; 0.4.0 has none).
_LMCACHE_ENV_SINCE: Version = (0, 4, 1)


def overwritten_connector(argv: list[str], release: Version | None, env: dict[str, str]) -> tuple[dict, str]:
    """The KV transfer config a ``dynamo.vllm`` worker of Dynamo ``release`` runs with in place of the
    ``--kv-transfer-config`` its ``argv`` gives, and a sentence saying so; ``({}, "")`` where the release keeps the
    user's (any release outside :data:`KV_TRANSFER_OVERWRITTEN`, an unknown one, or no ``--kv-transfer-config``).

    0.4.0 always sets NixlConnector ``kv_both``; 0.4.1 the same unless ``ENABLE_LMCACHE`` is ``1``/``true``/``yes``
    (``env``: the worker's environment), where a prefill worker gets a MultiConnector of LMCacheConnectorV1 and
    NixlConnector and any other worker LMCacheConnectorV1 (0.4.1 args.py l.219-248): a pairing these rules do not
    describe, so there ``({}, note)``: the config stays as written and the note says what Dynamo runs instead. Pure."""
    given = any(w == "--kv-transfer-config" or w.startswith("--kv-transfer-config=") for w in argv)
    if (not given or "dynamo.vllm" not in argv or release is None
            or not KV_TRANSFER_OVERWRITTEN[0] <= release < KV_TRANSFER_OVERWRITTEN[1]):
        return {}, ""
    where = ("(overwrite_args in dynamo/vllm/args.py sets kv_transfer_config whatever was given; Dynamo 0.5.0 and "
             "later keep the user's)")
    if release >= _LMCACHE_ENV_SINCE and env.get("ENABLE_LMCACHE", "0").lower() in ("1", "true", "yes"):
        built = ("a MultiConnector of LMCacheConnectorV1 and NixlConnector" if "--is-prefill-worker" in argv
                 else "LMCacheConnectorV1")
        return {}, (f"dynamo.vllm of Dynamo {fmt(release)} with ENABLE_LMCACHE set replaces the worker's "
                    f"--kv-transfer-config with {built} before the engine starts {where}; these rules do not describe "
                    "Dynamo's LMCache pairing, so the pair was judged with the config as written, not as it runs")
    config = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
    return config, (f"dynamo.vllm of Dynamo {fmt(release)} replaces the worker's --kv-transfer-config with "
                    f"{json.dumps(config, separators=(',', ':'))} before the engine starts {where}, so the pair was "
                    "judged with the config Dynamo builds")


#: The worker flags only Dynamo's releases before 1.4 take, all of them the only spelling before 1.0: ``--connector``
#: (0.9.1 l.138-144; refused from 1.0.0, ``_reject_connector_flag``: :data:`CONNECTOR_REJECTED_SINCE`),
#: ``--is-prefill-worker`` and ``--is-decode-worker`` (0.9.1 l.123-130; deprecated aliases of ``--disaggregation-mode``
#: in 1.0.0-1.3.1, 1.0.0 backend_args.py l.407-430, 1.3.0.post1 l.59; gone from 1.4.0:
#: :data:`~pdd_operator.compat.dynamo_worker_flags.WORKER_FLAGS`).
PRE_1_0_FLAGS = ("--connector", "--is-prefill-worker", "--is-decode-worker")


def pre_1_0_flag(argv: list[str]) -> str:
    """The first of :data:`PRE_1_0_FLAGS` a ``dynamo.vllm`` argv names (written for the workers that build their
    connector themselves), or ``""``. Pure."""
    return next((f for f in PRE_1_0_FLAGS if any(w == f or w.startswith(f + "=") for w in argv)), "")
