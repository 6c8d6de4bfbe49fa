"""The resources a Dynamo service gives its main container: ``resources`` of a DynamoGraphDeployment service.

A v1alpha1 service (``spec.services.<name>``) writes its resources in Dynamo's own shape, not Kubernetes'
(ai-dynamo/dynamo deploy/cloud/operator/api/dynamo/common/common.go ``Resources``, ``ResourceItem``)::

    resources: {requests: {cpu, memory, gpu, gpuType, custom: {name: qty}}, limits: {...}, claims: [...]}

and the operator turns it into the main container's ``resources`` (``controller_common.GetResourcesConfig``):
``limits.gpu`` becomes the ``gpuType`` resource, ``nvidia.com/gpu`` when no type is given (``getGPUResourceName``),
``custom`` entries keep their names, ``cpu``/``memory`` theirs. ``gpu`` counts GPUs per pod (a multinode service has
``gpu`` on each of its nodes). ``requests.gpu`` is read by the v1alpha1 -> v1beta1 conversion
(shared_spec_conversion.go ``defaultGPUResourceName``, "Resources.{Requests,Limits}.GPU") but not by the
``GetResourcesConfig`` of resource.go at commit 0284ad86 (requests: cpu, memory, custom only), so a GPU count
written only there is given an unknown value (:data:`UNKNOWN_PREFIX`). v1beta1 components have no such field: their
``podTemplate`` containers carry Kubernetes resources, read as written.

Which side wins where the main container writes the same resource differs between Dynamo's code paths (graph.go
copies the service's over the container's with ``maps.Copy``; another generator replaces the container's resources
with the service's; its Grove path merges the main container over the service's with ``mergo.WithOverride``), so a
resource both write with different values is given an unknown value too: the GPU count is then not read
(``RoleConfig.gpus`` is ``None``) and nothing is judged on it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

#: Dynamo's GPU resource when a service names no ``gpuType`` (deploy/cloud/operator/internal/consts
#: ``KubeResourceGPUNvidia``).
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"

#: The start of a resource value that Dynamo's releases set differently (the service and the main container
#: disagree): not a quantity, so no count is read from it.
UNKNOWN_PREFIX = "unknown:"


def _item(item: object) -> dict[str, str]:
    """One ``ResourceItem`` (``requests`` or ``limits``) as Kubernetes resource names -> quantities."""
    if not isinstance(item, Mapping):
        return {}
    out: dict[str, str] = {}
    for key in ("cpu", "memory"):
        if item.get(key) not in (None, ""):
            out[key] = str(item[key])
    if item.get("gpu") not in (None, ""):
        out[str(item.get("gpuType") or DEFAULT_GPU_RESOURCE)] = str(item["gpu"])
    custom = item.get("custom")
    if isinstance(custom, Mapping):
        out.update({str(k): str(v) for k, v in custom.items() if v not in (None, "")})
    return out


def service_resources(resources: object) -> dict[str, dict[str, str]]:
    """A Dynamo service's ``resources`` as a container's ``{"requests": {...}, "limits": {...}}`` (Kubernetes
    names; empty parts left out); ``{}`` when it is not a mapping. A ``requests.gpu`` that ``limits.gpu`` does not
    repeat is given an unknown value (module docstring)."""
    if not isinstance(resources, Mapping):
        return {}
    requests, limits = _item(resources.get("requests")), _item(resources.get("limits"))
    request_gpu = resources.get("requests", {}).get("gpu") if isinstance(resources.get("requests"), Mapping) else None
    if request_gpu not in (None, ""):
        name = str(resources["requests"].get("gpuType") or DEFAULT_GPU_RESOURCE)
        if limits.get(name) != str(request_gpu):
            requests[name] = f"{UNKNOWN_PREFIX} requests.gpu {request_gpu}, which some Dynamo releases do not copy"
    return {part: items for part, items in (("requests", requests), ("limits", limits)) if items}


def multinode_count(service: Mapping) -> int:
    """Pods one instance of a Dynamo service spans: ``multinode.nodeCount`` of a v1alpha1 service (1 when unset or
    not a literal integer)."""
    multinode = service.get("multinode")
    count = multinode.get("nodeCount") if isinstance(multinode, Mapping) else None
    return count if isinstance(count, int) and not isinstance(count, bool) and count > 1 else 1


def with_service_resources(main: dict, service: Mapping[str, Mapping[str, str]], nodes: int = 1) -> dict:
    """``main`` (a main container) with the service's resources (:func:`service_resources`) merged in: a resource
    the container does not write is added; one it writes with the same value stays; one it writes with another
    value becomes ``unknown: <container> in mainContainer, <service> in the service's resources``.

    ``nodes``: :func:`multinode_count`. Over more than one node Dynamo's operator rewrites the engine's launch
    (backend_vllm.go ``updateVLLMMultinodeArgs``: a Ray cluster, or vLLM's multi-node ``mp`` flags, or one DP rank
    group per node) so the ranks spread over every pod's GPUs: the per-pod GPU count is then made unknown, as no
    rule here sees the rewritten launch."""
    if not service and nodes == 1:
        return main
    own = main.get("resources") if isinstance(main.get("resources"), Mapping) else {}
    merged: dict[str, dict] = {k: dict(v) for k, v in own.items() if isinstance(v, Mapping)}
    for part, items in service.items():
        target = merged.setdefault(part, {})
        for name, value in items.items():
            if name not in target or str(target[name]) == value:
                target[name] = value
            else:
                target[name] = f"{UNKNOWN_PREFIX} {target[name]} in mainContainer, {value} in the service's resources"
    if nodes > 1:
        for items in merged.values():
            for name, value in items.items():
                if name.endswith("/gpu") and not str(value).startswith(UNKNOWN_PREFIX):
                    items[name] = (f"{UNKNOWN_PREFIX} {value} per pod of a {nodes}-node Dynamo multinode service, "
                                   "whose launch Dynamo's operator rewrites")
    return {**main, "resources": {**own, **merged}}


#: The parallel sizes as Dynamo's operator reads them from a worker's ``args``: the exact ``--flag VALUE`` spelling
#: (backend_vllm.go ``getFlagValue`` over ``getExpandedArgs``, the args split on blanks; 1 when absent).
_PARALLEL_FLAGS = ("--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size")

#: Other spellings of those sizes (``-tp 2``, ``--tensor-parallel-size=2``, ``--tensor_parallel_size 2``), which
#: vLLM's parser accepts: operator releases with ``normalizeVLLMFlags`` (deploy/operator backend_vllm.go) read them
#: as the exact spelling, earlier ones (``getFlagValue`` on the raw words) as absent, i.e. 1.
_SHORT = {"-tp": "--tensor-parallel-size", "-pp": "--pipeline-parallel-size", "-dp": "--data-parallel-size"}


def _normalized(words: list[str]) -> list[str]:
    """``words`` with the other spellings of :data:`_PARALLEL_FLAGS` written as ``--flag VALUE`` (what
    ``normalizeVLLMFlags`` does for these three)."""
    out: list[str] = []
    for word in words:
        flag, eq, value = word.partition("=")
        flag = _SHORT.get(flag, flag.replace("_", "-") if flag.replace("_", "-") in _PARALLEL_FLAGS else flag)
        out += [flag, value] if eq and flag in _PARALLEL_FLAGS else [flag] if flag in _PARALLEL_FLAGS else [word]
    return out


@dataclass(frozen=True)
class MultinodeLaunch:
    """How Dynamo's operator launches a vLLM worker service over ``nodes`` pods (``multinode.nodeCount`` > 1).

    Read in ai-dynamo/dynamo deploy/cloud/operator/internal/dynamo/backend_vllm.go (``updateVLLMMultinodeArgs``;
    the same logic in deploy/operator after the move): with the world size TP x PP and the per-pod GPU count
    ``resources.limits.gpu``, a world larger than one pod's GPUs is launched over every pod (a Ray cluster, or
    vLLM's ``--nnodes`` multi-node ``mp`` launch in later releases); else a world x DP larger than one pod's GPUs
    gets data-parallel flags (``injectDataParallelLaunchFlags``: ``--data-parallel-size-local`` = GPUs // world
    on every pod, ``--data-parallel-start-rank`` = that x the node rank, the leader's address); else nothing is
    rewritten and every pod runs the command as written. Earlier releases always built a Ray cluster over the pods.
    Whichever launch a release uses, TP x PP x DP ranks need that many GPUs among the group's pods.

    Attributes:
        nodes: pods of the service's group.
        gpus: GPUs per pod (``resources.limits.gpu``), ``None`` when not a literal integer.
        spread: the ranks are spread over the group's pods (``False``: each pod runs the command as written).
        group_gpus: ``nodes`` x ``gpus`` where the ranks are spread, else ``None``.
        note: how they are spread, or why the launch is not known (then ``gpus``/``group_gpus`` are ``None``).
        caveat: where the sizes are spelled otherwise than ``--tensor-parallel-size N`` (``_SHORT``, ``=``, ``_``):
            what operator releases that read only that spelling do instead (the launch above is the later
            releases'), else ``""``.
        engine_spread: the TP x PP ranks of one engine span the pods (``updateVLLMMultinodeArgs``'s
            ``needsTensorParallelMultinodeLaunch`` branch), not DP ranks started in each pod. The operator launches
            them over a Ray cluster (``injectRayDistributedLaunchFlags``: the leader runs ``ray start --head &&``
            the command with ``--distributed-executor-backend ray``, the other pods only ``ray start --address
            ... --block``), or, where its ``VLLMMultiprocessing`` gate or the executor annotation says so, with
            vLLM's ``--distributed-executor-backend mp --nnodes N --node-rank`` (``injectMpDistributedLaunchFlags``),
            flags vLLM has from 0.11.1 only (``vllm/engine/arg_utils.py``: no ``nnodes`` in 0.10.1.1 and 0.11.0,
            present in 0.11.1 and 0.12.0). Before 0.11.1 such an engine's ranks are therefore Ray workers.
    """

    nodes: int
    gpus: int | None
    spread: bool
    group_gpus: int | None
    note: str
    caveat: str = ""
    engine_spread: bool = False


def multinode_launch(main: Mapping, service: Mapping, nodes: int) -> MultinodeLaunch:
    """How Dynamo's operator launches ``main`` (the service's main container as written) over ``nodes`` pods of
    the v1alpha1 service ``service`` (see :class:`MultinodeLaunch`)."""
    limits = service.get("resources", {}).get("limits") if isinstance(service.get("resources"), Mapping) else None
    raw = limits.get("gpu") if isinstance(limits, Mapping) else None
    gpus = int(str(raw)) if raw is not None and str(raw).isdigit() else None
    written = [w for a in main.get("args") or [] for w in str(a).split()]  # getExpandedArgs: the args only
    args = _normalized(written)
    where = f"a {nodes}-node Dynamo multinode service"
    if gpus is None or gpus == 0:
        return MultinodeLaunch(nodes, None, False, None, (
            f"{where} without a literal resources.limits.gpu: Dynamo's operator rewrites its launch from that count "
            "(backend_vllm.go updateVLLMMultinodeArgs), so how its ranks are spread over the pods is not known"))
    sizes = []
    for flag in _PARALLEL_FLAGS:
        values = [args[i + 1] for i, w in enumerate(args[:-1]) if w == flag]
        literal = [v for v in values if re.fullmatch(r"\d+", v)]
        if values and not literal:
            return MultinodeLaunch(nodes, None, False, None, (
                f"{where} whose {flag} is {values[0]!r}, not a literal integer: Dynamo's operator sizes the launch "
                "from it, so how the ranks are spread over the pods is not known"))
        sizes.append(int(literal[0]) if literal else 1)
    odd = [w for w in written if w not in args]
    caveat = (f"{where} spells a parallel size {odd[0]!r}: Dynamo operator releases before normalizeVLLMFlags "
              "(backend_vllm.go getFlagValue reads the exact '--data-parallel-size N' words) take it as absent (1) "
              "and do not spread the ranks as said, so with such an operator every pod starts the whole engine on "
              "its own GPUs; write '--tensor-parallel-size N' / '--data-parallel-size N' to have every release read "
              "it") if odd else ""
    tp, pp, dp = sizes
    world = tp * pp
    if world > gpus:
        how = (f"TP {tp} x PP {pp} = {world} ranks per DP rank exceed one pod's {gpus} GPUs, so Dynamo's operator "
               f"launches them over the {nodes} pods (a Ray cluster, or vLLM's --nnodes launch)")
    elif world * dp > gpus:
        how = (f"Dynamo's operator gives each of the {nodes} pods --data-parallel-size-local {gpus // world} "
               f"(its {gpus} GPUs // TP {tp} x PP {pp}) and its own --data-parallel-start-rank "
               "(backend_vllm.go injectDataParallelLaunchFlags)")
    else:
        return MultinodeLaunch(nodes, gpus, False, None, "", caveat)
    return MultinodeLaunch(nodes, gpus, True, nodes * gpus, how, caveat, engine_spread=world > gpus)


def component_multinode(main: Mapping, nodes: int) -> tuple[dict, MultinodeLaunch]:
    """The main container of a Dynamo ``nvidia.com/v1beta1`` component spanning ``nodes`` pods
    (``spec.components[].multinode.nodeCount`` > 1), as the rules must see it, and how Dynamo's operator launches
    it: (container, :class:`MultinodeLaunch`).

    A v1beta1 component keeps its resources on the pod template's ``main`` container (``nvidia.com/gpu`` under
    ``resources.limits``), not in a service-level ``resources.limits.gpu``; Dynamo's operator launches its worker
    over the pods exactly as a v1alpha1 multinode service's (backend_vllm.go ``updateVLLMMultinodeArgs``, reading
    the per-pod GPU limit and the args), so :func:`multinode_launch` applies to that limit. Where the ranks are
    spread over the pods, the container's per-pod GPU count is made unknown (:func:`with_service_resources`) and
    the group's GPUs are the plan's ``group_gpus``."""
    resources = main.get("resources") if isinstance(main.get("resources"), Mapping) else {}
    limits = resources.get("limits") if isinstance(resources.get("limits"), Mapping) else {}
    gpu = next((v for k, v in limits.items() if str(k).endswith("/gpu")), None)
    plan = multinode_launch(main, {"resources": {"limits": {"gpu": gpu}}} if gpu is not None else {}, nodes)
    spread = plan.spread or plan.gpus is None
    return with_service_resources(dict(main), {}, nodes if spread else 1), plan
