"""Decode context parallelism (``--decode-context-parallel-size``, DCP) on an engine that runs vLLM's NixlConnector:
what ``VllmConfig`` asserts at startup from 0.29.0 (vllm#50611, "[Nixl][PD] DCP support for MLA models": a NIXL side
is either fully replicated, DCP 1, or fully DCP-sharded, DCP equal to the transfer's TP, and only for MLA models), and
0.29.0's refusal of prefill context parallelism there."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair, RoleConfig
from pdd_operator.compat.rules.base import Violation, fix_for, rule
from pdd_operator.vllm.versions import fmt

#: ``VllmConfig.__post_init__`` asserts the NIXL DCP shape from 0.29.0 (absent from the 0.27.0 and 0.28.0 sdists).
NIXL_DCP_CHECKS_SINCE = (0, 29, 0)
#: 0.29.0 compares DCP with ``tensor_parallel_size`` (and asserts PCP 1 besides); from 0.30.0 with
#: ``max(tensor_parallel_size, prefill_context_parallel_size)``, "the NIXL transfer parallel size".
TRANSFER_SIZE_WITH_PCP_SINCE = (0, 30, 0)

_WHERE = ("vllm/config/vllm.py VllmConfig.__post_init__ when kv_transfer_config.has_connector('NixlConnector') "
          "(the name itself, top level or a MultiConnector child: not NixlPushConnector / NixlPullConnector), read "
          "in the 0.29.0, 0.30.0, 0.31.0, 0.33.0 and 0.34.0 sdists")


def _dcp_engines(pair: PDPair) -> list[RoleConfig]:
    """The roles whose engine runs ``NixlConnector`` (so ``has_connector('NixlConnector')`` holds) with a literal
    ``--decode-context-parallel-size`` above 1."""
    return [r for r in pair.roles if r.connector == "NixlConnector" and r.dcp is not None and r.dcp > 1]


def transfer_size(pair: PDPair, r: RoleConfig) -> int | None:
    """The DCP size ``r``'s engine accepts besides 1: ``tensor_parallel_size`` in 0.29.0, from 0.30.0 the larger of
    it and ``prefill_context_parallel_size``; ``None`` when a size is not a literal integer."""
    if r.tp is None:
        return None
    if not pair.at_least(TRANSFER_SIZE_WITH_PCP_SINCE):
        return r.tp
    return None if r.pcp is None else max(r.tp, r.pcp)


@rule(
    id="nixl-dcp-partial", family="context-parallel", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs", "spec.prefill.tensorParallelSize",
            "spec.decode.tensorParallelSize"),
    source=(f"{_WHERE}: assert dcp_size in (1, transfer size), 'decode_context_parallel_size=D must be 1 or equal to "
            "the NIXL transfer parallel size=T.' (0.30.0+: T = max(tp, pcp); 0.29.0: T = tp, '... equal to "
            "tensor_parallel_size=T when using NixlConnector.')"),
    since=NIXL_DCP_CHECKS_SINCE,
    needs=("--decode-context-parallel-size", "--tensor-parallel-size", "--prefill-context-parallel-size"),
    without_connector=True,
)
def check_nixl_dcp_partial(pair: PDPair) -> list[Violation]:
    """A NixlConnector engine's decode context parallel size is 1 or its whole TP group (no partial DCP)."""
    out: list[Violation] = []
    for r in _dcp_engines(pair):
        size = transfer_size(pair, r)
        if size is None or r.dcp == size:
            continue
        out.append((
            f"{r.role}: --decode-context-parallel-size {r.dcp} at tensor parallel size {r.tp}: vLLM "
            f"{fmt(pair.version)} runs NixlConnector with DCP 1 or DCP equal to the NIXL transfer parallel size "
            f"({size}) only, and VllmConfig asserts it at startup ('decode_context_parallel_size={r.dcp} must be 1 "
            f"or equal to the NIXL transfer parallel size={size}'): the engine does not start.",
            fix_for(pair, f"In spec.{r.role}.extraArgs set --decode-context-parallel-size to 1 or {size}.",
                    f"Set the {r.role} engine's --decode-context-parallel-size to 1 or {size}."),
        ))
    return out


