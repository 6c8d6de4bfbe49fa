"""The hybrid KV cache manager (HMA) asked for where vLLM must turn it off: the engine refuses to start.

From 0.13.0 ``VllmConfig.__post_init__`` (vllm/config/vllm.py) collects the reasons it must disable HMA
(``need_disable_hybrid_kv_cache_manager``) and, where the user passed ``--no-disable-hybrid-kv-cache-manager``
(``disable_hybrid_kv_cache_manager`` False), raises ``ValueError("Hybrid KV cache manager was explicitly enabled but
is not supported in this configuration ...")`` instead of overriding it as 0.10-0.12 did. With HMA kept on, the
connector factory then refuses a connector that is not ``SupportsHMA`` (``kv_connector/factory.py``: "Connector ...
does not support HMA but HMA is enabled"), which NixlConnector is only from 0.18.0.

The reasons, read in the 0.13.0, 0.14.0, 0.18.0, 0.19.1, 0.20.0, 0.21.0 and 0.32.0 sdists:

- ``kv_events_config is not None`` ("Hybrid KV cache manager is not compatible with KV events"): 0.13.0-0.19.1;
  0.20.0 dropped it;
- chunked local attention (``model_config.attention_chunk_size``, Llama 4) with EAGLE speculative decoding, or with
  ``VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE`` false: every release from 0.13.0 (the variable defaults to
  0 in 0.13.x, to 1 from 0.14.0, vllm/envs.py).

The rule carries no version bounds: it judges only a pair whose release is known (``forced_off_reasons`` is empty for
an unknown one, which ``vllm-version-unknown`` already reports). Probed across releases, an explicit HMA with KV events
would make "not checked" of published recipes for newer releases (Dynamo's GLM-5.3-Flash graph passes both), where
only 0.13-0.19 refuse.

Also judged: the factory's refusal (``kv_connector/factory.py`` ``KVConnectorFactory.create_connector``: "Connector
NixlConnector does not support HMA but HMA is enabled. Please set `--disable-hybrid-kv-cache-manager`."):
``class NixlConnector(KVConnectorBase_V1)`` in the 0.13.0, 0.14.0, 0.16.0, 0.17.0 and 0.17.1 sdists,
``(KVConnectorBase_V1, SupportsHMA)`` from 0.18.0. The factory checks the top-level connector class, so NIXL inside
vLLM's MultiConnector is refused as long as MultiConnector is not ``SupportsHMA``: ``class MultiConnector(
KVConnectorBase_V1)`` in the 0.13.0, 0.14.0, 0.16.0, 0.17.0, 0.17.1, 0.18.0, 0.19.1 and 0.20.0 sdists (an error),
``(KVConnectorBase_V1, SupportsHMA)`` in 0.21.0 (0.20.1 and 0.20.2 not read: a warning). From 0.21.0 its ``__init__``
asserts that every child supports HMA ("HMA should not be enabled unless all sub-connectors support it"), which
depends on the children's classes per release; from 0.22.0 the factory asks ``KVConnectorFactory.supports_hma_config``,
which for MultiConnector is ``MultiConnector.all_children_support_hma``, so an explicit HMA with a child that is not
``SupportsHMA`` (:func:`~pdd_operator.compat.connector_hma.multi_children_without_hma`: LMCacheConnectorV1,
ExampleConnector, FlexKVConnectorV1 in the releases read, 0.22.0-0.34.0) raises the same ValueError whatever the model
(0.34.0 factory.py lines 54-60; vllm#41847). 0.21.x children are not judged.

The rule declares ``since=0.13.0`` (every trigger is bounded there; chunked local attention holds on every later
release), so ``pdd rules`` lists its scope as the code has it. It judges an engine whose release is known as written
(:func:`_release_known`) only: on a pair of unknown release (probed across releases by ``compat.unknown_version``) it
reports nothing, and ``vllm-version-unknown`` reports the unknown version. Probed, the factory's refusal would make
every explicit-HMA NIXL pair "not checked" (0.13-0.17 refuse), although the flag is what 0.18+ NIXL pairs of
sliding-window and hybrid models are told to pass, and KV events with an explicit HMA would do the same to published
recipes for newer releases (Dynamo's GLM-5.3-Flash graph passes both; public_reports_25).

A ``dynamo.vllm`` worker whose image names no Dynamo release read (a preview, ``latest``, a custom image:
:func:`~pdd_operator.compat.dynamo_engine_defaults.dynamo_release`) and that gives neither ``--kv-events-config`` nor
``--no-enable-prefix-caching`` may have kv_events_config set by Dynamo itself (0.4.0-1.0.x) or not (1.1.0+): on vLLM
0.13-0.19 its explicit HMA is "not checked", saying so (:func:`_dynamo_events_unknown`).
"""

