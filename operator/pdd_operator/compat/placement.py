"""Placement read as kube-scheduler applies it, to tell when two pods never share a node or always do.

Three filters decide it, required terms only (``preferredDuringScheduling...`` terms are scores, never a
guarantee, and are not read):

- **NodeAffinity** (kubernetes pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go, with
  k8s.io/component-helpers scheduling/corev1/nodeaffinity ``NodeSelector.Match``): the pod's ``nodeSelector``
  AND its ``requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms``, which are ORed; inside a term
  ``matchExpressions`` (node labels: ``In``, ``NotIn``, ``Exists``, ``DoesNotExist``, ``Gt``, ``Lt``) and
  ``matchFields`` (only ``metadata.name``, ``In``/``NotIn`` with one value) are ANDed; an empty term matches no
  node. ``spec.nodeName`` binds the pod without the scheduler, and the kubelet's admission runs the same node
  affinity check, so it is a ``metadata.name In [name]`` ANDed in (:func:`node_terms`).
- **InterPodAffinity**, anti-affinity (``satisfyPodAntiAffinity``, ``satisfyExistingPodsAntiAffinity`` in
  interpodaffinity/filtering.go): a node is refused for a pod when a required anti-affinity term of the incoming
  pod selects a pod already in the node's topology domain, **or** a term of a pod already there selects the
  incoming pod: either side's term keeps the two apart.
- **InterPodAffinity**, affinity (``satisfyPodAffinity``): every required affinity term must select a pod already
  in the node's topology domain, except for the first pod of a series: when no pod in the cluster matches the
  terms and the pod matches all of its own terms, any node passes. A pod whose term selects the peer and that does
  not match its own terms therefore waits for the peer and joins its domain (:func:`draws_together`).

``spec.nodeName`` and the ``kubernetes.io/hostname`` label are two spellings of one node where the label's value is
the node's name: the kubelet sets the label to its hostname, which is also the name it registers the node under
unless ``--hostname-override`` or a cloud provider names the node otherwise; on kwok and most clusters the two are
equal. :func:`may_share_node` and :func:`same_node` take them as one (``nodeName: a`` and a ``kubernetes.io/hostname:
a`` selector are one node, ``nodeName: a`` and ``kubernetes.io/hostname: b`` two), and :func:`hostname_assumed` says
when a verdict rests on that, so a rule reports what follows from it as a warning, never an error.

A pod term counts only on nodes that carry its ``topologyKey`` label (a node without it satisfies an
anti-affinity term), so only ``kubernetes.io/hostname``, which the kubelet sets on every node, guarantees two
pods are on different nodes or on one; with ``topology.kubernetes.io/zone`` or a custom key, a domain holds
several nodes.

A pod term selects pods by its ``labelSelector`` (:func:`pdd_operator.api.selectors.selector_matches`), extended
at pod creation by ``matchLabelKeys`` / ``mismatchLabelKeys`` (``key In`` / ``key NotIn`` the pod's own value,
k8s.io/api core/v1 ``PodAffinityTerm``; keys the pod does not carry are ignored), in the namespaces of
``namespaces`` plus those ``namespaceSelector`` selects (``{}``: all), or the pod's own namespace when both are
unset (``GetNamespacesFromPodAffinityTerm``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from pdd_operator.api.selectors import Requirement, all_hold, requirements

#: The node label whose value is the node's own name: the kubelet sets it on every node (Kubernetes
#: well-known labels), so a ``nodeSelector`` on it names one node and a pod term on it spans one node.
HOSTNAME_LABEL = "kubernetes.io/hostname"

#: Label the apiserver sets on every namespace to its name (the only namespace label a manifest tells).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

#: The key a ``matchFields`` requirement on the node's name has in a :data:`NodeTerm` (``:`` is in no label key,
#: so it never collides with a label).
NODE_NAME_FIELD = "field:metadata.name"

#: One node selector term: requirements ``(key, operator, values)`` that a node must all meet (AND). Keys are node
#: label keys, or :data:`NODE_NAME_FIELD`; operators ``In``, ``NotIn``, ``Exists``, ``DoesNotExist``, ``Gt``,
#: ``Lt`` (``Gt``/``Lt``: one integer value, compared with the label's value as an integer).
NodeTerm = tuple[Requirement, ...]

_NODE_OPS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


@dataclass(frozen=True)
class PodAffinityTerm:
    """One required pod affinity or anti-affinity term of a pod (k8s.io/api core/v1 ``PodAffinityTerm``).

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


def _mapping(value: object) -> Mapping:
    return value if isinstance(value, Mapping) else {}


