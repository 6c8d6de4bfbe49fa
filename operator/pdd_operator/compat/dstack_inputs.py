"""The engines of dstack run configurations (``*.dstack.yml``), read as the checker's engines (issue 9, set 95).

dstack's documentation publishes its P/D examples as service configurations (dstackai/dstack
mkdocs/docs/examples/inference/vllm.md and dynamo.md, mkdocs/docs/concepts/services.md): ``type: service`` with
``replicas``, a list of replica groups (a router group, a prefill group, a decode group), each with the shell
``commands`` its replicas run, its ``image`` and its ``resources``. Each replica group becomes one container of a
synthetic Pod, in the shape :func:`pdd_operator.compat.manifests.scan` reads, so that the pairing and every rule read
dstack engines as they read Kubernetes ones, and findings name ``<file> (dstack) replicas[<i>].commands``.

How a group maps (dstack ``src/dstack/_internal/core/models/configurations.py`` at 511c318: ``ReplicaGroup``,
``ServiceConfiguration``; the runner executes a job's ``commands`` one after the other in one shell):

* ``commands`` -> the container's ``command`` ``["/bin/sh", "-c", <the commands, one per line>]``, which the
  script reader (:mod:`pdd_operator.vllm.script`) reads for ``vllm serve`` / ``python -m <engine module>`` lines,
  their ``export``-ed variables included; a configuration without ``replicas`` groups is one group of its
  top-level ``commands``.
* ``image``: the group's, else the configuration's (``ReplicaGroup.image``, "mutually exclusive with group-level
  docker and python"); a group with ``python``/``docker``/``nvcc`` runs dstack's own base image, which names no
  vLLM release: no image is written (the version is not known).
* ``env`` (configuration level; list of ``NAME=value`` or bare ``NAME``, or a map): ``NAME=value`` -> ``env``; a bare
  ``NAME`` (or an empty map value) takes its value from the environment of the user running ``dstack apply``, not in
  these files: written as a reference to a ConfigMap not in the files, so the rules that need it say "not checked".
* ``resources.gpu``: ``H200`` or ``48GB`` is one GPU, ``H200:8`` / ``MI300X:8`` / ``2`` that many, a map's
  ``count``; a range of counts (``1..2``) is not known -> ``nvidia.com/gpu`` with the count when known
  (``amd.com/gpu`` for an AMD vendor or Instinct name).
* ``privileged`` (group or configuration) -> ``securityContext.privileged``.
* Hosts: each replica of a service is a job of its own, placed on a whole instance with host networking or on
  instance blocks with bridge networking (dstack ``server/background/pipeline_tasks/jobs_submitted.py``
  ``_prepare_job_runtime_data``: host networking only for a job that takes every block of its instance), so a
  replica never shares a network namespace with a replica of another group: each group is its own Pod on a node of
  its own (``nodeName: dstack-<config>-<i>``), without ``hostNetwork`` (two groups are apart either way).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from pdd_operator.compat.manifests import Engine, Unreadable, is_dstack_configuration, scan
from pdd_operator.compat.rules.base import GPU_COUNT_FIELD
from pdd_operator.vllm.block_size import CUDA_RESOURCES, ROCM_RESOURCES

#: The kind of workload (:attr:`~pdd_operator.compat.pair.RoleConfig.workload_kind`) of an engine read from a dstack
#: replica group.
DSTACK_KIND = "dstack"

#: The ConfigMap whose keys stand for the variables a configuration takes from the environment of ``dstack apply``.
_OUTSIDE = "dstack-env-not-in-files"

#: Manifest wording (after :data:`~pdd_operator.compat.rules.base.MANIFEST_TERMS`) -> the words of a dstack
#: configuration, longest first: its engines are replica groups, their flags and per-replica environment in the
#: group's ``commands`` (the configuration's ``env`` is one value for every group), their GPUs ``resources.gpu``.
DSTACK_TERMS: tuple[tuple[str, str], ...] = (
    ("Set it from the downward API: valueFrom.fieldRef.fieldPath status.hostIP",
     "Export it in each vLLM replica group's commands as the address of the instance the replica runs on (export "
     "VLLM_NIXL_SIDE_CHANNEL_HOST=$(hostname -I | awk '{print $1}'))"),
    ("Set it from the downward API: valueFrom.fieldRef.fieldPath status.podIP (status.hostIP with hostNetwork)",
     "Export it in each vLLM replica group's commands as the address of the instance the replica runs on (export "
     "VLLM_NIXL_SIDE_CHANNEL_HOST=$(hostname -I | awk '{print $1}')): dstack runs every replica as a job of its own, "
     "never in the network namespace of another group's replica"),
    ("an image tag that names the vLLM release (vllm/vllm-openai:v0.20.2) on both containers",
     "an image tag that names the vLLM release (vllm/vllm-openai:v0.20.2) on both replica groups"),
    (GPU_COUNT_FIELD, "replica group's resources.gpu (NAME:COUNT)"),
    ("on the prefill and decode containers", "in the prefill and decode replica groups' commands"),
    ("on the prefill container", "in the prefill replica group's commands"),
    ("on the decode container", "in the decode replica group's commands"),
    ("in each container's env", "in each replica group's commands (export NAME=value) or the configuration's env"),
    ("on both containers", "in both replica groups"),
    ("container's arguments", "replica group's commands"),
    ("container's image", "replica group's image"),
    ("but its pod requests", "but its replica group asks for"),
    ("are engines of one container", "are engines the commands of one replica start on one instance"),
    ("start in one container", "start on one instance"),
)


def in_dstack_terms(text: str) -> str:
    """``text`` (a fix or message in a hand-written manifest's terms) in the terms of a dstack configuration
    (:data:`DSTACK_TERMS`)."""
    for manifest, dstack in DSTACK_TERMS:
        text = text.replace(manifest, dstack)
    return text


def dstack_fields(fields: list[str], containers: tuple[tuple[str, str], ...]) -> list[str]:
    """``fields`` (paths of a manifest, :func:`~pdd_operator.compat.rules.base.manifest_fields`) for engines of dstack
    replica groups, whose "container" is ``<file> (dstack) replicas[<i>]``: the container's command, flags and
    environment as the group's ``commands`` (``env[NAME]`` as ``commands (export NAME)``, ``env`` as ``commands
    (export)``: a value per replica is set there), ``resources`` as ``resources.gpu``; the rest as written
    (``.image``). Order kept, duplicates dropped."""
    out: list[str] = []
    for field in fields:
        where = next((c for c, _ in containers if field.startswith(c + ".")), None)
        rest = field[len(where) + 1:] if where is not None else ""
        name = re.fullmatch(r"env\[(.+)\]", rest)
        text = (f"{where}.commands (export {name.group(1)})" if name and where else
                f"{where}.commands (export)" if where and rest == "env" else
                f"{where}.commands" if where and rest in ("args", "command", "commands") else
                f"{where}.resources.gpu" if where and rest.startswith("resources") else field)
        if text not in out:
            out.append(text)
    return out


#: An AMD GPU in a ``resources.gpu`` spec: the vendor (``amd:MI300X:8``, ``vendor: amd``) or an Instinct name (dstack
#: resources ``GPUSpec``: vendor, name, memory, count).
_AMD = re.compile(r"\bamd\b|\bMI\d{3}", re.I)


#: A GPU count after the last ``:`` of a ``resources.gpu`` string (``H200:8``, ``24GB..80GB:2``), or the whole string.
_COUNT = re.compile(r"^\d+$")


def _gpus(resources: Any) -> int | None:
    """The number of GPUs a ``resources`` block asks for (module docstring), or ``None`` (none, or not known)."""
    gpu = resources.get("gpu") if isinstance(resources, dict) else None
    if gpu is None or gpu is False:
        return None
    if isinstance(gpu, int):
        return gpu or None
    if isinstance(gpu, dict):
        count = gpu.get("count", 1)
        return count if isinstance(count, int) else (int(count) if _COUNT.match(str(count)) else None)
    last = str(gpu).rsplit(":", 1)[-1].strip()
    if _COUNT.match(last):
        return int(last) or None
    if re.fullmatch(r"\d*\.\.\d*", last):  # a range of counts (``1..2``, ``H100:2..``): not known
        return None
    return 1  # a name or a memory size (``H200``, ``24GB..80GB``): one GPU


def _env(doc: dict) -> list[dict]:
    """The configuration's ``env`` as container env entries (module docstring)."""
    raw = doc.get("env")
    pairs: list[tuple[str, str | None]] = []
    if isinstance(raw, dict):
        pairs = [(str(k), None if v is None or v == "" else str(v)) for k, v in raw.items()]
    elif isinstance(raw, list):
        for item in raw:
            name, eq, value = str(item).partition("=")
            pairs.append((name.strip(), value if eq else None))
    return [{"name": n, "value": v} if v is not None else
            {"name": n, "valueFrom": {"configMapKeyRef": {"name": _OUTSIDE, "key": n}}} for n, v in pairs if n]


