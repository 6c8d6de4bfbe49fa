"""A Flux HelmRelease whose chart values come from ConfigMaps or Secrets among the files (``spec.valuesFrom``).

Flux's helm-controller (helm.toolkit.fluxcd.io/v2 ``HelmReleaseSpec.ValuesFrom``) reads each listed ConfigMap or
Secret of the release's namespace, takes the key ``valuesKey`` (default ``values.yaml``), merges them in order and
``spec.values`` over them, and renders the chart with the result. P/D settings kept there (``--kv-transfer-config``
in a role's args) are therefore part of the release even though the HelmRelease's own text does not name them: such
a release is reported as not checked (:func:`~pdd_operator.compat.manifests.scan` does it once the values are on
the document), where without them it would give "nothing to check".
"""

from __future__ import annotations

import copy

from pdd_operator.compat.config_refs import ConfigMaps

#: The Flux API group of HelmRelease.
_FLUX_HELM_GROUP = "helm.toolkit.fluxcd.io"


def with_values_from(doc: dict, config_maps: ConfigMaps, secrets: ConfigMaps) -> dict:
    """``doc`` (not changed) with each ``spec.valuesFrom`` entry of a Flux HelmRelease that names a ConfigMap or Secret
    of ``config_maps`` / ``secrets`` (``(namespace, name) -> {key: text}``, in the release's namespace) given the text it
    supplies under ``resolvedValues``; any other document is returned as it is. A reference not in the files, or to a
    key that is not there, stays as written (it may exist in the cluster)."""
    group = str(doc.get("apiVersion") or "").rpartition("/")[0]
    spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
    refs = spec.get("valuesFrom")
    if group != _FLUX_HELM_GROUP or doc.get("kind") != "HelmRelease" or not isinstance(refs, list):
        return doc
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    namespace = str(meta.get("namespace") or "default")
    out = copy.deepcopy(doc)
    for ref in out["spec"]["valuesFrom"]:
        if not isinstance(ref, dict):
            continue
        source = {"ConfigMap": config_maps, "Secret": secrets}.get(str(ref.get("kind")), {})
        data = source.get((namespace, str(ref.get("name"))))
        text = (data or {}).get(str(ref.get("valuesKey") or "values.yaml"))
        if text is not None:
            ref["resolvedValues"] = str(text)
    return out