def pod_affinity_terms(pod_spec: Mapping, pod_labels: Mapping[str, str],
                       kind: str = "podAntiAffinity") -> tuple[PodAffinityTerm, ...]:
    """The required terms of ``affinity.<kind>`` (``podAntiAffinity`` or ``podAffinity``) of a pod spec (camelCase
    dict) whose pod carries ``pod_labels`` (the labels the manifest writes). Terms that are not mappings are left
    out."""
    terms = _mapping(_mapping(pod_spec.get("affinity")).get(kind)).get("requiredDuringSchedulingIgnoredDuringExecution")
    return tuple(_term(t, pod_labels) for t in terms if isinstance(t, Mapping)) if isinstance(terms, list) else ()


def _term(term: Mapping, pod_labels: Mapping[str, str]) -> PodAffinityTerm:
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
    return PodAffinityTerm(requirements=reqs, topology_key=str(term.get("topologyKey", "")),
                            namespaces=tuple(str(n) for n in raw_ns) if isinstance(raw_ns, list) else (),
                            namespace_selector=ns_reqs)


def _in_scope(term: PodAffinityTerm, own_namespace: str | None, peer_namespace: str | None) -> bool:
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


def selects_on_node(term: PodAffinityTerm, own_namespace: str | None, peer_labels: Mapping[str, str],
                    peer_namespace: str | None) -> bool:
    """True only when ``term`` (of a pod in ``own_namespace``) spans one node (its topology key is
    :data:`HOSTNAME_LABEL`) and certainly selects a pod with ``peer_labels`` in ``peer_namespace``: the peer is in its
    namespace scope and its selector selects the peer, the peer perhaps carrying labels its manifest does not write
    (:func:`pdd_operator.api.selectors.requirement_holds`). Unknown: False. For an anti-affinity term: the pod is
    never put on a node running the peer; for an affinity term: only on such a node (but see
    :func:`same_node`)."""
    return term.topology_key == HOSTNAME_LABEL and _selects(term, own_namespace, peer_labels, peer_namespace)


class Placed(Protocol):
    """What placement reads of a pod (:class:`pdd_operator.compat.pair.RoleConfig` has it)."""

    pod_labels: dict[str, str]
    namespace: str | None
    nodes: tuple[NodeTerm, ...] | None
    anti_affinity: tuple[PodAffinityTerm, ...]
    pod_affinity: tuple[PodAffinityTerm, ...]
    #: TCP host ports the pod asks the scheduler for (``hostPort``, or ``containerPort`` under ``hostNetwork``)
    host_ports: frozenset[int]


def _selects(term: PodAffinityTerm, own_namespace: str | None, peer_labels: Mapping[str, str],
             peer_namespace: str | None) -> bool:
    """``term`` certainly selects a pod with ``peer_labels`` in ``peer_namespace`` (any topology key)."""
    return (term.requirements is not None and _in_scope(term, own_namespace, peer_namespace)
            and all_hold(term.requirements, peer_labels, more_labels_possible=True) is True)


def _follows(x: Placed, y: Placed) -> bool:
    """Every required affinity term of ``x`` selects ``y`` and one spans a node: a node passes for ``x`` only where
    ``y`` runs (``satisfyPodAffinity`` counts pods matching all the terms), bar the first-pod exception."""
    return bool(x.pod_affinity) and any(t.topology_key == HOSTNAME_LABEL for t in x.pod_affinity) and all(
        _selects(t, x.namespace, y.pod_labels, y.namespace) for t in x.pod_affinity)


def _cannot_start_alone(x: Placed) -> bool:
    """``x`` certainly fails one of its own affinity terms, so the first-pod exception (the pod matching all its own
    terms while no pod matches them) never lets it start on a node without a matching pod."""
    return any(t.requirements is not None and all_hold(t.requirements, x.pod_labels, more_labels_possible=True) is False
               for t in x.pod_affinity)


#: The assumption behind a verdict that takes ``spec.nodeName`` and the ``kubernetes.io/hostname`` label as one node
#: (:func:`hostname_assumed`), for messages.
HOSTNAME_ASSUMPTION = ("if each node's kubernetes.io/hostname label is its name, as the kubelet sets it unless "
                       "--hostname-override or a cloud provider names the node otherwise")