def _groups(doc: dict) -> list[dict]:
    """The replica groups (a configuration without a list of them is one group of its own ``commands``)."""
    groups = doc.get("replicas")
    if isinstance(groups, list):
        return [g if isinstance(g, dict) else {} for g in groups]
    return [{"commands": doc.get("commands"), "resources": doc.get("resources")}]


def _pod(doc: dict, index: int, group: dict, owner: str) -> dict:
    """The synthetic Pod of replica group ``index`` (module docstring)."""
    commands = group.get("commands") if isinstance(group.get("commands"), list) else []
    container: dict[str, Any] = {"name": str(group.get("name") or index),
                                 "command": ["/bin/sh", "-c", "\n".join(str(c).rstrip("\n") for c in commands)]}
    image = group.get("image") or (None if any(group.get(k) for k in ("python", "docker", "nvcc")) else doc.get("image"))
    if image:
        container["image"] = str(image)
    env = _env(doc)
    if env:
        container["env"] = env
    resources = group.get("resources") if "resources" in group else doc.get("resources")
    gpus = _gpus(resources)
    if gpus:
        vendor = ROCM_RESOURCES[0] if _AMD.search(repr(resources)) else CUDA_RESOURCES[0]
        container["resources"] = {"limits": {vendor: gpus}}
    if group.get("privileged", doc.get("privileged")) is True:
        container["securityContext"] = {"privileged": True}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{owner}-{container['name']}", "labels": {"dstack.ai/run": owner},
                         "ownerReferences": [{"kind": "dstack", "name": owner}]},
            "spec": {"containers": [container], "nodeName": f"dstack-{owner}-{index}"}}


