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

What the wrapper does not show makes that release "not checked", with the reason (rather than its containers'
args judged as whole commands, which the chart's templates complete): values files of the chart source (Flux
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


def _flux(doc: dict) -> list[tuple[str, dict | str]] | None:
    spec = _dict(doc.get("spec"))
    chart = _dict(_dict(spec.get("chart")).get("spec"))
    if str(chart.get("chart") or "").rstrip("/").rsplit("/", 1)[-1] != LLMD_CHART:
        return None
    if chart.get("valuesFiles"):
        return [("spec.chart.spec.valuesFiles.", "its values come from files of the chart's source (spec.chart.spec."
                 "valuesFiles), which are not among the files; render the chart (helm template) with them")]
    values: dict = {}
    for i, ref in enumerate(spec.get("valuesFrom") or []):
        text = _dict(ref).get("resolvedValues")  # set by helm_release.with_values_from when the files hold it
        loaded = _yaml(text) if text is not None and not _dict(ref).get("targetPath") else None
        if not isinstance(loaded, dict):
            return [(f"spec.valuesFrom[{i}].", (
                "its values come in part from a ConfigMap or Secret that is not among the files (or sets a "
                "targetPath, or holds no values map); give that object with the release, or render the chart"))]
        values = _merge(values, loaded)
    values = _merge(values, _dict(spec.get("values")))
    # merged values: a key may come from either, so both are named
    prefix = "(spec.valuesFrom, spec.values) " if spec.get("valuesFrom") else "spec.values."
    return [(prefix, values)] if values else None


def _is_llmd_source(source: dict) -> bool:
    names = [str(source.get("chart") or ""), str(source.get("path") or "").rstrip("/").rsplit("/", 1)[-1]]
    return LLMD_CHART in names or (LLMD_CHART in str(source.get("repoURL") or "") and not source.get("chart"))


def _yaml(text) -> object:
    try:
        return yaml.safe_load(str(text))
    except yaml.YAMLError:
        return None


def _argo_source(source: dict, key: str) -> tuple[str, dict | str]:
    helm = _dict(source.get("helm"))
    extra = [k for k in ("valueFiles", "parameters", "fileParameters") if helm.get(k)]
    if extra:
        return f"{key}.helm.{extra[0]}.", (
            f"its values come in part from helm.{extra[0]}, which these rules do not apply (value files of the "
            "repository, --set parameters); render the chart (helm template) with them")
    if isinstance(helm.get("valuesObject"), dict):  # ValuesYAML: valuesObject, when set, over values
        return f"{key}.helm.valuesObject.", helm["valuesObject"]
    loaded = _yaml(helm["values"]) if isinstance(helm.get("values"), str) else {}
    if not isinstance(loaded, dict):
        return f"{key}.helm.values.", "its helm.values is not a YAML map of values"
    return f"{key}.helm.values.", loaded


def _argo(doc: dict) -> list[tuple[str, dict | str]] | None:
    spec = _dict(doc.get("spec"))
    if isinstance(spec.get("sources"), list):
        sources = [(f"spec.sources[{i}]", _dict(s)) for i, s in enumerate(spec["sources"])]
    else:
        sources = [("spec.source", _dict(spec.get("source")))]
    return [_argo_source(s, key) for key, s in sources if _is_llmd_source(s)] or None


def wrapped_llmd_values(doc: dict) -> list[tuple[str, dict | str]] | None:
    """The llm-d-modelservice values a Flux HelmRelease or Argo CD Application ``doc`` installs, as ``[(key prefix,
    values)]`` (``("spec.values.", {...})``, ``("spec.sources[1].helm.valuesObject.", {...})``, ``("(spec.valuesFrom,
    spec.values) ", {...})`` for values merged from both), with why not
    checked in place of the values where they are not all in the files (module docstring); ``None`` for any other
    document and a wrapper of another chart."""
    group = str(doc.get("apiVersion") or "").rpartition("/")[0]
    if group == _FLUX_HELM_GROUP and doc.get("kind") == "HelmRelease":
        return _flux(doc)
    if group == _ARGO_GROUP and doc.get("kind") == "Application":
        return _argo(doc)
    return None


__all__ = ["LLMD_CHART", "wrapped_llmd_values"]
