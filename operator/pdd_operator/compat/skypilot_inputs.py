"""The engines of single-node SkyPilot tasks, read through their shell scripts (issue 9, set 95).

A SkyPilot task YAML (``sky launch task.yaml``; skypilot docs "YAML configuration") holds its commands as two bash
scripts, ``setup`` then ``run``, which SkyPilot runs on each of the task's ``num_nodes`` nodes with ``envs`` in their
environment, inside the container ``resources.image_id: docker:<image>`` names where it names one. A task on one node
is therefore one host script: ``setup`` (its ``pip install vllm==X`` pins give the release), then ``run`` (the
``vllm serve`` lines), read by :func:`pdd_operator.compat.script_inputs.script_engines` as any shell script is:

* ``envs``: ``export NAME=value`` lines first; a name without a value (``HF_TOKEN:`` or ``""``) is given at launch
  (``--env NAME``), not in these files: left unset, so what reads it is unknown;
* ``resources.image_id: docker:IMAGE``: the scripts run inside that container, written as an interactive
  ``docker run -it --entrypoint=/bin/bash IMAGE`` before them, so that the image's tag names the engines' release as
  for commands typed into such a container (a later ``pip install vllm==X`` in ``setup`` wins, as it replaces the
  image's vLLM);
* ``num_nodes`` above 1: every node runs the same ``run`` with its own ``SKYPILOT_NODE_RANK``, which these files do
  not give per node: not read here (the task stays "not checked", named as a SkyPilot task).
"""

from __future__ import annotations

import shlex

from pdd_operator.compat.manifests import Engine, Unreadable, is_skypilot_task
from pdd_operator.compat.script_inputs import script_engines


def skypilot_script(doc: dict) -> str | None:
    """The host script one node of the SkyPilot task ``doc`` runs (module docstring), or ``None`` for a document that
    is no SkyPilot task or a task on more than one node."""
    if not is_skypilot_task(doc):
        return None
    nodes = doc.get("num_nodes")
    if nodes not in (None, 1, "1"):
        return None
    lines = ["#!/bin/bash"]
    resources = doc.get("resources") if isinstance(doc.get("resources"), dict) else {}
    image = str(resources.get("image_id") or "")
    if image.startswith("docker:"):
        lines.append(f"docker run -it --entrypoint=/bin/bash {image.removeprefix('docker:')}")
    envs = doc.get("envs") if isinstance(doc.get("envs"), dict) else {}
    lines += [f"export {k}={shlex.quote(str(v))}" for k, v in envs.items()
              if v is not None and str(v) != "" and str(k).isidentifier()]
    for key in ("setup", "run"):
        if isinstance(doc.get(key), str):
            lines.append(doc[key].rstrip("\n"))
    return "\n".join(lines) + "\n"


def skypilot_engines(path: str, docs: list[dict]) -> tuple[list[Engine], list[Unreadable]] | None:
    """The P/D engines of the single-node SkyPilot tasks ``docs`` of the file ``path`` and those it cannot read, each
    ``where`` naming ``<path> (SkyPilot task setup+run)`` and the script's format and line; ``None`` when no such task
    starts an engine the script reader finds (the task keeps today's answer)."""
    engines: list[Engine] = []
    unreadable: list[Unreadable] = []
    found = False
    for doc in docs:
        script = skypilot_script(doc)
        got = script_engines(f"{path} (SkyPilot task setup+run)", script) if script else None
        if got is None or not any(got):
            continue
        found = True
        engines += got[0]
        unreadable += got[1]
    return (engines, unreadable) if found else None
