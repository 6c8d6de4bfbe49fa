"""GitOps objects that deploy manifests kept elsewhere: a Flux ``Kustomization`` and an Argo CD ``Application``.

Neither holds an engine: each names a source that its controller renders and applies.

- Flux ``Kustomization`` (``kustomize.toolkit.fluxcd.io`` v1/v1beta2 ``KustomizationSpec``): ``spec.sourceRef``
  (a GitRepository, OCIRepository or Bucket) and ``spec.path`` inside it, which kustomize-controller builds as
  ``kustomize build`` does (generating a kustomization.yaml where the folder has none), then applies ``spec.patches``,
  ``spec.images`` and ``spec.postBuild`` substitutions. ``flux build kustomization <name> --path <local folder>``
  prints that output.
- Argo CD ``Application`` (``argoproj.io/v1alpha1`` ``ApplicationSpec``): ``spec.source`` (or each of
  ``spec.sources``) with a ``repoURL`` and a ``path`` in a Git repository (a plain folder, a kustomization or a Helm
  chart) or a ``chart`` of a Helm repository, rendered by the repo server; ``argocd app manifests <name>`` prints
  the result, ``kubectl kustomize <path>`` / ``helm template`` render a local checkout.

Where the files given hold that source (a file under a folder whose path ends with ``spec.path``), its manifests are
read as inputs of their own and the object adds nothing to check. Otherwise whatever P/D engines it deploys are not
in the files: the object is "not checked", naming the command that renders it, never passed in silence
(:func:`gitops_unrendered`). An Argo CD Application of the llm-d-modelservice chart whose values it carries is read by
:mod:`~pdd_operator.compat.llmd_wrappers` instead.

A Helmfile (helmfile.yaml: ``releases``, each a chart with ``values`` given inline, by file or as templates, ``set``
entries and ``secrets``, beside ``repositories``, ``environments``, ``helmDefaults``) is the same kind of object
outside a cluster: ``helmfile sync`` / ``apply`` renders each release's chart with its merged values and installs it,
``helmfile template`` prints what it would install. Its releases' containers are the chart's values, not pods, and
the chart's templates complete their commands (llm-d-modelservice adds ``--port``, ``--tensor-parallel-size``,
``--served-model-name`` to ``vllm serve``), so it is "not checked", naming ``helmfile template``
(:func:`helmfile_unrendered`), rather than its values read as whole pods (set 124: aiconfigurator's llm-d values as a
release's inline values were paired and passed without the chart's rendering).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from pdd_operator.compat.manifests import Unreadable

_FLUX_GROUP = "kustomize.toolkit.fluxcd.io"
_ARGO_GROUP = "argoproj.io"


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def _group(doc: dict) -> str:
    return str(doc.get("apiVersion") or "").split("/", 1)[0]


def _held(path: str, given: frozenset[Path]) -> bool:
    """Whether a file among ``given`` (resolved paths) lies under a folder whose path ends with ``path`` (a path
    inside the source repository, ``./apps/vllm``): the user gave a checkout of the source."""
    parts = tuple(p for p in PurePosixPath(path.strip()).parts if p not in (".", "/"))
    if not parts:
        return False
    n = len(parts)
    return any(tuple(f.parts[i:i + n]) == parts for f in given for i in range(len(f.parts) - n))


def gitops_unrendered(doc: dict, given: frozenset[Path] = frozenset()) -> Unreadable | None:
    """The "not checked" record of a Flux Kustomization or an Argo CD Application whose source the files ``given``
    (resolved paths) do not hold (:func:`_held`), naming the command that renders it; ``None`` for any other document,
    for one whose source is among the files, and for an Argo CD Application of llm-d-modelservice whose values it
    carries (read by :func:`~pdd_operator.compat.llmd_wrappers.wrapped_llmd_values`)."""
    kind, group = doc.get("kind"), _group(doc)
    meta = _dict(doc.get("metadata"))
    name = str(meta.get("name") or "<name>")
    spec = _dict(doc.get("spec"))
    if kind == "Kustomization" and group == _FLUX_GROUP:
        path = str(spec.get("path") or "./")
        ref = _dict(spec.get("sourceRef"))
        source = f"{ref.get('kind') or 'source'} {ref.get('name') or ''}".strip()
        if _held(path, given):
            return None
        return Unreadable(f"Kustomization/{name} ({_FLUX_GROUP})", (
            f"it is a Flux Kustomization: kustomize-controller builds {path} of {source} (with its patches, images "
            "and postBuild substitutions) and applies the result, and those manifests are not in these files, so any "
            "prefill/decode engines they hold are not checked. Render it and check the output: flux build "
            f"kustomization {name} --path <your checkout of {path}> | pdd check - (or give pdd check that folder; "
            f"kubectl kustomize <folder> | pdd check - where it is a kustomization)"))
    if kind == "Application" and group == _ARGO_GROUP:
        from pdd_operator.compat.llmd_wrappers import wrapped_llmd_values

        if wrapped_llmd_values(doc) is not None:
            return None
        sources = [_dict(s) for s in spec.get("sources") or []] or [_dict(spec.get("source"))]
        unheld = [s for s in sources if not (s.get("path") and _held(str(s["path"]), given))
                  and (s.get("path") or s.get("chart"))]
        if not unheld:
            return None
        shown = []
        for s in unheld:
            if s.get("chart"):
                shown.append(f"chart {s['chart']} {s.get('targetRevision') or ''} of {s.get('repoURL') or '?'} "
                              f"(helm template {s['chart']} --repo {s.get('repoURL') or '<repo>'})".replace("  ", " "))
            else:
                render = "kubectl kustomize" if _dict(s.get("kustomize")) or not s.get("helm") else "helm template"
                shown.append(f"{s['path']} of {s.get('repoURL') or '?'} ({render} <your checkout of {s['path']}>)")
        return Unreadable(f"Application/{name} ({_ARGO_GROUP})", (
            "it is an Argo CD Application: Argo CD renders and applies " + "; ".join(shown) + ", which these files do "
            "not hold, so any prefill/decode engines it deploys are not checked. Render it and check the output: "
            f"argocd app manifests {name} | pdd check - (or the command above | pdd check -, or give pdd check the "
            "checkout's folder)"))
    return None


def _helmfile_releases(doc: dict) -> list[dict] | None:
    """The releases of a Helmfile document (no ``apiVersion``/``kind``, a non-empty ``releases`` list whose items are
    all mappings naming a ``chart``: helmfile's ``ReleaseSpec``, pkg/state/state.go), or ``None`` for any other
    document."""
    releases = doc.get("releases")
    if doc.get("apiVersion") or doc.get("kind") or not isinstance(releases, list) or not releases:
        return None
    if not all(isinstance(r, dict) and isinstance(r.get("chart"), str) for r in releases):
        return None
    return releases


def helmfile_unrendered(doc: dict) -> Unreadable | None:
    """The "not checked" record of a Helmfile document (:func:`_helmfile_releases`), naming its releases and charts
    and the command that renders them (``helmfile template``); ``None`` for any other document."""
    releases = _helmfile_releases(doc)
    if releases is None:
        return None
    named = ", ".join(f"{r.get('name') or '<unnamed>'} ({r['chart']})" for r in releases[:4])
    more = f" and {len(releases) - 4} more" if len(releases) > 4 else ""
    return Unreadable(f"Helmfile releases {named}{more}", (
        "it is a Helmfile: helmfile renders each release's chart with its merged values (inline, values files, "
        "templates, set entries, environments) when it syncs, and the chart's templates complete the engines' "
        "commands, so the containers in its values are not the pods that run and any prefill/decode engines among "
        "them are not checked; render it and check the output: helmfile template | pdd check - (or helm template "
        "<chart> -f <the release's values>)"))
