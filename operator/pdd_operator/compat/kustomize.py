"""Kustomize overlays that configure prefill/decode KV transfer: reported as "not checked".

A ``Kustomization`` (``kustomize.config.k8s.io/v1beta1``) or a kustomize ``Component``
(``kustomize.config.k8s.io/v1alpha1``) holds ``resources``/``components`` (bases, by path or URL) and ``patches``
(strategic-merge or JSON 6902, inline as text or by path) that ``kustomize build`` / ``kubectl apply -k`` merges into
those bases. A patch that sets a role's args (llm-d's P/D guides: ``--kv-transfer-config`` per role) holds neither
the command nor the image nor the rest of the pod, which are in the bases; the engines exist only in the build's
output. Its API group ends in ``.k8s.io`` like the built-in kinds, whose text is never taken for engines, so
without this it would say nothing at all.

A role overlay of such a build (llm-d's guides: ``overlays/prefill/kustomization.yaml`` patching the base's Deployment
with ``deployment-patch.yaml`` and renaming it ``prefill``) may hold no KV connector in its own text at all: the
connector is in the patch file it names by path or in its base. An overlay that patches (``patches``,
``patchesStrategicMerge``, ``patchesJson6902``) and names one P/D role (a name, a label value, a path, a patch's
text) is therefore "not checked" too, never "nothing to check".
"""

from __future__ import annotations

from pdd_operator.compat.manifests import _PD_MARKER, Unreadable, _role_hint

#: The kustomize kinds, by API group (kustomize api/types: Kustomization, Component).
_KUSTOMIZE_GROUP = "kustomize.config.k8s.io"
_KINDS = ("Kustomization", "Component")
#: The fields that patch the bases (kustomize api/types/kustomization.go: Patches, PatchesStrategicMerge (a list of
#: paths or inline texts), PatchesJson6902 (target + path or inline patch)).
_PATCH_FIELDS = ("patches", "patchesStrategicMerge", "patchesJson6902")


def _strings(value) -> list[str]:
    """Every string in a parsed YAML value (mapping values, list items, nested), keys left out."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _overlay_role(doc: dict) -> str | None:
    """The P/D role (``prefill`` or ``decode``) a patching Kustomization/Component names, or ``None``: one that
    patches no base, or names no role, or names both (a whole P/D build, whose engines are then in its resources)."""
    if not any(doc.get(field) for field in _PATCH_FIELDS):
        return None
    roles = {role for text in _strings(doc) if (role := _role_hint(text))}
    return roles.pop() if len(roles) == 1 else None


def kustomize_overlay(doc: dict) -> Unreadable | None:
    """The "not checked" record of a kustomize ``Kustomization``/``Component`` document whose text configures P/D KV
    transfer (a KV connector or ``kv_role`` in its patches, inline or named) or that patches its bases for one P/D
    role (:func:`_overlay_role`), or ``None`` for any other document."""
    group = str(doc.get("apiVersion") or "").rpartition("/")[0]
    if group != _KUSTOMIZE_GROUP or doc.get("kind") not in _KINDS:
        return None
    if not _PD_MARKER.search(repr(doc)):
        role = _overlay_role(doc)
        if role is None:
            return None
        return Unreadable(f"{doc['kind']} ({group})", (
            f"it is a Kustomize overlay of the {role} role: it patches bases and patch files it names by path "
            "(resources, components, patches), which hold the engine's command, image and KV transfer configuration "
            "and are not in these files; run kustomize build (kubectl kustomize) and check its output"))
    return Unreadable(f"{doc['kind']} ({group})", (
        "it is a Kustomize overlay whose patches configure prefill/decode KV transfer: kustomize merges them into the "
        "bases it names (resources, components), which hold the engines' commands, images and the rest of their pods "
        "and are not in these files; run kustomize build (kubectl kustomize) and check its output"))
