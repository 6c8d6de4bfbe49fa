"""Known-bad versions: vLLM and NIXL releases with a known prefill/decode fault, as data.

Each :class:`KnownBad` row names the component and versions, what breaks and where, the public source
and a severity. ``mixed_hardware`` rows were seen only when prefill and decode run on different hardware
(images or accelerator resources differ); elsewhere the checker reports them as a warning. The
``nixl-version-known-bad`` rule reads the NIXL version each engine will load from (in order) a
``pip install nixl==X`` in its command, the pins of this project's engine image (``pins.json``), or the
exact NIXL pin of the vLLM release in its image tag (:data:`~pdd_operator.vllm.versions.NIXL_REQUIREMENTS`; for
vLLM's XPU image the NIXL its Dockerfile.xpu builds, :data:`~pdd_operator.vllm.versions.XPU_IMAGE_NIXL`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pdd_operator.api.spec import Architecture
from pdd_operator.pins import pins
from pdd_operator.vllm.architectures import ModelTraits
from pdd_operator.vllm.async_scheduling import CONSUMER_DEFERRED_FREE_SINCE, HYBRID_NIXL_SINCE
from pdd_operator.vllm.rocm_nixl import is_rocm_vllm_image, rocm_image_nixl_version
from pdd_operator.vllm.versions import (
    XPU_IMAGE_REPOSITORY,
    Version,
    fmt,
    image_repository,
    nixl_range,
    parse_version,
    wrapped_nixl_version,
    xpu_image_nixl,
)


@dataclass(frozen=True)
class KnownBad:
    """One known-bad version range.

    Attributes:
        component: ``nixl`` or ``vllm``.
        since: first bad version (inclusive). until: first good version (exclusive).
        what: what breaks, as users see it.
        where: the code path that breaks.
        source: public report or fix.
        severity: ``error`` where the fault is certain for the setup, ``warning`` where it was seen in a narrower one.
        mixed_hardware: the fault was seen only with prefill and decode on different hardware; an error there,
            a warning otherwise.
        fixed_in: the release that fixes it (for the fix text).
        with_vllm: for a NIXL row, the vLLM releases ``(since, until)`` it breaks under (``None``: any); a row
            whose vLLM version is unknown is then not reported.
        ucx_only: the fault needs every NIXL backend to be UCX (vLLM's default).
        with_connector: the fault needs this connector stacked with NIXL in a wrapper (e.g. ``OffloadingConnector``
            inside ``MultiConnector``); ``None``: any connector setup.
        pull_only: the fault is in the pull-mode ``NixlConnector`` itself (top-level or wrapped), so engines that
            move KV another way (another connector, ``NixlPushConnector``) do not have it.
        hybrid_ssm_only: the fault needs a hybrid SSM (Mamba / GDN) model.
        async_scheduling_only: the fault needs the engine to schedule asynchronously
            (:func:`pdd_operator.vllm.async_scheduling.async_scheduling`).
        consumer_only: the fault is on the KV consumer (the decode).
        workaround: a setting that avoids the fault on the bad releases, for the fix text (``""``: none).
        uniform_type_only: the fault needs vLLM to group the model's KV cache as ``UniformTypeKVCacheSpecs`` (every
            layer one attention type and block size, pages of different sizes: v1/core/kv_cache_utils.py
            get_kv_cache_groups, 0.19.1 lines 1243-1252, after is_kv_cache_spec_uniform's merge fails). Certain (the
            row's severity) for a sparse MLA (DSA) model without sliding window, whose indexer cache layers
            (DeepseekV32IndexerCache.get_kv_cache_spec: an MLAAttentionSpec of the indexer's head size and the same
            block size, models/deepseek_v2.py 0.19.1 lines 584-605) sit beside its MLA layers
            (:func:`uniform_type_model`); a warning for any other model.
    """

    component: Literal["nixl", "vllm"]
    since: Version
    until: Version
    what: str
    where: str
    source: str
    severity: Literal["error", "warning"]
    fixed_in: str
    mixed_hardware: bool = False
    with_vllm: tuple[Version, Version] | None = None
    ucx_only: bool = False
    with_connector: str | None = None
    pull_only: bool = False
    hybrid_ssm_only: bool = False
    async_scheduling_only: bool = False
    consumer_only: bool = False
    workaround: str = ""
    uniform_type_only: bool = False

    def stacked_with(self, wrapper: str | None) -> bool:
        """True when the row needs no stacked connector, or ``wrapper`` (the role's wrapper description, e.g.
        ``MultiConnector[NixlConnector, OffloadingConnector]``) names the one it needs."""
        if self.with_connector is None:
            return True
        inner = (wrapper or "").partition("[")[2].rstrip("]")
        return self.with_connector in {c.strip() for c in inner.split(",")}

    def covers(self, version: Version | None, vllm: Version | None = None, backends: tuple[str, ...] = ("UCX",)) -> bool:
        """True when ``version`` (of :attr:`component`) is in the range and, for a NIXL row, the engine's vLLM
        version and NIXL backends are ones the fault needs."""
        if version is None or not self.since <= version < self.until:
            return False
        if self.with_vllm is not None and (vllm is None or not self.with_vllm[0] <= vllm < self.with_vllm[1]):
            return False
        return not (self.ucx_only and any(b != "UCX" for b in backends))

    @property
    def versions(self) -> str:
        return f"{fmt(self.since)} <= v < {fmt(self.until)}"


KNOWN_BAD: tuple[KnownBad, ...] = (
    KnownBad(
        "nixl", (1, 3, 1), (1, 3, 2),
        "decode logs 'getXferTelemetry: cannot return values when telemetry is not enabled' and marks the "
        "transferred blocks invalid (transfer_exception): every request is recomputed or fails",
        "NIXL 1.3.1 nixl_agent.get_xfer_telemetry, called by vLLM's NIXL worker after each transfer",
        "ai-dynamo/dynamo#12952 (fixed in NIXL 1.3.2; vLLM 0.28.0 pins nixl == 1.3.2)",
        "error", "1.3.2", mixed_hardware=True,
    ),
    KnownBad(
        "nixl", (0, 0, 0), (0, 6, 0),
        "the engine does not start: \"TypeError: nixl_agent_config.__init__() got an unexpected keyword argument "
        "'num_threads'\"",
        "vLLM >= 0.11.0 NIXL worker builds nixl_agent_config(num_threads=...) when every backend is UCX "
        "(kv_connector_extra_config num_threads, vllm-nixl-facts.md section 2); NIXL added that argument between "
        "0.4.1 and 0.6.0 (ai-dynamo/nixl@9f77cc4)",
        "ray-project/ray#57201 (vLLM 0.11.0 release tests with NIXL 0.4.1; fixed by moving to NIXL 0.6.0)",
        "error", "0.6.0", with_vllm=((0, 11, 0), (99, 0, 0)), ucx_only=True,
    ),
    KnownBad(
        "nixl", (0, 10, 0), (0, 10, 1),
        "KV transfers fail between GPUs on different NUMA nodes of one host (B200): UCX picks rc_mlx5 instead of "
        "cuda_ipc for them and the agents disconnect (nixlRemoteDisconnectError)",
        "NIXL 0.10.0's UCX backend transport selection, under vLLM's NixlConnector (requirements/kv_connectors.txt "
        "pins nixl >= 0.7.1, < 0.10.0 in the 0.17.0-0.19.1 sdists for it, vllm#35495; 0.16.0 had no upper bound, "
        "0.20.0 allows <= 0.10.1)",
        "vllm-project/vllm#35799 (NIXL 0.10.0 on B200; open, no fixing release named), vllm-project/vllm#35495 "
        "(bounds NIXL below 0.10.0 after the agent disconnections); vLLM 0.20.0 next requires nixl <= 0.10.1, 0.21.0 "
        ">= 1.1.0",
        "warning", "0.10.1", ucx_only=True,
    ),
    KnownBad(
        "vllm", (0, 19, 0), (0, 20, 0),
        "the decode engine segfaults in the OffloadingConnector when it is stacked with NixlConnector in a "
        "MultiConnector",
        "vllm/v1/kv_offload/cpu/spec.py CPUOffloadingSpec sized the CPU blocks as page_size_bytes x "
        "len(kv_cache_tensors) x world_size, wrong for UniformTypeKVCacheSpecs (read in the 0.19.1 wheel); 0.20.0 "
        "divides the KV tensors' total bytes by num_blocks (vllm#39617)",
        "vllm-project/vllm#39500 (0.19.0; maintainer: vllm#39617 should solve it), fixed by vllm#39617, first in "
        "the 0.20.0 release (its wheel's cpu/spec.py)",
        "error", "0.20.0", with_connector="OffloadingConnector", uniform_type_only=True,
    ),
    KnownBad(
        "vllm", (0, 10, 0), (0, 11, 0),
        "the prefill engine dies with a KeyError under load: KV blocks it released after "
        "VLLM_NIXL_ABORT_REQUEST_TIMEOUT are then read by a decode (0.10.0), or such a request is aborted "
        "(0.10.1-0.10.2); it needs requests to wait past the timeout, so the pair starts and serves",
        "0.10.0 NixlConnectorWorker._get_new_notifs deletes self._reqs_to_send[req_id] for a request get_finished "
        "already expired (nixl_connector.py, read in the 0.10.0 wheel); 0.10.1.1 skips that notification but "
        "Scheduler._update_from_kv_xfer_finished still frees self.requests[req_id] of a request already freed "
        "(v1/core/sched/scheduler.py); 0.11.0 guards both (_reqs_to_process, 'request is already freed')",
        "llm-d/llm-d#187 (maintainers: vllm#21753, first in 0.10.1, fixed the KeyError; vllm#25067, first in "
        "0.11.0, the crash on aborted requests); vllm-project/vllm#25562 (0.10.2)",
        "warning", "0.11.0", pull_only=True,
    ),
    KnownBad(
        "vllm", HYBRID_NIXL_SINCE, CONSUMER_DEFERRED_FREE_SINCE,
        "a hybrid SSM (Mamba / GDN) model's decode loses accuracy under load with async scheduling: a step already "
        "in flight for a finished request rewrites that request's whole conv/SSM state block after the scheduler "
        "freed it and gave it to a new request, whose state NIXL had just written into it",
        "v1/core/sched/scheduler.py Scheduler._free_blocks returns a finished request's blocks to the pool at once "
        "(0.18.0-0.23.0: no deferral); 0.24.0 defers the free until the newest in-flight step is processed when "
        "max_concurrent_batches > 1 and the engine is a KV consumer (defer_block_free / deferred_frees, read in the "
        "0.24.0, 0.25.0, 0.25.1 and 0.26.0 sdists); vLLM turns async scheduling on by default (vllm/config/vllm.py)",
        "vllm-project/vllm#37285 (hybrid P/D accuracy needs --no-async-scheduling), #42182 (Qwen3.5 disagg GSM8K "
        "collapses with async scheduling), fixed by vllm-project/vllm#45357 (first in 0.24.0)",
        "warning", "0.24.0", hybrid_ssm_only=True, async_scheduling_only=True, consumer_only=True,
        workaround="--no-async-scheduling on the decode",
    ),
)

_PIP_NIXL = re.compile(r"\bnixl(?:-cu1[23])?(?:\[[a-z0-9,]+\])?\s*==\s*([0-9][0-9a-z.]*)", re.IGNORECASE)


def nixl_version(command_text: str, image: str, vllm: Version | None) -> tuple[Version | None, str]:
    """The NIXL version an engine loads and where that came from; ``(None, "")`` when unknown.

    Read, in order, from a ``pip install nixl==X`` in the command, this project's engine image, a wrapped image's
    table, a ROCm vLLM image's ``docker/Dockerfile.rocm`` build
    (:func:`~pdd_operator.vllm.rocm_nixl.rocm_image_nixl_version`, never the requirements pin), the XPU image's
    ``NIXL_VERSION``, else vLLM ``vllm``'s ``nixl ==`` pin in requirements/kv_connectors.txt (the CUDA images install
    it)."""
    match = _PIP_NIXL.search(command_text or "")
    if match:
        return parse_version(match.group(1)), f"pip install nixl=={match.group(1)} in the command"
    p = pins()
    if image.split("@", 1)[0].rsplit(":", 1)[0] == p["engineImage"]:
        return parse_version(p["nixl"]), f"this project's engine image pins NIXL {p['nixl']} (pins.json)"
    if (wrapped := wrapped_nixl_version(image)) is not None:
        return wrapped
    if is_rocm_vllm_image(image):
        # ROCm images build RIXL / NIXL from Dockerfile.rocm's own commit, not the requirements pin
        return rocm_image_nixl_version(image, vllm)
    if image_repository(image) == XPU_IMAGE_REPOSITORY:
        nixl = xpu_image_nixl(vllm)
        if nixl is None:
            return None, ""
        return nixl, f"vLLM {fmt(vllm)}'s XPU image builds NIXL {fmt(nixl)} (docker/Dockerfile.xpu NIXL_VERSION)"
    if vllm is not None:
        bounds = nixl_range(vllm)
        if bounds and bounds[0] == bounds[1]:
            return bounds[0], f"vLLM {fmt(vllm)} pins nixl == {fmt(bounds[0])} (requirements/kv_connectors.txt)"
    return None, ""


def uniform_type_model(traits: ModelTraits) -> bool:
    """The model's KV cache is grouped as ``UniformTypeKVCacheSpecs`` (:attr:`KnownBad.uniform_type_only`): a sparse
    MLA (DSA: DeepSeek-V3.2, GLM-5) model without sliding window, whose indexer caches are full-attention MLA specs of
    another page size than its MLA layers' (models/deepseek_v2.py 0.19.1 lines 584-605)."""
    return traits.architecture == Architecture.SPARSE_MLA and not traits.sliding_window


def known_bad(component: str, version: Version | None, vllm: Version | None = None,
              backends: tuple[str, ...] = ("UCX",)) -> list[KnownBad]:
    """The :data:`KNOWN_BAD` rows of ``component`` that cover ``version`` (for NIXL rows: under vLLM ``vllm``
    with NIXL ``backends``)."""
    return [k for k in KNOWN_BAD if k.component == component and k.covers(version, vllm, backends)]