from __future__ import annotations

from pdd_operator.compat.connector_hma import multi_children_without_hma
from pdd_operator.compat.dynamo_engine_defaults import AUTO_DEFAULTS_SINCE, AUTO_DEFAULTS_UNTIL, dynamo_release
from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import NOT_CHECKED, Violation, fix_for, rule
from pdd_operator.vllm.versions import Version, fmt, rules_version

#: First release that raises on an explicit HMA it cannot honour (0.10.1.1-0.12.0 override it silently).
_RAISES_SINCE: Version = (0, 13, 0)
#: KV events force HMA off in 0.13.0-0.19.1 (gone in the 0.20.0 sdist's config/vllm.py).
_KV_EVENTS_UNTIL: Version = (0, 20, 0)
#: VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE defaults to "1" from 0.14.0 ("0" in 0.13.0's envs.py).
_CHUNKED_ALLOWED_BY_DEFAULT_SINCE: Version = (0, 14, 0)
_ENV = "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE"
_EAGLE = ("eagle", "eagle3", "mtp", "deepseek_mtp")
#: NixlConnector subclasses ``SupportsHMA`` from 0.18.0 (``nixl_connector.py``; not in the 0.13.0-0.17.1 sdists).
_NIXL_HMA_SINCE: Version = (0, 18, 0)
#: MultiConnector subclasses ``SupportsHMA`` from 0.21.0 (``multi_connector.py``: ``class MultiConnector(
#: KVConnectorBase_V1)`` in the 0.13.0, 0.14.0, 0.16.0, 0.17.0, 0.17.1, 0.18.0, 0.19.1 and 0.20.0 sdists,
#: ``(KVConnectorBase_V1, SupportsHMA)`` in 0.21.0, which then asserts every child supports HMA).
_MULTI_HMA_SINCE: Version = (0, 21, 0)
#: The last release whose multi_connector.py was read without ``SupportsHMA`` (0.20.1, 0.20.2 were not read).
_MULTI_READ_UNTIL: Version = (0, 20, 0)


def _env_true(value: str) -> bool | None:
    """vLLM's ``bool(int(os.getenv(...)))`` of ``value``; ``None`` where it is no integer (vLLM would raise)."""
    try:
        return bool(int(value.strip()))
    except ValueError:
        return None


def _spec_fix(pair: PDPair, role: RoleConfig) -> str:
    """What to change in a PDDeployment so that vLLM may keep HMA on ``role``: one phrase per reason of
    :func:`forced_off_reasons` (in its order), each naming the spec field that sets it."""
    version = pair.version
    parts = []
    if role.kv_events and version is not None and version < _KV_EVENTS_UNTIL:
        parts.append(f"remove --kv-events-config from spec.{role.role}.extraArgs")
    if pair.model.attention_chunk_size:
        if str((role.speculative or {}).get("method") or "").lower() in _EAGLE:
            parts.append("remove the EAGLE-family method from spec.speculative")
        else:
            parts.append(f"set {_ENV}=1 in spec.{role.role}.env")
    text = " and ".join(parts) or f"remove what forces HMA off from spec.{role.role}.extraArgs"
    return text[0].upper() + text[1:]


def forced_off_reasons(pair: PDPair, role: RoleConfig) -> list[str]:
    """Why vLLM ``pair.version`` must turn HMA off on ``role`` (empty: it can keep it). Pure."""
    version = pair.version
    if version is None or version < _RAISES_SINCE:
        return []
    reasons = []
    if role.kv_events and version < _KV_EVENTS_UNTIL:
        reasons.append(f"{role.kv_events_from or '--kv-events-config is set'} (vllm/config/vllm.py: 'Hybrid KV cache "
                       "manager is not compatible with KV events', 0.13-0.19)")
    chunk = pair.model.attention_chunk_size
    if chunk:
        method = str((role.speculative or {}).get("method") or "").lower()
        allowed = (_env_true(role.env[_ENV]) if _ENV in role.env
                   else version >= _CHUNKED_ALLOWED_BY_DEFAULT_SINCE)
        if method in _EAGLE:
            reasons.append(f"the model uses chunked local attention (attention_chunk_size {chunk}) with {method} "
                           "speculative decoding")
        elif allowed is False:
            how = (f"{_ENV}={role.env[_ENV]}" if _ENV in role.env
                   else f"{_ENV} defaults to 0 in vLLM {fmt(version)}")
            reasons.append(f"the model uses chunked local attention (attention_chunk_size {chunk}) and {how}")
    return reasons