def dstack_engines(path: str, docs: list[dict]) -> tuple[list[Engine], list[Unreadable]] | None:
    """The P/D engines of the dstack configurations ``docs`` of the file ``path`` and those it cannot read (another
    engine's P/D workers, such as SGLang's, are "not checked" as in a pod), each ``where`` naming ``<path> (dstack)
    replicas[<i>].commands``; ``None`` when no replica group of them holds a P/D engine (the documents keep today's
    answer)."""
    engines: list[Engine] = []
    unreadable: list[Unreadable] = []
    for doc in docs:
        if not is_dstack_configuration(doc):
            continue
        owner = str(doc.get("name") or path)
        for index, group in enumerate(_groups(doc)):
            container = f"{path} (dstack)" + (f" replicas[{index}]" if isinstance(doc.get("replicas"), list) else "")
            got, cannot = scan(_pod(doc, index, group, owner))
            engines += [replace(e, where=_where(e.where, f"{container}.commands"), container=container,
                                flags_key="commands", config=replace(e.config, workload_kind=DSTACK_KIND))
                        for e in got]
            unreadable += [replace(u, where=_where(u.where, f"{container}.commands")) for u in cannot]
    if not (engines or unreadable):
        return None
    return engines, unreadable


def _where(old: str, where: str) -> str:
    """``old`` (``Pod/<name> spec.containers[0](<name>) line 7``) as ``where line 7``."""
    match = re.search(r" line \d+(?: #\d+)?$", old)
    return where + (match.group(0) if match else "")
