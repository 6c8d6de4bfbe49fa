"""Kustomizations: what a P/D deployment built by ``kustomize build`` / ``kubectl apply -k`` leaves "not checked".

A ``Kustomization`` (``kustomize.config.k8s.io/v1beta1``) or a kustomize ``Component``
(``kustomize.config.k8s.io/v1alpha1``) holds ``resources``/``components`` (bases, by path or URL), ``helmCharts``
(charts kustomize inflates with values files), ``patches`` (strategic-merge or JSON 6902, inline as text or by path),
``images`` overrides and generators that ``kustomize build`` merges into what it emits; the engines exist only in
that output. A ``kustomization.yaml`` may also leave out ``apiVersion`` and ``kind``: kustomize's loader defaults
them to ``kustomize.config.k8s.io/v1beta1`` ``Kustomization`` (kustomize api/types/kustomization.go
``FixKustomization``; users' GitOps trees keep many such files), so a document with no ``kind`` whose every
top-level key is a Kustomization field and that names what to build (:data:`_BUILD_FIELDS`) is one too, never Helm
values.

Such a document is "not checked", naming the command that gives the checker the built manifests
(``kubectl kustomize <folder> | pdd check -``, with ``--enable-helm`` for ``helmCharts``), unless everything it builds
from is among the files given with it and it changes none of them (:func:`covered`): then those files are checked as
they are and the kustomization adds nothing. Its reason says more where its own text shows P/D: patches that carry a
KV connector or ``kv_role``, or an overlay of one named P/D role (llm-d's guides: ``overlays/prefill/kustomization.yaml``
patching the base's Deployment with ``deployment-patch.yaml``, the connector in that file or the base).
"""

from __future__ import annotations

from pathlib import Path

from pdd_operator.compat.manifests import _PD_MARKER, Unreadable, _role_hint

#: The kustomize kinds, by API group (kustomize api/types: Kustomization, Component).
_KUSTOMIZE_GROUP = "kustomize.config.k8s.io"
_KINDS = ("Kustomization", "Component")
#: The fields that patch the bases (kustomize api/types/kustomization.go: Patches, PatchesStrategicMerge (a list of
#: paths or inline texts), PatchesJson6902 (target + path or inline patch)).
_PATCH_FIELDS = ("patches", "patchesStrategicMerge", "patchesJson6902")
#: The fields that name what kustomize builds from (kustomize api/types/kustomization.go: Resources, Components,
#: Crds, the deprecated Bases, HelmCharts, HelmChartInflationGenerator, Generators): a kind-less document that sets
#: one of them as a list is a kustomization.
_BUILD_FIELDS = ("resources", "components", "bases", "crds", "helmCharts", "helmChartInflationGenerator",
                 "generators")
#: The fields whose entries are files the build reads as manifests (local paths or URLs).
_FILE_FIELDS = ("resources", "components", "bases", "crds")
#: The fields that leave every engine as its files write it (names, namespaces, labels, annotations, replica counts,
#: ordering, the build's own settings); any other field (patches, images, generators, replacements, vars,
#: transformers, charts) changes or adds what the engines run.
_TRANSPARENT_FIELDS = frozenset({
    "apiVersion", "kind", "metadata", "namespace", "namePrefix", "nameSuffix", "commonLabels", "labels",
    "commonAnnotations", "replicas", "sortOptions", "buildMetadata", "generatorOptions", "openapi", "configurations",
    *_FILE_FIELDS})
#: Every field of a Kustomization (kustomize api/types/kustomization.go, v5), for kind-less documents.
_KUSTOMIZATION_FIELDS = _TRANSPARENT_FIELDS | {
    *_PATCH_FIELDS, *_BUILD_FIELDS, "images", "imageTags", "replacements", "vars", "configMapGenerator",
    "secretGenerator", "helmGlobals", "transformers", "validators"}