def _release_known(role: RoleConfig) -> bool:
    """The role's release is known as written (its image tag, ``engine.vllmVersion``, ``pdd check --vllm-version``):
    ``role.version_text`` names the release the rules use. A pair probed across releases for an unknown version
    (``compat.unknown_version.at_version``) carries a probed ``version`` with no such text."""
    return role.version is not None and rules_version(role.version_text) == role.version


def _dynamo_events_unknown(pair: PDPair, role: RoleConfig) -> str:
    """Why it is not known whether KV events force HMA off on ``role``, or ``""``: a ``dynamo.vllm`` worker on vLLM
    0.13-0.19 that gives neither ``--kv-events-config`` nor ``--no-enable-prefix-caching`` and whose image names no
    Dynamo release read (:func:`~pdd_operator.compat.dynamo_engine_defaults.dynamo_release`: a preview, ``latest``, a
    digest, a custom image): Dynamo 0.4.0-1.0.x sets kv_events_config itself there, 1.1.0 and later do not."""
    version = pair.version
    if (role.launcher != "dynamo.vllm" or role.kv_events or role.prefix_caching is False or version is None
            or not _RAISES_SINCE <= version < _KV_EVENTS_UNTIL or dynamo_release(role.image) is not None):
        return ""
    return (f"{role.role}: --no-disable-hybrid-kv-cache-manager keeps the hybrid KV cache manager on, which vLLM "
            f"{fmt(version)} refuses at startup where kv_events_config is set; dynamo.vllm sets it itself in Dynamo "
            f"{fmt(AUTO_DEFAULTS_SINCE)}-1.0.x (prefix caching on, no --kv-events-config) but not from "
            f"{fmt(AUTO_DEFAULTS_UNTIL)}, and the Dynamo release of {role.image or 'its image'} is not known.")


def connector_refuses_hma(pair: PDPair, role: RoleConfig) -> str | None:
    """Why vLLM's connector factory refuses ``role``'s connector under an explicit HMA, or ``None``: a plain
    NixlConnector on 0.13.0-0.17.x, or NIXL inside vLLM's MultiConnector on 0.13.0-0.20.x (neither class is
    ``SupportsHMA`` there; ``factory.py`` checks the top-level class, ``supports_hma(connector_cls)``), or on
    0.22.0-0.34.x a MultiConnector with a child that is not ``SupportsHMA`` (the factory asks every child). Pure."""
    version = pair.version
    if version is None or version < _RAISES_SINCE:
        return None
    if (role.wrapper or "").startswith("MultiConnector[") and version < _MULTI_HMA_SINCE:
        read = "" if version <= _MULTI_READ_UNTIL else (
            f" as far as read: its multi_connector.py was read up to 0.20.0, not in {fmt(version)}")
        return (f"MultiConnector does not support HMA in vLLM {fmt(version)} (it is SupportsHMA from 0.21.0{read}; "
                "kv_connector/factory.py: 'Connector MultiConnector does not support HMA but HMA is enabled')")
    if (role.wrapper or "").startswith("MultiConnector[") and (without := multi_children_without_hma(role)):
        return (f"{', '.join(without)} in its {role.wrapper} does not subclass SupportsHMA (vLLM {fmt(version)} "
                "kv_connector/factory.py: supports_hma_config -> MultiConnector.all_children_support_hma; 'Connector "
                "MultiConnector does not support HMA but HMA is enabled')")
    if not version < _NIXL_HMA_SINCE or role.connector != "NixlConnector" or role.wrapper:
        return None
    return (f"NixlConnector does not support HMA in vLLM {fmt(version)} (it is SupportsHMA from 0.18.0; "
            "kv_connector/factory.py: 'Connector NixlConnector does not support HMA but HMA is enabled')")


