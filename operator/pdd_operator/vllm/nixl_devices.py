"""Which ``kv_buffer_device`` vLLM's NIXL connector accepts on which platform, per release, and what it registers.

vLLM's NIXL worker checks its platform's ``device_type`` against a table (``_NIXL_SUPPORTED_XPUS`` in 0.10.1-0.11.0,
``_NIXL_SUPPORTED_DEVICE`` from 0.11.0 in nixl_connector.py, nixl/utils.py from 0.20) and raises at startup::

    if self.device_type not in _NIXL_SUPPORTED_DEVICE: raise RuntimeError(f"{device_type} is not supported.")
    elif self.kv_buffer_device not in _NIXL_SUPPORTED_DEVICE[self.device_type]:
        raise RuntimeError(f"{device_type} with {kv_buffer_device} kv_buffer is not supported.")

The tables, read in the sdists (0.10.1.1, 0.10.2, 0.11.0, 0.11.1, 0.12.0, 0.13.0, 0.14.0, 0.16.0, 0.17.0, 0.18.0, 0.19.1,
0.25.0, 0.28.0, 0.31.0, 0.33.0, 0.34.0):

================  ===============  ==========  ===========  ==========
release           cuda (and ROCm)  tpu         xpu          cpu
================  ===============  ==========  ===========  ==========
0.10.1            cuda             cpu         (none)       (none)
0.10.2-0.11.0     cuda             cpu         cpu          (none)
0.11.1-0.16.x     cuda, cpu        cpu         cpu          cpu
0.17.0 on         cuda, cpu        cpu         cpu, xpu     cpu
================  ===============  ==========  ===========  ==========

0.9.x and 0.10.0 have no table (no such check). ROCm's platform has ``device_type`` "cuda" (platforms/rocm.py). An
out-of-tree platform (vllm-gaudi's hpu, vllm-neuron, vllm-ascend) adds its own rows through
``current_platform.get_nixl_supported_devices()``, so such engines are not judged here (:func:`nixl_device_type` gives
``None``).

``kv_buffer_device`` defaults to ``"cuda"`` whatever the platform up to 0.17.x (config/kv_transfer.py), and to the
platform's ``device_type`` from 0.18.0 (``kv_buffer_device_default_factory``).

The NIXL memory type an engine registers its KV under (nixl/base_worker.py, 0.17.0 on; earlier only cuda): ``VRAM``
for a ``cuda`` or ``xpu`` buffer, ``DRAM`` for ``cpu``, unless the platform overrides it (no in-tree one does).
"""

from __future__ import annotations

from collections.abc import Mapping

from pdd_operator.vllm.block_size import gpu_platform
from pdd_operator.vllm.versions import Version, image_repository, is_cpu_image

#: The first release with the device table (and so with the check).
TABLE_SINCE: Version = (0, 10, 1)
#: The first release whose default kv_buffer_device is the platform's device_type (before: "cuda").
PLATFORM_DEFAULT_SINCE: Version = (0, 18, 0)

#: (first release, {device_type: accepted kv_buffer_device values}), newest last (module docstring).
_TABLES: tuple[tuple[Version, dict[str, tuple[str, ...]]], ...] = (
    ((0, 10, 1), {"cuda": ("cuda",), "tpu": ("cpu",)}),
    ((0, 10, 2), {"cuda": ("cuda",), "tpu": ("cpu",), "xpu": ("cpu",)}),
    ((0, 11, 1), {"cuda": ("cuda", "cpu"), "tpu": ("cpu",), "xpu": ("cpu",), "cpu": ("cpu",)}),
    ((0, 17, 0), {"cuda": ("cuda", "cpu"), "tpu": ("cpu",), "xpu": ("cpu", "xpu"), "cpu": ("cpu",)}),
)

#: The releases an unknown version is judged over: each table's first release and each default's.
JUDGED_RELEASES: tuple[Version, ...] = tuple(sorted({v for v, _ in _TABLES} | {PLATFORM_DEFAULT_SINCE}))

#: Device-plugin resource prefixes of Intel's GPUs (i915 and xe drivers) and Google's TPUs.
_XPU_RESOURCES = ("gpu.intel.com/",)
_TPU_RESOURCES = ("google.com/tpu",)
#: Device-plugin resources of out-of-tree platforms that bring their own NIXL rows (Gaudi, Trainium, Ascend).
_PLUGIN_RESOURCES = ("habana.ai/", "aws.amazon.com/neuron", "huawei.com/ascend")
#: Device-plugin resources of the GPUs vLLM's CUDA and ROCm platforms (device_type "cuda") run.
_GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
#: ``VLLM_TARGET_DEVICE`` values (vLLM's build and platform targets) -> device_type.
_TARGET_DEVICES = {"cuda": "cuda", "rocm": "cuda", "xpu": "xpu", "tpu": "tpu", "cpu": "cpu"}
#: The device-selection variable of vLLM's XPU platform (``XPUPlatform.device_control_env_var``: Level Zero's
#: ``ZE_AFFINITY_MASK``, vllm/platforms/xpu.py 0.22.0 line 41, 0.34.0 line 112), as ``CUDA_VISIBLE_DEVICES`` is the
#: CUDA platform's: an engine whose environment sets it runs on Intel GPUs (Dynamo's and vLLM's XPU launchers set it
#: per engine: ai-dynamo/dynamo examples/backends/vllm/launch/disagg_router_xpu_gdr.sh at 438a6dd).
_XPU_DEVICE_VARIABLE = "ZE_AFFINITY_MASK"
#: Image repositories of vLLM's TPU build.
_TPU_IMAGE_REPOSITORIES = {"vllm/vllm-tpu"}


