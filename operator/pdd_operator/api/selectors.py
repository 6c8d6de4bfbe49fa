"""Kubernetes label selectors: the one definition of "a selector matches these labels" in this project.

Semantics are apimachinery's (``metav1.LabelSelectorAsSelector`` and ``labels.Requirement.Matches`` in
k8s.io/apimachinery pkg/apis/meta/v1/helpers.go and pkg/labels/selector.go):

- a null selector (``None``) matches nothing; an empty one (``{}``) matches everything;
- each ``matchLabels`` entry ``k: v`` is the requirement ``k In [v]``;
- ``In``: the label is present and its value is one of ``values``; ``NotIn``: the label is absent **or** its
  value is none of ``values``; ``Exists``: present; ``DoesNotExist``: absent;
- every requirement of ``matchLabels`` and ``matchExpressions`` must hold (AND).

A selector the apiserver refuses (an unknown operator, ``In``/``NotIn`` without values, ``Exists``/
``DoesNotExist`` with values, a non-string key or value) has no meaning: :func:`selector_matches` returns
``None`` for it.
"""

from __future__ import annotations

from collections.abc import Mapping

#: A requirement ``(key, operator, values)`` with operator ``In``, ``NotIn``, ``Exists`` or ``DoesNotExist``.
Requirement = tuple[str, str, tuple[str, ...]]

_WITH_VALUES = ("In", "NotIn")
_WITHOUT_VALUES = ("Exists", "DoesNotExist")


def requirements(selector: Mapping) -> tuple[Requirement, ...] | None:
    """The requirements of a ``LabelSelector`` (camelCase dict), ``matchLabels`` first (sorted by key), then
    ``matchExpressions`` in order; ``None`` when the apiserver would refuse the selector (see the module
    docstring)."""
    out: list[Requirement] = []
    match_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    if not isinstance(match_labels, Mapping) or not isinstance(expressions, list):
        return None
    for key, value in sorted(match_labels.items(), key=lambda kv: str(kv[0])):
        if not isinstance(key, str) or not isinstance(value, str):
            return None
        out.append((key, "In", (value,)))
    for expr in expressions:
        if not isinstance(expr, Mapping):
            return None
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if not isinstance(key, str) or not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            return None
        if not ((op in _WITH_VALUES and values) or (op in _WITHOUT_VALUES and not values)):
            return None
        out.append((key, op, tuple(values)))
    return tuple(out)


def requirement_holds(req: Requirement, labels: Mapping[str, str], more_labels_possible: bool = False) -> bool | None:
    """Whether one requirement holds for an object with ``labels``.

    ``more_labels_possible``: ``labels`` are what a manifest writes, and the object may carry more (controllers
    add ``pod-template-hash``, ``controller-revision-hash``, their own component labels). A requirement on a key
    absent from ``labels`` is then ``None`` (unknown): the added label could make ``In``/``Exists`` hold and
    ``NotIn``/``DoesNotExist`` fail. Keys that are present are judged as written.
    """
    key, op, values = req
    if key not in labels:
        return None if more_labels_possible else op in ("NotIn", "DoesNotExist")
    value = labels[key]
    return {"In": value in values, "NotIn": value not in values, "Exists": True, "DoesNotExist": False}[op]


def all_hold(reqs: tuple[Requirement, ...], labels: Mapping[str, str], more_labels_possible: bool = False) -> bool | None:
    """AND of :func:`requirement_holds` in three values: ``False`` if any requirement fails, ``True`` if all
    hold, else ``None``."""
    results = [requirement_holds(r, labels, more_labels_possible) for r in reqs]
    if False in results:
        return False
    return None if None in results else True


def selector_matches(selector: Mapping | None, labels: Mapping[str, str],
                     more_labels_possible: bool = False) -> bool | None:
    """Whether the ``LabelSelector`` ``selector`` (camelCase dict) selects an object with ``labels``.

    Returns ``True``/``False``; ``None`` when the selector is one the apiserver refuses, or when the answer
    depends on a label the object may carry beyond ``labels`` (``more_labels_possible``, see
    :func:`requirement_holds`). A null selector matches nothing, an empty one everything.
    """
    if selector is None:
        return False
    if not isinstance(selector, Mapping):
        return None
    reqs = requirements(selector)
    return None if reqs is None else all_hold(reqs, labels, more_labels_possible)