@rule(
    id="hma-explicit-forced-off", family="hma", severity="error", since=_RAISES_SINCE,
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs", "spec.engine.env", "spec.model.architecture"),
    source=("vllm/config/vllm.py VllmConfig.__post_init__: 'Hybrid KV cache manager was explicitly enabled but is not "
            "supported in this configuration' (0.13.0+), its reasons kv_events_config (0.13.0-0.19.1) and chunked local "
            "attention with EAGLE or VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=0 (0.13.0+, vllm/envs.py default "
            "0 in 0.13, 1 from 0.14) (read in the 0.13.0, 0.14.0, 0.18.0, 0.19.1, 0.20.0, 0.21.0 and 0.32.0 sdists); "
            "kv_connector/factory.py 'Connector NixlConnector does not support HMA but HMA is enabled' (NixlConnector "
            "not SupportsHMA in the 0.13.0-0.17.1 sdists, SupportsHMA from 0.18.0; MultiConnector not SupportsHMA in "
            "the 0.13.0-0.20.0 sdists, SupportsHMA from 0.21.0; from 0.22.0 every child must be: LMCacheConnectorV1 is not in "
            "the 0.22.0-0.34.0 sdists); vllm#39269, vllm#46553, vllm#41847"),
    example="--no-disable-hybrid-kv-cache-manager with --kv-events-config on vLLM 0.18",
)
def check_hma_explicit_forced_off(pair: PDPair) -> list[Violation]:
    """No engine passes --no-disable-hybrid-kv-cache-manager where vLLM must turn the hybrid KV cache manager off, or
    where its NixlConnector (0.13-0.17) or the MultiConnector around it (0.13-0.20) does not support it."""
    out: list[Violation] = []
    for role in pair.roles:
        if not _release_known(role):
            continue  # a release probed for an unknown version: vllm-version-unknown speaks for it
        if role.hma is True and not forced_off_reasons(pair, role) and (why := connector_refuses_hma(pair, role)):
            since, what = (("0.21.0", "MultiConnector") if why.startswith("MultiConnector") else
                           ("0.18.0", "NixlConnector"))
            if without := multi_children_without_hma(role):
                out.append((
                    f"{role.role}: --no-disable-hybrid-kv-cache-manager keeps the hybrid KV cache manager on, but {why}: "
                    "the engine raises at startup and never serves.",
                    fix_for(pair, f"Drop --no-disable-hybrid-kv-cache-manager from spec.{role.role}.extraArgs, or take "
                            f"{', '.join(without)} out of its MultiConnector's connectors.",
                            f"Drop --no-disable-hybrid-kv-cache-manager from the {role.role} container, or take "
                            f"{', '.join(without)} out of its MultiConnector's connectors."),
                ))
                continue
            out.append((
                f"{role.role}: --no-disable-hybrid-kv-cache-manager keeps the hybrid KV cache manager on, but {why}: "
                "the engine raises at startup and never serves.",
                fix_for(pair, f"Drop --no-disable-hybrid-kv-cache-manager from spec.{role.role}.extraArgs, or run "
                        f"vLLM {since} or later (whose {what} supports HMA): an engine image of that release in "
                        "spec.engine.image (and spec.engine.vllmVersion where it is set).",
                        f"Drop --no-disable-hybrid-kv-cache-manager from the {role.role} container, or run vLLM "
                        f"{since} or later (whose {what} supports HMA) in each container's image."),
                *(("warning",) if "as far as read" in why else ()),
            ))
            continue
        if role.hma is True and (why := _dynamo_events_unknown(pair, role)) and not forced_off_reasons(pair, role):
            out.append((why, fix_for(pair, "Pin the engine image to a Dynamo release (spec.engine.image), or give "
                                     f"--kv-events-config or --no-enable-prefix-caching in spec.{role.role}.extraArgs.",
                                     f"Pin the {role.role} image to a Dynamo release tag (vllm-runtime:1.0.1, 1.1.0), "
                                     "or give the worker --kv-events-config or --no-enable-prefix-caching."),
                        NOT_CHECKED))
            continue
        if role.hma is not True or not (reasons := forced_off_reasons(pair, role)):
            continue
        out.append((
            f"{role.role}: --no-disable-hybrid-kv-cache-manager asks vLLM {fmt(pair.version)} to keep the hybrid KV "
            f"cache manager, but {'; and '.join(reasons)}: the engine raises at startup ('Hybrid KV cache manager was "
            "explicitly enabled but is not supported in this configuration') and never serves.",
            fix_for(pair, f"{_spec_fix(pair, role)}, or drop --no-disable-hybrid-kv-cache-manager from "
                    "spec.prefill.extraArgs and spec.decode.extraArgs (where the model runs without HMA).",
                    f"On the {role.role} container remove what forces HMA off (or drop "
                    "--no-disable-hybrid-kv-cache-manager from both containers, where the model runs without HMA)."),
        ))
    return out