def _strings(value) -> list[str]:
    """Every string in a parsed YAML value (mapping values, list items, nested), keys left out."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _kindless(doc: dict) -> bool:
    """True for a document without ``apiVersion`` that kustomize reads as a Kustomization or Component: every key a
    Kustomization field, and a kustomize ``kind`` or at least one field of :data:`_BUILD_FIELDS` a list (Helm values'
    ``resources`` is a mapping of requests and limits, so values files are not taken for one)."""
    if doc.get("apiVersion") or doc.get("kind") not in (None, *_KINDS) or not set(doc) <= _KUSTOMIZATION_FIELDS:
        return False
    return doc.get("kind") in _KINDS or any(isinstance(doc.get(field), list) and doc[field] for field in _BUILD_FIELDS)


def is_kustomization(doc: dict) -> bool:
    """True for a kustomize ``Kustomization``/``Component`` document: with its ``kustomize.config.k8s.io`` apiVersion
    and kind, or without the apiVersion (:func:`_kindless`)."""
    group = str(doc.get("apiVersion") or "").rpartition("/")[0]
    return (group == _KUSTOMIZE_GROUP and doc.get("kind") in _KINDS) or _kindless(doc)


def _remote(entry: str) -> bool:
    """True for a resource kustomize fetches (a URL or a git repository reference)."""
    return "://" in entry or entry.startswith(("github.com/", "git@")) or "?ref=" in entry


def covered(doc: dict, folder: Path, given: frozenset[Path]) -> bool:
    """True when kustomization ``doc`` (in ``folder``) builds only from files among ``given`` (resolved paths) and
    changes none of them (only :data:`_TRANSPARENT_FIELDS`): checking those files is checking the build. A folder,
    a URL or a file not given is a base these files do not show."""
    if not set(doc) <= _TRANSPARENT_FIELDS:
        return False
    entries = [e for field in _FILE_FIELDS for e in doc.get(field) or []]
    return all(isinstance(e, str) and not _remote(e) and (folder / e).resolve() in given for e in entries)


def _overlay_role(doc: dict) -> str | None:
    """The P/D role (``prefill`` or ``decode``) a patching Kustomization/Component names, or ``None``: one that
    patches no base, or names no role, or names both (a whole P/D build, whose engines are then in its resources)."""
    if not any(doc.get(field) for field in _PATCH_FIELDS):
        return None
    roles = {role for text in _strings(doc) if (role := _role_hint(text))}
    return roles.pop() if len(roles) == 1 else None


def _build_command(doc: dict, folder: str) -> str:
    """The command that prints what ``doc`` builds, for :func:`kustomize_overlay`'s reasons."""
    helm = " --enable-helm" if doc.get("helmCharts") or doc.get("helmChartInflationGenerator") else ""
    return f"kubectl kustomize{helm} {folder} | pdd check -"


def kustomize_overlay(doc: dict, path: str = "-", given: frozenset[Path] = frozenset()) -> Unreadable | None:
    """The "not checked" record of a kustomization (:func:`is_kustomization`) read from file ``path`` (``-``:
    stdin), whose build the files ``given`` with it (resolved paths) do not show (:func:`covered`), or ``None`` for
    any other document. The reason names the command that builds it (``kubectl kustomize <path's folder>``) and says
    what of P/D its own text shows: patches that configure KV transfer (a KV connector or ``kv_role``), an overlay of
    one P/D role (:func:`_overlay_role`), or nothing (the engines are all in what it names)."""
    if not is_kustomization(doc):
        return None
    folder = Path(path).parent if path not in ("-", "") else Path(".")
    if covered(doc, folder.resolve(), given):
        return None
    run = f"build it (kustomize build) and check its output: {_build_command(doc, str(folder))}"
    where = (f"{doc['kind']} ({_KUSTOMIZE_GROUP})" if doc.get("apiVersion")
             else f"{doc.get('kind') or 'Kustomization'} ({_KUSTOMIZE_GROUP}, apiVersion left to kustomize's default)")
    if _PD_MARKER.search(repr(doc)):
        return Unreadable(where, (
            "it is a Kustomize overlay whose patches configure prefill/decode KV transfer: kustomize merges them into "
            "the bases it names (resources, components), which hold the engines' commands, images and the rest of "
            f"their pods and are not in these files; {run}"))
    role = _overlay_role(doc)
    if role is not None:
        return Unreadable(where, (
            f"it is a Kustomize overlay of the {role} role: it patches bases and patch files it names by path "
            "(resources, components, patches), which hold the engine's command, image and KV transfer configuration "
            f"and are not in these files; {run}"))
    named = ", ".join(f for f in doc if f in _KUSTOMIZATION_FIELDS and (f in _FILE_FIELDS or f not in _TRANSPARENT_FIELDS))
    return Unreadable(where, (
        f"it is a kustomization: the manifests it deploys are built from what it names ({named}), which these files "
        f"do not show as kustomize emits them, so any prefill/decode engines among them are not checked; {run}"))