def may_share_node(a: Placed, b: Placed, assume_hostname_is_name: bool = True) -> bool:
    """False when the pods of ``a`` and ``b`` can never run on one node: no node meets both node placements
    (:func:`nodes_disjoint`: two ``spec.nodeName`` s, ``nodeSelector`` s or required node affinity terms that
    contradict, e.g. ``kubernetes.io/hostname In [a]`` against ``NotIn [a]``, or ``nodeName: a`` against a
    ``kubernetes.io/hostname: b`` selector while ``assume_hostname_is_name``), or a required pod anti-affinity term
    of either spans one node and certainly selects the other (:func:`selects_on_node`), or both ask for one TCP host
    port (kube-scheduler's NodePorts filter never places two such pods on one node; a ``hostNetwork`` pod's
    ``containerPort`` is a host port, k8s.io/api core/v1 ContainerPort). True otherwise (unknown, preferred terms,
    zone or custom topology keys)."""
    if nodes_disjoint(a.nodes, b.nodes, assume_hostname_is_name) or a.host_ports & b.host_ports:
        return False
    return not any(selects_on_node(t, x.namespace, y.pod_labels, y.namespace)
                   for x, y in ((a, b), (b, a)) for t in x.anti_affinity)


def same_node(a: Placed, b: Placed, assume_hostname_is_name: bool = True) -> bool:
    """True only when the pods of ``a`` and ``b`` run on one node whenever both run: both placements admit one node
    only, the same (:func:`pinned_node`: ``spec.nodeName``, a ``kubernetes.io/hostname`` selector or required node
    affinity term; ``nodeName: a`` and ``kubernetes.io/hostname: a`` are one node while ``assume_hostname_is_name``),
    or required pod affinity on ``kubernetes.io/hostname`` draws one to the other: its terms all select the other
    and it cannot start alone (:func:`_cannot_start_alone`), or the other's terms select it back (whichever is
    scheduled second joins the first). For one pod per role: replicas, or other pods a term selects, may draw a pod
    to another node. Unknown or unconstrained placement: False."""
    pin = pinned_node(a.nodes, assume_hostname_is_name)
    if pin is not None and pin == pinned_node(b.nodes, assume_hostname_is_name):
        return True
    ab, ba = _follows(a, b), _follows(b, a)
    return (ab and ba) or (ab and _cannot_start_alone(a)) or (ba and _cannot_start_alone(b))


def hostname_assumed(a: Placed, b: Placed) -> bool:
    """True when :func:`may_share_node` or :func:`same_node` answers for ``a`` and ``b`` only because
    ``spec.nodeName`` and the ``kubernetes.io/hostname`` label are taken as one node (:data:`HOSTNAME_ASSUMPTION`):
    without that they would answer otherwise."""
    return (may_share_node(a, b) != may_share_node(a, b, assume_hostname_is_name=False)
            or same_node(a, b) != same_node(a, b, assume_hostname_is_name=False))


def _node_requirement(expr: object, field: bool) -> Requirement | None:
    """One ``NodeSelectorRequirement`` as a :data:`NodeTerm` requirement; ``None`` when the apiserver refuses it
    (k8s pkg/apis/core/validation ``ValidateNodeSelectorRequirement`` / ``ValidateNodeFieldSelectorRequirement``)."""
    if not isinstance(expr, Mapping):
        return None
    key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
    if not isinstance(key, str) or not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        return None
    if field:
        if key != "metadata.name" or op not in ("In", "NotIn") or len(values) != 1:
            return None
        return NODE_NAME_FIELD, op, tuple(values)
    if op not in _NODE_OPS or (op in ("In", "NotIn") and not values) or (op in ("Exists", "DoesNotExist") and values):
        return None
    if op in ("Gt", "Lt") and (len(values) != 1 or not _is_int(values[0])):
        return None
    return key, op, tuple(values)


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def node_terms(pod_spec: Mapping) -> tuple[NodeTerm, ...] | None:
    """The nodes a pod spec (camelCase dict) may run on, as ORed :data:`NodeTerm` s: each required
    ``nodeAffinity`` term with the ``nodeSelector`` (``key In [value]``) and ``spec.nodeName``
    (:data:`NODE_NAME_FIELD` ``In [name]``) ANDed in; one term of those two alone when no required node affinity is
    written. Empty terms (which match no node) are left out. ``None`` when the placement cannot be read (a term the
    apiserver refuses, no term left: a pod that never schedules is not a placement)."""
    base: list[Requirement] = []
    for key, value in _mapping(pod_spec.get("nodeSelector")).items():
        base.append((str(key), "In", (str(value),)))
    if pod_spec.get("nodeName"):
        base.append((NODE_NAME_FIELD, "In", (str(pod_spec["nodeName"]),)))
    required = _mapping(_mapping(_mapping(pod_spec.get("affinity")).get("nodeAffinity")).get(
        "requiredDuringSchedulingIgnoredDuringExecution"))
    if "nodeSelectorTerms" not in required:
        return (tuple(base),)
    raw = required.get("nodeSelectorTerms")
    if not isinstance(raw, list):
        return None
    out = []
    for term in raw:
        if not isinstance(term, Mapping):
            return None
        exprs = [(e, False) for e in term.get("matchExpressions") or []] + [
            (e, True) for e in term.get("matchFields") or []]
        if not exprs:
            continue  # an empty term matches no node
        reqs = [_node_requirement(e, field) for e, field in exprs]
        if None in reqs:
            return None
        out.append((*base, *reqs))
    return tuple(out) or None


