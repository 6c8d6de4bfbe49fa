"""Required pod anti-affinity, read as kube-scheduler applies it, to tell when two pods never share a node.

kube-scheduler's InterPodAffinity filter (kubernetes pkg/scheduler/framework/plugins/interpodaffinity/
filtering.go ``satisfyPodAntiAffinity``, ``satisfyExistingPodsAntiAffinity``) refuses a node for a pod when a
``requiredDuringSchedulingIgnoredDuringExecution`` anti-affinity term of the incoming pod selects a pod already
in the node's topology domain, **or** a term of a pod already there selects the incoming pod: either side's
term keeps the two apart. A term counts only on nodes that carry its ``topologyKey`` label (a node without it
satisfies the term), so only ``kubernetes.io/hostname``, which the kubelet sets on every node, guarantees two
pods are on different nodes; with ``topology.kubernetes.io/zone`` or a custom key, nodes lacking the label may
hold both. ``preferredDuringScheduling...`` terms are scores, never a guarantee, and are not read.

A term selects pods by its ``labelSelector`` (:func:`pdd_operator.api.selectors.selector_matches`), extended
at pod creation by ``matchLabelKeys`` / ``mismatchLabelKeys`` (``key In`` / ``key NotIn`` the pod's own value,
k8s.io/api core/v1 ``PodAffinityTerm``; keys the pod does not carry are ignored), in the namespaces of
``namespaces`` plus those ``namespaceSelector`` selects (``{}``: all), or the pod's own namespace when both are
unset (``GetNamespacesFromPodAffinityTerm``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pdd_operator.api.selectors import Requirement, all_hold, requirements

#: The node label whose value is the node's own name: the kubelet sets it on every node (Kubernetes
#: well-known labels), so a ``nodeSelector`` on it names one node and an anti-affinity term on it spans one node.
HOSTNAME_LABEL = "kubernetes.io/hostname"

#: Label the apiserver sets on every namespace to its name (the only namespace label a manifest tells).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True)
class AntiAffinityTerm:
    """One required pod anti-affinity term of a pod.

    Attributes:
        requirements: the pod selector's requirements (``matchLabels``, ``matchExpressions`` and the
            ``matchLabelKeys``/``mismatchLabelKeys`` ones), ``None`` when the term selects no pod
            (``labelSelector`` unset) or cannot be judged (a selector the apiserver refuses, a label key the pod
            is not known to carry).
        topology_key: the term's ``topologyKey``.
        namespaces: the term's ``namespaces``.
        namespace_selector: the requirements of ``namespaceSelector`` (``()``: ``{}``, every namespace);
            ``None`` when it is unset.
    """

    requirements: tuple[Requirement, ...] | None
    topology_key: str
    namespaces: tuple[str, ...] = ()
    namespace_selector: tuple[Requirement, ...] | None = None


def anti_affinity_terms(pod_spec: Mapping, pod_labels: Mapping[str, str]) -> tuple[AntiAffinityTerm, ...]:
    """The required pod anti-affinity terms of a pod spec (camelCase dict) whose pod carries ``pod_labels``
    (the labels the manifest writes). Terms that are not mappings are left out."""
    affinity = pod_spec.get("affinity") if isinstance(pod_spec.get("affinity"), Mapping) else {}
    anti = affinity.get("podAntiAffinity") if isinstance(affinity.get("podAntiAffinity"), Mapping) else {}
    terms = anti.get("requiredDuringSchedulingIgnoredDuringExecution") or []
    return tuple(_term(t, pod_labels) for t in terms if isinstance(t, Mapping)) if isinstance(terms, list) else ()


def _term(term: Mapping, pod_labels: Mapping[str, str]) -> AntiAffinityTerm:
    selector = term.get("labelSelector")
    reqs = requirements(selector) if isinstance(selector, Mapping) else None
    for field, op in (("matchLabelKeys", "In"), ("mismatchLabelKeys", "NotIn")):
        keys = term.get(field) or []
        if reqs is None or not isinstance(keys, list):
            reqs = None
            break
        for key in keys:
            if key not in pod_labels:  # a controller may add it (pod-template-hash): its value is not known
                reqs = None
                break
            reqs = (*reqs, (str(key), op, (pod_labels[key],)))
        if reqs is None:
            break
    raw_ns = term.get("namespaces") or []
    ns_selector = term.get("namespaceSelector")
    ns_reqs = requirements(ns_selector) if isinstance(ns_selector, Mapping) else None
    if (ns_selector is not None and ns_reqs is None) or not isinstance(raw_ns, list):
        reqs = None  # a namespace scope the apiserver refuses
    return AntiAffinityTerm(requirements=reqs, topology_key=str(term.get("topologyKey", "")),
                            namespaces=tuple(str(n) for n in raw_ns) if isinstance(raw_ns, list) else (),
                            namespace_selector=ns_reqs)


def _in_scope(term: AntiAffinityTerm, own_namespace: str | None, peer_namespace: str | None) -> bool:
    """The peer's namespace is certainly among those the term looks at (unknown namespaces: only the default
    scope, the pod's own namespace, counts: paired roles are of one namespace)."""
    if not term.namespaces and term.namespace_selector is None:
        return own_namespace == peer_namespace
    if peer_namespace is not None and peer_namespace in term.namespaces:
        return True
    if term.namespace_selector is None:
        return False
    labels = {NAMESPACE_NAME_LABEL: peer_namespace} if peer_namespace is not None else {}
    return all_hold(term.namespace_selector, labels, more_labels_possible=True) is True


def keeps_apart(term: AntiAffinityTerm, own_namespace: str | None, peer_labels: Mapping[str, str],
                peer_namespace: str | None) -> bool:
    """True only when ``term`` (of a pod in ``own_namespace``) certainly keeps that pod off every node running a
    pod with ``peer_labels`` in ``peer_namespace``: its topology key is :data:`HOSTNAME_LABEL`, the peer is in its
    namespace scope and its selector certainly selects the peer, the peer perhaps carrying labels its manifest
    does not write (:func:`pdd_operator.api.selectors.requirement_holds`). Unknown: False."""
    if term.requirements is None or term.topology_key != HOSTNAME_LABEL:
        return False
    if not _in_scope(term, own_namespace, peer_namespace):
        return False
    return all_hold(term.requirements, peer_labels, more_labels_possible=True) is True