@rule(
    id="nixl-dcp-non-mla", family="context-parallel", severity="error",
    fields=("spec.model", "spec.prefill.extraArgs", "spec.decode.extraArgs"),
    source=(f"{_WHERE}: assert model_config.use_mla or dcp_size == 1, 'PD with decode_context_parallel_size > 1 is "
            "only supported for MLA models.'"),
    since=NIXL_DCP_CHECKS_SINCE,
    needs=("--model", "--decode-context-parallel-size"),
    without_connector=True,
)
def check_nixl_dcp_non_mla(pair: PDPair) -> list[Violation]:
    """Decode context parallelism on a NixlConnector engine serves an MLA model."""
    engines = _dcp_engines(pair)
    if not engines or pair.mla:
        return []
    architecture = pair.model.architecture
    out: list[Violation] = []
    for r in engines:
        fix = fix_for(pair, f"Remove --decode-context-parallel-size from spec.{r.role}.extraArgs.",
                      f"Drop --decode-context-parallel-size from the {r.role} engine (or serve an MLA model).")
        if architecture is None:
            out.append((
                f"{r.role}: --decode-context-parallel-size {r.dcp} with NixlConnector: vLLM {fmt(pair.version)} "
                "allows it for MLA models only (VllmConfig asserts use_mla at startup), and this model's "
                "architecture is not known here, so whether the engine starts was not established.", fix, "warning"))
            continue
        out.append((
            f"{r.role}: --decode-context-parallel-size {r.dcp} with NixlConnector on a {architecture} model: vLLM "
            f"{fmt(pair.version)} supports NIXL P/D with DCP for MLA models only and asserts it at startup ('PD with "
            "decode_context_parallel_size > 1 is only supported for MLA models'): the engine does not start.", fix))
    return out


#: 0.29.0 alone asserts ``prefill_context_parallel_size == 1`` for a NixlConnector engine ("NIXL does not support
#: prefill context parallelism.", VllmConfig.__post_init__, 0.29.0 sdist); 0.30.0 replaced it with the transfer size.
NIXL_PCP_REFUSED_UNTIL = (0, 30, 0)


@rule(
    id="nixl-pcp-refused", family="context-parallel", severity="error",
    fields=("spec.prefill.extraArgs", "spec.decode.extraArgs"),
    source=(f"{_WHERE}: 0.29.0 asserts prefill_context_parallel_size == 1, 'NIXL does not support prefill context "
            "parallelism.' (gone from the 0.30.0 sdist, which counts PCP in the transfer size)"),
    since=NIXL_DCP_CHECKS_SINCE, until=NIXL_PCP_REFUSED_UNTIL,
    needs=("--prefill-context-parallel-size",),
    without_connector=True,
)
def check_nixl_pcp_refused(pair: PDPair) -> list[Violation]:
    """A NixlConnector engine of vLLM 0.29.0 runs without prefill context parallelism."""
    return [(
        f"{r.role}: --prefill-context-parallel-size {r.pcp} with NixlConnector on vLLM {fmt(pair.version)}: "
        "VllmConfig asserts prefill context parallelism 1 for NIXL in this release ('NIXL does not support prefill "
        "context parallelism.'), so the engine does not start (0.30.0 accepts it on a producer).",
        fix_for(pair, f"Remove --prefill-context-parallel-size from spec.{r.role}.extraArgs (or use vLLM >= 0.30).",
                f"Drop --prefill-context-parallel-size from the {r.role} engine, or use vLLM >= 0.30."),
    ) for r in pair.roles if r.connector == "NixlConnector" and r.pcp is not None and r.pcp > 1]
