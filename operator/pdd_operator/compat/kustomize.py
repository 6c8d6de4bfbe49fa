"""Kustomize overlays that configure prefill/decode KV transfer: reported as "not checked".

A ``Kustomization`` (``kustomize.config.k8s.io/v1beta1``) or a kustomize ``Component``
(``kustomize.config.k8s.io/v1alpha1``) holds ``resources``/``components`` (bases, by path or URL) and ``patches``
(strategic-merge or JSON 6902, inline as text or by path) that ``kustomize build`` / ``kubectl apply -k`` merges into
those bases. A patch that sets a role's args (llm-d's P/D guides: ``--kv-transfer-config`` per role) holds neither
the command nor the image nor the rest of the pod, which are in the bases; the engines exist only in the build's
output. Its API group ends in ``.k8s.io`` like the built-in kinds, whose text is never taken for engines, so
without this it would say nothing at all.
"""

from __future__ import annotations

from pdd_operator.compat.manifests import _PD_MARKER, Unreadable

#: The kustomize kinds, by API group (kustomize api/types: Kustomization, Component).
_KUSTOMIZE_GROUP = "kustomize.config.k8s.io"
_KINDS = ("Kustomization", "Component")


def kustomize_overlay(doc: dict) -> Unreadable | None:
    """The "not checked" record of a kustomize ``Kustomization``/``Component`` document whose text configures P/D KV
    transfer (a KV connector or ``kv_role`` in its patches, inline or named), or ``None`` for any other document."""
    group = str(doc.get("apiVersion") or "").rpartition("/")[0]
    if group != _KUSTOMIZE_GROUP or doc.get("kind") not in _KINDS or not _PD_MARKER.search(repr(doc)):
        return None
    return Unreadable(f"{doc['kind']} ({group})", (
        "it is a Kustomize overlay whose patches configure prefill/decode KV transfer: kustomize merges them into the "
        "bases it names (resources, components), which hold the engines' commands, images and the rest of their pods "
        "and are not in these files; run kustomize build (kubectl kustomize) and check its output"))
