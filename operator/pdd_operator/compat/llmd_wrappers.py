"""llm-d-modelservice values carried inline by a GitOps wrapper: a Flux HelmRelease or an Argo CD Application.

Both install a chart with values written in the wrapper itself; when the chart is llm-d-modelservice those values
are the same values file :mod:`~pdd_operator.compat.llmd_values` reads, so they are handed to it (one reader) under
the wrapper's key (``spec.values.``), and findings name ``spec.values.decode.parallelism.tensor``.

What each wrapper gives the chart, as their sources define it:

- Flux HelmRelease (helm.toolkit.fluxcd.io/v2 ``HelmReleaseSpec``; helm-controller
  ``internal/chartutil/values.go`` ``ChartValuesFromReferences``): each ``spec.valuesFrom`` entry (a ConfigMap or
  Secret key, ``values.yaml`` by default) merged in order, maps key by key and any other value replaced, then
  ``spec.values`` over them. The chart is ``spec.chart.spec.chart``.
- Argo CD Application (argoproj.io/v1alpha1 ``ApplicationSourceHelm``, pkg/apis/application/v1alpha1/types.go
  ``ValuesYAML``): ``helm.valuesObject`` when set, else ``helm.values`` (a YAML string); with ``spec.sources`` set,
  ``spec.source`` is ignored and each source is a chart of its own. The chart is ``chart`` (a Helm repository) or
  the last part of ``path`` (a Git repository); ``repoURL`` naming llm-d-modelservice is taken as that chart too.

What the wrapper does not show is left as today (the release is "not checked", with the reason
:func:`~pdd_operator.compat.manifests.scan` gives): values files of the chart source (Flux
``spec.chart.spec.valuesFiles``, Argo CD ``helm.valueFiles``), ``--set`` parameters (Argo CD ``helm.parameters``,
``fileParameters``), a ``valuesFrom`` entry that is not among the files (it may exist in the cluster) or that sets a
``targetPath``, and a Flux ``spec.chartRef`` (the chart is named by another object).
"""

from __future__ import annotations

import copy

import yaml

#: The chart whose values :mod:`~pdd_operator.compat.llmd_values` reads.
LLMD_CHART = "llm-d-modelservice"

_FLUX_HELM_GROUP = "helm.toolkit.fluxcd.io"
_ARGO_GROUP = "argoproj.io"


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def _merge(base: dict, over: dict) -> dict:
    """``over`` merged into a copy of ``base`` as Flux merges values: maps key by key, any other value replaced."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        out[key] = _merge(out[key], value) if isinstance(out.get(key), dict) and isinstance(value, dict) else (
            copy.deepcopy(value))
    return out


def _flux(doc: dict) -> list[tuple[str, dict]] | None:
    spec = _dict(doc.get("spec"))
    chart = _dict(_dict(spec.get("chart")).get("spec"))
    if str(chart.get("chart") or "").rstrip("/").rsplit("/", 1)[-1] != LLMD_CHART or chart.get("valuesFiles"):
        return None
    values: dict = {}
    for ref in spec.get("valuesFrom") or []:
        text = _dict(ref).get("resolvedValues")  # set by helm_release.with_values_from when the files hold it
        if text is None or _dict(ref).get("targetPath"):
            return None
        try:
            loaded = yaml.safe_load(text)
        except yaml.YAMLError:
            return None
        if not isinstance(loaded, dict):
            return None
        values = _merge(values, loaded)
    if spec.get("values") is not None and not isinstance(spec.get("values"), dict):
        return None
    values = _merge(values, _dict(spec.get("values")))
    return [("spec.values.", values)] if values else None


def _is_llmd_source(source: dict) -> bool:
    names = [str(source.get("chart") or ""), str(source.get("path") or "").rstrip("/").rsplit("/", 1)[-1]]
    return LLMD_CHART in names or (LLMD_CHART in str(source.get("repoURL") or "") and not source.get("chart"))


def _argo_source(source: dict, key: str) -> tuple[str, dict] | None:
    helm = _dict(source.get("helm"))
    if not _is_llmd_source(source) or any(helm.get(k) for k in ("valueFiles", "parameters", "fileParameters")):
        return None
    if isinstance(helm.get("valuesObject"), dict):
        return f"{key}.helm.valuesObject.", helm["valuesObject"]
    if isinstance(helm.get("values"), str):
        try:
            loaded = yaml.safe_load(helm["values"])
        except yaml.YAMLError:
            return None
        return (f"{key}.helm.values.", loaded) if isinstance(loaded, dict) else None
    return None


def _argo(doc: dict) -> list[tuple[str, dict]] | None:
    spec = _dict(doc.get("spec"))
    if isinstance(spec.get("sources"), list):
        sources = [(f"spec.sources[{i}]", _dict(s)) for i, s in enumerate(spec["sources"])]
    else:
        sources = [("spec.source", _dict(spec.get("source")))]
    llmd = [(key, s) for key, s in sources if _is_llmd_source(s)]
    found = [_argo_source(s, key) for key, s in llmd]
    if not llmd or any(f is None for f in found):
        return None
    return [f for f in found if f is not None]


def wrapped_llmd_values(doc: dict) -> list[tuple[str, dict]] | None:
    """The llm-d-modelservice values a Flux HelmRelease or Argo CD Application ``doc`` installs, as ``[(key prefix,
    values)]`` (``("spec.values.", {...})``, ``("spec.sources[1].helm.valuesObject.", {...})``); ``None`` for any
    other document, a wrapper of another chart, or one whose values are not all in the files (module docstring)."""
    group = str(doc.get("apiVersion") or "").rpartition("/")[0]
    if group == _FLUX_HELM_GROUP and doc.get("kind") == "HelmRelease":
        return _flux(doc)
    if group == _ARGO_GROUP and doc.get("kind") == "Application":
        return _argo(doc)
    return None


__all__ = ["LLMD_CHART", "wrapped_llmd_values"]