def _satisfiable(term: NodeTerm) -> bool:
    """Some node could meet every requirement of ``term``: False only when two requirements on one key certainly
    contradict (no value left by ``In``, ``NotIn`` and ``Gt``/``Lt``; ``DoesNotExist`` against ``In``, ``Exists``,
    ``Gt`` or ``Lt``)."""
    for key in {k for k, _, _ in term}:
        ops = [(op, values) for k, op, values in term if k == key]
        # NotIn holds for a node without the label (apimachinery labels.Requirement.Matches): only the others need it
        absent = any(op == "DoesNotExist" for op, _ in ops)
        if absent and any(op in ("In", "Exists", "Gt", "Lt") for op, _ in ops):
            return False
        lo = max((int(v[0]) for op, v in ops if op == "Gt"), default=None)
        hi = min((int(v[0]) for op, v in ops if op == "Lt"), default=None)
        if lo is not None and hi is not None and hi - lo < 2:
            return False
        in_sets = [set(values) for op, values in ops if op == "In"]
        if not in_sets:
            continue
        left = set.intersection(*in_sets) - {v for op, values in ops if op == "NotIn" for v in values}
        left = {v for v in left if (lo is None and hi is None) or (_is_int(v) and (lo is None or int(v) > lo)
                                                                   and (hi is None or int(v) < hi))}
        if not left:
            return False
    return True


def _as_hostname(terms: tuple[NodeTerm, ...] | None) -> tuple[NodeTerm, ...] | None:
    """``terms`` with :data:`NODE_NAME_FIELD` requirements read as :data:`HOSTNAME_LABEL` ones (the node's name as
    its hostname label: :data:`HOSTNAME_ASSUMPTION`)."""
    if terms is None:
        return None
    return tuple(tuple((HOSTNAME_LABEL if k == NODE_NAME_FIELD else k, op, v) for k, op, v in t) for t in terms)


def nodes_disjoint(a: tuple[NodeTerm, ...] | None, b: tuple[NodeTerm, ...] | None,
                   assume_hostname_is_name: bool = False) -> bool:
    """No node meets both placements (:func:`node_terms`): every term of ``a`` ANDed with every term of ``b``
    certainly contradicts (:func:`_satisfiable`), the node's name read as its hostname label where
    ``assume_hostname_is_name``. Unknown placements (``None``): False."""
    if a is None or b is None:
        return False
    if assume_hostname_is_name:
        a, b = _as_hostname(a), _as_hostname(b)
    return all(not _satisfiable((*ta, *tb)) for ta in a for tb in b)


def label_values(terms: tuple[NodeTerm, ...] | None, key: str) -> frozenset[str] | None:
    """The values the node label ``key`` may take wherever the pod can run: the union, over the ORed terms, of each
    term's ``key In [...]`` values (intersected where a term repeats the key, less its ``NotIn`` values); ``None``
    when the placement is unreadable or some term does not pin ``key`` (the pod may then run on any such node)."""
    if not terms:
        return None
    values: set[str] = set()
    for term in terms:
        in_sets = [set(v) for k, op, v in term if k == key and op == "In"]
        if not in_sets:
            return None
        values |= set.intersection(*in_sets) - {x for k, op, v in term if k == key and op == "NotIn" for x in v}
    return frozenset(values)


def pinned_node(terms: tuple[NodeTerm, ...] | None, assume_hostname_is_name: bool = False) -> tuple[str, str] | None:
    """``(key, value)`` when the placement admits one node only: every term pins :data:`NODE_NAME_FIELD` (the
    node's name) or :data:`HOSTNAME_LABEL` (its hostname label, one value per node) to the same single value; with
    ``assume_hostname_is_name`` the name is read as the label, so the key is :data:`HOSTNAME_LABEL` either way."""
    if not terms:
        return None
    if assume_hostname_is_name:
        terms = _as_hostname(terms)
    for key in (NODE_NAME_FIELD, HOSTNAME_LABEL):
        values = set()
        for term in terms:
            in_sets = [set(v) for k, op, v in term if k == key and op == "In"]
            if not in_sets:
                break
            values |= set.intersection(*in_sets) - {x for k, op, v in term if k == key and op == "NotIn" for x in v}
        else:
            if len(values) == 1:
                return key, values.pop()
    return None
