"""A DynamoGraphDeployment whose ``dynamo.vllm`` workers carry no P/D role flag: no prefill worker, so no P/D.

Dynamo's vLLM worker takes its role from its own flags and nothing else: ``--is-prefill-worker`` (later
``--disaggregation-mode prefill``) registers it as the ``prefill`` component, anything else as the ``backend``
component, the decode/aggregated worker (ai-dynamo/dynamo components/src/dynamo/vllm/args.py: ``component =
"prefill"`` only for the prefill flag or mode, ``"backend"`` otherwise; the same in the older ``base_parse_args``
layout, whose default endpoint is ``dyn://<namespace>.backend.generate``). The service's name (``VllmPrefillWorker``,
``prefill-worker``) is only a name. A graph none of whose workers has a role flag therefore runs no prefill worker:
the frontend finds none and every request is prefilled and decoded on one worker. vLLM runs (the worker's default
NixlConnector ``kv_both`` on pre-1.0 runtimes), nothing fails, but no KV moves: where a service's name promises a
prefill worker, the disaggregation it names never happens (:data:`~pdd_operator.compat.rules.records.
DYNAMO_PREFILL_ROLE_MISSING`, a warning: nothing vLLM refuses). Such a graph is judged by that warning alone and its
workers are not paired (a pair would run the NIXL rules over engines that never transfer KV).

The same holds where the graph's other workers do carry role flags (it gives its workers their roles itself) but
the one meant as the prefill worker carries none, whatever its ``subComponentType`` (v1alpha1), ``type`` (v1beta1) or
role label says: Dynamo's operator writes no role
flag into a vLLM worker (ai-dynamo/dynamo deploy/operator/internal/dynamo/backend_vllm.go ``VLLMBackend.
UpdateContainer`` adds multinode, GMS and elastic-EP launch flags and ``VLLM_CACHE_ROOT``, never
``--disaggregation-mode``), and a DynamoGraphDeploymentRequest's generated ``VllmPrefillWorker`` without the flag ran
as ``backend`` (ai-dynamo/dynamo#13238, operator 1.4.0: the flag measured absent on the running pod, the Planner never
found a prefill worker). Such a worker serves aggregated beside the decode workers (Dynamo 1.4.0 args.py lines
175-184; a decode-mode worker that gets a request with no prefill result generates it locally, handlers.py), so no
KV moves and vLLM refuses nothing: the same warning, the same verdict.

Left as they were: graphs where some worker is a prefill by a role flag, a role variable or ``kv_role``, graphs
whose workers are all typed and none flagged (the types left to Dynamo's operator), a worker whose role flag is not
in the files, and graphs whose service names and types name no prefill worker (an aggregated graph).
"""

from __future__ import annotations

import re

from pdd_operator.api.status import Finding
from pdd_operator.compat.dynamo_engine_defaults import dynamo_release
from pdd_operator.compat.dynamo_worker_flags import CONNECTOR_REJECTED_SINCE
from pdd_operator.compat.manifests import ENCODE, Engine
from pdd_operator.compat.rules.records import DYNAMO_PREFILL_ROLE_MISSING, DYNAMO_ROLE_SOURCE

#: The KV transfer config Dynamo's vLLM worker asks a prefill worker for in its own error text (args.py).
_DYNAMO_KV = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
_SERVICE = re.compile(r"\bspec\.services\.([^.\s]+)\.")
_COMPONENT = re.compile(r"\bspec\.components\.(\d+)\.")


