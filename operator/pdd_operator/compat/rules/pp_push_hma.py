"""Attention-HMA pipeline-parallel push: what the layer-name routed PP prefill accepts from its decode."""

from __future__ import annotations

from pdd_operator.compat.pair import PDPair
from pdd_operator.compat.rules.base import Violation, rule
from pdd_operator.vllm.versions import fmt

#: The first release whose push prefill runs PP > 1 with the hybrid KV cache manager (vllm#50494): from there
#: ``pp-push-hma-version`` no longer refuses the pair at startup and this handshake guard is what holds.
PP_PUSH_HMA_SINCE = (0, 31, 0)


@rule(
    id="push-hma-tp-expansion", family="pipeline-parallel-unsupported", severity="error",
    fields=("spec.prefill.pipelineParallelSize", "spec.prefill.tensorParallelSize",
            "spec.decode.tensorParallelSize", "spec.kvTransfer.connector"),
    source=("vllm nixl/base_worker.py add_remote_agent: 'Attention-HMA push does not support decode TP greater than "
            "prefill TP yet' where the worker routes layers by name (push, pp_size > 1, HMA or a packed cache) and the "
            "model is not MLA (0.31.0 lines 2262-2274, 0.32.0, 0.33.0, 0.34.0 lines 2526-2538; vllm#50494, #50499)"),
    since=PP_PUSH_HMA_SINCE,
    example="prefill: {pipelineParallelSize: 2, tensorParallelSize: 1}, decode: {tensorParallelSize: 2}, "
            "NixlPushConnector, a sliding-window model",
    needs=("--disable-hybrid-kv-cache-manager",),
)
def check_push_hma_tp_expansion(pair: PDPair) -> list[Violation]:
    """A PP push prefill of a hybrid-attention model has a decode TP no larger than its own.

    ``(prefill PP, prefill TP, decode TP)``: each prefill stage of a PP > 1 NixlPushConnector engine whose layers
    need the hybrid KV cache manager (sliding-window / chunked attention with HMA on) matches the decode's regions by
    layer name, and its handshake with a decode whose TP is above the prefill's raises NotImplementedError; every
    request fails. MLA models (replicated latent cache) and hybrid SSM models (refused at startup by
    ``pp-hybrid-ssm``) are out of its scope.
    """
    if (pair.prefill.pp or 1) == 1 or not pair.push or not pair.hma_required or pair.mla or pair.hybrid_ssm:
        return []
    if pair.tps is None or pair.tps[1] <= pair.tps[0]:
        return []
    p, d = pair.tps
    return [(
        f"NixlPushConnector with prefill pipeline parallel size {pair.prefill.pp} on a hybrid-attention model (HMA): "
        f"vLLM {fmt(pair.version)}'s prefill stages route KV by layer name and refuse a decode TP ({d}) greater than "
        f"the prefill TP ({p}) at the handshake ('Attention-HMA push does not support decode TP greater than prefill "
        "TP yet'); every request fails.",
        "Give the decode a tensor parallel size no larger than the prefill's (e.g. prefill PP 2 x TP 2 with decode "
        "TP 2), or run the prefill without pipeline parallelism.",
    )]
