"""A Helm chart folder among the inputs: the objects it deploys exist only once helm renders it.

A chart is a folder holding ``Chart.yaml`` (helm.sh/docs/topics/charts: ``apiVersion`` v1 or v2, ``name``,
``version``). Its ``templates/`` are Go templates, its ``values.yaml``, ``values.schema.json`` and ``charts/``
(subcharts) are read by helm when it renders, and the values an install uses (``-f`` files, ``--set``) are in the
install command, not in the folder. So ``pdd check <folder>`` reports each chart as not checked, naming the command that
renders it (:func:`chart_record`), and does not read the chart's files one by one: a template is no YAML until
rendered, and a values schema (:func:`is_json_schema`) is no manifest. Files of the folder outside the chart (an
``examples/values-*.yaml`` beside it) are still read as inputs of their own.
"""

from __future__ import annotations

from pathlib import Path

import yaml

#: The chart metadata file that makes a folder a Helm chart.
CHART_FILE = "Chart.yaml"


def is_chart_metadata(text: str) -> bool:
    """``text`` is a Helm ``Chart.yaml``: a mapping with ``apiVersion`` v1 or v2, a ``name`` and a ``version`` and no
    Kubernetes ``kind``. Text that is no YAML is not. Pure."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return False
    return (isinstance(doc, dict) and doc.get("apiVersion") in ("v1", "v2") and bool(doc.get("name"))
            and doc.get("version") is not None and "kind" not in doc)


def chart_roots(files: list[Path], read) -> list[Path]:
    """The folders among the parents of ``files`` that are Helm charts (a :data:`CHART_FILE` among ``files`` whose text,
    from ``read(path) -> str | None``, :func:`is_chart_metadata`), outermost only: a subchart under ``charts/`` is part
    of the chart that holds it."""
    charts = sorted((f.parent for f in files if f.name == CHART_FILE and is_chart_metadata(read(str(f)) or "")),
                    key=lambda p: len(p.parts))
    outer: list[Path] = []
    for c in charts:
        if not any(c == o or o in c.parents for o in outer):
            outer.append(c)
    return outer


def in_chart(path: Path, charts: list[Path]) -> bool:
    """``path`` is one of the files of a chart in ``charts`` other than its :data:`CHART_FILE` (which stands for the
    chart among the inputs)."""
    return any(c in path.parents for c in charts) and not (path.name == CHART_FILE and path.parent in charts)


def chart_record(chart_file: str) -> dict[str, str]:
    """The "not checked" record of the chart whose :data:`CHART_FILE` is ``chart_file``: what it deploys is what helm
    renders from its templates with the install's values, which these rules do not run; the reason names the render
    command to pipe into ``pdd check -``."""
    folder = str(Path(chart_file).parent)
    return {"object": f"{folder} (Helm chart)", "reason": (
        "it is a Helm chart folder: the objects it deploys exist only once helm renders its templates with the values "
        "an install uses (its values.yaml, -f files, --set), which are Go templates and install arguments these rules "
        f"do not run; render it and check the output: helm template <release> {folder} [-f <values file>] | "
        "pdd check -")}


def is_json_schema(doc: dict) -> bool:
    """``doc`` is a JSON Schema (a chart's ``values.schema.json``: a ``$schema`` key, or ``type: object`` with
    ``properties`` and no Kubernetes ``kind``), which describes values and deploys nothing. Pure."""
    return "kind" not in doc and ("$schema" in doc or doc.get("type") == "object" and isinstance(doc.get("properties"), dict))