def _words(name: str) -> set[str]:
    """The lower-case words of a service name, camel case split (``VllmPrefillWorker`` -> vllm, prefill, worker)."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name)
    return {w for w in re.split(r"[^a-z0-9]+", spaced.lower()) if w}


def _service(engine: Engine, doc: dict | None = None) -> str | None:
    """The DynamoGraphDeployment service an engine runs in: ``spec.services.<name>`` (v1alpha1), or the ``name`` of
    ``spec.components[<i>]`` (v1beta1) of the graph ``doc``; ``None`` where neither names one."""
    match = _SERVICE.search(engine.where)
    if match:
        return match.group(1)
    match = _COMPONENT.search(engine.where)
    components = ((doc or {}).get("spec") or {}).get("components") if match else None
    if isinstance(components, list) and int(match.group(1)) < len(components):
        name = components[int(match.group(1))].get("name") if isinstance(components[int(match.group(1))], dict) else None
        return str(name) if name else None
    return None


def _flagless(engine: Engine, typed: bool = False) -> bool:
    """A ``dynamo.vllm`` worker whose role nothing Dynamo's worker reads gives, and no role flag whose value is
    unknown: its role comes at most from a name (or is the decode role every such worker takes:
    :func:`~pdd_operator.compat.manifests.dynamo_default_role`), or, where ``typed`` (the graph's other workers take
    their roles from flags: :func:`_flagged`), from a role label or a ``subComponentType`` / v1beta1 ``type`` while
    it has no role flag and no role variable (:attr:`~pdd_operator.compat.manifests.Engine.dynamo_roleless`); never
    from ``kv_role``."""
    if engine.config.launcher != "dynamo.vllm" or engine.role_unknown:
        return False
    return engine.role_from in ("", "name", "dynamo") or (typed and engine.role_from in ("type", "label")
                                                            and engine.dynamo_roleless)


def _flagged(pd: list[Engine]) -> bool:
    """Whether some ``dynamo.vllm`` worker among ``pd`` takes its role from a role flag or role variable: the graph
    gives its workers their roles itself and leaves none to Dynamo's operator (where every worker is typed and none
    flagged, the types are left to the operator, as before)."""
    return any(e.config.launcher == "dynamo.vllm" and not e.dynamo_roleless for e in pd)


def _no_prefill_worker(pd: list[Engine], typed: bool) -> bool:
    """Whether none of a graph's P/D engines ``pd`` runs as Dynamo's prefill component: every one is a
    ``dynamo.vllm`` worker with no role flag whose value is unknown, and every one that a role (a name, label or
    type) calls the prefill is :func:`_flagless` (``typed`` as there)."""
    return all(e.config.launcher == "dynamo.vllm" and not e.role_unknown for e in pd) \
        and all(_flagless(e, typed) for e in pd if e.role == "prefill")


def flagless_dynamo_graph(doc: dict, engines: list[Engine]) -> tuple[list[Engine], list[Finding]]:
    """``(engines still to pair, findings)`` for the engines :func:`~pdd_operator.compat.manifests.scan` found in one
    manifest document ``doc``.

    A DynamoGraphDeployment none of whose engines but its encode workers (:func:`~pdd_operator.compat.manifests.
    encode_worker`) runs as Dynamo's prefill component (:func:`_no_prefill_worker`) and one of whose :func:`_flagless`
    workers is named or typed as a prefill worker gets the ``dynamo-prefill-role-missing`` warning (naming those
    workers' commands) and none of those engines is paired (the encode workers are returned, to be judged alone, and
    what stops a P/D engine on its own is judged by :func:`judged_alone`); any other document is returned unchanged
    with no findings.
    """
    pd = [e for e in engines if e.role != ENCODE]  # an E/P/D encode worker has a role of its own, not a P/D one
    typed = _flagged(pd)
    if doc.get("kind") != "DynamoGraphDeployment" or not pd or not _no_prefill_worker(pd, typed):
        return engines, []
    named = [e for e in pd if _flagless(e, typed)
             and ("prefill" in _words(_service(e, doc) or "") or e.role == "prefill")]
    if not named:
        return engines, []
    services = sorted({_service(e, doc) or e.where for e in named})
    fields = list(dict.fromkeys(f"{e.container}.{e.flags_key}" for e in named))
    by_type = any(e.role_from in ("type", "label") for e in named)
    message = (
        f"service {', '.join(services)} is {'typed' if by_type else 'named'} as a prefill worker, but no worker of the "
        "graph passes --is-prefill-worker (or --disaggregation-mode prefill): Dynamo's vLLM worker takes its role from "
        "those flags alone and registers every other worker as the decode/aggregated 'backend' component "
        "(components/src/dynamo/vllm/args.py), "
        + ("and Dynamo's operator writes no role flag from a subComponentType, type or label "
           "(deploy/operator/internal/dynamo/backend_vllm.go), " if by_type else "")
        + "so this graph has no prefill worker. Every request is prefilled and decoded on one worker and no KV is "
        "transferred between workers: the prefill/decode disaggregation the "
        f"{'types' if by_type else 'names'} promise never happens (nothing fails, the workers serve aggregated)."
    )
    fix = (f"Add {_prefill_flags(named)} to the args of {', '.join(services)}, or rename the service if aggregated "
           "serving is what you want.")
    finding = Finding(rule=DYNAMO_PREFILL_ROLE_MISSING, severity="warning", fields=fields, message=message, fix=fix,
                      source=DYNAMO_ROLE_SOURCE)
    return [e for e in engines if e.role == ENCODE], [finding]


def _prefill_flags(named: list[Engine]) -> str:
    """The flags that make the workers ``named`` Dynamo's prefill component, in the spelling their runtime images'
    Dynamo release takes (:data:`~pdd_operator.compat.dynamo_worker_flags.WORKER_FLAGS`): ``--is-prefill-worker``
    before 1.0.0, ``--disaggregation-mode prefill`` from 1.0.0 (the only spelling from 1.4.0), with the
    ``--kv-transfer-config`` a prefill-mode worker of 1.0.0 on refuses to start without (Dynamo 1.0.0 args.py lines
    192-207) where the worker gives none; both spellings where a release is unknown."""
    releases = [dynamo_release(e.config.image) for e in named]
    if any(r is None for r in releases):
        return "--is-prefill-worker (--disaggregation-mode prefill on Dynamo releases that replaced the flag)"
    if all(r < CONNECTOR_REJECTED_SINCE for r in releases if r is not None):
        return "--is-prefill-worker"
    flags = "--disaggregation-mode prefill"
    if any(not e.config.kv_transfer for e in named):
        flags += f" with --kv-transfer-config '{_DYNAMO_KV}' (a prefill-mode worker refuses to start without one)"
    return flags

