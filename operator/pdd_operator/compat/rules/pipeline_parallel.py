"""Pipeline parallelism across the NIXL transfer (prefill PP only, push connector, versions)."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, rule
from pdd_operator.vllm.transfer_mode import PUSH_PIPELINE_PARALLEL_SINCE
from pdd_operator.vllm.versions import fmt, fmt_line


@rule(
    id="pp-decode-unsupported", family="pipeline-parallel-unsupported", severity="error",
    fields=("spec.decode.pipelineParallelSize",),
    source=("vllm nixl base_worker NixlConnectorWorker.__init__: kv_role kv_consumer with pipeline_parallel_size "
            "> 1 raises NotImplementedError('NixlPushConnector consumer (decode) does not support ...') (nixl/"
            "base_worker.py 0.26.0 l.436, 0.28.0 l.451, 0.30.0 l.648, 0.31.0 l.803, 0.32.0 l.777, 0.34.0 l.960); docs/"
            "features/nixl_connector_compatibility.md 'Pipeline parallelism' (l.107, 0.31.0-0.34.0); secondary: seed "
            "000 section 5"),
)
def check_pp_decode(pair: PDPair) -> list[Violation]:
    """Only prefill may be pipeline-parallel."""
    if (pair.decode.pp or 1) == 1:
        return []
    return [(f"Decode pipeline parallel size {pair.decode.pp}: only the prefill side may be pipeline-split.",
             "Set decode pipelineParallelSize to 1 (use tensor parallel on decode).")]


@rule(
    id="pp-pull-unsupported", family="pipeline-parallel-unsupported", severity="error",
    fields=("spec.prefill.pipelineParallelSize", "spec.kvTransfer.connector"),
    source=("vllm nixl base_worker (pull PP+HMA refused from 0.31: 'NixlConnector (pull) does not support "
            "pipeline_parallel_size > 1 with hybrid KV cache layouts', base_worker.py 0.31.0 l.789, 0.32.0 l.763, "
            "0.34.0 l.947; PP handshake metadata). A "
            "non-hybrid PP prefill starts (0.32.0 base_worker __init__ refuses only HMA, Mamba and a PP consumer), "
            "but each PP rank registers its own layer slice, and the decode's handshake asserts "
            "len(remote kv_caches_base_addr) == its own region count (_validate_remote_agent_handshake, 0.26.0, "
            "0.28.0, 0.30.0, 0.32.0, 0.33.0), so "
            "every request fails at the first handshake; the pull read path addresses pp_rank 0 only. docs/features/"
            "nixl_connector_compatibility.md 'Pipeline parallelism' (l.107, 0.31.0-0.34.0); secondary: seed 000 "
            "section 5"),
    example="prefill: {pipelineParallelSize: 2} with NixlConnector",
    needs=("--disable-hybrid-kv-cache-manager",),
)
def check_pp_pull(pair: PDPair) -> list[Violation]:
    """Prefill PP > 1 only with the push connector."""
    if (pair.prefill.pp or 1) == 1 or pair.push:
        return []
    why = ("the model needs the hybrid KV cache manager, which pull refuses with PP" if pair.hma_required
           else "the pull connector does not support PP-disaggregated transfer (the prefill starts, and the "
                "decode's NIXL handshake asserts that the prefill stage registered all the model's layers)")
    return [(
        f"Prefill pipeline parallel size {pair.prefill.pp} with the pull NixlConnector: {why}.",
        "Use prefill pipelineParallelSize 1, or NixlPushConnector (push with pipeline parallel needs vLLM >= "
        f"{fmt_line(PUSH_PIPELINE_PARALLEL_SINCE)}; non-hybrid models).",
    )]


@rule(
    id="pp-unsupported-version", family="pipeline-parallel-unsupported", severity="error",
    fields=("spec.prefill.pipelineParallelSize", "spec.engine"),
    source="vllm-nixl-facts.md section 4.4 (none before 0.26.0: no pp_size in kv_connector/v1/nixl/ of the 0.24.0 and "
           "0.25.0 sdists)",
    until=PUSH_PIPELINE_PARALLEL_SINCE,
)
def check_pp_version(pair: PDPair) -> list[Violation]:
    """Prefill PP > 1 needs vLLM's NIXL PP handling."""
    if (pair.prefill.pp or 1) == 1:
        return []
    return [(f"vLLM {fmt(pair.version)} has no pipeline-parallel handling in the NIXL connector (first in "
             f"{fmt(PUSH_PIPELINE_PARALLEL_SINCE)}).",
             f"Use pipelineParallelSize 1, or vLLM >= {fmt_line(PUSH_PIPELINE_PARALLEL_SINCE)} with NixlPushConnector.")]


@rule(
    id="pp-push-hma-version", family="pipeline-parallel-unsupported", severity="error",
    fields=("spec.prefill.pipelineParallelSize", "spec.kvTransfer.connector", "spec.engine"),
    source="vllm nixl base_worker.__init__ (0.26.0-0.30.x)",
    since=PUSH_PIPELINE_PARALLEL_SINCE, until=(0, 31, 0),
    needs=("--disable-hybrid-kv-cache-manager",),
)
def check_pp_push_hma_version(pair: PDPair) -> list[Violation]:
    """Push with PP > 1 and HMA needs vLLM >= 0.31."""
    if (pair.prefill.pp or 1) == 1 or not pair.push or not pair.hma_required:
        return []
    return [(f"NixlPushConnector in vLLM {fmt(pair.version)} does not support pipeline_parallel_size > 1 with "
             "hybrid KV cache layouts (startup error; allowed from 0.31.0).",
             "Use prefill pipelineParallelSize 1, or vLLM >= 0.31.")]


@rule(
    id="pp-hybrid-ssm", family="pipeline-parallel-unsupported", severity="error",
    fields=("spec.prefill.pipelineParallelSize", "spec.model.architecture"),
    source=("vllm nixl base_worker NixlConnectorWorker.__init__: 'NixlPushConnector does not support "
            "pipeline_parallel_size > 1 with Mamba/SSM hybrid KV cache layouts yet' (NotImplementedError; nixl/"
            "base_worker.py 0.31.0 l.797, 0.32.0 l.771, 0.33.0 l.882, 0.34.0 l.954); docs/features/"
            "nixl_connector_compatibility.md 'Pipeline parallelism' (l.107-124, 0.31.0-0.34.0); secondary: seed 000 "
            "section 5"),
)
def check_pp_hybrid_ssm(pair: PDPair) -> list[Violation]:
    """No prefill PP > 1 with push for hybrid SSM models."""
    if (pair.prefill.pp or 1) == 1 or not pair.hybrid_ssm or not pair.push:
        return []
    return [("NixlPushConnector does not support pipeline_parallel_size > 1 with Mamba/SSM hybrid KV cache "
             "layouts (startup error).", "Use prefill pipelineParallelSize 1 for hybrid SSM models.")]
