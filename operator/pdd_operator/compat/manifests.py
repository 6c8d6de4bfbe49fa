"""Read P/D deployments people write today (not PDDeployments) into :class:`PDPair` objects.

Supported: plain Deployments, StatefulSets, Pods and Jobs whose containers run ``vllm serve`` (or
``python -m vllm.entrypoints.openai.api_server``) with a ``--kv-transfer-config``; LeaderWorkerSets
and LWS DisaggregatedSets; KServe LLMInferenceServices (``spec.template`` / ``spec.prefill.template``);
NVIDIA Dynamo DynamoGraphDeployments (``extraPodSpec.mainContainer`` running ``dynamo.vllm``).

Rather than one parser per CRD, every document is walked for pod specs (a mapping with a
``containers`` list) and Dynamo main containers; each vLLM engine found becomes a candidate whose role
comes, in order, from ``kv_role`` in its ``--kv-transfer-config``, Dynamo's ``--is-prefill-worker``
/ ``subComponentType``, a role label, or the words prefill/decode in the path or names around it.
Prefill and decode candidates serving the same model are then paired.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pdd_operator.compat.pair import PDPair, RoleConfig, role_from_container
from pdd_operator.vllm.architectures import traits
from pdd_operator.vllm.args import POD_IP, env_values, parse_flags, split_command
from pdd_operator.vllm.versions import fmt, is_vllm_image, version_from_image

_ROLE_WORDS = {"prefill": "prefill", "prefiller": "prefill", "decode": "decode", "decoder": "decode"}
_ROLE_LABELS = ("llm-d.ai/role", "pdd-operator.dev/role", "app.kubernetes.io/component", "role",
                "leaderworkerset.sigs.k8s.io/role", "disaggregatedset.x-k8s.io/role")


@dataclass(frozen=True)
class Engine:
    """A vLLM engine container found in a manifest.

    Attributes:
        where: ``Kind/name`` of the object and the path to the container, for messages.
        role: ``prefill``, ``decode``, ``both`` (kv_both with no other hint) or ``None`` (unknown).
        config: its settings.
        pod_id: identity of the pod spec it sits in (engines in one pod share a network namespace).
    """

    where: str
    role: str | None
    config: RoleConfig
    pod_id: int


def _role_hint(text: str) -> str | None:
    for word in re.split(r"[^a-z]+", text.lower()):
        if word in _ROLE_WORDS:
            return _ROLE_WORDS[word]
    return None


def _labels_role(labels: dict | None) -> str | None:
    for key in _ROLE_LABELS:
        value = (labels or {}).get(key)
        if isinstance(value, str) and _role_hint(value):
            return _role_hint(value)
    return None


def _classify(argv: list[str], kv_role: str | None, context: list[str], labels_role: str | None) -> str | None:
    if kv_role == "kv_producer":
        return "prefill"
    if kv_role == "kv_consumer":
        return "decode"
    _, flags = parse_flags(argv)
    if flags.get("--is-prefill-worker") is True or "--is-prefill-worker" in argv:
        return "prefill"
    if "--is-decode-worker" in argv:
        return "decode"
    if labels_role:
        return labels_role
    for text in reversed(context):
        hint = _role_hint(text)
        if hint:
            return hint
    return "both" if kv_role == "kv_both" else None


def _engine(container: dict, pod_spec: dict, where: str, context: list[str], labels_role: str | None) -> Engine | None:
    image = str(container.get("image") or "")
    argv = split_command(container.get("command"), container.get("args"), image_runs_vllm=is_vllm_image(image),
                         extra=env_values(container.get("env")).get("VLLM_ADDITIONAL_ARGS"))
    if not argv:
        return None
    version = version_from_image(image)
    config = role_from_container("?", container, pod_spec, version_text=fmt(version) if version else None)
    if "dynamo.vllm" in argv and not config.kv_transfer:
        # Dynamo's vLLM worker configures NixlConnector itself unless told otherwise.
        config = RoleConfig(**{**config.__dict__, "kv_transfer": {"kv_connector": "NixlConnector"}})
    if "dynamo.vllm" in argv and "VLLM_NIXL_SIDE_CHANNEL_HOST" not in config.env:
        # Dynamo's worker sets the side-channel host to the pod's own address at startup.
        config = RoleConfig(**{**config.__dict__, "env": {**config.env, "VLLM_NIXL_SIDE_CHANNEL_HOST": POD_IP}})
    if not config.kv_transfer:
        return None  # a plain (aggregated) vLLM server: not part of a P/D pair
    role = _classify(argv, config.kv_transfer.get("kv_role"), context, labels_role)
    return Engine(where=where, role=role, config=config, pod_id=id(pod_spec))


def _walk(node: Any, path: list[str], context: list[str], labels_role: str | None, out: list[Engine], origin: str) -> None:
    if isinstance(node, dict):
        meta = node.get("metadata") if isinstance(node.get("metadata"), dict) else {}
        ctx = context + [str(meta.get("name", ""))] if meta.get("name") else list(context)
        role_from_labels = _labels_role(meta.get("labels")) or labels_role
        for key in ("subComponentType", "componentType", "role"):
            if isinstance(node.get(key), str) and _role_hint(node[key]):
                role_from_labels = _role_hint(node[key])
        containers = node.get("containers")
        if isinstance(containers, list) and all(isinstance(c, dict) for c in containers):
            for i, c in enumerate(containers):
                where = f"{origin} {'.'.join(path)}.containers[{i}]({c.get('name', '?')})"
                engine = _engine(c, node, where, ctx + path, role_from_labels)
                if engine:
                    out.append(engine)
        main = node.get("mainContainer")
        if isinstance(main, dict):
            pod = dict(node)
            engine = _engine(main, pod, f"{origin} {'.'.join(path)}.mainContainer", ctx + path, role_from_labels)
            if engine:
                out.append(engine)
        for key, value in node.items():
            if key in ("containers", "mainContainer", "metadata", "status"):
                continue
            _walk(value, path + [str(key)], ctx, role_from_labels, out, origin)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _walk(value, path + [f"{i}"], context, labels_role, out, origin)


def find_engines(doc: dict) -> list[Engine]:
    """Every vLLM engine with a KV connector in one manifest document."""
    meta = doc.get("metadata") or {}
    origin = f"{doc.get('kind', '?')}/{meta.get('name', '?')}"
    out: list[Engine] = []
    _walk(doc, [], [str(doc.get("kind", ""))], None, out, origin)
    # One object holding a prefill engine and otherwise unlabelled engines (KServe's spec.template
    # beside spec.prefill): the others are its decode side.
    roles = [e.role for e in out]
    if roles.count("prefill") >= 1 and "decode" not in roles:
        out = [Engine(e.where, "decode", e.config, e.pod_id) if e.role in (None, "both") else e for e in out]
    return out


@dataclass(frozen=True)
class Unpaired:
    """An engine for which no counterpart was found (reported, not checked)."""

    engine: Engine
    reason: str


def pair_engines(engines: list[Engine]) -> tuple[list[tuple[PDPair, Engine, Engine]], list[Unpaired]]:
    """Pair prefill with decode engines of the same model.

    Returns ``(pairs, unpaired)``; each pair comes with the two engines it was built from.
    """
    prefills = [e for e in engines if e.role == "prefill"]
    decodes = [e for e in engines if e.role == "decode"]
    unpaired = [Unpaired(e, "its role (prefill or decode) cannot be told from kv_role, flags, labels or names")
                for e in engines if e.role not in ("prefill", "decode")]
    pairs = []
    used: set[int] = set()
    for p in prefills:
        same_model = [d for d in decodes if d.config.model == p.config.model]
        candidates = same_model or (decodes if len(prefills) == 1 and len(decodes) == 1 else [])
        if not candidates:
            unpaired.append(Unpaired(p, "no decode engine serving the same model"))
            continue
        for d in candidates:
            used.add(id(d))
            notes = []
            if p.config.version is None or d.config.version is None:
                notes.append("the vLLM version cannot be read from the engine image tags")
            pair = PDPair(
                source=f"{p.where} + {d.where}",
                prefill=RoleConfig(**{**p.config.__dict__, "role": "prefill"}),
                decode=RoleConfig(**{**d.config.__dict__, "role": "decode"}),
                model=traits(None, None, None, p.config.model or ""),
                shared_network=p.pod_id == d.pod_id, notes=tuple(notes),
            )
            pairs.append((pair, p, d))
    for d in decodes:
        if id(d) not in used:
            unpaired.append(Unpaired(d, "no prefill engine serving the same model"))
    return pairs, unpaired
