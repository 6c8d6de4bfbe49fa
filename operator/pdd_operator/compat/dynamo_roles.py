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

Left as they were: graphs where any worker has a role from a flag, ``kv_role``, a ``subComponentType``/``type`` or a
role label (Dynamo's operator may act on those), a worker whose role flag is not in the files, and graphs whose
service names name no prefill worker (an aggregated graph).
"""

from __future__ import annotations

import re

from pdd_operator.api.status import Finding
from pdd_operator.compat.manifests import ENCODE, Engine
from pdd_operator.compat.rules.records import DYNAMO_PREFILL_ROLE_MISSING, DYNAMO_ROLE_SOURCE

_SERVICE = re.compile(r"\bspec\.services\.([^.\s]+)\.")


def _words(name: str) -> set[str]:
    """The lower-case words of a service name, camel case split (``VllmPrefillWorker`` -> vllm, prefill, worker)."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name)
    return {w for w in re.split(r"[^a-z0-9]+", spaced.lower()) if w}


def _service(engine: Engine) -> str | None:
    """The DynamoGraphDeployment service (``spec.services.<name>``) an engine runs in, or ``None``."""
    match = _SERVICE.search(engine.where)
    return match.group(1) if match else None


def _flagless(engine: Engine) -> bool:
    """A ``dynamo.vllm`` worker whose role nothing Dynamo reads gives: no role flag, no ``kv_role``, no type or role
    label (at most a name, or the decode role every such worker takes:
    :func:`~pdd_operator.compat.manifests.dynamo_default_role`), and no role flag whose value is unknown."""
    return engine.config.launcher == "dynamo.vllm" and engine.role_from in ("", "name", "dynamo") \
        and not engine.role_unknown


def flagless_dynamo_graph(doc: dict, engines: list[Engine]) -> tuple[list[Engine], list[Finding]]:
    """``(engines still to pair, findings)`` for the engines :func:`~pdd_operator.compat.manifests.scan` found in one
    manifest document ``doc``.

    A DynamoGraphDeployment all of whose engines but its encode workers (:func:`~pdd_operator.compat.manifests.
    encode_worker`) are :func:`_flagless` ``dynamo.vllm`` workers and one of whose services is named as a prefill
    worker gets the ``dynamo-prefill-role-missing`` warning (naming that service's command) and none of those engines
    is paired (the encode workers are returned, to be judged alone); any other document is returned unchanged with no findings.
    """
    pd = [e for e in engines if e.role != ENCODE]  # an E/P/D encode worker has a role of its own, not a P/D one
    if doc.get("kind") != "DynamoGraphDeployment" or not pd or not all(_flagless(e) for e in pd):
        return engines, []
    named = [e for e in pd if "prefill" in _words(_service(e) or "") or e.role == "prefill"]
    if not named:
        return engines, []
    services = sorted({_service(e) or e.where for e in named})
    fields = list(dict.fromkeys(f"{e.container}.{e.flags_key}" for e in named))
    message = (
        f"service {', '.join(services)} is named as a prefill worker, but no worker of the graph passes "
        "--is-prefill-worker (or --disaggregation-mode prefill): Dynamo's vLLM worker takes its role from those flags "
        "alone and registers every other worker as the decode/aggregated 'backend' component "
        "(components/src/dynamo/vllm/args.py), so this graph has no prefill worker. Every request is prefilled and "
        "decoded on one worker and no KV is transferred between workers: the prefill/decode disaggregation the "
        "names promise never happens (nothing fails, the workers serve aggregated)."
    )
    fix = (f"Add --is-prefill-worker to the command of {', '.join(services)} (--disaggregation-mode prefill on "
           "Dynamo releases that replaced the flag), or rename the service if aggregated serving is what you want.")
    finding = Finding(rule=DYNAMO_PREFILL_ROLE_MISSING, severity="warning", fields=fields, message=message, fix=fix,
                      source=DYNAMO_ROLE_SOURCE)
    return [e for e in engines if e.role == ENCODE], [finding]