def nixl_device_type(image: str, resources: Mapping[str, str], env: Mapping[str, str] | None = None) -> str | None:
    """vLLM's ``current_platform.device_type`` for an engine: ``"cuda"`` (NVIDIA or AMD GPUs), ``"xpu"``, ``"tpu"``
    or ``"cpu"``; ``None`` when nothing tells, when the signs disagree, or for an out-of-tree platform plugin (its own
    table rows).

    The signs: the device-plugin resource the container asks for (a GPU's, Intel's gpu.intel.com/*, google.com/tpu),
    vLLM's CPU or TPU image, an image named for XPU, ``VLLM_TARGET_DEVICE`` in ``env``, and the XPU platform's device
    variable ``ZE_AFFINITY_MASK`` there (:data:`_XPU_DEVICE_VARIABLE`). A CUDA or ROCm image alone
    is no sign: such an image also runs an XPU through a DRA claim with ``VLLM_TARGET_DEVICE=xpu`` (Dynamo's
    heterogeneous examples).

    image: the container image; resources: its resource limits and requests (names to quantities); env: its literal
    environment.
    """
    keys = [str(k).lower() for k, v in resources.items() if v not in (None, "", "0", 0)]
    if any(k.startswith(_PLUGIN_RESOURCES) for k in keys):
        return None
    name = image.split("@", 1)[0].lower()
    found: set[str] = set()
    if is_cpu_image(image):
        found.add("cpu")
    if any(k.startswith(_XPU_RESOURCES) for k in keys) or "xpu" in name.rsplit("/", 1)[-1]:
        found.add("xpu")
    if any(k.startswith(_TPU_RESOURCES) for k in keys) or image_repository(image) in _TPU_IMAGE_REPOSITORIES:
        found.add("tpu")
    if any(k in _GPU_RESOURCES for k in keys):
        found.add("cuda" if gpu_platform(image, resources) in ("cuda", "rocm") else "unknown")
    if _XPU_DEVICE_VARIABLE in (env or {}):
        found.add("xpu")
    target = str((env or {}).get("VLLM_TARGET_DEVICE", "")).strip().lower()
    if target:
        found.add(_TARGET_DEVICES.get(target, "unknown"))
    return found.pop() if len(found) == 1 and "unknown" not in found else None


def accepted_buffer_devices(version: Version, device_type: str) -> tuple[str, ...] | None:
    """The ``kv_buffer_device`` values vLLM ``version``'s NIXL worker accepts on ``device_type`` (``()`` where the
    device type has no row: "<device> is not supported"); ``None`` before :data:`TABLE_SINCE` (no check)."""
    table = None
    for since, rows in _TABLES:
        if version >= since:
            table = rows
    return None if table is None else table.get(device_type, ())


def effective_buffer_device(version: Version, device_type: str, written: str | None) -> str:
    """The ``kv_buffer_device`` an engine runs with: ``written`` where set, else vLLM ``version``'s default
    (``"cuda"`` before :data:`PLATFORM_DEFAULT_SINCE`, the platform's ``device_type`` from it)."""
    if written:
        return written
    return device_type if version >= PLATFORM_DEFAULT_SINCE else "cuda"


def buffer_refusal(version: Version, device_type: str, written: str | None) -> str | None:
    """vLLM ``version``'s startup error for an engine on ``device_type`` with ``kv_buffer_device`` ``written``
    (``None``: unset), as vLLM words it; ``None`` where the NIXL worker accepts it."""
    accepted = accepted_buffer_devices(version, device_type)
    if accepted is None:
        return None
    if not accepted:
        return f"{device_type} is not supported."
    buffer = effective_buffer_device(version, device_type, written)
    return None if buffer in accepted else f"{device_type} with {buffer} kv_buffer is not supported."


def nixl_memory_type(device_type: str | None, written: str | None) -> str | None:
    """``VRAM`` or ``DRAM``: the NIXL memory type an engine on ``device_type`` with ``kv_buffer_device`` ``written``
    registers its KV under (a ``cuda`` or ``xpu`` buffer, or the default on a GPU or XPU: VRAM; ``cpu``, or the CPU
    platform: DRAM); ``None`` where the platform is not known."""
    if written == "cpu" or device_type == "cpu":
        return "DRAM"
    if device_type in ("cuda", "xpu") and written in (None, "cuda", "xpu"):
        return "VRAM"
    return None
